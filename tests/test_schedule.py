"""training/schedule.py's notices: what a run says at its start about a step schedule
that will not do what its keys suggest."""

from torch import nn

from training.averaging import WeightAverage
from training.config import TrainConfig
from training.schedule import schedule_notices


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
