import unicodedata

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from data import BatchSampler, CorpusError, evaluation_windows, prepare_corpus
from data.decoding import normalize_newlines
from tests.conftest import tiny_overrides
from training import load_config, train


def test_tiny_shakespeare_split(shakespeare_path, tmp_path):
    corpus = prepare_corpus(shakespeare_path, 0.1, tmp_path)
    assert (len(corpus.train_ids), len(corpus.val_ids)) == (1_003_854, 111_540)
    assert corpus.train_ids.dtype == np.uint16
    assert corpus.tokenizer.vocab_size == 65
    text = shakespeare_path.read_text(encoding="utf-8")
    assert corpus.tokenizer.decode(corpus.val_ids[:50]) == text[1_003_854 : 1_003_854 + 50]


def test_korean_corpus(korean_path, tmp_path):
    corpus = prepare_corpus(korean_path, 0.1, tmp_path)
    text = korean_path.read_text(encoding="utf-8")
    assert corpus.tokenizer.vocab_size == len(set(text))
    assert corpus.tokenizer.vocab_size > 1000
    assert len(corpus.train_ids) + len(corpus.val_ids) == len(text)
    assert corpus.tokenizer.decode(corpus.train_ids[:100]) == text[:100]


def test_cache_is_reused_and_rebuilt_when_the_corpus_changes(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("abcabcabc" * 20, encoding="utf-8")
    first = prepare_corpus(path, 0.1, tmp_path / "cache")
    assert len(list((tmp_path / "cache").iterdir())) == 1
    again = prepare_corpus(path, 0.1, tmp_path / "cache")
    assert again.tokenizer.chars == first.tokenizer.chars
    np.testing.assert_array_equal(again.train_ids, first.train_ids)
    path.write_text("xyzxyz" * 20, encoding="utf-8")
    changed = prepare_corpus(path, 0.1, tmp_path / "cache")
    assert changed.tokenizer.chars == ["x", "y", "z"]
    assert len(list((tmp_path / "cache").iterdir())) == 2


def test_bom_and_crlf_are_normalised(tmp_path):
    path = tmp_path / "w.txt"
    path.write_bytes("\ufeffab\r\ncd\rx".encode())
    corpus = prepare_corpus(path, 0.5, tmp_path / "cache")
    assert corpus.tokenizer.chars == ["\n", "a", "b", "c", "d", "x"]


def test_bad_corpora_fail_clearly(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(CorpusError, match="empty"):
        prepare_corpus(empty, 0.1, tmp_path / "cache")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"abc\xffdefghijkl\n")  # 1 invalid byte in 14: text, not binary
    with pytest.raises(CorpusError, match="byte offset 3.*decode_errors=replace"):
        prepare_corpus(bad, 0.1, tmp_path / "cache")
    assert "\ufffd" in prepare_corpus(bad, 0.2, tmp_path / "c2", "replace").tokenizer.chars
    with pytest.raises(CorpusError, match="no such file"):
        prepare_corpus(tmp_path / "missing.txt", 0.1, tmp_path / "cache")


def test_split_too_short_for_block_size(tmp_path):
    path = tmp_path / "short.txt"
    path.write_text("hello\nworld\n", encoding="utf-8")
    corpus = prepare_corpus(path, 0.1, tmp_path / "cache")
    with pytest.raises(CorpusError, match="block_size"):
        corpus.check_fits(16)


def test_batches_are_windows_shifted_by_one():
    ids = np.arange(1000, dtype=np.uint16)
    sampler = BatchSampler(ids, block_size=16, batch_size=64, seed=0, device="cpu")
    x, y = sampler.next_batch()
    assert x.shape == y.shape == (64, 16) and x.dtype == torch.int64
    assert torch.equal(y[:, :-1], x[:, 1:])
    assert torch.equal(x[:, 1:] - x[:, :-1], torch.ones(64, 15, dtype=torch.int64))
    assert int(y.max()) <= 999


def test_sampler_state_restores_the_same_batches():
    ids = np.arange(500, dtype=np.uint16)
    a = BatchSampler(ids, 8, 4, seed=1, device="cpu")
    a.next_batch()
    state = a.state_dict()
    expected = a.next_batch()[0]
    b = BatchSampler(ids, 8, 4, seed=99, device="cpu")
    b.load_state_dict(state)
    assert torch.equal(b.next_batch()[0], expected)


@pytest.mark.parametrize("n", [17, 33, 100, 129])
def test_evaluation_windows_cover_every_target_once(n):
    ids = np.arange(n, dtype=np.uint16)
    x, y = evaluation_windows(ids, block_size=16)
    counted = y[y != -1]
    assert sorted(counted.tolist()) == list(range(1, n))  # every target exactly once
    full = x[:, 1:]
    assert torch.equal(full, torch.where(y[:, :-1] == -1, full, y[:, :-1]))


def test_evaluation_sample_is_fixed_and_capped():
    ids = np.arange(10_000, dtype=np.uint16)
    x1, y1 = evaluation_windows(ids, 32, max_tokens=1024)
    x2, _ = evaluation_windows(ids, 32, max_tokens=1024)
    assert torch.equal(x1, x2)
    assert y1.numel() == 1024
    assert len(set(y1.flatten().tolist())) == 1024  # windows do not overlap


def test_concurrent_preparations_share_one_cache(tmp_path):
    """Two processes (e.g. DDP ranks) preparing the same corpus at once must both work."""
    import threading

    path = tmp_path / "c.txt"
    path.write_text("the same text, prepared twice at once " * 200, encoding="utf-8")
    results, errors = [], []

    def prepare():
        try:
            results.append(prepare_corpus(path, 0.1, tmp_path / "cache"))
        except Exception as e:  # noqa: BLE001 - the test reports any failure
            errors.append(e)

    threads = [threading.Thread(target=prepare) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len({tuple(r.train_ids[:50].tolist()) for r in results}) == 1
    assert len(list((tmp_path / "cache").iterdir())) == 1  # no temporary folders left


def test_a_large_corpus_says_one_line_before_it_is_read_without_bars(tmp_path, monkeypatch):
    """A log file (no progress bars) gets a line before a long hashing and preparation;
    a terminal gets the bars instead, and a small corpus nothing."""
    monkeypatch.setattr("data.corpus.PROGRESS_MIN_BYTES", 1000)
    big, small = tmp_path / "big.txt", tmp_path / "small.txt"
    big.write_text("the quick brown fox\n" * 100, encoding="utf-8")  # 2,000 bytes
    small.write_text("the quick brown fox\n" * 10, encoding="utf-8")
    said = []
    prepare_corpus(big, 0.1, tmp_path / "cache", say=said.append)
    assert said == [f"reading {big} (2.0 KB): hashing it, then preparing it unless cached"]
    said.clear()
    prepare_corpus(small, 0.1, tmp_path / "cache", say=said.append)
    prepare_corpus(big, 0.1, tmp_path / "cache", progress=True, say=said.append)
    assert said == []


@pytest.mark.parametrize(
    "text, block_size, expected",
    [
        ("hello\nworld\n", 16, "training and validation splits .* train has 10 .* validation 2"),
        ("abcdefghij" * 20, 64, "validation split is too short .*validation 20.*= 65"),
    ],
)
def test_corpus_too_short_fails_before_any_model(tmp_path, monkeypatch, text, block_size, expected):
    path = tmp_path / "short.txt"
    path.write_text(text, encoding="utf-8")
    monkeypatch.setattr("training.loop.GPT", None)  # building a model would crash
    cfg = load_config(None, tiny_overrides(tmp_path, path, **{"model.block_size": block_size}))
    with pytest.raises(CorpusError, match=expected):
        train(cfg)


def test_split_of_exactly_block_size_plus_one_is_valid(tmp_path):
    path = tmp_path / "exact.txt"
    path.write_text(("abcdefghijk" * 30), encoding="utf-8")  # 330 chars: val is 33
    cfg = load_config(
        None,
        tiny_overrides(
            tmp_path,
            path,
            **{"model.block_size": 32, "data.val_fraction": 0.1},
            # Prompts of the corpus: the English defaults would fall back, warning.
            **{"train.sample_prompt": "abc", "train.attention_prompt": "abc"},
        ),
    )
    assert len(prepare_corpus(path, 0.1, tmp_path / "c").val_ids) == 33
    result = train(cfg)
    assert len(result.evals) == 2 and np.isfinite(result.best_val_loss)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(max_size=300), val_fraction=st.sampled_from([0.1, 0.5]))
def test_any_unicode_corpus_round_trips_or_fails_cleanly(tmp_path, text, val_fraction):
    """Any text round-trips, except an empty one and one with a NUL character (no text
    file holds one: it is refused as binary)."""
    path = tmp_path / "random.txt"
    path.write_bytes(text.encode("utf-8"))
    expected = unicodedata.normalize("NFC", normalize_newlines(text.removeprefix("\ufeff")))
    try:
        corpus = prepare_corpus(path, val_fraction, tmp_path / "cache")
    except CorpusError as e:
        assert expected == "" or ("\0" in text and "looks like a binary file" in str(e))
        return
    tok = corpus.tokenizer
    rebuilt = tok.decode(corpus.train_ids) + tok.decode(corpus.val_ids)
    assert rebuilt == expected
    for block_size in (1, 8):
        try:
            corpus.check_fits(block_size)
        except CorpusError as e:
            assert "block_size" in str(e)


def test_a_truncated_default_corpus_is_refused_with_the_way_out(
    tmp_path, monkeypatch, shakespeare_path
):
    """data/tinyshakespeare/input.txt, where the default data.path points, is checked
    on every run: a truncated one is refused, saying how to restore it and how to
    train on it anyway; the real one is accepted. (A repository of the test's own,
    so that the real copy is never touched.)"""
    from data.corpus import DEFAULT_CORPUS_PATH

    monkeypatch.setattr("data.corpus.REPOSITORY", tmp_path)
    monkeypatch.chdir(tmp_path)
    default = tmp_path / DEFAULT_CORPUS_PATH
    default.parent.mkdir(parents=True)
    text = shakespeare_path.read_bytes()
    default.write_bytes(text[:100_000])
    with pytest.raises(CorpusError) as e:
        prepare_corpus(DEFAULT_CORPUS_PATH, 0.1, tmp_path / "cache")
    message = str(e.value)
    assert "is not Tiny Shakespeare (100,000 bytes, expected 1,115,394" in message
    assert f"git checkout -- {DEFAULT_CORPUS_PATH}" in message
    assert f"rm {DEFAULT_CORPUS_PATH}" in message and "data.path=mytext.txt" in message
    assert not (tmp_path / "cache").exists()  # refused before any preparation

    (tmp_path / "mytext.txt").write_bytes(text[:100_000])  # the way to use it anyway
    assert len(prepare_corpus("mytext.txt", 0.1, tmp_path / "cache").val_ids) == 10_000
    default.write_bytes(text)
    assert len(prepare_corpus(DEFAULT_CORPUS_PATH, 0.1, tmp_path / "cache").val_ids) == 111_540
