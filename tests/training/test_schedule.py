"""training/schedule.py's notices: what a run says at its start about a step schedule
that will not do what its keys suggest.

The learning-rate schedule's length against its warmup: a schedule that would end
during its warmup is refused at load time, naming both keys and the fix; every schedule
that loads is continuous.
"""

import math

import pytest
from torch import nn

from training.config import ConfigError, TrainConfig, load_config
from training.optim import WeightAverage
from training.schedule import schedule_notices, scheduled_learning_rate


def notices(**keys) -> list[str]:
    values = {"max_iters": 100, "warmup_iters": 10, "lr_decay_iters": 100, **keys}
    return schedule_notices(TrainConfig(**values))


def test_an_ema_start_at_or_past_max_iters_is_noted_as_never_reached():
    (note,) = notices(ema_decay=0.99, ema_start=100)
    assert note.startswith("note: train.ema_start=100 >= train.max_iters=100")
    assert "weight averaging never begins" in note and "below 100" in note
    assert notices(ema_decay=0.99, ema_start=99) == []
    assert notices(ema_decay=0.0, ema_start=500) == []  # averaging is off anyway
    both = notices(ema_decay=0.99, ema_start=500, warmup_iters=100)
    assert [n.split("=")[0] for n in both] == ["note: train.warmup_iters", "note: train.ema_start"]


def test_the_note_matches_when_averaging_begins():
    """With ema_start = max_iters the average is never formed; one less and it is."""
    for start, begins in ((100, False), (99, True)):
        average = WeightAverage(nn.Linear(2, 2), 0.99, start)
        for steps_done in range(1, 101):  # the steps of a 100-step run
            average.update(nn.Linear(2, 2), steps_done)
        assert average.active is begins
        assert bool(notices(ema_decay=0.99, ema_start=start)) is not begins


def largest_jump(tc) -> float:
    """The largest change of the learning rate between two consecutive steps of a run."""
    lrs = [scheduled_learning_rate(step, tc) for step in range(tc.max_iters)]
    return max(abs(b - a) for a, b in zip(lrs, lrs[1:], strict=False))


def test_a_warmup_longer_than_the_schedule_is_refused_with_the_fix():
    given = ["train.warmup_iters=50", "train.lr_decay_iters=40", "train.max_iters=100"]
    with pytest.raises(ConfigError) as refused:
        load_config(None, given)
    message = str(refused.value)
    assert "train.warmup_iters=50 is not below train.lr_decay_iters=40" in message
    assert "warm up to 9.80e-04 at step 50, then drop to train.min_lr=1.0e-04 at step 51" in (
        message
    )
    # Either fix it names loads, and gives a schedule without a jump.
    for fix in ("train.lr_decay_iters=100", "train.warmup_iters=4"):
        assert fix in message
        tc = load_config(None, given + [fix]).train
        tc.lr_decay_iters = tc.lr_decay_iters or tc.max_iters
        assert largest_jump(tc) < 3e-4  # the drop it replaces: 8.8e-4


@pytest.mark.parametrize("schedule", ["cosine", "wsd"])
def test_every_schedule_that_loads_is_continuous(schedule):
    """No step-to-step change larger than one warmup step or one step of the decay."""
    for warmup in (0, 1, 5, 20, 39, 40, 41, 60):
        for decay in (None, 1, 10, 40, 41, 80):
            given = [f"train.warmup_iters={warmup}", "train.max_iters=80"]
            given += [f"train.lr_schedule={schedule}"]
            if decay is not None:
                given.append(f"train.lr_decay_iters={decay}")
            try:
                tc = load_config(None, given).train
            except ConfigError:
                assert decay is not None and warmup >= decay  # only those are refused
                continue
            tc.lr_decay_iters = tc.lr_decay_iters or tc.max_iters
            warmup_step = tc.learning_rate / (warmup + 1)
            # The cosine goes from the peak at step warmup to min_lr at step
            # lr_decay_iters - 1; the wsd warmdown in as many steps as it has.
            decay_iters = tc.lr_decay_iters - 1 - warmup
            if schedule == "wsd":
                warmdown = max(1, round(tc.warmdown_fraction * tc.lr_decay_iters))
                decay_iters = tc.lr_decay_iters - max(warmup, tc.lr_decay_iters - warmdown)
            decay_step = math.pi / 2 * (tc.learning_rate - tc.min_lr) / max(1, decay_iters)
            assert largest_jump(tc) <= max(warmup_step, decay_step) + 1e-12, (warmup, decay)


def test_a_warmup_as_long_as_the_run_still_loads():
    """lr_decay_iters = max_iters with a longer warmup is what the default (null) gives:
    the peak is never reached, and there is no drop (a note says so at the start)."""
    tc = load_config(
        None, ["train.warmup_iters=100", "train.max_iters=50", "train.lr_decay_iters=50"]
    ).train
    assert largest_jump(tc) == pytest.approx(1e-3 / 101)


@pytest.mark.parametrize("schedule", ["cosine", "wsd"])
def test_a_decay_of_a_step_or_a_few_after_a_long_warmup_is_noted(schedule):
    """warmup_iters=19 with lr_decay_iters=20 loads (the warmup ends inside the
    schedule), but the learning rate then falls from 9.5e-4 to min_lr in one step: the
    cliff that a warmup outlasting the schedule is refused for gets a note."""
    tc = TrainConfig(
        lr_schedule=schedule, warmup_iters=19, lr_decay_iters=20, max_iters=20, min_lr=1e-4
    )
    assert scheduled_learning_rate(18, tc) == pytest.approx(9.5e-4)
    assert scheduled_learning_rate(19, tc) == 1e-4
    (note,) = schedule_notices(tc)
    assert note.startswith(
        "note: the learning rate falls from 9.50e-04 at step 19 to train.min_lr=1.0e-04 "
        "at step 20 (1 step) after a warmup of 19 steps"
    )
    assert "train.warmup_iters=2" in note  # a warmup that leaves the decay 18 steps
    # A decay as long as a quarter of the warmup, or longer, is no cliff; nor is a
    # schedule without a warmup, or one with nothing to fall (min_lr = learning_rate).
    assert notices(lr_schedule=schedule, warmup_iters=16, lr_decay_iters=20, max_iters=20) == []
    assert notices(lr_schedule=schedule, warmup_iters=0, lr_decay_iters=2, max_iters=2) == []
    same = {"min_lr": 1e-3, "learning_rate": 1e-3}
    assert notices(warmup_iters=19, lr_decay_iters=20, max_iters=20, **same) == []
    # The shipped recipes and the defaults say nothing.
    assert notices(lr_schedule=schedule) == []
