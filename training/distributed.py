"""The processes of a run: the device each one trains on, data parallelism with PyTorch
Distributed (DistributedDataParallel), and the two things every rank must agree on
between steps: a stop request (Ctrl-C, SIGTERM) and a loss that is no longer finite.

Launch with torchrun, which sets RANK, LOCAL_RANK and WORLD_SIZE for each process:

    torchrun --standalone --nproc_per_node=2 train.py --config configs/shakespeare_char.yaml

Each process (rank) holds a full copy of the model and draws its own batches; DDP
averages the gradients across ranks on every optimizer step, so the run behaves like
one process with a global batch of batch_size x gradient_accumulation_steps x world_size.
Without those variables everything here is a no-op and training is single-process.

A torchrun job of one process (``--nproc_per_node=1``) joins a process group of one
too, and runs every collective through it: its losses are those of a plain run, and a
machine with one GPU can check the NCCL path (bench/gpu_check.py does). ``python
train.py`` sets none of the variables and never joins a group.

Ctrl-C or SIGTERM asks the loop to stop at the end of a step and save (`StopRequest`);
data-parallel ranks agree on it before every step, so that all leave at the same step
within one step of the signal, whatever train.log_interval is (torchrun turns its own
SIGTERM into SIGKILL 30 s later). The agreement is a one-number all-reduce on the host
(`DistContext.control_group`: the gloo group itself on CPU, a gloo group beside NCCL's
on CUDA), so it never waits for the GPU: a flag on the device would cost a
device-to-host read, and so a wait for the step's queued kernels, at every step.

A NaN or infinite loss stops the run without slowing every step down (`NonFiniteWatch`):
reading a loss on the host waits for the device, so each step records, on the device,
the first step whose loss was not finite (no wait); the record is read, and all ranks
agree on it, before every log and every save, so that no non-finite model is ever
logged as fine or written to a checkpoint.
"""

import os
import signal
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from common.signals import Terminated
from model import device as model_device
from training.config import ConfigError


def resolve_device(name: str) -> torch.device:
    """`model.device.resolve_device`, with its errors as ConfigError for the run config.

    Raises:
        ConfigError: for an unknown name or a device that is not available here.
    """
    try:
        return model_device.resolve_device(name)
    except model_device.DeviceError as e:
        raise ConfigError(str(e)) from None


@dataclass(frozen=True)
class DistContext:
    """Where this process stands in the job.

    Attributes:
        rank: global index of this process, 0..world_size-1.
        local_rank: index on this node (picks the GPU).
        world_size: number of processes.
        backend: the process group's backend ("nccl" on CUDA, "gloo" on CPU), or None
            for plain single-process training.
        control_group: the process group of host-side agreements between steps (the
            stop request), a gloo group of every rank: None for the default group
            when that is gloo already (or when there is no group).
    """

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    backend: str | None = None
    control_group: object = field(default=None, compare=False, repr=False)

    @property
    def enabled(self) -> bool:
        """True in a process group (launched by torchrun, one process or more): the
        collectives then run through the group's backend."""
        return self.backend is not None

    @property
    def is_main(self) -> bool:
        """Rank 0 alone writes checkpoints, config.yaml, TensorBoard events and the bar."""
        return self.rank == 0


def launched_by_torchrun() -> bool:
    """True when torchrun (or another launcher of the env:// kind) started this
    process: it sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT."""
    return all(k in os.environ for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


def init_distributed(device_name: str) -> tuple[DistContext, torch.device]:
    """Join the process group if torchrun launched this process (even as its only
    process); pick its device.

    NCCL is used on CUDA (one GPU per local rank), gloo on CPU.

    Args:
        device_name: the run's `device` key (auto, cpu, cuda, mps).

    Returns:
        (context, device).

    Raises:
        ConfigError: for an unavailable device, mps under DDP, or more local ranks
            than GPUs.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1 and not launched_by_torchrun():
        return DistContext(), resolve_device(device_name)
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = resolve_device(device_name)
    if device.type == "mps":
        raise ConfigError("distributed training is not supported on mps; use device=cpu")
    if device.type == "cuda":
        if local_rank >= torch.cuda.device_count():
            raise ConfigError(
                f"local rank {local_rank} has no GPU ({torch.cuda.device_count()} visible); "
                "lower --nproc_per_node"
            )
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    backend = "nccl" if device.type == "cuda" else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend=backend)
    # Every rank creates it, in the same order: a collective of its own.
    control_group = dist.new_group(backend="gloo") if backend != "gloo" else None
    return DistContext(rank, local_rank, world_size, backend, control_group), device


def shutdown_distributed(finished: bool = True) -> None:
    """Leave the process group (safe to call when there is none).

    Args:
        finished: True after a normal end: ranks first wait for each other, so no
            rank tears down its connections while another still uses them (gloo
            can abort the process then). False on an error, where waiting could hang.
    """
    if dist.is_available() and dist.is_initialized():
        if finished:
            dist.barrier()
        dist.destroy_process_group()


def all_reduce(tensor: torch.Tensor, ctx: DistContext, op=dist.ReduceOp.SUM) -> torch.Tensor:
    """In-place all-reduce across ranks (a no-op outside a process group); returns tensor."""
    if ctx.enabled:
        dist.all_reduce(tensor, op=op)
    return tensor


def gather_to_main(obj, ctx: DistContext) -> list | None:
    """Collect one picklable object per rank on rank 0, in rank order.

    Returns:
        The list on rank 0 (``[obj]`` outside a process group); None on other ranks.
    """
    if not ctx.enabled:
        return [obj]
    gathered = [None] * ctx.world_size if ctx.is_main else None
    dist.gather_object(obj, gathered, dst=0)
    return gathered


def wrap_for_data_parallel(
    module: torch.nn.Module, ctx: DistContext, device: torch.device
) -> torch.nn.Module:
    """``module`` in DistributedDataParallel in a process group (gradients averaged
    across ranks in backward, through the backend even for one rank), else ``module``
    itself."""
    if not ctx.enabled:
        return module
    ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(module, device_ids=ids)


# The signals that ask a run to stop: Ctrl-C, `kill` / `docker stop` / a scheduler's
# pre-emption, and a closed terminal (an ssh session that drops).
STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


class StopRequest:
    """Context manager that turns the first Ctrl-C (SIGINT), SIGTERM or SIGHUP into a
    flag, ``requested``, which the training loop checks between iterations so it can
    save a consistent checkpoint. A second Ctrl-C aborts at once (KeyboardInterrupt),
    except while ``saving`` is True: a checkpoint being written is never cut short.

    While ``at_once`` is True (the run's first step, which compiles with
    train.compile: minutes, where `docker stop` waits 10 s), there is nothing to save
    yet that the run does not have already: a signal stops the run at once, Ctrl-C as
    KeyboardInterrupt and the others as `common.signals.Terminated` (exit status 128 +
    the signal), and the run's cleanup leaves a new run's folder empty
    (`training.run_folder`).

    A signal that is ignored when the block begins (``nohup`` ignores SIGHUP, a shell
    script's background job SIGINT) stays ignored. Outside the main thread (where
    Python cannot install signal handlers) it does nothing and ``requested`` stays
    False.

    Attributes:
        requested: a stop was asked for.
        signum: the signal that asked (for the exit status 128 + signum), or None.
        saving: set by the loop around the final save.
        at_once: set by the loop around the run's first step.
    """

    def __init__(self):
        self.requested = False
        self.signum = None
        self.saving = False
        self.at_once = False
        self._previous = {}

    def __enter__(self) -> "StopRequest":
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                if signal.getsignal(sig) != signal.SIG_IGN:
                    self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        if self.at_once and not self.requested:
            name = signal.Signals(signum).name
            print(f"\n{name} during the first step: stopping at once", file=sys.stderr, flush=True)
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            raise Terminated(signum)
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

    def agreed(self, ctx: DistContext) -> bool:
        """Whether to stop before the next step. A single process reads its own flag;
        data-parallel ranks agree, any rank stopping stops all, so that they all leave
        the loop at the same step. Called before every step: in a process group, by
        every rank (a collective on the host, see the module docstring).

        Args:
            ctx: this process's place in the job.
        """
        if not ctx.enabled:
            return self.requested
        flag = torch.tensor([float(self.requested)])  # on the host, for the gloo group
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=ctx.control_group)
        return bool(flag.item())


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

    def check(self, ctx: DistContext, checkpoint: Path) -> None:
        """Raise if any rank has recorded a non-finite loss (a collective: every rank
        must call it).

        Args:
            ctx: this process's place in the job.
            checkpoint: the run's ckpt.pt, to say whether a good one is kept.

        Raises:
            NonFiniteLossError: naming the step, with what to change.
        """
        bad_step = int(all_reduce(self.first_bad_step.clone(), ctx, op=dist.ReduceOp.MAX))
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
