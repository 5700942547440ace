"""Streamed preparation: a corpus's text -> its vocabulary and a file of token ids,
in memory that does not grow with the corpus.

Two passes over the text (`data.decoding.CorpusText`), one piece at a time:

1. count: each piece's code points (its UTF-32 encoding, as a numpy array) are
   counted with ``np.bincount`` into one table of per-code-point counts; the
   vocabulary is every code point counted, the corpus's length their sum.
2. write: each piece is mapped to token ids by the vocabulary's lookup table
   (`data.tokenizer.CharTokenizer.encode_normalized`) and appended to the token file.

Memory is a few copies of one piece (1 MB of text by default) plus the 1,114,112-entry
count table, whatever the corpus's size.
"""

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from tqdm import tqdm

from data.decoding import CorpusText
from data.errors import CorpusError
from data.sources import shown
from data.tokenizer import CharTokenizer

UNICODE_CODE_POINTS = 0x110000
PROGRESS_MIN_BYTES = 32 << 20  # smaller corpora prepare in a second or two: no bar


def count_code_points(text: CorpusText) -> np.ndarray:
    """Pass 1: (UNICODE_CODE_POINTS,) int64 counts, entry c how often code point c
    occurs in the corpus.

    Raises:
        CorpusError: from reading the text (unreadable file, invalid UTF-8).
    """
    counts = np.zeros(UNICODE_CODE_POINTS, dtype=np.int64)
    for piece in text:
        codepoints = np.frombuffer(piece.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        piece_counts = np.bincount(codepoints)  # as long as the piece's largest code point
        counts[: len(piece_counts)] += piece_counts
    return counts


def write_token_ids(text: CorpusText, tokenizer: CharTokenizer, path: Path) -> int:
    """Pass 2: write the corpus's token ids (``tokenizer.dtype``, native byte order)
    to ``path``; returns how many.

    Raises:
        CorpusError: if a character is not in the vocabulary, which means a file
            changed since pass 1.
        OSError: if the file cannot be written.
    """
    written = 0
    with open(path, "wb") as f:
        for piece in text:
            try:
                ids = tokenizer.encode_normalized(piece)
            except CorpusError:
                raise CorpusError(
                    f"{shown(text.sources.given)} changed while it was being prepared (a character "
                    "appeared that the first pass did not see); run again once it is written"
                ) from None
            f.write(ids.tobytes())
            written += len(ids)
    return written


def prepare_tokens(
    text: CorpusText, path: Path, progress: bool = False
) -> tuple[CharTokenizer, int]:
    """Both passes: find the vocabulary, then write every token id to ``path``.

    Args:
        text: the corpus's text (its ``on_bytes`` is set here for the progress bar).
        path: the token file to write.
        progress: show a tqdm bar of bytes read per pass (for corpora of 32 MB and more).

    Returns:
        (tokenizer, number of tokens).

    Raises:
        CorpusError: for an unreadable, non-UTF-8 (strict) or empty corpus, or one
            that changed during preparation.
        OSError: if the token file cannot be written.
    """
    total = text.sources.total_bytes
    show = progress and total >= PROGRESS_MIN_BYTES
    with bytes_bar(show, total, "pass 1/2: counting characters") as text.on_bytes:
        counts = count_code_points(text)
    n_tokens = int(counts.sum())
    if n_tokens == 0:
        raise CorpusError(
            f"{shown(text.sources.given)} is empty: give data.path a text with content"
        )
    tokenizer = CharTokenizer.from_counts(counts, text.normalization)
    with bytes_bar(show, total, "pass 2/2: writing token ids") as text.on_bytes:
        written = write_token_ids(text, tokenizer, path)
    text.on_bytes = None
    if written != n_tokens:
        raise CorpusError(
            f"{shown(text.sources.given)} changed while it was being prepared ({n_tokens:,} "
            f"characters, then {written:,}); run again once it is written"
        )
    return tokenizer, n_tokens


@contextlib.contextmanager
def bytes_bar(show: bool, total: int, description: str) -> Iterator[Callable[[int], None] | None]:
    """A tqdm bar of bytes read, closed on leaving; yields its update function, or
    None when ``show`` is False."""
    if not show:
        yield None
        return
    with tqdm(total=total, desc=description, unit="B", unit_scale=True) as bar:
        yield bar.update
