"""The default corpus on a fresh machine: Tiny Shakespeare ships in the repository
(no network, no copy beside the checkout), and it is found, with the default cache,
from whatever folder a command runs in; paths the user gives stay relative to that
folder (issue 33, points 18 and 20)."""

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from data import CorpusError, prepare_corpus
from data.corpus import DEFAULT_CORPUS_PATH, TINY_SHAKESPEARE_SHA256, TINY_SHAKESPEARE_URL
from tests.conftest import ROOT, TIMEOUT_S, tiny_overrides


def tracked_files() -> list[str]:
    """The files a clone of this checkout holds (as the working tree has them); skips
    the test outside a git checkout (an unpacked archive), where there is no clone."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"not a git checkout, so no clone to reproduce: {e}")
    return [name for name in listed.stdout.split("\0") if name]


def test_tiny_shakespeare_ships_with_its_source_and_checksum():
    assert DEFAULT_CORPUS_PATH in tracked_files()
    raw = (ROOT / DEFAULT_CORPUS_PATH).read_bytes()
    assert len(raw) == 1_115_394
    assert hashlib.sha256(raw).hexdigest() == TINY_SHAKESPEARE_SHA256
    source = (ROOT / "data" / "tinyshakespeare" / "SOURCE.md").read_text(encoding="utf-8")
    assert TINY_SHAKESPEARE_URL in source and TINY_SHAKESPEARE_SHA256 in source
    assert "public domain" in source
    assert "data/tinyshakespeare/SOURCE.md" in tracked_files()


def test_the_default_corpus_needs_no_network(tmp_path, monkeypatch):
    def no_network(*args, **kwargs):
        raise OSError("no network in this test")

    monkeypatch.setattr("urllib.request.urlopen", no_network)
    corpus = prepare_corpus(DEFAULT_CORPUS_PATH, 0.1, tmp_path / "cache")
    assert len(corpus.val_ids) == 111_540 and "fetched" not in corpus.origin


@pytest.fixture
def fresh_clone(tmp_path) -> Path:
    """The tracked files of this checkout, copied into tmp_path/clone: a fresh clone,
    with nothing beside it (no ../shared) and no prepared cache."""
    clone = tmp_path / "clone"
    for name in tracked_files():
        if (ROOT / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, clone / name)
    return clone


def run(clone: Path, cwd: Path, script: str, *args) -> subprocess.CompletedProcess:
    """``python <clone>/<script> args`` in ``cwd``, with no network: any download goes
    to a proxy that is not there, and fails at once."""
    dead = "http://127.0.0.1:9"
    env = {**os.environ, "http_proxy": dead, "https_proxy": dead, "OMP_NUM_THREADS": "1"}
    env.pop("no_proxy", None)
    return subprocess.run(
        [sys.executable, str(clone / script), *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=TIMEOUT_S,
    )


def test_a_fresh_clone_trains_and_evaluates_offline_from_another_folder(tmp_path, fresh_clone):
    """`cd ..; python mini-gpt/train.py --config mini-gpt/configs/...` said Tiny
    Shakespeare was missing (looking for it beside the current folder, and leaving an
    empty data/tinyshakespeare/ there); evaluate.py on the run failed alike. Both find
    the repository's corpus and cache now; out_dir, given relative, is in the current
    folder, which holds nothing else afterwards."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    config = os.path.relpath(fresh_clone / "configs" / "shakespeare_char_cpu.yaml", elsewhere)
    keep = ("model.", "train.")
    overrides = [o for o in tiny_overrides(tmp_path, Path("unused")) if o.startswith(keep)]
    overrides += ["device=cpu", "out_dir=run", "train.compile=false", "train.max_iters=4"]
    overrides += ["train.eval_interval=2", "train.ema_start=0", "train.optimizer=adamw"]
    trained = run(fresh_clone, elsewhere, "train.py", "--config", config, *overrides)
    assert trained.returncode == 0, trained.stderr
    assert "corpus: " in trained.stdout and "1,115,394 characters" in trained.stdout
    assert sorted(os.listdir(elsewhere)) == ["run"]
    assert (elsewhere / "run" / "ckpt.pt").is_file()
    assert any((fresh_clone / "data" / "cache").iterdir())  # the repository's cache

    scored = run(fresh_clone, elsewhere, "evaluate.py", "--out-dir", "run")
    assert scored.returncode == 0, scored.stderr
    assert "validation split, 111,540 characters" in scored.stdout
    assert sorted(os.listdir(elsewhere)) == ["run"]


def test_a_path_the_user_gives_is_taken_from_the_current_folder(tmp_path, monkeypatch):
    """A relative data.path is the current folder's, and a message about it says so."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.txt").write_text("my own text, " * 100, encoding="utf-8")
    assert prepare_corpus("mine.txt", 0.1, tmp_path / "cache").files[0][0] == "mine.txt"
    for missing in ("missing.txt", "books/*.txt"):
        with pytest.raises(CorpusError) as e:
            prepare_corpus(missing, 0.1, tmp_path / "cache")
        assert f"a relative path is taken from the folder you run in, {tmp_path}" in str(e.value)
    with pytest.raises(CorpusError) as e:
        prepare_corpus(tmp_path / "missing.txt", 0.1, tmp_path / "cache")
    assert "relative path" not in str(e.value)  # an absolute path needs no such note


def test_the_default_cache_is_the_repositorys_wherever_this_runs(tmp_path, monkeypatch):
    """data.cache_dir's default, data/cache, is the repository's, not one made in the
    current folder; one given by the user is the current folder's. (A repository of
    the test's own, so that the real cache is never written.)"""
    repository = tmp_path / "repository"
    (repository / "data" / "tinyshakespeare").mkdir(parents=True)
    shutil.copy(ROOT / DEFAULT_CORPUS_PATH, repository / DEFAULT_CORPUS_PATH)
    monkeypatch.setattr("data.corpus.REPOSITORY", repository)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    corpus = prepare_corpus()
    assert "prepared into " + str(repository / "data" / "cache") in corpus.origin
    assert os.listdir(elsewhere) == []
    assert "prepared into mine" in prepare_corpus(cache_dir="mine").origin
    assert os.listdir(elsewhere) == ["mine"]


class FakeResponse:
    def __init__(self, raw: bytes):
        self.raw = raw

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def read(self) -> bytes:
        return self.raw


def test_a_deleted_copy_is_downloaded_or_its_restore_named(tmp_path, monkeypatch):
    """Where the shipped copy is missing, it is downloaded (sha256 checked) through a
    temporary file that an interrupted write does not leave; without a network the
    message says how to restore it."""
    repository = tmp_path / "repository"
    repository.mkdir()
    monkeypatch.setattr("data.corpus.REPOSITORY", repository)
    monkeypatch.chdir(repository)
    raw = (ROOT / DEFAULT_CORPUS_PATH).read_bytes()
    place = repository / DEFAULT_CORPUS_PATH

    def offline(*args, **kwargs):
        raise OSError("no network in this test")

    monkeypatch.setattr("urllib.request.urlopen", offline)
    with pytest.raises(CorpusError) as e:
        prepare_corpus(cache_dir=tmp_path / "cache")
    assert f"git checkout -- {DEFAULT_CORPUS_PATH}" in str(e.value)
    assert "no network in this test" in str(e.value) and not place.exists()

    monkeypatch.setattr("urllib.request.urlopen", lambda *a, **k: FakeResponse(raw))
    real_write = Path.write_bytes

    def interrupted(self, data):
        real_write(self, data[:1000])
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_bytes", interrupted)
    with pytest.raises(KeyboardInterrupt):
        prepare_corpus(cache_dir=tmp_path / "cache")
    assert os.listdir(place.parent) == []  # neither the file nor its temporary
    monkeypatch.setattr(Path, "write_bytes", real_write)
    corpus = prepare_corpus(cache_dir=tmp_path / "cache")
    assert (
        f"(downloaded from {TINY_SHAKESPEARE_URL}, sha256 checked)" in corpus.origin
        and place.read_bytes() == raw
    )
    assert os.listdir(place.parent) == ["input.txt"]
