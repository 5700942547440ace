"""An interrupted corpus preparation leaves nothing in the cache (data.staging): not on
an error, Ctrl-C, SIGTERM or SIGHUP in any phase, and what a SIGKILL leaves is removed
by the next preparation, while a live preparation's folder is never touched."""

import os
import signal
import subprocess
import sys

import pytest

from data import CorpusError, prepare_corpus
from data.staging import PREFIX
from tests.conftest import ROOT

# Prepares argv[1] into the cache argv[2], stopping at the phase argv[3] (if one of
# `places`) to print its name and then wait for the test (reading stdin until it is
# closed), or raise there (argv[4] == "raise"); argv[5]: chunk_bytes. Default signal
# handlers, whatever this test runner inherited.
CHILD = r"""
import signal, sys
for signum in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(signum, signal.SIG_DFL)
signal.signal(signal.SIGINT, signal.default_int_handler)
import data.corpus, data.prepare, data.sources
from data import prepare_corpus

corpus, cache, phase, action = sys.argv[1:5]
places = {
    "hash": (data.sources.CorpusSources, "fingerprint"),
    "count": (data.prepare, "count_code_points"),
    "write": (data.prepare, "write_token_ids"),
    "rename": (data.corpus.os, "replace"),
}

def stop_at(owner, name):
    original = getattr(owner, name)

    def stop_here(*args, **kwargs):
        print(phase, flush=True)
        if action == "raise":
            raise RuntimeError("planted failure")
        sys.stdin.read()
        return original(*args, **kwargs)

    setattr(owner, name, stop_here)

if phase in places:
    stop_at(*places[phase])
prepare_corpus(corpus, 0.1, cache, chunk_bytes=int(sys.argv[5]) if len(sys.argv) > 5 else 1 << 20)
print("prepared", flush=True)
"""


def start(corpus, cache, phase="write", chunk_bytes=None):
    """The child preparing ``corpus``, once it has reached ``phase``."""
    args = [sys.executable, "-c", CHILD, str(corpus), str(cache), phase, "wait"]
    args += [str(chunk_bytes)] if chunk_bytes else []
    child = subprocess.Popen(
        args,
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    assert child.stdout.readline().strip() == phase, child.communicate(timeout=60)
    return child


def leftovers(cache):
    return sorted(p.name for p in cache.glob(PREFIX + "*")) if cache.exists() else []


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "text.txt"
    path.write_text("to be or not to be, that is the question\n" * 2000, encoding="utf-8")
    return path


PHASES = ["hash", "count", "write", "rename"]
SIGNALS = [(signal.SIGTERM, p) for p in PHASES] + [
    (signal.SIGINT, "count"),
    (signal.SIGINT, "rename"),
    (signal.SIGHUP, "write"),
]


@pytest.mark.parametrize(("signum", "phase"), SIGNALS)
def test_a_signal_in_any_phase_leaves_nothing_behind(tmp_path, text_file, phase, signum):
    """SIGTERM used to end the process with its partial token file left in a .tmp-*
    folder for good (issue 33, point 4); SIGINT cleaned up. Now every signal that
    ends a process does, in every phase of preparation: hashing, counting, writing the
    token ids, and with the entry complete but not yet renamed into place."""
    cache = tmp_path / "cache"
    child = start(text_file, cache, phase)
    child.send_signal(signum)
    _, err = child.communicate(timeout=60)
    assert child.returncode != 0
    if signum != signal.SIGINT and phase != "hash":  # a folder was held: cleaned, then exit
        assert child.returncode == 128 + signum, err
        assert f"{signal.Signals(signum).name}: stopping" in err
    assert leftovers(cache) == []
    assert not cache.exists() or not any(cache.iterdir())  # and no entry either


@pytest.mark.parametrize("phase", ["count", "write", "rename"])
def test_an_error_in_any_phase_leaves_nothing_behind(tmp_path, text_file, phase, monkeypatch):
    import data.corpus
    import data.prepare

    owner, name = {
        "count": (data.prepare, "count_code_points"),
        "write": (data.prepare, "write_token_ids"),
        "rename": (data.corpus.os, "replace"),
    }[phase]

    def fail(*args, **kwargs):
        raise RuntimeError("planted failure")

    monkeypatch.setattr(owner, name, fail)
    with pytest.raises(RuntimeError, match="planted failure"):
        prepare_corpus(text_file, 0.1, tmp_path / "cache")
    assert leftovers(tmp_path / "cache") == []


def test_sigterm_while_a_large_corpus_is_prepared_leaves_no_temporary_folder(tmp_path):
    """The issue's reproduction: an 8 MB corpus, SIGTERM as soon as its temporary
    folder exists (polled: no sleep, no timing asserted), nothing left behind."""
    corpus = tmp_path / "large.txt"
    corpus.write_bytes(b"the quick brown fox jumps over the lazy dog\n" * 190_000)
    cache = tmp_path / "cache"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(corpus), str(cache), "none", "wait", "64"],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    for _ in range(60_000):  # up to ten minutes
        try:
            child.wait(timeout=0.01)
            break  # ended before its folder was seen: reported below
        except subprocess.TimeoutExpired:
            if any(p.is_dir() for p in cache.glob(PREFIX + "*")):
                break
    child.send_signal(signal.SIGTERM)
    out, err = child.communicate(timeout=60)
    assert "prepared" not in out, "finished before it could be interrupted"
    assert child.returncode == 128 + signal.SIGTERM, err
    assert leftovers(cache) == []


def test_the_next_preparation_removes_what_a_killed_one_left(tmp_path, text_file):
    """SIGKILL cannot be caught: its folder and lock file stay, until the next
    preparation in the same cache (of any corpus, prepared or read from the cache)
    removes them; so does a folder left by an older version (no lock file)."""
    cache = tmp_path / "cache"
    other = tmp_path / "other.txt"
    other.write_text("another text, already prepared\n" * 50, encoding="utf-8")
    prepare_corpus(other, 0.1, cache)
    child = start(text_file, cache, "write")
    child.kill()
    child.communicate(timeout=60)
    left = leftovers(cache)
    assert len(left) == 2 and left[1] == left[0] + ".lock"
    (cache / ".tmp-oldcrash").mkdir()
    (cache / ".tmp-oldcrash" / "tokens.bin").write_bytes(b"\0" * 64)
    assert "read from the cache" in prepare_corpus(other, 0.1, cache).origin
    assert leftovers(cache) == []


def test_a_live_preparation_is_left_alone(tmp_path, text_file):
    """Another run (or rank) preparing in the same cache holds its folder's lock: a
    preparation that ends meanwhile does not remove it, and the first one completes."""
    cache = tmp_path / "cache"
    child = start(text_file, cache, "write")
    other = tmp_path / "other.txt"
    other.write_text("another text\n" * 50, encoding="utf-8")
    prepare_corpus(other, 0.1, cache)
    assert len(leftovers(cache)) == 2  # the child's folder and lock, untouched
    out, err = child.communicate(input="", timeout=60)  # let it go on
    assert child.returncode == 0 and "prepared" in out, err
    assert leftovers(cache) == []
    assert "read from the cache" in prepare_corpus(text_file, 0.1, cache).origin


def test_a_signal_handler_of_the_caller_is_kept(tmp_path, text_file, monkeypatch):
    """A caller that handles SIGTERM itself (the training loop saves a checkpoint)
    keeps its handler during preparation; an ignored signal stays ignored."""
    seen = []

    def handler(signum, frame):
        seen.append(signum)

    def check_handlers(*args, **kwargs):
        seen.append(signal.getsignal(signal.SIGTERM))
        seen.append(signal.getsignal(signal.SIGHUP))
        return original(*args, **kwargs)

    import data.prepare

    original = data.prepare.write_token_ids
    monkeypatch.setattr(data.prepare, "write_token_ids", check_handlers)
    before = signal.signal(signal.SIGTERM, handler), signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        prepare_corpus(text_file, 0.1, tmp_path / "cache")
    finally:
        signal.signal(signal.SIGTERM, before[0])
        signal.signal(signal.SIGHUP, before[1])
    assert seen == [handler, signal.SIG_IGN]


def test_an_unwritable_cache_is_named(tmp_path, text_file, monkeypatch):
    def refuse(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("data.staging.os.open", refuse)
    with pytest.raises(CorpusError, match="data.cache_dir: cannot write to .*Permission denied"):
        prepare_corpus(text_file, 0.1, tmp_path / "cache")
    assert leftovers(tmp_path / "cache") == []
    assert os.path.isdir(tmp_path / "cache")


@pytest.mark.parametrize("below", ["", "sub"])
def test_a_cache_dir_that_is_a_file_is_named_with_the_fix(tmp_path, text_file, below):
    """data.cache_dir=notes.txt (a file) said only "cannot write to notes.txt: File
    exists" (under it: "Not a directory"), with no fix."""
    notes = tmp_path / "notes.txt"
    notes.write_text("keep me\n", encoding="utf-8")
    with pytest.raises(CorpusError) as refused:
        prepare_corpus(text_file, 0.1, notes / below)
    assert str(refused.value) == (
        f"data.cache_dir: cannot write to {notes / below}: {notes} is a file, not a "
        "folder. Choose another data.cache_dir, or move the file away"
    )
    assert notes.read_text(encoding="utf-8") == "keep me\n"


def test_a_file_system_without_locks_prepares_and_removes_no_live_folder(
    tmp_path, text_file, monkeypatch
):
    """Where flock is refused (some network and FUSE file systems), preparation still
    works, and a folder with a lock file is kept, since its owner cannot be told dead."""
    import errno

    def no_locks(fd, operation):
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    monkeypatch.setattr("data.staging.fcntl.flock", no_locks)
    cache = tmp_path / "cache"
    (cache / ".tmp-someone").mkdir(parents=True)
    (cache / ".tmp-someone.lock").write_bytes(b"")
    assert len(prepare_corpus(text_file, 0.1, cache).val_ids) == 8_200
    assert leftovers(cache) == [".tmp-someone", ".tmp-someone.lock"]
