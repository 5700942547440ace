"""The shape of the network: `GPTConfig`, the `model:` section of a run config."""

from dataclasses import dataclass


@dataclass
class GPTConfig:
    """Hyperparameters that fix the GPT's architecture.

    Attributes:
        vocab_size: number of distinct tokens (characters). Set from the corpus's
            tokenizer, never by hand: 0 means "not known yet".
        block_size: longest context in tokens; size of the position table.
        n_layer: number of transformer blocks.
        n_head: attention heads per block; must divide ``n_embd``.
        n_embd: width C of the residual stream (channels per token).
        dropout: dropout probability in [0, 1) used during training only.
        bias: whether Linear and LayerNorm layers carry a bias (GPT-2 does).
        position: "learned" absolute position embeddings (GPT-2) or "rope"
            (rotary embeddings of q and k, Su et al. 2021).
        rope_base: RoPE's frequency base (theta).
        norm: "layernorm" (GPT-2) or "rmsnorm" (Zhang & Sennrich 2019).
        qk_norm: RMS-normalise each head's queries and keys before their dot
            product (Dehghani et al. 2023), which keeps attention logits bounded.
        activation: MLP non-linearity, "gelu" (GPT-2) or "relu2" (ReLU squared,
            So et al. 2021, "Primer").
        tie_embeddings: share the token embedding with the LM head (GPT-2).
        logit_softcap: if > 0, logits = softcap * tanh(logits / softcap) (Gemma 2).
        zero_init_proj: start the residual output projections at zero, so each
            block starts as the identity (modded-nanogpt).

    The defaults are GPT-2's architecture, the reference learners compare with;
    the modern options are switched on in the recipes that measured them better.
    """

    vocab_size: int = 0
    block_size: int = 64
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    bias: bool = True
    position: str = "learned"
    rope_base: float = 10000.0
    norm: str = "layernorm"
    qk_norm: bool = False
    activation: str = "gelu"
    tie_embeddings: bool = True
    logit_softcap: float = 0.0
    zero_init_proj: bool = False

    @property
    def head_size(self) -> int:
        """Channels per attention head, d_k = n_embd / n_head."""
        return self.n_embd // self.n_head
