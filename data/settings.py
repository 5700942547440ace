"""The `data:` section of a run config (which text, and how it is read and split), and
`setting`, the config field with its rules beside it that every section is made of.

DataConfig's keys are `data.prepare_corpus`'s arguments, by name. A run's checkpoint
stores the section (in its ``config``), and evaluate.py prepares the corpus from it as
the run did. `setting` lives here, at the bottom of the imports, so that the model's
section (`model.config.GPTConfig`) and the trainer's (`training.settings`) can use it
too; `training.config` checks the rules when a run starts.
"""

from dataclasses import dataclass, field
from typing import Literal

from data.corpus import DEFAULT_CACHE_DIR, DEFAULT_CORPUS_PATH
from data.normalization import Normalization
from data.sources import shown


def setting(
    default,
    doc: str,
    *,
    bounds: str | None = None,
    note: str | None = None,
    check=None,
    hyperparameter: bool = True,
    resume_may_change: bool = False,
):
    """A config field with its rules beside it, kept in ``field(metadata=...)``; the run
    config's validator and docs/configuration.md's table read them (`training.config`).

    Args:
        default: the value when nothing sets it.
        doc: what the key means (docs/configuration.md's table).
        bounds: the values allowed, as an interval (``"[0, 1)"``, ``"(0, 1]"``) or one
            bound (``"> 0"``, ``">= 0"``); null, where the type allows it, is never out.
        note: said in parentheses after the bounds when a value is out of them,
            e.g. ``"0 = off"``.
        check: a rule no bound states: a function of the value that returns the problem
            (the text after the key name) or None.
        hyperparameter: False for a setting of where or how to run, not of the
            experiment; it is left out of TensorBoard's HParams table.
        resume_may_change: True for a setting a resumed run may change without a note.
    """
    rules = {
        "doc": doc,
        "bounds": bounds,
        "note": note,
        "check": check,
        "hyperparameter": hyperparameter,
        "resume_may_change": resume_may_change,
    }
    return field(default=default, metadata=rules)


# The choices of data.decode_errors; the validator reads the allowed values from it.
DecodeErrors = Literal["strict", "replace"]


def _recordable_path(path: str) -> str | None:
    """A path the run's records (config.yaml, the checkpoint, TensorBoard) can hold:
    one whose bytes are UTF-8. (Files under it may have any name: they are recorded
    with escapes, see `data.sources.shown`.)"""
    if not any(0xDC80 <= ord(c) <= 0xDCFF for c in path):
        return None
    return (
        f"{shown(path)} holds bytes that are not UTF-8, which the run's config.yaml, "
        "checkpoint and TensorBoard cannot record; rename it to UTF-8 (convmv -f latin1 "
        "-t utf8 --notest NAME), or make a link with a UTF-8 name and give that "
        "(ln -s NAME corpus, then data.path=corpus)"
    )


def _some_pattern(include: str) -> str | None:
    if not include.replace(",", "").strip():
        return "is empty; use '*' for every file, or e.g. '*.c,*.h'"
    return None


@dataclass
class DataConfig:
    """The `data:` section: which text, and how it is read and split."""

    path: str = setting(
        DEFAULT_CORPUS_PATH,
        "what to train on: a UTF-8 text file, a folder (every file in it and its "
        "sub-folders, hidden ones skipped, each file once) or a glob such as "
        "`'books/*.txt'`, relative to the folder you run in; the default is the "
        "repository's Tiny Shakespeare, found from any folder",
        check=_recordable_path,
    )
    include: str = setting(
        "*",
        "comma-separated patterns of the files a folder or glob contributes, matched "
        "against each file's name and relative path, e.g. `*.c,*.h`",
        check=_some_pattern,
    )
    separator: str = setting(
        "\\n",
        "text put between two files, which are read in sorted order; escapes `\\n`, "
        "`\\t`, `\\\\`, `\\uHHHH` are understood (YAML: `separator: '\\n\\n'`; "
        "command line: `data.separator='\\n\\n'`, or `data.separator=` for none)",
    )
    val_fraction: float = setting(
        0.1,
        "share of the corpus held out for validation, just before the test split",
        bounds="(0, 1)",
    )
    test_fraction: float = setting(
        0.0,
        "share of the corpus, at its very end, held out as a test split that training and "
        "model selection never read (`evaluate.py --split test`); in [0, 1 - val_fraction)",
    )
    cache_dir: str = setting(
        DEFAULT_CACHE_DIR,
        "where prepared token arrays are cached (the default is the repository's "
        "`data/cache`, found from any folder; a path you give is the current folder's)",
        check=_recordable_path,
        hyperparameter=False,
    )
    decode_errors: DecodeErrors = setting(
        "strict",
        "`strict` stops at invalid UTF-8; `replace` swaps bad bytes for U+FFFD. Either way "
        "a file that looks binary (a NUL byte, or over 10% of its bytes invalid) is refused",
    )
    normalization: Normalization = setting(
        "nfc",
        "Unicode form of the corpus and of every prompt, prompt file and stop string: `nfc` "
        "(composed, as keyboards type), `nfd` (decomposed, as macOS file names), `nfkc` / "
        "`nfkd` (also fold compatibility variants such as full-width letters), or `none` "
        "(code points kept as the file has them); recorded in the checkpoint",
    )
