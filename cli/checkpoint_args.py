"""The two flags that name a checkpoint (sample.py, explore_attention.py), and the
rule that turns them into a file: a bare name is looked up in the run folder.

    python sample.py --out-dir runs/korean                 # runs/korean/ckpt.pt
    python sample.py --out-dir runs/korean --checkpoint best.pt
    python sample.py --checkpoint downloads/model.pt       # a path of its own
"""

import difflib
from pathlib import Path

import yaml

from model.checkpoint import (
    BEST_NAME,
    CKPT_NAME,
    CONFIG_NAME,
    CheckpointError,
    run_in_progress,
)

# What --help says of the two flags; docs/sampling.md's flag table says the same words.
OUT_DIR_HELP = "the run folder"
CHECKPOINT_HELP = (
    "a file name in the run folder (ckpt.pt: the latest, best.pt: the lowest validation "
    "loss), or a path with a folder in it, taken as it is"
)


def add_checkpoint_arguments(parser) -> None:
    """Add --out-dir and --checkpoint, the two flags that name a checkpoint, to an
    argparse parser (sample.py and explore_attention.py share them); resolve them
    with `resolve_checkpoint_path`."""
    parser.add_argument("--out-dir", default="runs/shakespeare_char_cpu", help=OUT_DIR_HELP)
    parser.add_argument("--checkpoint", default=CKPT_NAME, help=CHECKPOINT_HELP)


def resolve_checkpoint_path(out_dir: str | Path, checkpoint: str) -> Path:
    """A bare file name (ckpt.pt, best.pt) is looked up in out_dir; anything with a
    folder in it is a path of its own.

    Raises:
        CheckpointError: if the file is not there, saying how a run makes it.
    """
    given = Path(checkpoint)
    path = given if len(given.parts) > 1 or given.is_absolute() else Path(out_dir) / given
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}: {_missing_checkpoint_hint(path)}")
    return path


def _missing_checkpoint_hint(path: Path) -> str:
    """What to do about a checkpoint that is not there, judged from its folder: the
    checkpoints it does hold (and the closest name), whether its run is still before
    its first evaluation (it holds the folder's lock) or stopped before it, or the
    flags that read a file given as the folder."""
    # The trainer's module, on this error path only: sampling starts without it.
    from training.run_folder import training_command

    folder = path.parent
    if folder.is_file():  # --out-dir named the checkpoint itself, or another file
        # A bare name would be looked up in the default run folder: ./ makes it a path.
        as_path = folder if len(folder.parts) > 1 or folder.is_absolute() else f"./{folder}"
        return (
            f"{folder} is a file, not a run folder; give --checkpoint {as_path} to read "
            f"that file, or --out-dir {folder.parent}"
        )
    if not folder.is_dir():
        return f"there is no run folder {folder}; train one first: {training_command(folder)}"
    held = sorted(p.name for p in folder.glob("*.pt") if p.is_file())
    if path.name == BEST_NAME and held == [CKPT_NAME]:
        return "best.pt appears at the run's first evaluation; ckpt.pt is there"
    if held:
        close = difflib.get_close_matches(path.name, held, n=1, cutoff=0.5)
        meant = f"; did you mean --checkpoint {close[0]}?" if close else ""
        return f"{folder} holds {', '.join(held)}{meant}"
    if (folder / CONFIG_NAME).is_file():
        try:
            config = yaml.safe_load((folder / CONFIG_NAME).read_text(encoding="utf-8"))
            step = f"step {int(config['train']['eval_interval'])}"
        except (OSError, ValueError, TypeError, KeyError, yaml.YAMLError):
            step = "step train.eval_interval"
        running = run_in_progress(folder)
        wait = (
            f"has not reached its first evaluation ({step}), where it writes "
            f"{path.name}; wait for it, or look at what the run printed"
        )
        stopped = (
            f"stopped before its first evaluation ({step}) and wrote no checkpoint; "
            "look at what it printed, and train again: "
            + training_command(folder, "train.overwrite=true")
        )
        if running:
            return f"the run in {folder} is still training and {wait}"
        if running is False:
            return f"the run in {folder} {stopped}"
        unknown = "holds no checkpoint: if it is still training, it"
        return f"the run in {folder} {unknown} {wait}; if it {stopped}"
    return (
        f"{folder} holds no run; a training run writes {path.name} there at its first "
        f"evaluation (step train.eval_interval): {training_command(folder)}"
    )
