"""What the command-line tests share: run folders holding a hand-made checkpoint
(`sharp_model`'s random, large weights over a chosen vocabulary), which sample.py,
evaluate.py and the others read as a trained run's; no training step is needed for
what they check (flags, prompts, stops, seeds, streams), so none is run."""

import dataclasses
from pathlib import Path

import pytest

from model.checkpoint import save_checkpoint
from tests.conftest import sharp_model

# Newline, space, Latin and Korean: prompts and stops in both scripts.
SAMPLE_CHARS = sorted("\n abc새가하늘을")


def hand_made_run(folder: Path, chars: list[str], seed: int = 5, **config) -> Path:
    """``folder`` holding ckpt.pt: `sharp_model` (std 0.2, block_size 16 unless
    ``config`` says otherwise) over the vocabulary ``chars`` in the given order."""
    model = sharp_model(vocab_size=len(chars), seed=seed, std=0.2, **config)
    payload = {
        "model": model.state_dict(),
        "model_config": dataclasses.asdict(model.config),
        "vocab": list(chars),
    }
    folder.mkdir(parents=True, exist_ok=True)
    save_checkpoint(payload, folder / "ckpt.pt")
    return folder


@pytest.fixture(scope="session")
def sample_run(tmp_path_factory) -> Path:
    """A run folder of `hand_made_run` over SAMPLE_CHARS (seed 5), read-only: made once
    a session and shared by every test of sample.py, so none waits on the others."""
    return hand_made_run(tmp_path_factory.mktemp("sample_run"), SAMPLE_CHARS)
