"""Attention per word, as the Korean chapters draw it ("새가 / 하늘을 / 날았다"), from the
model's per-character tables.

The model attends character by character. For a prompt with spaces, each word's
characters are put together by one rule, the same for every table:

    words    split at whitespace; a space belongs to the word before it ("새가␣"),
             whitespace at the very start to the first word
    rows     a query word's row is the mean of its characters' rows
    columns  a key word's column is the sum of its characters' columns

Summing the columns keeps each row a distribution: every character's weights sum to 1,
so their mean does too. A word cannot attend to a later word (its characters all come
before), and inside a word the later characters are masked for the earlier ones.

    spans = word_spans("새가 하늘을 날았다")       # [(0, 3), (3, 7), (7, 10)]
    per_word = word_weights(weights, spans)        # (3, 3), rows sum to 1
    mixed = word_rows(weights_x, spans)            # (3, C): weights·X per word
"""

import torch

from viz.messages import Message, message_json


def word_spans(text: str) -> list[tuple[int, int]]:
    """The words of ``text`` as (start, end) character ranges, end exclusive, covering
    every character once: a whitespace character joins the word before it, leading
    whitespace the first word.

    Args:
        text: the prompt, T >= 1 characters.

    Returns:
        At least one span; one for text without whitespace (or only whitespace).

    Raises:
        ValueError: for an empty text.
    """
    if not text:
        raise ValueError("word_spans needs at least one character")
    starts = [0]
    for i in range(1, len(text)):
        # A new word starts at a non-space character that follows a space, unless every
        # character before it is a space (leading whitespace stays with the first word).
        if not text[i].isspace() and text[i - 1].isspace() and text[:i].strip():
            starts.append(i)
    return list(zip(starts, [*starts[1:], len(text)], strict=True))


def grouping(spans: list[tuple[int, int]], dtype=torch.float64) -> torch.Tensor:
    """(W, T) matrix G with G[w, t] = 1 where character t belongs to word w: G·M sums a
    (T, ·) matrix's rows word by word, M·Gᵀ its columns."""
    T = spans[-1][1]
    g = torch.zeros(len(spans), T, dtype=dtype)
    for w, (start, end) in enumerate(spans):
        g[w, start:end] = 1
    return g


def word_rows(values: torch.Tensor, spans: list[tuple[int, int]]) -> torch.Tensor:
    """Each word's rows of a (T, N) table averaged: (W, N), in float64. For weights·X
    (N = n_embd) this is the word's mix, the chapter's per-word output.

    Raises:
        ValueError: if values does not have one row per character of ``spans``.
    """
    T = spans[-1][1]
    if values.dim() != 2 or values.size(0) != T:
        raise ValueError(f"values must be ({T}, N) for {T} characters, got {tuple(values.shape)}")
    g = grouping(spans)
    return (g @ values.detach().cpu().double()) / g.sum(dim=1, keepdim=True)


def word_weights(weights: torch.Tensor, spans: list[tuple[int, int]]) -> torch.Tensor:
    """(T, T) attention weights per word: (W, W) in float64, row a the mean of word a's
    character rows, column b the sum of word b's character columns. Each row sums to 1
    when each row of ``weights`` does.

    Raises:
        ValueError: if weights is not (T, T) for the T characters of ``spans``.
    """
    T = spans[-1][1]
    if tuple(weights.shape) != (T, T):
        raise ValueError(
            f"weights must be ({T}, {T}) for {T} characters, got {tuple(weights.shape)}"
        )
    return word_rows(weights, spans) @ grouping(spans).T


# The rule in words (viz/page/messages.json), for the page and the terminal.
RULE = Message("words.rule")


def words_json(
    text: str, weights: dict[str, torch.Tensor], rows: dict[str, torch.Tensor] | None = None
) -> dict:
    """The page's per-word view of a head's tables.

    Args:
        text: the prompt, T characters.
        weights: name -> (T, T) weights, rows averaged and columns summed per word
            (e.g. "weights", "xx_weights").
        rows: name -> (T, N) values whose rows are averaged per word (e.g. "xx_out").

    Returns:
        ``{"rule": RULE as message JSON, "words": [each word's text], "spans": [[start, end], ...],
        "tables": {name: (W, W) or (W, N) float64 tensor}}``.
    """
    spans = word_spans(text)
    tables = {name: word_weights(values, spans) for name, values in weights.items()}
    tables |= {name: word_rows(values, spans) for name, values in (rows or {}).items()}
    return {
        "rule": message_json(RULE),
        "words": [text[start:end] for start, end in spans],
        "spans": [list(span) for span in spans],
        "tables": tables,
    }
