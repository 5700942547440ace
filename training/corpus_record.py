"""What corpus a run trained on, as its checkpoint records it, and the resume check
that refuses a corpus that has changed since.

A checkpoint's ``corpus`` entry:

    files    [[name, size in bytes, sha256 hex], ...] of data.path's files, in order
    splits   {"train": [characters, sha256 hex of the token ids], "val": [...],
              "test": [...]}

An added, removed or edited file, or lines shuffled in one, would otherwise resume
without a word, and text the run validated on could become training text. A resume
where a split's text differs is refused, naming what changed (a renamed file that
leaves every split's text as it was is no change); ``train.accept_changed_corpus=true``
goes on anyway, says so at the start, and the run's checkpoints then record the new
corpus. A checkpoint written before this entry existed resumes, with a note that its
corpus could not be checked.
"""

import hashlib
from pathlib import Path

import numpy as np

from data.corpus import Corpus
from training.config import ConfigError

CORPUS_KEY = "corpus"  # the checkpoint's entry
HASH_BLOCK_BYTES = 8 << 20
SHOWN_FILES = 5  # file names listed per kind of change; the rest are counted


def split_digest(ids: np.ndarray) -> str:
    """sha256 (hex) of a split's token ids as bytes. A split mapped from the cache's
    token file is read from the file, block by block (touching a memory map's pages
    would count them as this process's memory, see `data.batches`)."""
    digest = hashlib.sha256()
    if isinstance(ids, np.memmap) and ids.filename is not None and len(ids):
        remaining = len(ids) * ids.itemsize
        with open(ids.filename, "rb") as f:
            f.seek(ids.offset)
            while remaining > 0:
                block = f.read(min(HASH_BLOCK_BYTES, remaining))
                if not block:
                    break
                digest.update(block)
                remaining -= len(block)
        return digest.hexdigest()
    step = max(1, HASH_BLOCK_BYTES // max(1, ids.itemsize))
    for start in range(0, len(ids), step):
        digest.update(np.ascontiguousarray(ids[start : start + step]).tobytes())
    return digest.hexdigest()


def corpus_record(corpus: Corpus) -> dict:
    """The checkpoint's ``corpus`` entry for ``corpus`` (see the module docstring)."""
    splits = {"train": corpus.train_ids, "val": corpus.val_ids, "test": corpus.test_ids}
    return {
        "files": [[name, size, sha] for name, size, sha in corpus.files],
        "splits": {name: [len(ids), split_digest(ids)] for name, ids in splits.items()},
    }


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:SHOWN_FILES])
    more = len(names) - SHOWN_FILES
    return shown + (f" and {more:,} more" if more > 0 else "")


def corpus_changes(saved: dict, current: dict) -> list[str]:
    """What differs between two ``corpus`` records, one line per kind of change:
    files added, removed or edited, and the splits whose text differs. Nothing when
    every split's text is the same (files renamed, or moved to another folder, give
    the run the same text)."""
    words = {"train": "training", "val": "validation", "test": "test"}
    splits = []
    for split, word in words.items():
        (n_old, sha_old), (n_new, sha_new) = saved["splits"][split], current["splits"][split]
        if sha_old != sha_new:
            sizes = f"{n_old:,} -> {n_new:,} characters" if n_old != n_new else "same length"
            splits.append(f"the {word} split's text differs ({sizes})")
    if not splits:
        return []
    old = {name: (size, sha) for name, size, sha in saved["files"]}
    new = {name: (size, sha) for name, size, sha in current["files"]}
    changes = []
    added = [name for name in new if name not in old]
    removed = [name for name in old if name not in new]
    edited = [name for name in new if name in old and new[name] != old[name]]
    if added:
        changes.append(f"files added: {_names(added)}")
    if removed:
        changes.append(f"files removed: {_names(removed)}")
    if edited:
        changes.append(f"files changed: {_names(edited)}")
    return changes + splits


def check_corpus_on_resume(ckpt: dict, current: dict, accept: bool, path: Path) -> list[str]:
    """Whether a run may resume from ``ckpt`` on the corpus whose record is ``current``.

    Args:
        ckpt: the loaded checkpoint.
        current: `corpus_record` of the corpus the run reads now.
        accept: train.accept_changed_corpus.
        path: the checkpoint's file, for the messages.

    Returns:
        Lines to say at the start: that a changed corpus was accepted, or that the
        checkpoint predates corpus records; none for the same corpus.

    Raises:
        ConfigError: naming what changed and the ways to go on, if the corpus differs
            and ``accept`` is False.
    """
    saved = ckpt.get(CORPUS_KEY)
    if saved is None:
        return [
            f"note: {path} was written before checkpoints recorded their corpus: the "
            "corpus cannot be checked against the run's (the checkpoints this run "
            "writes record it)"
        ]
    changes = corpus_changes(saved, current)
    if not changes:
        return []
    if accept:
        return [
            "note: train.accept_changed_corpus=true: resuming on a corpus that changed since "
            f"step {ckpt['iter_num']} (" + "; ".join(changes) + "): validation losses from "
            "before and after do not compare"
        ]
    raise ConfigError(
        f"cannot resume from {path}: the corpus has changed since the checkpoint was "
        "written:\n  - " + "\n  - ".join(changes) + "\nIts validation losses would not "
        "compare, and text the run validated on may now be training text. Resume on the "
        "corpus as it was; or start a new run (train.resume=false train.overwrite=true, "
        "or another out_dir); or go on with this corpus: train.accept_changed_corpus=true"
    )
