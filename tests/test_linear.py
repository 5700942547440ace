"""The model's Linear (model/linear.py): the few-row routes of decoding on CPU compute
what F.linear computes, and only few-row CPU products without autograd take them."""

import copy
import dataclasses
import pickle

import pytest
import torch
import torch.nn.functional as F

from model import GPT, GPTConfig
from model import linear as linear_module
from model.linear import FEW_ROWS, Linear, PackedWeights, few_row_linear, pack_for_onednn


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
    # Outside a generation's PackedWeights, several rows take the grouped route too.
    assert calls == [("grouped", 1), ("grouped", 2)]
    out = layer(few)  # autograd on: F.linear, and gradients flow
    assert len(calls) == 2 and out.requires_grad
    out.sum().backward()
    assert layer.weight.grad is not None
    head = Linear(32, 65, bias=False)  # 65 rows split into no group
    with torch.no_grad():
        assert torch.equal(head(few), F.linear(few, head.weight))
    assert len(calls) == 2 and head.groups is None


def unit_scale(layer: Linear) -> Linear:
    """N(0, 1) weights and bias: sums of many products, far above the tolerances."""
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_()
    return layer


@needs_onednn
@pytest.mark.parametrize("rows", [2, 3, 8, FEW_ROWS])
@pytest.mark.parametrize("bias", [True, False])
def test_while_packed_weights_are_lent_several_rows_take_them(monkeypatch, rows, bias):
    torch.manual_seed(0)
    layer = unit_scale(Linear(40, 48, bias=bias))
    packed = PackedWeights(layer, batch_size=rows)
    calls = spy_on_few_row_routes(monkeypatch)
    x = torch.randn(rows, 1, 40)
    with torch.no_grad():
        with packed.active():
            out, expected = layer(x), F.linear(x, layer.weight, layer.bias)
            assert layer(x[:1]).shape == (1, 1, 48)  # one row: still grouped
        assert layer.packed is None
        layer(x)
    assert calls == [("packed", rows), ("grouped", 1), ("grouped", rows)]
    assert out.shape == expected.shape == (rows, 1, 48)
    assert expected.abs().max() > 10
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-6)


@pytest.mark.parametrize("batch_size", [1, FEW_ROWS + 1])
def test_nothing_is_packed_for_a_batch_the_route_cannot_serve(batch_size):
    layer = Linear(40, 48)
    packed = PackedWeights(layer, batch_size)
    with packed.active():
        assert layer.packed is None
    assert packed.layers == [] and packed.packed == []


def test_only_layers_the_route_serves_are_packed():
    config = GPTConfig(vocab_size=65, block_size=16, n_layer=2, n_head=2, n_embd=32)
    model = GPT(config)
    layers = PackedWeights(model, batch_size=4).layers
    # q/k/v, output, MLP up and down of 2 layers; not the 65-row head (F.linear).
    assert len(layers) == 8 and model.lm_head not in layers


@needs_onednn
def test_packed_weights_are_dropped_after_each_pass_even_when_it_fails():
    layer = Linear(40, 48)
    packed = PackedWeights(layer, batch_size=4)
    with pytest.raises(RuntimeError, match=r"shapes cannot be multiplied \(4x39 and 40x48\)"):
        with torch.no_grad(), packed.active():
            assert layer.packed is not None
            layer(torch.randn(4, 39))  # F.linear's own error names the shapes
    assert layer.packed is None


def decode_calls(monkeypatch, model, prompt, new_tokens):
    """The few-row routes taken while ``model`` generates, and the tokens."""
    calls = spy_on_few_row_routes(monkeypatch)
    gen = torch.Generator().manual_seed(0)
    tokens = model.generate(prompt, new_tokens, generator=gen)
    return calls, tokens


@needs_onednn
@pytest.mark.parametrize("position", ["learned", "rope"])
def test_a_batch_decodes_with_packed_weights_and_keeps_none_after(monkeypatch, position):
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=65, block_size=16, n_layer=2, n_head=2, n_embd=32)
    model = GPT(dataclasses.replace(config, position=position)).eval()
    prompt = torch.randint(0, 65, (4, 3))
    calls, tokens = decode_calls(monkeypatch, model, prompt, 20)
    # The prompt's prefill (12 rows; the last layer's products after its Q/K/V
    # projection on the last position only: 4 rows), then 19 passes, each a one-token
    # step of 8 products (4 in each of 2 layers). For learned positions, the 14th and
    # the 19th are slides past block_size instead: prefills of 12 tokens per sequence
    # (48 rows: F.linear), whose last 3 products (4 rows) take the grouped route.
    step = [("packed", 4)] * 8
    slide = [("grouped", 4)] * 3
    assert calls[:8] == [("grouped", 12)] * 5 + [("grouped", 4)] * 3
    if position == "rope":
        assert calls[8:] == step * 19
    else:
        assert calls[8:] == step * 13 + slide + step * 4 + slide
    assert all(layer.packed is None for layer in model.modules() if isinstance(layer, Linear))
    # Weights changed in a way no version counter sees (as a fused CPU optimizer step
    # does): the next generation must multiply the new values.
    with torch.no_grad():
        for p in model.parameters():
            p.data.mul_(1.5)
    _, again = decode_calls(monkeypatch, model, prompt, 20)
    fresh = GPT(model.config).eval()
    fresh.load_state_dict(model.state_dict())
    _, expected = decode_calls(monkeypatch, fresh, prompt, 20)
    assert torch.equal(again, expected) and not torch.equal(again, tokens)


@needs_onednn
def test_a_layer_with_lent_weights_can_be_copied_and_pickled():
    layer = Linear(40, 48)
    x = torch.randn(4, 40)
    with torch.no_grad(), PackedWeights(layer, batch_size=4).active():
        assert layer.packed is not None and layer.packed.is_mkldnn
        for twin in (copy.deepcopy(layer), pickle.loads(pickle.dumps(layer))):
            assert twin.packed is None
            torch.testing.assert_close(twin(x), F.linear(x, layer.weight, layer.bias))
        assert layer.packed is not None  # copying did not drop the original's


@needs_onednn
def test_torch_compile_traces_the_grouped_route_while_weights_are_lent():
    torch.manual_seed(0)
    layer = Linear(40, 48)
    compiled = torch.compile(layer)
    x = torch.randn(4, 40)
    with torch.no_grad(), PackedWeights(layer, batch_size=4).active():
        torch.testing.assert_close(compiled(x), F.linear(x, layer.weight, layer.bias))


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
    with torch.no_grad(), PackedWeights(layer, batch_size=3).active():
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
    packed = PackedWeights(layer, batch_size=rows)  # lent, but not for autocast
    with torch.no_grad(), packed.active(), torch.autocast("cpu", dtype=torch.bfloat16):
        out, expected = layer(x), F.linear(x, layer.weight, layer.bias)
    assert out.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(out, expected, atol=0.1, rtol=0.02)
