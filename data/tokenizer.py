"""Character tokenizer: each distinct character (Unicode code point) is one token."""

import numpy as np

from data.errors import CorpusError

UINT16_MAX_SYMBOLS = 65_535


class CharTokenizer:
    """Maps characters to token ids and back; the vocabulary is the sorted set of the
    corpus's distinct characters, so id order is code-point order.

    Args:
        chars: the vocabulary in id order: single characters, sorted, no duplicates.

    Raises:
        ValueError: if an entry is not exactly one character, or the list is not
            strictly increasing (unsorted or repeated).
    """

    def __init__(self, chars: list[str]):
        if any(len(c) != 1 for c in chars):
            raise ValueError("every vocabulary entry must be exactly one character")
        if any(a >= b for a, b in zip(chars, chars[1:], strict=False)):
            raise ValueError("the vocabulary must be sorted, without repeats")
        self.chars = list(chars)
        # Code points in ascending order: encoding is a vectorised binary search.
        self._codepoints = np.array([ord(c) for c in self.chars], dtype=np.uint32)

    @classmethod
    def from_text(cls, text: str) -> "CharTokenizer":
        """Build the vocabulary from every distinct character of ``text``."""
        return cls(sorted(set(text)))

    @property
    def vocab_size(self) -> int:
        """Number of tokens."""
        return len(self.chars)

    @property
    def dtype(self) -> np.dtype:
        """Smallest unsigned dtype for token arrays: uint16 up to 65,535 symbols, else uint32."""
        return np.dtype(np.uint16 if self.vocab_size <= UINT16_MAX_SYMBOLS else np.uint32)

    def encode(self, text: str) -> np.ndarray:
        """Text -> (len(text),) array of token ids in ``self.dtype``.

        Raises:
            CorpusError: listing every character that is not in the vocabulary, with
                its code point and first position, and the known characters.
        """
        codepoints = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        ids = np.searchsorted(self._codepoints, codepoints)
        known = ids < self.vocab_size
        known[known] = self._codepoints[ids[known]] == codepoints[known]
        if not known.all():
            raise CorpusError(self._unknown_message(text, np.flatnonzero(~known)))
        return ids.astype(self.dtype)

    def decode(self, ids) -> str:
        """Token ids (any int sequence, array or 1-D tensor) -> text.

        Raises:
            ValueError: if an id is outside [0, vocab_size).
        """
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            raise ValueError(f"token id out of range [0, {self.vocab_size})")
        return "".join(self.chars[i] for i in ids)

    def _unknown_message(self, text: str, positions: np.ndarray) -> str:
        first_seen: dict[str, int] = {}
        for pos in positions.tolist():
            first_seen.setdefault(text[pos], pos)
        listed = ", ".join(f"{c!r} (U+{ord(c):04X}) at position {p}" for c, p in first_seen.items())
        shown = "".join(self.chars[:80]) + (" ..." if self.vocab_size > 80 else "")
        return (
            f"{len(first_seen)} character(s) not in the model's vocabulary: {listed}. "
            f"Use only characters the model was trained on ({self.vocab_size} known): {shown!r}"
        )
