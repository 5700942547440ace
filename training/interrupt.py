"""Graceful stop: Ctrl-C or SIGTERM asks the training loop to save and exit."""

import signal
import sys
import threading

import torch
from torch.distributed import ReduceOp

from training.distributed import DistContext, all_reduce


class StopRequest:
    """Context manager that turns the first Ctrl-C (SIGINT) or SIGTERM into a flag,
    ``requested``, which the training loop checks between iterations so it can save
    a consistent checkpoint. A second Ctrl-C aborts at once (KeyboardInterrupt),
    except while ``saving`` is True: a checkpoint being written is never cut short.

    Outside the main thread (where Python cannot install signal handlers) it does
    nothing and ``requested`` stays False.

    Attributes:
        requested: a stop was asked for.
        signum: the signal that asked (for the exit status 128 + signum), or None.
        saving: set by the loop around the final save.
    """

    def __init__(self):
        self.requested = False
        self.signum = None
        self.saving = False
        self._previous = {}

    def __enter__(self) -> "StopRequest":
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        if self.requested:
            if self.saving:
                print("\nstill saving the checkpoint; please wait", file=sys.stderr, flush=True)
                return
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            return
        self.requested = True
        self.signum = signum
        print(
            "\nstopping after this step and saving a checkpoint (Ctrl-C again to abort "
            "without saving)",
            file=sys.stderr,
            flush=True,
        )

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def agreed(self, dist: DistContext, step: int, every: int, device: torch.device) -> bool:
        """Whether to stop before the next step. A single process checks its own flag
        every step; data-parallel ranks agree (any rank stopping stops all) every
        ``every`` steps, so that they all leave the loop at the same step.

        Args:
            dist: this process's place in the job.
            step: optimizer steps done.
            every: how often ranks compare flags (the log interval).
            device: where the collective's tensor lives.
        """
        if not dist.enabled:
            return self.requested
        if step % every:
            return False
        flag = torch.tensor(float(self.requested), device=device)
        return bool(all_reduce(flag, dist, op=ReduceOp.MAX))
