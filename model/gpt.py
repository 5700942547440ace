"""The whole network in one file, in reading order: norm, rotary embedding, causal
self-attention, MLP, block, GPT.

    idx (B, T) token ids
      -> token embedding (+ learned position embedding)  (B, T, C)
      -> n_layer x Block (attention + MLP, pre-norm)     (B, T, C)
      -> final norm -> LM head                           (B, T, vocab_size) logits

By default this is GPT-2: learned positions, LayerNorm, GELU, and an LM head that
shares its weight matrix with the token embedding (weight tying, Press & Wolf 2017).
`GPTConfig` (model/config.py) switches on the modern options: RoPE, RMSNorm, QK-norm,
ReLU², an untied head, logit soft-capping, zero-initialised projections.

Training and decoding run the same forward pass. Given a `KVCache`, each attention
layer stores its new keys and values and attends over the stored ones, so decoding
computes only the new tokens; model/engine.py allocates the cache and runs the decode
loop, and `GPT.generate` here is the plain, uncached reference it is tested against.
"""

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from model.config import GPTConfig
from model.sampling import Sampling, check_max_new_tokens, next_token

INIT_STD = 0.02


def make_norm(config: GPTConfig) -> nn.Module:
    """A norm over the last dimension (n_embd) of (B, T, C) activations.

    "layernorm": subtract the mean, divide by the standard deviation, then a gain (and a
    bias if config.bias) (Ba et al. 2016). "rmsnorm": divide by the root mean square,
    then a gain; cheaper and as good in practice (Zhang & Sennrich 2019).
    """
    if config.norm == "rmsnorm":
        return nn.RMSNorm(config.n_embd)
    return nn.LayerNorm(config.n_embd, bias=config.bias)


class RotaryEmbedding(nn.Module):
    """Rotary position embeddings (RoPE; Su et al. 2021, "RoFormer", section 3.4).

    Instead of adding a position vector to each token, RoPE rotates every pair of
    channels (i, i + d_k/2) of a query or key by the angle m * base^(-2i/d_k), m being
    its position. The dot product of a query at m with a key at n then depends only on
    m - n, which lets a KV cache keep its keys as the window moves (model/engine.py).

    Args:
        head_size: d_k, must be even.
        block_size: positions of the cos/sin tables.
        base: the frequency base theta.

    Raises:
        ValueError: if head_size is odd.
    """

    def __init__(self, head_size: int, block_size: int, base: float = 10000.0):
        super().__init__()
        if head_size % 2:
            raise ValueError(f"RoPE needs an even head size (n_embd / n_head), got {head_size}")
        inv_freq = base ** (-torch.arange(0, head_size, 2, dtype=torch.float32) / head_size)
        angles = torch.outer(torch.arange(block_size, dtype=torch.float32), inv_freq)
        # Derived from the config, so not saved in checkpoints (persistent=False).
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # (d_k/2,)
        self.register_buffer("cos", angles.cos(), persistent=False)  # (block_size, d_k/2)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(
        self, x: torch.Tensor, angles: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> torch.Tensor:
        """Rotate (B, n_head, T, d_k) queries or keys: at positions 0 .. T-1 (the
        table's first T rows), or by the (T, d_k/2) cos and sin ``angles`` of other
        positions (a `KVCache`'s)."""
        if angles is None:
            T = x.size(-2)
            angles = self.cos[:T], self.sin[:T]
        return rotate(x, *angles)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each channel pair (x1, x2) of (B, n_head, T, d_k) x by the angles whose
    (T, d_k/2) cos and sin are given: (x1 cos - x2 sin, x1 sin + x2 cos)."""
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


# explicit_attention's optional hook: (step name, tensor) -> the tensor to go on with.
StepHook = Callable[[str, torch.Tensor], torch.Tensor]


def causal_mask(T: int, device: torch.device | None = None) -> torch.Tensor:
    """(T, T) bool mask, True on and below the diagonal: query i may see keys 0..i."""
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


def explicit_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    dropout: nn.Module | None = None,
    step: StepHook | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention with a causal mask, step by step (Vaswani et al.
    2017, eq. 1).

    Args:
        q, k, v: (B, n_head, T, d_k) queries, keys and values.
        dropout: optional dropout applied to the attention weights (training only).
        step: optional hook ``step(name, tensor) -> tensor`` that each step's result
            passes through, in this order: "q", "k", "v" (B, n_head, T, d_k), "scores"
            (the raw q kᵀ), "scaled", "masked", "weights" (B, n_head, T, T), "out".
            Returning the tensor as it is records it; returning another changes the
            steps after it (viz/attention_steps.py does both: its page and its
            what-if switches).

    Returns:
        out: (B, n_head, T, d_k) weighted sums of the values.
        weights: (B, n_head, T, T) attention weights; row i is the distribution over
            the keys 0..i that query i attends to (zeros above the diagonal).
    """
    if step is None:
        step = lambda name, tensor: tensor  # each step as it is
    q, k, v = step("q", q), step("k", k), step("v", v)
    T, d_k = q.size(-2), q.size(-1)
    scores = step("scores", q @ k.transpose(-2, -1))  # (B, n_head, T, T)
    scores = step("scaled", scores / math.sqrt(d_k))
    # Mask before softmax so the future gets exactly zero weight, not a small one.
    scores = step("masked", scores.masked_fill(~causal_mask(T, q.device), float("-inf")))
    weights = step("weights", torch.softmax(scores, dim=-1))
    attended = dropout(weights) if dropout is not None else weights
    out = step("out", attended @ v)  # weighted sum of values: (B, n_head, T, d_k)
    return out, weights


class KVCache:
    """The keys and values of the positions a sequence has already been through, for
    decoding (Pope et al. 2022, "Efficiently Scaling Transformer Inference", section
    2): with one, a forward pass runs only its T new tokens; each attention layer
    stores their keys and values (`update`) and attends over every stored one.
    model/engine.py allocates the storage once per generation and makes one of these
    for each forward pass; training passes none.

    Args:
        keys, values: (n_layer, B, n_head, S, d_k) storage, written in place: a whole
            static cache, or a view of its first S slots. The token at position p goes
            to slot p mod S, so a full cache rolls (model/engine.py).
        positions: (T,) int64 positions of the pass's T tokens.
        mask: (T, S) bool, True where a query may attend to a slot (a decode step over
            a cache whose later slots are not written yet); or None: every one of the
            S slots is visible, causally among the new tokens when T > 1 (then S must
            be T: a prefill from position 0).
        angles: RoPE: the (T, d_k/2) cos and sin of ``positions``' rotations,
            computed once for every layer; None: the rotary table's rows 0 .. T-1
            (right only for positions 0 .. T-1), or no RoPE.

    Raises:
        ValueError: no ``mask`` for T > 1 new tokens over S != T slots (the causal
            mask among the new tokens would line up with the wrong slots).
    """

    def __init__(
        self,
        keys: torch.Tensor,
        values: torch.Tensor,
        positions: torch.Tensor,
        mask: torch.Tensor | None = None,
        angles: tuple[torch.Tensor, torch.Tensor] | None = None,
    ):
        if mask is None and 1 < positions.numel() != keys.size(3):
            raise ValueError(
                f"KVCache: {positions.numel()} new tokens over {keys.size(3)} slots need "
                "a (T, S) mask; without one, S must equal T (a prefill from position 0)"
            )
        self.keys, self.values = keys, values
        self.positions = positions
        self.slots = positions % keys.size(3)  # (T,)
        self.mask = mask
        self.angles = angles

    def update(
        self, layer: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Store layer ``layer``'s (B, n_head, T, d_k) new keys and values in their
        slots; return all of its (B, n_head, S, d_k) stored keys and values."""
        self.keys[layer].index_copy_(2, self.slots, k)
        self.values[layer].index_copy_(2, self.slots, v)
        return self.keys[layer], self.values[layer]


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention, the one place where tokens exchange information.

    Each token's vector is projected to a query q, a key k and a value v; per head:

        scores  = q kᵀ / √d_k                    (B, n_head, T, T)
        scores  = causal mask: future -> -inf   (token t may only look at 0..t)
        weights = softmax(scores, dim=-1)       each row sums to 1
        out     = weights v                     (B, n_head, T, d_k)

    The heads are concatenated and projected back to n_embd channels (Vaswani et al.
    2017, section 3.2.2). With the modern options, q and k are first RMS-normalised per
    head (QK-norm, Dehghani et al. 2023) and/or rotated by their positions (RoPE).

    Two paths compute the same numbers: PyTorch's fused `scaled_dot_product_attention`
    (the default), and `explicit_attention`, the steps above one by one, taken while a
    `record_attention` block asks for the weights. Tests hold the two equal. While
    decoding, a `KVCache` adds the keys and values of earlier positions (fused path).

    Args:
        config: uses n_embd, n_head, dropout, bias and qk_norm.
        rotary: the RoPE tables (shared by the layers) with ``position=rope``, else None.
        layer_idx: this layer's index, its place in a `KVCache`.

    Raises:
        ValueError: if n_embd is not divisible by n_head.
    """

    def __init__(
        self, config: GPTConfig, rotary: RotaryEmbedding | None = None, layer_idx: int = 0
    ):
        super().__init__()
        if config.n_embd % config.n_head != 0:
            raise ValueError(
                f"n_embd ({config.n_embd}) must be divisible by n_head ({config.n_head})"
            )
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.layer_idx = layer_idx
        self.dropout_p = config.dropout
        # One matrix computes q, k and v for every head at once: (C) -> (3C).
        self.qkv_proj = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        # Output projection back into the residual stream (scaled at init, see GPT).
        self.out_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.qk_norm = config.qk_norm
        self.rotary = rotary
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        # While `record_attention` is active: a list that forward appends its weights
        # to, and the hook each step of explicit_attention passes through (or None).
        self.recorder: list[torch.Tensor] | None = None
        self.step_hook: StepHook | None = None

    def split_heads(self, qkv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(B, T, 3C) output of qkv_proj -> q, k, v, each (B, n_head, T, d_k), with
        QK-norm applied when configured (not RoPE: that needs the positions)."""
        B, T, _ = qkv.shape
        q, k, v = qkv.split(self.n_embd, dim=2)
        shape = (B, T, self.n_head, self.n_embd // self.n_head)
        q, k, v = (
            q.view(shape).transpose(1, 2),
            k.view(shape).transpose(1, 2),
            v.view(shape).transpose(1, 2),
        )
        if self.qk_norm:  # unit RMS per head: bounded attention logits
            q = F.rms_norm(q, (q.size(-1),))
            k = F.rms_norm(k, (k.size(-1),))
        return q, k, v

    def forward(self, x: torch.Tensor, kv_cache: KVCache | None = None) -> torch.Tensor:
        """Attend over the sequence: (B, T, C) activations -> (B, T, C). With a
        ``kv_cache``, over the cached positions too (T new tokens, decoding)."""
        B, T, C = x.shape
        q, k, v = self.split_heads(self.qkv_proj(x))
        if self.rotary is not None:
            angles = None if kv_cache is None else kv_cache.angles
            q, k = self.rotary(q, angles), self.rotary(k, angles)
        mask = None
        if kv_cache is not None:  # store the new keys and values; attend over all stored
            k, v = kv_cache.update(self.layer_idx, k, v)
            mask = kv_cache.mask
        if self.recorder is not None and kv_cache is None:  # decoding records nothing
            out, weights = explicit_attention(q, k, v, self.attn_dropout, self.step_hook)
            self.recorder.append(weights)
        else:
            p = self.dropout_p if self.training else 0.0
            causal = mask is None and T > 1
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal
            )
        out = out.transpose(1, 2).contiguous().view(B, T, C)  # concatenate the heads
        return self.resid_dropout(self.out_proj(out))


@contextmanager
def record_attention(
    model: nn.Module, step_hook: Callable[[int, str, torch.Tensor], torch.Tensor] | None = None
) -> Iterator[list[torch.Tensor]]:
    """Within this block, every `CausalSelfAttention` of ``model`` takes the explicit
    path and keeps its weights: the yielded list receives one (B, n_head, T, T) tensor
    per layer and forward pass, in layer order; passes with a `KVCache` (decoding)
    record nothing. ``step_hook(layer_idx, name, tensor)``, if given, is the ``step``
    hook of every layer's `explicit_attention`, told which layer calls it. On exit the
    modules are as before.

        with record_attention(model) as weights:
            logits, _ = model(idx)
    """
    layers = [m for m in model.modules() if isinstance(m, CausalSelfAttention)]
    recorded: list[torch.Tensor] = []
    for layer in layers:
        layer.recorder = recorded
        layer.step_hook = None if step_hook is None else partial(step_hook, layer.layer_idx)
    try:
        yield recorded
    finally:
        for layer in layers:
            layer.recorder = None
            layer.step_hook = None


class ReLUSquared(nn.Module):
    """relu(x)², elementwise (So et al. 2021, "Primer")."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Any shape in, same shape out."""
        return F.relu(x).square()


# One module per value of model.config.Activation.
ACTIVATIONS = {"gelu": nn.GELU, "relu2": ReLUSquared}


class MLP(nn.Module):
    """Position-wise feed-forward network: C -> 4C -> activation -> C.

    Args:
        config: uses n_embd, dropout, bias and activation ("gelu" or "relu2").
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.up_proj = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.activation = ACTIVATIONS[config.activation]()
        self.down_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Map (B, T, C) activations to (B, T, C), each position independently."""
        return self.dropout(self.down_proj(self.activation(self.up_proj(x))))


class Block(nn.Module):
    """Pre-norm transformer block (GPT-2, Radford et al. 2019):

        x = x + attention(ln_1(x))
        x = x + mlp(ln_2(x))

    Args:
        config: the model's GPTConfig.
        rotary: the RoPE tables shared by the layers (``position=rope``), or None.
        layer_idx: the block's index (its attention's place in a `KVCache`).
    """

    def __init__(
        self, config: GPTConfig, rotary: RotaryEmbedding | None = None, layer_idx: int = 0
    ):
        super().__init__()
        self.ln_1 = make_norm(config)
        self.attn = CausalSelfAttention(config, rotary, layer_idx)
        self.ln_2 = make_norm(config)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor, kv_cache: KVCache | None = None) -> torch.Tensor:
        """Transform (B, T, C) activations into (B, T, C); ``kv_cache``: see
        `CausalSelfAttention.forward`."""
        x = x + self.attn(self.ln_1(x), kv_cache)
        x = x + self.mlp(self.ln_2(x))
        return x


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
        rotary = None  # one set of tables for every layer
        if config.position == "rope":
            rotary = RotaryEmbedding(config.head_size, config.block_size, config.rope_base)
        self.blocks = nn.ModuleList(Block(config, rotary, i) for i in range(config.n_layer))
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
        kv_cache: KVCache | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Compute next-token logits and, given targets, the loss.

        Args:
            idx: (B, T) int64 token ids, T <= block_size: positions 0 .. T-1, or
                ``kv_cache.positions``.
            targets: optional (B, T) int64 next-token ids; -1 marks positions to ignore.
            kv_cache: decoding: the keys and values of earlier positions, which every
                layer extends with those of idx and attends over (`KVCache`).

        Returns:
            ``(logits, loss)``: logits (B, T, vocab_size); loss is the mean
            cross-entropy in nats per token (a 0-dim tensor), or None without targets.

        Raises:
            ValueError: if T exceeds block_size.
        """
        B, T = idx.shape
        if T > self.config.block_size:
            raise ValueError(
                f"sequence length {T} exceeds block_size {self.config.block_size}; "
                "crop the context to the last block_size tokens"
            )
        x = self.token_embedding(idx)  # (B, T, C)
        if self.position_embedding is not None:
            if kv_cache is None:
                positions = torch.arange(0, T, device=idx.device)
            else:
                positions = kv_cache.positions
            x = x + self.position_embedding(positions)
        x = self.dropout(x)
        for block in self.blocks:
            x = block(x, kv_cache)
        logits = self.head(x)
        loss = None
        if targets is not None:
            # At least float32 (bf16 logits under autocast lose too much in the sum).
            wide = logits.to(torch.promote_types(logits.dtype, torch.float32))
            loss = F.cross_entropy(
                wide.view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1
            )
        return logits, loss

    def head(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, C) last block's output -> (B, T, vocab_size) logits: final norm, LM
        head, and the optional soft cap."""
        logits = self.lm_head(self.ln_f(x))
        if self.config.logit_softcap > 0:  # smoothly bound logits to (-cap, cap)
            cap = self.config.logit_softcap
            logits = cap * torch.tanh(logits / cap)
        return logits

    def generate(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        *,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Extend (B, T) prompt ids by max_new_tokens sampled tokens -> (B, T +
        max_new_tokens) ids, the way nanoGPT does: every step runs the last block_size
        tokens through `forward`, with no cache. The reference that decoding with a KV
        cache (model/engine.py, `model.engine.generate`, what sample.py runs) is tested
        against: inside block_size both give the same tokens. Put the model in eval
        mode first (no dropout).

        Args:
            idx: (B, T) int64 prompt token ids, B >= 1, T >= 1.
            max_new_tokens: tokens to add, >= 0.
            temperature, top_k, top_p, generator: those of `model.sampling.Sampling`.

        Raises:
            model.sampling.SamplingArgumentError: naming each bad setting, and
            ValueError: for an empty prompt; both before any model work.
        """
        sampling = Sampling(temperature, top_k, top_p, generator=generator)
        return torch.cat([idx, *self.uncached_stream(idx, max_new_tokens, sampling)], dim=1)

    def uncached_stream(
        self, idx: torch.Tensor, max_new_tokens: int, sampling: Sampling | None = None
    ) -> Iterator[torch.Tensor]:
        """`generate`'s new tokens as (B, 1) ids, one step at a time, with ``sampling``
        (None: `Sampling()`, temperature 1 over every token): the uncached reference
        that the KV-cache decoding of `model.engine.generate_stream` is tested against.
        The arguments are checked now, as `generate` checks them; the model runs as the
        iterator is consumed, and stopping early costs nothing more."""
        check_prompt(idx, max_new_tokens)
        return self._uncached_tokens(idx, max_new_tokens, sampling or Sampling())

    @torch.no_grad()
    def _uncached_tokens(
        self, idx: torch.Tensor, max_new_tokens: int, sampling: Sampling
    ) -> Iterator[torch.Tensor]:
        """The loop of `uncached_stream`: (B, 1) ids, one forward pass each."""
        generator = sampling.rng(idx.device, idx.size(0))
        for _ in range(max_new_tokens):
            logits, _ = self(idx[:, -self.config.block_size :])
            token = next_token(logits[:, -1, :], sampling, generator)
            yield token
            idx = torch.cat([idx, token], dim=1)


def check_prompt(idx: torch.Tensor, max_new_tokens: int) -> None:
    """Raise before any model work for a prompt that is not (B, T) ids with B, T >= 1
    (ValueError) or a bad max_new_tokens (`model.sampling.SamplingArgumentError`)."""
    check_max_new_tokens(max_new_tokens)
    if idx.dim() != 2 or idx.size(0) == 0 or idx.size(1) == 0:
        raise ValueError(
            f"the prompt idx must be (B, T) token ids with B >= 1 and T >= 1 (at least "
            f"one token), got shape {tuple(idx.shape)}"
        )
