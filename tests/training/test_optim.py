import math

import pytest
import torch

from model import GPT, GPTConfig
from tests.conftest import TEST_DEVICE, read_scalars, tiny_overrides
from training import load_config, train
from training.config import TrainConfig
from training.optim import (
    BatchedMuon,
    build_optimizer,
    muon_parameter_groups,
    newton_schulz_dtype,
    orthogonalize,
    parameter_groups,
)
from training.schedule import learning_rate_at, scheduled_learning_rate, wsd_learning_rate_at
from viz.run_events import TRAIN_LR


def test_schedule_key_points():
    lr = dict(learning_rate=1e-3, min_lr=1e-4, warmup_iters=100, lr_decay_iters=1001)
    assert learning_rate_at(0, **lr) == pytest.approx(1e-3 / 101)
    assert learning_rate_at(99, **lr) == pytest.approx(1e-3 * 100 / 101)
    assert learning_rate_at(100, **lr) == pytest.approx(1e-3)
    assert learning_rate_at(550, **lr) == pytest.approx(1e-4 + 0.5 * 9e-4)  # half way
    assert learning_rate_at(999, **lr) > 1e-4
    assert learning_rate_at(1000, **lr) == 1e-4  # the schedule's last step
    assert learning_rate_at(5000, **lr) == 1e-4
    values = [learning_rate_at(s, **lr) for s in range(100, 1001)]
    assert all(a > b for a, b in zip(values, values[1:], strict=False))


@pytest.mark.parametrize("schedule", ["cosine", "wsd"])
def test_the_last_step_of_the_schedule_runs_at_min_lr(schedule):
    """A run of lr_decay_iters steps (the default: max_iters) takes its last optimizer
    step, index max_iters - 1, at min_lr, and every step of its decay before that above
    it (torchtitan#1261, gpt-neox#1011)."""
    for max_iters in (2, 3, 5, 20, 101, 2200):
        for warmup in sorted({0, 1, max_iters // 10, max_iters - 2}):
            for min_lr in (0.0, 1e-4):
                tc = TrainConfig(
                    lr_schedule=schedule,
                    learning_rate=1e-3,
                    min_lr=min_lr,
                    warmup_iters=max(0, warmup),
                    max_iters=max_iters,
                )
                tc.lr_decay_iters = max_iters
                lrs = [scheduled_learning_rate(s, tc) for s in range(max_iters + 3)]
                assert lrs[max_iters - 1] == min_lr, (max_iters, warmup, min_lr)
                assert lrs[max_iters:] == [min_lr] * 3  # and on, for a run extended later
                decay = lrs[tc.warmup_iters : max_iters - 1]  # the warmup may start lower
                assert all(lr > min_lr for lr in decay), (max_iters, warmup, min_lr)


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
    # The warmdown: the last 20 steps (80..99), each below the peak, the last at min_lr.
    assert wsd_learning_rate_at(79, **lr, warmdown_fraction=0.2) == pytest.approx(1e-3)
    assert wsd_learning_rate_at(80, **lr, warmdown_fraction=0.2) == pytest.approx(1e-3 - 4.5e-5)
    assert wsd_learning_rate_at(89, **lr, warmdown_fraction=0.2) == pytest.approx(5.5e-4)
    assert wsd_learning_rate_at(99, **lr, warmdown_fraction=0.2) == 1e-4
    assert wsd_learning_rate_at(100, **lr, warmdown_fraction=0.2) == 1e-4
    cfg = TrainConfig(lr_schedule="wsd", learning_rate=1e-3, min_lr=1e-4, warmup_iters=10)
    cfg.lr_decay_iters = 100
    assert scheduled_learning_rate(89, cfg) == pytest.approx(5.5e-4)
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


NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)  # torch.optim.Muon's defaults
# The batched and the one-at-a-time bfloat16 iterations, on a device where a batched
# product may round differently: entries of the result are below about 0.5, and
# bfloat16 keeps 8 significant bits (a step of 2^-9 near 0.3), amplified a few times
# over five iterations.
NS_TOLERANCE = 2e-2


def newton_schulz_one_matrix(g: torch.Tensor, steps: int = 5) -> torch.Tensor:
    """The reference: Muon's quintic iteration on one 2-D matrix, written out."""
    a, b, c = NS_COEFFICIENTS
    x = g.bfloat16()
    tall = x.size(0) > x.size(1)
    if tall:
        x = x.T
    x = x / x.norm().clamp(min=1e-7)
    for _ in range(steps):
        gram = x @ x.T
        x = torch.addmm(x, torch.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x.T if tall else x


@pytest.mark.parametrize("shape", [(384, 128), (128, 128), (128, 512), (48, 16)])
def test_batched_newton_schulz_equals_one_matrix_at_a_time(shape):
    """Bit for bit on CPU (what keeps the CPU recipe's curve); within NS_TOLERANCE on
    CUDA. Each matrix has its own scale, so a norm shared across the stack would show."""
    torch.manual_seed(0)
    scales = torch.tensor([1.0, 1e-3, 30.0, 0.5]).view(4, 1, 1)
    stack = (torch.randn(4, *shape) * scales).to(TEST_DEVICE)
    batched = orthogonalize(stack, NS_COEFFICIENTS, 5, 1e-7)
    one_by_one = torch.stack([newton_schulz_one_matrix(g) for g in stack])
    assert batched.dtype == torch.bfloat16 and batched.shape == stack.shape
    if TEST_DEVICE.type == "cpu":
        assert torch.equal(batched, one_by_one)
    else:
        torch.testing.assert_close(batched, one_by_one, atol=NS_TOLERANCE, rtol=0)
    # It does orthogonalize: singular values near 1 (the quintic leaves most in about
    # [0.7, 1.2]; the few smallest of a square random matrix stay below).
    singular = torch.linalg.svdvals(batched[0].float())
    assert 0.6 < torch.quantile(singular, 0.1) and singular.max() < 1.25


def test_batched_muon_steps_exactly_like_torch_muon():
    """Three steps of the CPU recipe's block matrices (four shapes, four of each, and a
    matrix without a gradient): the same weights and momentum as torch.optim.Muon's,
    bit for bit on CPU, and either optimizer resumes from the other's state_dict."""
    torch.manual_seed(0)
    shapes = [(384, 128), (128, 128), (512, 128), (128, 512)] * 4 + [(64, 32)]
    weights = [torch.randn(shape) * 0.02 for shape in shapes]
    grads = [[torch.randn(shape) for shape in shapes[:-1]] for _ in range(3)]
    kwargs = {"lr": 0.02, "weight_decay": 0.1, "momentum": 0.95, "adjust_lr_fn": "match_rms_adamw"}
    trained = {}
    for kind in (torch.optim.Muon, BatchedMuon):
        params = [torch.nn.Parameter(w.clone()) for w in weights]
        opt = kind(params, **kwargs)
        opt.products_dtype = torch.bfloat16  # torch's arithmetic, on any CPU
        for step_grads in grads:
            for p, g in zip(params, step_grads, strict=False):
                p.grad = g.clone()
            opt.step()
        trained[kind] = params, opt
    (reference, torch_muon), (batched, ours) = trained[torch.optim.Muon], trained[BatchedMuon]
    for p, q in zip(reference, batched, strict=True):
        assert torch.equal(p, q)
    assert len(ours.state) == len(shapes) - 1  # no state for the matrix without a gradient
    for p, q in zip(reference[:-1], batched[:-1], strict=True):
        assert torch.equal(torch_muon.state[p]["momentum_buffer"], ours.state[q]["momentum_buffer"])
    resumed = BatchedMuon([torch.nn.Parameter(w.clone()) for w in weights], **kwargs)
    resumed.load_state_dict(torch_muon.state_dict())
    assert resumed.param_groups[0]["ns_steps"] == 5 and len(resumed.state) == len(shapes) - 1


def test_muon_and_wsd_train_and_resume_exactly(tmp_path, shakespeare_path):
    from tests.conftest import tiny_overrides
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


def test_muon_computes_in_float32_where_bfloat16_is_emulated(monkeypatch):
    """A CPU without AVX512-BF16 or AMX emulates bfloat16 products 25-50 times slower
    than float32: Muon's Newton-Schulz then runs in float32; with them, in bfloat16."""
    import training.optim

    cpu = torch.device("cpu")
    monkeypatch.setattr(training.optim, "cpu_has_bfloat16", lambda: False)
    assert newton_schulz_dtype(cpu) == torch.float32
    monkeypatch.setattr(training.optim, "cpu_has_bfloat16", lambda: True)
    assert newton_schulz_dtype(cpu) == torch.bfloat16

    torch.manual_seed(0)
    update = torch.randn(2, 64, 128)
    exact = orthogonalize(update, (3.4445, -4.7750, 2.0315), 5, 1e-7, torch.float32)
    assert exact.dtype == torch.float32
    half = orthogonalize(update, (3.4445, -4.7750, 2.0315), 5, 1e-7).float()
    # The same map, only rounded: float32 and bfloat16 agree to bfloat16's precision.
    assert (exact - half).abs().max() < 0.05 and not torch.equal(exact, half)
    singular = torch.linalg.svdvals(exact)
    assert 0.6 < singular.min() and singular.max() < 1.25  # pushed towards 1
