"""The model's linear layers, with a faster route for the few-row products of decoding.

Decoding with a KV cache runs each weight matrix on the one new token of each
sequence: a (B, C) by (C, N) product with B as small as 1. Such a product reads every
weight once and does one multiply-add per weight, so its speed is set by how fast the
weights stream from memory. On CPU, PyTorch's kernel for it (``F.linear``) streamed
the 42.5 MB of weights of the 6-layer, 384-wide model at about 10 GB/s on our 2-core
machines, on one core, while the memory delivers over 25 GB/s: 3.9 ms of a 5.3 ms
decode step. (One small matrix multiplied again and again stays in the cache and runs far
faster; a model's weights, read once per step, do not.)

Two routes make these products faster (bench/sample_speed.py); they sum the same
products in another order, so results agree with ``F.linear`` to about 1e-6 relative:

- One row (batch 1): split the weight's N output rows into groups and multiply the
  groups as one batched product (``torch.bmm``): each core streams its own share of
  the rows. A decode step runs about 1.8x faster.
- Several rows (batch 2 .. FEW_ROWS): oneDNN's linear on a copy of the weight packed
  into the layout its kernels read fastest. 24 products of 8 rows, the weights of a
  step of the 6-layer model, took 1.9-2.0 ms, against 3.4 ms grouped and 4.6 ms with
  ``F.linear`` (AMD EPYC, 2 cores). A generation packs the weights at its first
  one-token decode pass and lends them to the layers only during those passes
  (`PackedWeights`), within the lifetime of its KV cache, which already assumes that
  the weights do not change meanwhile. The copies about double the weights' memory
  while the generation lasts. (The two oneDNN operators are not a documented API:
  where the packing one is missing or fails, under autocast and while
  ``torch.compile`` traces the model, several rows take the grouped route.)

Training products, and a prefill's up to its last layer's query/key/value projection,
have many rows and keep ``F.linear``; a prefill's last-position products (``last_only``)
have one row per sequence and take the grouped route (the packed weights are lent to
one-token passes only).
"""

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

# Products with at most this many rows (B * T) take a few-row route on CPU.
FEW_ROWS = 16
# Row groups of the weight: enough to keep a few cores streaming.
GROUPS = (8, 4, 2)


def few_row_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, groups: int
) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` for a few rows, as a batched product over groups of
    the weight's output rows (see the module docstring).

    One row: each group is a matrix-vector product, (N/g, C) @ (C, 1), and the g of them
    run in parallel; the sums may round differently from ``F.linear`` in the last bits
    (about 1e-6 relative). Several rows: each group is (R, C) @ (C, N/g), the dot
    products of ``F.linear`` taken a group of columns at a time, spread over the cores.

    Args:
        x: (..., C) activations whose leading dimensions hold R rows in all.
        weight: (N, C).
        bias: (N,) or None.
        groups: g, the number of row groups; N must be divisible by it.

    Returns:
        (..., N), as ``F.linear``.

    Raises:
        ValueError: if N is not divisible by groups.
    """
    N, C = weight.shape
    if N % groups:
        raise ValueError(f"few_row_linear: N = {N} output rows do not split into {groups} groups")
    grouped = weight.view(groups, N // groups, C)
    if x.numel() == C:
        # (g, N/g, C) @ (g, C, 1) -> (g, N/g, 1), read as (..., N). The column is the
        # row, repeated for each group (stride 0) and read with strides (1, C) as the
        # row transposed would be: bmm's fast path needs that layout (a (C, 1) view,
        # strides (1, 1), made each product 9x slower). One as_strided view instead
        # of a transpose and an expand: a batch-1 decode step is mostly such small ops.
        row = x.reshape(C)
        column = row.as_strided((groups, C, 1), (0, row.stride(0), C))
        out = torch.bmm(grouped, column).view(*x.shape[:-1], N)
    else:
        # (g, R, C) @ (g, C, N/g) -> (g, R, N/g) -> (R, N)
        rows = x.reshape(-1, C)
        out = torch.bmm(rows.expand(groups, -1, -1), grouped.transpose(1, 2))
        out = out.transpose(0, 1).reshape(*x.shape[:-1], N)
    # bias in out's dtype, as F.linear under autocast (bf16 on CPU) adds it.
    return out if bias is None else out + bias.to(out.dtype)


def pack_for_onednn(weight: torch.Tensor) -> torch.Tensor | None:
    """A copy of the weight in oneDNN's packed layout, for `packed_linear`.

    Args:
        weight: (N, C) float32 CPU weight of a linear layer.

    Returns:
        An opaque oneDNN tensor (it cannot be saved or copied), or None where this
        PyTorch has no oneDNN or its packing operator is missing or fails (no error is
        raised: the caller then keeps the grouped route).
    """
    if not torch.backends.mkldnn.is_available():
        return None
    try:
        return torch.ops.mkldnn._reorder_linear_weight(weight.detach())
    except (AttributeError, NotImplementedError, RuntimeError):
        return None


def packed_linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` with the weight as `pack_for_onednn` packed it:
    oneDNN's inner product (its fully-connected primitive), same sums in another order.

    Args:
        x: (..., C) float32 CPU activations.
        packed: the packed (N, C) weight.
        bias: (N,) float32, or None.

    Returns:
        (..., N) float32.

    Raises:
        RuntimeError: from oneDNN, if C does not match the weight (`Linear.forward`
            checks the width first, so that F.linear's clearer error is the one seen).
    """
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


class Linear(nn.Linear):
    """``nn.Linear`` (y = x Wᵀ + b, weight (out_features, in_features)) whose products
    of at most FEW_ROWS rows, on CPU and without autograd (decoding), take a few-row
    route (see the module docstring); every other product is ``F.linear``. Same
    parameters, same state_dict keys.

    Args:
        in_features, out_features, bias: as ``nn.Linear``.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        super().__init__(in_features, out_features, bias=bias)
        # None where out_features splits evenly into none of GROUPS (a 65-character
        # LM head): such a layer always uses F.linear.
        self.groups = next((g for g in GROUPS if out_features % g == 0), None)
        # The weight packed for oneDNN, lent by `PackedWeights` during a decode pass.
        self.packed: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Map (..., in_features) to (..., out_features)."""
        # Autograd first: a training step is answered by the first test.
        if (
            not torch.is_grad_enabled()
            and self.groups is not None
            and x.device.type == "cpu"
            and x.size(-1) == self.in_features  # else F.linear names the mismatch
            and x.numel() <= FEW_ROWS * self.in_features
            and self.weight.is_contiguous()
        ):
            if (
                self.packed is not None
                and x.numel() > self.in_features
                and x.dtype == torch.float32
                and not torch.is_autocast_enabled("cpu")
                and not torch.compiler.is_compiling()
            ):
                return packed_linear(x, self.packed, self.bias)
            return few_row_linear(x, self.weight, self.bias, self.groups)
        return F.linear(x, self.weight, self.bias)

    def __getstate__(self) -> dict:
        """The module's state for copy.deepcopy and pickle, without the packed weight
        (an opaque oneDNN tensor cannot be copied)."""
        state = super().__getstate__()
        state["packed"] = None
        return state


class PackedWeights:
    """The weights of a model's float32 CPU `Linear` layers, packed for oneDNN once for
    one generation, and lent to the layers during each of its one-token decode passes.

    Packing happens at the first `active`, and only where the packed route can serve:
    batch_size 2 .. FEW_ROWS (a decode step has one row per sequence); otherwise
    nothing is packed and the layers keep the grouped route. Outside `active`, no layer
    holds a packed weight, so no copy can be used after its weight has changed, however
    it changed. Inside, the weights must not change, as for the generation's KV cache.

    Args:
        model: a module holding `Linear` layers (a `model.GPT`).
        batch_size: B, the sequences decoded together.
    """

    def __init__(self, model: nn.Module, batch_size: int):
        self.layers: list[Linear] = []
        if 2 <= batch_size <= FEW_ROWS:
            self.layers = [
                m
                for m in model.modules()
                if isinstance(m, Linear)
                and m.groups is not None  # as Linear.forward: the others use F.linear
                and m.weight.is_contiguous()
                and m.weight.device.type == "cpu"
                and m.weight.dtype == torch.float32
            ]
        self.packed: list[torch.Tensor | None] | None = None  # packed when first lent

    @contextmanager
    def active(self) -> Iterator[None]:
        """Within this block, the layers multiply several rows (float32, no autograd,
        not under autocast or torch.compile tracing) with the packed weights; on exit,
        even by an error, every layer's `Linear.packed` is None again. The first call
        packs the weights (about one copy of them)."""
        if self.packed is None:
            self.packed = [pack_for_onednn(layer.weight) for layer in self.layers]
        for layer, packed in zip(self.layers, self.packed, strict=True):
            layer.packed = packed
        try:
            yield
        finally:
            for layer in self.layers:
                layer.packed = None
