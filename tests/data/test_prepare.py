"""Streamed preparation equals one-piece preparation exactly; memory-mapped batches
equal in-memory batches; the splits are where they should be."""

import tempfile
import unicodedata
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from data import BatchSampler, CorpusError, evaluation_windows, prepare_corpus
from data.batches import EvaluationWindows
from data.corpus import split_sizes
from data.decoding import CorpusText, normalize_newlines
from data.sources import find_sources

ONE_PIECE = 1 << 30

# Pieces where a careless cut changes the text: CRLF pairs and lone CR / LF, combining
# marks after a base, Hangul jamo that compose into a syllable, a BOM, multi-byte UTF-8
# of every length, and compatibility characters that the K forms turn into something
# that composes (a half-width voiced sound mark after katakana, compatibility and
# half-width Hangul vowels). Texts are made of these pieces, so that such neighbours
# are common, or of any characters at all but NUL (a file holding one is refused as binary).
TRICKY = [
    "e", "\r\n", "\r", "\n", "e\u0301\u0327", "\u00e9", "\u1100\u1161\u11a8", "\uac00\u11a8",
    "\u0915\u093f", "\ufeff", "\U0001f600", "\u30ab\uff9e", "\u1100\u314f", "\u1100\uffc2",
]  # fmt: skip
any_text = st.text(st.characters(codec="utf-8", exclude_characters="\0"), max_size=30)
texts = st.lists(st.sampled_from(TRICKY), max_size=20).map("".join) | any_text


def write_files(folder: Path, file_texts: list[str], bom: bool) -> None:
    for i, text in enumerate(file_texts):
        (folder / f"f{i}.txt").write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())


def expected_text(file_texts: list[str], separator: str, form: str, bom: bool = False) -> str:
    """The corpus as the rules define it, computed the plain way: each file's leading
    BOM dropped (the one written before the text if ``bom``), newlines normalised,
    files joined by the separator, the whole put in the Unicode form."""
    texts = [t if bom else t.removeprefix("\ufeff") for t in file_texts]
    joined = normalize_newlines(separator).join(normalize_newlines(t) for t in texts)
    return joined if form == "none" else unicodedata.normalize(form.upper(), joined)


@settings(max_examples=150, deadline=None)
@given(
    file_texts=st.lists(texts, min_size=1, max_size=3),
    chunk_bytes=st.integers(1, 6),
    form=st.sampled_from(["nfc", "nfd", "nfkc", "nfkd", "none"]),
    separator=st.sampled_from(["\n", "", "\r\n", "\u0301"]),
    bom=st.booleans(),
)
def test_streamed_text_equals_one_piece_on_random_unicode(
    file_texts, chunk_bytes, form, separator, bom
):
    with tempfile.TemporaryDirectory() as folder:
        write_files(Path(folder), file_texts, bom)
        sources = find_sources(folder)
        streamed = list(CorpusText(sources, separator, "strict", form, chunk_bytes))
        whole = list(CorpusText(sources, separator, "strict", form, ONE_PIECE))
    assert len(whole) <= 1
    expected = expected_text(file_texts, separator, form, bom)
    assert "".join(streamed) == "".join(whole) == expected


# Bytes that are mostly text: a few invalid bytes in ASCII, or anything at all.
mostly_text = st.lists(
    st.sampled_from([b"a", b"b c", b"\n", b"\xc3\xa9", b"\xff", b"\xe9", b"\0"]), max_size=40
).map(b"".join)


@settings(max_examples=80, deadline=None)
@given(raw=st.binary(max_size=80) | mostly_text, chunk_bytes=st.integers(1, 7))
def test_replaced_bytes_are_the_same_in_any_chunking(raw, chunk_bytes):
    """Whatever the read size, the same bytes are replaced and counted, and the same
    files are refused as binary: those with a NUL byte or over 10% invalid bytes."""
    # surrogateescape turns each invalid byte into one lone surrogate: a count of its own.
    escaped = raw.decode("utf-8", "surrogateescape")
    invalid_bytes = sum(0xDC80 <= ord(c) <= 0xDCFF for c in escaped)
    binary = b"\0" in raw or invalid_bytes > 0.1 * len(raw)
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "bytes.bin").write_bytes(raw)
        sources = find_sources(folder)
        streamed = CorpusText(sources, "\n", "replace", "none", chunk_bytes)
        whole = CorpusText(sources, "\n", "replace", "none", ONE_PIECE)
        if binary:
            for text in (streamed, whole):
                with pytest.raises(CorpusError, match="bytes.bin looks like a binary file"):
                    "".join(text)
            return
        streamed_text, whole_text = "".join(streamed), "".join(whole)
    reference = normalize_newlines(raw.decode("utf-8", "replace").removeprefix("\ufeff"))
    assert streamed_text == whole_text == reference
    assert streamed.replaced_bytes == whole.replaced_bytes == invalid_bytes


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    file_texts=st.lists(texts, min_size=1, max_size=3),
    chunk_bytes=st.integers(1, 9),
    form=st.sampled_from(["nfc", "nfd"]),
)
def test_prepared_arrays_do_not_depend_on_the_chunk_size(file_texts, chunk_bytes, form):
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        (folder / "text").mkdir()
        write_files(folder / "text", file_texts, bom=False)
        expected = expected_text(file_texts, "\n", form)
        if not expected:
            with pytest.raises(CorpusError, match="is empty"):
                prepare_corpus(folder / "text", 0.5, folder / "a", chunk_bytes=chunk_bytes)
            return
        small = prepare_corpus(
            folder / "text", 0.5, folder / "a", normalization=form, chunk_bytes=chunk_bytes
        )
        large = prepare_corpus(folder / "text", 0.5, folder / "b", normalization=form)
        assert small.tokenizer.chars == large.tokenizer.chars
        for a, b in [(small.train_ids, large.train_ids), (small.val_ids, large.val_ids)]:
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)
        tok = large.tokenizer
        rebuilt = tok.decode(large.train_ids) + tok.decode(large.val_ids)
        assert rebuilt == expected


def test_splits_are_views_of_one_token_file(shakespeare_path, tmp_path):
    corpus = prepare_corpus(shakespeare_path, 0.1, tmp_path, test_fraction=0.05)
    for ids in (corpus.train_ids, corpus.val_ids, corpus.test_ids):
        assert isinstance(ids, np.memmap) and not ids.flags.writeable
    assert (len(corpus.train_ids), len(corpus.val_ids), len(corpus.test_ids)) == (
        948_084,  # int(n * 0.85)
        111_541,
        55_769,  # int(n * 0.05)
    )
    assert "test 55,769" in corpus.origin
    text = shakespeare_path.read_text(encoding="utf-8")
    assert corpus.tokenizer.decode(corpus.test_ids[-20:]) == text[-20:]
    # Without a test split, the splits are exactly those before it existed.
    assert split_sizes(len(text), 0.1) == (1_003_854, 111_540, 0)


def old_sampler_batches(ids, block_size, batch_size, seed, n):
    """The batches BatchSampler drew before token arrays were memory-mapped: the same
    generator calls on an int64 copy of the whole split."""
    data = torch.from_numpy(ids.astype(np.int64))
    generator = torch.Generator().manual_seed(seed)
    offsets = torch.arange(block_size + 1)
    for _ in range(n):
        starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
        windows = data[starts[:, None] + offsets]
        yield windows[:, :-1], windows[:, 1:]


def test_memory_mapped_batches_equal_the_in_memory_ones(shakespeare_path, tmp_path):
    corpus = prepare_corpus(shakespeare_path, 0.1, tmp_path, test_fraction=0.05)
    for split in (corpus.train_ids, corpus.val_ids):  # the second starts inside the file
        from_file = BatchSampler(split, 32, 16, seed=5, device="cpu")
        assert from_file.reader.file is not None  # positioned reads, not the memory map
        in_memory = np.array(split)
        gathered = BatchSampler(in_memory, 32, 16, seed=5, device="cpu")
        assert gathered.reader.file is None
        for x_old, y_old in old_sampler_batches(in_memory, 32, 16, seed=5, n=20):
            for x, y in (from_file.next_batch(), gathered.next_batch()):
                assert torch.equal(x, x_old) and torch.equal(y, y_old)
        for max_tokens in (None, 5_000):
            for a, b in zip(
                evaluation_windows(split, 32, max_tokens),
                evaluation_windows(in_memory, 32, max_tokens),
                strict=True,
            ):
                assert torch.equal(a, b)


@pytest.mark.parametrize("max_tokens", [None, 1000])
def test_evaluation_windows_read_batch_by_batch_equal_all_at_once(max_tokens):
    ids = np.random.default_rng(0).integers(0, 50, 5_003).astype(np.uint16)
    x_all, y_all = evaluation_windows(ids, 32, max_tokens)
    windows = EvaluationWindows(ids, 32, max_tokens)
    assert windows.n_targets == int((y_all != -1).sum())
    assert windows.covers_split == (max_tokens is None)
    for world in (1, 3):
        got = [list(windows.batches(7, rank, world)) for rank in range(world)]
        for rank in range(world):
            x = torch.cat([b[0] for b in got[rank]])
            y = torch.cat([b[1] for b in got[rank]])
            assert torch.equal(x, x_all[rank::world]) and torch.equal(y, y_all[rank::world])
