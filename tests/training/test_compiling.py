"""Same seed, same run, with and without torch.compile: two runs give the same loss
at every step, and a run stopped halfway and resumed gives those of an uninterrupted
one (dropout on, Muon and AdamW, an evaluation in between).

The compiled cases run on two threads, where Inductor's atomic adds into the token
embedding's gradient made the order of summation, and so the losses, vary from run
to run (see `training.loop`). torch's deterministic algorithms, which prevent that,
are on while a compiled CPU run trains and as they were before once it returns."""

import pytest
import torch

from tests.conftest import INDUCTOR, NEEDS_COMPILER, ROOT, shakespeare, tiny_overrides
from training import load_config, train
from training.loop import Trainer

pytestmark = [pytest.mark.slow, NEEDS_COMPILER, INDUCTOR]  # torch.compile

STEPS = 6
# Eager AdamW is also covered by test_train_e2e's resume test.
CASES = [
    pytest.param((False, "muon"), id="eager-muon"),
    pytest.param((True, "muon"), id="compiled-muon"),
    pytest.param((True, "adamw"), id="compiled-adamw"),
]


@pytest.fixture(scope="module", autouse=True)
def two_threads_then_restore():
    """Two threads (one cannot race); afterwards, as many as before."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(threads)
    torch._dynamo.reset()


def run(folder, compiled, optimizer, **extra):
    """Train the CPU recipe's architecture, tiny, with dropout; returns its TrainResult."""
    return train(run_config(folder, compiled, optimizer, **extra))


def run_config(folder, compiled, optimizer, **extra):
    """The configuration `run` trains."""
    overrides = tiny_overrides(
        folder,
        shakespeare(),
        **{
            "device": "cpu",  # what is made reproducible (CUDA kernels are not)
            "data.val_fraction": 0.01,  # a short evaluation
            "model.dropout": 0.1,
            # AdamW at the recipe's 5e-3 rounds a one-ulp change of a gradient away.
            "train.learning_rate": 0.03,
            "train.compile": compiled,
            "train.optimizer": optimizer,
            "train.max_iters": STEPS,
            "train.lr_decay_iters": STEPS,
            "train.sample_tokens": 0,
            "train.attention_prompt": "",
            **extra,
        },
    )
    return load_config(ROOT / "configs/shakespeare_char_cpu.yaml", overrides)


def eval_losses(result):
    """(iteration, train loss, validation loss) of each evaluation (not its time)."""
    return [(e["iter"], e["train_loss"], e["val_loss"]) for e in result.evals]


@pytest.fixture(scope="module", params=CASES)
def uninterrupted(request, tmp_path_factory):
    """One uninterrupted run per case, shared by the two tests below."""
    compiled, optimizer = request.param
    result = run(tmp_path_factory.mktemp("uninterrupted"), compiled, optimizer)
    return result, compiled, optimizer


def test_two_runs_with_one_seed_are_identical(uninterrupted, tmp_path, capsys):
    first, compiled, optimizer = uninterrupted
    second = run(tmp_path, compiled, optimizer)
    # The slow first compiled step is announced before it starts.
    assert ("compiling the model (torch.compile)" in capsys.readouterr().out) == compiled
    assert sorted(first.losses) == list(range(1, STEPS + 1))
    assert second.losses == first.losses  # bitwise, at every step
    assert eval_losses(second) == eval_losses(first)


def test_resumed_run_is_identical_to_uninterrupted(uninterrupted, tmp_path):
    full, compiled, optimizer = uninterrupted
    half = STEPS // 2
    first = run(tmp_path, compiled, optimizer, **{"train.max_iters": half})
    second = run(tmp_path, compiled, optimizer, **{"train.resume": True})
    assert sorted(second.losses) == list(range(half + 1, STEPS + 1))
    assert {**first.losses, **second.losses} == full.losses  # bitwise, at every step
    assert eval_losses(first) + eval_losses(second) == eval_losses(full)


@pytest.mark.parametrize(
    "before", [(False, False), (True, False)], ids=["off-before", "strict-before"]
)
def test_deterministic_algorithms_are_on_while_training_and_restored(before, tmp_path, monkeypatch):
    """A compiled CPU run trains and evaluates with deterministic algorithms on
    (warn_only), and leaves them as they were: off, or on and strict, as a caller set."""
    seen = []
    real_step, real_evaluate = Trainer.train_step, Trainer.evaluate_and_save

    def watched(real):
        def call(self, *args):
            seen.append(
                (
                    torch.are_deterministic_algorithms_enabled(),
                    torch.is_deterministic_algorithms_warn_only_enabled(),
                )
            )
            return real(self, *args)

        return call

    monkeypatch.setattr(Trainer, "train_step", watched(real_step))
    monkeypatch.setattr(Trainer, "evaluate_and_save", watched(real_evaluate))
    torch.use_deterministic_algorithms(before[0], warn_only=before[1])
    try:
        run(tmp_path, True, "adamw", **{"train.max_iters": 2, "train.eval_interval": 2})
        after = (
            torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled(),
        )
    finally:
        torch.use_deterministic_algorithms(False)
    assert seen == [(True, True)] * 3  # two steps and an evaluation
    assert after == before


def test_the_trainer_puts_deterministic_algorithms_back_when_it_closes(tmp_path):
    """Closing restores the setting itself: a trainer still referenced after its run
    (whose setting garbage collection would otherwise put back) leaves it off."""
    # The run of the test above: its compiled graphs come from the session's cache.
    steps = {"train.max_iters": 2, "train.eval_interval": 2}
    trainer = Trainer(run_config(tmp_path, True, "adamw", **steps))
    assert torch.are_deterministic_algorithms_enabled()
    trainer.run()
    assert not torch.are_deterministic_algorithms_enabled()
    assert trainer.result.iter_num == 2
