"""Snapshots: compact copies of a run's weights at steps spread over training, so the
page and explore_attention.py can show the model as it was at any of them (the format
and the readers are `viz.snapshots`'s).

Which steps: ``train.snapshots`` steps spread logarithmically over [1, max_iters]
(`snapshot_steps`: 1, 2, 3, 5, 8, ... dense early, where the model changes fastest),
plus the evaluation with the best validation loss so far (a later best replaces an
earlier one that was not on the schedule, so at most one extra file). Each holds the
weights in float16 (no optimizer state), with the step, a validation loss (an
evaluation's, or a score of the first SNAPSHOT_VAL_TOKENS validation characters
between evaluations) and the start (SNAPSHOT_SAMPLE_TOKENS characters) of the run's
fixed-prompt sample.

Rank 0 alone writes them. Each file and the index are written atomically (a temporary
file renamed into place). On resume, snapshots after the checkpoint's step (written by
a run killed before its next checkpoint) are dropped, and the resumed run writes them
again, so an interrupted and resumed run ends with the same steps and files as one
that ran straight through. train.overwrite removes them with the rest of the run.
"""

import json
import os
from pathlib import Path

import numpy as np
import torch

from model import GPT
from model.checkpoint import save_checkpoint, temporary_path
from viz.snapshots import INDEX_NAME, SNAPSHOTS_DIR, read_snapshot_index, snapshot_name

# Validation characters scored for a snapshot between evaluations: 32 windows of 128,
# a training step's worth of forward passes.
SNAPSHOT_VAL_TOKENS = 4096
# Characters of a snapshot's sample: the start of the evaluation sample (same prompt and
# seed), long enough to hear a loss. Generating it is most of a snapshot's time.
SNAPSHOT_SAMPLE_TOKENS = 100


def snapshot_steps(max_iters: int, count: int) -> list[int]:
    """About ``count`` steps in [1, max_iters], spread logarithmically and rounded
    (duplicates merged, so a short run gets fewer), always with max_iters; [] for
    count 0."""
    if count <= 0:
        return []
    spread = np.geomspace(1, max_iters, count) if count > 1 else np.array([max_iters])
    return sorted({int(s) for s in np.round(spread)} | {max_iters})


def half_precision_weights(model: GPT) -> dict[str, torch.Tensor]:
    """The model's floating-point weights as float16 CPU tensors (others as they are)."""
    return {
        name: t.detach().to("cpu", torch.float16) if t.is_floating_point() else t.cpu()
        for name, t in model.state_dict().items()
    }


def write_json_atomically(payload: dict, path: Path) -> None:
    """Write ``payload`` as JSON to ``path`` through a temporary file renamed into place."""
    tmp = temporary_path(path)
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(payload, f, ensure_ascii=False, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


class SnapshotKeeper:
    """The snapshots of one run, on rank 0.

    Args:
        out_dir: the run folder.
        max_iters: the run's train.max_iters.
        count: train.snapshots (0: none are written).
        start: the step training starts from (the checkpoint's on resume): snapshots
            after it are removed.
    """

    def __init__(self, out_dir: Path, max_iters: int, count: int, start: int):
        self.folder = Path(out_dir) / SNAPSHOTS_DIR
        self.count = count
        self.steps = set(snapshot_steps(max_iters, count))
        self.entries = [e for e in read_snapshot_index(out_dir) if e["step"] <= start]
        for stale in set(self.folder.glob("step_*.pt")) - {
            self.folder / e["file"] for e in self.entries
        }:
            stale.unlink(missing_ok=True)

    def due(self, step: int, best: bool) -> bool:
        """Whether to take a snapshot after ``step``: on the schedule, or ``best`` (an
        evaluation just gave the lowest validation loss so far)."""
        return self.count > 0 and (step in self.steps or best)

    def take(
        self,
        step: int,
        contents: dict,
        model: GPT,
        val_loss: float,
        val_chars: int,
        sample: str,
        best: bool,
    ) -> None:
        """Write the snapshot after ``step`` and update the index.

        Args:
            contents: what a weights-only checkpoint holds besides the weights
                (`training.checkpoint.checkpoint_contents`; its "model" is replaced by
                `half_precision_weights` of ``model``).
            val_loss: nats/char over ``val_chars`` validation characters.
            sample: the run's fixed-prompt sample ("" without one).
            best: the lowest validation loss of the run's evaluations so far.
        """
        self.folder.mkdir(exist_ok=True)
        name = snapshot_name(step)
        payload = {
            **contents,
            "model": half_precision_weights(model),
            "snapshot_val_loss": val_loss,
        }
        save_checkpoint(payload, self.folder / name)
        kept = []
        for e in self.entries:
            if e["step"] == step:
                continue
            if best and e["best"]:
                if e["step"] not in self.steps:  # a best off the schedule: replaced
                    (self.folder / e["file"]).unlink(missing_ok=True)
                    continue
                e = {**e, "best": False}
            kept.append(e)
        entry = {
            "step": step,
            "val_loss": val_loss,
            "val_chars": val_chars,
            "sample": sample,
            "file": name,
            "best": best,
        }
        self.entries = sorted([*kept, entry], key=lambda e: e["step"])
        write_json_atomically({"snapshots": self.entries}, self.folder / INDEX_NAME)
