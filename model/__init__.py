"""The network: configuration, attention, transformer block, GPT and generation."""

from model.attention import CausalSelfAttention, causal_mask, explicit_attention
from model.config import GPTConfig
from model.gpt import GPT

__all__ = ["GPT", "GPTConfig", "CausalSelfAttention", "causal_mask", "explicit_attention"]
