"""The model's Linear (model/linear.py): the few-row route of decoding on CPU computes
what F.linear computes, and only few-row CPU products without autograd take it."""

import pytest
import torch
import torch.nn.functional as F

from model import GPT, GPTConfig
from model import linear as linear_module
from model.linear import FEW_ROWS, Linear, few_row_linear


@pytest.mark.parametrize("leading", [(1, 1), (1,), (3, 1), (2, 4), (FEW_ROWS,)])
@pytest.mark.parametrize("groups", [2, 4, 8])
@pytest.mark.parametrize("bias", [True, False])
def test_few_row_linear_equals_f_linear(leading, groups, bias):
    torch.manual_seed(0)
    weight = torch.randn(48, 40)  # 48 output rows: 2, 4 or 8 groups
    b = torch.randn(48) if bias else None
    x = torch.randn(*leading, 40)
    out = few_row_linear(x, weight, b, groups)
    expected = F.linear(x, weight, b)
    assert out.shape == expected.shape
    assert expected.abs().max() > 10  # sums of 40 products: far above the tolerance
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-6)


def test_few_row_linear_refuses_rows_that_do_not_split():
    with pytest.raises(ValueError, match="65 output rows do not split into 8 groups"):
        few_row_linear(torch.randn(1, 8), torch.randn(65, 8), None, 8)


def spy_on_few_row_route(monkeypatch) -> list[int]:
    """Record the row count of every product that takes the few-row route."""
    calls = []
    real = linear_module.few_row_linear

    def spy(x, weight, bias, groups):
        calls.append(x.numel() // x.size(-1))
        return real(x, weight, bias, groups)

    monkeypatch.setattr(linear_module, "few_row_linear", spy)
    return calls


def test_only_few_row_products_without_autograd_take_the_route(monkeypatch):
    torch.manual_seed(0)
    layer = Linear(32, 64)
    calls = spy_on_few_row_route(monkeypatch)
    few, many = torch.randn(2, 1, 32), torch.randn(2, FEW_ROWS, 32)
    with torch.no_grad():
        torch.testing.assert_close(layer(few), F.linear(few, layer.weight, layer.bias))
        assert torch.equal(layer(many), F.linear(many, layer.weight, layer.bias))
    assert calls == [2]
    out = layer(few)  # autograd on: F.linear, and gradients flow
    assert calls == [2] and out.requires_grad
    out.sum().backward()
    assert layer.weight.grad is not None
    head = Linear(32, 65, bias=False)  # 65 rows split into no group
    with torch.no_grad():
        assert torch.equal(head(few), F.linear(few, head.weight))
    assert calls == [2] and head.groups is None


def test_a_decode_step_takes_the_route_and_keeps_the_state_dict_keys(monkeypatch):
    config = GPTConfig(vocab_size=65, block_size=16, n_layer=2, n_head=2, n_embd=32)
    model = GPT(config).eval()
    calls = spy_on_few_row_route(monkeypatch)
    with torch.no_grad():
        model(torch.zeros(1, 1, dtype=torch.long))
    # q/k/v, output, MLP up and down in each of 2 layers; the 65-row head is F.linear.
    assert calls == [1] * 8
    assert all(not key.endswith(("groups", "rotary.cos")) for key in model.state_dict())
    assert "blocks.0.attn.qkv_proj.weight" in model.state_dict()


def test_the_route_keeps_f_linear_dtype_under_cpu_autocast():
    torch.manual_seed(0)
    layer = Linear(40, 48)
    x = torch.randn(1, 40)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        out, expected = layer(x), F.linear(x, layer.weight, layer.bias)
    assert out.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(out, expected, atol=0.1, rtol=0.02)
