"""Normalisation layers: LayerNorm (GPT-2) or RMSNorm, chosen by the config."""

from torch import nn

from model.config import GPTConfig


def make_norm(config: GPTConfig) -> nn.Module:
    """A norm over the last dimension (n_embd) of (B, T, C) activations.

    "layernorm": subtract the mean, divide by the standard deviation, then a gain
    (and a bias if config.bias) (Ba et al. 2016). "rmsnorm": divide by the root mean
    square, then a gain; cheaper and as good in practice (Zhang & Sennrich 2019).
    (GPTConfig has checked config.norm.)
    """
    if config.norm == "rmsnorm":
        return nn.RMSNorm(config.n_embd)
    return nn.LayerNorm(config.n_embd, bias=config.bias)
