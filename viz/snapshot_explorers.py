"""The page's models over training: one `viz.attention_server.AttentionExplorer` per
snapshot of a run (`viz.snapshots`), loaded when first asked for.

    explorers = SnapshotExplorers(Path("runs/korean"), device)
    explorers.listing()          # [{"step", "val_loss", "sample", "best"}, ...]
    explorers.explorer(340)      # the explorer of the snapshot nearest step 340

The page's answers for a snapshot are those of the snapshot's own weights: the same
explorer code, on the model `model.checkpoint.model_from_checkpoint` builds from the
snapshot file.
"""

import threading
from collections import OrderedDict
from pathlib import Path

import torch

from model.checkpoint import load_checkpoint, model_from_checkpoint
from viz.attention_server import AttentionExplorer
from viz.snapshots import SNAPSHOTS_DIR, SnapshotError, read_snapshot_index

KEPT_MODELS = 4  # snapshots kept loaded: a learner drags between neighbours


class SnapshotExplorers:
    """The snapshots of one run, as explorers.

    Args:
        run_dir: the run folder.
        device: where the models run.
        own_text: the run's prompts offered as presets (see `AttentionExplorer`).

    Raises:
        SnapshotError: if the run's snapshot index is unreadable.
    """

    def __init__(self, run_dir: Path, device: torch.device, own_text: tuple[str, ...] = ()):
        self.run_dir, self.device, self.own_text = Path(run_dir), device, own_text
        self.entries = read_snapshot_index(run_dir)
        self._loaded: OrderedDict[int, AttentionExplorer] = OrderedDict()
        self._lock = threading.Lock()

    def listing(self) -> list[dict]:
        """Each snapshot's step, validation loss (nats/char), sample and best flag."""
        keys = ("step", "val_loss", "sample", "best")
        return [{k: e[k] for k in keys} for e in self.entries]

    def explorer(self, step) -> AttentionExplorer:
        """The explorer of the snapshot nearest ``step`` (an int, or text of one).

        Raises:
            SnapshotError: if ``step`` is not a whole number or the run has no snapshots.
        """
        try:
            step = int(step)
        except (TypeError, ValueError):
            raise SnapshotError(f"step must be a whole number, got {step!r}") from None
        if not self.entries:
            raise SnapshotError(f"{self.run_dir} has no snapshots; train with train.snapshots > 0")
        entry = min(self.entries, key=lambda e: (abs(e["step"] - step), e["step"]))
        with self._lock:
            if entry["step"] not in self._loaded:
                path = self.run_dir / SNAPSHOTS_DIR / entry["file"]
                model, tokenizer = model_from_checkpoint(load_checkpoint(path), path)
                name = f"{path} (step {entry['step']})"
                self._loaded[entry["step"]] = AttentionExplorer(
                    model.to(self.device), tokenizer, name, self.own_text
                )
                while len(self._loaded) > KEPT_MODELS:
                    self._loaded.popitem(last=False)
            self._loaded.move_to_end(entry["step"])
            return self._loaded[entry["step"]]
