"""The GPT: embeddings, a stack of transformer blocks, and a language-model head.

    idx (B, T) token ids
      -> token embedding (+ learned position embedding)  (B, T, C)
      -> n_layer x Block (attention + MLP, pre-norm)     (B, T, C)
      -> final norm -> LM head                           (B, T, vocab_size) logits

By default this is GPT-2: learned positions, LayerNorm, GELU, and an LM head that
shares its weight matrix with the token embedding (weight tying, Press & Wolf 2017).
`GPTConfig` switches on the modern options (RoPE, RMSNorm, QK-norm, ReLU², untied
head, logit soft-capping, zero-initialised projections).

Generation (`GPT.generate`, `GPT.generate_stream`) runs the prompt through the model
once (prefill) and then one new token per step, reusing the keys and values of earlier
positions from a `KVCache`.
"""

import math
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from model.block import Block
from model.config import GPTConfig
from model.generation import next_token, sliding_window_keep, validate_sampling_args
from model.kv_cache import KVCache
from model.norm import make_norm

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
        if config.position not in ("learned", "rope"):
            raise ValueError(f"model.position must be learned or rope, got {config.position!r}")
        # With RoPE, positions enter through the rotation of q and k instead.
        self.position_embedding = (
            nn.Embedding(config.block_size, config.n_embd) if config.position == "learned" else None
        )
        self.dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = make_norm(config)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
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
                values too, and are appended to the cache (``cache.length`` grows by T).

        Returns:
            ``(logits, loss)``: logits (B, T, vocab_size); loss is the mean
            cross-entropy in nats per token (a 0-dim tensor), or None without targets.
            With ``return_attention``: ``(logits, loss, attention_weights)``.

        Raises:
            ValueError: if T (plus the cached positions) exceeds block_size, or both
                ``return_attention`` and ``cache`` are given.
        """
        B, T = idx.shape
        start = 0
        if cache is not None:
            if return_attention:
                raise ValueError("return_attention is not supported with a KV cache")
            start = cache.length
            if start + T > self.config.block_size:
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
                x = block(x, cache=cache, layer=layer)
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

    def generate(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        *,
        generator: torch.Generator | None = None,
        use_cache: bool = True,
    ) -> torch.Tensor:
        """Extend each sequence by sampling one token at a time (autoregressively).

        Any number of tokens can be generated; see `generate_stream` for how the
        context is kept within block_size. Switch the model to eval mode first (no
        dropout).

        Args:
            idx: (B, T) int64 prompt token ids, B >= 1, T >= 1.
            max_new_tokens: number of tokens to add (>= 0).
            temperature: > 0 scales the logits; 0 means greedy decoding.
            top_k: sample only among the k most likely tokens (clamped to vocab_size).
            top_p: nucleus sampling threshold in (0, 1] (Holtzman et al. 2020).
            generator: torch RNG on the model's device, for reproducible samples.
            use_cache: decode with a KV cache (fast); False re-runs the whole context
                for every token (the reference path).

        Returns:
            (B, T + max_new_tokens) int64 token ids, starting with the prompt.

        Raises:
            ValueError: naming the argument, before any model work, for a bad
                max_new_tokens, temperature, top_k, top_p or generator, or an empty
                prompt.
        """
        steps = list(
            self.generate_stream(
                idx,
                max_new_tokens,
                temperature,
                top_k,
                top_p,
                generator=generator,
                use_cache=use_cache,
            )
        )
        return torch.cat([idx, *steps], dim=1)

    def generate_stream(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        *,
        generator: torch.Generator | None = None,
        use_cache: bool = True,
    ) -> Iterator[torch.Tensor]:
        """Like `generate`, but yield the new tokens one step at a time (for streaming).

        The arguments are checked when this is called, before any model work; the
        model runs as the iterator is consumed, and stopping early costs nothing more.

        With the cache, the prompt (its last block_size tokens) is run once (prefill),
        then one token per step. Past block_size, a sliding window: when the cache is
        full, the last 3/4 of block_size tokens (`sliding_window_keep`) are run through
        the model again into an emptied cache, and decoding continues from there. So
        once the context has reached block_size, every prediction sees between 3/4 and
        all of block_size tokens.
        While the sequence fits in block_size (prompt + new tokens <= block_size + 1),
        the tokens are exactly those of ``use_cache=False`` with the same generator;
        past it, that reference path always sees the last block_size tokens instead.

        Args:
            idx: (B, T) int64 prompt token ids, B >= 1, T >= 1.
            max_new_tokens, temperature, top_k, top_p, generator, use_cache: as in
                `generate`.

        Returns:
            An iterator of max_new_tokens (B, 1) int64 tensors, the new token of each
            sequence at each step.

        Raises:
            ValueError: as `generate`, at call time.
        """
        validate_sampling_args(max_new_tokens, temperature, top_k, top_p)
        if idx.dim() != 2 or idx.size(0) == 0 or idx.size(1) == 0:
            raise ValueError(
                f"the prompt idx must be (B, T) token ids with B >= 1 and T >= 1 (at least "
                f"one token), got shape {tuple(idx.shape)}"
            )
        if generator is not None and not isinstance(generator, torch.Generator):
            raise ValueError(f"generator must be a torch.Generator, got {type(generator)}")
        decode = self._decode_cached if use_cache else self._decode_uncached
        steps = decode(idx, max_new_tokens, temperature, top_k, top_p, generator)
        # The decoding runs in inference mode; cloning outside it hands the caller
        # ordinary tensors (inference tensors refuse in-place edits and autograd).
        return (step.clone() for step in steps)

    @torch.inference_mode()
    def _decode_uncached(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        temperature: float,
        top_k: int | None,
        top_p: float | None,
        generator: torch.Generator | None,
    ) -> Iterator[torch.Tensor]:
        """Reference decoder: every step runs the last block_size tokens in full.
        Yields (B, 1) token ids."""
        for _ in range(max_new_tokens):
            logits, _ = self(idx[:, -self.config.block_size :])
            token = next_token(
                logits[:, -1, :], temperature, top_k, top_p=top_p, generator=generator
            )
            yield token
            idx = torch.cat([idx, token], dim=1)

    @torch.inference_mode()
    def _decode_cached(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        temperature: float,
        top_k: int | None,
        top_p: float | None,
        generator: torch.Generator | None,
    ) -> Iterator[torch.Tensor]:
        """KV-cached decoder with the sliding window of `generate_stream`.
        Yields (B, 1) token ids."""
        if max_new_tokens == 0:
            return
        block_size = self.config.block_size
        keep = sliding_window_keep(block_size)
        cache = KVCache.for_model(self, idx.size(0))
        # window[:, :cache.length] are the tokens whose keys and values the cache holds,
        # kept so that a slide can prefill the last `keep` of them again.
        window = idx.new_empty(idx.size(0), block_size)
        context = idx[:, -block_size:]
        window[:, : context.size(1)] = context
        logits, _ = self(context, cache=cache)
        for step in range(max_new_tokens):
            token = next_token(
                logits[:, -1, :], temperature, top_k, top_p=top_p, generator=generator
            )
            yield token
            if step == max_new_tokens - 1:
                return  # no forward pass for a token nobody will sample after
            if cache.length < block_size:
                window[:, cache.length] = token[:, 0]
                logits, _ = self(token, cache=cache)
            else:
                # Full: keep the last `keep` tokens (the new one included) and prefill.
                window[:, : keep - 1] = window[:, block_size - keep + 1 :].clone()
                window[:, keep - 1] = token[:, 0]
                cache.reset()
                logits, _ = self(window[:, :keep], cache=cache)
