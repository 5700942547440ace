"""Scoring a model: its next-character loss over fixed windows, in nats and bits.

The loss of a window is the cross-entropy of the model's prediction at each position
against the next character, summed over the targets that are not -1 (those the
windows' reader has already counted, e.g. `data.batches.EvaluationWindows`). Any
iterable of (x, y) batches of windows will do: scoring needs nothing of data/.
Windows are summed one forward pass at a time and the sum is divided by the count
once, so the number does not depend on how many windows a forward pass takes.
Training's periodic and whole-split evaluations (`training.evaluate`, which adds the
data-parallel sum) and evaluate.py score with these functions; all losses are in nats
per character (bits: nats / ln 2).
"""

import math
from collections.abc import Callable, Iterable

import torch
import torch.nn.functional as F
from torch import nn

# Evaluation logits of up to this many elements (64 MB in float32) are never split:
# those of an alphabet's or Hangul's few thousand characters are not larger, and their
# evaluation keeps train.eval_batch_size windows per forward pass.
EVAL_LOGITS_FLOOR = 1 << 24
# The defaults of the two run-config keys `rows_per_forward` reads, train.eval_batch_size
# and train.batch_size: training/settings.py's TrainConfig takes them from here, and
# evaluate.py falls back on them for a stored config without the keys.
EVAL_BATCH_SIZE = 128
TRAIN_BATCH_SIZE = 32


def nats_to_bits(loss: float) -> float:
    """Convert a loss in nats per character to bits per character (divide by ln 2)."""
    return loss / math.log(2)


def rows_per_forward(eval_batch_size: int, batch_size: int, block_size: int, vocab: int) -> int:
    """Windows per evaluation forward pass: train.eval_batch_size, or fewer where its
    (rows, block_size, vocab_size) float32 logits would outgrow a training micro-step's
    (batch_size, block_size, vocab_size) ones (and EVAL_LOGITS_FLOOR), so that
    evaluation never needs much more memory than training at any vocabulary size.
    The loss is the same either way: windows are summed one by one.
    """
    budget = max(batch_size * block_size * vocab, EVAL_LOGITS_FLOOR)
    return max(1, min(eval_batch_size, budget // (block_size * vocab)))


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
        autocast: optional context manager factory for mixed precision
            (`model.device.autocast_context`).

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


def windows_loss(
    model: nn.Module,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
    device: torch.device,
    autocast=None,
    on_windows: Callable[[int], None] | None = None,
) -> tuple[torch.Tensor, int]:
    """`summed_loss` over batches of fixed evaluation windows, one forward pass a batch,
    so that no split need be held in memory.

    Args:
        model, device, autocast: see `summed_loss`.
        batches: (x, y) pairs of (b, T) int64 windows and targets (-1: not counted),
            e.g. ``EvaluationWindows(ids, T).batches(batch_size, rank, world_size)``.
        on_windows: called with the number of windows after each batch (a progress bar).

    Returns:
        (total, count): summed cross-entropy in nats (float64 0-dim tensor on
        ``device``) and the number of targets.
    """
    total = torch.zeros((), dtype=torch.float64, device=device)
    count = 0
    for x, y in batches:
        batch_total, batch_count = summed_loss(model, x, y, len(x), device, autocast)
        total += batch_total
        count += batch_count
        if on_windows is not None:
            on_windows(len(x))
    return total, count


def mean_windows_loss(
    model: nn.Module,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
    device: torch.device,
    autocast=None,
    on_windows: Callable[[int], None] | None = None,
) -> float:
    """Mean cross-entropy in nats per character over every target of ``windows``, in
    this process alone (`windows_loss`, then the sum divided by the count in float64,
    as `training.evaluate.Evaluator.mean_loss` divides the data-parallel sums).

    Args:
        model, device, autocast: see `summed_loss`.
        batches: see `windows_loss`; e.g. ``EvaluationWindows(ids, T).batches(rows)``:
            every character of a split after its first.
        on_windows: called with the number of windows after each batch (a progress bar).
    """
    total, count = windows_loss(model, batches, device, autocast, on_windows)
    return (total / count).item()
