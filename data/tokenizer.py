"""Character tokenizer: each distinct character (Unicode code point) is one token."""

import numpy as np

from data.errors import CorpusError
from data.normalization import continues_cluster, known_after_normalization, normalize_text

UINT16_MAX_SYMBOLS = 65_535
KNOWN_CHARACTERS_SHOWN = 80  # an error lists this many of the vocabulary's characters


def list_characters(chars: list[str], limit: int) -> str:
    """Up to ``limit`` characters for a message, one space between each, so that no two
    display as one: a character that would join its neighbour or not show as itself
    (conjoining Hangul jamo, combining marks, spaces, control and format characters)
    is written as its code point ("U+1112 U+1161", not a 하 that the list does not
    hold). 'a b U+000A U+0301 ... and 20 more'."""
    shown = " ".join(_character_shown(c) for c in chars[:limit])
    return shown + (f" ... and {len(chars) - limit} more" if len(chars) > limit else "")


def _character_shown(char: str) -> str:
    code = ord(char)
    leading_jamo = 0x1100 <= code <= 0x115F or 0xA960 <= code <= 0xA97F  # join a vowel
    if char.isspace() or not char.isprintable() or leading_jamo or continues_cluster(char):
        return f"U+{code:04X}"
    return char


class CharTokenizer:
    """Maps characters to token ids and back. A corpus's vocabulary is the sorted set of
    its distinct characters, so id order is code-point order; a model started from
    another run's (train.init_from) keeps its parent's ids and numbers the characters
    its corpus added after them (`training.init_from`), so its list is not sorted.

    Text is put in the corpus's Unicode normalisation form before it is encoded (see
    `data.normalization`), so a prompt typed as NFC matches a corpus stored as NFD
    and the other way round.

    Args:
        chars: the vocabulary in id order: single characters, no duplicates.
        normalization: the corpus's `data.normalization` ("nfc", ..., or "none").

    Raises:
        ValueError: if an entry is not exactly one character, a character is
            repeated, or the normalization is unknown.
    """

    def __init__(self, chars: list[str], normalization: str = "none"):
        if any(len(c) != 1 for c in chars):
            raise ValueError("every vocabulary entry must be exactly one character")
        if len(set(chars)) != len(chars):
            raise ValueError("the vocabulary must not repeat a character")
        normalize_text("", normalization)  # rejects an unknown value
        self.chars = list(chars)
        self.normalization = normalization
        # Encoding is one table lookup per character: entry c is the id of code point
        # c, or vocab_size (not an id) for a character outside the vocabulary; the
        # last entry catches every code point above the largest known one.
        largest = max(map(ord, self.chars), default=0)
        self._ids = np.full(largest + 2, self.vocab_size, dtype=self.dtype)
        self._ids[[ord(c) for c in self.chars]] = np.arange(self.vocab_size)

    @classmethod
    def from_text(cls, text: str, normalization: str = "none") -> "CharTokenizer":
        """Build the vocabulary from every distinct character of ``text``, which is
        already in the ``normalization`` form."""
        return cls(sorted(set(text)), normalization)

    @classmethod
    def from_counts(cls, counts: np.ndarray, normalization: str = "none") -> "CharTokenizer":
        """Build the vocabulary from per-code-point counts (entry c: how often code
        point c occurs, e.g. from `np.bincount`): every code point counted at least once."""
        return cls([chr(c) for c in np.flatnonzero(counts).tolist()], normalization)

    def normalize(self, text: str) -> str:
        """``text`` in this vocabulary's normalisation form: what `encode` encodes,
        so that the characters shown for a prompt are the ones the model sees."""
        return normalize_text(text, self.normalization)

    @property
    def vocab_size(self) -> int:
        """Number of tokens."""
        return len(self.chars)

    @property
    def dtype(self) -> np.dtype:
        """Smallest unsigned dtype for token arrays: uint16 up to 65,535 symbols, else uint32."""
        return np.dtype(np.uint16 if self.vocab_size <= UINT16_MAX_SYMBOLS else np.uint32)

    def encode(self, text: str) -> np.ndarray:
        """Text -> (len(normalize(text)),) array of token ids in ``self.dtype``.

        Raises:
            CorpusError: listing every character that is not in the vocabulary, with
                its code point and first position, and the known characters; and, when
                the text would be known in another normalisation form, saying so.
        """
        return self.encode_normalized(self.normalize(text))

    def encode_normalized(self, text: str) -> np.ndarray:
        """`encode` for text already in this vocabulary's normalisation form (the
        corpus preparation's pieces): (len(text),) ids in ``self.dtype``.

        Raises:
            CorpusError: as `encode`.
        """
        codepoints = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        ids = np.take(self._ids, codepoints, mode="clip")  # above the table: its last entry
        unknown = ids == self.vocab_size
        if unknown.any():
            raise CorpusError(self._unknown_message(text, np.flatnonzero(unknown)))
        return ids

    def ids_in(self, other: "CharTokenizer") -> np.ndarray:
        """(vocab_size,) int64 array: entry i is the id in ``other`` of this
        vocabulary's i-th character, to read token ids of one corpus as another
        vocabulary's (a model scored on a corpus it was not trained on).

        Raises:
            CorpusError: listing every character (with its code point) ``other`` lacks.
        """
        index = {c: i for i, c in enumerate(other.chars)}
        missing = [c for c in self.chars if c not in index]
        if missing:
            listed = ", ".join(f"{c!r} (U+{ord(c):04X})" for c in missing[:20])
            more = f" and {len(missing) - 20} more" if len(missing) > 20 else ""
            raise CorpusError(
                f"{len(missing)} character(s) are not in the model's vocabulary of "
                f"{other.vocab_size}: {listed}{more}; the model has no token for them, so "
                "it can only be scored on text written with its own characters"
            )
        return np.array([index[c] for c in self.chars], dtype=np.int64)

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
        message = (
            f"{len(first_seen)} character(s) not in the model's vocabulary: {listed}. "
            f"Use only characters the model was trained on ({self.vocab_size} known: "
            f"{list_characters(self.chars, KNOWN_CHARACTERS_SHOWN)})"
        )
        forms = known_after_normalization(text, set(self.chars))
        if forms:
            advised = "nfc" if self.normalization == "none" else forms[0]
            message += (
                f". The text would be known after Unicode normalisation to "
                f"{' or '.join(f.upper() for f in forms)} (the same letters, stored as other "
                f"code points); this model's data.normalization is {self.normalization!r}. "
                f"Retype the text in that form, or train with data.normalization="
                f"{advised} so that both forms are read alike"
            )
        return message
