"""Turning logits into the next token.

    logits (B, vocab_size)
      -> temperature     divide by T (0 = greedy: argmax, no randomness)
      -> top-k filter    keep the k largest logits (Fan et al. 2018)
      -> top-p filter    keep the smallest set of tokens whose probability reaches p
                         (nucleus sampling, Holtzman et al. 2020)
      -> softmax -> one draw per row                    (B, 1) token ids

Filters set the logits of removed tokens to -inf, so the softmax gives them exactly
zero probability, and the draw never picks them. The settings travel together as one
`Sampling`, checked once when it is made, before any model work.
"""

import math
import numbers
from dataclasses import dataclass

import torch


class SamplingArgumentError(ValueError):
    """Sampling settings out of range, all of them at once. ``problems`` holds one
    (argument, requirement) pair per bad setting: ``argument`` is its Python name
    (top_p), ``requirement`` what it must be; a command line can name its own flags
    instead. ``argument`` and ``requirement`` are those of the first.

    Args:
        problems: e.g. [("top_p", "must be a number in (0, 1] ..., got 2")].
    """

    def __init__(self, problems: list[tuple[str, str]]):
        super().__init__(
            "; ".join(f"{argument} {requirement}" for argument, requirement in problems)
        )
        self.problems = problems
        self.argument, self.requirement = problems[0]


def _is_int(value) -> bool:
    """True for Python and NumPy integers, False for bools (True is not a count)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value) -> bool:
    """True for int and float values (Python or NumPy), False for bools and tensors."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _seed_problem(seed) -> str | None:
    """What is wrong with a seed, or None: it must be an integer in [-2**63, 2**64 - 1],
    the range a torch generator accepts (a negative seed is taken modulo 2**64)."""
    if not _is_int(seed) or not (-(2**63) <= seed < 2**64):
        return f"must be an integer in [-2**63, 2**64 - 1], got {seed!r}"
    return None


@dataclass(frozen=True)
class Sampling:
    """How each next token is chosen, checked once when it is made and then passed
    along unchanged (model/engine.py, `GPT.generate`).

    Args:
        temperature: a finite number >= 0 dividing the logits; 0 means greedy (argmax,
            no randomness). Any positive value works, however small: below float32's
            smallest normal number it gives the greedy token too (`next_token`).
        top_k: None (off) or an integer >= 1: sample among the k likeliest tokens
            (values above vocab_size keep every token).
        top_p: None (off) or a number in (0, 1]: nucleus sampling (1 keeps every token).
        seed: None, or an integer in [-2**63, 2**64 - 1]: each generation then draws
            with new torch generators on the model's device, one per sequence of the
            batch (`sample_seed`), so sequence i is the same whatever the batch size.
        generator: None, or a torch.Generator on the model's device, which every
            generation draws from in turn. Not together with ``seed``; with neither,
            torch's default generator is used.

    Raises:
        SamplingArgumentError: listing every setting outside those ranges.
    """

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = None
    generator: torch.Generator | None = None

    def __post_init__(self) -> None:
        problems = []
        t = self.temperature
        if not _is_real(t) or not math.isfinite(t) or t < 0:
            problems.append(
                ("temperature", f"must be a finite number >= 0 (0 means greedy), got {t!r}")
            )
        if self.top_k is not None and (not _is_int(self.top_k) or self.top_k <= 0):
            problems.append(
                ("top_k", f"must be an integer >= 1 (or unset for off), got {self.top_k!r}")
            )
        # `not (0 < p <= 1)` rather than `p <= 0 or p > 1`, so that NaN is refused too.
        p = self.top_p
        if p is not None and (not _is_real(p) or not (0 < p <= 1)):
            problems.append(
                ("top_p", f"must be a number in (0, 1] (1 keeps every token), got {p!r}")
            )
        if self.seed is not None and (problem := _seed_problem(self.seed)) is not None:
            problems.append(("seed", problem))
        if self.generator is not None and not isinstance(self.generator, torch.Generator):
            problems.append(("generator", f"must be a torch.Generator, got {type(self.generator)}"))
        if self.seed is not None and self.generator is not None:
            problems.append(("seed", "and generator both given: give one of them"))
        if problems:
            raise SamplingArgumentError(problems)

    def rng(
        self, device: torch.device | str, rows: int = 1
    ) -> torch.Generator | list[torch.Generator] | None:
        """What one generation of ``rows`` sequences draws with: ``generator`` itself
        (shared by the rows, in turn), with ``seed`` one new generator per row on
        ``device`` (row i seeded with `sample_seed` (seed, i)), or None (torch's
        default generator)."""
        if self.seed is not None:
            return [make_generator(sample_seed(self.seed, i), device) for i in range(rows)]
        return self.generator


# Row i of a batch is seeded with seed + i x this (mod 2**64): 2**64 over the golden
# ratio, odd, so the rows of nearby seeds (7's row 1, 8's row 0) never share a seed.
SAMPLE_SEED_STRIDE = 0x9E3779B97F4A7C15


def sample_seed(seed: int, row: int) -> int:
    """The seed of sequence ``row`` (0-based) of a batch sampled with ``seed``: ``seed``
    itself for row 0 (one sample of a seed is what it always was), else seed + row x
    SAMPLE_SEED_STRIDE modulo 2**64."""
    return seed if row == 0 else (seed + row * SAMPLE_SEED_STRIDE) % 2**64


def check_max_new_tokens(max_new_tokens) -> None:
    """Raise `SamplingArgumentError` naming max_new_tokens unless it is an integer >= 0."""
    if not _is_int(max_new_tokens) or max_new_tokens < 0:
        raise SamplingArgumentError(
            [("max_new_tokens", f"must be an integer >= 0, got {max_new_tokens!r}")]
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
    if (problem := _seed_problem(seed)) is not None:
        raise SamplingArgumentError([("seed", problem)])
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
    sampling: Sampling,
    generator: torch.Generator | list[torch.Generator] | None = None,
) -> torch.Tensor:
    """Pick the next token for each sequence from its last-position logits.

    Order: temperature, then top-k, then top-p (so p is measured on the tempered
    distribution), then one draw from the softmax (`draw`).

    Args:
        logits: (B, vocab_size) unnormalised log-probabilities.
        sampling: the settings; temperature 0 is greedy (argmax, no RNG use).
        generator: the torch RNG of this generation (`Sampling.rng`): one for the
            batch, a list of one per row, or None for torch's default one.

    Returns:
        (B, 1) int64 token ids, on the logits' device. Nothing is read back to the
        host, so a decode loop never waits for the device here.
    """
    if sampling.temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    # Subtracting the row maximum first changes nothing mathematically (softmax is
    # shift-invariant) but keeps a tiny temperature from turning logits into inf - inf
    # = NaN: the best token stays at 0 and the others go to -inf at worst. Below
    # float32's smallest normal number a temperature would round to 0 in the division
    # (0 / 0 = NaN), so it is raised to that number: the same greedy limit.
    temperature = max(sampling.temperature, torch.finfo(torch.float32).tiny)
    logits = logits.float()
    logits = (logits - logits.amax(dim=-1, keepdim=True)) / temperature
    if sampling.top_k is not None:
        logits = top_k_filter(logits, sampling.top_k)
    if sampling.top_p is not None:
        logits = top_p_filter(logits, sampling.top_p)
    probs = torch.softmax(logits, dim=-1)
    return draw(probs, generator)


def draw(
    probs: torch.Tensor, generator: torch.Generator | list[torch.Generator] | None = None
) -> torch.Tensor:
    """One draw per row of (B, vocab_size) probabilities -> (B, 1) int64 ids.

    ``generator``: one torch generator for the whole batch, a list of B (row i draws
    from the i-th alone, so its draws do not depend on the other rows), or None.

    argmax(p_i / E_i) with E_i ~ Exponential(1) independent picks i with probability
    p_i (the exponential race; the Gumbel-max trick with exp applied). It is the
    computation torch.multinomial makes for one sample, without its input checks that
    read a value back to the host: the same generator gives the same ids.

    Only tokens with p_i > 0 take part: a token that top-k or top-p removed can never
    be drawn, even where the race holds 0 or -0.0 (some devices' generators can
    return 0, and 0 / 0 = NaN would win the argmax).
    """
    if isinstance(generator, list):
        race = torch.stack(
            [
                torch.empty_like(row).exponential_(1, generator=g)
                for row, g in zip(probs, generator, strict=True)
            ]
        )
    else:
        race = torch.empty_like(probs).exponential_(1, generator=generator)
    # p / |E| >= 0 for every token that can be drawn (+inf where E is 0); -1 below them.
    scores = torch.where(probs > 0, probs / race.abs(), -1.0)
    return scores.argmax(dim=-1, keepdim=True)
