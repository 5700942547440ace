"""Direct logit attribution (viz/logit_attribution.py): the parts add up to the residual
stream the final norm reads, and their pushes, with the norm's divisor frozen, add up
to the logit they explain; the divisor is the model's own norm's."""

import pytest
import torch

from tests.viz.conftest import PROMPT, VOCAB, ids_of
from viz.attention_steps import WhatIf, record_forward
from viz.logit_attribution import head_writes, logit_attribution, residual_parts
from viz.messages import say


def test_the_parts_add_up_to_the_residual_stream(model):
    record = record_forward(model, ids_of(PROMPT))
    for layer, kept in enumerate(record.layers):
        writes = head_writes(model, record, layer)
        bias = model.blocks[layer].attn.out_proj.bias
        total = writes.sum(0) + (0 if bias is None else bias.detach())
        torch.testing.assert_close(total, kept["attention"][0], atol=1e-5, rtol=0)
    for position in (0, 6, len(PROMPT) - 1):
        parts = residual_parts(model, record, position)
        n = model.config.n_layer * (model.config.n_head + 1 + (bias is not None)) + 1
        assert len(parts) == n and parts[0]["kind"] == "embedding"
        total = sum(p["vector"] for p in parts)
        expected = record.final["residual"][0, position].double()
        torch.testing.assert_close(total, expected, atol=1e-5, rtol=0)


def test_the_pushes_add_up_to_the_logit_with_the_norm_frozen(model):
    record = record_forward(model, ids_of(PROMPT))
    answer = logit_attribution(model, record)
    last = len(PROMPT) - 1
    assert answer["position"] == last
    assert answer["token"] == int(record.logits[0, last].argmax())  # the predicted one
    heads = [(p["layer"], p["head"]) for p in answer["parts"] if p["kind"] == "head"]
    assert heads == [(layer, head) for layer in range(2) for head in range(3)]
    assert answer["total"] == pytest.approx(answer["logit"], abs=1e-5)
    assert answer["logit"] == record.final["head_logits"][0, last, answer["token"]].item()
    if model.config.logit_softcap > 0:
        assert answer["capped"] == record.logits[0, last, answer["token"]].item()
        assert abs(answer["capped"]) < abs(answer["logit"])
    else:
        assert answer["capped"] is None and answer["logit"] == record.logits[0, -1].max().item()
    # The divisor is the model's norm's: its output is gain ⊙ (x − mean) / D + bias.
    x = record.final["residual"][0, last].double()
    norm = model.ln_f
    centred = x - x.mean() if answer["norm"] == "LayerNorm" else x
    bias = 0 if getattr(norm, "bias", None) is None else norm.bias.detach().double()
    frozen = norm.weight.detach().double() * centred / answer["divisor"] + bias
    torch.testing.assert_close(frozen, record.final["normed"][0, last].double(), atol=1e-6, rtol=0)
    assert answer["norm"] == ("RMSNorm" if model.config.norm == "rmsnorm" else "LayerNorm")
    assert answer["note"] == {"key": "attribution.note", "args": {}}
    assert "(frozen norm)" in say("attribution.note", "en")
    # Another character and token: the same sum.
    other = logit_attribution(model, record, position=3, token=2)
    assert other["total"] == pytest.approx(record.final["head_logits"][0, 3, 2].item(), abs=1e-5)
    with pytest.raises(ValueError, match="token must be in"):
        logit_attribution(model, record, token=len(VOCAB))


def test_a_last_layer_push_is_what_zeroing_changes_with_the_norm_frozen(model):
    # Zeroing the last MLP takes its write out of the stream; with the final norm's
    # divisor held, the logit falls by exactly its push. The real change differs by
    # what the divisor does: the frozen-norm approximation the page states.
    ids = ids_of(PROMPT)
    record = record_forward(model, ids)
    answer = logit_attribution(model, record)
    last = model.config.n_layer - 1
    push = next(p["push"] for p in answer["parts"] if p["kind"] == "mlp" and p["layer"] == last)
    zeroed = record_forward(model, ids, WhatIf(last, 0, ("zero_mlp",)))
    x = zeroed.final["residual"][0, -1].double()
    norm, token = model.ln_f, answer["token"]
    centred = x - x.mean() if answer["norm"] == "LayerNorm" else x
    bias = 0 if getattr(norm, "bias", None) is None else norm.bias.detach().double()
    held = norm.weight.detach().double() * centred / answer["divisor"] + bias
    held_logit = float(model.lm_head.weight[token].detach().double() @ held)
    assert held_logit == pytest.approx(answer["logit"] - push, abs=1e-5)
    real = zeroed.final["head_logits"][0, -1, token].item()
    assert real != pytest.approx(held_logit, abs=1e-4)  # the divisor did move
