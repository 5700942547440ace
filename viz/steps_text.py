"""The steps' extras as text, for ``explore_attention.py --steps``: the tables per word,
the head's W_q, W_k, W_v and a cell of X·W_q worked out, the rest of the block with a
neuron worked out, and what each part pushes on the predicted next character.

Each function takes what viz/steps_extras.py (and the modules it calls) answer, so the
terminal prints the page's numbers.

    print(format_words(extras["words"], decimals=2))
    print(format_attribution(extras["attribution"], decimals=3))
"""

import torch

from viz.attention_table import format_matrix, format_steps
from viz.char_labels import visible_char


def word_label(word: str) -> str:
    """A word with its whitespace made visible ("새가 " -> "새가␣")."""
    return "".join(visible_char(c) for c in word)


def format_words(words: dict, decimals: int = 2, max_columns: int = 16) -> str:
    """`viz.word_tables.words_json`'s tables: the head's weights and X·Xᵀ's softmax
    (word × word, with each row's sum) and weights·X (word × channel)."""
    labels = [word_label(w) for w in words["words"]]
    titles = {
        "weights": "this head's weights per word",
        "xx_weights": "softmax of the masked X·Xᵀ per word (the chapter's first weights)",
        "xx_out": "weights·X per word (the chapter's first form, complete)",
    }
    parts = [f"Per word: {words['rule']}."]
    for name, table in words["tables"].items():
        square = table.size(1) == len(labels)
        if square and name != "xx_out":
            sums = table.sum(dim=1, keepdim=True)
            text = format_matrix(torch.cat([table, sums], 1), labels, [*labels, "sum"], decimals)
        else:
            text = format_matrix(table, labels, None, decimals, max_columns)
        parts.append(f"{titles.get(name, name)}\n{text}")
    return "\n\n".join(parts)


def format_columns(columns: dict, head: int, decimals: int = 2, max_columns: int = 16) -> str:
    """`viz.head_projections.head_columns`: W_q, W_k, W_v (C × d_k) and their biases."""
    parts = []
    for part in ("q", "k", "v"):
        w = columns[f"w_{part}"].detach().cpu()
        parts.append(
            f"W_{part} of head {head}: {w.size(0)} × {w.size(1)} (rows: X's channels, "
            f"columns: this head's d_k channels of {part})\n"
            + format_matrix(w, [""] * w.size(0), None, decimals, max_columns)
        )
        bias = columns.get(f"b_{part}")
        if bias is not None:
            parts.append(f"b_{part}: " + "  ".join(f"{float(b):.{decimals}f}" for b in bias))
    return "\n\n".join(parts)


def format_products(derivation: dict, name: str, row_name: str, decimals: int, max_columns: int):
    """The three rows of a derivation: x, the weights and their products, over C."""
    table = torch.stack([derivation["x"], derivation["w"], derivation["products"]])
    return format_matrix(table, ["x", row_name, "x·w"], None, decimals + 2, max_columns)


def format_cell(cell: dict, text: str, decimals: int = 2, max_columns: int = 16) -> str:
    """`viz.head_projections.projection_cell` worked out: the C products and their sum."""
    part, i, j = cell["part"], cell["row"], cell["column"]
    bias = "" if cell["bias"] is None else f" + b_{part}[{j}] ({cell['bias']:.{decimals + 4}f})"
    return (
        f"{part.upper()}[{i}][{j}] of '{visible_char(text[i])}' (row {i}), channel {j}: "
        f"Σ_c x_{i}[c] · W_{part}[c][{j}]{bias}\n"
        + format_products(cell, part, f"W_{part}", decimals, max_columns)
        + f"\n  sum = {cell['sum']:.{decimals + 4}f}; the model's value "
        f"{cell['value']:.{decimals + 4}f} (float32 rounding apart)"
    )


def format_neuron(neuron: dict, text: str, decimals: int = 2, max_columns: int = 16) -> str:
    """`viz.block_steps.neuron_derivation` worked out: products, activation, write."""
    i, n = neuron["row"], neuron["neuron"]
    digits = decimals + 4
    name = "GELU" if neuron["activation"] == "gelu" else "ReLU²"
    bias = "" if neuron["bias"] is None else f" + b_up[{n}] ({neuron['bias']:.{decimals + 4}f})"
    write = neuron["write"].unsqueeze(0)
    return (
        f"Neuron {n} of layer {neuron['layer']} at '{visible_char(text[i])}' (row {i}): "
        f"Σ_c x_{i}[c] · W_up[{n}][c]{bias}, the second norm's output times the "
        "neuron's row\n"
        + format_products(neuron, "up", "W_up", decimals, max_columns)
        + f"\n  sum = {neuron['sum']:.{digits}f} (the model's {neuron['pre']:.{digits}f}); "
        + (
            "the what-if sets this neuron's output (or the MLP's) to 0\n"
            if neuron["zeroed"]
            else f"{name} of it = {neuron['act']:.{digits}f}\n"
        )
        + f"  its write into the MLP's output: {neuron['act']:.{digits}f} × W_down[:, {n}]\n"
        + format_matrix(write, ["write"], None, decimals + 2, max_columns)
    )


def part_name(part: dict) -> str:
    """'embedding', 'layer 1 head 2', 'layer 1 attention bias', 'layer 1 MLP'."""
    if part["kind"] == "embedding":
        return "embedding (block 0's input)"
    what = {"head": f"head {part['head']}", "attention_bias": "W_o's bias", "mlp": "MLP"}
    return f"layer {part['layer']} {what[part['kind']]}"


def format_attribution(answer: dict, decimals: int = 3) -> str:
    """`viz.logit_attribution.logit_attribution` as a list: each part's push, the total
    beside the model's logit, and the frozen-norm note."""
    label = answer.get("label") or str(answer["token"])
    lines = [
        f"What each part pushes on the logit of {label!r} at position {answer['position']}, "
        f"through the final norm ({answer['norm']}, divisor held at {answer['divisor']:.4f}):",
        f"  ({answer['note']})",
    ]
    width = max(len(part_name(p)) for p in answer["parts"])
    largest = max(abs(p["push"]) for p in answer["parts"]) or 1.0
    for part in answer["parts"]:
        push = part["push"]
        bar = ("+" if push > 0 else "-") * round(20 * abs(push) / largest)  # to scale
        lines.append(f"  {part_name(part):<{width}}  {push:+.{decimals}f}  {bar}")
    if answer["norm_bias"]:
        lines.append(f"  {'final norm bias':<{width}}  {answer['norm_bias']:+.{decimals}f}")
    lines.append(
        f"  {'sum of the pushes':<{width}}  {answer['total']:+.{decimals}f}   the model's "
        f"logit: {answer['logit']:+.{decimals}f}"
    )
    if answer["capped"] is not None:
        lines.append(
            f"  {'after the soft cap':<{width}}  {answer['capped']:+.{decimals}f}   (the cap "
            "bends the sum; the pushes explain the logit before it)"
        )
    return "\n".join(lines)


def format_block(steps: list, text: str, decimals: int = 2, max_columns: int = 16) -> str:
    """The rest of the block (`viz.block_steps.block_steps`), as `format_steps` prints
    the attention's steps."""
    return format_steps(steps, text, decimals, max_columns)
