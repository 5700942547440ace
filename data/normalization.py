"""Unicode normalisation: one spelling per character, so that a prompt typed on one
system matches a corpus saved on another.

The same text can be stored as different code points: "새" is one precomposed syllable
(U+C0C8, the NFC form most systems type) or two conjoining jamo (U+1109 U+1162, the
NFD form macOS file names and some editors write). A character-level model treats them
as different tokens, so the corpus and every text given to the model later (prompts,
prompt files, stop strings) must be normalised the same way (Unicode Standard Annex
#15). `data.normalization` chooses the form; it is recorded in the checkpoint.

Cutting text into pieces (a prompt cropped to a length, a corpus read in chunks) must
not split a character that normalisation would join: `safe_cut` finds a boundary
that keeps combining marks and Hangul jamo with their base character.
"""

import typing
import unicodedata

# The accepted values of data.normalization: a Unicode form, or "none" (keep the code
# points exactly as the file has them).
Normalization = typing.Literal["nfc", "nfkc", "nfd", "nfkd", "none"]
NORMALIZATIONS: tuple[str, ...] = typing.get_args(Normalization)


def normalize_text(text: str, normalization: str) -> str:
    """Return ``text`` in the given normalisation form ("none": unchanged).

    NFC composes (e → é with a combining accent becomes one code point; Hangul jamo
    become syllables), NFD decomposes; the K forms also fold compatibility variants
    (full-width letters, ligatures) into their plain characters.

    Raises:
        ValueError: for a value outside NORMALIZATIONS.
    """
    if normalization == "none":
        return text
    if normalization not in NORMALIZATIONS:
        raise ValueError(
            f"unknown normalization {normalization!r}; use one of {', '.join(NORMALIZATIONS)}"
        )
    form = normalization.upper()
    # The quick check is much faster than normalising text that already is normalised.
    return text if unicodedata.is_normalized(form, text) else unicodedata.normalize(form, text)


def continues_cluster(char: str) -> bool:
    """True if ``char`` can only continue a character begun before it: a combining
    mark (accents, vowel signs, variation selectors), a Hangul medial vowel or final
    consonant jamo (U+1160-U+11FF, U+D7B0-U+D7FF), or a compatibility character that
    the K forms turn into one (the half-width katakana voiced sound marks U+FF9E-F,
    the half-width and compatibility Hangul vowels). Text that starts with one was
    cut inside a character."""
    code = ord(char)
    if (
        unicodedata.combining(char) > 0
        or unicodedata.category(char) in ("Mn", "Mc", "Me")
        or 0x1160 <= code <= 0x11FF
        or 0xD7B0 <= code <= 0xD7FF
    ):
        return True
    decomposed = unicodedata.normalize("NFKD", char)
    return decomposed[0] != char and continues_cluster(decomposed[0])


def joins_previous(previous: str, char: str) -> bool:
    """True if ``char`` belongs to the same user-perceived character as ``previous``:
    it continues a cluster (`continues_cluster`), composes with ``previous`` under NFC
    (a leading jamo and a vowel), or is the line feed of a CRLF pair (which becomes
    one newline)."""
    if previous == "\r" and char == "\n":
        return True
    return continues_cluster(char) or len(unicodedata.normalize("NFC", previous + char)) < 2


def safe_cut(text: str, n: int) -> int:
    """The largest k <= n such that ``text[:k]`` and ``text[k:]`` do not split a
    character (see `joins_previous`); 0 if there is none.

    Example: in NFD, "새가" is the four code points ᄉ ᅢ ᄀ ᅡ; safe_cut(text, 3) is
    2, so a three-code-point crop keeps "새" whole instead of leaving a lone ᄀ.
    """
    k = min(max(n, 0), len(text))
    while 0 < k < len(text) and joins_previous(text[k - 1], text[k]):
        k -= 1
    return k


def whole_cut(text: str, n: int) -> int:
    """Where to cut ``text`` to keep about ``n`` code points without splitting a
    character: `safe_cut` when it keeps any, else the end of the first character (a
    decomposed syllable is 2 or 3 code points, so n=1 keeps the whole syllable)."""
    k = safe_cut(text, n)
    if k == 0:
        k = min(max(n, 1), len(text))
        while k < len(text) and joins_previous(text[k - 1], text[k]):
            k += 1
    return k


def known_after_normalization(text: str, vocabulary: set[str]) -> list[str]:
    """The normalisation forms under which every character of ``text`` is in
    ``vocabulary`` (e.g. ["nfd", "nfkd"] for a syllable typed in NFC and a model whose
    vocabulary holds decomposed jamo), for error messages."""
    return [
        form
        for form in NORMALIZATIONS
        if form != "none" and set(normalize_text(text, form)) <= vocabulary
    ]
