"""The decoding engine (model/engine.py): the compiled decode step is traced once and
never recompiles, the decode loop reads nothing back per token, the eager and compiled
steps sample the same tokens; and decoding runs the network of model/gpt.py itself, so
that a change to a block changes training and decoding alike.

Compilation is counted with a backend that records each graph torch.compile hands it
and runs it as captured (no code generation: the suite stays fast); ``aot_eager``
also traces the step through AOTAutograd, as inductor does before generating code.
"""

import ast
import math
import re

import pytest
import torch

from model.engine import (
    CHUNK,
    Engine,
    generate,
    generate_stream,
    read_in_chunks,
    sliding_window_keep,
)
from model.gpt import Block, KVCache
from model.sampling import Sampling
from tests.conftest import INDUCTOR, NEEDS_COMPILER, ROOT, sharp_model

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
    steps = engine.tokens(prompt, new, Sampling(**sampling, seed=seed))
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
    sampling = Sampling(top_k=5, top_p=0.9, generator=torch.Generator())
    chunks = list(read_in_chunks(generate_stream(model, prompt, 200, sampling)))
    counts = dict(host_reads)
    assert counts == {**dict.fromkeys(SYNC_METHODS, 0), "cpu": math.ceil(200 / CHUNK)}
    assert [c.size(1) for c in chunks] == [CHUNK] * (200 // CHUNK) + [200 % CHUNK]
    assert 200 > sliding_window_keep(BLOCK) + BLOCK  # the window slid or rolled


def test_chunks_hold_the_tokens_of_generate():
    model = sharp_model(VOCAB, BLOCK)
    prompt = torch.zeros(2, 1, dtype=torch.long)
    chunks = read_in_chunks(generate_stream(model, prompt, 37, Sampling(seed=5)), 5)
    whole = generate(model, prompt, 37, Sampling(seed=5))
    assert torch.equal(torch.cat(list(chunks), dim=1), whole[:, 1:])
    with pytest.raises(ValueError, match="chunk_size"):
        read_in_chunks(iter([]), chunk_size=0)


# --- one path through the network -------------------------------------------------


def test_the_engine_does_not_wire_the_network_again():
    """model/engine.py names no layer of a block or of the head: the network is run
    by `GPT.forward` only, which a change to model/gpt.py changes for both."""
    text = (ROOT / "model" / "engine.py").read_text(encoding="utf-8")
    layers = ("ln_1", "ln_2", "qkv_proj", "out_proj", "up_proj", "down_proj", "ln_f")
    assert [name for name in layers if re.search(rf"\b{name}\b", text)] == []


def test_model_gpt_does_not_import_the_engine():
    """The engine imports model/gpt.py; never the other way round, not even inside a
    function (no import circle)."""
    tree = ast.parse((ROOT / "model" / "gpt.py").read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module)
            imported |= {f"{node.module}.{alias.name}" for alias in node.names}
    assert "model.engine" not in imported and "model" not in imported
    assert {"model.config", "model.sampling"} <= imported


def mlp_doubled(self, x, kv_cache=None):
    """`Block.forward` with the MLP's output scaled by 2."""
    x = x + self.attn(self.ln_1(x), kv_cache)
    return x + 2 * self.mlp(self.ln_2(x))


@NEEDS_COMPILER
@INDUCTOR
@pytest.mark.parametrize("position, seed", [("learned", 3), ("rope", 2)])
def test_a_change_to_block_changes_training_and_cached_decoding_alike(position, seed, monkeypatch):
    """Patching `Block.forward` changes the training forward's logits and the cached
    decoder's tokens together: under the patch cached greedy decoding still gives the
    tokens of the uncached reference (which runs the training forward), and they differ
    from those of the unpatched model."""
    model = sharp_model(VOCAB, BLOCK, seed, position=position)  # greedy text that varies
    prompt = torch.randint(0, VOCAB, (3, 4), generator=torch.Generator().manual_seed(8))
    new = BLOCK + 1 - 4  # inside block_size: cached and uncached give the same tokens
    greedy = Sampling(temperature=0)
    with torch.no_grad():
        logits = model(prompt)[0]
    before = generate(model, prompt, new, greedy)
    assert torch.equal(before, model.generate(prompt, new, temperature=0))
    monkeypatch.setattr(Block, "forward", mlp_doubled)
    with torch.no_grad():
        patched_logits = model(prompt)[0]
    assert (patched_logits - logits).abs().max() > 0.1  # the training forward changed
    after = generate(model, prompt, new, greedy)
    assert torch.equal(after, model.generate(prompt, new, temperature=0))
    assert (after != before).sum() > 5
    if position == "rope":  # once: building the kernels is most of this test's time
        compiled = generate(model, prompt, new, greedy, compile=True)
        assert torch.equal(compiled, after)  # the compiled step traces the patched block


def test_a_cache_without_a_mask_refuses_new_tokens_that_do_not_fill_it():
    """Several new tokens over more slots than tokens, with no mask: the causal mask
    among them would line up with the wrong slots, so KVCache says what is missing."""
    keys = torch.zeros(1, 1, 2, 8, 4)
    positions = torch.arange(3)
    with pytest.raises(ValueError, match=r"3 new tokens over 8 slots need a \(T, S\) mask"):
        KVCache(keys, keys.clone(), positions)
    KVCache(keys[..., :3, :], keys[..., :3, :].clone(), positions)  # a prefill: S == T
    KVCache(keys, keys.clone(), torch.tensor([5]))  # one token: a decode step
