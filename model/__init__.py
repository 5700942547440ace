"""The network (model/gpt.py), its configuration (model/config.py), decoding with a
KV cache (model/engine.py, with the opt-in few-row CPU products of
model/cpu_products.py) and sampling (model/sampling.py), and its loss over fixed
windows in nats and bits per character (model/scoring.py).

Imports point one way: engine.py imports gpt.py, sampling.py and cpu_products.py;
gpt.py imports config.py and sampling.py (for its uncached reference `GPT.generate`);
sampling.py and cpu_products.py import nothing of model/."""

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
