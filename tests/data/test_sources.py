"""Corpora of many files: folder and glob inputs, the include filter, the separator,
the cache key over every file, and the errors that name a file."""

from pathlib import Path

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


@pytest.fixture
def nested(tmp_path):
    """corpus/a.txt and corpus/sub/b.txt, 40,000 bytes each (issue 33, point 1)."""
    root = tmp_path / "corpus"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("a" * 40_000, encoding="utf-8")
    (root / "sub" / "b.txt").write_text("b" * 40_000, encoding="utf-8")
    return root


@pytest.mark.parametrize("form", ["", "/*", "/**", "/**/*", "/**/*.txt", "/**/**"])
def test_every_form_of_a_path_reads_each_file_once(nested, form):
    """A recursive glob used to read a.txt twice and sub/b.txt three times: the glob
    matched the folders too, and each folder was then read whole again."""
    sources = find_sources(f"{nested}{form}")
    assert [f.name for f in sources.files] == ["a.txt", "sub/b.txt"]
    assert sources.total_bytes == 80_000
    assert "(2 files" in sources.describe()


def test_a_relative_glob_is_taken_from_the_current_folder(nested, monkeypatch):
    """The README's data.path='books/*.txt': relative matches, named relative to their
    folder (this crashed: a relative path against an absolute folder)."""
    monkeypatch.chdir(nested.parent)
    assert [f.name for f in find_sources("corpus/**").files] == ["a.txt", "sub/b.txt"]
    assert [f.name for f in find_sources("corpus/*/*.txt").files] == ["b.txt"]


def test_symbolic_links_reach_each_file_once_and_loops_end(nested, tmp_path):
    """A link to a file already read is not read again; a linked folder is read (in a
    folder as in a glob); a link back to a parent folder neither loops nor reads its
    files twice."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "o.txt").write_text("o" * 10, encoding="utf-8")
    (nested / "again.txt").symlink_to(nested / "a.txt")
    (nested / "ext").symlink_to(outside)
    (nested / "sub" / "loop").symlink_to(nested)
    (nested / "sub" / "self").symlink_to(nested / "sub")
    for form in ("", "/*", "/**", "/**/*", "/**/*.txt"):
        names = [f.name for f in find_sources(f"{nested}{form}").files]
        assert sorted(names) == names and len(names) == 3, (form, names)
        assert names[0] in ("a.txt", "again.txt") and names[1:] == ["ext/o.txt", "sub/b.txt"]
        assert find_sources(f"{nested}{form}").total_bytes == 80_010
    assert find_sources(f"{nested}/**/*.txt").files[0].name == "a.txt"


def test_hidden_names_are_read_only_when_named(nested):
    """Wildcards skip names starting with a dot, as the shell's do; a pattern that
    starts with a dot, or a path that names the file, reads it."""
    (nested / ".secret.txt").write_text("s", encoding="utf-8")
    (nested / ".git").mkdir()
    (nested / ".git" / "HEAD").write_text("ref", encoding="utf-8")
    for form in ("", "/*", "/**", "/**/*"):
        assert [f.name for f in find_sources(f"{nested}{form}").files] == ["a.txt", "sub/b.txt"]
    assert [f.name for f in find_sources(f"{nested}/.s*").files] == [".secret.txt"]
    assert [f.name for f in find_sources(nested / ".secret.txt").files] == [".secret.txt"]
    # A folder named in the path is read, though its name starts with a dot.
    assert [f.name for f in find_sources(nested / ".git").files] == ["HEAD"]


def test_overlapping_include_patterns_read_a_file_once(tree):
    names = [f.name for f in find_sources(tree, "*.txt, a/*, *one*").files]
    assert names == ["a/deep/three.c", "a/one.txt", "b/two.txt"]


def test_a_broken_link_or_an_unlistable_folder_is_named_not_skipped(nested, monkeypatch):
    """A file the corpus should hold but cannot be reached stops preparation with its
    name, rather than a corpus silently smaller than the user thinks."""
    (nested / "gone.txt").symlink_to(nested / "deleted.txt")
    with pytest.raises(CorpusError, match=r"gone.txt is a link to .*deleted.txt, which does not"):
        find_sources(nested)
    assert [f.name for f in find_sources(nested, "a*,sub/*").files] == ["a.txt", "sub/b.txt"]
    (nested / "gone.txt").unlink()

    import os

    real_scandir = os.scandir

    def refuse(path="."):
        if str(path).endswith("sub"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr("data.sources.os.scandir", refuse)
    for form in ("", "/**"):
        with pytest.raises(CorpusError, match=r"cannot list .*sub \(Permission denied\)"):
            find_sources(f"{nested}{form}")


def test_a_link_to_a_pipe_is_called_a_pipe_not_a_broken_link(tmp_path):
    """data.path=/dev/stdin (a link to /proc/self/fd/0, a pipe under `echo ... |`) was
    called "a link to /proc/self/fd/0, which does not exist or loops", and told to
    fix or remove the link. A link to a pipe gets the pipe's own message."""
    import os

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    link = tmp_path / "stdin"
    link.symlink_to(pipe)
    for path in (pipe, link):
        with pytest.raises(CorpusError, match=r"neither a file nor a folder \(a pipe") as e:
            find_sources(path)
        assert "does not exist" not in str(e.value)


def test_a_file_name_that_is_not_utf8_is_read_and_shown_with_escapes(nested, tmp_path):
    """caf\\xe9.txt in Latin-1 bytes crashed the fingerprint with a traceback that did
    not name it (issue 33, point 2): it is read like any other file, and every message
    and record shows its name with escapes, text any console and UTF-8 file can carry."""
    import os

    latin1 = os.path.join(os.fsencode(nested), b"caf\xe9.txt")
    with open(latin1, "wb") as f:
        f.write(b"coffee\n")
    corpus = prepare_corpus(nested, 0.5, tmp_path / "cache")
    assert [name for name, _, _ in corpus.files] == ["a.txt", "caf\\xe9.txt", "sub/b.txt"]
    assert "coffee" in texts(corpus)
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.txt").write_text("a" * 40_000, encoding="utf-8")
    with open(os.path.join(os.fsencode(other), b"caf\xe8.txt"), "wb") as f:
        f.write(b"coffee\n")
    assert prepare_corpus(other, 0.5, tmp_path / "cache").fingerprint != corpus.fingerprint

    with open(latin1, "wb") as f:
        f.write(b"un caf\xe9, s'il vous pla\xeet\n")  # Latin-1 content: the error names it
    with pytest.raises(CorpusError) as e:
        prepare_corpus(nested, 0.5, tmp_path / "cache")
    assert "caf\\xe9.txt is not valid UTF-8" in str(e.value)
    str(e.value).encode("utf-8")  # printable: no lone surrogate left in the message


PICTURE = Path(__file__).resolve().parents[2] / "docs" / "attention_layer0.png"


def test_a_binary_file_is_refused_and_the_advice_does_not_lead_to_training_on_it(tree, tmp_path):
    """A PNG as the corpus was "not valid UTF-8 ... set data.decode_errors=replace",
    and following that trained on the image (issue 33, point 22). A file with a NUL
    byte, or with more than 10% of its bytes invalid, is refused under either setting,
    naming it and the way out."""
    image = tmp_path / "picture.png"
    image.write_bytes(PICTURE.read_bytes())
    for errors in ("strict", "replace"):
        with pytest.raises(CorpusError) as e:
            prepare_corpus(image, 0.1, tmp_path / "cache", decode_errors=errors)
        message = str(e.value)
        assert f"{image} looks like a binary file" in message and "NUL byte" in message
        assert "decode_errors=replace" not in message and "point data.path at" in message
    # In a folder, the way out is data.include.
    (tree / "b" / "photo.png").write_bytes(PICTURE.read_bytes())
    for errors in ("strict", "replace"):
        with pytest.raises(CorpusError, match=r"photo.png looks like .*data.include='\*.txt'"):
            prepare_corpus(tree, 0.1, tmp_path / "cache", decode_errors=errors)
    assert len(prepare_corpus(tree, 0.5, tmp_path / "cache", include="*.txt").files) == 2
    # Without NUL bytes: 20% invalid is binary, 5% is text in a wrong encoding.
    (tree / "b" / "photo.png").unlink()
    noisy = tree / "noisy.txt"
    noisy.write_bytes((b"\xff" + b"x" * 4) * 100)
    for errors in ("strict", "replace"):
        with pytest.raises(CorpusError, match=r"100 of its 500 bytes \(20.0%\) are not valid"):
            prepare_corpus(tree, 0.1, tmp_path / "cache", decode_errors=errors)
    noisy.write_bytes((b"\xe9" + b"x" * 19) * 100)
    with pytest.raises(CorpusError, match=r"100 of its 2,000 bytes \(5.0%\).*=replace"):
        prepare_corpus(tree, 0.1, tmp_path / "cache")
    corpus = prepare_corpus(tree, 0.1, tmp_path / "cache", decode_errors="replace")
    assert "100 invalid UTF-8 bytes replaced by U+FFFD" in corpus.origin


def test_a_data_path_that_is_not_utf8_is_shown_with_escapes(tmp_path):
    """data.path itself in Latin-1 bytes (as a shell passes them): prepared, and the log
    line, the cache's meta.json and the errors show it with escapes."""
    import json
    import os

    folder = os.fsdecode(os.path.join(os.fsencode(tmp_path), b"caf\xe9"))
    os.mkdir(folder)
    single = os.path.join(folder, "notes.txt")
    Path(single).write_text("some notes\n" * 20, encoding="utf-8")
    corpus = prepare_corpus(single, 0.5, tmp_path / "cache")
    assert f"{tmp_path}/caf\\xe9/notes.txt (0.2 KB)" in corpus.origin
    corpus.origin.encode("utf-8")
    (meta,) = (tmp_path / "cache").glob("*/meta.json")
    assert json.loads(meta.read_text(encoding="utf-8"))["source"].endswith("caf\\xe9/notes.txt")
    with pytest.raises(CorpusError) as e:
        corpus.check_fits(block_size=500)
    assert "caf\\xe9/notes.txt: the training and validation splits" in str(e.value)


def test_a_data_path_that_is_not_utf8_is_refused_by_the_configuration(tmp_path):
    """A run records data.path in config.yaml, its checkpoint and TensorBoard, which
    hold UTF-8 only: such a path crashed the run's start with a traceback. It is
    refused when the configuration is checked, with the ways round it."""
    import os

    from training.config import ConfigError, load_config

    latin1 = os.fsdecode(os.path.join(os.fsencode(tmp_path), b"caf\xe9"))
    for key in ("data.path", "data.cache_dir"):
        with pytest.raises(ConfigError) as e:
            load_config(None, [f"{key}={latin1}"])
        assert f"{key} {tmp_path}/caf\\xe9 holds bytes that are not UTF-8" in str(e.value)
        assert "ln -s NAME corpus" in str(e.value)
