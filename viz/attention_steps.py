"""Self-attention step by step on a trained model's own numbers: what the explorer's page
and ``explore_attention.py --steps`` show, and the page's what-if switches.

`record_forward` runs the model once, in eval mode (no dropout), and keeps every tensor
that the Korean chapters' steps name, for every layer and head, as the model computes
them:

    X            the attention's input: the residual stream after the block's norm
    X·Xᵀ         the chapters' first form (no learned projections), its masked softmax
                 and their weighted sum weights·X: computed here from X, the tables the
                 model does not compute
    q, k, v      per head, after QK-norm and RoPE where the model has them
    q·kᵀ         the raw scores; then ÷ √d_k; then the causal mask (the future is -inf)
    weights      the softmax of each row; then weights·v
    heads        concatenated; × W_o (out_proj); added to the residual stream

and for the rest of the block and the head (viz/block_steps.py, viz/head_projections.py,
viz/logit_attribution.py): qkv_proj's output before QK-norm and RoPE (X·W_q, X·W_k,
X·W_v), the second norm, the MLP's up-projection, activation and output, the final
norm's input and output, and the LM head's logits before any soft cap.

The steps inside the attention come through `model.record_attention`'s step hook (the
steps of `model.gpt.explicit_attention`); the rest through PyTorch's module hooks
(`nn.Module.register_forward_pre_hook`, `register_forward_hook`) on each block's
modules. So nothing here re-computes what the model computes.

A `WhatIf` changes one step of one head (`SWITCHES`), or zeroes a part of one block
(`BLOCK_SWITCHES`: a head's output, the MLP, one neuron), inside that same forward pass:
the layers after it, the final norm and the LM head run as usual on what the change
left. Such a pass is not what the model computes; the page marks it so.

    record = record_forward(model, ids)                        # (T,) ids
    steps = attention_steps(record, layer=0, head=1)           # list of Step, in order
    what_if = record_forward(model, ids, WhatIf(0, 1, ("no_mask",)))
"""

import math
from dataclasses import dataclass, field

import torch

from model import GPT, GPTConfig, causal_mask, record_attention
from viz.array_encoding import encode_arrays
from viz.messages import Message, message_json, say

# Each switch, and the catalogue's message a learner reads on its button
# (viz/page/messages.json).
SWITCHES = {
    "no_scale": "switch.no_scale",
    "no_mask": "switch.no_mask",
    "xx_scores": "switch.xx_scores",
    "uniform": "switch.uniform",
}
# The step a switch replaces, in explicit_attention's names.
SWITCHED_STEP = {"xx_scores": "scores", "no_scale": "scaled", "no_mask": "masked"}
SWITCHED_STEP["uniform"] = "weights"
# Switches that take a part of the block out: its write into the residual stream
# becomes 0 (Meng et al. 2022 and Olsson et al. 2022 call this zero-ablation).
BLOCK_SWITCHES = {
    "zero_head": "switch.zero_head",
    "zero_mlp": "switch.zero_mlp",
    "zero_neuron": "switch.zero_neuron",
}
SWITCHED_STEP["zero_head"] = "out"


@dataclass(frozen=True)
class WhatIf:
    """Switches (keys of `SWITCHES` and `BLOCK_SWITCHES`) applied to one head of one
    layer, or to that layer's MLP ("zero_mlp") or one of its neurons ("zero_neuron").

    Args:
        layer: 0-based layer.
        head: 0-based head of that layer (the MLP switches leave it unused).
        switches: names from `SWITCHES` or `BLOCK_SWITCHES`, any order; stored sorted
            and without repeats.
        neuron: the MLP neuron "zero_neuron" zeroes, 0 .. 4·n_embd − 1; None otherwise.

    Raises:
        ValueError: naming an unknown switch and the known ones; "zero_neuron" without
            a neuron, or a neuron without "zero_neuron".
    """

    layer: int
    head: int
    switches: tuple[str, ...] = ()
    neuron: int | None = None

    def __post_init__(self):
        unknown = [s for s in self.switches if s not in SWITCHES and s not in BLOCK_SWITCHES]
        if unknown:
            raise ValueError(
                f"unknown what-if switch {', '.join(map(repr, unknown))}; "
                f"the switches are {', '.join([*SWITCHES, *BLOCK_SWITCHES])}"
            )
        if ("zero_neuron" in self.switches) != (self.neuron is not None):
            raise ValueError(
                "the switch zero_neuron needs the neuron to zero, and a neuron needs "
                "zero_neuron: give both or neither"
            )
        object.__setattr__(self, "switches", tuple(sorted(set(self.switches))))

    def check(self, n_layer: int, n_head: int, n_neuron: int | None = None) -> None:
        """Raise ValueError if layer, head or neuron is outside the model's
        0..n_layer-1, 0..n_head-1, 0..n_neuron-1 (n_neuron: the MLP's width, 4·n_embd)."""
        if not 0 <= self.layer < n_layer:
            raise ValueError(f"what-if layer must be in 0..{n_layer - 1}, got {self.layer}")
        if not 0 <= self.head < n_head:
            raise ValueError(f"what-if head must be in 0..{n_head - 1}, got {self.head}")
        if self.neuron is not None and n_neuron is not None and not 0 <= self.neuron < n_neuron:
            raise ValueError(f"what-if neuron must be in 0..{n_neuron - 1}, got {self.neuron}")

    def describe(self, lang: str = "en") -> str:
        """One line in ``lang`` ("en", "ko"): which head (or MLP neuron), and what is
        switched."""
        texts = {**SWITCHES, **BLOCK_SWITCHES}
        changes = "; ".join(say(texts[s], lang) for s in self.switches)
        if self.neuron is not None:
            changes += " " + say("whatif.neuron", lang, neuron=self.neuron)
        if set(self.switches) <= {"zero_mlp", "zero_neuron"}:
            return say("whatif.describe_layer", lang, layer=self.layer, changes=changes)
        return say("whatif.describe", lang, layer=self.layer, head=self.head, changes=changes)

    def on(self, layer: int, head: int, switch: str) -> bool:
        """True when ``switch`` is on for ``head`` of ``layer``."""
        return (self.layer, self.head) == (layer, head) and switch in self.switches


@dataclass
class ForwardRecord:
    """One forward pass over a prompt, every step kept. Tensors keep the model's device
    and dtype, and the batch dimension of 1 the model ran with.

    Attributes:
        ids: (T,) int64 token ids.
        logits: (1, T, vocab_size), the model's output.
        layers: one dict per layer: "residual_in" (1, T, C) the block's input; "x"
            (1, T, C) the attention's input (the block's first norm); "qkv" (1, T, 3C)
            qkv_proj's output (q, k, v before QK-norm and RoPE); "q", "k", "v", "out"
            (1, n_head, T, d_k); "scores", "scaled", "masked", "weights" (1, n_head,
            T, T); "concat" (1, T, C) the heads side by side; "projected" (1, T, C)
            out_proj's output; "attention" (1, T, C) the attention module's output;
            "residual_mid" (1, T, C) the residual stream after the attention is added
            (the block's second norm reads it); "mlp_x" (1, T, C) the second norm's
            output, the MLP's input; "up" (1, T, 4C) the up-projection; "act" (1, T,
            4C) the activation; "mlp" (1, T, C) the MLP's output (its down-projection);
            "residual_out" (1, T, C) the block's output.
        config: the model's configuration.
        what_if: the switches this pass ran with, or None: the model's own pass.
        final: "residual" (1, T, C) the final norm's input (the last block's output),
            "normed" (1, T, C) its output, "head_logits" (1, T, vocab_size) the LM
            head's output before any soft cap.
    """

    ids: torch.Tensor
    logits: torch.Tensor
    layers: list[dict[str, torch.Tensor]]
    config: GPTConfig = field(repr=False)
    what_if: WhatIf | None = None
    final: dict[str, torch.Tensor] = field(default_factory=dict, repr=False)


def switched(name: str, tensor: torch.Tensor, kept: dict, what_if: WhatIf) -> torch.Tensor:
    """Step ``name``'s (1, n_head, ...) tensor with ``what_if``'s head changed by the
    switch that replaces this step (if any); ``kept`` holds the layer's steps so far."""
    head, on = what_if.head, set(what_if.switches)
    replacement = None
    if name == "scores" and "xx_scores" in on:
        x = kept["x"][0]  # (T, C): the attention's input, as the chapter's X
        replacement = x @ x.transpose(-2, -1)
    elif name == "scaled" and "no_scale" in on:
        replacement = kept["scores"][0, head]  # the step's input, not divided
    elif name == "masked" and "no_mask" in on:
        replacement = kept["scaled"][0, head]  # the future stays as it was
    elif name == "weights" and "uniform" in on:
        # Every position the row may see (not -inf after the mask step) weighs the same.
        visible = (kept["masked"][0, head] != float("-inf")).to(tensor.dtype)
        replacement = visible / visible.sum(dim=-1, keepdim=True)
    elif name == "out" and "zero_head" in on:
        replacement = torch.zeros_like(tensor[0, head])
    if replacement is None:
        return tensor
    tensor = tensor.clone()
    tensor[0, head] = replacement.to(tensor.dtype)
    return tensor


@torch.no_grad()
def record_forward(model: GPT, ids: torch.Tensor, what_if: WhatIf | None = None) -> ForwardRecord:
    """Run ``model`` once over ``ids`` in eval mode and keep every step (see the module
    docstring); with ``what_if``, change that step of that head (or zero that part of
    the block) on the way.

    Restores the model's previous mode, and removes every hook, even on an error.

    Args:
        model: a GPT.
        ids: (T,) int64 token ids, 1 <= T <= block_size.
        what_if: switches for one head, or None for the model's own computation. No
            switch at all (an empty ``switches``) is the model's own computation too.

    Returns:
        The `ForwardRecord`.

    Raises:
        ValueError: if ids is not 1-D, is empty or is longer than block_size, or
            ``what_if`` names a layer, head or neuron the model lacks.
    """
    if ids.dim() != 1 or ids.numel() == 0:
        raise ValueError(f"ids must be a non-empty 1-D tensor, got shape {tuple(ids.shape)}")
    config = model.config
    if what_if is not None:
        what_if.check(config.n_layer, config.n_head, model.blocks[0].mlp.up_proj.out_features)
        if not what_if.switches:
            what_if = None
    layers: list[dict[str, torch.Tensor]] = [{} for _ in model.blocks]
    final: dict[str, torch.Tensor] = {}

    def keep_input(kept: dict, name: str):
        def hook(module, args):
            kept[name] = args[0]

        return hook

    def keep_output(kept: dict, name: str):
        def hook(module, args, output):
            kept[name] = output

        return hook

    def zero_output(module, args, output):  # "zero_mlp"
        return torch.zeros_like(output)

    def zero_neuron(module, args, output):  # "zero_neuron"
        output = output.clone()
        output[..., what_if.neuron] = 0
        return output

    def step_hook(layer: int, name: str, tensor: torch.Tensor) -> torch.Tensor:
        if what_if is not None and layer == what_if.layer:
            tensor = switched(name, tensor, layers[layer], what_if)
        layers[layer][name] = tensor
        return tensor

    handles = []
    if what_if is not None:  # registered first: the hooks that keep see the change
        mlp = model.blocks[what_if.layer].mlp
        if "zero_mlp" in what_if.switches:
            handles.append(mlp.register_forward_hook(zero_output))
        if "zero_neuron" in what_if.switches:
            handles.append(mlp.activation.register_forward_hook(zero_neuron))
    for block, kept in zip(model.blocks, layers, strict=True):
        handles += [
            block.register_forward_pre_hook(keep_input(kept, "residual_in")),
            block.attn.register_forward_pre_hook(keep_input(kept, "x")),
            block.attn.qkv_proj.register_forward_hook(keep_output(kept, "qkv")),
            block.attn.out_proj.register_forward_pre_hook(keep_input(kept, "concat")),
            block.attn.out_proj.register_forward_hook(keep_output(kept, "projected")),
            block.attn.register_forward_hook(keep_output(kept, "attention")),
            block.ln_2.register_forward_pre_hook(keep_input(kept, "residual_mid")),
            block.mlp.register_forward_pre_hook(keep_input(kept, "mlp_x")),
            block.mlp.up_proj.register_forward_hook(keep_output(kept, "up")),
            block.mlp.activation.register_forward_hook(keep_output(kept, "act")),
            block.mlp.register_forward_hook(keep_output(kept, "mlp")),
            block.register_forward_hook(keep_output(kept, "residual_out")),
        ]
    handles += [
        model.ln_f.register_forward_pre_hook(keep_input(final, "residual")),
        model.ln_f.register_forward_hook(keep_output(final, "normed")),
        model.lm_head.register_forward_hook(keep_output(final, "head_logits")),
    ]
    was_training = model.training
    model.eval()
    try:
        device = next(model.parameters()).device
        with record_attention(model, step_hook):
            logits, _ = model(ids.to(device).unsqueeze(0))
    finally:
        model.train(was_training)
        for handle in handles:
            handle.remove()
    return ForwardRecord(ids.cpu(), logits, layers, config, what_if, final)


def xx_scores(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The chapters' first form of attention, with no learned projections: scores X·Xᵀ
    and their masked softmax (no ÷√d_k either: the chapter has none).

    Args:
        x: (T, C) the attention's input.

    Returns:
        ``(scores, weights)``, each (T, T); weights are 0 above the diagonal.
    """
    T = x.size(0)
    scores = x @ x.transpose(-2, -1)
    masked = scores.masked_fill(~causal_mask(T, x.device), float("-inf"))
    return scores, torch.softmax(masked, dim=-1)


@dataclass
class Step:
    """One table of the step-by-step view.

    Attributes:
        key: a name the page and tests use ("x", "q", "scores", ...).
        chapter: the chapters' step it belongs to, 1..9 (see `CHAPTER_STEPS`).
        title: what it is, in a few words: a message of viz/page/messages.json (under a
            what-if switch, what the switch changed).
        formula: how it is computed, in the chapters' notation (a message too).
        code: where model/gpt.py computes it (or viz/attention_steps.py for X·Xᵀ).
        values: (rows, columns) float tensor on the CPU: rows are the prompt's
            characters; -inf marks the masked future.
        kind: "weights" (rows of probabilities), "masked" (scores with -inf), or
            "values" (any real numbers).
        head: the head it belongs to, or None for a table of the whole layer.
    """

    key: str
    chapter: int
    title: Message
    formula: Message
    code: str
    values: torch.Tensor
    kind: str = "values"
    head: int | None = None

    @property
    def columns_are_characters(self) -> bool:
        """True for a T × T table (columns: the characters attended to), False for
        channels (T × C or T × d_k)."""
        return self.key in CHARACTER_COLUMNS


# The steps whose columns are the prompt's characters (T × T).
CHARACTER_COLUMNS = {"xx", "xx_weights", "scores", "scaled", "masked", "weights"}


# The chapters' steps, numbered as the page numbers them: their names' messages.
CHAPTER_STEPS = {n: f"chapter.{n}" for n in range(1, 10)}


# Where model/gpt.py computes each step: (function, a piece of its source, verbatim).
# tests/viz/test_attention_code_lines.py holds each piece to that function's source, so the
# page never shows a line the model does not have.
MODEL_CODE = {
    "x": ("Block.forward", "self.ln_1(x)"),
    "qkv": ("CausalSelfAttention.forward", "q, k, v = self.split_heads(self.qkv_proj(x))"),
    "qk_norm": ("CausalSelfAttention.split_heads", "q = F.rms_norm(q, (q.size(-1),))"),
    "rope": (
        "CausalSelfAttention.forward",
        "q, k = self.rotary(q, angles), self.rotary(k, angles)",
    ),
    "scores": ("explicit_attention", "q @ k.transpose(-2, -1)"),
    "scaled": ("explicit_attention", "scores / math.sqrt(d_k)"),
    "masked": (
        "explicit_attention",
        'scores.masked_fill(~causal_mask(T, q.device), float("-inf"))',
    ),
    "weights": ("explicit_attention", "torch.softmax(scores, dim=-1)"),
    # `attended` is the weights (dropout is off in eval mode).
    "out": ("explicit_attention", "attended @ v"),
    "concat": ("CausalSelfAttention.forward", "out.transpose(1, 2).contiguous().view(B, T, C)"),
    "projected": ("CausalSelfAttention.forward", "self.out_proj(out)"),
    "residual": ("Block.forward", "x = x + self.attn(self.ln_1(x), kv_cache)"),
    # The chapter's X·W_q (viz/head_projections.py) and the rest of the block
    # (viz/block_steps.py).
    "qkv_proj": ("CausalSelfAttention.forward", "self.qkv_proj(x)"),
    "block_in": ("Block.forward", "def forward(self, x"),
    "attention": ("Block.forward", "self.attn(self.ln_1(x), kv_cache)"),
    "ln_2": ("Block.forward", "self.ln_2(x)"),
    "up": ("MLP.forward", "self.up_proj(x)"),
    "act": ("MLP.forward", "self.activation(self.up_proj(x))"),
    "down": ("MLP.forward", "self.down_proj(self.activation(self.up_proj(x)))"),
    "block_out": ("Block.forward", "x = x + self.mlp(self.ln_2(x))"),
}
# Where the one table the model does not compute comes from (X·Xᵀ; the page says so).
XX_CODE = "viz/attention_steps.py · xx_scores"


def model_code(*keys: str) -> str:
    """The `MODEL_CODE` pieces of ``keys``, in order, as the page shows them:
    "function: source; function: source"."""
    return "; ".join(f"{where}: {source}" for where, source in map(MODEL_CODE.get, keys))


def qk_note(config) -> Message:
    """Which of QK-norm and RoPE the model applies to q and k, in order."""
    rope = config.position == "rope"
    if config.qk_norm:
        return Message("qk.norm_rope" if rope else "qk.norm")
    return Message("qk.rope" if rope else "qk.none")


def layer_steps(record: ForwardRecord, layer: int) -> tuple[list[Step], list[Step]]:
    """The steps shared by every head of ``layer`` (0-based), as two lists: those before
    the heads (X, X·Xᵀ, its softmax and weights·X) and those after (the heads
    concatenated, × W_o, added to the residual stream)."""
    kept = record.layers[layer]
    config = record.config
    x = kept["x"][0]
    xx, xx_weights = xx_scores(x)
    norm = "RMSNorm" if config.norm == "rmsnorm" else "LayerNorm"

    def shared(key: str, chapter: int, code: str, values, kind="values", **args) -> Step:
        title, formula = Message(f"step.{key}.title", args), Message(f"step.{key}.formula")
        return Step(key, chapter, title, formula, code, values, kind)

    return [
        shared("x", 1, model_code("x"), x, norm=norm),
        shared("xx", 2, XX_CODE, xx),
        shared("xx_weights", 2, XX_CODE, xx_weights, "weights"),
        shared("xx_out", 2, XX_CODE, xx_weights @ x),  # xx_scores's weights times X
    ], [
        shared("concat", 9, model_code("concat"), kept["concat"][0]),
        shared("projected", 9, model_code("projected"), kept["projected"][0]),
        shared("residual", 9, model_code("residual"), kept["residual_mid"][0]),
    ]


def head_steps(record: ForwardRecord, layer: int, head: int) -> list[Step]:
    """The steps of one head of ``layer``, q k v to weights·v, in the chapters' order."""
    kept = record.layers[layer]
    config = record.config
    d_k = config.head_size
    what_if = record.what_if
    # Under a switch a step's title and formula say what the switch did instead.
    changed_by = {"scores": "xx_scores", "scaled": "no_scale", "masked": "no_mask"}
    changed_by["weights"] = "uniform" if what_if and "uniform" in what_if.switches else "no_mask"

    def one(key: str, chapter: int, code: str, kind="values", **args) -> Step:
        switch = changed_by.get(key)
        name = f"step.{key}"
        if switch and what_if is not None and what_if.on(layer, head, switch):
            name = f"step.{key}.{switch}"
        title, formula = Message(f"{name}.title", args), Message(f"{name}.formula", args)
        return Step(key, chapter, title, formula, code, kept[key][0, head], kind, head)

    split = model_code("qkv")
    qk_keys = ["qkv"] + ["qk_norm"] * config.qk_norm + ["rope"] * (config.position == "rope")
    qk_code = model_code(*qk_keys)
    return [
        one("q", 3, qk_code, note=qk_note(config), d_k=d_k),
        one("k", 3, qk_code, d_k=d_k),
        one("v", 3, split, d_k=d_k),
        one("scores", 4, model_code("scores")),
        one("scaled", 5, model_code("scaled"), d_k=d_k, root=f"{math.sqrt(d_k):.4f}"),
        one("masked", 6, model_code("masked"), "masked"),
        one("weights", 7, model_code("weights"), "weights"),
        one("out", 8, model_code("out")),
    ]


def attention_steps(record: ForwardRecord, layer: int, head: int) -> list[Step]:
    """Every step of one head of one layer, in the chapters' order (1 to 9).

    Args:
        record: from `record_forward`.
        layer: 0-based layer; negative counts from the end.
        head: 0-based head.

    Returns:
        X, X·Xᵀ, its softmax, weights·X, q, k, v, q·kᵀ, ÷√d_k, masked, weights,
        weights·v, the heads concatenated, × W_o, the residual stream after the add.

    Raises:
        ValueError: if layer or head is out of range.
    """
    n_layer, n_head = len(record.layers), record.config.n_head
    if not -n_layer <= layer < n_layer:
        raise ValueError(f"layer must be in 0..{n_layer - 1} (or -1 for the last), got {layer}")
    if not 0 <= head < n_head:
        raise ValueError(f"head must be in 0..{n_head - 1}, got {head}")
    layer %= n_layer
    before, after = layer_steps(record, layer)
    return [*before, *head_steps(record, layer, head), *after]


def step_json(step: Step) -> dict:
    """A `Step` as the page reads it: key, chapter, title, formula, code, kind, head,
    columns ("characters" or "channels"), shape [rows, columns], values (the (rows,
    columns) tensor: `viz.array_encoding.encode_arrays` writes it as nested lists, None
    for -inf, or packed)."""
    return {
        "key": step.key,
        "chapter": step.chapter,
        "title": message_json(step.title),
        "formula": message_json(step.formula),
        "code": step.code,
        "kind": step.kind,
        "head": step.head,
        "columns": "characters" if step.columns_are_characters else "channels",
        "shape": list(step.values.shape),
        "values": step.values,
    }


def steps_json(
    record: ForwardRecord, layer: int, heads: list[int], encoding: str | None = "json"
) -> dict:
    """The page's steps of ``layer`` for the given heads.

    Args:
        record: from `record_forward`.
        layer: 0-based layer; negative counts from the end.
        heads: 0-based heads.
        encoding: how the tables are written (`viz.array_encoding.ENCODINGS`: "json"
            nested lists, "float32" packed), or None: left as tensors, for a caller
            that adds more before encoding the whole answer.

    Returns:
        ``{"layer", "d_k", "order": [keys in the chapters' order], "chapters":
        CHAPTER_STEPS, "layer_steps": {key: step_json}, "heads": {str(head): {key:
        step_json}}, "what_if": None or {"layer", "head", "switches", "text"}}``.

    Raises:
        ValueError: if layer or a head is out of range, or for an unknown encoding.
    """
    order = [s.key for s in attention_steps(record, layer, heads[0] if heads else 0)]
    layer %= len(record.layers)
    before, after = layer_steps(record, layer)
    answer = {
        "layer": layer,
        "d_k": record.config.head_size,
        "order": order,
        "chapters": {str(k): {"key": v, "args": {}} for k, v in CHAPTER_STEPS.items()},
        "layer_steps": {s.key: step_json(s) for s in [*before, *after]},
        "heads": {},
        "what_if": what_if_json(record.what_if),
    }
    for head in heads:
        answer["heads"][str(head)] = {
            s.key: step_json(s) for s in attention_steps(record, layer, head) if s.head is not None
        }
    return answer if encoding is None else encode_arrays(answer, encoding)


def what_if_json(what_if: WhatIf | None) -> dict | None:
    """A `WhatIf` for the page: layer, head, switches, a one-line description (in
    English; the page words it from the switches in its own language), and with
    "zero_neuron" the neuron."""
    if what_if is None:
        return None
    answer = {
        "layer": what_if.layer,
        "head": what_if.head,
        "switches": list(what_if.switches),
        "text": what_if.describe(),
    }
    if what_if.neuron is not None:
        answer["neuron"] = what_if.neuron
    return answer
