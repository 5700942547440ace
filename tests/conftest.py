"""Shared fixtures: the real Tiny Shakespeare corpus and tiny run configs."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

ROOT = Path(__file__).resolve().parent.parent
SHAKESPEARE = ROOT.parent / "shared" / "data" / "tinyshakespeare" / "input.txt"
KOREAN = ROOT.parent / "shared" / "data" / "korean" / "input.txt"


@pytest.fixture
def shakespeare_path() -> Path:
    if not SHAKESPEARE.is_file():
        pytest.skip(f"real corpus not found at {SHAKESPEARE}")
    return SHAKESPEARE


@pytest.fixture
def korean_path() -> Path:
    if not KOREAN.is_file():
        pytest.skip(f"Korean corpus not found at {KOREAN}")
    return KOREAN


def tiny_overrides(tmp_path: Path, corpus: Path, **extra) -> list[str]:
    """Overrides for a run small enough to take a second or two on CPU."""
    values = {
        "out_dir": tmp_path / "run",
        "device": "cpu",
        "data.path": corpus,
        "data.cache_dir": tmp_path / "cache",
        "model.n_layer": 2,
        "model.n_head": 2,
        "model.n_embd": 32,
        "model.block_size": 32,
        "train.batch_size": 8,
        "train.max_iters": 6,
        "train.eval_interval": 3,
        "train.log_interval": 1,
        "train.warmup_iters": 2,
        "train.eval_train_tokens": 2048,
        "train.eval_batch_size": 512,
        # TensorBoard views stay on but small: one forward pass per sampled character,
        # and drawing cost grows with the prompt's tick labels.
        "train.sample_tokens": 16,
        "train.attention_prompt": "To be",
    }
    values.update(extra)
    return [f"{k}={v}" for k, v in values.items()]


def read_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar a run logged: {tag: [(step, value), ...]}, read from its events."""
    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


TIMEOUT_S = 180  # for each launched process: a hung collective must fail, not stall CI


def torchrun(*args, cwd=ROOT) -> subprocess.CompletedProcess:
    """Run a script under torchrun with 2 CPU processes (gloo), one thread each."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        cmd + [str(a) for a in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=TIMEOUT_S,
    )
