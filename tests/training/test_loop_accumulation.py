"""Gradient accumulation: micro-batches summed with the 1 / gradient_accumulation_steps
scale give the same optimizer step as one batch of all of them, in one process and
across two data-parallel processes."""

import pytest
import torch

from tests.training.accumulation import WINDOWS, fixed_windows, float64_trainer, step_on
from tests.training.conftest import SHARES_DDP_JOB


@pytest.fixture(autouse=True)
def float64():
    """Every tensor float64 (weights, optimizer state, the summed loss), so that the
    set-ups can be compared to 1e-10."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


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
