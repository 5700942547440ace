"""The learned matrices of one head, W_q, W_k and W_v, and Q = X·W_q as the chapter writes
it, on the model's own weights and forward pass.

The model keeps the three matrices of every head in one layer, ``qkv_proj`` (a Linear
from n_embd to 3·n_embd: q, k, v one after the other, each split into n_head groups
of d_k). Head h's W_q is the d_k columns h·d_k .. (h+1)·d_k − 1 of the q part, as a
(C, d_k) matrix: the chapter's X·W_q multiplies X's rows by it. Its Q is read from
qkv_proj's output in the forward pass (`viz.attention_steps.record_forward` keeps it):
before QK-norm and RoPE, which the model applies afterwards (the "q" step).

A clicked cell Q[i][j] is the sum of C products, x_i[c] · W_q[c][j], plus the bias
when the model has one; `projection_cell` lists them.

    columns = head_columns(model, layer=0, head=1)        # {"q": (C, d_k), ...}
    steps = projection_steps(model, record, 0, 1)          # X·W_q, X·W_k, X·W_v
    cell = projection_cell(model, record, 0, 1, "q", row=3, column=5)
"""

import torch

from model import GPT
from viz.attention_steps import ForwardRecord, Step, model_code
from viz.messages import Message

PARTS = ("q", "k", "v")


def head_slice(model: GPT, part: str, head: int) -> slice:
    """The rows of ``qkv_proj.weight`` (3C, C) and of its output's last dimension that
    hold ``part``'s (q, k or v) d_k channels of ``head``.

    Raises:
        ValueError: for a part other than q, k, v or a head outside 0..n_head-1.
    """
    config = model.config
    if part not in PARTS:
        raise ValueError(f"part must be one of q, k, v, got {part!r}")
    if not 0 <= head < config.n_head:
        raise ValueError(f"head must be in 0..{config.n_head - 1}, got {head}")
    start = PARTS.index(part) * config.n_embd + head * config.head_size
    return slice(start, start + config.head_size)


@torch.no_grad()
def head_columns(model: GPT, layer: int, head: int) -> dict[str, torch.Tensor]:
    """This head's W_q, W_k, W_v as the chapter writes them, each (C, d_k) (X·W_q is
    then (T, d_k)), and their biases "b_q", "b_k", "b_v" (d_k,) where the model has
    biases. The model's own parameters (views transposed), on its device.

    Raises:
        ValueError: for a layer or head the model lacks.
    """
    if not 0 <= layer < len(model.blocks):
        raise ValueError(f"layer must be in 0..{len(model.blocks) - 1}, got {layer}")
    proj = model.blocks[layer].attn.qkv_proj
    columns = {}
    for part in PARTS:
        rows = head_slice(model, part, head)
        columns[f"w_{part}"] = proj.weight[rows].T.detach()  # (C, d_k)
        if proj.bias is not None:
            columns[f"b_{part}"] = proj.bias[rows].detach()
    return columns


def projection_steps(model: GPT, record: ForwardRecord, layer: int, head: int) -> list[Step]:
    """X·W_q, X·W_k, X·W_v of one head, (T, d_k) each, from qkv_proj's output in
    ``record`` (before QK-norm and RoPE), as `Step`s of the chapters' step 3."""
    kept = record.layers[layer]
    has_bias = model.blocks[layer].attn.qkv_proj.bias is not None
    steps = []
    for part in PARTS:
        values = kept["qkv"][0, :, head_slice(model, part, head)]
        names = {"name": part.upper(), "part": part}
        title = Message("step.xw.title", {**names, "d_k": model.config.head_size})
        formula = Message("step.xw.formula", {**names, "bias": f" + b_{part}" if has_bias else ""})
        code = model_code("qkv_proj")
        steps.append(Step(f"xw_{part}", 3, title, formula, code, values, head=head))
    return steps


@torch.no_grad()
def projection_cell(
    model: GPT, record: ForwardRecord, layer: int, head: int, part: str, row: int, column: int
) -> dict:
    """How one cell of X·W_q (or W_k, W_v) is made: the C products of x_row and the
    weight column, their sum, the bias, and the model's own value.

    Args:
        model, record: the model and its `record_forward` pass.
        layer, head: which head.
        part: "q", "k" or "v".
        row: the character, 0..T-1.
        column: the channel, 0..d_k-1.

    Returns:
        ``{"part", "row", "column", "x": (C,) x_row, "w": (C,) W_part[:, column],
        "products": (C,) x·w, "bias": float or None, "sum": Σ products + bias in
        float64, "value": the model's Q[row][column] from qkv_proj's output}``.
        sum and value differ only by float32 rounding in the model's matrix product.

    Raises:
        ValueError: for a part, layer, head, row or column out of range.
    """
    T, d_k = record.ids.numel(), model.config.head_size
    rows = head_slice(model, part, head)  # checks part and head
    if not 0 <= row < T or not 0 <= column < d_k:
        raise ValueError(f"the cell must be in rows 0..{T - 1}, columns 0..{d_k - 1}")
    columns = head_columns(model, layer, head)
    x = record.layers[layer]["x"][0, row].detach().cpu()
    w = columns[f"w_{part}"][:, column].cpu()
    products = x * w
    bias = columns.get(f"b_{part}")
    bias = None if bias is None else float(bias[column])
    value = record.layers[layer]["qkv"][0, row, rows][column]
    return {
        "part": part,
        "row": row,
        "column": column,
        "x": x,
        "w": w,
        "products": products,
        "bias": bias,
        "sum": float(products.double().sum()) + (bias or 0.0),
        "value": float(value),
    }
