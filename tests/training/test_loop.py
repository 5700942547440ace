"""training/loop.py: a run evaluates and checkpoints at its end, whatever its eval_interval."""

from model.checkpoint import load_checkpoint
from tests.conftest import tiny_overrides
from training import load_config, train


def test_eval_interval_longer_than_the_run_still_evaluates(tmp_path, shakespeare_path):
    cfg = load_config(
        None, tiny_overrides(tmp_path, shakespeare_path, **{"train.eval_interval": 1000})
    )
    result = train(cfg)
    assert [e["iter"] for e in result.evals] == [6]
    assert load_checkpoint(tmp_path / "run" / "ckpt.pt")["iter_num"] == 6
