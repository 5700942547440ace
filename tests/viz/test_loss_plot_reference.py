"""plot_losses.py --reference: the CPU recipe's measured curve, shipped as CSV, drawn
beside a run's."""

import numpy as np
import pytest

from tests.conftest import ROOT
from viz.loss_plot import loss_figure, read_reference_curve
from viz.run_events import VAL_LOSS, ScalarCurve

SHIPPED = ROOT / "docs" / "reference_curves" / "shakespeare_char_cpu.csv"


def test_the_shipped_curve_is_the_benchmarks_table():
    curve = read_reference_curve(SHIPPED)
    assert curve.steps.tolist() == [550, 1100, 1650, 2200]
    assert curve.values.tolist() == [1.710, 1.595, 1.522, 1.476]
    table = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert "| val loss | 1.710 | 1.595 | 1.522 | **1.476** |" in table


def test_the_reference_is_drawn_on_both_panels():
    run = ScalarCurve(np.array([10, 20]), np.array([1.0, 2.0]), np.array([3.0, 2.5]))
    fig = loss_figure({VAL_LOSS: run}, reference=read_reference_curve(SHIPPED))
    by_step, by_time = fig.axes
    step_line = by_step.get_lines()[-1]
    assert step_line.get_label() == "recipe (measured)"
    assert step_line.get_xdata().tolist() == [550, 1100, 1650, 2200]
    assert by_time.get_lines()[-1].get_xdata().tolist() == [68, 136, 205, 272]


def test_a_file_that_is_not_a_curve_is_named(tmp_path):
    bad = tmp_path / "curve.csv"
    bad.write_text("step,seconds,val_loss\n550,68\n", encoding="utf-8")
    with pytest.raises(ValueError, match="curve.csv:2: expected step,seconds,val_loss"):
        read_reference_curve(bad)
