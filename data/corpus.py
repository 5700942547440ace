"""A prepared corpus: its files -> a character vocabulary and memory-mapped token
arrays, cached; and the default corpus, Tiny Shakespeare, which ships with the code.

The corpus's characters, in order, are split into train | validation | test: the
first ``1 - val_fraction - test_fraction`` train, the next ``val_fraction``
validate, the last ``test_fraction`` (0 by default) are held out for
``evaluate.py --split test`` only. For Tiny Shakespeare and 0.1: 1,003,854 / 111,540.

Preparation streams (`data.prepare`): its memory does not grow with the corpus. The
token ids are written once to ``<cache_dir>/<name>-<key>/tokens.bin`` (uint16 up to
65,535 distinct characters, else uint32) with ``meta.json`` beside them; the key
covers every file's path, size and sha256 (`data.sources`) and the decoding settings,
so the next run starts at once and an edited, added or removed file prepares again.
The splits are read-only ``np.memmap`` arrays over parts of that one file: nothing is
loaded into memory, and another ``val_fraction`` needs no new preparation.

Tiny Shakespeare is in the repository (``data/tinyshakespeare/input.txt``, with its
SOURCE.md), so the default needs no network; its sha256 is checked on every run that
uses it, and a missing copy is downloaded from its canonical address. The defaults of
``data.path`` and ``data.cache_dir`` are places in the repository, found wherever the
command runs from; any other path, relative, is taken from the current folder.
"""

import hashlib
import json
import os
import re
import shutil
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from common.signals import signals_raise
from data.decoding import DEFAULT_CHUNK_BYTES, CorpusText
from data.errors import CorpusError
from data.escapes import unescape
from data.prepare import PROGRESS_MIN_BYTES, bytes_bar, prepare_tokens
from data.sources import find_sources, shown, unreadable
from data.staging import CACHE_ENTRY_CLEANUP, remove_stale, staging_folder
from data.tokenizer import CharTokenizer

REPOSITORY = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS_PATH = "data/tinyshakespeare/input.txt"  # in REPOSITORY, see in_repository
DEFAULT_CACHE_DIR = "data/cache"  # likewise
TINY_SHAKESPEARE_URL = (
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
)
TINY_SHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
TINY_SHAKESPEARE_BYTES = 1_115_394
CACHE_FORMAT = 3  # bump when the cached files' layout or the text normalisation changes
TOKENS_NAME, META_NAME = "tokens.bin", "meta.json"


@dataclass
class Corpus:
    """A prepared corpus.

    Attributes:
        tokenizer: the character vocabulary.
        train_ids: (N_train,) uint16/uint32 token ids of the training split: a
            read-only ``np.memmap`` (index it; a whole-split ``astype`` would copy it
            into memory).
        val_ids: (N_val,) token ids of the validation split, likewise.
        path: ``data.path`` as given (a file, folder or glob).
        fingerprint: sha256 (hex) of the files' names, sizes and contents.
        origin: one line for the log: where the text came from, its size, and
            whether the arrays were prepared now or read from the cache.
        test_ids: (N_test,) token ids of the held-out test split (empty when
            data.test_fraction is 0); never used by training.
        files: (name, size in bytes, sha256 hex) of each file, in reading order.
    """

    tokenizer: CharTokenizer
    train_ids: np.ndarray
    val_ids: np.ndarray
    path: Path
    fingerprint: str
    origin: str = ""
    test_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint16))
    files: tuple = ()

    def check_fits(self, block_size: int, vocab_size: int = 0) -> None:
        """Ensure each split (the test split too, when there is one) holds at least one
        window of block_size + 1 tokens, and that a vocab_size given by hand (0: from
        the corpus) is the corpus's.

        Raises:
            CorpusError: giving the split sizes, block_size and the fixes; or both
                vocabulary sizes.
        """
        if vocab_size not in (0, self.tokenizer.vocab_size):
            raise CorpusError(
                f"model.vocab_size is {vocab_size} but {shown(self.path)} has "
                f"{self.tokenizer.vocab_size} distinct characters; leave model.vocab_size "
                "at 0 (it is set from the corpus)"
            )
        sizes = {"training": len(self.train_ids), "validation": len(self.val_ids)}
        if len(self.test_ids):
            sizes["test"] = len(self.test_ids)
        too_short = [name for name, n in sizes.items() if n < block_size + 1]
        if too_short:
            test = f", test {sizes['test']}" if "test" in sizes else ""
            raise CorpusError(
                f"{shown(self.path)}: the {' and '.join(too_short)} split"
                f"{'s are' if len(too_short) > 1 else ' is'} too short for model.block_size="
                f"{block_size}: train has {sizes['training']} characters, validation "
                f"{sizes['validation']}{test}, and each needs at least block_size + 1 = "
                f"{block_size + 1}. Use a longer text, a smaller model.block_size, or "
                "another data.val_fraction" + (" or data.test_fraction." if test else ".")
            )


def split_sizes(n_tokens: int, val_fraction: float, test_fraction: float = 0.0):
    """(n_train, n_val, n_test) for a corpus of ``n_tokens`` characters: train is
    int(n * (1 - val_fraction - test_fraction)), test int(n * test_fraction),
    validation the rest between them.

    Raises:
        CorpusError: for fractions outside their ranges.
    """
    if not 0 < val_fraction < 1:
        raise CorpusError(f"data.val_fraction must be in (0, 1), got {val_fraction}")
    if not 0 <= test_fraction < 1 - val_fraction:
        raise CorpusError(
            f"data.test_fraction must be in [0, 1 - data.val_fraction), got {test_fraction}"
        )
    n_train = int(n_tokens * (1 - val_fraction - test_fraction))
    n_test = int(n_tokens * test_fraction)
    return n_train, n_tokens - n_train - n_test, n_test


def prepare_corpus(
    path: str | Path = DEFAULT_CORPUS_PATH,
    val_fraction: float = 0.1,
    cache_dir: str | Path = DEFAULT_CACHE_DIR,
    decode_errors: str = "strict",
    normalization: str = "nfc",
    *,
    test_fraction: float = 0.0,
    include: str = "*",
    separator: str = "\\n",
    progress: bool = False,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    say=None,
) -> Corpus:
    """Load (or prepare and cache) the tokenizer and token arrays of a corpus.

    Args:
        path: a UTF-8 text file, a folder or a glob (`data.sources.find_sources`),
            relative to the current folder; the default is the repository's Tiny
            Shakespeare, wherever this runs from (`in_repository`).
        val_fraction: share of the characters, after the training split, for validation.
        cache_dir: where prepared corpora are kept, one folder each; the default is
            the repository's data/cache.
        decode_errors: "strict" or "replace", see `data.decoding.CorpusText`.
        normalization: Unicode normalisation form of the text, see `data.normalization`.
        test_fraction: share of the characters, at the very end, held out as the test split.
        include: comma-separated patterns of the files to read in a folder or glob.
        separator: text put between two files, as ``data.separator`` spells it
            (escapes such as ``\\n`` are understood, see `data.escapes`).
        progress: show tqdm bars (hashing, both passes) for a corpus of 32 MB or more.
        chunk_bytes: bytes read, and characters handled, at a time (bounds memory;
            the result does not depend on it).
        say: called with one line before a corpus of 32 MB or more is read when
            ``progress`` is off, so that a log file is not silent meanwhile.

    Returns:
        The prepared `Corpus`.

    Raises:
        CorpusError: for a missing, unreadable, empty, binary or non-UTF-8 file
            (named, with the byte offset), a folder or glob with no matching file, a
            bad separator, fractions out of range, or a cache folder that cannot be
            written.
        Terminated: on SIGTERM or SIGHUP during preparation (`data.staging`).
    """
    given = Path(path)
    split_sizes(1, val_fraction, test_fraction)  # checks the fractions before any work
    cache_dir = in_repository(cache_dir, DEFAULT_CACHE_DIR)
    path = in_repository(path, DEFAULT_CORPUS_PATH)
    fetched_from = ensure_default_corpus(path) if given == Path(DEFAULT_CORPUS_PATH) else None
    sources = find_sources(path, include)
    text = CorpusText(
        sources, unescape_separator(separator), decode_errors, normalization, chunk_bytes
    )
    show = progress and sources.total_bytes >= PROGRESS_MIN_BYTES
    if say is not None and not progress and sources.total_bytes >= PROGRESS_MIN_BYTES:
        say(f"reading {sources.describe()}: hashing it, then preparing it unless cached")
    with bytes_bar(show, sources.total_bytes, "hashing corpus files") as on_bytes:
        files: list = []
        fingerprint = sources.fingerprint(on_bytes, files)
    settings = [fingerprint, decode_errors, normalization, f"format {CACHE_FORMAT}"]
    if len(sources.files) > 1:
        settings.append(f"separator {text.separator!r}")
    key = hashlib.sha256("\n".join(settings).encode()).hexdigest()[:20]
    folder = Path(cache_dir) / f"{_readable_name(given)}-{key}"
    described = sources.describe()
    if fetched_from:
        described += f" ({fetched_from}, sha256 checked)"

    meta = _load_cache(folder)
    how = "read from the cache"
    if meta is None:
        meta = _prepare_into(folder, text, progress)
        how = f"prepared into {shown(cache_dir)}"
    remove_stale(Path(cache_dir))  # temporary folders of preparations that were killed
    tokenizer = CharTokenizer(meta["vocab"], meta["normalization"])
    n_train, n_val, n_test = split_sizes(meta["n_tokens"], val_fraction, test_fraction)
    tokens = folder / TOKENS_NAME
    corpus = Corpus(
        tokenizer,
        _mapped(tokens, tokenizer.dtype, 0, n_train),
        _mapped(tokens, tokenizer.dtype, n_train, n_val),
        given,
        fingerprint,
        test_ids=_mapped(tokens, tokenizer.dtype, n_train + n_val, n_test),
        files=tuple(files),
    )
    corpus.origin = _describe(corpus, described, meta.get("replaced_bytes", 0), how)
    return corpus


def _mapped(path: Path, dtype: np.dtype, start: int, length: int) -> np.ndarray:
    """(length,) read-only view of tokens start .. start + length - 1 of a token file:
    an ``np.memmap`` of its own, so that it knows its place in the file
    (`data.batches.WindowReader` reads windows from there); empty for length 0."""
    if length == 0:
        return np.zeros(0, dtype=dtype)  # a memory map cannot be empty
    offset = start * np.dtype(dtype).itemsize
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=(length,))


def unescape_separator(separator: str) -> str:
    """``data.separator`` as text: its escapes (`data.escapes`) become the characters
    they name.

    Raises:
        CorpusError: for a malformed escape, naming data.separator.
    """
    try:
        return unescape(separator)
    except ValueError as e:
        raise CorpusError(f"data.separator={separator!r}: {e}") from None


def _readable_name(path: Path) -> str:
    """The start of a cache folder's name, so that a person can tell which is which."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", path.stem or path.name or "corpus").strip("._")
    return name[:40] or "corpus"


def _describe(corpus: Corpus, sources: str, replaced_bytes: int, how: str) -> str:
    """The log line that says what corpus a run reads."""
    tok = corpus.tokenizer
    n = len(corpus.train_ids) + len(corpus.val_ids) + len(corpus.test_ids)
    test = f" / test {len(corpus.test_ids):,}" if len(corpus.test_ids) else ""
    replaced = (
        f"; {replaced_bytes:,} invalid UTF-8 bytes replaced by U+FFFD" if replaced_bytes else ""
    )
    return (
        f"corpus: {sources}: {n:,} characters, {tok.vocab_size:,} distinct, "
        f"normalization {tok.normalization}; train {len(corpus.train_ids):,} / validation "
        f"{len(corpus.val_ids):,}{test}{replaced}; {how}"
    )


def _load_cache(folder: Path) -> dict | None:
    """The cache entry's meta.json, or None if it is missing or damaged."""
    try:
        meta = json.loads((folder / META_NAME).read_text(encoding="utf-8"))
        size = (folder / TOKENS_NAME).stat().st_size
        if (
            meta["format"] != CACHE_FORMAT
            or size != meta["n_tokens"] * np.dtype(meta["dtype"]).itemsize
        ):
            return None
        CharTokenizer(meta["vocab"], meta["normalization"])  # a damaged vocabulary fails here
        return meta
    except (OSError, ValueError, KeyError, TypeError):
        return None  # missing or damaged cache: prepare again


def _prepare_into(folder: Path, text: CorpusText, progress: bool) -> dict:
    """Prepare the corpus into a temporary folder beside ``folder``, then rename it
    into place (atomic), and return its meta.json contents. The temporary folder is
    removed however this ends (`data.staging`: errors, Ctrl-C, SIGTERM), and so are
    those of earlier preparations that were killed.

    Raises:
        CorpusError: from the preparation, or if the cache folder cannot be written.
        Terminated: on SIGTERM or SIGHUP, once the temporary folder is removed.
    """
    cache_dir = folder.parent
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        with staging_folder(cache_dir) as tmp:
            tokenizer, n_tokens = prepare_tokens(text, tmp / TOKENS_NAME, progress)
            sources = text.sources
            meta = {
                "format": CACHE_FORMAT,
                "source": shown(sources.given),
                "files": len(sources.files),
                "bytes": sources.total_bytes,
                "vocab": tokenizer.chars,
                "normalization": tokenizer.normalization,
                "dtype": tokenizer.dtype.name,
                "n_tokens": n_tokens,
                "replaced_bytes": text.replaced_bytes,
            }
            (tmp / META_NAME).write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
            try:
                os.replace(tmp, folder)  # atomic while the folder does not exist yet
            except OSError:
                # The folder exists: another process (a second rank, a parallel run) may
                # have just written the same arrays, or an old cache is damaged.
                if _load_cache(folder) is None:
                    shutil.rmtree(folder, ignore_errors=True)
                    os.replace(tmp, folder)
    except OSError as e:
        blocker = _file_in_the_way(cache_dir)
        reason = (
            f"{shown(blocker)} is a file, not a folder. Choose another data.cache_dir, or "
            "move the file away"
            if blocker is not None
            else e.strerror
        )
        raise CorpusError(f"data.cache_dir: cannot write to {shown(cache_dir)}: {reason}") from None
    return meta


def _file_in_the_way(folder: Path) -> Path | None:
    """The file that stands at ``folder`` or at one of its parents, if any: what makes
    creating it fail with "File exists" or "Not a directory"."""
    for path in (folder, *folder.parents):
        try:
            if path.exists() and not path.is_dir():
                return path
        except OSError:  # a folder it cannot look into
            return None
    return None


def in_repository(path: str | Path, default: str) -> Path:
    """``path`` as given, unless it is ``default`` (a path in the repository, such as
    DEFAULT_CORPUS_PATH): then that place in the repository, so that the default
    corpus and cache are found from any folder. Relative as given when the command
    runs from the repository's root, so that messages stay short there."""
    path = Path(path)
    if path != Path(default):
        return path
    if Path(default).absolute() == REPOSITORY / default:
        return path
    return REPOSITORY / default


def fetch_default_corpus(path: Path) -> str:
    """Download Tiny Shakespeare to ``path`` (where the repository's copy is missing)
    from its canonical address, after checking its sha256.

    Returns:
        Where it came from, for the log ("downloaded from <address>").

    Raises:
        CorpusError: if the download fails or is not the expected file; says how to
            restore the repository's copy, or where to put the file.
    """
    try:
        with urllib.request.urlopen(TINY_SHAKESPEARE_URL, timeout=30) as response:
            raw = response.read()
    except OSError as e:
        problem = f"the download from {TINY_SHAKESPEARE_URL} failed ({e})"
    else:
        if hashlib.sha256(raw).hexdigest() == TINY_SHAKESPEARE_SHA256:
            path.parent.mkdir(parents=True, exist_ok=True)
            _atomic_write_bytes(path, raw)
            return f"downloaded from {TINY_SHAKESPEARE_URL}"
        problem = f"the download from {TINY_SHAKESPEARE_URL} has the wrong sha256"
    raise CorpusError(
        f"Tiny Shakespeare is not at {shown(path)}, where the repository ships it, and "
        f"could not be fetched: {problem}. Restore the repository's copy "
        f"({_restore_command()}), put the file there (sha256 {TINY_SHAKESPEARE_SHA256}), "
        "or train on another text with data.path=/path/to/your.txt"
    )


def ensure_default_corpus(path: Path) -> str | None:
    """Check the sha256 of Tiny Shakespeare at ``path`` (the default corpus's place in
    the repository), or download it there if it is missing.

    Returns:
        Where it came from (see `fetch_default_corpus`), or None if it was there.

    Raises:
        CorpusError: if it is missing and cannot be fetched, or if the file there is not
            Tiny Shakespeare (truncated, edited): saying how to restore it, or how to
            train on that text anyway.
    """
    if not path.is_file():
        return fetch_default_corpus(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise unreadable(path, e) from None
    if hashlib.sha256(raw).hexdigest() != TINY_SHAKESPEARE_SHA256:
        raise CorpusError(
            f"{shown(path)} is the default corpus's place, but the file there is not Tiny "
            f"Shakespeare ({len(raw):,} bytes, expected {TINY_SHAKESPEARE_BYTES:,}; its "
            f"sha256 differs): a truncated or edited copy. Restore the repository's copy "
            f"({_restore_command()}; or rm {shown(path)} and run again to download it), "
            "or, to train on that text as it is, move it out of the default place and "
            f"name it with data.path, e.g. mv {shown(path)} mytext.txt and "
            "data.path=mytext.txt"
        )
    return None


def _restore_command() -> str:
    """The git command that puts the repository's Tiny Shakespeare back."""
    here = Path.cwd() == REPOSITORY
    return f"git {'' if here else f'-C {shown(REPOSITORY)} '}checkout -- {DEFAULT_CORPUS_PATH}"


def _atomic_write_bytes(path: Path, raw: bytes) -> None:
    """Write ``path`` through a temporary file beside it, renamed into place; the
    temporary file is removed if the write fails or is interrupted."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with signals_raise(CACHE_ENTRY_CLEANUP):
            tmp.write_bytes(raw)
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
