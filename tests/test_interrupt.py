"""Ctrl-C and SIGTERM save at the step's end; the run resumes exactly
(training/distributed.py's StopRequest)."""

import signal

import pytest

from conftest import shakespeare, tiny_overrides
from model.checkpoint import load_checkpoint
from training import load_config, train
from training.loop import Trainer

RESUME = {"model.dropout": 0.1, "train.lr_decay_iters": 10, "train.warmup_iters": 3}


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    """An uninterrupted 10-step run to compare resumed runs against."""
    tmp = tmp_path_factory.mktemp("full")
    return train(
        load_config(None, tiny_overrides(tmp, shakespeare(), **RESUME, **{"train.max_iters": 10}))
    )


class SignalAt:
    """Wraps a batch sampler's next_batch so that micro-step ``at`` raises a real signal."""

    def __init__(self, next_batch, at: int, sig):
        self.next_batch, self.at, self.sig, self.calls = next_batch, at, sig, 0

    def __call__(self):
        self.calls += 1
        if self.calls == self.at:
            signal.raise_signal(self.sig)
        return self.next_batch()


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_run_resumes_exactly(full_run, tmp_path, shakespeare_path, sig, capsys):
    cfg = load_config(
        None, tiny_overrides(tmp_path, shakespeare_path, **RESUME, **{"train.max_iters": 10})
    )
    trainer = Trainer(cfg)
    trainer.sampler.next_batch = SignalAt(trainer.sampler.next_batch, at=4, sig=sig)
    first = trainer.run()
    assert first.interrupted and first.iter_num == 4  # the step in progress completes
    assert "Resume with the same command plus train.resume=true" in capsys.readouterr().out
    assert load_checkpoint(tmp_path / "run" / "ckpt.pt")["iter_num"] == 4
    resumed_cfg = tiny_overrides(
        tmp_path, shakespeare_path, **RESUME, **{"train.max_iters": 10, "train.resume": True}
    )
    second = train(load_config(None, resumed_cfg))
    assert {**first.losses, **second.losses} == full_run.losses  # bitwise equal


def test_second_ctrl_c_during_the_save_does_not_lose_it(tmp_path, shakespeare_path, monkeypatch):
    import training.loop

    real_save = training.loop.save_checkpoint

    def save_while_interrupted(payload, path):
        signal.raise_signal(signal.SIGINT)  # the impatient second Ctrl-C
        real_save(payload, path)

    cfg = load_config(None, tiny_overrides(tmp_path, shakespeare_path, **{"train.max_iters": 10}))
    trainer = Trainer(cfg)
    trainer.sampler.next_batch = SignalAt(trainer.sampler.next_batch, at=2, sig=signal.SIGINT)
    monkeypatch.setattr(training.loop, "save_checkpoint", save_while_interrupted)
    result = trainer.run()
    assert result.interrupted and result.iter_num == 2
    assert load_checkpoint(tmp_path / "run" / "ckpt.pt")["iter_num"] == 2
