"""Bad input and interruption: exact resume, safe checkpoints, clear errors."""

import io
import signal
import subprocess
import sys
import unicodedata
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import ROOT, shakespeare, tiny_overrides
from data import CorpusError, prepare_corpus
from data.decoding import normalize_newlines
from model import GPT, GPTConfig
from training import CheckpointError, ConfigError, load_checkpoint, load_config, train
from training.checkpoint import CHECKPOINT_FORMAT, model_from_checkpoint, save_checkpoint
from training.evaluate import summed_loss
from training.loop import NonFiniteLossError, Trainer

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


def test_failed_write_keeps_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    save_checkpoint({"iter_num": 1, "w": torch.ones(3)}, path)
    real_save = torch.save

    def save_half_then_fail(obj, f, *args, **kwargs):
        real_save(obj, f, *args, **kwargs)
        f.truncate(f.tell() // 2)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", save_half_then_fail)
    with pytest.raises(OSError, match="No space left"):
        save_checkpoint({"iter_num": 2, "w": torch.zeros(3)}, path)
    monkeypatch.undo()
    ckpt = load_checkpoint(path)
    assert ckpt["iter_num"] == 1 and torch.equal(ckpt["w"], torch.ones(3))
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]  # no temporary file left


def test_corrupt_checkpoints_name_the_file(tmp_path):
    good = tmp_path / "good.pt"
    save_checkpoint({"iter_num": 1, "w": torch.randn(1000)}, good)
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(good.read_bytes()[:1000])
    text = tmp_path / "text.pt"
    text.write_text("not a checkpoint", encoding="utf-8")
    for path in (truncated, text):
        with pytest.raises(CheckpointError, match=str(path)):
            load_checkpoint(path)
    future = tmp_path / "future.pt"
    torch.save({"format_version": CHECKPOINT_FORMAT + 1}, future)
    with pytest.raises(CheckpointError, match=f"format {CHECKPOINT_FORMAT + 1}"):
        load_checkpoint(future)
    with pytest.raises(CheckpointError, match="no checkpoint"):
        load_checkpoint(tmp_path / "missing.pt")


def _weights_payload(model: GPT, vocab: list[str]) -> dict:
    return {"model": model.state_dict(), "model_config": vars(model.config), "vocab": vocab}


def test_compiled_prefix_and_vocabulary_checks(tmp_path):
    vocab = list("abcdefgh")
    model = GPT(GPTConfig(vocab_size=8, block_size=8, n_layer=1, n_head=1, n_embd=8))
    payload = _weights_payload(model, vocab)
    payload["model"] = {f"_orig_mod.{k}": v for k, v in payload["model"].items()}
    save_checkpoint(payload, tmp_path / "compiled.pt")
    loaded, tokenizer = model_from_checkpoint(load_checkpoint(tmp_path / "compiled.pt"))
    assert tokenizer.chars == vocab
    torch.testing.assert_close(loaded.token_embedding.weight, model.token_embedding.weight)

    wrong = _weights_payload(model, vocab[:7])  # one character short of the embedding
    save_checkpoint(wrong, tmp_path / "wrong.pt")
    with pytest.raises(CheckpointError, match="vocabulary has 7 characters"):
        model_from_checkpoint(load_checkpoint(tmp_path / "wrong.pt"), tmp_path / "wrong.pt")


def test_resume_refuses_a_different_model_or_corpus(tmp_path, shakespeare_path):
    train(load_config(None, tiny_overrides(tmp_path, shakespeare_path, **{"train.max_iters": 2})))
    bigger = tiny_overrides(
        tmp_path, shakespeare_path, **{"train.resume": True, "model.block_size": 64}
    )
    with pytest.raises(ConfigError, match="model.block_size is 64 but the checkpoint has 32"):
        train(load_config(None, bigger))
    other = tmp_path / "other.txt"
    other.write_text("xyz " * 500, encoding="utf-8")
    with pytest.raises(ConfigError, match="vocabulary"):
        train(load_config(None, tiny_overrides(tmp_path, other, **{"train.resume": True})))
    with pytest.raises(ConfigError, match="no checkpoint"):
        train(load_config(None, tiny_overrides(tmp_path / "new", other, **{"train.resume": True})))


@pytest.mark.parametrize(
    "text, block_size, expected",
    [
        ("hello\nworld\n", 16, "training and validation splits .* train has 10 .* validation 2"),
        ("abcdefghij" * 20, 64, "validation split is too short .*validation 20.*= 65"),
    ],
)
def test_corpus_too_short_fails_before_any_model(tmp_path, monkeypatch, text, block_size, expected):
    path = tmp_path / "short.txt"
    path.write_text(text, encoding="utf-8")
    monkeypatch.setattr("training.loop.GPT", None)  # building a model would crash
    cfg = load_config(None, tiny_overrides(tmp_path, path, **{"model.block_size": block_size}))
    with pytest.raises(CorpusError, match=expected):
        train(cfg)


def test_split_of_exactly_block_size_plus_one_is_valid(tmp_path):
    path = tmp_path / "exact.txt"
    path.write_text(("abcdefghijk" * 30), encoding="utf-8")  # 330 chars: val is 33
    cfg = load_config(
        None, tiny_overrides(tmp_path, path, **{"model.block_size": 32, "data.val_fraction": 0.1})
    )
    assert len(prepare_corpus(path, 0.1, tmp_path / "c").val_ids) == 33
    result = train(cfg)
    assert len(result.evals) == 2 and np.isfinite(result.best_val_loss)


def test_eval_interval_longer_than_the_run_still_evaluates(tmp_path, shakespeare_path):
    cfg = load_config(
        None, tiny_overrides(tmp_path, shakespeare_path, **{"train.eval_interval": 1000})
    )
    result = train(cfg)
    assert [e["iter"] for e in result.evals] == [6]
    assert load_checkpoint(tmp_path / "run" / "ckpt.pt")["iter_num"] == 6


def test_cpu_run_never_queries_cuda(tmp_path, shakespeare_path, monkeypatch):
    """The project's code asks nothing of CUDA on a device=cpu run. PyTorch's own code
    may (torch 2.11's Adam.step calls torch.cuda.is_available()): it gets the answer."""

    def project_must_not_call(name):
        real = getattr(torch.cuda, name)

        def guarded(*args, **kwargs):
            caller = sys._getframe(1).f_code.co_filename
            if Path(caller).resolve().is_relative_to(Path(torch.__file__).parent):
                return real(*args, **kwargs)
            raise AssertionError(f"torch.cuda.{name} was called from {caller} on a device=cpu run")

        monkeypatch.setattr(torch.cuda, name, guarded)

    for name in ("is_available", "is_bf16_supported", "get_rng_state_all"):
        project_must_not_call(name)
    result = train(load_config(None, tiny_overrides(tmp_path, shakespeare_path, device="cpu")))
    assert result.iter_num == 6


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
def test_device_cuda_without_cuda_is_one_clear_line(tmp_path, shakespeare_path):
    cfg = load_config(None, tiny_overrides(tmp_path, shakespeare_path, device="cuda"))
    with pytest.raises(ConfigError, match="device cuda is not available here; use cpu or auto"):
        train(cfg)


def nan_at_training_call(model: GPT, at: int) -> None:
    """Make the ``at``-th training-mode forward pass produce NaN logits."""
    calls = {"n": 0}

    def hook(module, inputs, output):
        if module.training:
            calls["n"] += 1
            if calls["n"] == at:
                return output * float("nan")
        return output

    model.lm_head.register_forward_hook(hook)


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path, shakespeare_path):
    cfg = load_config(
        None,
        tiny_overrides(
            tmp_path, shakespeare_path, **{"train.max_iters": 10, "train.log_interval": 5}
        ),
    )
    trainer = Trainer(cfg)
    nan_at_training_call(trainer.model, at=5)
    with pytest.raises(NonFiniteLossError, match="iteration 5"):
        trainer.run()
    ckpt = load_checkpoint(tmp_path / "run" / "ckpt.pt")
    assert ckpt["iter_num"] == 3  # the evaluation before the NaN
    assert all(torch.isfinite(t).all() for t in ckpt["model"].values())


def test_dropout_is_off_during_evaluation():
    torch.manual_seed(0)
    model = GPT(
        GPTConfig(vocab_size=20, block_size=16, n_layer=2, n_head=2, n_embd=32, dropout=0.5)
    )
    model.train()
    x = torch.randint(0, 20, (4, 16))
    y = torch.randint(0, 20, (4, 16))
    total, count = summed_loss(model, x, y, 2, torch.device("cpu"))
    a = total.item() / count  # mean loss, nats per character
    b = summed_loss(model, x, y, 4, torch.device("cpu"))[0].item() / count
    assert a == pytest.approx(b, abs=1e-6)
    assert model.training  # the previous mode is restored
    with torch.no_grad():
        assert model(x, y)[1].item() != pytest.approx(a, abs=1e-4)  # dropout is active in training


def test_no_default_encoding_anywhere(tmp_path, shakespeare_path):
    """Training and sampling run clean under -X warn_default_encoding -W error."""
    flags = [sys.executable, "-X", "warn_default_encoding", "-W", "error::EncodingWarning"]
    # matplotlib's font cache writer (third-party code, run once per font set) is exempt.
    flags += ["-W", "ignore::EncodingWarning:matplotlib.font_manager"]
    overrides = [
        str(o) for o in tiny_overrides(tmp_path, shakespeare_path, **{"train.max_iters": 2})
    ]
    r = subprocess.run(
        flags + ["train.py"] + overrides, cwd=ROOT, capture_output=True, text=True, encoding="utf-8"
    )
    assert r.returncode == 0, r.stderr
    r = subprocess.run(
        flags
        + [
            "sample.py",
            "--out-dir",
            str(tmp_path / "run"),
            "--max-new-tokens",
            "5",
            "--device",
            "cpu",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        encoding="utf-8",
    )
    assert r.returncode == 0, r.stderr


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(max_size=300), val_fraction=st.sampled_from([0.1, 0.5]))
def test_any_unicode_corpus_round_trips_or_fails_cleanly(tmp_path, text, val_fraction):
    path = tmp_path / "random.txt"
    path.write_bytes(text.encode("utf-8"))
    expected = unicodedata.normalize("NFC", normalize_newlines(text.removeprefix("\ufeff")))
    try:
        corpus = prepare_corpus(path, val_fraction, tmp_path / "cache")
    except CorpusError:
        assert expected == ""
        return
    tok = corpus.tokenizer
    rebuilt = tok.decode(corpus.train_ids) + tok.decode(corpus.val_ids)
    assert rebuilt == expected
    for block_size in (1, 8):
        try:
            corpus.check_fits(block_size)
        except CorpusError as e:
            assert "block_size" in str(e)


def test_overwrite_replaces_the_whole_earlier_run(tmp_path, shakespeare_path):
    train(load_config(None, tiny_overrides(tmp_path, shakespeare_path, **{"train.max_iters": 3})))
    out = tmp_path / "run"
    assert len(list(out.glob("events.out.tfevents*"))) == 1
    with pytest.raises(ConfigError, match="already holds a checkpoint"):
        train(load_config(None, tiny_overrides(tmp_path, shakespeare_path)))
    train(
        load_config(None, tiny_overrides(tmp_path, shakespeare_path, **{"train.overwrite": True}))
    )
    assert len(list(out.glob("events.out.tfevents*"))) == 1  # no mixing of two runs' curves
    assert load_checkpoint(out / "ckpt.pt")["iter_num"] == 6


def test_folder_of_an_unfinished_run_is_not_reused(tmp_path, shakespeare_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.yaml").write_text("seed: 1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="files of an earlier run .*train.overwrite=true"):
        train(load_config(None, tiny_overrides(tmp_path, shakespeare_path)))


def test_a_start_that_fails_on_bad_input_leaves_nothing(tmp_path):
    nested = tmp_path / "runs" / "new" / "run"
    bad = [f"out_dir={nested}", "device=cpu", f"data.path={tmp_path / 'missing.txt'}"]
    with pytest.raises(CorpusError, match="no such file"):
        train(load_config(None, bad))
    assert not (tmp_path / "runs").exists()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("kept", encoding="utf-8")
    folder = tmp_path / "corpus_folder"  # a folder is a corpus of its files: none here
    folder.mkdir()
    bad = [f"out_dir={mine}", "device=cpu", f"data.path={folder}"]
    with pytest.raises(CorpusError, match="holds no files"):
        train(load_config(None, bad))
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]  # no .lock left


def test_two_runs_cannot_share_a_folder(tmp_path, shakespeare_path):
    fcntl = pytest.importorskip("fcntl")
    out = tmp_path / "run"
    out.mkdir()
    with open(out / ".lock", "a", encoding="utf-8") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running trainer would
        with pytest.raises(ConfigError, match="another training run is writing"):
            train(load_config(None, tiny_overrides(tmp_path, shakespeare_path)))
    assert train(load_config(None, tiny_overrides(tmp_path, shakespeare_path))).iter_num == 6


def test_resume_checks_and_reports_changed_settings(tmp_path, shakespeare_path, capsys):
    train(load_config(None, tiny_overrides(tmp_path, shakespeare_path, **{"train.max_iters": 3})))
    config_before = (tmp_path / "run" / "config.yaml").read_text(encoding="utf-8")
    with pytest.raises(ConfigError, match="data.val_fraction is 0.2 but the run used 0.1"):
        train(
            load_config(
                None,
                tiny_overrides(
                    tmp_path, shakespeare_path, **{"train.resume": True, "data.val_fraction": 0.2}
                ),
            )
        )
    nothing = tiny_overrides(
        tmp_path, shakespeare_path, **{"train.resume": True, "train.max_iters": 2}
    )
    assert train(load_config(None, nothing)).iter_num == 3
    assert (tmp_path / "run" / "config.yaml").read_text(encoding="utf-8") == config_before
    capsys.readouterr()
    changed = tiny_overrides(
        tmp_path, shakespeare_path, **{"train.resume": True, "train.learning_rate": 0.002}
    )
    train(load_config(None, changed))
    assert "train.learning_rate: 0.001 -> 0.002" in capsys.readouterr().out


def test_schedule_notice_when_the_run_stops_before_the_decay(tmp_path, shakespeare_path, capsys):
    overrides = tiny_overrides(tmp_path, shakespeare_path, **{"train.lr_decay_iters": 100})
    train(load_config(None, overrides))
    assert "stops before the decay ends" in capsys.readouterr().out


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


class ClosedPipe(io.TextIOBase):
    """A stdout whose reader has gone (``| head``)."""

    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")


def test_closed_stdout_does_not_stop_training(tmp_path, shakespeare_path, monkeypatch):
    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    result = train(load_config(None, tiny_overrides(tmp_path, shakespeare_path)))
    assert result.iter_num == 6
    assert load_checkpoint(tmp_path / "run" / "ckpt.pt")["iter_num"] == 6


def _tiny_model_on(tmp_path, text: str, name: str):
    corpus = tmp_path / f"{name}.txt"
    corpus.write_text(text, encoding="utf-8")
    extra = {"model.block_size": 8, "train.max_iters": 2, "train.sample_tokens": 0}
    overrides = tiny_overrides(tmp_path / name, corpus, **extra)
    return train(load_config(None, overrides + ["train.attention_prompt=''"])).out_dir


def run_sample_main(capsys, out_dir, *args):
    import sample

    code = sample.main(["--out-dir", str(out_dir), "--device", "cpu", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_sampling_arguments_from_the_bug_reports(tmp_path, capsys):
    out = _tiny_model_on(tmp_path, "abc cab bca\n" * 40, "abc")
    capsys.readouterr()  # drop the training log
    code, _, err = run_sample_main(capsys, out, "--prompt", "abd")
    assert code == 2 and "'d' (U+0064) at position 2" in err and "Traceback" not in err
    code, text, _ = run_sample_main(capsys, out, "--prompt", "ab", "--top-k", "200")
    assert code == 0 and text.startswith("ab")  # top_k above the 5-character vocabulary
    code, text, _ = run_sample_main(capsys, out, "--prompt", "cab", "--max-new-tokens", "0")
    assert code == 0 and text == "cab\n"
    long_prompt = "abc cab bca " * 3  # 36 characters, block_size 8: cropped, not an error
    code, text, _ = run_sample_main(capsys, out, "--prompt", long_prompt, "--max-new-tokens", "5")
    assert code == 0 and text.startswith(long_prompt) and len(text.rstrip("\n")) >= 36
    code, text, _ = run_sample_main(capsys, out, "--prompt", "a\r\nb", "--max-new-tokens", "0")
    assert code == 0 and text == "a\nb\n"  # prompts get the corpus's newline normalisation
    greedy = [run_sample_main(capsys, out, "--temperature", "0", "--seed", s)[1] for s in "12"]
    assert greedy[0] == greedy[1]  # temperature 0 is greedy: the seed does not matter
    code, _, err = run_sample_main(capsys, out, "--temperature", "-1")
    assert code == 2 and "temperature" in err


def test_no_prompt_starts_from_a_character_the_vocabulary_holds(tmp_path, capsys):
    out = _tiny_model_on(tmp_path, "abcacbbca" * 40, "nospace")  # no newline, no space
    capsys.readouterr()  # drop the training log
    code, text, _ = run_sample_main(capsys, out, "--max-new-tokens", "3")
    assert code == 0 and text.startswith("a") and len(text) == 5  # 'a' + 3 + newline


def test_console_that_cannot_encode_korean(tmp_path, korean_path):
    out = _tiny_model_on(tmp_path, korean_path.read_text(encoding="utf-8")[:3000], "ko")
    env = {**__import__("os").environ, "PYTHONIOENCODING": "ascii"}
    r = subprocess.run(
        [sys.executable, "sample.py", "--out-dir", str(out), "--device", "cpu", "--prompt", "새가"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr.decode("utf-8", "replace")
    assert r.stdout.startswith(b"??")  # replaced, not a UnicodeEncodeError
