"""Sampling: KV cache parity with the full forward pass."""

import pytest
import torch

from model import GPT, GPTConfig
from model.kv_cache import KVCache

BLOCK = 16
VOCAB = 20


def make_model(block_size=BLOCK, vocab_size=VOCAB, seed=0, std=0.3):
    """A small GPT with weights far larger than GPT-2's initial ones: attention is then
    peaked and logits spread over several units, so a wrong key, value or position
    moves the logits well beyond the 1e-4 tolerance."""
    torch.manual_seed(seed)
    config = GPTConfig(vocab_size, block_size, n_layer=2, n_head=2, n_embd=32)
    model = GPT(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, std)
    return model


@pytest.fixture(scope="module")
def model():
    return make_model()


# --- KV cache parity ---------------------------------------------------------------


@pytest.mark.parametrize("prompt_len", [1, 5, BLOCK - 1, BLOCK])
def test_cached_logits_equal_full_forward_at_every_step(model, prompt_len):
    torch.manual_seed(1)
    idx = torch.randint(0, VOCAB, (3, BLOCK))
    worst = 0.0
    with torch.no_grad():
        cache = KVCache.for_model(model, batch_size=3)
        cached, _ = model(idx[:, :prompt_len], cache=cache)
        full, _ = model(idx[:, :prompt_len])
        worst = (cached - full).abs().max().item()
        for t in range(prompt_len, BLOCK):
            cached, _ = model(idx[:, t : t + 1], cache=cache)
            full, _ = model(idx[:, : t + 1])
            assert cached.shape == (3, 1, VOCAB)
            worst = max(worst, (cached[:, -1] - full[:, -1]).abs().max().item())
    assert cache.length == BLOCK
    assert full.std().item() > 0.3  # logits vary by 1000s of times the tolerance
    assert worst <= 1e-4


def test_chunked_prefill_after_cached_positions_is_causal(model):
    """Several new positions after cached ones (the bottom-right causal mask)."""
    torch.manual_seed(2)
    idx = torch.randint(0, VOCAB, (2, BLOCK))
    with torch.no_grad():
        cache = KVCache.for_model(model, batch_size=2)
        model(idx[:, :4], cache=cache)
        chunk, _ = model(idx[:, 4:11], cache=cache)
        full, _ = model(idx[:, :11])
    assert (chunk - full[:, 4:11]).abs().max().item() <= 1e-4


def test_cache_refuses_overflow_attention_weights_and_autograd(model):
    idx = torch.zeros(1, 10, dtype=torch.long)
    with torch.no_grad():
        cache = KVCache.for_model(model, batch_size=1)
        model(idx, cache=cache)
        with pytest.raises(ValueError, match="block_size"):
            model(idx, cache=cache)  # 10 + 10 > 16
        with pytest.raises(ValueError, match="return_attention"):
            model(idx[:, :1], return_attention=True, cache=cache)
    with pytest.raises(RuntimeError, match="inference"):
        model(idx, cache=KVCache.for_model(model, batch_size=1))
