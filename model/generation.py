"""Generation: extend a prompt one token at a time (autoregressive decoding).

    prompt (B, T) -> prefill: one forward pass over the prompt, filling a KV cache
                     (logits of its last position only: ``last_only``)
                  -> decode: pick a token from the last logits (`model.sampling`),
                     run the model on that one token, repeat

`generate` returns the whole sequences; `generate_stream` yields each step's tokens as
they are made. `GPT.generate` and `GPT.generate_stream` call these.

The KV cache holds block_size positions. Past that, the context slides:

- RoPE models (``model.position=rope``): the cache rolls. Each new position's keys and
  values replace the oldest ones, so every prediction sees the last block_size tokens,
  and no prefill is repeated. The kept keys stay valid because a rotary key's position
  only enters the score as its distance to the query. (In layers above the first, a
  kept key was computed when older tokens were still in view, as in sliding-window
  attention models; re-running the window from scratch would give slightly different
  numbers.)
- Learned positions (GPT-2): each cached key holds its absolute position, so the window
  cannot slide in place. When the cache is full, the last 3/4 of block_size tokens are
  run through the model again into an emptied cache (`sliding_window_keep`), and
  decoding continues from there: every prediction sees between 3/4 and all of
  block_size tokens.
"""

from collections.abc import Iterator

import torch
from torch import nn

from model.kv_cache import KVCache
from model.linear import PackedWeights
from model.sampling import next_token, validate_sampling_args

# Past block_size the KV-cached decoder keeps this share of the window.
SLIDING_WINDOW_KEEP = 0.75


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


def generate(
    model: nn.Module,
    idx: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    *,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
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
        use_cache: decode with a KV cache (fast); False re-runs the last block_size
            tokens in full for every new token (the reference path).

    Returns:
        (B, T + max_new_tokens) int64 token ids, starting with the prompt.

    Raises:
        model.sampling.SamplingArgumentError: naming the argument, before any model
            work, for a bad max_new_tokens, temperature, top_k or top_p.
        ValueError: for an empty prompt or a generator that is not a torch.Generator.
        model.sampling.SamplingError: if the sampler draws an id outside the vocabulary.
    """
    steps = generate_stream(
        model,
        idx,
        max_new_tokens,
        temperature,
        top_k,
        top_p,
        generator=generator,
        use_cache=use_cache,
    )
    return torch.cat([idx, *steps], dim=1)


def generate_stream(
    model: nn.Module,
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

    The arguments are checked when this is called, before any model work; the model
    runs as the iterator is consumed, and stopping early costs nothing more.
    While the sequence fits in block_size (prompt + new tokens <= block_size + 1), the
    tokens are exactly those of ``use_cache=False`` with the same generator; past it,
    that reference path always sees the last block_size tokens instead.

    Args:
        model, idx, max_new_tokens, temperature, top_k, top_p, generator, use_cache:
            as in `generate`.

    Returns:
        An iterator of max_new_tokens (B, 1) int64 tensors, the new token of each
        sequence at each step.

    Raises:
        As `generate`; the argument errors at call time.
    """
    validate_sampling_args(max_new_tokens, temperature, top_k, top_p)
    if idx.dim() != 2 or idx.size(0) == 0 or idx.size(1) == 0:
        raise ValueError(
            f"the prompt idx must be (B, T) token ids with B >= 1 and T >= 1 (at least "
            f"one token), got shape {tuple(idx.shape)}"
        )
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator, got {type(generator)}")
    decode = _decode_cached if use_cache else _decode_uncached
    steps = decode(model, idx, max_new_tokens, temperature, top_k, top_p, generator)
    # The decoding runs in inference mode; cloning outside it hands the caller
    # ordinary tensors (inference tensors refuse in-place edits and autograd).
    return (step.clone() for step in steps)


@torch.inference_mode()
def _decode_uncached(
    model, idx, max_new_tokens, temperature, top_k, top_p, generator
) -> Iterator[torch.Tensor]:
    """Reference decoder: every step runs the last block_size tokens in full.
    Yields (B, 1) token ids."""
    for _ in range(max_new_tokens):
        logits, _ = model(idx[:, -model.config.block_size :])
        token = next_token(logits[:, -1, :], temperature, top_k, top_p=top_p, generator=generator)
        yield token
        idx = torch.cat([idx, token], dim=1)


@torch.inference_mode()
def _decode_cached(
    model, idx, max_new_tokens, temperature, top_k, top_p, generator
) -> Iterator[torch.Tensor]:
    """KV-cached decoder; past block_size the cache rolls (RoPE) or slides with a
    prefill (learned positions), as the module docstring says. Yields (B, 1) token ids."""
    if max_new_tokens == 0:
        return
    block_size = model.config.block_size
    keep = sliding_window_keep(block_size)
    cache = KVCache.for_model(model, idx.size(0))
    # On CPU, a batch's one-token steps multiply weights packed for them, once per
    # generation, and lent to the model only during its passes below (model/linear.py).
    packed = PackedWeights(model, idx.size(0))
    # window[:, :cache.length] are the tokens whose keys and values the cache holds,
    # kept so that a slide can prefill the last `keep` of them again.
    window = idx.new_empty(idx.size(0), block_size)
    context = idx[:, -block_size:]
    window[:, : context.size(1)] = context
    logits, _ = model(context, cache=cache, last_only=True)
    for step in range(max_new_tokens):
        token = next_token(logits[:, -1, :], temperature, top_k, top_p=top_p, generator=generator)
        yield token
        if step == max_new_tokens - 1:
            return  # no forward pass for a token nobody will sample after
        if cache.fits(1):  # room for one more position, or a rolling cache (RoPE)
            if not cache.rolling:
                window[:, cache.length] = token[:, 0]
            with packed.active():
                logits, _ = model(token, cache=cache)
        else:
            # Full: keep the last `keep` tokens (the new one included) and prefill.
            window[:, : keep - 1] = window[:, block_size - keep + 1 :].clone()
            window[:, keep - 1] = token[:, 0]
            cache.reset()
            logits, _ = model(window[:, :keep], cache=cache, last_only=True)
