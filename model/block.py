"""One transformer block: pre-norm attention and MLP, each added to the residual stream."""

import torch
import torch.nn.functional as F
from torch import nn

from model.attention import CausalSelfAttention
from model.config import GPTConfig
from model.kv_cache import KVCache
from model.linear import Linear
from model.norm import make_norm
from model.rope import RotaryEmbedding


class ReLUSquared(nn.Module):
    """relu(x)², elementwise (So et al. 2021, "Primer")."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Any shape in, same shape out."""
        return F.relu(x).square()


# One module per value of model.config.Activation.
ACTIVATIONS = {"gelu": nn.GELU, "relu2": ReLUSquared}


class MLP(nn.Module):
    """Position-wise feed-forward network: C -> 4C -> activation -> C.

    Args:
        config: uses n_embd, dropout, bias and activation ("gelu" as in GPT-2, or
            "relu2").
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.up_proj = Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.activation = ACTIVATIONS[config.activation]()
        self.down_proj = Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Map (B, T, C) activations to (B, T, C), each position independently."""
        return self.dropout(self.down_proj(self.activation(self.up_proj(x))))


class Block(nn.Module):
    """Pre-norm transformer block (GPT-2, Radford et al. 2019):

        x = x + attention(ln_1(x))
        x = x + mlp(ln_2(x))

    (norms are LayerNorm or RMSNorm, see `model.norm`)

    Args:
        config: the model's GPTConfig.
        rotary: the RoPE tables shared by the layers (``position=rope``), or None.
    """

    def __init__(self, config: GPTConfig, rotary: RotaryEmbedding | None = None):
        super().__init__()
        self.ln_1 = make_norm(config)
        self.attn = CausalSelfAttention(config, rotary)
        self.ln_2 = make_norm(config)
        self.mlp = MLP(config)

    def forward(
        self,
        x: torch.Tensor,
        return_weights: bool = False,
        cache: KVCache | None = None,
        layer: int = 0,
        last_only: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Transform (B, T, C) activations; optionally also return the block's
        (B, n_head, T, T) attention weights. With a KV cache, x holds the positions after
        the cached ones and ``layer`` is this block's index in the cache. With
        ``last_only``, return the last position only, (B, 1, C): its attention still
        reads (and caches) every position's key and value, but the MLP and the
        attention output run on one row.

        Raises:
            ValueError: from the attention, if ``return_weights`` is given with a cache
                or ``last_only``, or the new positions do not fit in the cache.
        """
        if return_weights:
            # The attention refuses return_weights with a cache or last_only.
            attended, weights = self.attn(
                self.ln_1(x), return_weights=True, cache=cache, layer=layer, last_only=last_only
            )
        else:
            attended = self.attn(self.ln_1(x), cache=cache, layer=layer, last_only=last_only)
        if last_only:
            x = x[:, -1:]
        x = x + attended
        x = x + self.mlp(self.ln_2(x))
        return (x, weights) if return_weights else x
