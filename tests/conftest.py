"""Shared fixtures: the real Tiny Shakespeare corpus and tiny run configs."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

ROOT = Path(__file__).resolve().parent.parent
KOREAN = ROOT.parent / "shared" / "data" / "korean" / "input.txt"


def shakespeare() -> Path:
    """Tiny Shakespeare through the project's own fetch (the offline copy beside the
    checkout, or the checksum-verified download) into data/tinyshakespeare/; skips the
    test, with the reason, only when neither is reachable."""
    from data import CorpusError
    from data.corpus import DEFAULT_CORPUS_PATH, ensure_default_corpus

    path = ROOT / DEFAULT_CORPUS_PATH
    try:
        ensure_default_corpus(path)
    except CorpusError as e:
        pytest.skip(f"Tiny Shakespeare is not reachable: {e}")
    return path


def made_korean_text(n_chars: int = 120_000, seed: int = 0) -> str:
    """Korean-looking text (words of random Hangul syllables, lines, punctuation) with
    over 1,500 distinct characters, including every syllable of "새가 하늘을 날았다"."""
    import random

    rng = random.Random(seed)
    syllables = [chr(c) for c in range(0xAC00, 0xD7A4, 7)]  # 1,596 of the 11,172
    words = ["새가", "하늘을", "날았다", "바다", "사람"]
    out = []
    while sum(map(len, out)) < n_chars:
        word = rng.choice(words) if rng.random() < 0.2 else ""
        word = word or "".join(rng.choices(syllables, k=rng.randint(1, 4)))
        out.append(word + rng.choice([" ", " ", " ", ". ", "\n"]))
    return "".join(out)[:n_chars]


@pytest.fixture
def shakespeare_path() -> Path:
    return shakespeare()


@pytest.fixture(scope="session")
def korean_path(tmp_path_factory) -> Path:
    """The Korean corpus beside the checkout (../shared/data/korean/input.txt), or,
    where there is none, a Korean text made here."""
    if KOREAN.is_file():
        return KOREAN
    path = tmp_path_factory.mktemp("korean") / "input.txt"
    path.write_text(made_korean_text(), encoding="utf-8")
    return path


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


def sharp_model(vocab_size: int = 20, block_size: int = 16, seed: int = 0, std: float = 0.3):
    """A small GPT (2 layers, 2 heads, 32 wide, eval mode) with weights far larger than
    GPT-2's initial ones: attention is then peaked and logits spread over several units,
    so a wrong key, value or position moves the logits well beyond a 1e-4 tolerance."""
    from model import GPT, GPTConfig

    torch.manual_seed(seed)
    config = GPTConfig(vocab_size, block_size, n_layer=2, n_head=2, n_embd=32)
    model = GPT(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, std)
    return model
