"""Decoding: extend a prompt one token at a time with a static KV cache.

    prompt (B, T) -> prefill: one pass over the prompt writes every position's keys and
                     values into the cache and gives the last position's logits
                  -> sample a token on the device (`model.sampling.next_token`)
                  -> decode step: run the model on that one token at a position held
                     in a tensor, attending over the cache; repeat

The network is model/gpt.py's own: each pass is `GPT.forward` with a `model.gpt.KVCache`,
and each attention layer stores its keys and values there and attends over them.
This file decides only what is decoding's: where the cache lives, which tokens run at
which positions over which slots, the sampling, and when tokens are read back.

This is the design of gpt-fast's generate.py and of Hugging Face's static cache:

- The cache is allocated once per generation at its full size, block_size positions
  (`allocate_cache`), so every decode step sees tensors of the same shapes; the step's
  position is a tensor too. Unwritten slots are hidden from the attention by a mask.
- The step can therefore be compiled once, with ``torch.compile(fullgraph=True)``, and
  on CUDA replayed as a CUDA graph (``mode="reduce-overhead"``): one launch a token
  instead of a hundred small kernels launched from Python. On CPU a step is not
  launch-bound, and eager PyTorch is the default (`compile_by_default`); an eager step
  is given only the slots written so far (no mask), and its few-row matrix products
  run on `model.cpu_products` (one bmm over row groups, shared between the threads).
- Sampling runs on the device and nothing is read back per token: `read_in_chunks`
  copies tokens to the host CHUNK at a time.

Past block_size the context slides:

- RoPE models (``model.position=rope``): the cache rolls. Position p is written to slot
  p mod block_size, replacing the oldest, so every prediction sees the last block_size
  tokens and no prefill is repeated. The kept keys stay valid because a rotary key's
  position enters the score only as its distance to the query. (In layers above the
  first, a kept key was computed when older tokens were still in view, as in
  sliding-window attention models; re-running the window from scratch would give
  slightly different numbers.) Positions past the rotary table are rotated by angles
  computed in float64 (`rotary_angles`).
- Learned positions (GPT-2): each cached key holds its absolute position, so the window
  cannot slide in place. When the cache is full, the last 3/4 of block_size tokens are
  run through the model again (`sliding_window_keep`), and decoding continues from
  there: every prediction sees between 3/4 and all of block_size tokens.
"""

from collections.abc import Iterator

import torch
from torch import nn

from model.compiler import missing_compiler
from model.cpu_products import CPUProducts
from model.gpt import GPT, KVCache, check_prompt
from model.sampling import Sampling, next_token

# Past block_size the decoder of a learned-position model keeps this share of the window.
SLIDING_WINDOW_KEEP = 0.75
# Tokens read back to the host at a time by `read_in_chunks` (streaming, stop
# sequences). A read waits for the device; 16 tokens make that wait rare on a GPU
# while a stream still shows text every fraction of a second on a CPU, and a stop
# sequence costs at most 15 tokens of work past it.
CHUNK = 16


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
    is bound by kernel launches and a CUDA graph removes them, if the compiler Triton
    builds with is installed (`model.compiler`); not on CPU or MPS, where eager runs
    each step as fast and compiling costs time first (bench/sample_speed.py)."""
    return device.type == "cuda" and missing_compiler(device) is None


def allocate_cache(model: GPT, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The keys and values of every layer for ``batch_size`` sequences, allocated once,
    at their full size, for one generation (Pope et al. 2022, section 2).

    Returns:
        keys, values: (n_layer, B, n_head, block_size, d_k) zeros, on the device of the
        model's weights, in the dtype its projections give keys and values: torch.
        autocast's where autocast is on (sample.py --dtype), else the weights'. Zeros
        rather than empty: masked slots get zero weight, and 0 * 0 stays 0 where
        arbitrary memory could hold a NaN.

    Raises:
        ValueError: if batch_size is not positive.
    """
    if batch_size <= 0:
        raise ValueError(f"the KV cache's batch_size must be positive, got {batch_size}")
    c, weight = model.config, model.token_embedding.weight
    dtype, kind = weight.dtype, weight.device.type
    if torch.is_autocast_enabled(kind):
        dtype = torch.get_autocast_dtype(kind)
    shape = (c.n_layer, batch_size, c.n_head, c.block_size, c.head_size)
    keys = torch.zeros(shape, dtype=dtype, device=weight.device)
    return keys, torch.zeros_like(keys)


def rotary_angles(rotary: nn.Module, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(T, d_k/2) cos and sin of (T,) int64 positions, with no host read: the rotary
    table's rows inside block_size, computed in float64 past it (a rolling cache's
    positions grow without bound, and float32 angles would lose their precision)."""
    table = rotary.cos.size(0)
    inside = (positions < table).unsqueeze(-1)
    row = positions.clamp(max=table - 1)
    angles = positions.double().unsqueeze(-1) * rotary.inv_freq.double()
    cos = torch.where(inside, rotary.cos[row], angles.cos().to(rotary.cos.dtype))
    sin = torch.where(inside, rotary.sin[row], angles.sin().to(rotary.sin.dtype))
    return cos, sin


class Engine:
    """Prefill and one-token decode steps of a `model.GPT` over a static KV cache.

    Args:
        model: the GPT (in eval mode; its weights must not change during a generation).
        compile: compile the decode step with ``torch.compile(fullgraph=True)`` (on
            CUDA with ``mode="reduce-overhead"``: CUDA graphs); None takes
            `compile_by_default` for the model's device.
        backend: torch.compile's backend ("inductor"; tests pass a counting one).
        cpu_products: run the passes' few-row matrix products on `model.cpu_products`
            (faster on a CPU; a batch's regrouped weights about double the weights'
            memory while a generation lasts); None: on CPU when not compiling.

    Raises:
        ValueError: for cpu_products with compile.
    """

    def __init__(
        self,
        model: GPT,
        *,
        compile: bool | None = None,
        backend="inductor",
        cpu_products: bool | None = None,
    ):
        self.model = model
        device = model.token_embedding.weight.device
        self.device = device
        self.compiled = compile_by_default(device) if compile is None else compile
        if cpu_products and self.compiled:
            raise ValueError("cpu_products are for an eager decode step: not with compile")
        default = device.type == "cpu" and not self.compiled
        self.cpu_products = default if cpu_products is None else cpu_products
        self.products: CPUProducts | None = None  # made for each generation (`tokens`)
        self.rotary = model.blocks[0].attn.rotary
        self.step = self.decode_step
        if self.compiled:
            options = {"mode": "reduce-overhead"} if device.type == "cuda" else {}
            if backend != "inductor":
                options = {}
            self.step = torch.compile(
                self.decode_step, fullgraph=True, dynamic=False, backend=backend, **options
            )

    def angles(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """A RoPE model's `rotary_angles` of (T,) positions, once for every layer; None
        for learned positions."""
        return None if self.rotary is None else rotary_angles(self.rotary, positions)

    def forward(self, idx: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """`GPT.forward` of (B, T) ids over ``cache`` -> the last position's (B,
        vocab_size) logits; on the CPU products while a generation has them."""
        if self.products is None:
            logits, _ = self.model(idx, kv_cache=cache)
        else:
            with self.products.installed():
                logits, _ = self.model(idx, kv_cache=cache)
        return logits[:, -1]

    def prefill(self, idx: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """Run (B, T) tokens at positions 0 .. T-1 (T <= block_size), store their keys
        and values in slots 0 .. T-1 of `allocate_cache`'s ``keys`` and ``values``, and
        return the last position's (B, vocab_size) logits."""
        T = idx.size(1)
        positions = torch.arange(T, device=idx.device)
        # The first T slots only: the new tokens attend causally among themselves.
        cache = KVCache(
            keys[..., :T, :], values[..., :T, :], positions, None, self.angles(positions)
        )
        return self.forward(idx, cache)

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
            position: (1,) int64 their position; written to slot position mod S, S the
                slots given (a RoPE model's cache rolls past block_size; see the module
                docstring).
            keys, values: `allocate_cache`'s tensors (n_layer, B, n_head, S, d_k), whole
                or their first S slots; updated in place.
            slots: arange(block_size), to mask the slots after ``position``; None when
                all S slots are visible.

        Returns:
            (B, vocab_size) logits of the next token.
        """
        visible = None  # (1, block_size): the slots written so far (all, once rolling)
        if slots is not None:
            visible = (slots <= position).unsqueeze(0)
        cache = KVCache(keys, values, position, visible, self.angles(position))
        return self.forward(token, cache)

    @torch.inference_mode()
    def tokens(
        self, idx: torch.Tensor, max_new_tokens: int, sampling: Sampling
    ) -> Iterator[torch.Tensor]:
        """Yield max_new_tokens (B, 1) int64 tokens on the device, one per step;
        arguments as `generate_stream` (already checked). Nothing is read back to the
        host."""
        if max_new_tokens == 0:
            return
        try:
            yield from self._tokens(idx, max_new_tokens, sampling)
        finally:  # the regrouped weights last one generation (stale after it, and large)
            self.products = None

    def _tokens(
        self, idx: torch.Tensor, max_new_tokens: int, sampling: Sampling
    ) -> Iterator[torch.Tensor]:
        """The decode loop of `tokens`."""
        model = self.model
        block_size = model.config.block_size
        rolling = model.config.position == "rope"
        keep = sliding_window_keep(block_size)
        generator = sampling.rng(self.device, idx.size(0))
        keys, values = allocate_cache(model, idx.size(0))
        # Regrouped at every generation: the weights may have changed since the last.
        self.products = CPUProducts(model, idx.size(0)) if self.cpu_products else None
        if self.products is not None and not self.products.layers:
            self.products = None  # no weight large enough: plain F.linear throughout
        slots = torch.arange(block_size, device=self.device)
        context = idx[:, -block_size:]
        length = context.size(1)  # positions in the cache (a host count: no read)
        # window[:, :length]: the tokens of a learned-position model's cache, kept so
        # that a slide can prefill the last `keep` of them again.
        window = idx.new_zeros(idx.size(0), block_size)
        window[:, :length] = context
        logits = self.prefill(context, keys, values)
        position = torch.full((1,), length, dtype=torch.long, device=idx.device)
        cuda_graphs = self.compiled and self.device.type == "cuda"
        for step in range(max_new_tokens):
            token = next_token(logits, sampling, generator)
            yield token
            if step == max_new_tokens - 1:
                return  # no forward pass for a token nobody will sample after
            if rolling or length < block_size:
                if not rolling:
                    window[:, length] = token[:, 0]
                if cuda_graphs:  # the previous step's logits have been used
                    torch.compiler.cudagraph_mark_step_begin()
                if self.compiled:
                    logits = self.step(token, position, keys, values, slots)
                else:  # the written slots and the new one
                    seen = min(length + 1, block_size)
                    logits = self.step(
                        token, position, keys[..., :seen, :], values[..., :seen, :], None
                    )
                position += 1
                length += 1
            else:
                # Full: keep the last `keep` tokens (the new one included) and prefill.
                window[:, : keep - 1] = window[:, block_size - keep + 1 :].clone()
                window[:, keep - 1] = token[:, 0]
                logits = self.prefill(window[:, :keep], keys, values)
                length = keep
                position.fill_(keep)


def generate_stream(
    model: GPT,
    idx: torch.Tensor,
    max_new_tokens: int,
    sampling: Sampling | None = None,
    *,
    compile: bool | None = None,
) -> Iterator[torch.Tensor]:
    """Extend each sequence by sampling one token at a time with the KV cache, and
    yield the new tokens step by step.

    Any number of tokens can be generated (see the module docstring for how the
    context is kept within block_size). Put the model in eval mode first (no dropout).
    The arguments are checked when this is called, before any model work; the model
    runs as the iterator is consumed, and stopping early costs nothing more. The tokens
    stay on the device: reading each one back (``.tolist()``) waits for the device
    every token, which `read_in_chunks` avoids. While the sequence fits in block_size
    (prompt + new tokens <= block_size + 1), the tokens are those of the uncached
    reference (`GPT.generate`, `GPT.uncached_stream`) with the same generator.

    Args:
        model: a `model.GPT`.
        idx: (B, T) int64 prompt token ids, B >= 1, T >= 1.
        max_new_tokens: number of tokens to add (>= 0).
        sampling: temperature, top-k, top-p and the RNG (`model.sampling.Sampling`,
            already checked); None: `Sampling()`, temperature 1 over every token.
        compile: compile the decode step (`Engine`); None: the device's default.

    Returns:
        An iterator of max_new_tokens (B, 1) int64 tensors on the model's device.

    Raises:
        model.sampling.SamplingArgumentError: for a bad max_new_tokens, and
        ValueError: for an empty prompt; both at call time.
    """
    check_prompt(idx, max_new_tokens)
    steps = Engine(model, compile=compile).tokens(idx, max_new_tokens, sampling or Sampling())
    # Cloned outside inference mode: ordinary tensors (inference tensors refuse
    # in-place edits and autograd).
    return (step.clone() for step in steps)


def generate(
    model: GPT,
    idx: torch.Tensor,
    max_new_tokens: int,
    sampling: Sampling | None = None,
    *,
    compile: bool | None = None,
) -> torch.Tensor:
    """`generate_stream`'s tokens after the prompt: (B, T + max_new_tokens) int64 ids.
    Arguments and errors: those of `generate_stream`."""
    return torch.cat(
        [idx, *generate_stream(model, idx, max_new_tokens, sampling, compile=compile)], 1
    )


def read_in_chunks(
    steps: Iterator[torch.Tensor], chunk_size: int = CHUNK
) -> Iterator[torch.Tensor]:
    """The (B, 1) device tokens of ``steps`` (`generate_stream`), read back to the host
    ``chunk_size`` steps at a time: one wait for the device per chunk (see CHUNK), for
    streaming text and checking stop sequences.

    Returns:
        An iterator of (B, n) int64 CPU tensors, n = chunk_size except maybe the last.

    Raises:
        ValueError: if chunk_size < 1, at call time.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    return _chunks(steps, chunk_size)


def _chunks(steps: Iterator[torch.Tensor], chunk_size: int) -> Iterator[torch.Tensor]:
    """Concatenate (B, 1) device tokens on the device; copy each chunk to the host."""
    pending = []
    for token in steps:
        pending.append(token)
        if len(pending) == chunk_size:
            yield torch.cat(pending, dim=1).cpu()
            pending = []
    if pending:
        yield torch.cat(pending, dim=1).cpu()
