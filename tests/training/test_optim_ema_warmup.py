"""Weight averaging from the first step warms its decay up (timm's ModelEmaV2).

train.ema_decay=0.999 from step 0 on a 200-step run evaluated, saved and sampled an
average still 82% made of the first step's weights (best val 3.98 where the trained
weights scored 3.06), and nothing was said. With ema_start 0 the decay of the t-th
fold is now min(decay, (1 + t) / (10 + t)); a chosen ema_start (the shipped recipes')
keeps the fixed decay, and is told when too few steps follow it.
"""

import pytest
import torch
from torch import nn

from tests.conftest import tiny_overrides
from training import load_config, train
from training.config import TrainConfig
from training.optim import WeightAverage
from training.schedule import schedule_notices


def _averaged(decay: float, start: int, steps: int) -> tuple[float, WeightAverage]:
    """The average of a one-weight model whose weight is k after step k."""
    model = nn.Linear(1, 1, bias=False)
    average = WeightAverage(model, decay, start)
    for step in range(1, steps + 1):
        with torch.no_grad():
            model.weight.fill_(float(step))
        average.update(model, step)
    return average.module.weight.item(), average


def test_an_average_from_the_first_step_warms_its_decay_up():
    expected = 1.0  # the weights after step 1, copied
    for step in range(2, 201):
        t = step - 1  # the t-th fold
        decay = min(0.999, (1 + t) / (10 + t))
        expected = decay * expected + (1 - decay) * step
    value, _ = _averaged(0.999, 0, 200)
    assert value == pytest.approx(expected, rel=1e-6)
    assert value == pytest.approx(180.0, abs=0.01)  # weighted to the last steps
    fixed = 1.0  # without the warm-up, 82% of it was the first step's weight
    for step in range(2, 201):
        fixed = 0.999 * fixed + 0.001 * step
    assert fixed == pytest.approx(19.65, abs=0.01)


def test_a_chosen_start_keeps_the_fixed_decay():
    """The shipped recipes set ema_start: their curves are as before."""
    value, _ = _averaged(0.5, 3, 8)
    expected = 4.0  # the weights after step ema_start + 1
    for step in range(5, 9):
        expected = 0.5 * expected + 0.5 * step
    assert value == pytest.approx(expected, rel=1e-7)


def test_a_resumed_average_continues_its_warm_up(tmp_path, shakespeare_path):
    """The warm-up's count comes back from the checkpoint: a resumed run's average
    is an uninterrupted run's."""
    from model.checkpoint import load_checkpoint

    quiet = {
        "train.ema_decay": 0.999,
        "train.sample_tokens": 0,
        "train.attention_prompt": "",
        "train.final_full_eval": False,
        "train.lr_decay_iters": 6,
    }
    whole = tiny_overrides(tmp_path / "whole", shakespeare_path, **quiet)
    train(load_config(None, whole))
    parts = tiny_overrides(tmp_path / "parts", shakespeare_path, **quiet)
    train(load_config(None, [*parts, "train.max_iters=3"]))
    train(load_config(None, [*parts, "train.resume=true"]))
    a = load_checkpoint(tmp_path / "whole" / "run" / "ckpt.pt")
    b = load_checkpoint(tmp_path / "parts" / "run" / "ckpt.pt")
    assert a["average"] == b["average"] == {"updates": 6, "warmup": True}
    for name, value in a["model"].items():
        assert torch.equal(value, b["model"][name]), name


def test_a_start_that_leaves_too_few_steps_for_the_decay_is_said():
    tc = TrainConfig(max_iters=200, lr_decay_iters=200, ema_decay=0.999, ema_start=50)
    notes = [n for n in schedule_notices(tc) if "ema_decay" in n]
    assert notes == [
        "note: train.ema_decay=0.999 averages over about 1000 steps, but 150 follow "
        "train.ema_start=50: 86% of the average the run evaluates and saves will be the "
        "weights of that step (a smaller train.ema_decay, or train.ema_start=0, which "
        "warms the decay up)"
    ]
    recipe = TrainConfig(max_iters=2200, lr_decay_iters=2200, ema_decay=0.99, ema_start=1800)
    assert not [n for n in schedule_notices(recipe) if "ema_decay" in n]  # 0.99^399: 2%
    korean = TrainConfig(max_iters=300, lr_decay_iters=300, ema_decay=0.99, ema_start=200)
    assert not [n for n in schedule_notices(korean) if "ema_decay" in n]  # 37%: not most


def test_an_average_from_the_first_step_says_it_warms_up():
    tc = TrainConfig(max_iters=200, lr_decay_iters=200, ema_decay=0.999, ema_start=0)
    assert [n for n in schedule_notices(tc) if "ema_decay" in n] == [
        "note: weight averaging from the first step (train.ema_start=0) warms its decay "
        "up, min(0.999, (1 + t) / (10 + t)) at update t, so the first, untrained weights "
        "are soon outweighed; it reaches train.ema_decay=0.999 at update 8,990"
    ]
    assert (1 + 8990) / (10 + 8990) == pytest.approx(0.999) and 8989 / 8998 < 0.999
    off = TrainConfig(max_iters=200, lr_decay_iters=200, ema_decay=0.0, ema_start=0)
    assert not [n for n in schedule_notices(off) if "ema_decay" in n]  # no averaging
