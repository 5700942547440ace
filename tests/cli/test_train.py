"""End to end: train a tiny model on the real corpus, read back what it wrote, resume,
and sample from it (training and seeded sampling on TEST_DEVICE; sample.py's messages
and the Korean run's sample on CPU, as a GPU checkpoint must sample there too)."""

import subprocess
import sys

import pytest
import torch

from model.checkpoint import load_checkpoint
from tests.conftest import ROOT, TEST_DEVICE, read_scalars, tiny_overrides
from training import ConfigError, load_config, train
from viz.run_events import (
    TRAIN_GRAD_NORM,
    TRAIN_LOSS,
    TRAIN_LR,
    TRAIN_TOKENS_PER_SEC,
    VAL_BPC,
    VAL_LOSS,
)

REQUIRED_TAGS = {TRAIN_LOSS, VAL_LOSS, VAL_BPC, TRAIN_LR, TRAIN_GRAD_NORM, TRAIN_TOKENS_PER_SEC}


@pytest.fixture
def trained_run(tmp_path, shakespeare_path):
    cfg = load_config(None, tiny_overrides(tmp_path, shakespeare_path))
    result = train(cfg)
    return cfg, result


def test_run_writes_checkpoint_config_and_events(trained_run):
    cfg, result = trained_run
    out = result.out_dir
    assert result.iter_num == 6 and not result.interrupted
    assert (out / "ckpt.pt").is_file() and (out / "best.pt").is_file()
    assert load_config(out / "config.yaml").model.n_embd == 32
    ckpt = load_checkpoint(out / "ckpt.pt")
    assert ckpt["iter_num"] == 6
    assert len(ckpt["vocab"]) == 65 and ckpt["model_config"]["vocab_size"] == 65
    assert "optimizer" in ckpt and "sampler" in ckpt["rng"]["ranks"][0]
    assert ckpt["rng"]["world_size"] == 1
    scalars = read_scalars(out)
    assert REQUIRED_TAGS <= set(scalars)
    assert [s for s, _ in scalars[TRAIN_LOSS]] == [1, 2, 3, 4, 5, 6]
    assert [s for s, _ in scalars[VAL_LOSS]] == [3, 6]
    for (_, nats), (_, bits) in zip(scalars[VAL_LOSS], scalars[VAL_BPC], strict=True):
        assert bits == pytest.approx(nats / 0.6931471805599453, rel=1e-5)
    assert scalars[VAL_LOSS][-1][1] == pytest.approx(result.best_val_loss, rel=1e-6)
    assert [e["iter"] for e in result.evals] == [3, 6]


def test_new_run_refuses_to_overwrite(trained_run, tmp_path, shakespeare_path):
    with pytest.raises(ConfigError, match="train.resume=true.*out_dir.*train.overwrite=true"):
        train(load_config(None, tiny_overrides(tmp_path, shakespeare_path)))


@pytest.mark.slow
def test_resume_matches_an_uninterrupted_run(tmp_path, shakespeare_path):
    common = {"model.dropout": 0.1, "train.lr_decay_iters": 10}
    full = train(
        load_config(
            None,
            tiny_overrides(
                tmp_path / "full", shakespeare_path, **common, **{"train.max_iters": 10}
            ),
        )
    )
    first = train(
        load_config(
            None,
            tiny_overrides(
                tmp_path / "split", shakespeare_path, **common, **{"train.max_iters": 5}
            ),
        )
    )
    assert first.iter_num == 5
    second = train(
        load_config(
            None,
            tiny_overrides(
                tmp_path / "split",
                shakespeare_path,
                **common,
                **{"train.max_iters": 10, "train.resume": True},
            ),
        )
    )
    assert second.iter_num == 10
    assert sorted(second.losses) == list(range(6, 11))  # continued from step 5
    resumed = {**first.losses, **second.losses}
    assert resumed == full.losses  # bitwise-equal losses at every step
    lrs_full = read_scalars(tmp_path / "full" / "run")[TRAIN_LR]
    lrs_split = read_scalars(tmp_path / "split" / "run")[TRAIN_LR]
    assert sorted(lrs_split) == lrs_full


def run_sample(out_dir, *extra, device="cpu"):
    cmd = [sys.executable, str(ROOT / "sample.py"), "--out-dir", str(out_dir), "--device", device]
    return subprocess.run(
        cmd + list(extra), capture_output=True, text=True, encoding="utf-8", cwd=ROOT
    )


def test_sample_is_deterministic_and_starts_with_prompt(trained_run):
    _, result = trained_run
    args = ["--prompt", "ROMEO:", "--max-new-tokens", "40", "--num-samples", "2", "--seed", "7"]
    a = run_sample(result.out_dir, *args, device=TEST_DEVICE.type)
    b = run_sample(result.out_dir, *args, device=TEST_DEVICE.type)
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout
    samples = a.stdout.split("\n" + "-" * 40 + "\n")
    assert len(samples) == 2
    for s in samples:
        assert s.startswith("ROMEO:")
        assert len(s.rstrip("\n")) >= 40  # prompt + 40 characters (some may be newlines)
    c = run_sample(result.out_dir, *args[:-1], "8", device=TEST_DEVICE.type)
    assert c.stdout != a.stdout


def test_sample_rejects_unknown_prompt_characters(trained_run):
    _, result = trained_run
    r = run_sample(result.out_dir, "--prompt", "ROMEO: 새~")
    assert r.returncode == 2
    assert "'새' (U+C0C8) at position 7" in r.stderr
    assert "'~' (U+007E) at position 8" in r.stderr
    assert "Traceback" not in r.stderr


def test_checkpoint_has_no_code_and_loads_weights_only(trained_run):
    _, result = trained_run
    ckpt = torch.load(result.out_dir / "ckpt.pt", weights_only=True)
    assert ckpt["format_version"] == 1


def test_korean_corpus_trains_and_samples(tmp_path, korean_path):
    # Prompts of the corpus's own script: the English defaults would fall back, warning.
    prompts = {"train.sample_prompt": "새가", "train.attention_prompt": "새가"}
    overrides = tiny_overrides(tmp_path, korean_path, **{"train.max_iters": 3, **prompts})
    result = train(load_config(None, overrides))
    ckpt = load_checkpoint(result.out_dir / "ckpt.pt")
    assert len(ckpt["vocab"]) > 1000 and "새" in ckpt["vocab"]
    r = run_sample(result.out_dir, "--prompt", "새가 하늘을", "--max-new-tokens", "20")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("새가 하늘을")


def test_log_file_output_is_plain_lines(tmp_path, korean_path):
    """Output that is not a terminal (``> log 2>&1``): no carriage returns, no blank
    lines, a progress line, where the corpus came from, warnings on one line each. On
    CPU: the format is what is tested, and the warning count must not depend on a
    device's own notices."""
    extra = {"train.max_iters": 4, "train.attention_prompt": "To be"}  # both prompts fall back
    overrides = tiny_overrides(tmp_path, korean_path, device="cpu", **extra)
    r = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *overrides],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        encoding="utf-8",
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stdout
    log = r.stdout
    assert "\r" not in log
    lines = log.splitlines()
    assert all(line.strip() for line in lines), lines  # no blank or padded lines
    assert lines[0].startswith(f"corpus: {korean_path} (")
    assert "normalization nfc" in lines[0] and "distinct" in lines[0]
    # Korean text lacks the default prompts' letters: each fallback is one plain line.
    warnings = [line for line in lines if line.startswith("warning: ")]
    fallbacks = [w for w in warnings if "has characters the corpus lacks" in w]
    assert len(fallbacks) == 2 and all("train." in w for w in fallbacks)
    # A machine without a Hangul font says so in one more line (viz.fonts).
    assert all(w in fallbacks or "no installed font can draw" in w for w in warnings), warnings
    assert ".py:" not in log  # no source file path, no source line
    assert any(line.startswith("step 1/4 (25%) | loss ") for line in lines), lines
    assert any(line.startswith("step 3: train ") for line in lines)


@pytest.mark.slow
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
