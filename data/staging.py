"""Temporary folders in the corpus cache that an interrupted preparation cannot leave
behind.

A cache entry is written into ``<cache_dir>/.tmp-<random>/`` and renamed into place
only when complete, so a reader never sees half an entry. The temporary folder goes
away however the preparation ends:

- an error or Ctrl-C (KeyboardInterrupt): removed on the way out;
- SIGTERM or SIGHUP (``kill``, ``docker stop``, a scheduler's pre-emption, a closed
  terminal): their default action ends the process at once, with no Python cleanup,
  so while a folder is held they raise `common.signals.Terminated` (a SystemExit with
  status 128 + the signal number, the shell's convention) instead; the folder is
  removed, the code above cleans up in turn, and the process exits with that status;
- SIGKILL, a crash or a power cut: nothing can run, so the next preparation in the
  same cache removes it (`remove_stale`). Each folder's owner holds an advisory lock
  (``flock``) on ``.tmp-<random>.lock`` beside it from before the folder exists until
  after it is gone; a folder whose lock can be taken has no living owner, and a folder
  without a lock file was left by a crash before this scheme (or by an owner killed
  while removing it). Where there are no advisory locks (Windows), stale folders are
  left alone, as removing a live one would break another run.
"""

import contextlib
import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

from common.signals import signals_raise

try:
    import fcntl
except ImportError:  # Windows: no advisory locks
    fcntl = None

PREFIX = ".tmp-"
LOCK_SUFFIX = ".lock"
# What the line printed at SIGTERM or SIGHUP says is being done.
CACHE_ENTRY_CLEANUP = "removing the unfinished cache entry"


@contextlib.contextmanager
def staging_folder(cache_dir: Path) -> Iterator[Path]:
    """A new empty folder ``<cache_dir>/.tmp-<random>``, locked as its owner's, for the
    duration of the block; removed on leaving it, however it is left (the block
    renames it into place when it succeeds), SIGTERM and SIGHUP included.

    Raises:
        OSError: if the folder cannot be created.
    """
    with signals_raise(CACHE_ENTRY_CLEANUP):
        lock_path, lock_fd = _new_lock(cache_dir)
        folder = lock_path.with_name(lock_path.name.removesuffix(LOCK_SUFFIX))
        try:
            folder.mkdir()
            yield folder
        finally:
            # The folder first, then its lock: a folder never outlives its lock file
            # unless this process is killed in between (remove_stale handles that).
            shutil.rmtree(folder, ignore_errors=True)
            with contextlib.suppress(OSError):
                lock_path.unlink()
            os.close(lock_fd)


def remove_stale(cache_dir: Path) -> list[str]:
    """Remove the temporary folders in ``cache_dir`` whose owner is gone (see the
    module docstring), with their lock files.

    Returns:
        The names removed.
    """
    if fcntl is None:
        return []
    try:
        names = {e.name for e in os.scandir(cache_dir) if e.name.startswith(PREFIX)}
    except OSError:
        return []
    removed = []
    for name in sorted(n for n in names if not n.endswith(LOCK_SUFFIX)):
        lock_path = cache_dir / (name + LOCK_SUFFIX)
        try:
            lock_fd = os.open(lock_path, os.O_RDWR)
        except FileNotFoundError:
            lock_fd = None  # no owner has a lock on it
        except OSError:
            continue
        try:
            if lock_fd is not None and not _try_lock(lock_fd):
                continue  # its owner is alive, preparing
            shutil.rmtree(cache_dir / name, ignore_errors=True)
            if lock_fd is not None:
                with contextlib.suppress(OSError):
                    lock_path.unlink()
            removed.append(name)
        finally:
            if lock_fd is not None:
                os.close(lock_fd)
    return removed


def _new_lock(cache_dir: Path) -> tuple[Path, int]:
    """Create ``<cache_dir>/.tmp-<random>.lock`` (a name no one else has) and lock it."""
    while True:
        path = cache_dir / f"{PREFIX}{secrets.token_hex(6)}{LOCK_SUFFIX}"
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
        except FileExistsError:
            continue
        if fcntl is not None:
            # A new file: no one else holds it. A file system without flock (some
            # network and FUSE ones) refuses: the folder is then never taken for
            # stale, as its lock cannot be taken either.
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_EX)
        return path, fd


def _try_lock(fd: int) -> bool:
    """Take an exclusive lock on ``fd`` without waiting; False if another holds it, or
    if the file system has no such locks (then no one can be told dead)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True
