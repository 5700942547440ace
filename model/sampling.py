"""Turning logits into the next token.

    logits (B, vocab_size)
      -> temperature     divide by T (0 = greedy: argmax, no randomness)
      -> top-k filter    keep the k largest logits (Fan et al. 2018)
      -> top-p filter    keep the smallest set of tokens whose probability reaches p
                         (nucleus sampling, Holtzman et al. 2020)
      -> softmax -> one draw per row                    (B, 1) token ids

Filters set the logits of removed tokens to -inf, so the softmax gives them exactly
zero probability. Also here: the checks of these settings, made before any model work.
"""

import math
import numbers

import torch


class SamplingArgumentError(ValueError):
    """A sampling setting is out of range. ``argument`` is its Python name (top_p),
    ``requirement`` what it must be; a command line can name its own flag instead.

    Args:
        argument: the parameter's name, e.g. "top_p".
        requirement: the rest of the message, e.g. "must be a number in (0, 1], got 2".
    """

    def __init__(self, argument: str, requirement: str):
        super().__init__(f"{argument} {requirement}")
        self.argument = argument
        self.requirement = requirement


class SamplingError(RuntimeError):
    """A sampler fault. The draw of `draw` (an argmax) cannot leave the vocabulary, so
    nothing here raises it any more; it stays for callers that catch it."""


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
) -> None:
    """Check sampling settings before any model work.

    Args:
        max_new_tokens: tokens to generate; an integer >= 0.
        temperature: a finite number >= 0; 0 means greedy decoding.
        top_k: None (off) or an integer >= 1; values above vocab_size are clamped later.
        top_p: None (off) or a number in (0, 1]; 1 keeps every token.

    Raises:
        SamplingArgumentError: naming the argument, for any value outside those ranges.
    """
    if not _is_int(max_new_tokens) or max_new_tokens < 0:
        raise SamplingArgumentError(
            "max_new_tokens", f"must be an integer >= 0, got {max_new_tokens!r}"
        )
    if not _is_real(temperature) or not math.isfinite(temperature) or temperature < 0:
        raise SamplingArgumentError(
            "temperature", f"must be a finite number >= 0 (0 means greedy), got {temperature!r}"
        )
    if top_k is not None and (not _is_int(top_k) or top_k <= 0):
        raise SamplingArgumentError(
            "top_k", f"must be an integer >= 1 (or unset for off), got {top_k!r}"
        )
    # `not (0 < p <= 1)` rather than `p <= 0 or p > 1`, so that NaN is rejected too.
    if top_p is not None and (not _is_real(top_p) or not (0 < top_p <= 1)):
        raise SamplingArgumentError(
            "top_p", f"must be a number in (0, 1] (1 keeps every token), got {top_p!r}"
        )


def make_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A torch RNG on ``device`` seeded with ``seed``, for reproducible sampling.

    Args:
        seed: an integer in [-2**63, 2**64 - 1], the range a torch generator accepts
            (a negative seed is taken modulo 2**64).
        device: where the generator lives (that of the model).

    Raises:
        SamplingArgumentError: if seed is not an integer in that range.
    """
    if not _is_int(seed) or not (-(2**63) <= seed < 2**64):
        raise SamplingArgumentError(
            "seed", f"must be an integer in [-2**63, 2**64 - 1], got {seed!r}"
        )
    return torch.Generator(device=device).manual_seed(int(seed))


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
        (B, 1) int64 token ids, on the logits' device. Nothing is read back to the
        host, so a decode loop never waits for the device here.
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
    return draw(probs, generator)


def draw(probs: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """One draw per row of (B, vocab_size) probabilities -> (B, 1) int64 ids.

    argmax(p_i / E_i) with E_i ~ Exponential(1) independent picks i with probability
    p_i (the exponential race; the Gumbel-max trick with exp applied). It is the
    computation torch.multinomial makes for one sample, without its input checks that
    read a value back to the host: the same generator gives the same ids.
    """
    race = torch.empty_like(probs).exponential_(1, generator=generator)
    return (probs / race).argmax(dim=-1, keepdim=True)
