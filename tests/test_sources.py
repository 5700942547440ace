"""Corpora of many files: folder and glob inputs, the include filter, the separator,
the cache key over every file, and the errors that name a file."""

import pytest

from data import CorpusError, prepare_corpus
from data.sources import find_sources


@pytest.fixture
def tree(tmp_path):
    """A folder of text files in sub-folders, with hidden entries that must be skipped."""
    root = tmp_path / "corpus"
    files = {
        "b/two.txt": "second file\n",
        "a/one.txt": "first file\n",
        "a/deep/three.c": "int main(void) { return 0; }\n",
        "notes.md": "# notes\n",
        ".hidden.txt": "HIDDEN",
        ".git/config.txt": "HIDDEN",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def texts(corpus) -> str:
    tok = corpus.tokenizer
    return tok.decode(corpus.train_ids) + tok.decode(corpus.val_ids) + tok.decode(corpus.test_ids)


def test_a_folder_is_every_file_under_it_in_sorted_order(tree):
    sources = find_sources(tree)
    assert [f.name for f in sources.files] == [
        "a/deep/three.c",
        "a/one.txt",
        "b/two.txt",
        "notes.md",
    ]
    assert sources.total_bytes == sum(f.path.stat().st_size for f in sources.files)
    assert "4 files" in sources.describe()


def test_include_patterns_match_names_and_relative_paths(tree):
    assert [f.name for f in find_sources(tree, "*.txt").files] == ["a/one.txt", "b/two.txt"]
    assert [f.name for f in find_sources(tree, "*.c, *.md").files] == [
        "a/deep/three.c",
        "notes.md",
    ]
    assert [f.name for f in find_sources(tree, "b/*").files] == ["b/two.txt"]


def test_a_glob_reads_its_matches(tree):
    sources = find_sources(str(tree / "*" / "*.txt"))
    assert [f.name for f in sources.files] == ["a/one.txt", "b/two.txt"]
    recursive = find_sources(str(tree / "**" / "*.c"))
    assert [f.path.name for f in recursive.files] == ["three.c"]


def test_files_are_joined_by_the_separator(tree, tmp_path):
    corpus = prepare_corpus(tree, 0.5, tmp_path / "cache", include="*.txt")
    assert texts(corpus) == "first file\n\nsecond file\n"  # default: one newline between
    marked = prepare_corpus(tree, 0.5, tmp_path / "cache", include="*.txt", separator="\\n--\\n")
    assert texts(marked) == "first file\n\n--\nsecond file\n"
    joined = prepare_corpus(tree, 0.5, tmp_path / "cache", include="*.txt", separator="")
    assert texts(joined) == "first file\nsecond file\n"
    assert len(list((tmp_path / "cache").iterdir())) == 3


def test_the_cache_is_prepared_again_when_a_file_changes_or_is_added(tree, tmp_path):
    cache = tmp_path / "cache"
    first = prepare_corpus(tree, 0.5, cache, include="*.txt")
    assert "prepared into" in first.origin
    assert "read from the cache" in prepare_corpus(tree, 0.5, cache, include="*.txt").origin
    (tree / "b/two.txt").write_text("SECOND file\n", encoding="utf-8")  # same size
    edited = prepare_corpus(tree, 0.5, cache, include="*.txt")
    assert "prepared into" in edited.origin and "S" in edited.tokenizer.chars
    (tree / "b/four.txt").write_text("fourth\n", encoding="utf-8")
    added = prepare_corpus(tree, 0.5, cache, include="*.txt")
    assert "prepared into" in added.origin
    assert texts(added) == "first file\n\nfourth\n\nSECOND file\n"  # b/four < b/two
    assert len({first.fingerprint, edited.fingerprint, added.fingerprint}) == 3
    assert len(list(cache.iterdir())) == 3


def test_a_folder_without_matching_files_says_what_it_holds(tree, tmp_path):
    match = r"none of the 4 files .*data.include='\*.py' \(it holds 2 \*.txt, 1 \*.c, 1 \*.md\)"
    with pytest.raises(CorpusError, match=match):
        prepare_corpus(tree, 0.1, tmp_path / "cache", include="*.py")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CorpusError, match="holds no files"):
        prepare_corpus(empty, 0.1, tmp_path / "cache")
    with pytest.raises(CorpusError, match="nothing matches the glob"):
        prepare_corpus(tmp_path / "nowhere" / "*.txt", 0.1, tmp_path / "cache")
    with pytest.raises(CorpusError, match="no such file or folder"):
        prepare_corpus(tmp_path / "nowhere.txt", 0.1, tmp_path / "cache")


def test_a_non_utf8_file_is_named_with_its_byte_offset(tree, tmp_path):
    bad = tree / "b" / "latin1.txt"
    bad.write_bytes(b"caf\xe9 au lait " * 3 + b"cr\xe8me")  # Latin-1, not UTF-8
    with pytest.raises(
        CorpusError, match=r"latin1.txt is not valid UTF-8: byte 0xe9 at byte offset 3\."
    ):
        prepare_corpus(tree, 0.1, tmp_path / "cache")
    # The offset is the file's, whatever the read size.
    later = tree / "b" / "later.txt"
    later.write_bytes(b"x" * 40 + b"\xff")
    bad.unlink()
    with pytest.raises(CorpusError, match=r"later.txt .* at byte offset 40\."):
        prepare_corpus(tree, 0.1, tmp_path / "cache", chunk_bytes=7)
    corpus = prepare_corpus(tree, 0.1, tmp_path / "cache", decode_errors="replace")
    assert "1 invalid UTF-8 bytes replaced by U+FFFD" in corpus.origin
    assert "\ufffd" in corpus.tokenizer.chars


def test_an_unreadable_file_is_named(tree, tmp_path, monkeypatch):
    real_open = open

    def refuse(path, *args, **kwargs):
        if str(path).endswith("two.txt"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("data.sources.open", refuse, raising=False)
    with pytest.raises(CorpusError, match=r"cannot read .*two.txt \(Permission denied\)"):
        prepare_corpus(tree, 0.1, tmp_path / "cache")
