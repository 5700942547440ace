"""A seed changed on resume is listed with what it does: only the TensorBoard sample
changes (the run's batches and dropout continue the checkpoint's random streams). It
was listed as "seed: 1337 -> 42", as if the run now drew other batches."""

import shutil

from tests.conftest import tiny_overrides
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


def test_a_resume_in_another_environment_says_the_losses_will_not_repeat(
    tmp_path, shakespeare_path, capsys
):
    """torch, the device and the CPU thread count are no config keys, but each changes
    the rounding: a resume on another machine or after an upgrade went on without a
    word, though its losses no longer repeat an uninterrupted run's."""
    import torch

    from model.checkpoint import load_checkpoint, save_checkpoint

    given = tiny_overrides(tmp_path, shakespeare_path, **{"train.max_iters": 2})
    train(load_config(None, given))
    ckpt_path = tmp_path / "run" / "ckpt.pt"
    ckpt = load_checkpoint(ckpt_path)
    here = ckpt["environment"]
    assert here["torch"] == torch.__version__ and here["threads"] == torch.get_num_threads()
    capsys.readouterr()
    train(load_config(None, [*given, "train.resume=true", "train.max_iters=3"]))
    assert "another environment" not in capsys.readouterr().out  # the same machine

    ckpt = load_checkpoint(ckpt_path)
    ckpt["environment"] = {**here, "torch": "2.0.0", "threads": here["threads"] + 7}
    save_checkpoint({k: v for k, v in ckpt.items() if k != "format_version"}, ckpt_path)
    train(load_config(None, [*given, "train.resume=true", "train.max_iters=4"]))
    out = capsys.readouterr().out
    threads = ""
    if here["device"] == "cpu":
        threads = f"; CPU threads {here['threads'] + 7} -> {here['threads']}"
    assert (
        f"note: resuming in another environment (torch 2.0.0 -> {torch.__version__}{threads}): "
        "training goes on, but its losses will not repeat an uninterrupted run's bit for bit"
    ) in out
    assert load_checkpoint(ckpt_path)["environment"] == here  # the run's own, from now on
