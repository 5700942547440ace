"""Weight averaging (train.ema_decay) and the embedding tables' own learning rate
(train.embedding_lr)."""

import pytest
import torch

from model import GPT, GPTConfig
from model.checkpoint import load_checkpoint
from tests.conftest import tiny_overrides
from training import load_config, train
from training.config import TrainConfig
from training.loop import Trainer
from training.optim import build_optimizer

AVERAGING = {"train.ema_decay": 0.5, "train.ema_start": 3, "train.max_iters": 8}


def test_the_saved_model_is_the_moving_average_of_the_trained_weights(tmp_path, shakespeare_path):
    cfg = load_config(None, tiny_overrides(tmp_path, shakespeare_path, **AVERAGING))
    trainer = Trainer(cfg)
    after_each_step = []
    real_step = trainer.train_step

    def recording_step(step):
        out = real_step(step)
        # On the host, as the checkpoint is, whatever device the run trains on.
        after_each_step.append(
            {k: v.to("cpu", copy=True) for k, v in trainer.model.state_dict().items()}
        )
        return out

    trainer.train_step = recording_step
    trainer.run()
    # Steps 1..3 are not averaged; the average starts at the weights after step 4.
    expected = dict(after_each_step[3])
    for weights in after_each_step[4:]:
        expected = {k: 0.5 * expected[k] + 0.5 * weights[k] for k in expected}
    ckpt = load_checkpoint(tmp_path / "run" / "ckpt.pt")
    for name, value in expected.items():
        torch.testing.assert_close(ckpt["model"][name], value, atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(ckpt["training_weights"][name], after_each_step[-1][name])
    assert ckpt["average"] == {"updates": 5, "warmup": False}
    moved = max((ckpt["model"][k] - after_each_step[-1][k]).abs().max() for k in expected)
    assert moved > 1e-4  # the average is not just the last weights
    best = load_checkpoint(tmp_path / "run" / "best.pt")
    assert "training_weights" not in best  # weights-only: the average, for sampling


def test_resume_during_averaging_is_exact(tmp_path, shakespeare_path):
    straight = train(
        load_config(None, tiny_overrides(tmp_path / "a", shakespeare_path, **AVERAGING))
    )
    first = {**AVERAGING, "train.max_iters": 5, "train.lr_decay_iters": 8}
    train(load_config(None, tiny_overrides(tmp_path / "b", shakespeare_path, **first)))
    resumed = {**AVERAGING, "train.resume": True}
    second = train(load_config(None, tiny_overrides(tmp_path / "b", shakespeare_path, **resumed)))
    assert {s: loss for s, loss in straight.losses.items() if s > 5} == second.losses
    assert straight.evals[-1]["val_loss"] == second.evals[-1]["val_loss"]
    a = load_checkpoint(tmp_path / "a" / "run" / "ckpt.pt")
    b = load_checkpoint(tmp_path / "b" / "run" / "ckpt.pt")
    for name in a["model"]:
        assert torch.equal(a["model"][name], b["model"][name]), name


@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
def test_embedding_lr_gives_the_embedding_tables_their_own_learning_rate(optimizer):
    model = GPT(GPTConfig(vocab_size=20, block_size=8, n_layer=1, n_head=2, n_embd=16))
    cfg = TrainConfig(learning_rate=0.005, embedding_lr=0.03, optimizer=optimizer)
    opt = build_optimizer(model, cfg, "cpu")
    tables = {id(model.token_embedding.weight), id(model.position_embedding.weight)}
    scales = {id(p): g["lr_scale"] for g in opt.param_groups for p in g["params"]}
    for name, param in model.named_parameters():  # 0.03 / 0.005 for the tables only
        expected = 6.0 if id(param) in tables else 1.0
        assert scales[id(param)] == pytest.approx(expected), name
    # Without it, every AdamW parameter keeps the schedule's rate (scale 1).
    plain = build_optimizer(model, TrainConfig(learning_rate=0.005, optimizer=optimizer), "cpu")
    assert len(plain.param_groups) == len(opt.param_groups) - 1
