"""Stopping on a NaN or infinite loss without slowing every step down.

Reading a loss on the host waits for the device, so the check is split: each step
records, on the device, the first step whose loss was not finite (no wait); the record
is read, and all ranks agree on it, before every log and every save, so that no
non-finite model is ever logged as fine or written to a checkpoint.
"""

from pathlib import Path

import torch
from torch.distributed import ReduceOp

from training.distributed import DistContext, all_reduce


class NonFiniteLossError(RuntimeError):
    """The loss became NaN or infinite; the last good checkpoint is kept."""


class NonFiniteWatch:
    """The device-side record of the first non-finite training loss.

    Args:
        device: where the losses live.
    """

    def __init__(self, device: torch.device):
        # First iteration (1-based, as logged) whose loss was NaN/inf, or -1.
        self.first_bad_step = torch.full((), -1, dtype=torch.long, device=device)

    def record(self, loss: torch.Tensor, step: int) -> None:
        """Note ``loss`` (a 0-dim device tensor) of 0-based ``step``; no host sync."""
        newly_bad = (self.first_bad_step < 0) & ~torch.isfinite(loss)
        self.first_bad_step = torch.where(newly_bad, step + 1, self.first_bad_step)

    def check(self, dist: DistContext, checkpoint: Path) -> None:
        """Raise if any rank has recorded a non-finite loss (a collective: every rank
        must call it).

        Args:
            dist: this process's place in the job.
            checkpoint: the run's ckpt.pt, to say whether a good one is kept.

        Raises:
            NonFiniteLossError: naming the step, with what to change.
        """
        bad_step = int(all_reduce(self.first_bad_step.clone(), dist, op=ReduceOp.MAX))
        if bad_step >= 0:
            kept = (
                f"the last good checkpoint in {checkpoint.parent} is kept"
                if checkpoint.is_file()
                else "no checkpoint had been written yet"
            )
            raise NonFiniteLossError(
                f"the training loss became NaN or infinite at iteration {bad_step}; "
                f"training stopped and {kept}. Lower train.learning_rate, raise "
                "train.warmup_iters, or set train.grad_clip."
            )
