"""Rotary position embeddings (RoPE; Su et al. 2021, "RoFormer", section 3.4).

Instead of adding a position vector to each token, RoPE rotates every pair of
channels of a query or key by an angle proportional to its position m: pair i turns by
m * base^(-2i/d_k). The dot product of a query at position m with a key at position n
then depends only on m - n, the distance between them. (That is what lets a rolling KV
cache keep its keys as the window moves past block_size: `model.kv_cache`.)
"""

import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    """Rotates (B, n_head, T, d_k) queries or keys by their positions.

    Channels are paired as (i, i + d_k/2) (the "half-split" layout of GPT-NeoX).

    Args:
        head_size: d_k, must be even.
        block_size: positions of the precomputed table (later ones are computed as needed).
        base: the frequency base theta.

    Raises:
        ValueError: if head_size is odd.
    """

    def __init__(self, head_size: int, block_size: int, base: float = 10000.0):
        super().__init__()
        if head_size % 2:
            raise ValueError(f"RoPE needs an even head size (n_embd / n_head), got {head_size}")
        inv_freq = base ** (-torch.arange(0, head_size, 2, dtype=torch.float32) / head_size)
        angles = torch.outer(torch.arange(block_size, dtype=torch.float32), inv_freq)
        # Derived from the config, so not saved in checkpoints (persistent=False).
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # (d_k/2,)
        self.register_buffer("cos", angles.cos(), persistent=False)  # (block_size, d_k/2)
        self.register_buffer("sin", angles.sin(), persistent=False)
        # The cos and sin of the last positions asked for past the table: a decode step
        # asks for the same position in every layer, for queries and keys alike.
        self._beyond_table: tuple | None = None

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        """Rotate x (B, n_head, T, d_k), whose positions are start .. start + T - 1.
        Positions past block_size (a rolling KV cache) get their angles computed in
        float64, so that a large position keeps its precision; the last ones are kept
        for the next call."""
        T = x.size(-2)
        if start + T <= self.cos.size(0):
            cos, sin = self.cos[start : start + T], self.sin[start : start + T]
        else:
            cos, sin = self._angles_beyond_table(start, T, x.device, x.dtype)
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)

    def _angles_beyond_table(
        self, start: int, T: int, device: torch.device, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(T, d_k/2) cos and sin of positions start .. start + T - 1 in ``dtype``,
        computed in float64; the last request is remembered."""
        key = (start, T, device, dtype)
        if self._beyond_table is None or self._beyond_table[0] != key:
            positions = torch.arange(start, start + T, device=device, dtype=torch.float64)
            angles = torch.outer(positions, self.inv_freq.to(device).double())
            self._beyond_table = (key, angles.cos().to(dtype), angles.sin().to(dtype))
        return self._beyond_table[1], self._beyond_table[2]
