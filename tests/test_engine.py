"""The decoding engine (model/engine.py): the compiled decode step is traced once and
never recompiles, the decode loop reads nothing back per token, the eager and compiled
steps sample the same tokens, and the CPU paths of the products equal F.linear.

Compilation is counted with a backend that records each graph torch.compile hands it
and runs it as captured (no code generation: the suite stays fast); ``aot_eager``
also traces the step through AOTAutograd, as inductor does before generating code.
"""

import math

import pytest
import torch
import torch.nn.functional as F

from conftest import sharp_model
from model import engine as engine_module
from model.engine import (
    CHUNK,
    Engine,
    few_rows_linear,
    generate_chunks,
    group_columns,
    one_row_linear,
    sliding_window_keep,
)

VOCAB = 20
BLOCK = 16


class CountingBackend:
    """A torch.compile backend that counts the graphs it is given and runs them as is."""

    def __init__(self):
        self.graphs = 0

    def __call__(self, graph_module, example_inputs):
        self.graphs += 1
        return graph_module.forward


def engine_tokens(engine: Engine, prompt: torch.Tensor, new: int, seed: int, **sampling):
    """(B, T + new) tokens from ``engine`` with a seeded CPU generator."""
    settings = {"temperature": 1.0, "top_k": None, "top_p": None, **sampling}
    generator = torch.Generator().manual_seed(seed)
    steps = engine.tokens(prompt, new, *settings.values(), generator)
    return torch.cat([prompt, *steps], dim=1)


@pytest.mark.slow  # torch.compile
@pytest.mark.parametrize("position", ["learned", "rope"])
def test_the_compiled_step_is_traced_once_over_1000_steps(position):
    """fullgraph=True raises at any graph break; 1,000 steps cross block_size 60 times
    (a learned-position model refills its window, a RoPE model's cache rolls, its
    positions going far past the rotary table) without a second trace, and sample the
    eager step's tokens with the same seed."""
    model = sharp_model(VOCAB, BLOCK, position=position)
    backend = CountingBackend()
    compiled = Engine(model, compile=True, backend=backend)
    prompt = torch.randint(0, VOCAB, (2, 3), generator=torch.Generator().manual_seed(0))
    tokens = engine_tokens(compiled, prompt, 1000, seed=1)
    assert backend.graphs == 1
    eager = engine_tokens(Engine(model, compile=False), prompt, 1000, seed=1)
    assert torch.equal(tokens, eager)
    # A second generation of the same shapes reuses the trace.
    engine_tokens(Engine(model, compile=True, backend=backend), prompt, 50, seed=2)
    assert backend.graphs == 1


@pytest.mark.slow  # torch.compile
@pytest.mark.parametrize(
    "position, sampling",
    [("learned", {"top_k": 5}), ("rope", {"temperature": 0.8, "top_p": 0.9})],
)
def test_eager_and_compiled_steps_sample_the_same_tokens(position, sampling):
    """The step traced through AOTAutograd (functionalised cache writes) gives the
    eager tokens with the same seed, inside block_size and past it."""
    model = sharp_model(VOCAB, 8, n_layer=1, position=position)
    prompt = torch.randint(0, VOCAB, (3, 2), generator=torch.Generator().manual_seed(3))
    compiled = engine_tokens(Engine(model, compile=True, backend="aot_eager"), prompt, 30, 4)
    eager = engine_tokens(Engine(model, compile=False), prompt, 30, 4)
    assert torch.equal(compiled, eager)
    assert len(set(eager[0, 2:].tolist())) > 3  # real samples, not one repeated token


SYNC_METHODS = ("item", "tolist", "cpu", "numpy", "__bool__")


@pytest.fixture
def host_reads(monkeypatch) -> dict[str, int]:
    """Counts of the Tensor methods that wait for the device to read a value back."""
    counts = dict.fromkeys(SYNC_METHODS, 0)
    for name in SYNC_METHODS:
        real = getattr(torch.Tensor, name)

        def counted(self, *args, _name=name, _real=real, **kwargs):
            counts[_name] += 1
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    return counts


@pytest.mark.parametrize("position", ["learned", "rope"])
def test_the_decode_loop_reads_tokens_back_in_chunks_only(position, host_reads):
    """Over 200 tokens (with slides past block_size) the host reads the tokens once
    per chunk of CHUNK, and nothing else."""
    model = sharp_model(VOCAB, BLOCK, position=position)
    prompt = torch.zeros(2, 3, dtype=torch.long)
    chunks = list(
        generate_chunks(model, prompt, 200, top_k=5, top_p=0.9, generator=torch.Generator())
    )
    counts = dict(host_reads)
    assert counts == {**dict.fromkeys(SYNC_METHODS, 0), "cpu": math.ceil(200 / CHUNK)}
    assert [c.size(1) for c in chunks] == [CHUNK] * (200 // CHUNK) + [200 % CHUNK]
    assert 200 > sliding_window_keep(BLOCK) + BLOCK  # the window slid or rolled


def test_chunks_hold_the_tokens_of_generate():
    model = sharp_model(VOCAB, BLOCK)
    prompt = torch.zeros(2, 1, dtype=torch.long)
    chunks = generate_chunks(model, prompt, 37, generator=torch.Generator().manual_seed(5))
    whole = model.generate(prompt, 37, generator=torch.Generator().manual_seed(5))
    assert torch.equal(torch.cat(list(chunks), dim=1), whole[:, 1:])
    with pytest.raises(ValueError, match="chunk_size"):
        generate_chunks(model, prompt, 3, chunk_size=0)


# The two CPU paths, each on the row counts it serves: one row, and a few.
CPU_PRODUCTS = {
    "one_row_linear": ([(1,), (1, 1), (1, 1, 1)], lambda x, w, b, g: one_row_linear(x, w, b, g)),
    "few_rows_linear": (
        [(2,), (8, 1), (3, 5)],
        lambda x, w, b, g: few_rows_linear(x, group_columns(w, g), b),
    ),
}
CPU_PRODUCT_CASES = [(name, rows) for name, (shapes, _) in CPU_PRODUCTS.items() for rows in shapes]


@pytest.mark.parametrize(("product", "leading"), CPU_PRODUCT_CASES)
@pytest.mark.parametrize("groups", [8, 4, 2])
@pytest.mark.parametrize("bias", [True, False])
def test_the_cpu_products_equal_f_linear(product, leading, groups, bias):
    torch.manual_seed(0)
    weight, b = torch.randn(48, 24), torch.randn(48) if bias else None
    x = torch.randn(*leading, 24)
    out = CPU_PRODUCTS[product][1](x, weight, b, groups)
    assert out.shape == (*leading, 48)
    torch.testing.assert_close(out, F.linear(x, weight, b), atol=1e-5, rtol=1e-6)


def test_the_cpu_products_refuse_rows_that_do_not_split_and_several_rows():
    with pytest.raises(ValueError, match="65 output rows do not split into 8"):
        one_row_linear(torch.randn(1, 8), torch.randn(65, 8), None, 8)
    with pytest.raises(ValueError, match="holds 2 rows"):
        one_row_linear(torch.randn(2, 8), torch.randn(64, 8), None, 8)
    with pytest.raises(ValueError, match="65 output rows do not split into 8"):
        group_columns(torch.randn(65, 8), 8)


@pytest.mark.parametrize("batch", [1, 4])
def test_the_cpu_paths_decode_the_greedy_tokens_of_f_linear(batch, monkeypatch):
    """Batch 1 takes `one_row_linear`, a batch `few_rows_linear`; both give the tokens
    of plain F.linear products."""
    model = sharp_model(VOCAB, BLOCK, n_embd=32)
    prompt = torch.randint(0, VOCAB, (batch, 5), generator=torch.Generator().manual_seed(6))
    plain = engine_tokens(Engine(model, cpu_paths=False), prompt, 40, 0, temperature=0)
    calls = []
    for name in ("one_row_linear", "few_rows_linear"):
        real = getattr(engine_module, name)

        def spy(*args, _real=real, _name=name, **kwargs):
            calls.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(engine_module, name, spy)
    fast = engine_tokens(Engine(model, cpu_paths=True), prompt, 40, 0, temperature=0)
    assert set(calls) == ({"one_row_linear"} if batch == 1 else {"few_rows_linear"})
    assert torch.equal(fast, plain)
