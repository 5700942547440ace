"""A seed changed on resume is listed with what it does: only the TensorBoard sample
changes (the run's batches and dropout continue the checkpoint's random streams). It
was listed as "seed: 1337 -> 42", as if the run now drew other batches."""

import shutil

from conftest import tiny_overrides
from training import load_config, train


def test_a_new_seed_on_resume_says_it_changes_only_the_sample(tmp_path, shakespeare_path, capsys):
    first = {"model.dropout": 0.1, "train.max_iters": 2, "train.lr_decay_iters": 4}
    train(load_config(None, tiny_overrides(tmp_path / "a", shakespeare_path, **first)))
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    capsys.readouterr()
    losses = {}
    for name, seed in (("a", 1337), ("b", 42)):
        resumed = {**first, "train.max_iters": 4, "train.resume": True, "seed": seed}
        result = train(
            load_config(None, tiny_overrides(tmp_path / name, shakespeare_path, **resumed))
        )
        losses[name] = result.losses
    out = capsys.readouterr().out
    assert "seed: 1337 -> 42 (the TensorBoard sample's seed only: batches and dropout " in out
    assert losses["a"] == losses["b"]  # what the note says: the training is the same
