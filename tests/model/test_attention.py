"""Causal self-attention: the explicit path against the textbook formula, and the fused
path, the explicit path and causality of the whole model on TEST_DEVICE (in float32)."""

import contextlib
import math

import pytest
import torch

from model import GPT, CausalSelfAttention, GPTConfig, explicit_attention, record_attention
from tests.conftest import TEST_DEVICE


def reference_attention(q, k, v):
    """softmax(QKᵀ/√d_k) V with a causal mask, one query row at a time."""
    B, H, T, d = q.shape
    out = torch.zeros_like(q)
    weights = torch.zeros(B, H, T, T)
    for i in range(T):
        scores = (q[:, :, i : i + 1] @ k[:, :, : i + 1].transpose(-2, -1)) / math.sqrt(d)
        w = torch.softmax(scores, dim=-1)  # only keys 0..i exist for query i
        weights[:, :, i, : i + 1] = w[:, :, 0]
        out[:, :, i] = (w @ v[:, :, : i + 1])[:, :, 0]
    return out, weights


def test_explicit_attention_matches_the_formula():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 7, 5) for _ in range(3))
    out, weights = explicit_attention(q, k, v)
    ref_out, ref_weights = reference_attention(q, k, v)
    torch.testing.assert_close(weights, ref_weights, atol=1e-6, rtol=0)
    torch.testing.assert_close(out, ref_out, atol=1e-6, rtol=0)


def test_weights_rows_sum_to_one_and_future_is_zero():
    torch.manual_seed(0)
    attn = CausalSelfAttention(GPTConfig(vocab_size=10, n_embd=24, n_head=3, block_size=16))
    with record_attention(attn) as recorded:
        attn(torch.randn(2, 9, 24))
    (weights,) = recorded
    assert weights.shape == (2, 3, 9, 9)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 9))
    above = torch.ones(9, 9, dtype=torch.bool).triu(1)
    assert torch.all(weights[..., above] == 0)
    assert torch.all(weights[..., ~above] > 0)


@pytest.mark.parametrize("T", [1, 5, 16])
def test_fast_path_equals_explicit_path(T):
    torch.manual_seed(0)
    attn = CausalSelfAttention(GPTConfig(vocab_size=10, n_embd=32, n_head=4, block_size=16))
    attn.eval().to(TEST_DEVICE)
    x = torch.randn(3, T, 32).to(TEST_DEVICE)
    fast = attn(x)
    with record_attention(attn) as recorded:
        slow = attn(x)
    assert attn.recorder is None and len(recorded) == 1  # the explicit path ran, once
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=0)


def test_model_is_causal():
    """Changing tokens after position t must leave logits at positions <= t unchanged."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=20, block_size=16, n_layer=2, n_head=2, n_embd=32))
    model.eval().to(TEST_DEVICE)
    idx = torch.randint(0, 20, (2, 16)).to(TEST_DEVICE)
    t = 6
    changed = idx.clone()
    changed[:, t + 1 :] = (idx[:, t + 1 :] + 1) % 20
    for explicit in (False, True):
        with record_attention(model) if explicit else contextlib.nullcontext():
            a, b = model(idx)[0], model(changed)[0]
        torch.testing.assert_close(a[:, : t + 1], b[:, : t + 1], atol=1e-6, rtol=0)
        assert (a[:, t + 1 :] - b[:, t + 1 :]).abs().max() > 1e-3  # the future does matter


def test_model_attention_weights_and_logits_match_fast_path():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=20, block_size=16, n_layer=3, n_head=2, n_embd=32))
    model.eval().to(TEST_DEVICE)
    idx = torch.randint(0, 20, (2, 10)).to(TEST_DEVICE)
    fast, _ = model(idx)
    with record_attention(model) as weights:
        slow, _ = model(idx)
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=0)
    assert len(weights) == 3 and weights[0].shape == (2, 2, 10, 10)


def test_step_hook_sees_each_step_in_order_and_goes_on_with_what_it_returns():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 4, 3) for _ in range(3))
    seen = []

    def keep(name, tensor):
        seen.append((name, tensor.clone()))
        return tensor

    out, weights = explicit_attention(q, k, v, step=keep)
    assert [name for name, _ in seen] == ["q", "k", "v", "scores", "scaled", "masked"] + [
        "weights",
        "out",
    ]
    steps = dict(seen)
    assert torch.equal(steps["scores"], q @ k.transpose(-2, -1))
    assert torch.equal(steps["scaled"], steps["scores"] / math.sqrt(3))
    assert torch.equal(steps["weights"], weights) and torch.equal(steps["out"], out)
    plain = explicit_attention(q, k, v)
    assert torch.equal(plain[0], out) and torch.equal(plain[1], weights)

    def uniform(name, tensor):  # a changed step changes what follows it
        if name != "weights":
            return tensor
        return torch.ones_like(tensor).tril() / torch.arange(1, 5)[:, None]

    out, weights = explicit_attention(q, k, v, step=uniform)
    torch.testing.assert_close(out[0, 0, 3], v[0, 0].mean(0))


def test_record_attention_tells_the_step_hook_which_layer_calls():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=20, block_size=16, n_layer=3, n_head=2, n_embd=32)).eval()
    calls = []
    with record_attention(model, lambda layer, name, t: calls.append((layer, name)) or t) as w:
        model(torch.randint(0, 20, (1, 5)))
    assert [c for c in calls if c[1] == "weights"] == [
        (0, "weights"),
        (1, "weights"),
        (2, "weights"),
    ]
    assert len(w) == 3 and all(
        a.step_hook is None for a in model.modules() if hasattr(a, "step_hook")
    )
