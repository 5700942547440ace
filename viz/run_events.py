"""A run's TensorBoard events: the tags a run writes them under, and scalar curves read
back from its event files without TensorBoard.

    loss/train, loss/val  train/loss and val/loss again, side by side under a name that
                          sorts first: TensorBoard orders tag groups by name and opens
                          SCALARS on the first two, so a run opens on its two curves
                          (and HPARAMS, whose metric columns follow the tags, ticks them)
    train/loss            every log_interval steps: the logged step's batch loss (nats/char)
    train/lr              learning rate of that step
    train/grad_norm       gradient norm before clipping
    train/tokens_per_sec  training throughput since the previous log
    train/skipped_steps   with loss scaling (train.dtype float16) only: optimizer steps
                          skipped since the run began (their gradients overflowed)
    val/loss, val/bpc     at each evaluation: validation loss (nats/char, bits/char) over
                          train.eval_tokens characters at most (fixed, evenly spread)
    train/eval_loss, train/eval_bpc   the same over a fixed sample of the training split
    val/best_loss         lowest validation loss so far
    val/full_loss, val/full_bpc   once, when training ends: the whole validation split
                          (the same as val/loss when train.eval_tokens covers it)
    samples/fixed_prompt  text: a fixed-seed sample (see `training.run_writer`)
    attention/layer_<l>   image: layer l's attention heatmaps, heads in a near-square grid
    snapshots/sample      text: at each snapshot (`training.snapshots`), its step,
                          validation loss and sample from the fixed prompt
    per_head_<measure>/layer_<l>_head_<h> at each evaluation and snapshot: head h of
                          layer l's entropy, previous_char, first_position or induction
                          score (`viz.head_scores`)
    wall_time/<part>_seconds   at each evaluation before the last step and when the
                          run ends: seconds of wall time so far in each part (setup,
                          compile, steps, data, eval, views, checkpoints, other; see
                          `training.report`), and wall_time/total_seconds, their sum
                          (time/<part>_seconds and time/wall_seconds before; runs that
                          wrote those are read under the new names)

The names are spelled here once: the trainer's writer (`training.run_writer`), the
plotter (`viz.loss_plot`) and the tests import them from here, below both.
"""

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

LOSS_TRAIN = "loss/train"  # = TRAIN_LOSS, for the first group SCALARS shows
LOSS_VAL = "loss/val"  # = VAL_LOSS, beside it
TRAIN_LOSS = "train/loss"
TRAIN_LR = "train/lr"
TRAIN_GRAD_NORM = "train/grad_norm"
TRAIN_TOKENS_PER_SEC = "train/tokens_per_sec"
TRAIN_SKIPPED_STEPS = "train/skipped_steps"
TRAIN_EVAL_LOSS = "train/eval_loss"
TRAIN_EVAL_BPC = "train/eval_bpc"
VAL_LOSS = "val/loss"
VAL_BPC = "val/bpc"
VAL_BEST_LOSS = "val/best_loss"
VAL_FULL_LOSS = "val/full_loss"
VAL_FULL_BPC = "val/full_bpc"
SAMPLE_TEXT = "samples/fixed_prompt"
ATTENTION_IMAGE = "attention/layer_{layer}"
SNAPSHOT_TEXT = "snapshots/sample"
HEAD_SCORE = "per_head_{measure}/layer_{layer}_head_{head}"
HEAD_SCORE_TAG = re.compile(r"per_head_(\w+?)/layer_(\d+)_head_(\d+)")
# Under a prefix that sorts after val/: TensorBoard orders tag groups by name, so
# SCALARS opens on train/ and val/, not on the bookkeeping.
TIME_PART = "wall_time/{part}_seconds"
TIME_WALL = "wall_time/total_seconds"
# The time split's tags before they moved there, read as the new ones.
LEGACY_TIME_TAG = re.compile(r"time/(\w+)_seconds")

EVENT_FILE_GLOB = "events.out.tfevents.*"
# Keep every scalar (0 = no limit; TensorBoard's default samples 10,000) and skip the
# images and texts, which can be large and are not needed for curves.
SIZE_GUIDANCE = {"scalars": 0, "images": 1, "tensors": 1, "histograms": 1}


@dataclass(frozen=True)
class ScalarCurve:
    """One scalar tag over a run.

    Attributes:
        steps: (N,) int64 iterations (optimizer steps).
        seconds: (N,) float64 wall-clock seconds since the run's first event; a pause
            between a stopped run and its resumption shows up as a gap.
        values: (N,) float64 logged values (for losses: nats per character).
    """

    steps: np.ndarray
    seconds: np.ndarray
    values: np.ndarray


def current_tag(tag: str) -> str:
    """A tag under its present name: the time split's tags of older runs
    (time/<part>_seconds, time/wall_seconds) as TIME_PART and TIME_WALL; others as
    they are."""
    match = LEGACY_TIME_TAG.fullmatch(tag)
    if match is None:
        return tag
    part = match.group(1)
    return TIME_WALL if part == "wall" else TIME_PART.format(part=part)


def read_scalar_curves(
    run_dir: str | Path, tags: list[str] | None = None
) -> dict[str, ScalarCurve]:
    """Read scalar curves from the event files directly in ``run_dir``.

    When a run was resumed, events a stopped run logged after its last checkpoint are
    dropped (the resumed writer marks them purged), as TensorBoard itself does.

    Args:
        run_dir: a run folder (the ``out_dir`` of a training run).
        tags: the tags to read, e.g. [TRAIN_LOSS, VAL_LOSS] above;
            None reads all. Tags the run does not have are left out of the result;
            an older run's time split is read under the present names (`current_tag`).

    Returns:
        {tag: ScalarCurve}, each sorted by step.

    Raises:
        FileNotFoundError: if ``run_dir`` holds no event files.
    """
    run_dir = Path(run_dir)
    if not any(run_dir.glob(EVENT_FILE_GLOB)):
        raise FileNotFoundError(
            f"no TensorBoard event files ({EVENT_FILE_GLOB}) in {run_dir}; "
            "give the out_dir of a training run"
        )
    # Imported here: a training run writes these tags but only reads them back at its end.
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir), size_guidance=SIZE_GUIDANCE)
    acc.Reload()
    start = acc.FirstEventTimestamp()  # the writer's first event: when training began
    available = {current_tag(tag): tag for tag in acc.Tags()["scalars"]}
    curves = {}
    for tag in available if tags is None else [t for t in tags if t in available]:
        events = sorted(acc.Scalars(available[tag]), key=lambda e: e.step)
        curves[tag] = ScalarCurve(
            steps=np.array([e.step for e in events], dtype=np.int64),
            seconds=np.array([e.wall_time - start for e in events], dtype=np.float64),
            values=np.array([e.value for e in events], dtype=np.float64),
        )
    return curves
