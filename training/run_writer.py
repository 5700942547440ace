"""What a run writes to TensorBoard, and the one place where its tag names are spelled.

    train/loss            every log_interval steps: the logged step's batch loss (nats/char)
    train/lr              learning rate of that step
    train/grad_norm       gradient norm before clipping
    train/tokens_per_sec  training throughput since the previous log
    val/loss, val/bpc     at each evaluation: validation loss (nats/char, bits/char) over
                          train.eval_tokens characters at most (fixed, evenly spread)
    train/eval_loss, train/eval_bpc   the same over a fixed sample of the training split
    val/best_loss         lowest validation loss so far
    val/full_loss, val/full_bpc   once, when training ends: the whole validation split
                          (the same as val/loss when train.eval_tokens covers it)
    samples/fixed_prompt  text: a fixed-seed sample (see `training.tensorboard_views`)
    attention/layer_<l>   image: layer l's attention heatmaps, heads side by side
    time/<part>_seconds   at each evaluation before the last step and when the run
                          ends: seconds of wall time so far in each part (setup,
                          compile, steps, data, eval, views, checkpoints, other; see
                          `training.run_clock`), and time/wall_seconds, their sum

and, once at the start, the run's hyperparameters for the HParams tab, with the
metrics above declared in the order the table shows them (see `training.hparams`).
The plotter (`viz.loss_plot`) and the tests import these names from here.

TensorBoard shows a sample of each tag's steps, not all of them: 10 images and 10
texts (100 through its fast loader), 1,000 scalars, chosen at random with the last
one kept. `tensorboard_command` gives the ``--samples_per_plugin`` flag that keeps
every step a run writes; ``0``, which the flag's help suggests for "all", shows no
image at all in TensorBoard 2.21.
"""

from pathlib import Path

import numpy as np
from torch.utils.tensorboard import SummaryWriter

from model.scoring import nats_to_bits
from training.hparams import hparams_summaries
from viz.run_events import (
    ATTENTION_IMAGE,
    SAMPLE_TEXT,
    TIME_PART,
    TIME_WALL,
    TRAIN_EVAL_BPC,
    TRAIN_EVAL_LOSS,
    TRAIN_GRAD_NORM,
    TRAIN_LOSS,
    TRAIN_LR,
    TRAIN_TOKENS_PER_SEC,
    VAL_BEST_LOSS,
    VAL_BPC,
    VAL_FULL_BPC,
    VAL_FULL_LOSS,
    VAL_LOSS,
)

# Steps TensorBoard keeps per image and text tag with `tensorboard_command`'s flag: every
# evaluation of a run of up to that many (a longer run's command names its own number).
KEPT_EVALUATIONS = 1000
DEFAULT_KEPT_SCALARS = 1000  # TensorBoard's own limit for a scalar tag

# The HParams table's metric columns, in order, with their display names. TensorBoard
# ticks the first five by default, so the validation metrics come first.
HPARAMS_METRICS = {
    VAL_LOSS: "val loss (nats/char)",
    VAL_BPC: "val bits/char",
    VAL_BEST_LOSS: "best val loss (nats/char)",
    TRAIN_EVAL_LOSS: "train-sample loss (nats/char)",
    TRAIN_LOSS: "last batch loss (nats/char)",
    TRAIN_EVAL_BPC: "train-sample bits/char",
    TRAIN_LR: "learning rate",
    TRAIN_GRAD_NORM: "gradient norm",
    TRAIN_TOKENS_PER_SEC: "tokens/s",
    VAL_FULL_LOSS: "whole val split loss (nats/char)",
    VAL_FULL_BPC: "whole val split bits/char",
}


def tensorboard_command(logdir: str | Path = "runs", evaluations: int = 0, logged: int = 0) -> str:
    """The command that opens TensorBoard on ``logdir`` with every step shown.

    Args:
        logdir: the folder holding the run folders.
        evaluations: how many evaluations (samples, heatmaps) a run writes; past
            KEPT_EVALUATIONS the flag keeps that many.
        logged: how many steps a scalar tag gets (max_iters / log_interval); past
            TensorBoard's 1,000 the flag names scalars too.

    Returns:
        e.g. ``tensorboard --logdir runs --samples_per_plugin images=1000,text=1000``.
    """
    kept = max(KEPT_EVALUATIONS, evaluations)
    plugins = [f"images={kept}", f"text={kept}"]
    if logged > DEFAULT_KEPT_SCALARS:
        plugins.insert(0, f"scalars={logged}")
    return f"tensorboard --logdir {logdir} --samples_per_plugin {','.join(plugins)}"


def tensorboard_line(cfg) -> str:
    """What a run says about TensorBoard at its start (``cfg``: the RunConfig)."""
    t = cfg.train
    evaluations = t.max_iters // t.eval_interval + 1  # and one at the last step
    logdir = Path(cfg.out_dir).parent
    command = tensorboard_command(logdir, evaluations, t.max_iters // t.log_interval)
    return f"TensorBoard, with every evaluation's sample and heatmaps: {command}"


class RunWriter:
    """A run's TensorBoard event writer (rank 0 only).

    Args:
        out_dir: the run folder; the event file goes there.
        purge_step: on resume, the first step this run writes: events a stopped run
            logged from that step on (after its checkpoint) are dropped. None for a
            new run.
    """

    def __init__(self, out_dir: Path, purge_step: int | None = None):
        self.writer = SummaryWriter(str(out_dir), purge_step=purge_step)

    def hyperparameters(self, config: dict) -> None:
        """The run's resolved config (``RunConfig.to_dict()``) for the HParams tab,
        with HPARAMS_METRICS declared as its metrics."""
        for summary in hparams_summaries(config, HPARAMS_METRICS):
            self.writer.file_writer.add_summary(summary)

    def training_step(
        self, step: int, loss: float, lr: float, grad_norm: float, tokens_per_sec: float
    ) -> None:
        """The scalars of one logged step: loss in nats/char, gradient norm before
        clipping, throughput in tokens per second."""
        self.writer.add_scalar(TRAIN_LOSS, loss, step)
        self.writer.add_scalar(TRAIN_LR, lr, step)
        self.writer.add_scalar(TRAIN_GRAD_NORM, grad_norm, step)
        self.writer.add_scalar(TRAIN_TOKENS_PER_SEC, tokens_per_sec, step)

    def evaluation(self, step: int, val_loss: float, train_loss: float, best: float) -> None:
        """An evaluation's losses, in nats/char (bits/char derived), and the best
        validation loss so far; flushed, so TensorBoard shows them at once."""
        self.writer.add_scalar(VAL_LOSS, val_loss, step)
        self.writer.add_scalar(VAL_BPC, nats_to_bits(val_loss), step)
        self.writer.add_scalar(TRAIN_EVAL_LOSS, train_loss, step)
        self.writer.add_scalar(TRAIN_EVAL_BPC, nats_to_bits(train_loss), step)
        self.writer.add_scalar(VAL_BEST_LOSS, best, step)
        self.writer.flush()

    def full_evaluation(self, step: int, val_loss: float) -> None:
        """The loss over the whole validation split at the end of training, in
        nats/char (bits/char derived); flushed."""
        self.writer.add_scalar(VAL_FULL_LOSS, val_loss, step)
        self.writer.add_scalar(VAL_FULL_BPC, nats_to_bits(val_loss), step)
        self.writer.flush()

    def sample(self, step: int, markdown: str) -> None:
        """The fixed-prompt sample, as TensorBoard markdown."""
        self.writer.add_text(SAMPLE_TEXT, markdown, step)

    def attention(self, step: int, images: list[np.ndarray]) -> None:
        """One (H, W, 3) uint8 heatmap image per layer."""
        for layer, image in enumerate(images):
            self.writer.add_image(
                ATTENTION_IMAGE.format(layer=layer), image, step, dataformats="HWC"
            )

    def time_split(self, step: int, split: dict[str, float]) -> None:
        """Where the wall time went so far: seconds per part (TIME_PART) and in all
        (TIME_WALL); flushed."""
        for part, seconds in split.items():
            self.writer.add_scalar(TIME_PART.format(part=part), seconds, step)
        self.writer.add_scalar(TIME_WALL, sum(split.values()), step)
        self.writer.flush()

    def flush(self) -> None:
        """Write everything pending to the event file."""
        self.writer.flush()

    def close(self) -> None:
        """Flush and close the event file."""
        self.writer.close()
