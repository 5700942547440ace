"""Turning logits into the next token, and the rules around generation.

    logits (B, vocab_size)
      -> temperature     divide by T (0 = greedy: argmax, no randomness)
      -> top-k filter    keep the k largest logits (Fan et al. 2018)
      -> top-p filter    keep the smallest set of tokens whose probability reaches p
                         (nucleus sampling, Holtzman et al. 2020)
      -> softmax -> one draw per row                    (B, 1) token ids

Filters set the logits of removed tokens to -inf, so the softmax gives them exactly
zero probability. Also here: argument validation (before any model work), the
sliding-window length used past block_size, and stop-sequence matching.
"""

import math
import numbers
from collections.abc import Sequence

import torch

# Past block_size the KV-cached decoder keeps this share of the window (see
# `sliding_window_keep`).
SLIDING_WINDOW_KEEP = 0.75


class SamplingError(RuntimeError):
    """The sampler returned a token id outside the vocabulary (a backend fault)."""


def _is_int(value) -> bool:
    """True for Python and NumPy integers, False for bools (True is not a count)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value) -> bool:
    """True for int and float values (Python or NumPy), False for bools and tensors."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def validate_sampling_args(
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    *,
    flag_names: bool = False,
) -> None:
    """Check sampling arguments before any model work.

    Args:
        max_new_tokens: tokens to generate; an integer >= 0.
        temperature: a finite number >= 0; 0 means greedy decoding.
        top_k: None (off) or an integer >= 1; values above vocab_size are clamped later.
        top_p: None (off) or a number in (0, 1]; 1 keeps every token.
        flag_names: name the arguments as command-line flags (``--top-p``) instead of
            Python parameters (``top_p``) in the messages.

    Raises:
        ValueError: naming the argument, for any value outside the ranges above.
    """

    def name(arg: str) -> str:
        return "--" + arg.replace("_", "-") if flag_names else arg

    if not _is_int(max_new_tokens) or max_new_tokens < 0:
        raise ValueError(
            f"{name('max_new_tokens')} must be an integer >= 0, got {max_new_tokens!r}"
        )
    if not _is_real(temperature) or not math.isfinite(temperature) or temperature < 0:
        raise ValueError(
            f"{name('temperature')} must be a finite number >= 0 (0 means greedy), "
            f"got {temperature!r}"
        )
    if top_k is not None and (not _is_int(top_k) or top_k <= 0):
        raise ValueError(
            f"{name('top_k')} must be an integer >= 1 (or unset for off), got {top_k!r}"
        )
    # `not (0 < p <= 1)` rather than `p <= 0 or p > 1`, so that NaN is rejected too.
    if top_p is not None and (not _is_real(top_p) or not (0 < top_p <= 1)):
        # generate() once took the generator fifth, where top_p now is.
        hint = " (pass a generator as generator=...)" if isinstance(top_p, torch.Generator) else ""
        raise ValueError(
            f"{name('top_p')} must be a number in (0, 1] (1 keeps every token), got {top_p!r}{hint}"
        )


def make_generator(
    seed: int, device: torch.device | str = "cpu", *, flag_names: bool = False
) -> torch.Generator:
    """A torch RNG on ``device`` seeded with ``seed``, for reproducible sampling.

    Args:
        seed: an integer in [-2**63, 2**64 - 1], the range a torch generator accepts
            (a negative seed is taken modulo 2**64).
        device: where the generator lives (that of the model).
        flag_names: call the argument ``--seed`` in the message, as on the command line.

    Raises:
        ValueError: naming the argument, if seed is not an integer in that range.
    """
    if not _is_int(seed) or not (-(2**63) <= seed < 2**64):
        name = "--seed" if flag_names else "seed"
        raise ValueError(f"{name} must be an integer in [-2**63, 2**64 - 1], got {seed!r}")
    return torch.Generator(device=device).manual_seed(int(seed))


def sliding_window_keep(block_size: int) -> int:
    """Tokens kept when the KV cache is full: the last 3/4 of block_size (at least 1).

    Positions are learned absolute embeddings, so cached keys cannot be shifted to new
    positions; the kept tokens are run through the model again (a prefill). Keeping 3/4
    means one prefill of 0.75 * block_size tokens every 0.25 * block_size steps: the
    amortised cost stays a few tokens per step, and every prediction still sees at
    least 3/4 of a full context.
    """
    return max(1, int(block_size * SLIDING_WINDOW_KEEP))


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k largest logits of each row; the rest become -inf (Fan et al. 2018,
    "Hierarchical Neural Story Generation").

    Args:
        logits: (B, vocab_size) logits.
        k: tokens to keep, >= 1; values above vocab_size keep every token. Tokens tied
            with the k-th largest logit are all kept.

    Returns:
        (B, vocab_size) logits with -inf outside the top k.
    """
    k = min(k, logits.size(-1))
    kth_largest = torch.topk(logits, k, dim=-1).values[:, -1:]
    return logits.masked_fill(logits < kth_largest, float("-inf"))


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus filter: keep the most likely tokens until their probability reaches p
    (Holtzman et al. 2020, "The Curious Case of Neural Text Degeneration").

    Tokens are taken in order of decreasing probability; a token is kept if the tokens
    strictly more likely than it hold less than p in total. So the token that crosses
    the threshold is kept, and the most likely token always is. Example: probabilities
    [0.5, 0.3, 0.15, 0.05] with p = 0.7 keep the first two (0.5 < 0.7, 0.8 >= 0.7).

    Args:
        logits: (B, vocab_size) logits (after temperature: p applies to the
            distribution that is sampled).
        p: in (0, 1]; 1 keeps every token.

    Returns:
        (B, vocab_size) logits with -inf for the removed tokens.
    """
    if p >= 1:
        # Rounding in the cumulative sum could otherwise drop the rarest tokens.
        return logits
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
    probs = torch.softmax(sorted_logits.float(), dim=-1)
    mass_before = probs.cumsum(dim=-1) - probs  # probability of the more likely tokens
    drop_sorted = mass_before >= p
    drop_sorted[:, 0] = False  # the most likely token survives any rounding
    drop = torch.empty_like(drop_sorted).scatter_(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def next_token(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    *,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Pick the next token for each sequence from its last-position logits.

    Order: temperature, then top-k, then top-p (so p is measured on the tempered
    distribution), then one draw from the softmax. Arguments are assumed valid
    (see `validate_sampling_args`).

    Args:
        logits: (B, vocab_size) unnormalised log-probabilities.
        temperature: divides the logits; 0 means greedy (argmax, no RNG use).
        top_k: keep only the k most likely tokens (clamped to vocab_size); None = all.
        top_p: nucleus threshold in (0, 1]; None = off.
        generator: torch RNG used for sampling, for reproducible output.

    Returns:
        (B, 1) int64 token ids.

    Raises:
        SamplingError: if the draw returned an id outside [0, vocab_size), which
            torch.multinomial does on some backends for degenerate probabilities;
            caught here, where the id is drawn, rather than as an index error later.
    """
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    # Subtracting the row maximum first changes nothing mathematically (softmax is
    # shift-invariant) but keeps a tiny temperature from turning logits into inf - inf
    # = NaN: the best token stays at 0 and the others go to -inf at worst.
    logits = logits.float()
    logits = (logits - logits.amax(dim=-1, keepdim=True)) / temperature
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    probs = torch.softmax(logits, dim=-1)
    ids = torch.multinomial(probs, num_samples=1, generator=generator)
    vocab_size = logits.size(-1)
    if ((ids < 0) | (ids >= vocab_size)).any():
        bad = ids[(ids < 0) | (ids >= vocab_size)][0].item()
        raise SamplingError(
            f"the sampler drew token id {bad}, outside the vocabulary [0, {vocab_size}), "
            f"on {ids.device.type}: torch.multinomial returned an invalid index (a fault "
            "of some backends). Sample on another device (--device cpu), or with "
            "--temperature 0 (greedy, no random draw)"
        )
    return ids


class StopSequences:
    """Ends each sequence of a batch at the first stop sequence it generates, and says
    which generated tokens are safe to show so far (for streaming).

    Matching runs on token ids of the generated text only (not the prompt). The stop
    sequence itself is not part of the output. When several stop sequences end at the
    same token, the longest one is removed. Tokens that could still be the start of a
    stop sequence are held back until they can no longer be; `flush` releases them when
    generation ends without a match.

    Args:
        stops: stop sequences, each a non-empty sequence of token ids.
        batch_size: B, the number of sequences generated together.

    Raises:
        ValueError: if a stop sequence is empty or batch_size < 1.
    """

    def __init__(self, stops: Sequence[Sequence[int]], batch_size: int):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if any(len(s) == 0 for s in stops):
            raise ValueError("a stop sequence must hold at least one token")
        # Longest first, so that the longest of several simultaneous matches wins.
        self.stops = sorted({tuple(int(t) for t in s) for s in stops}, key=len, reverse=True)
        # A held-back tail is a proper prefix of a stop sequence, so at most this long.
        self._max_hold = len(self.stops[0]) - 1 if self.stops else 0
        self.finished = [False] * batch_size
        self._pending: list[list[int]] = [[] for _ in range(batch_size)]

    @property
    def all_finished(self) -> bool:
        """True once every sequence has produced a stop sequence."""
        return all(self.finished)

    def push(self, tokens: Sequence[int]) -> list[list[int]]:
        """Take one new token per sequence; return, per sequence, the tokens that can be
        shown now (possibly none). Tokens of finished sequences are ignored.

        Args:
            tokens: B token ids, one per sequence (e.g. ``step[:, 0].tolist()`` of a
                (B, 1) step).

        Raises:
            ValueError: if the number of tokens is not the batch size.
        """
        if len(tokens) != len(self.finished):
            raise ValueError(f"expected {len(self.finished)} tokens, got {len(tokens)}")
        released = []
        for row, token in enumerate(tokens):
            if self.finished[row]:
                released.append([])
                continue
            pending = self._pending[row]
            pending.append(int(token))
            released.append(self._release(row, pending))
        return released

    def flush(self) -> list[list[int]]:
        """Release the held-back tokens of every unfinished sequence (generation ended
        without a stop sequence completing)."""
        released = [list(p) for p in self._pending]
        for p in self._pending:
            p.clear()
        return released

    def _release(self, row: int, pending: list[int]) -> list[int]:
        """Finish ``row`` if ``pending`` ends with a stop sequence; otherwise keep only
        its longest tail that a stop sequence could still begin with."""
        for stop in self.stops:
            if len(pending) >= len(stop) and tuple(pending[-len(stop) :]) == stop:
                self.finished[row] = True
                out = pending[: -len(stop)]
                pending.clear()
                return out
        hold = 0
        # Any future match must start inside the longest tail that is a proper prefix
        # of some stop sequence; everything before that tail can be shown.
        for n in range(min(len(pending), self._max_hold), 0, -1):
            tail = tuple(pending[-n:])
            if any(len(s) > n and s[:n] == tail for s in self.stops):
                hold = n
                break
        out = pending[: len(pending) - hold]
        del pending[: len(pending) - hold]
        return out
