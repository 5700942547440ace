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
    """

    vocab_size: int = 0
    block_size: int = 64
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    bias: bool = True

    @property
    def head_size(self) -> int:
        """Channels per attention head, d_k = n_embd / n_head."""
        return self.n_embd // self.n_head
