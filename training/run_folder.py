"""The run folder (``out_dir``): what a run leaves there, and the rules that keep two
runs, or a new run and an old one, from spoiling each other's files.

    ckpt.pt        latest training state (resume from it)
    best.pt        weights with the lowest validation loss
    config.yaml    the config as given
    events.out.tfevents.*   TensorBoard events
    snapshots/     float16 copies of the weights over training (training.snapshots)
    .lock          held while a run writes here

- A new run refuses a folder that holds an earlier run, unless asked to resume
  (train.resume) or to replace it (train.overwrite). Replacing keeps the earlier run
  recoverable until the new one is safe: once the new run's input has been checked,
  the earlier files move aside into ``.replaced-run/``, which is deleted when the new
  run has written its first checkpoint, and moved back if it ends without one. After
  a kill (``kill -9``, a power cut) in between, the next run in the folder moves them
  back before anything else, and says so.
- One run at a time: an exclusive lock on ``.lock``, released when the process ends.
- A start that fails on bad input leaves nothing behind: the folders and the lock it
  created are removed again.
- So does a new run that ends before writing a checkpoint (an error, a crash on the
  first step, a second Ctrl-C): its config.yaml and event files, with nothing to
  resume from, would only make the same command refuse the folder as "an earlier
  run's". A run stopped by Ctrl-C or SIGTERM writes a checkpoint, and keeps it all.
"""

import os
import shlex
import shutil
from pathlib import Path

import yaml

from data.sources import shown
from model.checkpoint import (
    BEST_NAME,
    CKPT_NAME,
    CONFIG_NAME,
    LOCK_NAME,
    run_in_progress,
    temporary_path,
)
from training.config import SHIPPED_CONFIGS, ConfigError
from viz.snapshots import SNAPSHOTS_DIR

# Where train.overwrite keeps the earlier run until the new one has a checkpoint.
REPLACED_NAME = ".replaced-run"


def run_files(out_dir: Path) -> list[Path]:
    """What a run leaves in its folder: checkpoints, config.yaml, TensorBoard events."""
    names = (CKPT_NAME, BEST_NAME, CONFIG_NAME)
    return [out_dir / n for n in names if (out_dir / n).exists()] + sorted(
        out_dir.glob("events.out.tfevents*")
    )


class RunFolder:
    """A run's claim on its ``out_dir``.

    Construction checks the folder against the run's intent and, on the main process,
    creates it and takes the lock; `release` gives it back.

    Args:
        out_dir: the run folder.
        resume: continue the run whose checkpoint is there.
        overwrite: replace an earlier run there (see `replace_earlier_run`).
        lock: take the folder (False on the other ranks of a data-parallel run, which
            write nothing).

    Attributes:
        resume_path: the checkpoint to resume from, or None for a new run.

    Raises:
        ConfigError: if a new run would overwrite an earlier run's files, a resume
            finds no checkpoint, the folder cannot be created (or a file stands in its
            place), another run holds it, or its path is not UTF-8.
    """

    def __init__(self, out_dir: Path, resume: bool, overwrite: bool, lock: bool = True):
        self.out_dir = Path(out_dir)
        self.overwrite = overwrite
        _check_utf8_name(self.out_dir)
        _check_no_file_in_the_way(self.out_dir)
        # A run still before its first checkpoint has left files that look like an
        # earlier run's: say that it is running, not that it may be overwritten.
        if lock and run_in_progress(self.out_dir):
            raise ConfigError(self._held_message())
        # Lines for the start of the run: an earlier run put back (see the docstring).
        self.notes = [self._recover_replaced_run()] if lock else []
        self.notes = [note for note in self.notes if note]
        self.restored: list[str] = []  # the earlier run's files moved back by `release`
        self.resume_path = self._check(resume, overwrite)
        # What this run made, removed again if it fails to start (or to save).
        self._made_lock_file = False
        self._wrote_files = False  # config.yaml and the event files: see `start`
        self._made_folders: list[Path] = []  # innermost first, the order to remove them
        self._lock = self._take_lock() if lock else None

    def _check(self, resume: bool, overwrite: bool) -> Path | None:
        ckpt_path = self.out_dir / CKPT_NAME
        existing = run_files(self.out_dir)
        if resume:
            if not ckpt_path.is_file():
                raise ConfigError(
                    f"train.resume=true but there is no checkpoint at {ckpt_path}; "
                    + self._fresh_start_advice(existing)
                )
            return ckpt_path
        if existing and not overwrite:
            what = "a checkpoint" if ckpt_path.is_file() else "files of an earlier run"
            raise ConfigError(
                f"{self.out_dir} already holds {what} "
                f"({', '.join(p.name for p in existing[:3])}). "
                + (
                    "Continue it with train.resume=true, choose"
                    if ckpt_path.is_file()
                    else "Choose"
                )
                + " another out_dir=..., or replace it with train.overwrite=true"
            )
        return None

    def _fresh_start_advice(self, existing: list[Path]) -> str:
        """How to start a new run in a folder with no checkpoint: one piece of advice
        that works as given (the folder's earlier files, if any, need overwrite)."""
        if not existing:
            return "to start a new run there, give train.resume=false (or leave it out)"
        return (
            f"{self.out_dir} holds only {', '.join(p.name for p in existing[:3])} of an "
            "earlier run that never saved one. To start a new run there in their place, "
            "give train.resume=false train.overwrite=true; or choose another out_dir=..."
        )

    def _take_lock(self):
        """Hold an exclusive lock on out_dir/.lock for this process's lifetime, so two
        runs cannot write into one folder; the OS releases it when the process ends."""
        missing = [p for p in (self.out_dir, *self.out_dir.parents) if not p.exists()]
        lock_path = self.out_dir / LOCK_NAME
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            self._made_folders = missing
            self._made_lock_file = not lock_path.exists()
            lock = open(lock_path, "a", encoding="utf-8")  # noqa: SIM115 (held open)
        except OSError as e:
            raise ConfigError(
                f"out_dir: cannot create or write {self.out_dir}: {e.strerror}"
            ) from None
        try:
            import fcntl
        except ImportError:  # Windows: no advisory locks; the files check remains
            return lock
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            self._made_lock_file, self._made_folders = False, []  # the other run's
            raise ConfigError(self._held_message()) from None
        # The folder is this run's now: a save cut short by SIGKILL or a power cut
        # left its temporary file, as large as a checkpoint, which nothing else removes.
        for name in (CKPT_NAME, BEST_NAME, CONFIG_NAME):
            temporary_path(self.out_dir / name).unlink(missing_ok=True)
        return lock

    def _recover_replaced_run(self) -> str:
        """Settle a ``.replaced-run/`` left by a replacing run that was killed: delete
        it if that run wrote a checkpoint, else put its files back in place of what
        that run wrote. Returns a line saying which, or "" when there is none."""
        aside = self.out_dir / REPLACED_NAME
        if not aside.is_dir():
            return ""
        if (self.out_dir / CKPT_NAME).exists():  # the replacing run's own: it is safe
            shutil.rmtree(aside)
            return ""
        for path in run_files(self.out_dir):  # the killed run's config.yaml and events
            path.unlink()
        names = _move_files(aside, self.out_dir)
        return (
            f"note: a run that replaced the one in {self.out_dir} (train.overwrite) "
            f"ended before its first checkpoint: put the earlier run back ({', '.join(names)})"
        )

    def _held_message(self) -> str:
        return (
            f"another training run is writing to {self.out_dir}; wait for it or "
            "choose another out_dir=..."
        )

    def start(self, given_config: dict, comment: str = "") -> None:
        """Called once the run's input has been checked and training begins: with
        train.overwrite on a new run, move the earlier run's files aside (until
        `saved`) and add a line to ``notes`` saying where; then write config.yaml, the
        config as given (``RunConfig.to_dict()``), atomically, after ``comment`` (YAML
        comment lines, e.g. the parent of a fine-tuning run): a resume rewrites the
        run's own."""
        if self.overwrite and self.resume_path is None and run_files(self.out_dir):
            aside = self.out_dir / REPLACED_NAME
            aside.mkdir()
            # the earlier run's snapshots go aside with it (train.snapshots)
            snapshots = (
                [self.out_dir / SNAPSHOTS_DIR] if (self.out_dir / SNAPSHOTS_DIR).is_dir() else []
            )
            moved = _move_files(self.out_dir, aside, run_files(self.out_dir) + snapshots)
            self.notes.append(
                f"train.overwrite: the earlier run ({', '.join(sorted(moved))}) waits in {aside} "
                "until this run writes its first checkpoint, then is deleted; if this run "
                "ends before, it is put back"
            )
        self._wrote_files = self.resume_path is None  # from here on, all of run_files
        config = self.out_dir / CONFIG_NAME
        temporary = temporary_path(config)
        temporary.write_text(
            comment + yaml.safe_dump(given_config, sort_keys=False, allow_unicode=True),
            encoding="utf-8",
        )
        os.replace(temporary, config)

    def saved(self) -> None:
        """Called once a checkpoint is written: an earlier run this one replaces is no
        longer needed to fall back on, and is deleted."""
        shutil.rmtree(self.out_dir / REPLACED_NAME, ignore_errors=True)

    def release(self, started: bool = True) -> list[str]:
        """Let go of the lock. If the run never started (bad input), or is a new run
        that ends without a checkpoint, also remove what it made: its config.yaml and
        event files, the lock file and the folders it created, so that it leaves
        nothing (the module docstring says why).

        Returns:
            The names of the run files removed (config.yaml, events.out.tfevents.*).
        """
        held = self._lock is not None
        if held:
            self._lock.close()
            self._lock = None
        removed = []
        unsaved = self.resume_path is None and not (self.out_dir / CKPT_NAME).exists()
        if held and (not started or unsaved):
            if self._wrote_files:  # a new run's: every run file there is this run's
                for path in run_files(self.out_dir):
                    path.unlink(missing_ok=True)
                    removed.append(path.name)
                shutil.rmtree(self.out_dir / SNAPSHOTS_DIR, ignore_errors=True)
            if (self.out_dir / REPLACED_NAME).is_dir():  # the run it was to replace
                self.restored = _move_files(self.out_dir / REPLACED_NAME, self.out_dir)
            if self._made_lock_file:
                (self.out_dir / LOCK_NAME).unlink(missing_ok=True)
            for folder in self._made_folders:
                try:
                    folder.rmdir()
                except OSError:
                    break  # not empty: something else is in there now
        self._made_lock_file, self._made_folders, self._wrote_files = False, [], False
        return removed


def _move_files(source: Path, target: Path, paths: list[Path] | None = None) -> list[str]:
    """Move ``paths`` (all files and folders in ``source`` if None) into the folder
    ``target`` (renames: nothing is copied; a folder already at the target, such as a
    failed run's snapshots, is replaced); an emptied ``source`` other than the run
    folder itself is removed. Returns the names moved."""
    paths = sorted(source.iterdir()) if paths is None else paths
    for path in paths:
        if path.is_dir() and (target / path.name).is_dir():
            shutil.rmtree(target / path.name)
        os.replace(path, target / path.name)
    if source.name == REPLACED_NAME:
        source.rmdir()
    return [p.name for p in paths]


def _check_utf8_name(out_dir: Path) -> None:
    """Refuse a run folder whose path holds bytes that are not UTF-8 (which Python
    keeps as lone surrogates): TensorBoard's event writer encodes its file name as
    UTF-8 and would fail once training has begun.

    Raises:
        ConfigError: naming the path with the bytes shown as escapes.
    """
    try:
        str(out_dir).encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(
            f"out_dir={shown(out_dir)} holds bytes that are not UTF-8, and TensorBoard's "
            "event files cannot be written under such a name: choose an out_dir spelt in "
            "UTF-8"
        ) from None


def _check_no_file_in_the_way(out_dir: Path) -> None:
    """Refuse an out_dir that is, or lies under, a file: creating it would fail with
    a bare "File exists" or "Not a directory".

    Raises:
        ConfigError: naming the file and the fix.
    """
    in_the_way = None
    for path in (out_dir, *out_dir.parents):
        try:
            if path.exists() and not path.is_dir():
                in_the_way = path
                break
        except OSError:  # a folder it cannot look into: creating out_dir will say so
            break
    if in_the_way is not None:
        where = f"out_dir={shown(out_dir)}"
        if in_the_way != out_dir:
            where += f": {shown(in_the_way)}"
        raise ConfigError(
            f"{where} is a file, not a folder. Choose another out_dir=..., or move the file away"
        )


# What a training command needs where nothing says which recipe or corpus a folder is for.
RECIPE_PLACEHOLDER, TEXT_PLACEHOLDER = "RECIPE", "TEXT"


def _from_here(path: Path) -> str:
    """``path`` relative to the current folder where it lies under it, for a command
    to type here; quoted for the shell where it needs it."""
    try:
        path = path.resolve().relative_to(Path.cwd().resolve())
    except (OSError, ValueError):
        pass
    return shlex.quote(str(path))


def training_command(folder: str | Path, *settings: str) -> str:
    """The train.py command that trains the run of ``folder`` (again), with
    ``settings`` (``section.key=value``; an ``out_dir=`` among them sends it elsewhere)
    added: the way a hint that suggests training names the right model.

    - The folder holds a run's config.yaml: that config, ``--config <folder>/config.yaml``
      (what the run was given, out_dir included), with ``train.resume=false`` if it
      had resumed, and ``out_dir=<folder>`` if the folder has moved since.
    - Else, the folder is the default out_dir of a shipped recipe (``runs/<stem>``
      from here, for ``configs/<stem>.yaml``): that recipe.
    - Else nothing says which model the folder is for: the command has placeholders,
      RECIPE and TEXT, and a sentence saying what to put there.

    Returns:
        The command, or the command followed by ", with RECIPE ..." where the user
        must supply parts.
    """
    folder = Path(folder)
    given = {s.split("=", 1)[0] for s in settings}
    config = _read_config(folder / CONFIG_NAME)
    if config is not None:
        words = ["--config", _from_here(folder / CONFIG_NAME)]
        train = config.get("train") if isinstance(config.get("train"), dict) else {}
        if train.get("resume") is True and "train.resume" not in given:
            words.append("train.resume=false")
        recorded = config.get("out_dir")
        moved = not isinstance(recorded, str) or not _same_folder(Path(recorded), folder)
        if moved and "out_dir" not in given:
            words.append(f"out_dir={_from_here(folder)}")
        return " ".join(["python train.py", *words, *settings])
    recipe = SHIPPED_CONFIGS / f"{folder.name}.yaml"
    if recipe.is_file() and _same_folder(Path("runs") / folder.name, folder):
        return " ".join(["python train.py", "--config", _from_here(recipe), *settings])
    out_dir = [] if "out_dir" in given else [f"out_dir={_from_here(folder)}"]
    example = _from_here(SHIPPED_CONFIGS / "shakespeare_char_cpu.yaml")
    words = ["--config", RECIPE_PLACEHOLDER, f"data.path={TEXT_PLACEHOLDER}", *out_dir]
    return (
        " ".join(["python train.py", *words, *settings])
        + f", with {RECIPE_PLACEHOLDER} the recipe you mean (e.g. {example}) and "
        f"{TEXT_PLACEHOLDER} your corpus (leave data.path out for Tiny Shakespeare)"
    )


def _read_config(path: Path) -> dict | None:
    """A run's config.yaml as a mapping, or None if it is missing or unreadable."""
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    return config if isinstance(config, dict) else None


def _same_folder(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False
