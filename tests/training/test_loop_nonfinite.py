"""A NaN or infinite loss stops the run, keeping the last good checkpoint
(training/distributed.py's NonFiniteWatch)."""

import pytest
import torch

from model import GPT
from model.checkpoint import load_checkpoint
from tests.conftest import tiny_overrides
from training import load_config
from training.distributed import NonFiniteLossError
from training.loop import Trainer


def nan_at_training_call(model: GPT, at: int) -> None:
    """Make the ``at``-th training-mode forward pass produce NaN logits."""
    calls = {"n": 0}

    def hook(module, inputs, output):
        if module.training:
            calls["n"] += 1
            if calls["n"] == at:
                return output * float("nan")
        return output

    model.lm_head.register_forward_hook(hook)


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path, shakespeare_path):
    cfg = load_config(
        None,
        tiny_overrides(
            tmp_path, shakespeare_path, **{"train.max_iters": 10, "train.log_interval": 5}
        ),
    )
    trainer = Trainer(cfg)
    nan_at_training_call(trainer.model, at=5)
    with pytest.raises(NonFiniteLossError, match="iteration 5"):
        trainer.run()
    ckpt = load_checkpoint(tmp_path / "run" / "ckpt.pt")
    assert ckpt["iter_num"] == 3  # the evaluation before the NaN
    assert all(torch.isfinite(t).all() for t in ckpt["model"].values())
