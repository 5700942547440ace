import math

import pytest
import torch

from conftest import read_scalars, tiny_overrides
from model import GPT, GPTConfig
from training import load_config, train
from training.config import TrainConfig
from training.optim import build_optimizer, muon_parameter_groups, parameter_groups
from training.run_writer import TRAIN_LR
from training.schedule import learning_rate_at, scheduled_learning_rate, wsd_learning_rate_at


def test_schedule_key_points():
    lr = dict(learning_rate=1e-3, min_lr=1e-4, warmup_iters=100, lr_decay_iters=1000)
    assert learning_rate_at(0, **lr) == pytest.approx(1e-3 / 101)
    assert learning_rate_at(99, **lr) == pytest.approx(1e-3 * 100 / 101)
    assert learning_rate_at(100, **lr) == pytest.approx(1e-3)
    assert learning_rate_at(550, **lr) == pytest.approx(1e-4 + 0.5 * 9e-4)  # half way
    assert learning_rate_at(1000, **lr) == pytest.approx(1e-4)
    assert learning_rate_at(5000, **lr) == pytest.approx(1e-4)
    values = [learning_rate_at(s, **lr) for s in range(100, 1001)]
    assert all(a >= b for a, b in zip(values, values[1:], strict=False))


@pytest.mark.parametrize("bias", [True, False])
def test_every_parameter_in_exactly_one_group(bias):
    model = GPT(GPTConfig(vocab_size=30, block_size=8, n_layer=2, n_head=2, n_embd=16, bias=bias))
    decay, no_decay = parameter_groups(model)
    assert set(decay["names"]).isdisjoint(no_decay["names"])
    all_names = {n for n, _ in model.named_parameters()}
    assert set(decay["names"]) | set(no_decay["names"]) == all_names
    assert all(
        n.endswith(("qkv_proj.weight", "out_proj.weight", "up_proj.weight", "down_proj.weight"))
        for n in decay["names"]
    )
    assert "token_embedding.weight" in no_decay["names"]
    assert "position_embedding.weight" in no_decay["names"]
    assert any("ln_" in n for n in no_decay["names"])
    opt = build_optimizer(model, TrainConfig(weight_decay=0.1), "cpu")
    assert [g["weight_decay"] for g in opt.param_groups] == [0.1, 0.0]
    n_opt = sum(p.numel() for g in opt.param_groups for p in g["params"])
    assert n_opt == sum(p.numel() for p in model.parameters())
    assert math.isclose(opt.param_groups[0]["betas"][1], 0.99)


def test_wsd_schedule_key_points():
    lr = dict(learning_rate=1e-3, min_lr=1e-4, warmup_iters=10, lr_decay_iters=100)
    assert wsd_learning_rate_at(0, **lr, warmdown_fraction=0.2) == pytest.approx(1e-3 / 11)
    assert wsd_learning_rate_at(10, **lr, warmdown_fraction=0.2) == pytest.approx(1e-3)
    assert wsd_learning_rate_at(79, **lr, warmdown_fraction=0.2) == pytest.approx(1e-3)
    assert wsd_learning_rate_at(90, **lr, warmdown_fraction=0.2) == pytest.approx(5.5e-4)
    assert wsd_learning_rate_at(100, **lr, warmdown_fraction=0.2) == pytest.approx(1e-4)
    cfg = TrainConfig(lr_schedule="wsd", learning_rate=1e-3, min_lr=1e-4, warmup_iters=10)
    cfg.lr_decay_iters = 100
    assert scheduled_learning_rate(90, cfg) == pytest.approx(5.5e-4)
    cfg.lr_schedule = "cosine"
    assert scheduled_learning_rate(90, cfg) == learning_rate_at(90, **lr)


@pytest.mark.parametrize("bias", [True, False])
def test_muon_groups_cover_every_parameter_once(bias):
    model = GPT(GPTConfig(vocab_size=30, block_size=8, n_layer=2, n_head=2, n_embd=16, bias=bias))
    hidden, other, no_decay = muon_parameter_groups(model)
    assert hidden["names"] and all(n.startswith("blocks.") for n in hidden["names"])
    assert all(p.dim() == 2 for p in hidden["params"])
    assert other["names"] == []  # the tied LM head is the token embedding
    assert "token_embedding.weight" in no_decay["names"]
    opt = build_optimizer(model, TrainConfig(optimizer="muon", muon_lr=0.02), "cpu")
    assert isinstance(opt.optimizers[0], torch.optim.Muon)
    counted = sum(p.numel() for g in opt.param_groups for p in g["params"])
    assert counted == sum(p.numel() for p in model.parameters())
    assert opt.param_groups[0]["lr_scale"] == pytest.approx(0.02 / 1e-3)


def test_muon_lowers_the_loss_on_a_tiny_problem():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=30, block_size=16, n_layer=2, n_head=2, n_embd=32))
    opt = build_optimizer(model, TrainConfig(optimizer="muon", learning_rate=3e-3), "cpu")
    for group in opt.param_groups:
        group["lr"] = 3e-3 * group["lr_scale"]
    x = torch.randint(0, 30, (8, 16))
    y = torch.roll(x, -1, dims=1)  # a learnable rule: predict the next token of x
    losses = []
    for _ in range(40):
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.6 * losses[0]
    state = opt.state_dict()
    again = build_optimizer(model, TrainConfig(optimizer="muon", learning_rate=3e-3), "cpu")
    again.load_state_dict(state)
    assert len(again.optimizers[0].state) == len(opt.optimizers[0].state)


def test_muon_and_wsd_train_and_resume_exactly(tmp_path, shakespeare_path):
    from conftest import tiny_overrides
    from training import load_config, train

    opts = {"train.optimizer": "muon", "train.lr_schedule": "wsd", "train.lr_decay_iters": 6}
    full = train(load_config(None, tiny_overrides(tmp_path / "a", shakespeare_path, **opts)))
    assert full.losses[6] < full.losses[1]
    first = train(
        load_config(
            None, tiny_overrides(tmp_path / "b", shakespeare_path, **opts, **{"train.max_iters": 3})
        )
    )
    second = train(
        load_config(
            None, tiny_overrides(tmp_path / "b", shakespeare_path, **opts, **{"train.resume": True})
        )
    )
    assert {**first.losses, **second.losses} == full.losses


def logged_lr(folder) -> dict[int, float]:
    return dict(read_scalars(folder)[TRAIN_LR])


def test_extending_a_finished_run_keeps_its_schedule(tmp_path, shakespeare_path, capsys):
    """max_iters 6, then resumed to 10: the schedule keeps its 6 steps, so steps 7..10
    continue at min_lr instead of jumping back up; lr_decay_iters given anew stretches it."""
    first = tiny_overrides(tmp_path, shakespeare_path, **{"train.warmup_iters": 1})
    train(load_config(None, first))
    capsys.readouterr()
    train(load_config(None, first + ["train.resume=true", "train.max_iters=10"]))
    out = capsys.readouterr().out
    line = (
        "resuming at step 6 of 10: the cosine learning-rate schedule keeps its length of 6 "
        "steps; steps past 6 run at train.min_lr=1.0e-04 (give train.lr_decay_iters=10 to "
        "stretch it)"
    )
    assert line in out
    lr = logged_lr(tmp_path / "run")
    six = TrainConfig(learning_rate=1e-3, min_lr=1e-4, warmup_iters=1, lr_decay_iters=6)
    assert lr[6] == pytest.approx(scheduled_learning_rate(5, six))  # logged steps are 1-based
    assert [lr[s] for s in range(7, 11)] == pytest.approx([1e-4] * 4)

    # A warmup longer than the schedule goes on past it, and the note says so.
    long_warmup = tiny_overrides(tmp_path / "warm", shakespeare_path, **{"train.warmup_iters": 8})
    train(load_config(None, long_warmup))
    capsys.readouterr()
    train(load_config(None, long_warmup + ["train.resume=true", "train.max_iters=10"]))
    assert (
        "steps past 6 continue the warmup to step 8 (train.warmup_iters), then run at "
        "train.min_lr=1.0e-04" in capsys.readouterr().out
    )
    lr = logged_lr(tmp_path / "warm" / "run")
    eight = TrainConfig(learning_rate=1e-3, min_lr=1e-4, warmup_iters=8, lr_decay_iters=6)
    assert [lr[s] for s in range(7, 11)] == pytest.approx(
        [scheduled_learning_rate(s - 1, eight) for s in range(7, 11)]
    )
    assert lr[8] > lr[7] > 1e-4 and lr[9] == lr[10] == pytest.approx(1e-4)

    stretched = tmp_path / "stretched"
    second = tiny_overrides(stretched, shakespeare_path, **{"train.warmup_iters": 1})
    train(load_config(None, second))
    capsys.readouterr()
    resumed = second + ["train.resume=true", "train.max_iters=10", "train.lr_decay_iters=10"]
    train(load_config(None, resumed))
    ten = TrainConfig(learning_rate=1e-3, min_lr=1e-4, warmup_iters=1, lr_decay_iters=10)
    expected = scheduled_learning_rate(6, ten)  # 0-based step 6 is logged as step 7
    assert (
        "the cosine learning-rate schedule now lasts train.lr_decay_iters=10 steps instead of "
        f"6: the learning rate goes from {scheduled_learning_rate(5, six):.2e} at step 6 to "
        f"{expected:.2e} at step 7"
    ) in capsys.readouterr().out
    assert logged_lr(stretched / "run")[7] == pytest.approx(expected)


def test_schedule_notice_when_the_run_stops_before_the_decay(tmp_path, shakespeare_path, capsys):
    overrides = tiny_overrides(tmp_path, shakespeare_path, **{"train.lr_decay_iters": 100})
    train(load_config(None, overrides))
    assert "stops before the decay ends" in capsys.readouterr().out
