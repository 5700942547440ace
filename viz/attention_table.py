"""Attention weights as a text table, the way a textbook prints them for a short sentence.

    rows: the current character (query); columns: the characters it attends to (keys)

             0     1     2
            새    가     ␣   sum
    0 새  1.00              1.00
    1 가  0.62  0.38        1.00
    2 ␣   0.10  0.20  0.70  1.00

The masked future (above the diagonal) is left blank; the last column is each row's sum.
"""

import torch

from viz.char_labels import display_width, visible_char


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
