"""The steps' extras as text, for ``explore_attention.py --steps``: the tables per word,
the head's W_q, W_k, W_v and a cell of X·W_q worked out, the rest of the block with a
neuron worked out, and what each part pushes on the predicted next character, in
English or Korean (the page's catalogue, viz/page/messages.json).

Each function takes what viz/steps_extras.py (and the modules it calls) answer, so the
terminal prints the page's numbers.

    print(format_words(extras["words"], decimals=2, lang="ko"))
    print(format_attribution(extras["attribution"], decimals=3))
"""

import torch

from viz.attention_table import format_matrix, format_steps, pad
from viz.char_labels import display_width, visible_char
from viz.messages import Message, say


def word_label(word: str) -> str:
    """A word with its whitespace made visible ("새가 " -> "새가␣")."""
    return "".join(visible_char(c) for c in word)


def rendered(message: dict, lang: str) -> str:
    """A message as JSON (``{"key", "args"}``, as the answers carry it) in ``lang``."""
    return say(Message(message["key"], message["args"]), lang)


def format_words(
    words: dict,
    decimals: int = 2,
    max_columns: int = 16,
    lang: str = "en",
    *,
    layer: int = 0,
    head: int = 0,
) -> str:
    """`viz.word_tables.words_json`'s tables: the weights of ``head`` in ``layer`` and
    X·Xᵀ's softmax (word × word, with each row's sum) and weights·X (word × channel)."""
    labels = [word_label(w) for w in words["words"]]
    parts = [say("cli.words", lang, rule=rendered(words["rule"], lang))]
    sum_label = say("table.sum", lang)
    for name, table in words["tables"].items():
        if name == "xx_out":
            text = format_matrix(table, labels, None, decimals, max_columns, lang)
        else:
            sums = table.sum(dim=1, keepdim=True)
            with_sums = torch.cat([table, sums], 1)
            text = format_matrix(with_sums, labels, [*labels, sum_label], decimals, 0, lang)
        title = say(f"words.{name}", lang, layer=layer, head=head)
        parts.append(f"{title}\n{text}")
    return "\n\n".join(parts)


def format_columns(
    columns: dict, head: int, decimals: int = 2, max_columns: int = 16, lang: str = "en"
) -> str:
    """`viz.head_projections.head_columns`: W_q, W_k, W_v (C × d_k) and their biases."""
    parts = []
    for part in ("q", "k", "v"):
        w = columns[f"w_{part}"].detach().cpu()
        rows, width = w.shape
        heading = say("cli.columns", lang, part=part, head=head, rows=rows, columns=width)
        table = format_matrix(w, [""] * rows, None, decimals, max_columns, lang)
        parts.append(f"{heading}\n{table}")
        bias = columns.get(f"b_{part}")
        if bias is not None:
            parts.append(f"b_{part}: " + "  ".join(f"{float(b):.{decimals}f}" for b in bias))
    return "\n\n".join(parts)


def format_products(derivation: dict, row_name: str, decimals: int, max_columns: int, lang: str):
    """The three rows of a derivation: x, the weights and their products, over C."""
    table = torch.stack([derivation["x"], derivation["w"], derivation["products"]])
    return format_matrix(table, ["x", row_name, "x·w"], None, decimals + 2, max_columns, lang)


def format_cell(
    cell: dict, text: str, decimals: int = 2, max_columns: int = 16, lang: str = "en"
) -> str:
    """`viz.head_projections.projection_cell` worked out: the C products and their sum."""
    part, i, j = cell["part"], cell["row"], cell["column"]
    digits = decimals + 4
    bias = "" if cell["bias"] is None else f" + b_{part}[{j}] ({cell['bias']:.{digits}f})"
    heading = say(
        "cli.cell",
        lang,
        name=part.upper(),
        part=part,
        row=i,
        column=j,
        char=visible_char(text[i]),
        bias=bias,
    )
    total = say(
        "cli.cell_sum", lang, sum=f"{cell['sum']:.{digits}f}", value=f"{cell['value']:.{digits}f}"
    )
    products = format_products(cell, f"W_{part}", decimals, max_columns, lang)
    return f"{heading}\n{products}\n  {total}"


def format_neuron(
    neuron: dict, text: str, decimals: int = 2, max_columns: int = 16, lang: str = "en"
) -> str:
    """`viz.block_steps.neuron_derivation` worked out: products, activation, write."""
    i, n = neuron["row"], neuron["neuron"]
    digits = decimals + 4
    bias = "" if neuron["bias"] is None else f" + b_up[{n}] ({neuron['bias']:.{digits}f})"
    heading = say(
        "cli.neuron",
        lang,
        neuron=n,
        layer=neuron["layer"],
        char=visible_char(text[i]),
        row=i,
        bias=bias,
    )
    act = f"{neuron['act']:.{digits}f}"
    line = say(
        "cli.neuron_sum", lang, sum=f"{neuron['sum']:.{digits}f}", pre=f"{neuron['pre']:.{digits}f}"
    )
    if neuron["zeroed"]:
        line += say("cli.neuron_zeroed", lang)
    else:
        name = "GELU" if neuron["activation"] == "gelu" else "ReLU²"
        line += say("cli.neuron_act", lang, activation=name, act=act)
    write = format_matrix(
        neuron["write"].unsqueeze(0), ["W"], None, decimals + 2, max_columns, lang
    )
    return (
        f"{heading}\n{format_products(neuron, 'W_up', decimals, max_columns, lang)}\n  {line}\n"
        f"  {say('cli.neuron_write', lang, act=act, neuron=n)}\n{write}"
    )


def part_name(part: dict, lang: str = "en") -> str:
    """'embedding (block 0's input)', 'layer 1 head 2', 'layer 1 W_o's bias', 'layer 1 MLP'."""
    return say(f"part.{part['kind']}", lang, layer=part["layer"], head=part["head"])


def format_attribution(answer: dict, decimals: int = 3, lang: str = "en") -> str:
    """`viz.logit_attribution.logit_attribution` as a list: each part's push (with a bar
    to scale), the total beside the model's logit, and the frozen-norm note."""
    label = answer.get("label") or str(answer["token"])
    lines = [
        say(
            "cli.pushes",
            lang,
            char=repr(label),
            position=answer["position"],
            norm=answer["norm"],
            divisor=f"{answer['divisor']:.4f}",
        ),
        f"  ({rendered(answer['note'], lang)})",
    ]
    names = [part_name(p, lang) for p in answer["parts"]]
    width = max(display_width(n) for n in [*names, say("cli.push_sum", lang)])
    largest = max(abs(p["push"]) for p in answer["parts"]) or 1.0
    for name, part in zip(names, answer["parts"], strict=True):
        push = part["push"]
        bar = ("+" if push > 0 else "-") * round(20 * abs(push) / largest)  # to scale
        lines.append(f"  {pad(name, width)}  {push:+.{decimals}f}  {bar}")
    if answer["norm_bias"]:
        lines.append(
            f"  {pad(say('cli.push_norm_bias', lang), width)}  {answer['norm_bias']:+.{decimals}f}"
        )
    logit = say("cli.push_logit", lang, logit=f"{answer['logit']:+.{decimals}f}")
    lines.append(
        f"  {pad(say('cli.push_sum', lang), width)}  {answer['total']:+.{decimals}f}   {logit}"
    )
    if answer["capped"] is not None:
        capped = say("cli.push_capped", lang)
        note = say("cli.push_capped_note", lang)
        lines.append(f"  {pad(capped, width)}  {answer['capped']:+.{decimals}f}   {note}")
    return "\n".join(lines)


def format_block(
    steps: list, text: str, decimals: int = 2, max_columns: int = 16, lang: str = "en"
) -> str:
    """The rest of the block (`viz.block_steps.block_steps`), as `format_steps` prints
    the attention's steps."""
    return format_steps(steps, text, decimals, max_columns, lang)
