import math

import pytest

from model import GPT, GPTConfig
from training.config import TrainConfig
from training.optim import build_optimizer, parameter_groups
from training.schedule import learning_rate_at


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
