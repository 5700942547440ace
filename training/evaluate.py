"""Deterministic evaluation: next-character loss over fixed windows.

The validation loss is over every character of the validation split after its first
(non-overlapping windows of block_size); the training loss over a fixed sample of the
training split. Both in nats per character (and bits: nats / ln 2). The windows are the
same at every evaluation, so two evaluations, or two runs, compare exactly.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from data.batches import evaluation_windows
from data.corpus import Corpus
from training.distributed import DistContext, all_reduce
from training.nonfinite import NonFiniteLossError


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


class Evaluator:
    """The fixed evaluation windows of a run, and the losses of a model over them.

    Under data parallelism the windows are dealt out across ranks (rank r takes every
    world_size-th) and the summed losses and counts are all-reduced, so every rank
    gets the same numbers.

    Args:
        corpus: the prepared corpus.
        cfg: the run config (a RunConfig); uses model.block_size (window length),
            train.eval_train_tokens (size of the training-split sample) and
            train.eval_batch_size (windows per forward pass).
        dist: this process's place in the job.
        device: where to evaluate.
        autocast: factory of the mixed-precision context (see `training.device`).
    """

    def __init__(self, corpus: Corpus, cfg, dist: DistContext, device: torch.device, autocast=None):
        rank, world = dist.rank, dist.world_size
        T, tc = cfg.model.block_size, cfg.train
        val_x, val_y = evaluation_windows(corpus.val_ids, T)
        train_x, train_y = evaluation_windows(corpus.train_ids, T, tc.eval_train_tokens)
        self.splits = {
            "val": (val_x[rank::world], val_y[rank::world]),
            "train": (train_x[rank::world], train_y[rank::world]),
        }
        self.batch_size, self.dist, self.device = tc.eval_batch_size, dist, device
        self.autocast = autocast

    def evaluate(self, model: nn.Module, step: int, seconds: float) -> dict:
        """One evaluation of ``model`` after ``step`` steps, ``seconds`` into the run.

        Returns:
            {"iter", "seconds", "train_loss", "val_loss" (nats/char), "val_bpc" (bits/char)}

        Raises:
            NonFiniteLossError: if the validation loss is NaN or infinite.
        """
        losses = self.losses(model)
        if not math.isfinite(losses["val"]):
            raise NonFiniteLossError(
                f"the validation loss is {losses['val']} at iteration {step}; the last good "
                "checkpoint is kept. Lower train.learning_rate."
            )
        return {
            "iter": step,
            "seconds": seconds,
            "train_loss": losses["train"],
            "val_loss": losses["val"],
            "val_bpc": nats_to_bits(losses["val"]),
        }

    def losses(self, model: nn.Module) -> dict[str, float]:
        """{"val": loss, "train": loss}, mean cross-entropy in nats per character
        (model in eval mode while evaluating; its mode is restored)."""
        out = {}
        for split, (x, y) in self.splits.items():
            total, count = summed_loss(model, x, y, self.batch_size, self.device, self.autocast)
            totals = torch.stack(
                [total, torch.tensor(count, dtype=total.dtype, device=self.device)]
            )
            all_reduce(totals, self.dist)
            out[split] = (totals[0] / totals[1]).item()
        return out
