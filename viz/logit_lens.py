"""What each layer would predict: the logit lens (nostalgebraist 2020; Ecco's
``layer_predictions``).

The residual stream after block l is put through the model's own final norm and LM
head (`GPT.head`), as if the blocks after l were not there. After the last block this
is exactly the model's prediction; earlier layers show how it forms.

    record = record_forward(model, ids)           # viz/attention_steps.py
    lens = layer_predictions(model, record, top_k=5)
"""

import torch

from model import GPT
from viz.attention_steps import ForwardRecord


@torch.no_grad()
def layer_logits(model: GPT, record: ForwardRecord) -> list[torch.Tensor]:
    """The logits each block's output would give.

    Args:
        model: the GPT that produced ``record``.
        record: from `viz.attention_steps.record_forward`.

    Returns:
        One (1, T, vocab_size) tensor per layer, on the model's device: `GPT.head` of
        the residual stream after that block. The last one is the computation the
        model's forward pass ends with, on the same tensor: equal to
        ``record.logits`` bit for bit.
    """
    return [model.head(kept["residual_out"]) for kept in record.layers]


def layer_predictions(model: GPT, record: ForwardRecord, top_k: int = 5) -> dict:
    """The ``top_k`` likeliest next characters after each block, at every position.

    Args:
        model: the GPT that produced ``record``.
        record: from `viz.attention_steps.record_forward`.
        top_k: characters per position and layer, >= 1.

    Returns:
        ``{"top_k", "ids": (n_layer, T, top_k) nested lists of token ids, most likely
        first (ties by id), "probabilities": the same shape, softmax at temperature
        1 over the whole vocabulary}``.

    Raises:
        ValueError: if top_k < 1.
    """
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    ids, probabilities = [], []
    for logits in layer_logits(model, record):
        probs = torch.softmax(logits[0].double(), dim=-1)  # (T, vocab_size)
        k = min(top_k, probs.size(-1))
        top = torch.topk(probs, k, dim=-1)
        # Equal probabilities in id order, as the next-character table lists them.
        ranked = [
            sorted(zip(row_ids, row_probs, strict=True), key=lambda pair: (-pair[1], pair[0]))
            for row_ids, row_probs in zip(top.indices.tolist(), top.values.tolist(), strict=True)
        ]
        ids.append([[i for i, _ in row] for row in ranked])
        probabilities.append([[p for _, p in row] for row in ranked])
    return {"top_k": top_k, "ids": ids, "probabilities": probabilities}
