"""Few-row matrix products for decoding on a CPU: opt-in, used by model/engine.py for
eager CPU generation only.

Why: a decode step multiplies 1 to 16 rows (one new token per sequence) by each weight
matrix. For one row, ``F.linear`` runs a matrix-vector product on one thread; once a
weight outgrows a core's cache the product is bound by streaming it from memory, and
one ``torch.bmm`` over groups of the weight's output rows shares that streaming between
the threads. Smaller weights (a 4 x 128 model's) gain nothing and lose the bmm's
overhead, so they keep ``F.linear`` (docs/benchmarks.md, sampling speed). The network itself is
unchanged: `CPUProducts.installed` routes each ``nn.Linear`` of the model through
`CPUProducts.linear` for the length of one forward pass, and everything else is
model/gpt.py's own code.

The sums are the same products added in another order (about 1e-6 relative), so the
logits can differ from ``F.linear``'s in their last bits.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

# A weight's output rows are split into the first of these numbers of groups that
# divides them (a weight with none, such as a 65-character LM head, keeps F.linear).
GROUPS = (8, 4, 2)
# Weights of at least this many bytes take the products: a core's cache holds smaller
# ones, whose products F.linear already runs at the cache's speed.
MIN_WEIGHT_BYTES = 1 << 19
# Products of 2 .. FEW_ROWS rows (a batch's decode step) take `few_rows_linear`, on
# weights regrouped once per generation; more rows (a prefill) take F.linear.
FEW_ROWS = 16


def row_groups(out_features: int) -> int | None:
    """The number of row groups (one of GROUPS) a weight of ``out_features`` output rows
    is split into, or None if none divides them."""
    return next((g for g in GROUPS if out_features % g == 0), None)


def one_row_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, groups: int
) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` for one row (a batch-1 decode step), as one batched
    product over groups of the weight's output rows.

    Args:
        x: (..., C) activations holding one row (x.numel() == C).
        weight: (N, C), contiguous, N divisible by groups.
        bias: (N,) or None.
        groups: g, the number of row groups.

    Returns:
        (..., N), as ``F.linear``.

    Raises:
        ValueError: if x holds more than one row or N is not divisible by groups.
    """
    N, C = weight.shape
    if x.numel() != C:
        raise ValueError(f"one_row_linear: x holds {x.numel() // C} rows of {C}, not one")
    if N % groups:
        raise ValueError(f"one_row_linear: N = {N} output rows do not split into {groups} groups")
    # (g, N/g, C) @ (g, C, 1) -> (g, N/g, 1). The column is the row repeated for each
    # group (stride 0) with strides (1, C), the layout bmm's fast path reads.
    row = x.reshape(C)
    column = row.as_strided((groups, C, 1), (0, row.stride(0), C))
    out = torch.bmm(weight.view(groups, N // groups, C), column).view(*x.shape[:-1], N)
    return out if bias is None else out + bias.to(out.dtype)


def group_columns(weight: torch.Tensor, groups: int) -> torch.Tensor:
    """A (N, C) weight as `few_rows_linear` reads it: (groups, C, N/groups), group g
    holding output rows g*N/groups .. (g+1)*N/groups - 1, transposed and contiguous (a
    copy: it doubles the weight's memory while it is kept).

    Raises:
        ValueError: if N is not divisible by groups.
    """
    N, C = weight.shape
    if N % groups:
        raise ValueError(f"group_columns: N = {N} output rows do not split into {groups} groups")
    return weight.view(groups, N // groups, C).transpose(1, 2).contiguous()


def few_rows_linear(
    x: torch.Tensor, grouped: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` for a few rows (a batch's decode step), as one
    batched product over `group_columns` (weight), whose groups bmm shares between the
    threads.

    Args:
        x: (..., C) activations, M rows in all.
        grouped: (g, C, N/g), `group_columns` of the (N, C) weight.
        bias: (N,) or None.

    Returns:
        (..., N), as ``F.linear``.
    """
    groups, C, width = grouped.shape
    rows = x.reshape(1, -1, C).expand(groups, -1, C)  # the same M rows for every group
    if bias is None:
        out = torch.bmm(rows, grouped)
    else:  # (g, M, N/g) + the bias of each group's outputs
        out = torch.baddbmm(bias.view(groups, 1, width), rows, grouped)
    # (g, M, N/g) -> (M, g, N/g) -> (M, N): output n = g * N/g + j
    return out.transpose(0, 1).reshape(*x.shape[:-1], groups * width)


def plain_linear(module: nn.Module) -> bool:
    """Whether ``module`` computes ``nn.Linear``'s own forward: not a subclass with its
    own (a LoRA or quantised layer), nor a forward set on the instance. Only those may
    be routed through the products, or decoding would skip that computation."""
    return (
        isinstance(module, nn.Linear)
        and type(module).forward is nn.Linear.forward
        and "forward" not in vars(module)
    )


class CPUProducts:
    """The few-row products of one generation of ``model``: for each plain ``nn.Linear``
    (`plain_linear`) whose weight holds MIN_WEIGHT_BYTES or more and whose rows split
    into GROUPS, batch 1 takes `one_row_linear`, a batch of 2 .. FEW_ROWS sequences
    `few_rows_linear` on weights regrouped now (so the weights must not change until
    the generation ends); any other product and layer, its own forward.

    Args:
        model: the model being decoded (any module holding ``nn.Linear`` layers).
        batch_size: sequences decoded together.
    """

    def __init__(self, model: nn.Module, batch_size: int):
        self.layers = [
            m
            for m in model.modules()
            if plain_linear(m)
            and row_groups(m.out_features)
            and m.weight.numel() * m.weight.element_size() >= MIN_WEIGHT_BYTES
        ]
        # layer -> its weight as `group_columns` gives it, for batches of 2 .. FEW_ROWS.
        self.grouped: dict[nn.Linear, torch.Tensor] = {}
        if 2 <= batch_size <= FEW_ROWS:
            self.grouped = {
                m: group_columns(m.weight, row_groups(m.out_features)) for m in self.layers
            }

    def linear(self, layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        """``layer(x)`` for (..., in_features) x: on a few-row product when it has one."""
        if x.numel() == layer.in_features and layer.weight.is_contiguous():
            return one_row_linear(x, layer.weight, layer.bias, row_groups(layer.out_features))
        grouped = self.grouped.get(layer)
        if grouped is not None and x.numel() <= FEW_ROWS * layer.in_features:
            return few_rows_linear(x, grouped, layer.bias)
        return F.linear(x, layer.weight, layer.bias)

    @contextmanager
    def installed(self) -> Iterator[None]:
        """Within this block, each ``nn.Linear`` of the model computes through `linear`
        (its ``forward`` is set on the instance, which ``nn.Module.__call__`` calls);
        on exit the layers are as before. The engine installs them around one forward
        pass at a time, so nothing outside decoding ever sees them."""
        for layer in self.layers:
            layer.forward = partial(self.linear, layer)
        try:
            yield
        finally:
            for layer in self.layers:
                del layer.forward
