"""Writing the export folder all at once: into a temporary folder beside it, renamed
into place when complete, so that a failed export leaves no half-written folder and
never touches a file it did not write.

An existing folder is replaced only with ``overwrite``, and only if it holds nothing
but what an export writes: any other file in it is the user's, and is never deleted.
"""

import os
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path

from common.signals import signals_raise
from hf_export.errors import ExportError

# What an export writes (tokenizer and generation files included); an --overwrite
# may replace a folder of these only.
EXPORT_FILES = frozenset(
    {
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "chat_template.jinja",
    }
)


def check_target(target: Path, overwrite: bool) -> None:
    """Refuse a target that is a file, or a non-empty folder without ``overwrite``, or
    one holding files an export does not write.

    Raises:
        ExportError: naming the fix.
    """
    if target.exists() and not target.is_dir():
        raise ExportError(f"--to {target} is a file, not a folder: choose another --to")
    if not target.is_dir() or not any(target.iterdir()):
        return
    if not overwrite:
        raise ExportError(
            f"--to {target} is not empty: add --overwrite to replace the export in it, "
            "or choose another --to"
        )
    foreign = sorted(p.name for p in target.iterdir() if p.name not in EXPORT_FILES)
    if foreign:
        raise ExportError(
            f"--to {target} holds files an export does not write ({', '.join(foreign[:5])}"
            f"{' ...' if len(foreign) > 5 else ''}); --overwrite replaces an export folder "
            "only: choose another --to, or move those files"
        )


def write_atomically(target: Path, overwrite: bool, write: Callable[[Path], None]) -> None:
    """Call ``write(folder)`` on a fresh temporary folder beside ``target``, then put it
    in target's place (an empty target folder, or with ``overwrite`` an earlier
    export, is replaced).

    Raises:
        ExportError: from `check_target`, before anything is written.
        Exception: whatever ``write`` raises; the temporary folder is removed and
            target is untouched.
        common.signals.Terminated: on SIGTERM or SIGHUP, likewise.
    """
    target = Path(target)
    check_target(target, overwrite)
    target.parent.mkdir(parents=True, exist_ok=True)
    # mkdir, not tempfile.mkdtemp: the folder gets the usual permissions (umask), not 0700.
    staging = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    old = None
    # SIGTERM and SIGHUP (kill, a closed terminal) would end the process and leave the
    # temporary folder, as large as the model: they raise, and it is removed.
    with signals_raise("removing the unfinished export"):
        try:
            staging.mkdir()
            write(staging)
            _usual_permissions(staging)
            if target.is_dir():
                check_target(target, overwrite)  # again: it may have changed meanwhile
                old = target.with_name(f"{staging.name}.old")
                target.rename(old)  # holds export files only (checked), or nothing
            staging.rename(target)
        except BaseException:
            if old is not None and not target.exists():
                old.rename(target)
            shutil.rmtree(staging, ignore_errors=True)
            raise
    if old is not None:
        shutil.rmtree(old)


def _usual_permissions(folder: Path) -> None:
    """Give the written files the permissions a new file gets here (0666 less the
    umask): transformers writes model.safetensors as 0600, readable by its owner only."""
    umask = os.umask(0)
    os.umask(umask)
    for path in folder.iterdir():
        path.chmod(0o666 & ~umask)
