"""Deterministic evaluation: next-character loss over fixed windows."""

import math

import torch
import torch.nn.functional as F
from torch import nn


def nats_to_bits(loss: float) -> float:
    """Convert a loss in nats per character to bits per character (divide by ln 2)."""
    return loss / math.log(2)


@torch.no_grad()
def summed_loss(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    batch_size: int,
    device: torch.device,
    autocast=None,
) -> tuple[torch.Tensor, int]:
    """Total cross-entropy over every target in ``y`` that is not -1, and their count.

    Runs in eval mode (dropout off) and restores the previous mode. Returning the sum
    and the count (rather than their ratio) lets data-parallel ranks add theirs up.

    Args:
        model: returns ``(logits, loss)`` from ``model(x)``; logits (B, T, vocab_size).
        x, y: (W, T) int64 windows and targets, e.g. from `data.evaluation_windows`.
        batch_size: windows per forward pass.
        device: where to run.
        autocast: optional context manager factory for mixed precision.

    Returns:
        (total, count): a float64 0-dim tensor on ``device`` in nats, and the number
        of targets it covers.
    """
    was_training = model.training
    model.eval()
    total = torch.zeros((), dtype=torch.float64, device=device)
    count = int((y != -1).sum())  # counted on the host: no device sync per batch
    for i in range(0, len(x), batch_size):
        xb = x[i : i + batch_size].to(device)
        yb = y[i : i + batch_size].to(device)
        if autocast is not None:
            with autocast():
                logits, _ = model(xb)
        else:
            logits, _ = model(xb)
        total += F.cross_entropy(
            logits.reshape(-1, logits.size(-1)).float(),
            yb.reshape(-1),
            ignore_index=-1,
            reduction="sum",
        )
    model.train(was_training)
    return total, count


def evaluate_loss(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    batch_size: int,
    device: torch.device,
    autocast=None,
) -> float:
    """Mean cross-entropy in nats per character over the targets of ``y`` (see
    `summed_loss` for the arguments)."""
    total, count = summed_loss(model, x, y, batch_size, device, autocast)
    return total.item() / count
