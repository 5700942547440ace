"""The shape of the network: `GPTConfig`, the `model:` section of a run config."""

import dataclasses
import typing
from dataclasses import dataclass
from typing import Literal

from common.setting import setting

# The architecture choices; the run config's validator reads the allowed values from
# these types, so each is spelled here only.
Position = Literal["learned", "rope"]
Norm = Literal["layernorm", "rmsnorm"]
Activation = Literal["gelu", "relu2"]


@dataclass
class GPTConfig:
    """Hyperparameters that fix the GPT's architecture (the run config's `model:`
    section); each field's meaning is beside it.

    The defaults are GPT-2's architecture, the reference learners compare with;
    the modern options are switched on in the recipes that measured them better.

    Raises:
        ValueError: for a choice (position, norm, activation) outside its values.
    """

    vocab_size: int = setting(
        0,
        "distinct characters; set from the corpus, never by hand (0: not known yet)",
        bounds=">= 0",
        note="0: from the corpus",
        resume_may_change=True,
    )
    block_size: int = setting(
        64, "context length in characters; size of the position table", bounds="> 0"
    )
    n_layer: int = setting(4, "transformer blocks", bounds="> 0")
    n_head: int = setting(4, "attention heads per block; must divide n_embd", bounds="> 0")
    n_embd: int = setting(
        128, "width of the residual stream (channels per character)", bounds="> 0"
    )
    dropout: float = setting(0.0, "dropout probability, during training only", bounds="[0, 1)")
    bias: bool = setting(True, "biases in Linear and LayerNorm layers (GPT-2 has them)")
    position: Position = setting(
        "learned",
        "`learned` absolute position embeddings (GPT-2), or `rope`: rotary embeddings of "
        "queries and keys (Su et al. 2021)",
    )
    rope_base: float = setting(10000.0, "RoPE frequency base (theta)", bounds="> 1")
    norm: Norm = setting("layernorm", "`layernorm` (GPT-2) or `rmsnorm` (Zhang & Sennrich 2019)")
    qk_norm: bool = setting(
        False,
        "RMS-normalise each head's queries and keys before their dot product, which keeps "
        "attention logits bounded (Dehghani et al. 2023)",
    )
    activation: Activation = setting(
        "gelu", "MLP non-linearity: `gelu` (GPT-2) or `relu2`, ReLU squared (So et al. 2021)"
    )
    tie_embeddings: bool = setting(True, "the LM head shares the token embedding (GPT-2)")
    logit_softcap: float = setting(
        0.0,
        "if > 0, logits = cap * tanh(logits / cap) (Gemma 2); 0 is off",
        bounds=">= 0",
        note="0 = off",
    )
    zero_init_proj: bool = setting(
        False,
        "residual output projections start at zero, so each block starts as the identity "
        "(modded-nanogpt)",
    )

    def __post_init__(self):
        hints = typing.get_type_hints(GPTConfig)
        for f in dataclasses.fields(self):
            allowed = typing.get_args(hints[f.name])
            if typing.get_origin(hints[f.name]) is Literal and getattr(self, f.name) not in allowed:
                raise ValueError(
                    f"model.{f.name} must be one of {', '.join(allowed)}, "
                    f"got {getattr(self, f.name)!r}"
                )

    @property
    def head_size(self) -> int:
        """Channels per attention head, d_k = n_embd / n_head."""
        return self.n_embd // self.n_head
