"""A run's snapshots, as the page and the commands read them: compact copies of the
weights at steps spread over training (`training.snapshots` writes them).

    runs/<name>/snapshots/index.json        [{step, val_loss, val_chars, sample, file, best}]
    runs/<name>/snapshots/step_0000340.pt   one snapshot: a weights-only checkpoint

Each snapshot file is a checkpoint of this project (``model.checkpoint.load_checkpoint``
and ``model_from_checkpoint`` read it) whose weights are stored in float16: half the
bytes, and the page's numbers are shown to 2-4 decimals, far above float16's rounding
(about 1e-3 relative). Loading copies them into the model's float32 parameters.
"""

import json
from pathlib import Path

SNAPSHOTS_DIR = "snapshots"  # inside the run folder
INDEX_NAME = "index.json"


def snapshot_name(step: int) -> str:
    """The file name of the snapshot after ``step`` optimizer steps."""
    return f"step_{step:07d}.pt"


class SnapshotError(ValueError):
    """A run has no snapshots, or its index cannot be read; the message says what to do."""


def read_snapshot_index(run_dir: str | Path) -> list[dict]:
    """The snapshots of the run in ``run_dir``, sorted by step; [] if it has none.

    Each entry: ``step`` (optimizer steps), ``val_loss`` (nats/char), ``val_chars``
    (validation characters it was scored on), ``sample`` (text continuing the run's
    sample prompt; "" without one), ``file`` (name in the snapshots folder) and
    ``best`` (true for the lowest validation loss of the run's evaluations so far).

    Raises:
        SnapshotError: if the index exists but is not readable JSON.
    """
    path = Path(run_dir) / SNAPSHOTS_DIR / INDEX_NAME
    if not path.is_file():
        return []
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))["snapshots"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SnapshotError(
            f"{path} is not a readable snapshot index ({type(e).__name__}); remove the "
            f"{SNAPSHOTS_DIR} folder, or train again to write it afresh"
        ) from None
    return sorted(entries, key=lambda e: e["step"])


def nearest_snapshot(run_dir: str | Path, step: int) -> tuple[Path, dict]:
    """The snapshot of the run in ``run_dir`` nearest to ``step`` (the earlier of two
    equally near).

    Returns:
        (path of its file, its index entry).

    Raises:
        SnapshotError: if the run has no snapshots.
    """
    entries = read_snapshot_index(run_dir)
    if not entries:
        raise SnapshotError(
            f"{run_dir} has no snapshots ({SNAPSHOTS_DIR}/{INDEX_NAME}); runs keep them "
            "unless train.snapshots=0: train with it above 0 to have them"
        )
    entry = min(entries, key=lambda e: (abs(e["step"] - step), e["step"]))
    return Path(run_dir) / SNAPSHOTS_DIR / entry["file"], entry
