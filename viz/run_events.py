"""Scalar curves read back from a run's TensorBoard event files, without TensorBoard."""

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

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


def read_scalar_curves(
    run_dir: str | Path, tags: list[str] | None = None
) -> dict[str, ScalarCurve]:
    """Read scalar curves from the event files directly in ``run_dir``.

    When a run was resumed, events a stopped run logged after its last checkpoint are
    dropped (the resumed writer marks them purged), as TensorBoard itself does.

    Args:
        run_dir: a run folder (the ``out_dir`` of a training run).
        tags: the tags to read, e.g. [TRAIN_LOSS, VAL_LOSS] from training.run_writer;
            None reads all. Tags the run does not have are left out of the result.

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
    acc = EventAccumulator(str(run_dir), size_guidance=SIZE_GUIDANCE)
    acc.Reload()
    start = acc.FirstEventTimestamp()  # the writer's first event: when training began
    available = acc.Tags()["scalars"]
    curves = {}
    for tag in available if tags is None else [t for t in tags if t in available]:
        events = sorted(acc.Scalars(tag), key=lambda e: e.step)
        curves[tag] = ScalarCurve(
            steps=np.array([e.step for e in events], dtype=np.int64),
            seconds=np.array([e.wall_time - start for e in events], dtype=np.float64),
            values=np.array([e.value for e in events], dtype=np.float64),
        )
    return curves
