"""Which files a corpus is made of: one file, a folder (read recursively) or a glob,
narrowed by ``data.include`` patterns, in a fixed (sorted) order; and their fingerprint.

    data.path=input.txt                                    one file
    data.path=corpora/linux data.include='*.c,*.h'         every C file in a folder
    data.path='books/*.txt'                                a glob (quoted for the shell)

Names starting with a dot (``.git``, ``.DS_Store``) are skipped inside folders and by
wildcards, as hidden files are not text someone meant to train on. Each file is read
once, however many ways lead to it (a glob that matches both a folder and the files
in it, links, a linked folder that loops back); links to folders are followed. The
fingerprint covers each file's path (relative to the folder), size and sha256, so an
edited, added, removed or renamed file gives another fingerprint, and so another
cache entry. A file name that is not UTF-8 is read like any other, and shown with
escapes (``caf\\xe9.txt``).
"""

import fnmatch
import hashlib
import os
import re
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
            return f"{shown(self.given)} ({megabytes})"
        matching = "" if self.include == "*" else f" matching {self.include}"
        return f"{shown(self.given)} ({len(self.files):,} files{matching}, {megabytes})"

    def fingerprint(
        self, on_bytes: Callable[[int], None] | None = None, per_file: list | None = None
    ) -> str:
        """sha256 (hex) over every file's name, size and content hash, in order. A
        name is hashed as the bytes the file system holds, so a name that is not
        UTF-8 (``caf\\xe9.txt`` in Latin-1) has a fingerprint of its own.

        Args:
            on_bytes: called with the number of bytes after each block read (for a
                progress bar).
            per_file: if given, (name, size, sha256 hex) of each file is appended to
                it, the name as `shown` prints it.

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
                    f"{shown(source.path)} changed while the corpus was being read "
                    f"({source.size:,} bytes, then {size:,}); run again once it is written"
                )
            # surrogatepass: a name's undecodable bytes (lone surrogates) hash too.
            line = f"{source.name}\0{size}\0{content.hexdigest()}\n"
            digest.update(line.encode("utf-8", "surrogatepass"))
            if per_file is not None:
                per_file.append((shown(source.name), size, content.hexdigest()))
        return digest.hexdigest()


def unreadable(path: Path, error: OSError) -> CorpusError:
    """The error for a corpus file that cannot be opened or read."""
    return CorpusError(
        f"data.path: cannot read {shown(path)} ({error.strerror or error}); fix its permissions, "
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
    ``include`` says. A relative path is taken from the current folder.

    Each file is read once, however many ways lead to it: a recursive glob that also
    matches the folders holding it, a symbolic link or a hard link to a file already
    listed, or a linked folder that leads back to its parent (links to folders are
    followed, each folder once, so a loop ends). Of the names that lead to one file,
    the first in sorted order is kept. Wildcards and folder walks skip names that
    start with a dot, as the shell does; a name written out, or a pattern that starts
    with a dot (``'notes/.*'``), reaches them.

    Raises:
        CorpusError: for a path that does not exist (saying which folder a relative
            path is taken from), a folder or glob with no matching file (naming the
            kinds of file it does hold), empty patterns, or a file the corpus would
            hold but cannot reach: a broken link, or a folder that cannot be listed.
    """
    given = str(path)
    path = Path(path)
    if path.is_file():
        return CorpusSources(given, (SourceFile(path, path.name, _stat(path).st_size),))
    patterns = split_patterns(include)
    walker = _FolderWalker()
    if path.is_dir():
        root, candidates = path, walker.files_under(path)
    elif any(c in given for c in GLOB_CHARACTERS):
        matches = _glob(given)
        if not matches:
            raise CorpusError(
                f"data.path: nothing matches the glob {shown(given)}{_relative_note(path)}"
            )
        candidates = []
        for match in matches:
            candidates += walker.files_under(match) if match.is_dir() else [match]
        root = _common_folder(candidates) if candidates else Path(given).parent
    elif path.exists():  # links followed: /dev/stdin, a link to a pipe, is a pipe
        raise CorpusError(
            f"data.path: {shown(path)} is neither a file nor a folder (a pipe or a "
            "device?); save the text to a file and point data.path at it"
        )
    elif path.is_symlink():
        raise _broken_link(path)
    else:
        raise CorpusError(f"data.path: no such file or folder: {shown(path)}{_relative_note(path)}")
    named = [(_relative_name(file, root), file) for file in candidates]
    chosen, identities = [], set()
    for name, file in sorted(named):  # the first name of each file, in sorted order
        if not any(fnmatch.fnmatch(file.name, p) or fnmatch.fnmatch(name, p) for p in patterns):
            continue
        stat = _stat(file)
        if (stat.st_dev, stat.st_ino) in identities:
            continue  # a link to a file already listed, or the same file by another path
        identities.add((stat.st_dev, stat.st_ino))
        chosen.append(SourceFile(file, name, stat.st_size))
    if not chosen:
        raise CorpusError(_nothing_matched(given, candidates, include))
    return CorpusSources(given, tuple(chosen), ",".join(patterns))


def shown(path: str | Path) -> str:
    """``path`` as a message can print it: a byte that is not UTF-8 (which Python
    keeps in a file name as a lone surrogate, U+DC80-U+DCFF) as ``\\xHH``, another
    lone surrogate as ``\\uHHHH``, a control character (a newline in a name) as its
    escape; any other text as it is."""
    return _UNPRINTABLE.sub(_escape_character, str(path))


_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def _escape_character(match: re.Match) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's stand-in for the byte code - 0xDC00
        return f"\\x{code - 0xDC00:02x}"
    if 0xD800 <= code <= 0xDFFF:
        return f"\\u{code:04x}"
    return repr(match.group())[1:-1]  # '\\n', '\\x1b'


def _relative_note(path: Path) -> str:
    """For a message about a relative path: the folder it was taken from."""
    if path.is_absolute():
        return ""
    return f" (a relative path is taken from the folder you run in, {shown(Path.cwd())})"


def _relative_name(file: Path, root: Path) -> str:
    """``file``'s path relative to ``root``, with '/' separators (links not resolved,
    so a file in a linked folder is named by the link)."""
    return file.absolute().relative_to(root.absolute()).as_posix()


def _is_hidden(name: str) -> bool:
    return name.startswith(".")


def _listing(folder: Path) -> list[os.DirEntry]:
    """The entries of ``folder``; [] if it is not a folder (a glob's dead end).

    Raises:
        CorpusError: if it is a folder that cannot be listed (permissions).
    """
    try:
        with os.scandir(folder) as entries:
            return list(entries)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as e:
        raise CorpusError(
            f"data.path: cannot list {shown(folder)} ({e.strerror or e}), so its files "
            "would be left out; fix its permissions, or point data.path at files that "
            "do not include it"
        ) from None


def _identity(path: Path | os.DirEntry) -> tuple[int, int] | None:
    """(device, inode) of what ``path`` leads to (links followed), None if nothing."""
    try:
        stat = path.stat() if isinstance(path, os.DirEntry) else os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def _subfolders(folder: Path) -> list[Path]:
    """``folder``'s sub-folders (links to folders too), hidden names left out."""
    return [folder / e.name for e in _listing(folder) if not _is_hidden(e.name) and _is_dir(e)]


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()  # follows a link
    except OSError:
        return False


def _glob(pattern: str) -> list[Path]:
    """What a glob matches, files and folders, as `glob.glob` with ``recursive=True``
    would, except that a linked folder is entered once whichever way leads to it
    (`glob.glob` follows a link back to a parent until the path is too long, and
    lists the same files at every depth).

    ``**`` matches any number of folders (none too), ``*``, ``?`` and ``[...]`` one
    name's characters; a wildcard does not match a name starting with a dot unless the
    pattern starts with one.

    Raises:
        CorpusError: for a folder on the way that cannot be listed.
    """
    parts = Path(pattern).parts
    first_magic = next(
        (i for i, part in enumerate(parts) if any(c in part for c in GLOB_CHARACTERS)),
        len(parts),
    )
    matches: dict[Path, None] = {}  # ordered, without repeats
    expanded: set = set()  # (folder identity, part index) already expanded by '**'
    pending = [(Path(*parts[:first_magic]), first_magic)]
    while pending:
        folder, i = pending.pop()
        if i == len(parts):
            if os.path.lexists(folder):
                matches[folder] = None
            continue
        part = parts[i]
        if part == "**":
            key = (_identity(folder), i)
            if key[0] is None or key in expanded:
                continue
            expanded.add(key)
            pending.append((folder, i + 1))  # no folder at all
            pending += [(sub, i) for sub in _subfolders(folder)]
        elif any(c in part for c in GLOB_CHARACTERS):
            for entry in _listing(folder):
                if _is_hidden(entry.name) and not _is_hidden(part):
                    continue
                if fnmatch.fnmatch(entry.name, part):
                    pending.append((folder / entry.name, i + 1))
        else:
            pending.append((folder / part, i + 1))
    return sorted(matches)


class _FolderWalker:
    """Lists the files under folders, entering each folder (by identity, so through
    links too) once over all the folders it is given."""

    def __init__(self):
        self.entered: set[tuple[int, int]] = set()

    def files_under(self, folder: Path) -> list[Path]:
        """Every file under ``folder`` and its sub-folders, links followed, hidden
        names left out; a broken link is listed too (reading it says what is wrong),
        a pipe or device is not.

        Raises:
            CorpusError: for a folder that cannot be listed.
        """
        files = []
        pending = [folder]
        while pending:
            current = pending.pop()
            identity = _identity(current)
            if identity is None or identity in self.entered:
                continue
            self.entered.add(identity)
            for entry in _listing(current):
                if _is_hidden(entry.name):
                    continue
                path = current / entry.name
                if _is_dir(entry):
                    pending.append(path)
                elif entry.is_file() or not os.path.exists(path):  # a file, or a broken link
                    files.append(path)
        return files


def _common_folder(files: list[Path]) -> Path:
    """The deepest folder holding every file (their names are relative to it)."""
    return Path(os.path.commonpath([str(f.parent.absolute()) for f in files]))


def _stat(path: Path) -> os.stat_result:
    """``os.stat`` (links followed).

    Raises:
        CorpusError: naming a broken link, or a file that cannot be read.
    """
    try:
        return path.stat()
    except OSError as e:
        if path.is_symlink():
            raise _broken_link(path) from None
        raise unreadable(path, e) from None


def _broken_link(path: Path) -> CorpusError:
    try:
        target = f"a link to {shown(os.readlink(path))}, which does not exist or loops"
    except OSError:
        target = "a link that cannot be followed"
    return CorpusError(
        f"data.path: {shown(path)} is {target}; fix or remove the link, or leave it out "
        "with data.include"
    )


def _nothing_matched(given: str, candidates: list[Path], include: str) -> str:
    """Say what the folder or glob does hold, so that the fix is obvious."""
    if not candidates:
        return (
            f"data.path: {shown(given)} holds no files (hidden files are skipped); point it at text"
        )
    counts = Counter(shown(f.suffix or f.name) for f in candidates)
    kinds = sorted(counts.items(), key=lambda kind: (-kind[1], kind[0]))[:5]
    held = ", ".join(f"{n:,} {'*' + k if k.startswith('.') else k}" for k, n in kinds)
    return (
        f"data.path: none of the {len(candidates):,} files in {shown(given)} matches "
        f"data.include={include!r} (it holds {held}); set data.include to the files "
        "to train on, e.g. data.include='*.txt'"
    )
