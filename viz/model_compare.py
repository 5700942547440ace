"""Two models on one prompt, side by side: a fine-tuned run and its parent
(train.init_from), or any two runs.

    python explore_attention.py --out-dir runs/korean_from_shakespeare \\
        --compare runs/shakespeare_char_cpu --prompt "ROMEO:"

`compare_models` runs the same prompt through both (one eval-mode forward pass each)
and returns, for each model, its next-character table, what each layer would predict
next (the logit lens, `viz.logit_lens`) and every head's attention weights; and
between them the differences: each listed character's probability in both, the total
variation distance between the two next-character distributions, the layers whose
likeliest next character differs, and for each head the mean absolute difference of
its weights. A character one model lacks is said, not an error: a prompt the model
cannot read gets no numbers (the other model's are shown alone), and a next character
outside its vocabulary has no probability there. `format_comparison` writes the answer as text.
"""

from dataclasses import dataclass

import torch

from data.tokenizer import CharTokenizer
from model import GPT
from viz.attention_steps import record_forward
from viz.attention_weights import attention_and_next_logits
from viz.char_labels import visible_char
from viz.logit_lens import layer_predictions

CHANGED = 0.05  # a probability that moved by this much or more is marked


@dataclass
class ComparedModel:
    """One side of a comparison: a label (its checkpoint's path), the model and its
    tokenizer."""

    label: str
    model: GPT
    tokenizer: CharTokenizer


def _one_side(side: ComparedModel, prompt: str, top_k: int) -> dict:
    """One model's answer: the prompt as it reads it, the characters it lacks, and
    (when it can read the prompt) its next-character distribution, table, layer
    predictions and (n_layer, n_head, T, T) attention weights."""
    tok, config = side.tokenizer, side.model.config
    # The last block_size characters: those the model predicts the next from (as the
    # page and sample.py crop).
    text = tok.normalize(prompt)[-config.block_size :]
    missing = sorted({c for c in text if c not in set(tok.chars)})
    answer = {"label": side.label, "prompt": text, "missing": missing}
    if missing or not text:
        return answer
    ids = torch.from_numpy(tok.encode(text).astype("int64"))
    weights, logits = attention_and_next_logits(side.model, ids)
    probs = torch.softmax(logits.double(), dim=-1)
    top = torch.topk(probs, min(top_k, probs.numel()))
    lens = layer_predictions(side.model, record_forward(side.model, ids), top_k=1)
    answer |= {
        "distribution": {c: float(p) for c, p in zip(tok.chars, probs.tolist(), strict=True)},
        "next": [(tok.chars[i], float(p)) for i, p in zip(top.indices, top.values, strict=True)],
        "layers": [
            (tok.chars[layer[-1][0]], float(p[-1][0]))
            for layer, p in zip(lens["ids"], lens["probabilities"], strict=True)
        ],
        "weights": weights,
    }
    return answer


def compare_models(
    first: ComparedModel, second: ComparedModel, prompt: str, top_k: int = 5
) -> dict:
    """The same prompt through two models, and what differs.

    Args:
        first, second: the two models (e.g. a fine-tuned run, then its parent).
        prompt: the text; each model reads it in its own normalisation, cut to its
            last block_size characters.
        top_k: characters in each next-character table.

    Returns:
        ``{"models": [first's answer, second's], "next": [(char, p_first, p_second,
        changed)] for the characters of both tables (p None where the model lacks the
        character), "distance": total variation distance between the next-character
        distributions (a character a model lacks has probability 0 there), "layers":
        [(layer, first's likeliest, second's, differs)], "heads": (n_layer, n_head)
        mean |weights difference| or None}``; the parts that need both models' numbers
        are None when either cannot read the prompt. ``heads`` is None also for models
        of different shapes or prompts read as different lengths.
    """
    a, b = _one_side(first, prompt, top_k), _one_side(second, prompt, top_k)
    result = {"models": [a, b], "next": None, "distance": None, "layers": None, "heads": None}
    if "next" not in a or "next" not in b:
        return result
    da, db = a["distribution"], b["distribution"]
    listed = list(dict.fromkeys([c for c, _ in a["next"]] + [c for c, _ in b["next"]]))
    result["next"] = [
        (c, da.get(c), db.get(c), abs(da.get(c, 0.0) - db.get(c, 0.0)) >= CHANGED) for c in listed
    ]
    chars = set(da) | set(db)
    result["distance"] = 0.5 * sum(abs(da.get(c, 0.0) - db.get(c, 0.0)) for c in chars)
    # Models of different depths: the layers both have.
    result["layers"] = [
        (i, la, lb, la[0] != lb[0])
        for i, (la, lb) in enumerate(zip(a["layers"], b["layers"], strict=False))
    ]
    if a["weights"].shape == b["weights"].shape:
        T = a["weights"].size(-1)
        # Mean over the T(T+1)/2 visible entries (the future is 0 in both).
        result["heads"] = (a["weights"] - b["weights"]).abs().sum((-1, -2)) / (T * (T + 1) / 2)
    return result


def _probability(p: float | None) -> str:
    return "  (none)" if p is None else f"{p:8.4f}"


def format_comparison(result: dict) -> str:
    """The comparison as text: both models' prompts, the next-character table with
    changes marked (*), the layers' predictions with differences marked, and the heads
    ranked by how much their weights differ; where one model cannot read the prompt,
    the other's next-character table and layer predictions alone."""
    a, b = result["models"]
    lines = [f"A: {a['label']}", f"B: {b['label']}"]
    for name, side in (("A", a), ("B", b)):
        if side["missing"]:
            lacked = " ".join(f"'{visible_char(c)}'" for c in side["missing"])
            lines.append(
                f"{name} lacks {len(side['missing'])} character(s) of the prompt, {lacked}: "
                "it cannot read it, so it has no numbers"
            )
    if result["next"] is None:
        for name, side in (("A", a), ("B", b)):
            if "next" in side:  # the model that reads the prompt: its numbers alone
                lines += [f"prompt: {side['prompt']!r}", "", f"next character in {name} alone"]
                lines += [f"  {visible_char(c):<8} {p:8.4f}" for c, p in side["next"]]
                lines += ["", f"what each layer would predict next in {name} (logit lens)"]
                lines += [
                    f"  layer {i}: {visible_char(c)} {p:.3f}"
                    for i, (c, p) in enumerate(side["layers"])
                ]
        return "\n".join(lines)
    lines += [
        f"prompt: {a['prompt']!r}",
        "",
        f"next character       A        B   (* moved by {CHANGED} or more)",
    ]
    for c, pa, pb, changed in result["next"]:
        mark = " *" if changed else ""
        lines.append(f"  {visible_char(c):<8} {_probability(pa)} {_probability(pb)}{mark}")
    lines.append(
        f"total variation distance between the two distributions: {result['distance']:.4f}"
    )
    lines += ["", "what each layer would predict next (logit lens)   A | B"]
    for layer, (ca, pa), (cb, pb), differs in result["layers"]:
        mark = "  * differs" if differs else ""
        lines.append(
            f"  layer {layer}: {visible_char(ca)} {pa:.3f} | {visible_char(cb)} {pb:.3f}{mark}"
        )
    heads = result["heads"]
    if heads is None:
        lines.append("\nattention: the models differ in shape or prompt length; not compared")
        return "\n".join(lines)
    lines += ["", "attention: mean |A - B| of each head's weights (most changed first)"]
    order = sorted(
        ((float(heads[i, j]), i, j) for i in range(heads.size(0)) for j in range(heads.size(1))),
        reverse=True,
    )
    lines += [f"  layer {i} head {j}: {d:.4f}" for d, i, j in order]
    return "\n".join(lines)


def comparison_json(result: dict) -> dict:
    """`compare_models`'s answer as JSON-ready values, for a page view of the two
    models: each model's label, prompt, missing characters, next-character table and
    layer predictions, its (n_layer, n_head, T, T) weights as nested lists; the
    differences as they are, ``heads`` as an (n_layer, n_head) nested list."""
    models = []
    for side in result["models"]:
        entry = {k: side[k] for k in ("label", "prompt", "missing")}
        if "next" in side:
            entry["next"] = [[c, p] for c, p in side["next"]]
            entry["layers"] = [[c, p] for c, p in side["layers"]]
            entry["weights"] = side["weights"].tolist()
        models.append(entry)
    heads = result["heads"]
    return {
        "models": models,
        "next": None if result["next"] is None else [list(row) for row in result["next"]],
        "distance": result["distance"],
        "layers": None if result["layers"] is None else [list(row) for row in result["layers"]],
        "heads": None if heads is None else heads.tolist(),
    }
