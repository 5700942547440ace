"""The modern architecture options: each trains, stays causal, and matches its references
(on TEST_DEVICE, in float32)."""

import contextlib

import pytest
import torch

from model import GPT, GPTConfig, record_attention
from model.engine import Engine, allocate_cache, rotary_angles
from model.gpt import RotaryEmbedding, rotate
from tests.conftest import INDUCTOR, NEEDS_COMPILER, TEST_DEVICE

BASE = dict(vocab_size=20, block_size=16, n_layer=2, n_head=2, n_embd=32)
OPTIONS = {
    "gpt2": {},
    "rope": {"position": "rope"},
    "rmsnorm": {"norm": "rmsnorm"},
    "qk_norm": {"qk_norm": True},
    "relu2": {"activation": "relu2"},
    "untied": {"tie_embeddings": False},
    "softcap": {"logit_softcap": 5.0},
    "zero_init": {"zero_init_proj": True},
    "modern": {
        "position": "rope",
        "norm": "rmsnorm",
        "qk_norm": True,
        "activation": "relu2",
        "tie_embeddings": False,
        "logit_softcap": 15.0,
        "zero_init_proj": True,
    },
}


def build(name: str, **extra) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(**BASE, **OPTIONS[name], **extra)).to(TEST_DEVICE)


@pytest.mark.parametrize("name", OPTIONS)
def test_option_trains_and_stays_causal(name):
    model = build(name)
    x = torch.randint(0, 20, (8, 16)).to(TEST_DEVICE)
    y = torch.roll(x, -1, dims=1)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(15):
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.3

    model.eval()
    changed = x.clone()
    changed[:, 9:] = (x[:, 9:] + 1) % 20
    for explicit in (False, True):
        with record_attention(model) if explicit else contextlib.nullcontext():
            a, b = model(x)[0], model(changed)[0]
        torch.testing.assert_close(a[:, :9], b[:, :9], atol=1e-5, rtol=0)
        assert (a[:, 9:] - b[:, 9:]).abs().max() > 1e-4


@pytest.mark.parametrize("name", OPTIONS)
def test_fast_explicit_and_cached_paths_agree(name):
    model = build(name).eval()
    for p in model.parameters():  # zero-initialised projections would hide differences
        p.data.add_(0.02 * torch.randn_like(p))
    x = torch.randint(0, 20, (3, 12)).to(TEST_DEVICE)
    fast, _ = model(x)
    with record_attention(model) as weights:
        slow, _ = model(x)
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=0)
    torch.testing.assert_close(weights[0].sum(-1), torch.ones(3, 2, 12, device=TEST_DEVICE))
    engine = Engine(model, compile=False)
    with torch.no_grad():
        keys, values = allocate_cache(model, batch_size=3)
        slots = torch.arange(keys.size(3), device=TEST_DEVICE)
        steps = [engine.prefill(x[:, :5], keys, values)]
        for t in range(5, 12):
            position = torch.tensor([t], device=TEST_DEVICE)
            token = x[:, t : t + 1]
            steps.append(engine.decode_step(token, position, keys, values, slots))
    torch.testing.assert_close(torch.stack(steps, 1), fast[:, 4:12], atol=1e-4, rtol=0)


def test_rope_scores_depend_only_on_distance():
    torch.manual_seed(0)
    rope = RotaryEmbedding(head_size=8, block_size=64)
    q = torch.randn(1, 1, 1, 8)
    k = torch.randn(1, 1, 1, 8)

    def at(x, position: int):
        return rotate(x, *rotary_angles(rope, torch.tensor([position])))

    def score(i: int, j: int) -> float:
        return (at(q, i) * at(k, j)).sum().item()

    for i, j in [(5, 2), (10, 10), (3, 0)]:
        for shift in (1, 7, 40):
            assert score(i + shift, j + shift) == pytest.approx(score(i, j), abs=1e-4)
    assert score(5, 2) != pytest.approx(score(5, 4), abs=1e-3)  # distance matters
    torch.testing.assert_close(at(q, 0), q)  # position 0 is not rotated
    x = torch.randn(1, 2, 16, 8)
    table = torch.cat([at(x[:, :, t : t + 1], t) for t in range(16)], dim=2)
    torch.testing.assert_close(table, rope(x), atol=0, rtol=0)  # the table's angles


def test_rope_tables_are_shared_and_positions_past_them_are_computed():
    """The layers share one RotaryEmbedding; a decode step's angles come from its table
    inside block_size and are computed in float64 past it (a rolling cache)."""
    model = build("modern")
    rotaries = {id(block.attn.rotary) for block in model.blocks}
    assert len(rotaries) == 1 and model.blocks[0].attn.rotary is not None
    rope = RotaryEmbedding(head_size=8, block_size=16)
    for position in (0, 5, 15):
        cos, sin = rotary_angles(rope, torch.tensor([position]))
        assert torch.equal(cos[0], rope.cos[position]) and torch.equal(sin[0], rope.sin[position])
    cos, sin = rotary_angles(rope, torch.arange(16))  # a prefill's positions: the table
    assert torch.equal(cos, rope.cos) and torch.equal(sin, rope.sin)
    wide = RotaryEmbedding(head_size=8, block_size=5000)  # a float32 table reaching further
    for position in (16, 41, 4999):
        cos, sin = rotary_angles(rope, torch.tensor([position]))
        exact = position * rope.inv_freq.double()
        torch.testing.assert_close(cos[0], exact.cos().float(), atol=1e-7, rtol=0)
        torch.testing.assert_close(sin[0], exact.sin().float(), atol=1e-7, rtol=0)
        torch.testing.assert_close(cos[0], wide.cos[position], atol=1e-3, rtol=0)


def test_softcap_bounds_logits_and_untied_head_is_separate():
    model = build("modern")
    with torch.no_grad():
        model.lm_head.weight.mul_(1000)
    logits, _ = model(torch.randint(0, 20, (2, 16)).to(TEST_DEVICE))
    assert logits.abs().max() <= 15.0  # tanh saturates at the cap in float32
    assert model.lm_head.weight is not model.token_embedding.weight
    assert model.position_embedding is None
    assert torch.all(model.blocks[0].attn.out_proj.weight == 0)
    assert torch.all(model.blocks[1].mlp.down_proj.weight == 0)


@pytest.mark.slow  # torch.compile
@NEEDS_COMPILER
@INDUCTOR
def test_compiled_and_eager_forward_agree():
    model = build("modern").eval()
    x = torch.randint(0, 20, (2, 16)).to(TEST_DEVICE)
    compiled = torch.compile(model)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x)[0], model(x)[0], atol=1e-4, rtol=1e-4)
