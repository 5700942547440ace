"""How one character of a prompt is shown on an axis or in a table.

Whitespace and control characters are invisible when printed as they are, so a
learner could not tell which row is the space; they get a visible stand-in instead.
"""

import unicodedata

# Stand-ins chosen from symbols that matplotlib's bundled DejaVu Sans can draw.
VISIBLE_STAND_INS = {" ": "␣", "\n": "↵", "\t": "→"}


def code_point_label(ch: str) -> str:
    """'새' -> 'U+C0C8': a label any font can draw."""
    return f"U+{ord(ch):04X}"


def visible_char(ch: str) -> str:
    """A printable label for one character.

    Space, newline and tab become ␣, ↵ and →; other control or format characters
    (Unicode category C*) become their code point; anything else is itself.

    Raises:
        ValueError: if ``ch`` is not exactly one character.
    """
    if len(ch) != 1:
        raise ValueError(f"expected one character, got {ch!r}")
    if ch in VISIBLE_STAND_INS:
        return VISIBLE_STAND_INS[ch]
    if unicodedata.category(ch).startswith("C"):
        return code_point_label(ch)
    return ch


def display_width(text: str) -> int:
    """Terminal columns ``text`` takes: 2 for wide East Asian characters such as
    Hangul, 0 for combining marks, 1 otherwise."""
    width = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        width += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return width
