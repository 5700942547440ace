"""The network (model/gpt.py), its configuration (model/config.py), decoding with a
KV cache (model/engine.py) and sampling (model/sampling.py), and its loss over fixed
windows in nats and bits per character (model/scoring.py)."""

from model.config import GPTConfig
from model.gpt import GPT, CausalSelfAttention, causal_mask, explicit_attention, record_attention

__all__ = [
    "GPT",
    "GPTConfig",
    "CausalSelfAttention",
    "causal_mask",
    "explicit_attention",
    "record_attention",
]
