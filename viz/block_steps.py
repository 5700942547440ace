"""The rest of the block after the attention, on the model's own forward pass: what the
chapter after self-attention names (residual connections, normalisation, the
feed-forward network), step by step.

    before   the residual stream the block received              (T, C)
    added    the attention's output (× W_o)                       (T, C)
    after    their sum: the residual stream the second norm reads (T, C)
    norm     the second norm (ln_2) of it: the MLP's input        (T, C)
    up       the MLP's up-projection, W_up·x + b                  (T, 4C)
    act      its activation (GELU or ReLU²): the neurons          (T, 4C)
    down     the down-projection W_down·act + b: the MLP's write  (T, C)
    out      after + down: the block's output, the next block's input

Every table is a tensor `viz.attention_steps.record_forward` kept with a hook on
model/gpt.py's modules; none is computed again. `neuron_derivation` explains one
neuron at one character: its C products with the up-projection's row, the
activation, and the column of W_down it writes with.

    record = record_forward(model, ids)
    steps = block_steps(record, layer=0)
    neuron = neuron_derivation(model, record, layer=0, row=3, neuron=17)
"""

import torch

from model import GPT
from viz.attention_steps import ForwardRecord, Step, model_code
from viz.messages import Message

# The next chapter's steps, numbered after the nine of CHAPTER_STEPS: their names'
# messages (viz/page/messages.json).
BLOCK_CHAPTERS = {n: f"chapter.{n}" for n in range(10, 14)}


def norm_name(config) -> str:
    """The model's norm as the page names it."""
    return "RMSNorm" if config.norm == "rmsnorm" else "LayerNorm"


def block_steps(record: ForwardRecord, layer: int) -> list[Step]:
    """The steps of ``layer`` after its attention, in order (see the module docstring).

    Raises:
        ValueError: for a layer the record lacks.
    """
    n_layer = len(record.layers)
    if not 0 <= layer < n_layer:
        raise ValueError(f"layer must be in 0..{n_layer - 1}, got {layer}")
    kept = record.layers[layer]
    config = record.config
    activation = "GELU" if config.activation == "gelu" else "ReLU²"
    if layer > 0:
        source = Message("block.source.block", {"layer": layer - 1})
    elif config.position == "learned":
        source = Message("block.source.embedding_position")
    else:
        source = Message("block.source.embedding")
    after = Message("block.next.block" if layer + 1 < n_layer else "block.next.final")

    def one(key: str, chapter: int, code: str, name: str, **args) -> Step:
        title = Message(f"step.{key}.title", args)
        formula = Message(f"step.{key}.formula", {"activation": activation} if key == "act" else {})
        return Step(key, chapter, title, formula, model_code(code), kept[name][0])

    return [
        one("block_in", 10, "block_in", "residual_in", source=source),
        one("block_attention", 10, "attention", "attention"),
        one("block_mid", 10, "residual", "residual_mid"),
        one("mlp_x", 11, "ln_2", "mlp_x", norm=norm_name(config)),
        one("up", 12, "up", "up", width=4 * config.n_embd),
        one("act", 12, "act", "act", activation=activation),
        one("down", 12, "down", "mlp", n_embd=config.n_embd),
        one("block_out", 13, "block_out", "residual_out", next=after),
    ]


@torch.no_grad()
def neuron_derivation(model: GPT, record: ForwardRecord, layer: int, row: int, neuron: int) -> dict:
    """How one MLP neuron of ``layer`` fires at character ``row``, and what it writes.

    Returns:
        ``{"layer", "row", "neuron", "x": (C,) the MLP's input at row, "w": (C,) the
        neuron's row of W_up, "products": (C,) x·w, "bias": float or None, "sum": Σ
        products + bias (float64), "pre": the model's up-projection value, "act": the
        model's activation value, "activation": "gelu" or "relu2", "w_down": (C,) the
        neuron's column of W_down, "write": (C,) act · w_down, what this neuron adds to
        the MLP's output at row, "zeroed": True when the record's what-if set this
        neuron (or the whole MLP's output) to 0, so act (or the write) is not the
        activation of sum}``. sum and pre differ only by float32 rounding.

    Raises:
        ValueError: for a layer, row or neuron out of range.
    """
    if not 0 <= layer < len(record.layers):
        raise ValueError(f"layer must be in 0..{len(record.layers) - 1}, got {layer}")
    mlp = model.blocks[layer].mlp
    T, width = record.ids.numel(), mlp.up_proj.out_features
    if not 0 <= row < T:
        raise ValueError(f"row must be in 0..{T - 1}, got {row}")
    if not 0 <= neuron < width:
        raise ValueError(f"neuron must be in 0..{width - 1}, got {neuron}")
    kept = record.layers[layer]
    x = kept["mlp_x"][0, row].detach().cpu()
    w = mlp.up_proj.weight[neuron].detach().cpu()
    products = x * w
    bias = None if mlp.up_proj.bias is None else float(mlp.up_proj.bias[neuron])
    act = kept["act"][0, row, neuron]
    w_down = mlp.down_proj.weight[:, neuron].detach().cpu()
    return {
        "layer": layer,
        "row": row,
        "neuron": neuron,
        "x": x,
        "w": w,
        "products": products,
        "bias": bias,
        "sum": float(products.double().sum()) + (bias or 0.0),
        "pre": float(kept["up"][0, row, neuron]),
        "act": float(act),
        "activation": model.config.activation,
        "w_down": w_down,
        "write": act.detach().cpu() * w_down,
        "zeroed": zeroed(record, layer, neuron),
    }


def zeroed(record: ForwardRecord, layer: int, neuron: int) -> bool:
    """Whether ``record``'s what-if zeroed ``neuron`` of ``layer`` or that layer's MLP."""
    what_if = record.what_if
    if what_if is None or what_if.layer != layer:
        return False
    return "zero_mlp" in what_if.switches or what_if.neuron == neuron
