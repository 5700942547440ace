"""Decoding: extend a prompt one token at a time with a static KV cache.

    prompt (B, T) -> prefill: one pass over the prompt writes every position's keys and
                     values into the cache and gives the last position's logits
                  -> sample a token on the device (`model.sampling.next_token`)
                  -> decode step: run the model on that one token at a position held
                     in a tensor, attending over the cache; repeat

This is the design of gpt-fast's generate.py and of Hugging Face's static cache:

- The cache (`KVCache`) is allocated once per generation at its full size, block_size
  positions, so every decode step sees tensors of the same shapes; the step's position
  is a tensor too. Unwritten slots are hidden from the attention by a mask.
- The step can therefore be compiled once, with ``torch.compile(fullgraph=True)``, and
  on CUDA replayed as a CUDA graph (``mode="reduce-overhead"``): one launch a token
  instead of a hundred small kernels launched from Python. On CPU a step is not
  launch-bound, and eager PyTorch is the default (`compile_by_default`); an eager step
  is given only the slots written so far (no mask), and CPU paths for the few-row
  products (`Engine`'s ``cpu_paths``).
- Sampling runs on the device and nothing is read back per token: `generate_chunks`
  copies tokens to the host CHUNK at a time.

The modules are those of model/gpt.py; this file re-wires their layers around the
cache (embedding, then per block ln_1 -> q, k, v -> attention over the cache ->
out_proj, ln_2 -> MLP, then the head). Tests hold its logits equal to `GPT.forward`'s.

Past block_size the context slides:

- RoPE models (``model.position=rope``): the cache rolls. Position p is written to slot
  p mod block_size, replacing the oldest, so every prediction sees the last block_size
  tokens and no prefill is repeated. The kept keys stay valid because a rotary key's
  position enters the score only as its distance to the query. (In layers above the
  first, a kept key was computed when older tokens were still in view, as in
  sliding-window attention models; re-running the window from scratch would give
  slightly different numbers.)
- Learned positions (GPT-2): each cached key holds its absolute position, so the window
  cannot slide in place. When the cache is full, the last 3/4 of block_size tokens are
  run through the model again (`sliding_window_keep`), and decoding continues from
  there: every prediction sees between 3/4 and all of block_size tokens.
"""

from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from model.gpt import GPT, rotate
from model.sampling import next_token, validate_sampling_args

# Past block_size the decoder of a learned-position model keeps this share of the window.
SLIDING_WINDOW_KEEP = 0.75
# Tokens read back to the host at a time by `generate_chunks` (streaming, stop
# sequences). A read waits for the device; 16 tokens make that wait rare on a GPU
# while a stream still shows text every fraction of a second on a CPU, and a stop
# sequence costs at most 15 tokens of work past it.
CHUNK = 16
# `one_row_linear` (CPU, eager, batch 1) and `few_rows_linear` (a batch) split a
# weight's outputs into the first of these numbers of row groups that divides them.
GROUPS = (8, 4, 2)
# Products of 2 .. FEW_ROWS rows (CPU, eager: a batch's decode steps) take
# `few_rows_linear`, on weights regrouped once per generation: faster there than one
# matrix product of a few rows (docs/benchmarks.md, sampling speed).
FEW_ROWS = 16


def sliding_window_keep(block_size: int) -> int:
    """Tokens kept when the KV cache of a learned-position model is full: the last 3/4
    of block_size (at least 1).

    Its cached keys and values cannot slide: each holds its absolute position. So the
    kept tokens are run through the model again (a prefill). Keeping 3/4 means one
    prefill of 0.75 * block_size tokens every 0.25 * block_size steps: the amortised
    cost stays a few tokens per step, and every prediction still sees at least 3/4 of
    a full context.
    """
    return max(1, int(block_size * SLIDING_WINDOW_KEEP))


def compile_by_default(device: torch.device) -> bool:
    """Whether the decode step is compiled unless asked otherwise: on CUDA, where a step
    is bound by kernel launches and a CUDA graph removes them; not on CPU or MPS, where
    eager runs each step as fast and compiling costs time first (bench/sample_speed.py)."""
    return device.type == "cuda"


class KVCache:
    """The keys and values of every layer for a batch of sequences, allocated once, at
    their full size, for one generation (Pope et al. 2022, "Efficiently Scaling
    Transformer Inference", section 2).

    ``keys`` and ``values`` are (n_layer, B, n_head, max_length, d_k); position p lives
    in slot p mod max_length. ``slots`` is arange(max_length), compared with a step's
    position to mask the slots not written yet. For inference only.

    Args:
        n_layer, batch_size, n_head, max_length, head_size: the sizes (max_length is
            the model's block_size).
        dtype, device: those of the model's activations.

    Raises:
        ValueError: if a size is not positive.
    """

    def __init__(
        self,
        n_layer: int,
        batch_size: int,
        n_head: int,
        max_length: int,
        head_size: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ):
        sizes = dict(n_layer=n_layer, batch_size=batch_size, n_head=n_head)
        sizes.update(max_length=max_length, head_size=head_size)
        for name, value in sizes.items():
            if value <= 0:
                raise ValueError(f"KVCache {name} must be positive, got {value}")
        shape = (n_layer, batch_size, n_head, max_length, head_size)
        # Zeros rather than empty: masked slots get zero weight, and 0 * 0 stays 0
        # where arbitrary memory could hold a NaN.
        self.keys = torch.zeros(shape, dtype=dtype, device=device)
        self.values = torch.zeros(shape, dtype=dtype, device=device)
        self.slots = torch.arange(max_length, device=device)

    @classmethod
    def for_model(cls, model: GPT, batch_size: int) -> "KVCache":
        """An empty cache for ``model`` and ``batch_size`` sequences, holding block_size
        positions, on the device of the model's weights, in the dtype its projections
        give keys and values: torch.autocast's where autocast is on (sample.py
        --dtype), else the weights'."""
        c, weight = model.config, model.token_embedding.weight
        dtype, kind = weight.dtype, weight.device.type
        if torch.is_autocast_enabled(kind):
            dtype = torch.get_autocast_dtype(kind)
        return cls(c.n_layer, batch_size, c.n_head, c.block_size, c.head_size, dtype, weight.device)


def one_row_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, groups: int
) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` for one row (a batch-1 decode step), as one batched
    product over groups of the weight's output rows: on CPU that streams the weights
    faster than F.linear's matrix-vector kernel (bench/sample_speed.py, batch 1).

    The sums are the same products added in another order (about 1e-6 relative).

    Args:
        x: (..., C) activations holding one row (x.numel() == C).
        weight: (N, C), N divisible by groups.
        bias: (N,) or None.
        groups: g, the number of row groups.

    Returns:
        (..., N), as ``F.linear``.

    Raises:
        ValueError: if x holds more than one row or N is not divisible by groups.
    """
    N, C = weight.shape
    if x.numel() != C:
        raise ValueError(f"one_row_linear: x holds {x.numel() // C} rows of {C}, not one")
    if N % groups:
        raise ValueError(f"one_row_linear: N = {N} output rows do not split into {groups} groups")
    # (g, N/g, C) @ (g, C, 1) -> (g, N/g, 1). The column is the row repeated for each
    # group (stride 0) with strides (1, C), the layout bmm's fast path reads.
    row = x.reshape(C)
    column = row.as_strided((groups, C, 1), (0, row.stride(0), C))
    out = torch.bmm(weight.view(groups, N // groups, C), column).view(*x.shape[:-1], N)
    return out if bias is None else out + bias.to(out.dtype)


def group_columns(weight: torch.Tensor, groups: int) -> torch.Tensor:
    """A (N, C) weight as `few_rows_linear` reads it: (groups, C, N/groups), group g
    holding output rows g*N/groups .. (g+1)*N/groups - 1, transposed and contiguous.

    Raises:
        ValueError: if N is not divisible by groups.
    """
    N, C = weight.shape
    if N % groups:
        raise ValueError(f"group_columns: N = {N} output rows do not split into {groups} groups")
    return weight.view(groups, N // groups, C).transpose(1, 2).contiguous()


def few_rows_linear(
    x: torch.Tensor, grouped: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` for a few rows (a batch's decode step), as one
    batched product over `group_columns` (weight): on CPU, bmm shares the groups
    between the threads and streams the weights faster than one matrix product of a
    few rows does (bench/sample_speed.py, batch 8).

    The sums are the same products added in another order (about 1e-6 relative).

    Args:
        x: (..., C) activations, M rows in all.
        grouped: (g, C, N/g), `group_columns` of the (N, C) weight.
        bias: (N,) or None.

    Returns:
        (..., N), as ``F.linear``.
    """
    groups, C, width = grouped.shape
    rows = x.reshape(1, -1, C).expand(groups, -1, C)  # the same M rows for every group
    if bias is None:
        out = torch.bmm(rows, grouped)
    else:  # (g, M, N/g) + the bias of each group's outputs
        out = torch.baddbmm(bias.view(groups, 1, width), rows, grouped)
    # (g, M, N/g) -> (M, g, N/g) -> (M, N): output n = g * N/g + j
    return out.transpose(0, 1).reshape(*x.shape[:-1], groups * width)


def rotary_angles(rotary: nn.Module, position: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(1, d_k/2) cos and sin of a (1,) int64 position, with no host read: from the
    rotary table inside block_size, computed in float64 past it (a rolling cache's
    positions grow without bound, and float32 angles would lose their precision)."""
    table = rotary.cos.size(0)
    inside = (position < table).unsqueeze(-1)
    row = position.clamp(max=table - 1)
    angles = position.double().unsqueeze(-1) * rotary.inv_freq.double()
    cos = torch.where(inside, rotary.cos[row], angles.cos().to(rotary.cos.dtype))
    sin = torch.where(inside, rotary.sin[row], angles.sin().to(rotary.sin.dtype))
    return cos, sin


class Engine:
    """Prefill and one-token decode steps of a `model.GPT` over a `KVCache`.

    Args:
        model: the GPT (in eval mode; its weights must not change during a generation).
        compile: compile the decode step with ``torch.compile(fullgraph=True)`` (on
            CUDA with ``mode="reduce-overhead"``: CUDA graphs); None takes
            `compile_by_default` for the model's device.
        backend: torch.compile's backend ("inductor"; tests pass a counting one).
        cpu_paths: multiply one row with `one_row_linear` (batch 1) and 2 .. FEW_ROWS
            rows with `few_rows_linear`, on weights regrouped once per generation (the
            copies about double the weights' memory while it lasts); None means on CPU
            when not compiling.
    """

    def __init__(
        self,
        model: GPT,
        *,
        compile: bool | None = None,
        backend="inductor",
        cpu_paths: bool | None = None,
    ):
        self.model = model
        device = model.token_embedding.weight.device
        self.device = device
        self.compiled = compile_by_default(device) if compile is None else compile
        default = device.type == "cpu" and not self.compiled
        self.cpu_paths = default if cpu_paths is None else cpu_paths
        # layer -> its weight as `group_columns` gives it, for one generation (`tokens`).
        self.grouped: dict[nn.Linear, torch.Tensor] = {}
        self.rotary = model.blocks[0].attn.rotary
        self.step = self.decode_step
        if self.compiled:
            options = {"mode": "reduce-overhead"} if device.type == "cuda" else {}
            if backend != "inductor":
                options = {}
            self.step = torch.compile(
                self.decode_step, fullgraph=True, dynamic=False, backend=backend, **options
            )

    def linear(self, layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        """``layer(x)``, on the CPU paths when they are on (see `Engine`)."""
        if self.cpu_paths and x.numel() == layer.in_features:
            groups = next((g for g in GROUPS if layer.out_features % g == 0), None)
            if groups is not None and layer.weight.is_contiguous():
                return one_row_linear(x, layer.weight, layer.bias, groups)
        grouped = self.grouped.get(layer)
        if grouped is not None and x.numel() <= FEW_ROWS * layer.in_features:
            return few_rows_linear(x, grouped, layer.bias)
        return layer(x)

    def residual_update(self, block: nn.Module, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """The rest of a block after its attention: (B, n_head, T, d_k) attention
        output -> heads concatenated, out_proj, added to (B, T, C) x, then the MLP."""
        B, T, C = x.shape
        out = out.transpose(1, 2).contiguous().view(B, T, C)
        x = x + block.attn.resid_dropout(self.linear(block.attn.out_proj, out))
        mlp = block.mlp
        h = self.linear(mlp.up_proj, block.ln_2(x))
        return x + mlp.dropout(self.linear(mlp.down_proj, mlp.activation(h)))

    def head(self, x: torch.Tensor) -> torch.Tensor:
        """(B, 1, C) -> (B, vocab_size) logits, as `GPT.head`."""
        logits = self.linear(self.model.lm_head, self.model.ln_f(x[:, -1]))
        cap = self.model.config.logit_softcap
        return cap * torch.tanh(logits / cap) if cap > 0 else logits

    def heads(self, block: nn.Module, x: torch.Tensor):
        """(B, T, C) -> the block's q, k, v, each (B, n_head, T, d_k) (QK-norm applied)."""
        return block.attn.split_heads(self.linear(block.attn.qkv_proj, block.ln_1(x)))

    def prefill(self, idx: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """Run (B, T) tokens at positions 0 .. T-1 (T <= block_size), store their keys
        and values in slots 0 .. T-1, and return the last position's (B, vocab_size)
        logits. The last block's output is computed for that position only."""
        model, T = self.model, idx.size(1)
        x = model.token_embedding(idx)
        if model.position_embedding is not None:
            x = x + model.position_embedding(torch.arange(0, T, device=idx.device))
        x = model.dropout(x)
        last = len(model.blocks) - 1
        for layer, block in enumerate(model.blocks):
            q, k, v = self.heads(block, x)
            if self.rotary is not None:
                q, k = self.rotary(q), self.rotary(k)
            cache.keys[layer, :, :, :T] = k
            cache.values[layer, :, :, :T] = v
            if layer == last:  # nobody reads the other positions' outputs
                q, x = q[:, :, -1:], x[:, -1:]
            # The last query (alone) may see every key: no mask.
            out = F.scaled_dot_product_attention(q, k, v, is_causal=q.size(2) > 1)
            x = self.residual_update(block, x, out)
        return self.head(x)

    def decode_step(
        self,
        token: torch.Tensor,
        position: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        slots: torch.Tensor | None,
    ) -> torch.Tensor:
        """One token per sequence at a position held in a tensor.

        Compiled, the step gets the whole cache and its ``slots``, and masks the slots
        not written yet: the shapes never change, so it is traced once. Eager, it gets
        views of the slots written so far and the new one (the host counts them, no
        read), and ``slots=None``: every slot given is visible, and a short context
        reads a short cache.

        Args:
            token: (B, 1) int64 new tokens.
            position: (1,) int64 their position; written to slot position mod block_size
                (a RoPE model's cache rolls past block_size; see the module docstring).
            keys, values: a `KVCache`'s tensors (n_layer, B, n_head, S, d_k), the whole
                cache or its first S slots; updated in place.
            slots: the cache's ``slots``, to mask the slots after ``position``; None
                when all S slots are visible.

        Returns:
            (B, vocab_size) logits of the next token.
        """
        model = self.model
        x = model.token_embedding(token)  # (B, 1, C)
        if model.position_embedding is not None:
            x = x + model.position_embedding(position)
        x = model.dropout(x)
        if self.rotary is not None:
            cos, sin = rotary_angles(self.rotary, position)
        slot = position % model.config.block_size
        visible = None  # (1, block_size): the slots written so far (all, once rolling)
        if slots is not None:
            visible = (slots <= position).unsqueeze(0)
        for layer, block in enumerate(model.blocks):
            q, k, v = self.heads(block, x)
            if self.rotary is not None:
                q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            keys[layer].index_copy_(2, slot, k)
            values[layer].index_copy_(2, slot, v)
            out = F.scaled_dot_product_attention(q, keys[layer], values[layer], attn_mask=visible)
            x = self.residual_update(block, x, out)
        return self.head(x)

    @torch.inference_mode()
    def tokens(
        self, idx, max_new_tokens, temperature, top_k, top_p, generator
    ) -> Iterator[torch.Tensor]:
        """Yield max_new_tokens (B, 1) int64 tokens on the device, one per step;
        arguments as `generate` (already checked). Nothing is read back to the host."""
        if max_new_tokens == 0:
            return
        model = self.model
        block_size = model.config.block_size
        rolling = model.config.position == "rope"
        keep = sliding_window_keep(block_size)
        cache = KVCache.for_model(model, idx.size(0))
        self.grouped = {}  # regrouped at every generation: the weights may have changed
        if self.cpu_paths and 2 <= idx.size(0) <= FEW_ROWS:
            for m in model.modules():
                groups = isinstance(m, nn.Linear) and next(
                    (g for g in GROUPS if m.out_features % g == 0), None
                )
                if groups:
                    self.grouped[m] = group_columns(m.weight, groups)
        context = idx[:, -block_size:]
        length = context.size(1)  # positions in the cache (a host count: no read)
        # window[:, :length]: the tokens of a learned-position model's cache, kept so
        # that a slide can prefill the last `keep` of them again.
        window = idx.new_zeros(idx.size(0), block_size)
        window[:, :length] = context
        logits = self.prefill(context, cache)
        position = torch.full((1,), length, dtype=torch.long, device=idx.device)
        cuda_graphs = self.compiled and self.device.type == "cuda"
        for step in range(max_new_tokens):
            token = next_token(logits, temperature, top_k, top_p=top_p, generator=generator)
            yield token
            if step == max_new_tokens - 1:
                return  # no forward pass for a token nobody will sample after
            if rolling or length < block_size:
                if not rolling:
                    window[:, length] = token[:, 0]
                if cuda_graphs:  # the previous step's logits have been used
                    torch.compiler.cudagraph_mark_step_begin()
                if self.compiled:
                    keys, values, slots = cache.keys, cache.values, cache.slots
                else:  # the written slots and the new one
                    seen = min(length + 1, block_size)
                    keys, values = cache.keys[..., :seen, :], cache.values[..., :seen, :]
                    slots = None
                logits = self.step(token, position, keys, values, slots)
                position += 1
                length += 1
            else:
                # Full: keep the last `keep` tokens (the new one included) and prefill.
                window[:, : keep - 1] = window[:, block_size - keep + 1 :].clone()
                window[:, keep - 1] = token[:, 0]
                logits = self.prefill(window[:, :keep], cache)
                length = keep
                position.fill_(keep)


def check_generation_args(idx, max_new_tokens, temperature, top_k, top_p, generator) -> None:
    """Raise before any model work for bad arguments (see `generate`)."""
    validate_sampling_args(max_new_tokens, temperature, top_k, top_p)
    if idx.dim() != 2 or idx.size(0) == 0 or idx.size(1) == 0:
        raise ValueError(
            f"the prompt idx must be (B, T) token ids with B >= 1 and T >= 1 (at least "
            f"one token), got shape {tuple(idx.shape)}"
        )
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator, got {type(generator)}")


@torch.inference_mode()
def _tokens_uncached(
    model, idx, max_new_tokens, temperature, top_k, top_p, generator
) -> Iterator[torch.Tensor]:
    """Reference decoder: every step runs the last block_size tokens through
    `GPT.forward`. Yields (B, 1) token ids."""
    for _ in range(max_new_tokens):
        logits, _ = model(idx[:, -model.config.block_size :])
        token = next_token(logits[:, -1, :], temperature, top_k, top_p=top_p, generator=generator)
        yield token
        idx = torch.cat([idx, token], dim=1)


def _device_tokens(
    model, idx, max_new_tokens, temperature, top_k, top_p, generator, use_cache, compile
) -> Iterator[torch.Tensor]:
    """Check the arguments now; return the iterator of (B, 1) device tokens."""
    check_generation_args(idx, max_new_tokens, temperature, top_k, top_p, generator)
    args = (idx, max_new_tokens, temperature, top_k, top_p, generator)
    if not use_cache:
        return _tokens_uncached(model, *args)
    return Engine(model, compile=compile).tokens(*args)


def generate(
    model: GPT,
    idx: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    *,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
    compile: bool | None = None,
) -> torch.Tensor:
    """Extend each sequence by sampling one token at a time.

    Any number of tokens can be generated (see the module docstring for how the
    context is kept within block_size). Put the model in eval mode first (no dropout).

    Args:
        model: a `model.GPT`.
        idx: (B, T) int64 prompt token ids, B >= 1, T >= 1.
        max_new_tokens: number of tokens to add (>= 0).
        temperature: > 0 scales the logits; 0 means greedy decoding.
        top_k: sample only among the k most likely tokens (clamped to vocab_size).
        top_p: nucleus sampling threshold in (0, 1] (Holtzman et al. 2020).
        generator: torch RNG on the model's device, for reproducible samples.
        use_cache: decode with the KV cache (fast); False re-runs the last block_size
            tokens in full for every new token (the reference path).
        compile: compile the decode step (`Engine`); None: the device's default.

    Returns:
        (B, T + max_new_tokens) int64 token ids, starting with the prompt.

    Raises:
        model.sampling.SamplingArgumentError: naming the argument, before any model
            work, for a bad max_new_tokens, temperature, top_k or top_p.
        ValueError: for an empty prompt or a generator that is not a torch.Generator.
    """
    args = (idx, max_new_tokens, temperature, top_k, top_p, generator, use_cache, compile)
    return torch.cat([idx, *_device_tokens(model, *args)], dim=1)


def generate_stream(
    model: GPT,
    idx: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    *,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
    compile: bool | None = None,
) -> Iterator[torch.Tensor]:
    """Like `generate`, but yield the new tokens one step at a time.

    The arguments are checked when this is called, before any model work; the model
    runs as the iterator is consumed, and stopping early costs nothing more. The
    tokens stay on the device: reading each one back (``.tolist()``) waits for the
    device every token, which `generate_chunks` avoids. While the sequence fits in
    block_size (prompt + new tokens <= block_size + 1), the tokens are those of
    ``use_cache=False`` with the same generator.

    Returns:
        An iterator of max_new_tokens (B, 1) int64 tensors on the model's device.

    Raises:
        As `generate`, at call time.
    """
    args = (idx, max_new_tokens, temperature, top_k, top_p, generator, use_cache, compile)
    steps = _device_tokens(model, *args)
    # Cloned outside inference mode: ordinary tensors (inference tensors refuse
    # in-place edits and autograd).
    return (step.clone() for step in steps)


def generate_chunks(
    model: GPT,
    idx: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    *,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
    compile: bool | None = None,
    chunk_size: int = CHUNK,
) -> Iterator[torch.Tensor]:
    """The tokens of `generate_stream`, read back to the host ``chunk_size`` steps at a
    time (one wait for the device per chunk; see CHUNK), for streaming text and
    checking stop sequences.

    Returns:
        An iterator of (B, n) int64 CPU tensors, n = chunk_size except maybe the last;
        together they hold the max_new_tokens new tokens.

    Raises:
        As `generate`, at call time; ValueError if chunk_size < 1.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    args = (idx, max_new_tokens, temperature, top_k, top_p, generator, use_cache, compile)
    steps = _device_tokens(model, *args)
    return _read_in_chunks(steps, chunk_size)


def _read_in_chunks(steps: Iterator[torch.Tensor], chunk_size: int) -> Iterator[torch.Tensor]:
    """Concatenate (B, 1) device tokens on the device; copy each chunk to the host."""
    pending = []
    for token in steps:
        pending.append(token)
        if len(pending) == chunk_size:
            yield torch.cat(pending, dim=1).cpu()
            pending = []
    if pending:
        yield torch.cat(pending, dim=1).cpu()
