"""torch.compile for training, set up so that a compiled CPU run repeats exactly.

Why it needs setting up: the gradient of the token embedding adds each position's
(n_embd,) gradient into the row of its token id, and many positions share an id.
Inductor's generated C++ kernel for that sum splits the B*T positions across OpenMP
threads that add into shared rows with atomic instructions, so the order of the
additions, and with it the float rounding, changes from one call to the next: two
identical runs of the CPU recipe differed by about 1e-6 in the loss from step 3 on,
and a resumed run drifted from an uninterrupted one. With
``torch.use_deterministic_algorithms(True)``, Inductor calls ``aten.index_put_``
there instead, which then adds on one thread in position order (without the setting
it too adds with atomics on several threads, so it must stay on while training).

The rest of the compiled step already repeats exactly on one machine with the same
number of threads: other reductions keep one partial sum per thread and add them in
thread order, dropout draws its seeds from torch's generator (which the checkpoint
saves), and evaluation, compiled separately for no_grad and its batch sizes, leaves
the training graph as it was.
"""

import torch
from torch import nn


def compile_model(model: nn.Module, device: torch.device) -> nn.Module:
    """``torch.compile(model)``; on CPU, first turn on torch's deterministic algorithms.

    The setting is process-wide and stays on after training (compiled graphs are
    guarded on it, so none compiled without it is reused). ``warn_only``: an
    operation with no deterministic version warns, naming itself, instead of
    stopping the run. On CUDA nothing is set: its kernels are not made reproducible
    here.

    Args:
        model: the uncompiled model, already on ``device``; its forward takes
            (B, T) token ids and optional (B, T) targets.
        device: where it trains.

    Returns:
        The compiled module (its state_dict keys carry the ``_orig_mod.`` prefix).
    """
    if device.type == "cpu":
        torch.use_deterministic_algorithms(True, warn_only=True)
    return torch.compile(model)
