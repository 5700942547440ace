"""The few-row CPU products of decoding (model/cpu_products.py): each equals F.linear on
the row counts it serves, the engine takes them only while a pass runs, and the tokens
they decode are those of plain F.linear."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import model.cpu_products as cpu_products_module
from model.cpu_products import CPUProducts, few_rows_linear, group_columns, one_row_linear
from model.engine import Engine, allocate_cache
from model.sampling import Sampling
from tests.conftest import sharp_model

VOCAB = 20
BLOCK = 16

# The two products, each on the row counts it serves: one row, and a few.
PRODUCTS = {
    "one_row_linear": ([(1,), (1, 1), (1, 1, 1)], lambda x, w, b, g: one_row_linear(x, w, b, g)),
    "few_rows_linear": (
        [(2,), (8, 1), (3, 5)],
        lambda x, w, b, g: few_rows_linear(x, group_columns(w, g), b),
    ),
}
CASES = [(name, rows) for name, (shapes, _) in PRODUCTS.items() for rows in shapes]


@pytest.mark.parametrize(("product", "leading"), CASES)
@pytest.mark.parametrize("groups", [8, 4, 2])
@pytest.mark.parametrize("bias", [True, False])
def test_the_cpu_products_equal_f_linear(product, leading, groups, bias):
    torch.manual_seed(0)
    weight, b = torch.randn(48, 24), torch.randn(48) if bias else None
    x = torch.randn(*leading, 24)
    out = PRODUCTS[product][1](x, weight, b, groups)
    assert out.shape == (*leading, 48)
    torch.testing.assert_close(out, F.linear(x, weight, b), atol=1e-5, rtol=1e-6)


def test_the_cpu_products_refuse_rows_that_do_not_split_and_several_rows():
    with pytest.raises(ValueError, match="65 output rows do not split into 8"):
        one_row_linear(torch.randn(1, 8), torch.randn(65, 8), None, 8)
    with pytest.raises(ValueError, match="holds 2 rows"):
        one_row_linear(torch.randn(2, 8), torch.randn(64, 8), None, 8)
    with pytest.raises(ValueError, match="65 output rows do not split into 8"):
        group_columns(torch.randn(65, 8), 8)


@pytest.fixture
def small_weights_too(monkeypatch):
    """The tests' small models take the products, which real ones take from 512 KiB on."""
    monkeypatch.setattr(cpu_products_module, "MIN_WEIGHT_BYTES", 0)


def test_only_weights_a_cache_cannot_hold_take_the_products():
    """A 4 x 128 model's weights (256 KiB at most) keep F.linear; a 6 x 384 model's
    (576 KiB to 2.25 MiB) take the products."""
    small, large = nn.Linear(128, 512), nn.Linear(384, 384)
    assert CPUProducts(nn.Sequential(small, nn.Linear(512, 128)), 1).layers == []
    assert CPUProducts(nn.Sequential(small, large), 1).layers == [large]


def test_installed_only_inside_the_block_and_layers_without_groups_keep_f_linear(
    small_weights_too,
):
    """Inside `installed` every splittable Linear computes through the products; a
    65-row head keeps F.linear; on exit each layer is a plain nn.Linear again."""
    model = nn.Sequential(nn.Linear(8, 16), nn.Linear(16, 65))
    products = CPUProducts(model, batch_size=1)
    assert products.layers == [model[0]]
    x = torch.randn(1, 1, 8)
    with products.installed():
        assert "forward" in vars(model[0]) and "forward" not in vars(model[1])
        torch.testing.assert_close(model(x), model[1](F.linear(x, model[0].weight, model[0].bias)))
    assert "forward" not in vars(model[0])


def test_the_engine_installs_the_products_around_each_pass_only(small_weights_too):
    """Between the steps of a generation (while the caller holds the stream, say) the model is
    its plain self."""
    model = sharp_model(VOCAB, BLOCK, n_embd=32)
    steps = Engine(model, cpu_products=True).tokens(
        torch.zeros(1, 3, dtype=torch.long), 5, Sampling()
    )
    next(steps)
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    assert all("forward" not in vars(m) for m in linears)
    list(steps)
    assert all("forward" not in vars(m) for m in linears)


def test_products_and_compile_are_refused_together():
    with pytest.raises(ValueError, match="not with compile"):
        Engine(sharp_model(VOCAB, BLOCK), compile=True, cpu_products=True)


@pytest.mark.parametrize("batch", [1, 4])
def test_the_products_decode_the_greedy_tokens_of_f_linear(batch, monkeypatch, small_weights_too):
    """Batch 1 takes `one_row_linear`, a batch `few_rows_linear`; both give the tokens
    of plain F.linear products."""
    model = sharp_model(VOCAB, BLOCK, n_embd=32)
    prompt = torch.randint(0, VOCAB, (batch, 5), generator=torch.Generator().manual_seed(6))

    def tokens(engine):
        return torch.cat([prompt, *engine.tokens(prompt, 40, Sampling(0.0))], dim=1)

    plain = tokens(Engine(model, cpu_products=False))
    calls = []
    for name in ("one_row_linear", "few_rows_linear"):
        real = getattr(cpu_products_module, name)

        def spy(*args, _real=real, _name=name, **kwargs):
            calls.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(cpu_products_module, name, spy)
    fast = tokens(Engine(model, cpu_products=True))
    assert set(calls) == ({"one_row_linear"} if batch == 1 else {"few_rows_linear"})
    assert torch.equal(fast, plain)


class DoubledLinear(nn.Linear):
    """An nn.Linear whose own forward doubles its output (as a LoRA or quantised layer
    brings its own computation)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 2 * super().forward(x)


def test_a_linear_with_its_own_forward_keeps_it(small_weights_too):
    """A layer whose forward is not nn.Linear's, or set on the instance, is left alone:
    decoding with the products gives the uncached reference's tokens (which run that
    forward), and the instance's own forward is still there afterwards."""
    model = sharp_model(VOCAB, BLOCK, 3, n_embd=32)
    for block in model.blocks:
        plain = block.mlp.up_proj
        block.mlp.up_proj = DoubledLinear(plain.in_features, plain.out_features)
        block.mlp.up_proj.load_state_dict(plain.state_dict())
    own = model.blocks[0].attn.out_proj
    own.forward = lambda x: F.linear(x, 3 * own.weight, own.bias)
    assert CPUProducts(model, 1).layers  # other layers still take the products
    prompt = torch.randint(0, VOCAB, (1, 4), generator=torch.Generator().manual_seed(8))
    reference = model.generate(prompt, 13, temperature=0)
    engine = Engine(model, cpu_products=True)
    decoded = torch.cat([prompt, *engine.tokens(prompt, 13, Sampling(0.0))], dim=1)
    assert torch.equal(decoded, reference)
    assert "forward" in vars(own)


def test_a_generation_leaves_no_products_behind(small_weights_too):
    """The regrouped weights last one generation: afterwards the engine's passes run
    the model's weights as they are now, and the copies are freed."""
    model = sharp_model(VOCAB, BLOCK, n_embd=32)
    engine = Engine(model, cpu_products=True)
    prompt = torch.zeros(2, 3, dtype=torch.long)
    list(engine.tokens(prompt, 3, Sampling(0.0)))
    assert engine.products is None
    stopped = engine.tokens(prompt, 3, Sampling(0.0))
    next(stopped)
    stopped.close()  # a stream stopped early (a stop sequence)
    assert engine.products is None
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1.5)
        keys, values = allocate_cache(model, 2)
        logits = engine.prefill(prompt[:, :1], keys, values)
        torch.testing.assert_close(logits, model(prompt[:, :1])[0][:, -1])
