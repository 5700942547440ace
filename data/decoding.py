"""Reading a corpus's files as one text, in pieces of bounded size.

Each file is decoded as UTF-8 with an incremental decoder (a character split between
two reads is completed by the next), its leading byte-order mark dropped, and its line
endings made '\\n' (CRLF and lone CR). The files' texts are joined by the separator
(``data.separator``) and put in the corpus's Unicode form (``data.normalization``).

The text comes out in pieces of about ``chunk_bytes`` characters, cut only where
`data.normalization.safe_cut` allows (never inside a character, a CRLF pair or a
cluster that normalisation would join), so the pieces' concatenation is exactly the
text one piece would give, whatever the chunk size: a small file is simply one piece.
"""

import codecs
import threading
from collections.abc import Callable, Iterator

from data.errors import CorpusError
from data.normalization import normalize_text, safe_cut
from data.sources import CorpusSources, SourceFile, shown, unreadable

# Per read and per piece: bounds memory and amortises numpy calls; a piece this size
# stays in the CPU caches (docs/experiments.md compares piece sizes).
DEFAULT_CHUNK_BYTES = 1 << 20
BOM = "\ufeff"
COUNTING_REPLACE = "mini-gpt-counting-replace"

_replaced = threading.local()  # bytes replaced so far by this thread's decoder


def _count_and_replace(error: UnicodeDecodeError) -> tuple[str, int]:
    """Python's "replace" (one U+FFFD per invalid sequence), counting the bytes."""
    _replaced.count = getattr(_replaced, "count", 0) + error.end - error.start
    return "\ufffd", error.end


codecs.register_error(COUNTING_REPLACE, _count_and_replace)


def normalize_newlines(text: str) -> str:
    """Turn Windows (CRLF) and old Mac (lone CR) line endings into '\\n'."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


class CorpusText:
    """The text of a corpus's files, decoded, joined and normalised, as an iterable
    of pieces (iterate it once per pass; each pass reads the files again).

    Args:
        sources: the files, in order.
        separator: text put between two files (its CRLF / CR become '\\n' too).
        decode_errors: "strict" (invalid UTF-8 is an error naming the file and byte
            offset) or "replace" (each invalid sequence becomes U+FFFD, counted in
            ``replaced_bytes``).
        normalization: the Unicode form, see `data.normalization`.
        chunk_bytes: bytes per read, and about the characters per piece.
        on_bytes: called with the number of bytes after each read (a progress bar).

    Attributes:
        replaced_bytes: invalid bytes replaced during the last complete pass.
    """

    def __init__(
        self,
        sources: CorpusSources,
        separator: str = "\n",
        decode_errors: str = "strict",
        normalization: str = "none",
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        on_bytes: Callable[[int], None] | None = None,
    ):
        if decode_errors not in ("strict", "replace"):
            raise ValueError(f"decode_errors must be strict or replace, got {decode_errors!r}")
        normalize_text("", normalization)  # rejects an unknown form now, not mid-pass
        self.sources = sources
        self.separator = normalize_newlines(separator)
        self.errors = "strict" if decode_errors == "strict" else COUNTING_REPLACE
        self.normalization = normalization
        self.chunk_bytes = max(1, chunk_bytes)
        self.on_bytes = on_bytes
        self.replaced_bytes = 0

    def __iter__(self) -> Iterator[str]:
        """The normalised text in pieces; their concatenation is the whole corpus.

        Raises:
            CorpusError: for an unreadable file, or invalid UTF-8 under "strict".
        """
        _replaced.count = 0
        pending: list[str] = []  # raw text not yet normalised
        pending_chars = 0
        for i, source in enumerate(self.sources.files):
            pieces = self._file_text(source)
            if i > 0:
                pieces = _prepend(self.separator, pieces)
            for piece in pieces:
                pending.append(piece)
                pending_chars += len(piece)
                if pending_chars < self.chunk_bytes:
                    continue
                text = "".join(pending)
                # Keep at least the last character back: whether a cut before it is
                # safe depends on the character after it, not read yet.
                cut = safe_cut(text, len(text) - 1)
                if cut == 0:  # one unbroken cluster so far: read on
                    pending, pending_chars = [text], len(text)
                    continue
                yield normalize_text(text[:cut], self.normalization)
                pending, pending_chars = [text[cut:]], len(text) - cut
        text = "".join(pending)
        if text:
            yield normalize_text(text, self.normalization)
        self.replaced_bytes = _replaced.count

    def _file_text(self, source: SourceFile) -> Iterator[str]:
        """One file's text with its newlines normalised, in pieces.

        Raises:
            CorpusError: if it cannot be read or (strict) is not valid UTF-8.
        """
        decoder = codecs.getincrementaldecoder("utf-8")(self.errors)
        fed = 0  # bytes given to the decoder so far
        first = True
        held_cr = ""  # a CR at a piece's end may be the first half of a CRLF
        try:
            with open(source.path, "rb") as f:
                while True:
                    raw = f.read(self.chunk_bytes)
                    final = not raw
                    buffered = len(decoder.getstate()[0])
                    try:
                        text = decoder.decode(raw, final=final)
                    except UnicodeDecodeError as e:
                        raise _not_utf8(source, e, fed - buffered) from None
                    fed += len(raw)
                    if self.on_bytes is not None and raw:
                        self.on_bytes(len(raw))
                    if first and text:
                        text, first = text.removeprefix(BOM), False
                    text = held_cr + text
                    held_cr = ""
                    if not final and text.endswith("\r"):
                        text, held_cr = text[:-1], "\r"
                    if text:
                        yield normalize_newlines(text)
                    if final:
                        return
        except OSError as e:
            raise unreadable(source.path, e) from None


def _prepend(first: str, pieces: Iterator[str]) -> Iterator[str]:
    """``first``, then the pieces."""
    if first:
        yield first
    yield from pieces


def _not_utf8(source: SourceFile, error: UnicodeDecodeError, offset: int) -> CorpusError:
    """The error for invalid UTF-8 at byte ``offset + error.start`` of a file."""
    bad = error.object[error.start]
    return CorpusError(
        f"{shown(source.path)} is not valid UTF-8: byte 0x{bad:02x} at byte offset "
        f"{offset + error.start}. Convert the file to UTF-8, set "
        "data.decode_errors=replace to replace bad bytes with U+FFFD, or leave the file "
        "out with data.include"
    )
