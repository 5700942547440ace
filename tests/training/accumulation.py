"""The tiny float64 set-up that gradient-accumulation tests compare steps in: the same
windows, a trainer whose step draws them, one step on given slices. Shared by
test_loop_accumulation.py, tests/ddp_worker.py and the two-rank job of conftest.py."""

import torch

from tests.conftest import tiny_overrides
from training.config import load_config
from training.distributed import all_reduce
from training.loop import Trainer

WINDOWS = 8  # sequences per optimizer step, in every set-up below


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
