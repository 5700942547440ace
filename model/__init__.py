"""The network (model/gpt.py), its configuration (model/config.py), decoding with a
KV cache (model/engine.py) and sampling (model/sampling.py), and its loss over fixed
windows in nats and bits per character (model/scoring.py).

Imports point one way: engine.py imports gpt.py and sampling.py; gpt.py imports
config.py and sampling.py (for its uncached reference `GPT.generate`); sampling.py
imports nothing of model/."""

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
