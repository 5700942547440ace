"""What each attention head has become, in four numbers, and the lines that say when a
head formed.

    scores = head_scores(model, text_ids, induction_ids(vocab_size, period))
    scores["previous_char"]   # (n_layer, n_head): mean weight on the character before

The measures, each from (n_layer, n_head, T, T) attention weights (rows: the current
character i; columns: the characters j <= i it attends to):

    entropy          mean over rows of -sum_j w[i, j] ln w[i, j], in nats: 0 for a head
                     that looks at one character, ln(i + 1) in row i for uniform weights
    previous_char    mean over rows i >= 1 of w[i, i - 1]
    first_position   mean over rows i >= 1 of w[i, 0] (an "attention sink")
    induction        on a sequence of random characters repeated once (period P), the
                     mean over the second copy's rows i of w[i, i - P + 1]: how much the
                     head looks one past the earlier occurrence of the current character,
                     the pattern of induction heads (Olsson et al. 2022, "In-context
                     Learning and Induction Heads", section 2)

The first three are taken on text of the corpus (the run's validation split), the last
on the random sequence, where only copying from context can predict the second copy.
"""

import torch

from model import GPT
from viz.attention_weights import prompt_attention

MEASURES = ("entropy", "previous_char", "first_position", "induction")
# A head "became" one of these once its score stays at or above the bound (entropy
# has no such kind). Uniform weights over T = 128 characters score about 0.04 on the
# first two, and 1 / (i + 1) on induction rows; a formed head puts most of its weight
# on the one character.
FORMED = {"previous_char": 0.5, "first_position": 0.5, "induction": 0.3}
KIND_NAMES = {
    "previous_char": "previous-character",
    "first_position": "first-position",
    "induction": "induction",
}
INDUCTION_SEED = 0  # the fixed random sequence, the same at every evaluation and run
MAX_INDUCTION_PERIOD = 64


def row_entropy(weights: torch.Tensor) -> torch.Tensor:
    """Entropy of each attention row in nats.

    Args:
        weights: (..., T, T) rows summing to 1 (0 above the diagonal).

    Returns:
        (..., T): -sum_j w[i, j] ln w[i, j], with 0 ln 0 = 0.
    """
    logs = torch.where(weights > 0, weights.log(), torch.zeros_like(weights))
    return -(weights * logs).sum(-1)


def previous_char_score(weights: torch.Tensor) -> torch.Tensor:
    """(..., T, T) weights -> (...): the mean over rows i >= 1 of w[i, i - 1].

    Raises:
        ValueError: if T < 2 (no row has a previous character).
    """
    if weights.size(-1) < 2:
        raise ValueError("previous_char_score needs at least 2 characters")
    return weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(-1)


def first_position_score(weights: torch.Tensor) -> torch.Tensor:
    """(..., T, T) weights -> (...): the mean over rows i >= 1 of w[i, 0].

    Raises:
        ValueError: if T < 2.
    """
    if weights.size(-1) < 2:
        raise ValueError("first_position_score needs at least 2 characters")
    return weights[..., 1:, 0].mean(-1)


def induction_score(weights: torch.Tensor, period: int) -> torch.Tensor:
    """(..., 2P, 2P) weights on a sequence whose second half repeats its first (period
    ``period`` = P) -> (...): the mean over rows i in [P, 2P) of w[i, i - P + 1], the
    character after the earlier occurrence of character i.

    Raises:
        ValueError: if the weights are not 2P x 2P.
    """
    if weights.size(-1) != 2 * period or period < 1:
        raise ValueError(f"induction_score needs {2 * period} positions, got {weights.size(-1)}")
    rows = torch.arange(period, 2 * period)
    return weights[..., rows, rows - period + 1].mean(-1)


def induction_ids(vocab_size: int, period: int, seed: int = INDUCTION_SEED) -> torch.Tensor:
    """A fixed sequence of ``period`` random token ids (all different when the
    vocabulary allows), repeated once.

    Returns:
        (2 * period,) int64 ids.
    """
    generator = torch.Generator().manual_seed(seed)
    if vocab_size >= period:
        first = torch.randperm(vocab_size, generator=generator)[:period]
    else:
        first = torch.randint(vocab_size, (period,), generator=generator)
    return torch.cat([first, first])


def induction_period(block_size: int) -> int:
    """The period of the induction sequence for a model of ``block_size``: both copies
    fit, at most MAX_INDUCTION_PERIOD."""
    return max(1, min(block_size // 2, MAX_INDUCTION_PERIOD))


def scores_from_weights(
    text_weights: torch.Tensor, repeat_weights: torch.Tensor
) -> dict[str, torch.Tensor]:
    """The four measures (`MEASURES`) from two attention records.

    Args:
        text_weights: (n_layer, n_head, T, T) weights on text of the corpus, T >= 2.
        repeat_weights: (n_layer, n_head, 2P, 2P) weights on `induction_ids`.

    Returns:
        {measure: (n_layer, n_head) float32 tensor}.
    """
    return {
        "entropy": row_entropy(text_weights).mean(-1),
        "previous_char": previous_char_score(text_weights),
        "first_position": first_position_score(text_weights),
        "induction": induction_score(repeat_weights, repeat_weights.size(-1) // 2),
    }


def head_scores(model: GPT, text_ids: torch.Tensor, repeat_ids: torch.Tensor) -> dict:
    """Score every head of ``model`` (two eval-mode forward passes; the model's mode is
    restored).

    Args:
        text_ids: (T,) ids of corpus text, 2 <= T <= block_size.
        repeat_ids: (2P,) ids from `induction_ids`, 2P <= block_size.

    Returns:
        {measure: (n_layer, n_head) float32 tensor}, see `scores_from_weights`.
    """
    return scores_from_weights(
        prompt_attention(model, text_ids), prompt_attention(model, repeat_ids)
    )


def formation_lines(history: dict[tuple[str, int, int], list[tuple[int, float]]]) -> list[str]:
    """One line per head that became a previous-character, first-position or induction
    head during the run (its score first below `FORMED`'s bound, and at or above it from
    some step to the end), e.g. "layer 1 head 2 became a previous-character head near
    step 340 (score 0.04 at step 1, 0.87 at step 2200)".

    Args:
        history: {(measure, layer, head): [(step, score), ...] in step order}.
    """
    lines = []
    for (measure, layer, head), points in sorted(history.items(), key=lambda kv: kv[0][1:]):
        bound = FORMED.get(measure)
        if bound is None or len(points) < 2 or points[0][1] >= bound or points[-1][1] < bound:
            continue
        since = len(points) - 1
        while since > 0 and points[since - 1][1] >= bound:
            since -= 1
        (first_step, first), (last_step, last) = points[0], points[-1]
        lines.append(
            f"layer {layer} head {head} became a {KIND_NAMES[measure]} head near step "
            f"{points[since][0]} (score {first:.2f} at step {first_step}, {last:.2f} at "
            f"step {last_step})"
        )
    return lines
