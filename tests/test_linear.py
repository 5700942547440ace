"""The model's Linear (model/linear.py): the few-row routes of decoding on CPU compute
what F.linear computes, and only few-row CPU products without autograd take them."""

import copy
import pickle

import pytest
import torch
import torch.nn.functional as F

from model import GPT, GPTConfig
from model import linear as linear_module
from model.linear import FEW_ROWS, Linear, few_row_linear, pack_for_onednn


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


@pytest.mark.parametrize("groups", [2, 4, 8])
def test_a_row_that_is_a_strided_view_is_read_at_its_strides(groups):
    torch.manual_seed(0)
    weight, b = torch.randn(48, 40), torch.randn(48)
    table = torch.randn(40, 3)
    for x in (table[:, 1], table.t()[2:3, :], table.t()[0, ::1]):  # strides 3, (1, 3), 3
        assert not x.is_contiguous()
        torch.testing.assert_close(
            few_row_linear(x, weight, b, groups), F.linear(x, weight, b), atol=1e-5, rtol=1e-6
        )


def test_few_row_linear_refuses_rows_that_do_not_split():
    with pytest.raises(ValueError, match="65 output rows do not split into 8 groups"):
        few_row_linear(torch.randn(1, 8), torch.randn(65, 8), None, 8)


def spy_on_few_row_routes(monkeypatch) -> list[tuple[str, int]]:
    """Record the route ("grouped" or "packed") and the row count of every product that
    takes a few-row route."""
    calls = []

    def spy(name):
        real = getattr(linear_module, name)

        def recorded(x, *args):
            route = "grouped" if name == "few_row_linear" else "packed"
            calls.append((route, x.numel() // x.size(-1)))
            return real(x, *args)

        monkeypatch.setattr(linear_module, name, recorded)

    spy("few_row_linear")
    spy("packed_linear")
    return calls


needs_onednn = pytest.mark.skipif(
    not torch.backends.mkldnn.is_available(), reason="this PyTorch has no oneDNN"
)


def test_only_few_row_products_without_autograd_take_a_route(monkeypatch):
    torch.manual_seed(0)
    layer = Linear(32, 64)
    calls = spy_on_few_row_routes(monkeypatch)
    one, few, many = torch.randn(1, 1, 32), torch.randn(2, 1, 32), torch.randn(2, FEW_ROWS, 32)
    with torch.no_grad():
        for x in (one, few):
            torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias))
        assert torch.equal(layer(many), F.linear(many, layer.weight, layer.bias))
    several = "packed" if torch.backends.mkldnn.is_available() else "grouped"
    assert calls == [("grouped", 1), (several, 2)]
    out = layer(few)  # autograd on: F.linear, and gradients flow
    assert len(calls) == 2 and out.requires_grad
    out.sum().backward()
    assert layer.weight.grad is not None
    head = Linear(32, 65, bias=False)  # 65 rows split into no group
    with torch.no_grad():
        assert torch.equal(head(few), F.linear(few, head.weight))
    assert len(calls) == 2 and head.groups is None


@needs_onednn
@pytest.mark.parametrize("rows", [2, 3, 8, FEW_ROWS])
@pytest.mark.parametrize("bias", [True, False])
def test_several_rows_take_the_packed_route_and_equal_f_linear(monkeypatch, rows, bias):
    torch.manual_seed(0)
    layer = Linear(40, 48, bias=bias)
    with torch.no_grad():  # unit-scale weights: sums far above the tolerance
        for p in layer.parameters():
            p.normal_()
    calls = spy_on_few_row_routes(monkeypatch)
    x = torch.randn(rows, 1, 40)
    with torch.no_grad():
        out, expected = layer(x), F.linear(x, layer.weight, layer.bias)
    assert calls == [("packed", rows)]
    assert out.shape == expected.shape == (rows, 1, 48)
    assert expected.abs().max() > 10
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-6)


@needs_onednn
def test_the_packed_weight_follows_every_change_of_the_weight():
    torch.manual_seed(0)
    layer = Linear(40, 48)
    x = torch.randn(4, 40)
    with torch.no_grad():
        layer(x)  # packs the weight
        layer.weight.mul_(-2.0)  # an in-place update, as an optimizer step makes
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias))
        layer.load_state_dict(Linear(40, 48).state_dict())
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias))
    optimizer = torch.optim.AdamW(layer.parameters(), lr=0.1)
    layer(x).square().sum().backward()
    optimizer.step()
    with torch.no_grad():
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias))


@needs_onednn
def test_a_layer_with_a_packed_weight_can_be_copied_and_pickled():
    layer = Linear(40, 48)
    x = torch.randn(4, 40)
    with torch.no_grad():
        layer(x)
    assert layer._packed is not None and layer._packed[1].is_mkldnn
    for twin in (copy.deepcopy(layer), pickle.loads(pickle.dumps(layer))):
        with torch.no_grad():
            torch.testing.assert_close(twin(x), F.linear(x, layer.weight, layer.bias))
    assert layer._packed is not None  # copying did not drop the original's


def refuse_to_pack(weight, batch_size=None):
    raise RuntimeError("no packing here")


@pytest.mark.parametrize("missing", ["oneDNN", "the packing operator"])
def test_without_onednn_several_rows_take_the_grouped_route(monkeypatch, missing):
    if missing == "oneDNN":
        monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    else:
        monkeypatch.setattr(torch.ops.mkldnn, "_reorder_linear_weight", refuse_to_pack)
    assert pack_for_onednn(torch.randn(48, 40)) is None
    layer = Linear(40, 48)
    calls = spy_on_few_row_routes(monkeypatch)
    x = torch.randn(3, 40)
    with torch.no_grad():
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias))
    assert calls == [("grouped", 3)]


def test_a_decode_step_takes_the_route_and_keeps_the_state_dict_keys(monkeypatch):
    config = GPTConfig(vocab_size=65, block_size=16, n_layer=2, n_head=2, n_embd=32)
    model = GPT(config).eval()
    calls = spy_on_few_row_routes(monkeypatch)
    with torch.no_grad():
        model(torch.zeros(1, 1, dtype=torch.long))
    # q/k/v, output, MLP up and down in each of 2 layers; the 65-row head is F.linear.
    assert calls == [("grouped", 1)] * 8
    assert all(not key.endswith(("groups", "rotary.cos")) for key in model.state_dict())
    assert "blocks.0.attn.qkv_proj.weight" in model.state_dict()


@pytest.mark.parametrize("rows", [1, 4])
def test_the_route_keeps_f_linear_dtype_under_cpu_autocast(rows):
    torch.manual_seed(0)
    layer = Linear(40, 48)
    x = torch.randn(rows, 40)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        out, expected = layer(x), F.linear(x, layer.weight, layer.bias)
    assert out.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(out, expected, atol=0.1, rtol=0.02)
