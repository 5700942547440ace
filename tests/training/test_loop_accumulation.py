"""Gradient accumulation: micro-batches summed with the 1 / gradient_accumulation_steps
scale give the same optimizer step as one batch of all of them, in one process and
across two data-parallel processes."""

import pytest
import torch

from tests.conftest import tiny_overrides
from tests.training.conftest import SHARES_DDP_JOB
from training.config import load_config
from training.distributed import all_reduce
from training.loop import Trainer

WINDOWS = 8  # sequences per optimizer step, in every set-up below


@pytest.fixture(autouse=True)
def float64():
    """Every tensor float64 (weights, optimizer state, the summed loss), so that the
    set-ups can be compared to 1e-10."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


def fixed_windows(corpus_path, tmp_path) -> tuple[torch.Tensor, torch.Tensor]:
    """(8, T) inputs and targets: the same windows for every set-up."""
    trainer = float64_trainer(tmp_path / "windows", corpus_path, accumulation=1, batch=WINDOWS)
    batch = trainer.sampler.next_batch()
    trainer.close()
    return batch


def float64_trainer(out, corpus_path, accumulation: int, batch: int) -> Trainer:
    """A tiny Trainer on CPU, dropout off, whose step draws accumulation x batch windows
    (same seed, so the same initial weights in every set-up). Made under a float64
    default dtype, its model is float64. CPU whatever MINIGPT_TEST_DEVICE says: the
    two-process set-up runs on CPU (gloo), and every set-up is compared with it."""
    overrides = tiny_overrides(
        out,
        corpus_path,
        device="cpu",
        **{
            "model.dropout": 0.0,
            "train.batch_size": batch,
            "train.gradient_accumulation_steps": accumulation,
            "train.sample_tokens": 0,
            "train.attention_prompt": "''",
        },
    )
    trainer = Trainer(load_config(None, overrides))
    assert trainer.model.lm_head.weight.dtype == torch.float64
    return trainer


def step_on(trainer: Trainer, x: torch.Tensor, y: torch.Tensor, batch: int) -> dict:
    """One optimizer step whose micro-batches are consecutive slices of (x, y).

    Returns:
        {"loss", "grad_norm", "weights"} after the step.
    """
    slices = iter(range(0, len(x), batch))

    def next_batch():
        i = next(slices)
        return x[i : i + batch], y[i : i + batch]

    trainer.sampler.next_batch = next_batch
    loss, grad_norm, _ = trainer.train_step(0)
    # Each rank's loss is the mean over its own windows; the run logs their average.
    loss = all_reduce(loss.clone(), trainer.dist) / trainer.dist.world_size
    return {
        "loss": loss.item(),
        "grad_norm": float(grad_norm),
        "weights": {k: v.clone() for k, v in trainer.model.state_dict().items()},
    }


def assert_same_step(a: dict, b: dict, initial: dict) -> None:
    assert abs(a["loss"] - b["loss"]) < 1e-10
    assert abs(a["grad_norm"] - b["grad_norm"]) < 1e-10
    moved = 0.0
    for name, value in a["weights"].items():
        assert (value - b["weights"][name]).abs().max() < 1e-10, name
        moved = max(moved, float((value - initial[name]).abs().max()))
    assert moved > 1e-4  # a real update, not two untouched models


def test_accumulation_equals_one_big_batch(tmp_path, shakespeare_path):
    x, y = fixed_windows(shakespeare_path, tmp_path)
    one = float64_trainer(tmp_path / "one", shakespeare_path, accumulation=1, batch=WINDOWS)
    initial = {k: v.clone() for k, v in one.model.state_dict().items()}
    big = step_on(one, x, y, batch=WINDOWS)
    four = float64_trainer(tmp_path / "four", shakespeare_path, accumulation=4, batch=2)
    accumulated = step_on(four, x, y, batch=2)
    assert_same_step(accumulated, big, initial)


@pytest.mark.slow  # torchrun
@SHARES_DDP_JOB
def test_accumulation_under_two_process_ddp(tmp_path, shakespeare_path, ddp_job):
    """2 ranks x 4 micro-batches of 1 window = one process with one batch of 8."""
    windows = torch.load(ddp_job / "accumulate" / "windows.pt", weights_only=True)
    x, y = windows["x"], windows["y"]
    one = float64_trainer(tmp_path / "one", shakespeare_path, accumulation=1, batch=WINDOWS)
    initial = {k: v.clone() for k, v in one.model.state_dict().items()}
    big = step_on(one, x, y, batch=WINDOWS)
    for rank in (0, 1):
        ddp = torch.load(ddp_job / "accumulate" / f"accumulated{rank}.pt", weights_only=True)
        assert_same_step(ddp, big, initial)
