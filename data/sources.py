"""Which files a corpus is made of: one file, a folder (read recursively) or a glob,
narrowed by ``data.include`` patterns, in a fixed (sorted) order; and their fingerprint.

    data.path=input.txt                                    one file
    data.path=corpora/linux data.include='*.c,*.h'         every C file in a folder
    data.path='books/*.txt'                                a glob (quoted for the shell)

Names starting with a dot (``.git``, ``.DS_Store``) are skipped inside folders, as
hidden files are not text someone meant to train on. The fingerprint covers each
file's path (relative to the folder), size and sha256, so an edited, added, removed
or renamed file gives another fingerprint, and so another cache entry.
"""

import fnmatch
import glob
import hashlib
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from data.errors import CorpusError

GLOB_CHARACTERS = "*?["
HASH_BLOCK_BYTES = 8 << 20  # read size while hashing: memory stays small for any file size


@dataclass(frozen=True)
class SourceFile:
    """One file of a corpus.

    Attributes:
        path: where it is.
        name: its path relative to the corpus's folder, with '/' separators (the
            file name itself for a single file); part of the fingerprint.
        size: its size in bytes when it was listed.
    """

    path: Path
    name: str
    size: int


@dataclass(frozen=True)
class CorpusSources:
    """The files of a corpus, in the order their text is joined.

    Attributes:
        given: ``data.path`` as given.
        files: the files, sorted by name.
        include: the ``data.include`` patterns that chose them ("" for a single file).
    """

    given: str
    files: tuple[SourceFile, ...]
    include: str = ""

    @property
    def total_bytes(self) -> int:
        """Sum of the files' sizes, in bytes."""
        return sum(f.size for f in self.files)

    def describe(self) -> str:
        """For the log: 'corpora/linux (59,952 files matching *.c,*.h, 1,336.5 MB)',
        or 'input.txt (1.1 MB)' for a single file; under 0.1 MB, in KB ('notes.txt
        (2.0 KB)'), so that a small corpus does not read as empty."""
        n = self.total_bytes
        megabytes = f"{n / 1e6:,.1f} MB" if n >= 100_000 else f"{n / 1e3:,.1f} KB"
        if not self.include:
            return f"{self.given} ({megabytes})"
        matching = "" if self.include == "*" else f" matching {self.include}"
        return f"{self.given} ({len(self.files):,} files{matching}, {megabytes})"

    def fingerprint(
        self, on_bytes: Callable[[int], None] | None = None, per_file: list | None = None
    ) -> str:
        """sha256 (hex) over every file's name, size and content hash, in order.

        Args:
            on_bytes: called with the number of bytes after each block read (for a
                progress bar).
            per_file: if given, (name, size, sha256 hex) of each file is appended to it.

        Raises:
            CorpusError: naming a file that cannot be read, or that changed size
                since it was listed.
        """
        digest = hashlib.sha256()
        for source in self.files:
            content = hashlib.sha256()
            size = 0
            try:
                with open(source.path, "rb") as f:
                    while block := f.read(HASH_BLOCK_BYTES):
                        content.update(block)
                        size += len(block)
                        if on_bytes is not None:
                            on_bytes(len(block))
            except OSError as e:
                raise unreadable(source.path, e) from None
            if size != source.size:
                raise CorpusError(
                    f"{source.path} changed while the corpus was being read "
                    f"({source.size:,} bytes, then {size:,}); run again once it is written"
                )
            digest.update(f"{source.name}\0{size}\0{content.hexdigest()}\n".encode())
            if per_file is not None:
                per_file.append((source.name, size, content.hexdigest()))
        return digest.hexdigest()


def unreadable(path: Path, error: OSError) -> CorpusError:
    """The error for a corpus file that cannot be opened or read."""
    return CorpusError(
        f"data.path: cannot read {path} ({error.strerror or error}); fix its permissions, "
        "or leave it out with data.include"
    )


def split_patterns(include: str) -> list[str]:
    """'*.c, *.h' -> ['*.c', '*.h'] (empty entries dropped).

    Raises:
        CorpusError: if no pattern is left.
    """
    patterns = [p.strip() for p in include.split(",") if p.strip()]
    if not patterns:
        raise CorpusError(
            f"data.include={include!r} has no pattern; use '*' for every file, or e.g. '*.c,*.h'"
        )
    return patterns


def find_sources(path: str | Path, include: str = "*") -> CorpusSources:
    """The files ``data.path`` names: the file itself, every file under a folder (in
    its sub-folders too) or every file a glob matches (folders it matches are read
    recursively), keeping those whose name or relative path matches one of the
    ``include`` patterns (fnmatch, comma-separated). A single file is taken whatever
    ``include`` says.

    Raises:
        CorpusError: for a path that does not exist, a folder or glob with no
            matching file (naming the kinds of file it does hold), or empty patterns.
    """
    given = str(path)
    path = Path(path)
    if path.is_file():
        return CorpusSources(given, (SourceFile(path, path.name, _size(path)),))
    patterns = split_patterns(include)
    if path.is_dir():
        root, candidates = path, _walk(path)
    elif any(c in given for c in GLOB_CHARACTERS):
        matches = sorted(glob.glob(given, recursive=True))
        if not matches:
            raise CorpusError(
                f"data.path: nothing matches the glob {given} (relative paths are taken "
                "from the folder you run in)"
            )
        candidates = []
        for match in map(Path, matches):
            candidates += _walk(match) if match.is_dir() else [match] if match.is_file() else []
        root = _common_folder(candidates) if candidates else Path(given).parent
    else:
        raise CorpusError(f"data.path: no such file or folder: {path}")
    chosen = []
    for file in candidates:
        name = file.relative_to(root).as_posix()
        if any(fnmatch.fnmatch(file.name, p) or fnmatch.fnmatch(name, p) for p in patterns):
            chosen.append(SourceFile(file, name, _size(file)))
    if not chosen:
        raise CorpusError(_nothing_matched(given, candidates, include))
    chosen.sort(key=lambda f: f.name)
    return CorpusSources(given, tuple(chosen), ",".join(patterns))


def _walk(folder: Path) -> list[Path]:
    """Every file under ``folder``, hidden names (starting with '.') left out."""
    files = []
    for parent, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        files += [Path(parent, n) for n in names if not n.startswith(".")]
    return [f for f in files if f.is_file()]


def _common_folder(files: list[Path]) -> Path:
    """The deepest folder holding every file (their names are relative to it)."""
    return Path(os.path.commonpath([str(f.parent.absolute()) for f in files]))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError as e:
        raise unreadable(path, e) from None


def _nothing_matched(given: str, candidates: list[Path], include: str) -> str:
    """Say what the folder or glob does hold, so that the fix is obvious."""
    if not candidates:
        return f"data.path: {given} holds no files (hidden files are skipped); point it at text"
    counts = Counter(f.suffix or f.name for f in candidates)
    kinds = sorted(counts.items(), key=lambda kind: (-kind[1], kind[0]))[:5]
    shown = ", ".join(f"{n:,} {'*' + k if k.startswith('.') else k}" for k, n in kinds)
    return (
        f"data.path: none of the {len(candidates):,} files in {given} matches "
        f"data.include={include!r} (it holds {shown}); set data.include to the files "
        "to train on, e.g. data.include='*.txt'"
    )
