"""W_q, W_k, W_v of one head and Q = X·W_q (viz/head_projections.py) hold the model's own
weights and forward pass; a clicked cell's products add up to the cell."""

import pytest
import torch
import torch.nn.functional as F

from tests.conftest import sharp_model
from tests.viz.conftest import PROMPT, VOCAB, ids_of
from tests.viz.conftest import sharp_model as sharp_gpt2
from viz.attention_steps import record_forward
from viz.head_projections import head_columns, projection_cell, projection_steps

MODERN = {"position": "rope", "norm": "rmsnorm", "qk_norm": True, "bias": False}


def modern_model():
    return sharp_model(len(VOCAB), block_size=16, n_layer=2, n_head=3, n_embd=24, **MODERN)


@pytest.mark.parametrize("build", [sharp_gpt2, modern_model], ids=["gpt2", "modern"])
def test_columns_and_products_are_the_models(build):
    model = build()
    record = record_forward(model, ids_of(PROMPT))
    layer, head, d_k = 1, 2, model.config.head_size
    columns = head_columns(model, layer, head)
    block = model.blocks[layer]
    x = record.layers[layer]["x"][0]
    for part in ("q", "k", "v"):
        w = columns[f"w_{part}"]
        assert w.shape == (model.config.n_embd, d_k)
        bias = columns.get(f"b_{part}")
        assert (bias is None) == (block.attn.qkv_proj.bias is None)
        # X·W as the chapter writes it: the model's projection before QK-norm and RoPE.
        chapter = x @ w + (0 if bias is None else bias)
        q, k, v = block.attn.qkv_proj(x).detach().split(model.config.n_embd, dim=-1)
        model_part = {"q": q, "k": k, "v": v}[part][:, head * d_k : (head + 1) * d_k]
        torch.testing.assert_close(chapter, model_part, atol=1e-5, rtol=0)
    steps = {s.key: s for s in projection_steps(model, record, layer, head)}
    assert list(steps) == ["xw_q", "xw_k", "xw_v"]
    qkv = record.layers[layer]["qkv"][0]
    assert torch.equal(steps["xw_q"].values, qkv[:, head * d_k : (head + 1) * d_k])
    # V is used as it is (no QK-norm, no RoPE): the recorded v.
    assert torch.equal(steps["xw_v"].values, record.layers[layer]["v"][0, head])
    if model.config.qk_norm:  # the model's q: QK-norm (then RoPE) of X·W_q
        normed = F.rms_norm(steps["xw_q"].values, (d_k,))
        rotated = block.attn.rotary(normed[None, None])[0, 0]
        torch.testing.assert_close(rotated, record.layers[layer]["q"][0, head])
    else:
        assert torch.equal(steps["xw_q"].values, record.layers[layer]["q"][0, head])


def test_a_clicked_cell_is_the_sum_of_its_products():
    model = sharp_gpt2()
    record = record_forward(model, ids_of(PROMPT))
    cell = projection_cell(model, record, 1, 2, "q", row=4, column=5)
    x = record.layers[1]["x"][0, 4]
    assert torch.equal(cell["x"], x)
    weight = model.blocks[1].attn.qkv_proj.weight
    assert torch.equal(cell["w"], weight[2 * 8 + 5].detach())  # q part, head 2, column 5
    assert torch.equal(cell["products"], x * cell["w"])
    by_hand = sum(float(p) for p in cell["products"])  # the products, as shown
    by_hand += cell["bias"]
    assert cell["sum"] == pytest.approx(by_hand, abs=1e-9)
    assert cell["sum"] == pytest.approx(cell["value"], abs=1e-5)
    assert cell["value"] == record.layers[1]["qkv"][0, 4, 21].item()
    with pytest.raises(ValueError, match="rows 0..9, columns 0..7"):
        projection_cell(model, record, 1, 2, "q", row=10, column=0)
    with pytest.raises(ValueError, match="part must be one of q, k, v"):
        projection_cell(model, record, 1, 2, "o", row=0, column=0)
