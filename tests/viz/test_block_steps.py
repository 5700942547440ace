"""The rest of the block (viz/block_steps.py) is the model's own forward pass, for a GPT-2
block and a modern one; a neuron's derivation adds up; zeroing a head, the MLP or one
neuron changes the residual stream and the logits exactly as the page says: that
part's write is gone, and the layers after it run on what is left."""

import pytest
import torch
import torch.nn.functional as F

from tests.viz.conftest import PROMPT, ids_of
from viz.attention_steps import WhatIf, record_forward
from viz.block_steps import BLOCK_CHAPTERS, block_steps, neuron_derivation
from viz.logit_attribution import head_writes


def test_every_table_is_the_models_forward_pass(model):
    ids = ids_of(PROMPT)
    record = record_forward(model, ids)
    with torch.no_grad():
        for layer, block in enumerate(model.blocks):
            steps = {s.key: s.values for s in block_steps(record, layer)}
            assert list(steps) == [
                *("block_in", "block_attention", "block_mid", "mlp_x"),
                *("up", "act", "down", "block_out"),
            ]
            before = steps["block_in"]
            # The recorded pass takes the explicit attention path; the fused one agrees.
            fused = block.attn(block.ln_1(before[None]))[0]
            torch.testing.assert_close(steps["block_attention"], fused, atol=1e-5, rtol=0)
            assert torch.equal(steps["block_attention"], record.layers[layer]["projected"][0])
            assert torch.equal(steps["block_mid"], before + steps["block_attention"])
            assert torch.equal(steps["mlp_x"], block.ln_2(steps["block_mid"]))
            assert torch.equal(steps["up"], block.mlp.up_proj(steps["mlp_x"]))
            assert steps["up"].shape == (len(PROMPT), 4 * model.config.n_embd)
            if model.config.activation == "gelu":
                assert torch.equal(steps["act"], F.gelu(steps["up"]))
            else:
                assert torch.equal(steps["act"], F.relu(steps["up"]).square())
            assert torch.equal(steps["down"], block.mlp.down_proj(steps["act"]))
            assert torch.equal(steps["block_out"], steps["block_mid"] + steps["down"])
            torch.testing.assert_close(
                steps["block_out"], block(before[None])[0], atol=1e-5, rtol=0
            )
        if model.position_embedding is not None:
            first = model.token_embedding(ids) + model.position_embedding(torch.arange(len(ids)))
        else:
            first = model.token_embedding(ids)
        first_steps = {s.key: s for s in block_steps(record, 0)}
        assert torch.equal(first_steps["block_in"].values, first)
        assert {s.chapter for s in first_steps.values()} == set(BLOCK_CHAPTERS)
        assert torch.equal(record.final["residual"], record.layers[-1]["residual_out"])
        assert torch.equal(record.final["normed"], model.ln_f(record.final["residual"]))
        assert torch.equal(record.logits, model.head(record.final["residual"]))
    with pytest.raises(ValueError, match="layer must be in 0..1"):
        block_steps(record, 2)


def test_a_neurons_derivation_adds_up(model):
    record = record_forward(model, ids_of(PROMPT))
    d = neuron_derivation(model, record, layer=1, row=6, neuron=37)
    mlp = model.blocks[1].mlp
    assert torch.equal(d["x"], record.layers[1]["mlp_x"][0, 6])
    assert torch.equal(d["w"], mlp.up_proj.weight[37].detach())
    by_hand = sum(float(p) for p in d["products"]) + (d["bias"] or 0.0)
    assert d["sum"] == pytest.approx(by_hand, abs=1e-9)
    assert d["sum"] == pytest.approx(d["pre"], abs=1e-5)
    assert d["pre"] == record.layers[1]["up"][0, 6, 37].item()
    assert d["act"] == record.layers[1]["act"][0, 6, 37].item()
    assert torch.equal(d["w_down"], mlp.down_proj.weight[:, 37].detach())
    # The neurons' writes (and the bias) add up to the MLP's output at that character.
    act = record.layers[1]["act"][0, 6]
    writes = act[:, None] * mlp.down_proj.weight.T.detach()  # (4C, C)
    assert torch.equal(d["write"], writes[37])
    total = writes.double().sum(0) + (0 if mlp.down_proj.bias is None else mlp.down_proj.bias)
    torch.testing.assert_close(total.float(), record.layers[1]["mlp"][0, 6], atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="neuron must be in 0..95"):
        neuron_derivation(model, record, 1, 0, 96)


@pytest.mark.parametrize("layer", [0, 1])
def test_zeroing_a_head_removes_exactly_its_write(model, layer):
    ids = ids_of(PROMPT)
    own = record_forward(model, ids)
    zeroed = record_forward(model, ids, WhatIf(layer, 1, ("zero_head",)))
    assert zeroed.what_if.describe().startswith(f"layer {layer}, head 1: this head's output")
    kept, was = zeroed.layers[layer], own.layers[layer]
    assert not kept["out"][0, 1].any() and torch.equal(kept["out"][0, 0], was["out"][0, 0])
    write = head_writes(model, own, layer)[1]
    torch.testing.assert_close(kept["attention"][0], was["attention"][0] - write, atol=1e-5, rtol=0)
    torch.testing.assert_close(kept["residual_mid"], was["residual_mid"] - write, atol=1e-5, rtol=0)
    # The layers after it run on what is left; the logits are the model's head of that.
    with torch.no_grad():
        assert torch.equal(zeroed.logits, model.head(zeroed.layers[-1]["residual_out"]))
    assert (zeroed.logits - own.logits).abs().max() > 1e-3


def test_zeroing_the_mlp_or_a_neuron_removes_exactly_its_write(model):
    ids = ids_of(PROMPT)
    own = record_forward(model, ids)
    last = model.config.n_layer - 1
    no_mlp = record_forward(model, ids, WhatIf(last, 0, ("zero_mlp",)))
    assert no_mlp.what_if.describe() == (
        f"layer {last}: this layer's MLP output set to 0: it writes nothing into the "
        "residual stream"
    )
    kept = no_mlp.layers[last]
    assert not kept["mlp"].any() and torch.equal(kept["up"], own.layers[last]["up"])
    assert torch.equal(kept["residual_out"], own.layers[last]["residual_mid"])
    with torch.no_grad():  # the last layer: the logits of the stream before the MLP
        assert torch.equal(no_mlp.logits, model.head(own.layers[last]["residual_mid"]))
    neuron = 11
    one = record_forward(model, ids, WhatIf(0, 0, ("zero_neuron",), neuron))
    assert one.what_if.describe() == (
        "layer 0: one MLP neuron's activation set to 0: its column of W_down writes "
        "nothing (neuron 11)"
    )
    assert one.what_if.describe("ko") == (
        "0층: MLP 뉴런 하나의 활성화를 0으로: 그 뉴런의 W_down 열이 아무것도 쓰지 "
        "않습니다 (11번 뉴런)"
    )
    kept, was = one.layers[0], own.layers[0]
    assert not kept["act"][0, :, neuron].any()
    assert torch.equal(kept["up"], was["up"])  # only the activation is zeroed
    w_down = model.blocks[0].mlp.down_proj.weight[:, neuron].detach()
    expected = was["mlp"][0] - was["act"][0, :, neuron, None] * w_down
    torch.testing.assert_close(kept["mlp"][0], expected, atol=1e-5, rtol=0)
    assert (one.logits - own.logits).abs().max() > 1e-6
    with pytest.raises(ValueError, match="zero_neuron needs the neuron"):
        WhatIf(0, 0, ("zero_neuron",))
    with pytest.raises(ValueError, match="neuron must be in 0..95"):
        record_forward(model, ids, WhatIf(0, 0, ("zero_neuron",), 96))
