"""Data-parallel training with PyTorch Distributed (DistributedDataParallel).

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
"""

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from training.config import ConfigError
from training.device import resolve_device


@dataclass(frozen=True)
class DistContext:
    """Where this process stands in the job.

    Attributes:
        rank: global index of this process, 0..world_size-1.
        local_rank: index on this node (picks the GPU).
        world_size: number of processes.
        backend: the process group's backend ("nccl" on CUDA, "gloo" on CPU), or None
            for plain single-process training.
    """

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    backend: str | None = None

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
    return DistContext(rank, local_rank, world_size, backend), device


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
