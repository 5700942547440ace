"""Fonts that can draw a prompt's characters, Hangul above all.

Matplotlib draws text in DejaVu Sans, which it bundles: Latin, Greek and Cyrillic, but
no Hangul, so Korean characters would come out as empty boxes. `text_font` pairs
DejaVu Sans with an installed font that has Hangul (matplotlib takes each glyph from
the first family in the list that has it). When no installed font can draw a
character, that character is labelled by its code point (U+C0C8) and a
`MissingGlyphWarning` says how to install a font: a figure is always produced.

Fonts with Hangul, and how to get one:
    Debian / Ubuntu   sudo apt-get install fonts-nanum       (NanumGothic)
                      sudo apt-get install fonts-noto-cjk    (Noto Sans CJK KR)
    macOS             Apple SD Gothic Neo / AppleGothic come with the system
    Windows           Malgun Gothic comes with the system
"""

import functools
import unicodedata
import warnings
from collections.abc import Iterable
from dataclasses import dataclass

from matplotlib import font_manager
from matplotlib.ft2font import FT2Font

from viz.char_labels import code_point_label, visible_char

BASE_FAMILY = "DejaVu Sans"  # bundled with matplotlib, so it is always there
HANGUL_PROBE = "가한글"  # a font "has Hangul" if it can draw all of these
# Tried first, in this order: complete Hangul coverage and legible at small sizes.
PREFERRED_HANGUL_FAMILIES = (
    "NanumGothic",
    "Noto Sans CJK KR",
    "Noto Sans KR",
    "Apple SD Gothic Neo",
    "AppleGothic",
    "Malgun Gothic",
    "UnDotum",
    "Baekmuk Gulim",
)
INSTALL_HINT = (
    "install a font with Hangul, e.g. `sudo apt-get install fonts-nanum` "
    "(Debian/Ubuntu) or fonts-noto-cjk (README.md, 'Train on your own text')"
)
MAX_LISTED = 8  # characters named in a warning; the rest are counted
# Fonts that map every code point to a placeholder box (matplotlib bundles "Last Resort
# High-Efficiency" as its final fallback): they "have" Hangul but cannot draw it.
PLACEHOLDER_FONT_PREFIXES = ("Last Resort",)


class MissingGlyphWarning(UserWarning):
    """No installed font can draw some characters; they are labelled by code point."""


@dataclass(frozen=True)
class FontFile:
    """One installed font.

    Attributes:
        name: its family name as matplotlib knows it, e.g. "NanumGothic".
        path: the font file.
    """

    name: str
    path: str


@dataclass(frozen=True)
class TextFont:
    """The font families to draw a text with, and what they can draw.

    Attributes:
        families: a matplotlib ``fontfamily`` list, e.g. ("DejaVu Sans", "NanumGothic").
        hangul_font: the font with Hangul in ``families``, or None if none was found.
        coverage: code points at least one of the families can draw.
    """

    families: tuple[str, ...]
    hangul_font: FontFile | None
    coverage: frozenset[int]

    def can_draw(self, text: str) -> bool:
        """True if every character of ``text`` has a glyph in one of the families."""
        return all(ord(c) in self.coverage for c in text)

    def label(self, ch: str) -> str:
        """What to draw for one character: itself (whitespace made visible, see
        `viz.char_labels.visible_char`), or its code point if no family can draw it."""
        shown = visible_char(ch)
        return shown if self.can_draw(shown) else code_point_label(ch)


@functools.cache
def glyphs(path: str) -> frozenset[int]:
    """Code points the font file at ``path`` can draw (empty if it cannot be read)."""
    try:
        return frozenset(FT2Font(path).get_charmap())
    except (OSError, RuntimeError):  # an unreadable font must not stop a plot
        return frozenset()


def matplotlib_fonts() -> list[FontFile]:
    """The fonts in matplotlib's font list (built once and cached by matplotlib)."""
    return [FontFile(f.name, f.fname) for f in font_manager.fontManager.ttflist]


def register_new_system_fonts() -> int:
    """Add system fonts installed after matplotlib cached its font list (it does not
    look again by itself). Returns how many were added."""
    known = {f.fname for f in font_manager.fontManager.ttflist}
    added = 0
    for path in font_manager.findSystemFonts():
        if path in known:
            continue
        try:
            font_manager.fontManager.addfont(path)
            added += 1
        except (OSError, RuntimeError, ValueError):  # not a font matplotlib can read
            continue
    return added


def first_hangul_font(fonts: Iterable[FontFile]) -> FontFile | None:
    """The first of ``fonts`` that can draw Hangul, trying PREFERRED_HANGUL_FAMILIES
    first (in their order), then the others in the order given; placeholder fonts
    never count. None if none can."""
    rank = {name: i for i, name in enumerate(PREFERRED_HANGUL_FAMILIES)}
    real = [f for f in fonts if not f.name.startswith(PLACEHOLDER_FONT_PREFIXES)]
    # Regular before bold within a family: the family name is what matplotlib is given,
    # but the coverage check reads the file.
    ordered = sorted(real, key=lambda f: (rank.get(f.name, len(rank)), "bold" in f.path.lower()))
    probe = {ord(c) for c in HANGUL_PROBE}
    return next((f for f in ordered if probe <= glyphs(f.path)), None)


@functools.cache
def installed_hangul_font() -> FontFile | None:
    """The installed font with Hangul that figures use (looked up once per process)."""
    found = first_hangul_font(matplotlib_fonts())
    if found is None and register_new_system_fonts():
        found = first_hangul_font(matplotlib_fonts())
    return found


def find_hangul_font(fonts: Iterable[FontFile] | None = None) -> FontFile | None:
    """A font that can draw Hangul.

    Args:
        fonts: candidates to choose from; None means the installed fonts (see
            `installed_hangul_font`). Tests pass an empty list to act as a machine
            without one.

    Returns:
        The chosen font, or None if no candidate has Hangul.
    """
    return installed_hangul_font() if fonts is None else first_hangul_font(fonts)


def text_font(text: str, fonts: Iterable[FontFile] | None = None) -> TextFont:
    """Families that draw ``text`` as well as the installed fonts allow.

    Args:
        text: the characters that will be drawn (e.g. a prompt).
        fonts: candidate fonts with Hangul; None means the installed fonts.

    Returns:
        A `TextFont`: DejaVu Sans, plus a Hangul font when one is found.

    Warns:
        MissingGlyphWarning: if some characters of ``text`` cannot be drawn; they
            will be labelled by code point.
    """
    base_path = font_manager.findfont(font_manager.FontProperties(family=BASE_FAMILY))
    hangul = find_hangul_font(fonts)
    families = (BASE_FAMILY,) if hangul is None else (BASE_FAMILY, hangul.name)
    coverage = glyphs(base_path) | (glyphs(hangul.path) if hangul else frozenset())
    font = TextFont(families, hangul, coverage)
    missing = list(dict.fromkeys(c for c in text if not font.can_draw(visible_char(c))))
    if missing:
        named = ", ".join(f"{c} ({code_point_label(c)})" for c in missing[:MAX_LISTED])
        more = f" and {len(missing) - MAX_LISTED} more" if len(missing) > MAX_LISTED else ""
        has_hangul = any(unicodedata.name(c, "").startswith("HANGUL") for c in missing)
        hint = INSTALL_HINT if has_hangul else "install a font that has them"
        warnings.warn(
            f"no installed font can draw {named}{more}; the figure labels them by code "
            f"point. To see the characters, {hint}.",
            MissingGlyphWarning,
            stacklevel=2,
        )
    return font
