"""Multi-head causal self-attention, the one place where tokens exchange information.

Each token's vector is projected to a query q, a key k and a value v. For every head:

    scores  = q kᵀ / √d_k                    (B, n_head, T, T)
    scores  = causal mask: future -> -inf   (token t may only look at 0..t)
    weights = softmax(scores, dim=-1)       each row sums to 1
    out     = weights v                     (B, n_head, T, d_k)

The heads are concatenated and projected back to n_embd channels
(Vaswani et al. 2017, "Attention Is All You Need", eq. 1 and section 3.2.2).
With the modern options, q and k are first RMS-normalised per head (QK-norm) and/or
rotated by their positions (RoPE, `model.rope`), before the scores are computed.

`CausalSelfAttention.forward` runs these steps with PyTorch's fused
`scaled_dot_product_attention` kernel (same maths, much faster); with
`return_weights=True` it runs them one by one, as written above, and returns the
attention weights too. Tests hold the two paths equal.

With a `KVCache` (generation), the new positions' keys and values are appended to the
cached ones and the new queries attend over all of them: query i of T new tokens sits
at absolute position length + i and may see keys 0 .. length + i.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from model.config import GPTConfig
from model.kv_cache import KVCache
from model.linear import Linear
from model.rope import RotaryEmbedding


def causal_mask(T: int, device: torch.device | None = None) -> torch.Tensor:
    """Lower-triangular boolean mask: entry (i, j) is True where query i may see key j.

    Args:
        T: sequence length.
        device: where to allocate the mask.

    Returns:
        (T, T) bool tensor, True on and below the diagonal, False above (the future).
    """
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


def explicit_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dropout: nn.Module | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention with a causal mask, step by step.

    Args:
        q, k, v: (B, n_head, T, d_k) queries, keys and values.
        dropout: optional dropout applied to the attention weights (training only).

    Returns:
        out: (B, n_head, T, d_k) weighted sums of the values.
        weights: (B, n_head, T, T) attention weights; row i is the distribution over
            the keys 0..i that query i attends to (zeros above the diagonal).
    """
    T, d_k = q.size(-2), q.size(-1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (B, n_head, T, T)
    # Mask before softmax so the future gets exactly zero weight, not a small one.
    scores = scores.masked_fill(~causal_mask(T, q.device), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    attended = dropout(weights) if dropout is not None else weights
    out = attended @ v  # weighted sum of values: (B, n_head, T, d_k)
    return out, weights


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with one fused Q/K/V projection.

    Args:
        config: uses n_embd, n_head, dropout and bias (and position, block_size and
            rope_base for RoPE).
        rotary: with ``position=rope``, the rotary embedding to use; the GPT passes
            one shared by all layers (the same tables). None makes one.

    Raises:
        ValueError: if n_embd is not divisible by n_head.
    """

    def __init__(self, config: GPTConfig, rotary: RotaryEmbedding | None = None):
        super().__init__()
        if config.n_embd % config.n_head != 0:
            raise ValueError(
                f"n_embd ({config.n_embd}) must be divisible by n_head ({config.n_head})"
            )
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout_p = config.dropout
        # One matrix computes q, k and v for every head at once: (C) -> (3C).
        self.qkv_proj = Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        # Output projection back into the residual stream (scaled at init, see GPT).
        self.out_proj = Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.qk_norm = config.qk_norm
        self.rotary = None
        if config.position == "rope":
            self.rotary = rotary
            if rotary is None:
                self.rotary = RotaryEmbedding(config.head_size, config.block_size, config.rope_base)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)

    def project_qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Project (B, T, C) activations to queries, keys and values and split them
        into heads: (q, k, v), each (B, n_head, T, d_k)."""
        B, T, C = x.shape
        q, k, v = self.qkv_proj(x).split(self.n_embd, dim=2)
        shape = (B, T, self.n_head, C // self.n_head)
        return (
            q.view(shape).transpose(1, 2),
            k.view(shape).transpose(1, 2),
            v.view(shape).transpose(1, 2),
        )

    def forward(
        self,
        x: torch.Tensor,
        return_weights: bool = False,
        cache: KVCache | None = None,
        layer: int = 0,
        last_only: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Attend over the sequence.

        Args:
            x: (B, T, C) activations.
            return_weights: if True, use the explicit step-by-step path and also
                return the attention weights.
            cache: optional KV cache; x then holds the T positions that follow the
                ``cache.length`` cached ones, and their keys and values are stored in it
                (``cache.length`` itself is advanced by the caller, once per model pass).
            layer: this block's index in the cache.
            last_only: compute the output of the last position only (the last block
                of a generation's prefill, whose other outputs nobody reads). Every
                position's key and value is still made, and stored in the cache.

        Returns:
            (B, T, C) output ((B, 1, C) with ``last_only``), or ``(output, weights)``
            with weights of shape (B, n_head, T, T) when ``return_weights`` is True.

        Raises:
            ValueError: if ``return_weights`` is given with ``cache`` or ``last_only``,
                or the new positions do not fit in the cache.
        """
        B, T, C = x.shape
        if return_weights and (cache is not None or last_only):
            raise ValueError("return_weights is not supported with a KV cache or last_only")
        q, k, v = self.project_qkv(x)
        if self.qk_norm:  # unit RMS per head: bounded attention logits
            q = F.rms_norm(q, (q.size(-1),))
            k = F.rms_norm(k, (k.size(-1),))
        if self.rotary is not None:  # positions continue after the cached ones
            start = cache.length if cache is not None else 0
            q, k = self.rotary(q, start), self.rotary(k, start)
        if last_only:
            q = q[:, :, -1:]  # the newest position, which may see every key
        if cache is not None:
            out = self._attend_cached(q, k, v, cache, layer)
        elif return_weights:
            out, weights = explicit_attention(q, k, v, self.attn_dropout)
        else:
            p = self.dropout_p if self.training else 0.0
            # One query (the last position) sees every key: no mask.
            causal = q.size(2) > 1
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=causal)
        out = out.transpose(1, 2).contiguous().view(B, q.size(2), C)  # concatenate the heads
        out = self.resid_dropout(self.out_proj(out))
        return (out, weights) if return_weights else out

    def _attend_cached(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache: KVCache, layer: int
    ) -> torch.Tensor:
        """(B, n_head, T, d_k) new keys and values, and the queries of all T new positions
        or of the last one only ((B, n_head, 1, d_k)) -> output of the same shape as the
        queries, attending over the cached positions and the new ones."""
        past = cache.length
        keys, values = cache.update(layer, k, v)
        p = self.dropout_p if self.training else 0.0
        if q.size(2) == 1 and q.size(0) == 1:
            # One query, the newest position (a decode step, or the last position of a
            # prefill): it may see every key, so no mask at all.
            return F.scaled_dot_product_attention(q, keys, values, dropout_p=p)
        if q.size(2) == 1:
            # The same for a batch of sequences, written out: with one query per
            # sequence the fused kernel's blocking buys nothing, and these two batched
            # products read the cache faster (on CPU, a step of 8 sequences at full
            # context takes 5-8% less time on two machines; for one sequence the fused
            # kernel is about 4% faster). Scaling q (d_k numbers per head) costs less
            # than scaling the scores (one per key).
            scores = (q * (1.0 / math.sqrt(q.size(-1)))) @ keys.transpose(-2, -1)
            return self.attn_dropout(torch.softmax(scores, dim=-1)) @ values
        if past == 0:
            # Prefill into an empty cache: the usual square causal mask.
            return F.scaled_dot_product_attention(q, keys, values, dropout_p=p, is_causal=True)
        # Several new positions after cached ones. is_causal=True would align the mask to
        # the top left (query i sees keys 0..i), so build the bottom-right one explicitly:
        # query i is position past + i and sees keys 0 .. past + i.
        T = q.size(2)
        mask = torch.ones(T, past + T, dtype=torch.bool, device=q.device).tril(diagonal=past)
        return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, dropout_p=p)
