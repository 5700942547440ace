"""Reading a corpus's files as one text, in pieces of bounded size.

Each file is decoded as UTF-8 with an incremental decoder (a character split between
two reads is completed by the next), its leading byte-order mark dropped, and its line
endings made '\\n' (CRLF and lone CR). The files' texts are joined by the separator
(``data.separator``) and put in the corpus's Unicode form (``data.normalization``).

The text comes out in pieces of about ``chunk_bytes`` characters, cut only where
`data.normalization.safe_cut` allows (never inside a character, a CRLF pair or a
cluster that normalisation would join), so the pieces' concatenation is exactly the
text one piece would give, whatever the chunk size: a small file is simply one piece.

A file that looks binary is refused, whatever ``data.decode_errors`` says: one with a
NUL byte (no UTF-8 text has one; images, archives and UTF-16 text do), or one whose
bytes are more than BINARY_INVALID_SHARE (10%) invalid UTF-8. A Latin-1 file of
accented prose has a few percent of invalid bytes, a PNG around 40%, random bytes
half, so the line keeps text in a wrong encoding trainable with ``replace`` while an
image is not trained on as U+FFFD soup.
"""

import codecs
import threading
from collections.abc import Callable, Iterator

from data.errors import CorpusError
from data.normalization import normalize_text, safe_cut
from data.sources import CorpusSources, SourceFile, shown, unreadable

# Per read and per piece: bounds memory and amortises numpy calls; a piece this size
# stays in the CPU caches (dev/experiments.md compares piece sizes).
DEFAULT_CHUNK_BYTES = 1 << 20
BOM = "\ufeff"
COUNTING_REPLACE = "mini-gpt-counting-replace"
BINARY_INVALID_SHARE = 0.1  # more invalid UTF-8 than this, as a share of a file's bytes: binary

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
        replaced_before = getattr(_replaced, "count", 0)
        first = True
        held_cr = ""  # a CR at a piece's end may be the first half of a CRLF
        try:
            with open(source.path, "rb") as f:
                while True:
                    raw = f.read(self.chunk_bytes)
                    final = not raw
                    if b"\0" in raw:
                        where = f"a NUL byte at byte offset {fed + raw.index(0)}"
                        raise _looks_binary(source, where, self.sources)
                    buffered = len(decoder.getstate()[0])
                    try:
                        text = decoder.decode(raw, final=final)
                    except UnicodeDecodeError as e:
                        raise _not_utf8(source, e, fed - buffered, self.sources) from None
                    fed += len(raw)
                    if final:
                        replaced = getattr(_replaced, "count", 0) - replaced_before
                        if replaced > BINARY_INVALID_SHARE * fed:
                            where = _invalid_share(replaced, fed)
                            raise _looks_binary(source, where, self.sources)
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


def _not_utf8(
    source: SourceFile, error: UnicodeDecodeError, offset: int, sources: CorpusSources
) -> CorpusError:
    """The error for invalid UTF-8 at byte ``offset + error.start`` of a file (read
    strictly): the way out depends on how much of the file is invalid, counted here.
    A file that looks binary gets `_looks_binary`'s advice, never ``replace``."""
    bad = error.object[error.start]
    invalid, size = _count_invalid_bytes(source)
    if invalid > BINARY_INVALID_SHARE * size:
        return _looks_binary(source, _invalid_share(invalid, size), sources)
    return CorpusError(
        f"{shown(source.path)} is not valid UTF-8: byte 0x{bad:02x} at byte offset "
        f"{offset + error.start}. {_invalid_share(invalid, size).capitalize()}. Convert the "
        "file to UTF-8, set data.decode_errors=replace to replace bad bytes with U+FFFD, "
        "or leave the file out with data.include"
    )


def _invalid_share(invalid: int, size: int) -> str:
    """'2 of its 1,024 bytes (0.2%) are not valid UTF-8'."""
    return f"{invalid:,} of its {size:,} bytes ({invalid / max(size, 1):.1%}) are not valid UTF-8"


def _count_invalid_bytes(source: SourceFile) -> tuple[int, int]:
    """(invalid UTF-8 bytes, all bytes) of a file, read again in blocks; (0, 0) if it
    cannot be read (the caller is reporting another problem already)."""
    before = getattr(_replaced, "count", 0)
    decoder = codecs.getincrementaldecoder("utf-8")(COUNTING_REPLACE)
    size = 0
    try:
        with open(source.path, "rb") as f:
            while block := f.read(DEFAULT_CHUNK_BYTES):
                decoder.decode(block)
                size += len(block)
        decoder.decode(b"", final=True)
    except OSError:
        return 0, 0
    invalid = _replaced.count - before
    _replaced.count = before  # this count is not the pass's
    return invalid, size


def _looks_binary(source: SourceFile, evidence: str, sources: CorpusSources) -> CorpusError:
    """The error for a file that is not text (see the module docstring), with the ways
    out: leave it out of the corpus, or convert text in another encoding."""
    leave_out = (
        "point data.path at the text you meant"
        if not sources.include  # a single file: data.include does not apply
        else "leave it out with data.include (e.g. data.include='*.txt' for the text files only)"
    )
    return CorpusError(
        f"{shown(source.path)} looks like a binary file (an image, an archive, a "
        f"program), not text: {evidence}. Training on it would teach bytes, not "
        f"language, so it is refused whatever data.decode_errors says: {leave_out}. If "
        "it is text in another encoding, convert it to UTF-8 first (UTF-16 text has NUL "
        "bytes: iconv -f UTF-16 -t UTF-8 in.txt > out.txt)"
    )
