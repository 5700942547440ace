"""Corpus preparation: a UTF-8 text file -> tokenizer + train/validation token arrays.

The first ``1 - val_fraction`` of the characters are the training split, the rest the
validation split (for Tiny Shakespeare and 0.1: 1,003,854 / 111,540 tokens). The arrays
are cached under ``cache_dir`` keyed by the file's sha256, so the next run starts at
once and a changed corpus is prepared again.

The default corpus, Tiny Shakespeare, is fetched when missing: from an offline copy
beside the checkout (``../shared/data/tinyshakespeare/input.txt``) if there is one,
else from its canonical address; either way its sha256 is verified.
"""

import hashlib
import json
import os
import shutil
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from data.errors import CorpusError
from data.normalization import normalize_text
from data.tokenizer import CharTokenizer

DEFAULT_CORPUS_PATH = "data/tinyshakespeare/input.txt"
TINY_SHAKESPEARE_URL = (
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
)
TINY_SHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
OFFLINE_COPY = (
    Path(__file__).resolve().parent.parent.parent / "shared/data/tinyshakespeare/input.txt"
)
CACHE_FORMAT = 2  # bump when the cached files' layout or the text normalisation changes


@dataclass
class Corpus:
    """A prepared corpus.

    Attributes:
        tokenizer: the character vocabulary.
        train_ids: (N_train,) uint16/uint32 token ids of the training split.
        val_ids: (N_val,) token ids of the validation split.
        path: the text file it came from.
        sha256: hex digest of that file's bytes.
        origin: one line for the log: where the text came from, its size, and
            whether the arrays were prepared now or read from the cache.
    """

    tokenizer: CharTokenizer
    train_ids: np.ndarray
    val_ids: np.ndarray
    path: Path
    sha256: str
    origin: str = ""

    def check_fits(self, block_size: int, vocab_size: int = 0) -> None:
        """Ensure each split holds at least one window of block_size + 1 tokens, and
        that a vocab_size given by hand (0: from the corpus) is the corpus's.

        Raises:
            CorpusError: giving both split sizes, block_size and the fixes; or both
                vocabulary sizes.
        """
        if vocab_size not in (0, self.tokenizer.vocab_size):
            raise CorpusError(
                f"model.vocab_size is {vocab_size} but {self.path} has "
                f"{self.tokenizer.vocab_size} distinct characters; leave model.vocab_size "
                "at 0 (it is set from the corpus)"
            )
        sizes = {"training": len(self.train_ids), "validation": len(self.val_ids)}
        too_short = [name for name, n in sizes.items() if n < block_size + 1]
        if too_short:
            raise CorpusError(
                f"{self.path}: the {' and '.join(too_short)} split"
                f"{'s are' if len(too_short) > 1 else ' is'} too short for model.block_size="
                f"{block_size}: train has {sizes['training']} characters, validation "
                f"{sizes['validation']}, and each needs at least block_size + 1 = "
                f"{block_size + 1}. Use a longer text, a smaller model.block_size, or "
                "another data.val_fraction."
            )


def normalize_newlines(text: str) -> str:
    """Turn Windows (CRLF) and old Mac (lone CR) line endings into '\\n'."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def decode_corpus(
    raw: bytes, path: Path | str, errors: str = "strict", normalization: str = "none"
) -> str:
    """Decode a corpus's bytes as UTF-8, drop a leading BOM, normalise newlines and
    put the text in a Unicode normalisation form.

    Args:
        raw: the file's bytes.
        path: shown in error messages.
        errors: "strict" (fail on invalid UTF-8) or "replace" (use U+FFFD).
        normalization: "nfc", "nfkc", "nfd", "nfkd" or "none" (see `data.normalization`).

    Raises:
        CorpusError: for invalid UTF-8 (with the byte offset) or an empty text.
    """
    try:
        text = raw.decode("utf-8-sig", errors=errors)
    except UnicodeDecodeError as e:
        raise CorpusError(
            f"{path} is not valid UTF-8: byte 0x{raw[e.start]:02x} at byte offset {e.start}. "
            "Convert the file to UTF-8, or set data.decode_errors=replace to replace "
            "bad bytes with U+FFFD."
        ) from None
    text = normalize_text(normalize_newlines(text), normalization)
    if not text:
        raise CorpusError(f"{path} is empty: give data.path a text file with content")
    return text


def fetch_default_corpus(path: Path) -> str:
    """Put Tiny Shakespeare at ``path``, from the offline copy or by download, after
    checking its sha256.

    Returns:
        Where it came from, for the log ("the offline copy ...", "a download from ...").

    Raises:
        CorpusError: if neither source gives the expected file; says where to put it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    problems = []
    if OFFLINE_COPY.is_file():
        raw = OFFLINE_COPY.read_bytes()
        if hashlib.sha256(raw).hexdigest() == TINY_SHAKESPEARE_SHA256:
            _atomic_write_bytes(path, raw)
            return f"the offline copy {OFFLINE_COPY}"
        problems.append(f"the offline copy {OFFLINE_COPY} has the wrong sha256")
    else:
        problems.append(f"no offline copy at {OFFLINE_COPY}")
    try:
        with urllib.request.urlopen(TINY_SHAKESPEARE_URL, timeout=30) as response:
            raw = response.read()
    except OSError as e:
        problems.append(f"download from {TINY_SHAKESPEARE_URL} failed ({e})")
    else:
        if hashlib.sha256(raw).hexdigest() == TINY_SHAKESPEARE_SHA256:
            _atomic_write_bytes(path, raw)
            return f"a download from {TINY_SHAKESPEARE_URL}"
        problems.append(f"the download from {TINY_SHAKESPEARE_URL} has the wrong sha256")
    raise CorpusError(
        f"Tiny Shakespeare is not at {path} and could not be fetched: "
        + "; ".join(problems)
        + f". Put the file there (sha256 {TINY_SHAKESPEARE_SHA256}), "
        "or train on another text with data.path=/path/to/your.txt"
    )


def ensure_default_corpus(path: Path) -> str | None:
    """Fetch Tiny Shakespeare to ``path`` (the default corpus's place, relative to some
    checkout) if it is not there yet.

    Returns:
        Where it came from (see `fetch_default_corpus`), or None if it was there.

    Raises:
        CorpusError: if it is missing and cannot be fetched.
    """
    return None if path.is_file() else fetch_default_corpus(path)


def prepare_corpus(
    path: str | Path = DEFAULT_CORPUS_PATH,
    val_fraction: float = 0.1,
    cache_dir: str | Path = "data/cache",
    decode_errors: str = "strict",
    normalization: str = "nfc",
) -> Corpus:
    """Load (or build and cache) the tokenizer and token arrays for a text file.

    Args:
        path: UTF-8 text file; the default path fetches Tiny Shakespeare if missing.
        val_fraction: share of the characters, taken from the end, for validation.
        cache_dir: where prepared arrays are kept, one folder per (file hash, split,
            decoding and normalisation).
        decode_errors: "strict" or "replace", see `decode_corpus`.
        normalization: Unicode normalisation form of the text, see `data.normalization`.

    Returns:
        The prepared `Corpus`.

    Raises:
        CorpusError: for a missing, unreadable, empty or non-UTF-8 file, a folder, or
            a val_fraction outside (0, 1).
    """
    path = Path(path)
    if not 0 < val_fraction < 1:
        raise CorpusError(f"data.val_fraction must be in (0, 1), got {val_fraction}")
    fetched_from = None
    if path.is_dir():
        raise CorpusError(
            f"data.path: {path} is a folder; give the path of a UTF-8 text file in it"
        )
    if path == Path(DEFAULT_CORPUS_PATH):
        fetched_from = ensure_default_corpus(path)
    elif not path.is_file():
        raise CorpusError(f"data.path: no such file: {path}")
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise CorpusError(f"data.path: cannot read {path}: {e}") from None
    digest = hashlib.sha256(raw).hexdigest()
    key = f"{digest[:20]}-v{val_fraction!r}-{decode_errors}-{normalization}-f{CACHE_FORMAT}"
    source = f"{path} ({len(raw) / 1e6:,.1f} MB" + (
        f", fetched from {fetched_from}, sha256 checked)" if fetched_from else ")"
    )
    cached = _load_cache(Path(cache_dir) / key)
    if cached is not None:
        tokenizer, train_ids, val_ids = cached
        origin = _describe(source, tokenizer, train_ids, val_ids, "read from the cache")
        return Corpus(tokenizer, train_ids, val_ids, path, digest, origin)

    text = decode_corpus(raw, path, decode_errors, normalization)
    tokenizer = CharTokenizer.from_text(text, normalization)
    ids = tokenizer.encode(text)
    n_train = int(len(ids) * (1 - val_fraction))
    train_ids, val_ids = ids[:n_train], ids[n_train:]
    try:
        _save_cache(Path(cache_dir) / key, tokenizer, train_ids, val_ids, path)
    except OSError as e:
        raise CorpusError(f"data.cache_dir: cannot write to {cache_dir}: {e.strerror}") from None
    origin = _describe(source, tokenizer, train_ids, val_ids, f"prepared into {cache_dir}")
    return Corpus(tokenizer, train_ids, val_ids, path, digest, origin)


def _describe(source: str, tokenizer: CharTokenizer, train_ids, val_ids, how: str) -> str:
    """The log line that says what corpus a run reads."""
    return (
        f"corpus: {source}: {len(train_ids) + len(val_ids):,} characters, "
        f"{tokenizer.vocab_size:,} distinct, normalization {tokenizer.normalization}; "
        f"train {len(train_ids):,} / validation {len(val_ids):,}; {how}"
    )


def _load_cache(folder: Path):
    try:
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        dtype = np.dtype(meta["dtype"])
        train_ids = np.fromfile(folder / "train.bin", dtype=dtype)
        val_ids = np.fromfile(folder / "val.bin", dtype=dtype)
        if (len(train_ids), len(val_ids)) != (meta["n_train"], meta["n_val"]):
            return None
        return CharTokenizer(meta["vocab"], meta["normalization"]), train_ids, val_ids
    except (OSError, ValueError, KeyError, TypeError):
        return None  # missing or damaged cache: prepare again


def _save_cache(folder: Path, tokenizer, train_ids, val_ids, source: Path) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".tmp-"))
    try:
        train_ids.tofile(tmp / "train.bin")
        val_ids.tofile(tmp / "val.bin")
        meta = {
            "source": str(source),
            "vocab": tokenizer.chars,
            "normalization": tokenizer.normalization,
            "dtype": tokenizer.dtype.name,
            "n_train": len(train_ids),
            "n_val": len(val_ids),
        }
        (tmp / "meta.json").write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
        try:
            os.replace(tmp, folder)  # atomic while the folder does not exist yet
        except OSError:
            # The folder exists: another process (a second rank, a parallel run) may
            # have just written the same arrays, or an old cache is damaged.
            if _load_cache(folder) is None:
                shutil.rmtree(folder, ignore_errors=True)
                os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _atomic_write_bytes(path: Path, raw: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(raw)
    os.replace(tmp, path)
