"""The end-of-run verdicts (training/diagnose.py): each rule on hand-made curves, one
line naming the setting to change, and nothing when nothing is wrong. The four planted
training runs are in test_diagnose_runs.py."""

import numpy as np
import pytest

import evaluate
from training.diagnose import RunRecord, diagnose
from viz.run_events import TRAIN_EVAL_LOSS, TRAIN_LOSS, TRAIN_SKIPPED_STEPS, VAL_LOSS, ScalarCurve

CONFIG = {
    "model": {"n_embd": 128, "n_head": 4, "block_size": 128, "dropout": 0.0, "vocab_size": 65},
    "train": {"max_iters": 2000, "learning_rate": 5e-3},
}


def curve(steps, values) -> ScalarCurve:
    steps = np.asarray(steps, dtype=np.int64)
    return ScalarCurve(steps, steps.astype(np.float64), np.asarray(values, dtype=np.float64))


def record(val, train_eval, train=None, n_params=800_000, train_chars=1_000_000, **more):
    steps = [500 * (i + 1) for i in range(len(val))]
    curves = {VAL_LOSS: curve(steps, val), TRAIN_EVAL_LOSS: curve(steps, train_eval)}
    if train is not None:
        curves[TRAIN_LOSS] = curve([10 * (i + 1) for i in range(len(train))], train)
    curves.update(more)
    return RunRecord(curves, CONFIG, n_params, train_chars, [1_115_394])


HEALTHY = record([2.0, 1.7, 1.6, 1.595], [2.0, 1.65, 1.5, 1.49], train=[4.0, 3.0, 2.2, 1.9, 1.6])


def test_a_healthy_run_gets_no_verdict():
    assert diagnose(HEALTHY) == []


def test_the_cpu_recipes_measured_curve_gets_no_verdict():
    # docs/benchmarks.md: val loss at steps 550, 1100, 1650, 2200 of the CPU recipe.
    recipe = record([1.710, 1.595, 1.522, 1.476], [1.70, 1.57, 1.48, 1.42])
    recipe.config = {**CONFIG, "train": {"max_iters": 2200, "learning_rate": 5e-3}}
    assert diagnose(recipe) == []


def test_overfitting_names_dropout_and_the_best_step():
    (line,) = diagnose(record([2.0, 1.6, 1.7, 1.8], [1.9, 1.4, 1.2, 1.0]))
    assert line.startswith("overfitting: the validation loss rose 0.200 nats/char")
    assert "model.dropout=0.2 (now 0.0)" in line and "train.max_iters=1000" in line


def test_a_rise_while_the_training_loss_rises_too_is_not_overfitting():
    (line,) = diagnose(record([2.0, 1.6, 1.7, 1.75], [1.9, 1.5, 1.6, 1.65]))
    assert line.startswith("learning rate too high: the training loss rose between evaluations")


def test_a_training_loss_that_climbs_back_means_the_learning_rate_is_too_high():
    # The CPU recipe at train.learning_rate=0.5, evaluated every 50 steps (docs/watching.md).
    climbing = record([2.580, 2.743, 2.527, 2.282], [2.554, 2.703, 2.490, 2.219])
    lines = diagnose(climbing)  # and still learning fast, as that run was
    assert lines[0] == (
        "learning rate too high: the training loss rose between evaluations, 2.554 at step "
        "500 -> 2.703 at step 1000 (the steps overshoot); set train.learning_rate=0.00167 "
        "(now 0.005)"
    )
    # Evaluation noise of a falling curve is no rise.
    assert diagnose(record([2.0, 1.7, 1.6, 1.595], [2.0, 1.65, 1.67, 1.49])) == []


def test_a_loss_spike_means_the_learning_rate_is_too_high():
    spiky = record([2.0, 1.7, 1.6, 1.595], [2.0, 1.65, 1.5, 1.49], train=[4.0, 2.5, 3.2, 2.0])
    (line,) = diagnose(spiky)
    assert line.startswith("learning rate too high: the training loss jumped to 3.200 at step 30")
    assert "train.learning_rate=0.00167 (now 0.005)" in line


def test_skipped_float16_steps_mean_the_learning_rate_is_too_high():
    skipped = {TRAIN_SKIPPED_STEPS: curve([1000, 2000], [10, 80])}
    (line,) = diagnose(record([2.0, 1.7, 1.6, 1.595], [2.0, 1.65, 1.5, 1.49], **skipped))
    assert "skipped 80 of 2000 steps" in line and "train.learning_rate=" in line


def test_still_learning_says_by_how_much_and_how_long_to_train():
    (line,) = diagnose(record([2.5, 2.2, 2.0], [2.5, 2.2, 2.0]))
    assert line.startswith("still learning fast at the end: the validation loss fell 0.200")
    assert "train.max_iters=4000 (now 2000)" in line


def test_too_many_parameters_per_character():
    lines = diagnose(record([2.0, 1.7, 1.6, 1.595], [2.0, 1.65, 1.5, 1.49], train_chars=100_000))
    (line,) = lines
    assert line.startswith("model too large for its corpus: 800,000 parameters for 100,000")
    assert "model.n_embd=" in line


def test_a_fine_tuned_run_is_not_told_to_change_its_parents_size():
    # train.init_from refuses a model.n_embd other than the parent's: the advice must not ask.
    tuned = record([2.0, 1.7, 1.6, 1.595], [2.0, 1.65, 1.5, 1.49], train_chars=100_000)
    tuned.config = {**CONFIG, "train": {**CONFIG["train"], "init_from": "runs/parent"}}
    (line,) = diagnose(tuned)
    assert "model.n_embd" not in line
    assert "its size is its parent's (runs/parent): fine-tune on more text" in line
    small = record([3.0, 2.8, 2.795], [3.0, 2.8, 2.79])
    small.config = tuned.config
    (line,) = diagnose(small)
    assert line.startswith("model too small") and "without train.init_from" in line


def test_equal_high_losses_mean_the_model_is_too_small():
    (line,) = diagnose(record([3.0, 2.8, 2.795], [3.0, 2.8, 2.79]))
    assert line.startswith("model too small: training and validation loss are equal")
    assert "model.n_embd=256 (now 128)" in line


def test_block_size_past_the_median_document():
    run = record([2.0, 1.7, 1.6, 1.595], [2.0, 1.65, 1.5, 1.49])
    run.file_sizes = [40, 60, 80, 2000]
    (line,) = diagnose(run)
    assert "median of its 4 files is 70 bytes" in line and "model.block_size=64" in line


def test_evaluate_diagnose_refuses_a_folder_without_a_run(tmp_path, capsys):
    assert evaluate.main(["--diagnose", str(tmp_path)]) == 2
    assert "no TensorBoard event files" in capsys.readouterr().err


@pytest.mark.parametrize("line", diagnose(record([2.0, 1.6, 1.7, 1.8], [1.9, 1.4, 1.2, 1.0])))
def test_verdicts_are_one_line(line):
    assert "\n" not in line
