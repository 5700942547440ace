"""What a call to `training.train` returns: the run's steps, losses and how it ended."""

import math
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class TrainResult:
    """What a call to `train` did.

    Attributes:
        out_dir: the run folder.
        iter_num: optimizer steps completed in total (including before a resume).
        best_val_loss: lowest validation loss seen, nats per character.
        evals: one dict per evaluation: iter, seconds (wall time since this call
            started training), train_loss, val_loss (nats/char), val_bpc (bits/char).
        full_val_loss: the loss over the whole validation split when training ended
            (nats/char); None if it was not computed (interrupted, nothing to do, or
            train.final_full_eval=false).
        losses: {iteration: training loss in nats/char} for every logged iteration
            (the loss of that iteration's batches, averaged over ranks).
        interrupted: True if Ctrl-C / SIGTERM stopped the run early.
        signal: the signal number that stopped it, if any.
        rank: this process's rank (0 unless launched by torchrun).
        time_split: seconds of this process's wall time in each part (setup, compile,
            steps, data, eval, views, checkpoints, other; see `training.run_clock`),
            adding up to it; empty if the run had nothing to do.
    """

    out_dir: Path
    iter_num: int = 0
    best_val_loss: float = math.inf
    evals: list = field(default_factory=list)
    full_val_loss: float | None = None
    losses: dict = field(default_factory=dict)
    interrupted: bool = False
    signal: int | None = None
    rank: int = 0
    time_split: dict = field(default_factory=dict)
