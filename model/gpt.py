"""The GPT: embeddings, a stack of transformer blocks, and a language-model head.

    idx (B, T) token ids
      -> token embedding (+ learned position embedding)  (B, T, C)
      -> n_layer x Block (attention + MLP, pre-norm)     (B, T, C)
      -> final norm -> LM head                           (B, T, vocab_size) logits

By default this is GPT-2: learned positions, LayerNorm, GELU, and an LM head that
shares its weight matrix with the token embedding (weight tying, Press & Wolf 2017).
`GPTConfig` switches on the modern options (RoPE, RMSNorm, QK-norm, ReLU², untied
head, logit soft-capping, zero-initialised projections).

Generation (`GPT.generate`, `GPT.generate_stream`) lives in `model.generation`.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from model import generation
from model.block import Block
from model.config import GPTConfig
from model.kv_cache import KVCache
from model.linear import Linear
from model.norm import make_norm
from model.rope import RotaryEmbedding

INIT_STD = 0.02


class GPT(nn.Module):
    """A decoder-only transformer language model (Radford et al. 2019, GPT-2).

    Args:
        config: architecture; ``vocab_size`` must already be set from the tokenizer.

    Raises:
        ValueError: if vocab_size is not positive or n_embd is not divisible by n_head.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        if config.vocab_size <= 0:
            raise ValueError("GPTConfig.vocab_size must be set from the tokenizer (> 0)")
        self.config = config
        self.token_embedding = nn.Embedding(config.vocab_size, config.n_embd)
        # With RoPE, positions enter through the rotation of q and k instead.
        self.position_embedding = (
            nn.Embedding(config.block_size, config.n_embd) if config.position == "learned" else None
        )
        self.dropout = nn.Dropout(config.dropout)
        # One set of RoPE tables for every layer: a decode step past block_size then
        # computes its position's angles once, not once per layer.
        rotary = None
        if config.position == "rope":
            rotary = RotaryEmbedding(config.head_size, config.block_size, config.rope_base)
        self.blocks = nn.ModuleList(Block(config, rotary) for _ in range(config.n_layer))
        self.ln_f = make_norm(config)
        self.lm_head = Linear(config.n_embd, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.token_embedding.weight
        self.init_weights()

    @torch.no_grad()
    def init_weights(self) -> None:
        """GPT-2 initialisation, the one place where weights get their first values.

        | tensor                                   | initial value                   |
        |------------------------------------------|---------------------------------|
        | token and position embeddings            | N(0, 0.02)                      |
        | Linear weights (qkv_proj, up_proj,       | N(0, 0.02)                      |
        |   untied lm_head)                        |                                 |
        | residual output projections              | N(0, 0.02 / sqrt(2 * n_layer)), |
        |   (attn.out_proj, mlp.down_proj)         | or 0 with zero_init_proj        |
        | Linear biases                            | 0                               |
        | LayerNorm / RMSNorm gain, bias           | 1, 0                            |
        | tied lm_head                             | the token embedding itself      |

        The residual projections are scaled down because each block adds two of them
        to the residual stream, whose variance would otherwise grow with depth
        (GPT-2 paper, section 2.3); zero_init_proj goes further and makes every block
        start as the identity, so early training sees a shallow network.
        """
        residual_std = INIT_STD / math.sqrt(2 * self.config.n_layer)
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear):
                is_residual = name.endswith(("attn.out_proj", "mlp.down_proj"))
                if is_residual and self.config.zero_init_proj:
                    nn.init.zeros_(module.weight)
                else:
                    std = residual_std if is_residual else INIT_STD
                    nn.init.normal_(module.weight, 0.0, std)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, 0.0, INIT_STD)
            elif isinstance(module, (nn.LayerNorm, nn.RMSNorm)):
                nn.init.ones_(module.weight)
                if getattr(module, "bias", None) is not None:
                    nn.init.zeros_(module.bias)

    def num_params(self, non_embedding: bool = True) -> int:
        """Number of parameters; by default without the position embedding (the
        token embedding is counted once, as the tied LM head)."""
        n = sum(p.numel() for p in self.parameters())
        if non_embedding and self.position_embedding is not None:
            n -= self.position_embedding.weight.numel()
        return n

    def forward(
        self,
        idx: torch.Tensor,
        targets: torch.Tensor | None = None,
        return_attention: bool = False,
        cache: KVCache | None = None,
        last_only: bool = False,
    ):
        """Compute next-token logits and, given targets, the loss.

        Args:
            idx: (B, T) int64 token ids, T <= block_size.
            targets: optional (B, T) int64 next-token ids; -1 marks positions to ignore.
            return_attention: if True, also return a list of n_layer attention-weight
                tensors, each (B, n_head, T, T), computed by the explicit path.
            cache: optional KV cache (generation). idx then holds the T tokens that
                follow the ``cache.length`` cached ones: they get positions
                cache.length .. cache.length + T - 1, attend over the cached keys and
                values too, and are appended to the cache (``cache.length`` grows by T;
                past block_size only in a rolling cache, one token at a time).
            last_only: return the logits of the last position only, (B, 1,
                vocab_size), as generation needs after a prefill. The last block then
                runs its attention output and MLP on that position alone (about 1/8
                of a 6-layer model's work saved on a long prompt); every position's
                keys and values are still computed and cached.

        Returns:
            ``(logits, loss)``: logits (B, T, vocab_size) (T = 1 with ``last_only``);
            loss is the mean cross-entropy in nats per token (a 0-dim tensor), or None
            without targets. With ``return_attention``: ``(logits, loss,
            attention_weights)``.

        Raises:
            ValueError: if T (plus the cached positions) exceeds block_size, or
                ``return_attention`` is given with ``cache`` or ``last_only``, or
                ``targets`` with ``last_only``.
        """
        B, T = idx.shape
        if last_only and (targets is not None or return_attention):
            raise ValueError(
                "last_only gives the last position's logits alone: it cannot be combined "
                "with targets (the loss needs every position) or return_attention"
            )
        start = 0
        if cache is not None:
            if return_attention:
                raise ValueError("return_attention is not supported with a KV cache")
            start = cache.length
            if not cache.fits(T):
                raise ValueError(
                    f"the KV cache holds {start} positions; {T} more exceed block_size "
                    f"{self.config.block_size}"
                )
        elif T > self.config.block_size:
            raise ValueError(
                f"sequence length {T} exceeds block_size {self.config.block_size}; "
                "crop the context to the last block_size tokens"
            )
        x = self.token_embedding(idx)
        if self.position_embedding is not None:
            x = x + self.position_embedding(torch.arange(start, start + T, device=idx.device))
        x = self.dropout(x)
        attention_weights = []
        for layer, block in enumerate(self.blocks):
            if return_attention:
                x, weights = block(x, return_weights=True)
                attention_weights.append(weights)
            else:
                last = last_only and layer == len(self.blocks) - 1
                x = block(x, cache=cache, layer=layer, last_only=last)
        if cache is not None:
            cache.advance(T)
        logits = self.lm_head(self.ln_f(x))
        if self.config.logit_softcap > 0:  # smoothly bound logits to (-cap, cap)
            cap = self.config.logit_softcap
            logits = cap * torch.tanh(logits / cap)
        loss = None
        if targets is not None:
            # At least float32 (bf16 logits under autocast lose too much in the sum).
            wide = logits.to(torch.promote_types(logits.dtype, torch.float32))
            loss = F.cross_entropy(
                wide.view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1
            )
        if return_attention:
            return logits, loss, attention_weights
        return logits, loss

    # Decoding lives in model.generation; as methods, `model.generate(idx, ...)` is
    # generation.generate(model, idx, ...).
    generate = generation.generate
    generate_stream = generation.generate_stream
