"""torch.compile for training (train.compile), set up so that a compiled CPU run
repeats exactly.

The gradient of the token embedding adds each position's (n_embd,) gradient into the
row of its token id, and many positions share an id. Inductor's generated C++ kernel
for that sum splits the B*T positions across OpenMP threads that add into shared rows
with atomic instructions, so the order of the additions, and with it the float
rounding, changes from one call to the next: two identical runs of the CPU recipe
differed by about 1e-6 in the loss from step 3 on, and a resumed run drifted from an
uninterrupted one. With ``torch.use_deterministic_algorithms(True)``, Inductor calls
``aten.index_put_`` there instead, which then adds on one thread in position order
(without the setting it too adds with atomics on several threads). The setting is
process-wide and compiled graphs are guarded on it, and the compiled code runs at every
step and evaluation, so it stays on while the trainer lives and is put back as it was
when the trainer closes (`deterministic_algorithms`). The rest of the compiled step
already repeats exactly on one machine with the same number of threads: other
reductions keep one partial sum per thread and add them in thread order, dropout draws
its seeds from torch's generator (which the checkpoint saves), and evaluation,
compiled separately for no_grad and its batch sizes, leaves the training graph as it
was.
"""

import contextlib
from collections.abc import Iterator

import torch
from torch import nn

from model.compiler import missing_compiler
from training.config import TrainConfig


@contextlib.contextmanager
def deterministic_algorithms() -> Iterator[None]:
    """torch's deterministic algorithms on for the ``with`` block, and afterwards as they
    were (see the module docstring for why a compiled CPU run needs them).

    ``warn_only``: an operation with no deterministic version warns, naming itself,
    instead of stopping the run.
    """
    before = torch.are_deterministic_algorithms_enabled()
    warn_only_before = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before, warn_only=warn_only_before)


def compile_model(model: nn.Module, device: torch.device, scope: contextlib.ExitStack) -> nn.Module:
    """``torch.compile(model)``; on CPU with torch's deterministic algorithms on until
    ``scope`` closes (see the module docstring). On CUDA nothing is set: its kernels
    are not made reproducible here.

    Args:
        model: the uncompiled model, already on ``device``; its forward takes
            (B, T) token ids and optional (B, T) targets.
        device: where it trains.
        scope: what the trainer puts back when it closes.

    Returns:
        The compiled module (its state_dict keys carry the ``_orig_mod.`` prefix).
    """
    if device.type == "cpu":
        scope.enter_context(deterministic_algorithms())
    return torch.compile(model)


def resolve_compile(tc: TrainConfig, device: torch.device) -> str:
    """train.compile where torch.compile cannot build kernels (no C++ compiler: a slim
    container, a fresh laptop): set to False in the working copy ``tc``, so the run
    trains eager rather than failing in its first step, and says so.

    Returns:
        The line to print before the first step ("" when nothing changed).
    """
    missing = missing_compiler(device) if tc.compile else None
    if missing is None:
        return ""
    tc.compile = False
    return (
        f"train.compile: {missing}, so this run trains uncompiled (slower per step); "
        "to compile, install one (Debian/Ubuntu: apt install g++), or set "
        "train.compile=false to leave this line out"
    )
