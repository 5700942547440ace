"""Attention weights as a text table, the way a textbook prints them for a short sentence.

    rows: the current character (query); columns: the characters it attends to (keys)

             0     1     2
            새    가     ␣   sum
    0 새  1.00              1.00
    1 가  0.62  0.38        1.00
    2 ␣   0.10  0.20  0.70  1.00

The masked future (above the diagonal) is left blank; the last column is each row's sum.
`format_matrix` prints any other step (viz/attention_steps.py) the same way, with -inf
as −∞ and the columns of a wide matrix cut to a given number.
"""

import math

import torch

from viz.char_labels import display_width, visible_char
from viz.messages import say


def pad(text: str, width: int, right: bool = False) -> str:
    """Pad ``text`` with spaces to ``width`` terminal columns (on the left if ``right``)."""
    fill = " " * max(0, width - display_width(text))
    return fill + text if right else text + fill


def format_attention_table(weights: torch.Tensor, text: str, decimals: int = 2) -> str:
    """Render one head's (or the head average's) attention weights as a table.

    Args:
        weights: (T, T) attention weights; row i is what character i attends to.
        text: the prompt, T characters; whitespace is shown as ␣, ↵ and →.
        decimals: digits after the decimal point.

    Returns:
        The table, one line per character plus two header lines, without a trailing
        newline. Cells above the diagonal (the masked future) are blank.

    Raises:
        ValueError: if weights is not (len(text), len(text)).
    """
    T = len(text)
    if tuple(weights.shape) != (T, T):
        raise ValueError(
            f"weights must be ({T}, {T}) for a {T}-character text, got {tuple(weights.shape)}"
        )
    labels = [visible_char(c) for c in text]
    cell = decimals + 4  # "1.00" plus room to breathe
    index_width = len(str(T - 1))
    label_width = max(2, *(display_width(s) for s in labels))
    margin = " " * (index_width + 1 + label_width)
    values = weights.detach().double().cpu().tolist()
    lines = [
        margin + "".join(pad(str(j), cell, right=True) for j in range(T)),
        margin + "".join(pad(s, cell, right=True) for s in labels) + pad("sum", cell, right=True),
    ]
    for i, row in enumerate(values):
        cells = [f"{v:.{decimals}f}".rjust(cell) for v in row[: i + 1]]
        blanks = " " * (cell * (T - i - 1))
        total = f"{sum(row):.{decimals}f}".rjust(cell)
        prefix = f"{i:>{index_width}} " + pad(labels[i], label_width)
        lines.append(prefix + "".join(cells) + blanks + total)
    return "\n".join(lines)


def format_number(value: float, decimals: int) -> str:
    """``value`` with ``decimals`` digits after the point (Python's rounding: half to
    even); -inf, the causal mask's value, as −∞."""
    if value == -math.inf:
        return "−∞"
    return f"{value:.{decimals}f}"


def format_matrix(
    values: torch.Tensor,
    row_labels: list[str],
    column_labels: list[str] | None = None,
    decimals: int = 2,
    max_columns: int = 0,
    lang: str = "en",
) -> str:
    """Render a (rows, columns) step of attention as a table: one row per character.

    Args:
        values: (rows, columns) tensor, rows = len(row_labels).
        row_labels: the visible label of each row's character.
        column_labels: labels under the column numbers (the characters of a T × T
            matrix), or None for plain column numbers (channels of a T × d_k one).
        decimals: digits after the decimal point.
        max_columns: show at most this many columns, then say how many are left
            out; 0 shows all.
        lang: "en" or "ko": the language of that note.

    Returns:
        The table, without a trailing newline.

    Raises:
        ValueError: if values is not 2-D with one row per label, or max_columns < 0.
    """
    if values.dim() != 2 or values.size(0) != len(row_labels):
        raise ValueError(f"values must be ({len(row_labels)}, columns), got {tuple(values.shape)}")
    if max_columns < 0:
        raise ValueError(f"max_columns must be >= 0 (0: all), got {max_columns}")
    n_columns = values.size(1)
    shown = n_columns if max_columns == 0 else min(n_columns, max_columns)
    rows = values.detach().double().cpu()[:, :shown].tolist()
    cells = [[format_number(v, decimals) for v in row] for row in rows]
    cell = max(decimals + 4, *(len(c) + 1 for row in cells for c in row))
    if column_labels is not None:  # words (viz/word_tables.py) are wider than numbers
        cell = max(cell, *(display_width(s) + 1 for s in column_labels[:shown]))
    index_width = len(str(len(row_labels) - 1))
    label_width = max(2, *(display_width(s) for s in row_labels))
    margin = " " * (index_width + 1 + label_width)
    lines = [margin + "".join(pad(str(j), cell, right=True) for j in range(shown))]
    if column_labels is not None:
        lines.append(margin + "".join(pad(s, cell, right=True) for s in column_labels[:shown]))
    for i, row in enumerate(cells):
        prefix = f"{i:>{index_width}} " + pad(row_labels[i], label_width)
        lines.append(prefix + "".join(c.rjust(cell) for c in row))
    if shown < n_columns:
        more = say("cli.more_columns", lang, more=n_columns - shown, total=n_columns)
        lines.append(f"{margin}  {more}")
    return "\n".join(lines)


def format_steps(
    steps: list, text: str, decimals: int = 2, max_columns: int = 16, lang: str = "en"
) -> str:
    """Every step of one head as text, in the chapters' order: a heading per step (its
    number, title, formula, the code that computes it, its shape), then its table.

    Args:
        steps: `viz.attention_steps.Step` objects, from `attention_steps`.
        text: the prompt, one character per row.
        decimals: digits after the decimal point.
        max_columns: columns shown of a wide table (X has n_embd); 0 shows all.
        lang: "en" or "ko": the language of the titles (viz/page/messages.json).

    Raises:
        ValueError: if a step's rows do not match the text, or max_columns < 0.
    """
    labels = [visible_char(c) for c in text]
    parts = []
    for step in steps:
        rows, columns = step.values.shape
        characters = labels if step.columns_are_characters else None
        title = say("cli.step", lang, chapter=step.chapter, title=step.title)
        parts.append(
            f"{title}\n"
            f"  {say(step.formula, lang)}    ({rows} × {columns}; {step.code})\n"
            + format_matrix(step.values, labels, characters, decimals, max_columns, lang)
        )
    return "\n\n".join(parts)
