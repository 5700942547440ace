"""The two flags that name a checkpoint (sample.py, explore_attention.py), and the
rule that turns them into a file: a bare name is looked up in the run folder.

    python sample.py --out-dir runs/korean                 # runs/korean/ckpt.pt
    python sample.py --out-dir runs/korean --checkpoint best.pt
    python sample.py --checkpoint downloads/model.pt       # a path of its own
"""

from pathlib import Path

import yaml

from model.checkpoint import BEST_NAME, CKPT_NAME, CONFIG_NAME, CheckpointError


def add_checkpoint_arguments(parser) -> None:
    """Add --out-dir and --checkpoint, the two flags that name a checkpoint, to an
    argparse parser (sample.py and explore_attention.py share them); resolve them
    with `resolve_checkpoint_path`."""
    parser.add_argument("--out-dir", default="runs/shakespeare_char_cpu", help="run folder")
    parser.add_argument(
        "--checkpoint",
        default=CKPT_NAME,
        help="file name in --out-dir (ckpt.pt: latest, best.pt: best validation), or a "
        "path with a folder in it",
    )


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
    """What to do about a checkpoint that is not there, judged from its folder."""
    folder = path.parent
    train = f"python train.py --config configs/shakespeare_char_cpu.yaml out_dir={folder}"
    if path.name == BEST_NAME and (folder / CKPT_NAME).is_file():
        return "best.pt appears at the run's first evaluation; ckpt.pt is there"
    if not folder.is_dir():
        return f"there is no run folder {folder}; train one first: {train}"
    if (folder / CONFIG_NAME).is_file():
        try:
            config = yaml.safe_load((folder / CONFIG_NAME).read_text(encoding="utf-8"))
            step = f"step {int(config['train']['eval_interval'])}"
        except (OSError, ValueError, TypeError, KeyError, yaml.YAMLError):
            step = "step train.eval_interval"
        return (
            f"the run in {folder} has not reached its first evaluation ({step}), where "
            f"it writes {path.name}; wait for it, or look at what the run printed"
        )
    return (
        f"{folder} holds no run; a training run writes {path.name} there at its first "
        f"evaluation (step train.eval_interval): {train}"
    )
