"""Training and validation loss against iterations and against wall-clock seconds."""

import warnings
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from viz.char_labels import code_point_label
from viz.fonts import MissingGlyphWarning, text_font
from viz.run_events import TRAIN_EVAL_LOSS, TRAIN_LOSS, VAL_LOSS, ScalarCurve

# tag -> (legend label, line style); the per-step training loss is noisy, so it is
# drawn thin and faint, the evaluations (whole splits) as lines with markers.
LOSS_TAGS = {
    TRAIN_LOSS: ("training batches", {"linewidth": 0.8, "alpha": 0.5}),
    TRAIN_EVAL_LOSS: ("training sample (evaluation)", {"marker": "o", "markersize": 3}),
    VAL_LOSS: ("validation", {"marker": "o", "markersize": 3}),
}


REFERENCE_STYLE = {"color": "0.5", "linestyle": "--", "marker": "s", "markersize": 3}


def read_reference_curve(path: str | Path) -> ScalarCurve:
    """A recipe's measured validation curve, shipped as CSV (docs/reference_curves/):
    ``#`` comment lines, a header ``step,seconds,val_loss``, then one row per evaluation.

    Raises:
        ValueError: naming the file and the line that is not three numbers.
    """
    rows = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#") or line.startswith("step"):
            continue
        try:
            step, seconds, loss = (float(x) for x in line.split(","))
        except ValueError:
            raise ValueError(
                f"{path}:{number}: expected step,seconds,val_loss numbers, got {line!r}"
            ) from None
        rows.append((step, seconds, loss))
    if not rows:
        raise ValueError(f"{path} holds no step,seconds,val_loss rows")
    steps, seconds, values = (np.array(column) for column in zip(*rows, strict=True))
    return ScalarCurve(steps.astype(np.int64), seconds, values)


def loss_figure(
    curves: dict[str, ScalarCurve], title: str | None = None, reference: ScalarCurve | None = None
) -> Figure:
    """Two panels: loss against iterations (left) and against seconds (right).

    Args:
        curves: from `viz.run_events.read_scalar_curves`; the tags of LOSS_TAGS that
            are present are drawn (in nats per character), others are ignored.
        title: a line above the panels, e.g. the run folder.
        reference: a recipe's measured validation curve (`read_reference_curve`),
            drawn dashed grey on both panels, or None.

    Returns:
        A Figure with two axes; each holds one line per loss tag present, in
        LOSS_TAGS order, with x = steps (left) or seconds (right) and y = values.

    Raises:
        ValueError: if ``curves`` holds none of the LOSS_TAGS.
    """
    present = [tag for tag in LOSS_TAGS if tag in curves]
    if not present:
        raise ValueError(
            f"no loss curves to plot: expected some of {', '.join(LOSS_TAGS)}, "
            f"got {', '.join(curves) or 'none'}"
        )
    fig = Figure(figsize=(11, 4), layout="constrained")
    by_step, by_time = fig.subplots(1, 2, sharey=True)
    for tag in present:
        label, style = LOSS_TAGS[tag]
        curve = curves[tag]
        by_step.plot(curve.steps, curve.values, label=label, **style)
        by_time.plot(curve.seconds, curve.values, label=label, **style)
    if reference is not None:
        by_step.plot(
            reference.steps, reference.values, label="recipe (measured)", **REFERENCE_STYLE
        )
        by_time.plot(reference.seconds, reference.values, **REFERENCE_STYLE)
    by_step.set_xlabel("iteration (optimizer step)")
    by_time.set_xlabel("seconds since the run started")
    by_step.set_ylabel("loss (nats per character)")
    for ax in (by_step, by_time):
        ax.grid(alpha=0.3)
    by_step.legend()
    if title:
        text, families = drawable_title(title)
        fig.suptitle(text, **({"fontfamily": families} if families else {}))
    return fig


def drawable_title(title: str) -> tuple[str, list[str] | None]:
    """A title and the font families to draw it with: a run folder's name may hold
    Hangul (runs/로그), which matplotlib's own font lacks, so an installed font with
    Hangul is added (`viz.fonts.text_font`); a character no font has is written as its
    code point rather than drawn as an empty box.

    Returns:
        (text, fontfamily): fontfamily None for ASCII text (matplotlib's default).
    """
    if title.isascii():
        return title, None
    with warnings.catch_warnings():  # a title says no more than the path: no warning
        warnings.simplefilter("ignore", MissingGlyphWarning)
        font = text_font(title)
    shown = "".join(c if font.can_draw(c) else code_point_label(c) for c in title)
    return shown, list(font.families)
