"""Four short planted training runs, each with its expected verdict at its end
(training/diagnose.py); rules on hand-made curves are in test_diagnose.py."""

import pytest

from tests.conftest import shakespeare, tiny_overrides
from training import load_config, train
from training.diagnose import diagnose, read_run

QUIET = {
    "train.sample_tokens": 0,
    "train.attention_prompt": "",
    "train.snapshots": 0,
    "train.final_full_eval": False,
}


def verdicts(tmp_path, corpus, **settings) -> list[str]:
    train(load_config(None, tiny_overrides(tmp_path, corpus, **QUIET, **settings)))
    return diagnose(read_run(tmp_path / "run"))


@pytest.mark.slow
def test_a_few_steps_are_told_to_train_longer(tmp_path):
    lines = verdicts(tmp_path, shakespeare(), **{"train.max_iters": 8, "train.eval_interval": 4})
    assert [line.split(":")[0] for line in lines] == ["still learning fast at the end"]
    assert "train.max_iters=16 (now 8)" in lines[0]


@pytest.mark.slow
def test_ten_times_the_learning_rate_is_told_to_lower_it(tmp_path):
    settings = {
        "train.max_iters": 40,
        "train.eval_interval": 20,
        "train.learning_rate": 0.05,  # ten times the CPU recipe's 5e-3
        "train.warmup_iters": 2,
        "train.grad_clip": 0,
    }
    lines = verdicts(tmp_path, shakespeare(), **settings)
    assert any(line.startswith("learning rate too high") for line in lines), lines
    assert "train.learning_rate=0.0167 (now 0.05)" in "\n".join(lines)


@pytest.mark.slow
def test_a_large_model_on_a_tiny_text_is_told_it_overfits(tmp_path):
    small = tmp_path / "small.txt"
    small.write_text(shakespeare().read_text(encoding="utf-8")[:2000], encoding="utf-8")
    settings = {  # its validation loss is lowest at step 50, then rises
        "model.n_embd": 128,
        "train.batch_size": 16,
        "train.max_iters": 100,
        "train.eval_interval": 25,
        "train.learning_rate": 3e-3,
        "train.min_lr": 3e-3,
        "train.warmup_iters": 10,
        "data.val_fraction": 0.25,
    }
    lines = verdicts(tmp_path, small, **settings)
    kinds = {line.split(":")[0] for line in lines}
    assert {"overfitting", "model too large for its corpus"} <= kinds, lines


@pytest.mark.slow
def test_a_healthy_run_gets_no_verdict(tmp_path):
    easy = tmp_path / "easy.txt"
    easy.write_text("the cat sat on the mat. " * 2000, encoding="utf-8")
    settings = {
        "train.max_iters": 60,
        "train.eval_interval": 20,
        "train.learning_rate": 1e-2,
        "train.warmup_iters": 5,
    }
    assert verdicts(tmp_path, easy, **settings) == []
