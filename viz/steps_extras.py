"""What the steps' answer (/api/steps, ``--html``) adds on request, beyond the chapters'
steps of one head: each part under its own key, so that a page asks only for what it
shows.

    "words"        the head's weights, X·Xᵀ's softmax and weights·X per word
                   (viz/word_tables.py)
    "projections"  this head's W_q, W_k, W_v (C × d_k) and X·W_q, X·W_k, X·W_v
                   (viz/head_projections.py)
    "block"        the rest of the block: the residual stream before, added, after,
                   the second norm, the MLP, its write (viz/block_steps.py)
    "attribution"  what each head and MLP pushes on the logit of the predicted next
                   character (viz/logit_attribution.py)

and two derivations of one clicked cell: ``cell`` (a cell of X·W_q, X·W_k or X·W_v)
and ``neuron_cell`` (one MLP neuron at one character).

    extras = extras_json(model, record, prompt, layer, head, ["words", "block"])
"""

from model import GPT
from viz.attention_steps import ForwardRecord, step_json, xx_scores
from viz.block_steps import BLOCK_CHAPTERS, block_steps, neuron_derivation
from viz.char_labels import visible_char
from viz.head_projections import PARTS, head_columns, projection_cell, projection_steps
from viz.logit_attribution import logit_attribution
from viz.word_tables import words_json

EXTRAS = ("words", "projections", "block", "attribution")


def check_extras(value) -> tuple[str, ...]:
    """A JSON list (or comma-separated text) of EXTRAS names.

    Raises:
        ValueError: naming the unknown ones and the known.
    """
    if isinstance(value, str):
        value = [part for part in value.split(",") if part]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"extras must be a list of names from {', '.join(EXTRAS)}")
    unknown = [v for v in value if v not in EXTRAS]
    if unknown:
        raise ValueError(
            f"unknown extra {', '.join(map(repr, unknown))}: the extras are {', '.join(EXTRAS)}"
        )
    return tuple(dict.fromkeys(value))


def whole_numbers(value, names: tuple[str, ...], what: str) -> list:
    """``value`` as a dict of ``names`` (or a list, or comma-separated text, in that
    order) -> their values, the numbers as ints.

    Raises:
        ValueError: naming the expected form.
    """
    form = f"{what} must be {{{', '.join(f'{n!r}: ...' for n in names)}}}"
    if isinstance(value, str):
        value = value.split(",")
    if isinstance(value, (list, tuple)):
        value = dict(zip(names, value, strict=False)) if len(value) == len(names) else None
    if not isinstance(value, dict) or set(value) != set(names):
        raise ValueError(form)
    out = {}
    for name in names:
        item = value[name]
        if name == "part":
            out[name] = item
            continue
        if isinstance(item, (bool, float)):
            raise ValueError(form + f"; {name} must be a whole number, got {item!r}")
        try:
            out[name] = int(item)
        except (TypeError, ValueError):
            raise ValueError(form + f"; {name} must be a whole number, got {item!r}") from None
    return out


def extras_json(
    model: GPT,
    record: ForwardRecord,
    prompt: str,
    layer: int,
    head: int,
    extras=(),
    cell=None,
    neuron_cell=None,
    chars=None,
) -> dict:
    """The requested extras of one head of ``layer`` (tensors left as tensors: the caller
    encodes the whole answer with `viz.array_encoding.encode_arrays`).

    Args:
        model, record: the model and its `record_forward` pass over ``prompt``.
        prompt: the text shown, T characters.
        layer, head: 0-based, in range.
        extras: names from EXTRAS (any form `check_extras` reads).
        cell: None, or ``{"part": "q"|"k"|"v", "row", "column"}`` (or "q,3,5").
        neuron_cell: None, or ``{"row", "neuron"}`` (or "3,17").
        chars: the vocabulary in id order (the tokenizer's), for the attribution's
            label; None: no label.

    Returns:
        A dict with a key per requested extra, and "cell" / "neuron_cell" when asked:
        "words" `words_json` of the tables "weights" (this head's), "xx_weights" and
        "xx_out"; "projections" ``{"head", "columns": head_columns, "steps": {key:
        step_json}}``; "block" ``{"chapters": BLOCK_CHAPTERS, "order", "steps"}``;
        "attribution" `logit_attribution` with the character's visible "label"; "cell"
        `projection_cell`; "neuron_cell" `neuron_derivation`.

    Raises:
        ValueError: for an unknown extra, or a cell or neuron out of range.
    """
    extras = check_extras(extras)
    answer = {}
    kept = record.layers[layer]
    if "words" in extras:
        xx_weights = xx_scores(kept["x"][0])[1]
        answer["words"] = words_json(
            prompt,
            {"weights": kept["weights"][0, head], "xx_weights": xx_weights},
            {"xx_out": xx_weights @ kept["x"][0]},
        )
    if "projections" in extras:
        answer["projections"] = {
            "head": head,
            "columns": head_columns(model, layer, head),
            "steps": {s.key: step_json(s) for s in projection_steps(model, record, layer, head)},
        }
    if "block" in extras:
        steps = block_steps(record, layer)
        answer["block"] = {
            "chapters": {str(k): {"key": v, "args": {}} for k, v in BLOCK_CHAPTERS.items()},
            "order": [s.key for s in steps],
            "steps": {s.key: step_json(s) for s in steps},
        }
    if "attribution" in extras:
        attribution = logit_attribution(model, record)
        label = None if chars is None else visible_char(chars[attribution["token"]])
        answer["attribution"] = {**attribution, "label": label}
    if cell is not None:
        where = whole_numbers(cell, ("part", "row", "column"), "cell")
        if where["part"] not in PARTS:
            raise ValueError(f"cell's part must be one of q, k, v, got {where['part']!r}")
        answer["cell"] = projection_cell(model, record, layer, head, **where)
    if neuron_cell is not None:
        where = whole_numbers(neuron_cell, ("row", "neuron"), "neuron_cell")
        answer["neuron_cell"] = neuron_derivation(model, record, layer, **where)
    return answer
