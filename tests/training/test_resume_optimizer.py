"""Optimizer settings changed on resume are applied, keeping the moment estimates.

A resume with a new train.weight_decay, beta2, embedding_lr, muon_lr or muon_momentum
said "resuming with changed settings: ..." and recorded the new values, but
``optimizer.load_state_dict`` put the saved parameter groups back: ten resumed steps
gave bit-identical weights with and without the change. The reference here is a
checkpoint whose saved groups already hold the new values (as if the run had been
given them from the start), resumed unchanged: the changed resume must match it
exactly, and differ from a resume without the change.
"""

import shutil

import pytest
import torch

from model.checkpoint import load_checkpoint, save_checkpoint
from tests.conftest import tiny_overrides
from training import load_config, train
from training.config import ConfigError

# Small and quiet: no sample, heatmaps or whole-split score, which take most of a run.
QUIET = {
    "train.sample_tokens": 0,
    "train.attention_prompt": "",
    "train.final_full_eval": False,
    "train.eval_tokens": 2048,
    "train.batch_size": 4,
    "model.block_size": 16,
}
FIRST = {**QUIET, "train.max_iters": 2, "train.lr_decay_iters": 12, "train.eval_interval": 2}
RESUMED = {**FIRST, "train.max_iters": 12, "train.eval_interval": 12, "train.resume": True}


def _run(tmp_path, corpus, name, **settings):
    overrides = tiny_overrides(tmp_path / name, corpus, **settings)
    return train(load_config(None, overrides))


def _weights(tmp_path, name) -> dict:
    ckpt = load_checkpoint(tmp_path / name / "run" / "ckpt.pt")
    return {k: v.clone() for k, v in ckpt["model"].items()}


def _groups(optimizer_state: dict) -> list[dict]:
    """Every saved parameter group, for AdamW and for the Muon pair alike."""
    states = optimizer_state.get("optimizers", [optimizer_state])
    return [g for state in states for g in state["param_groups"]]


def _give_saved_groups(path, config_changes: dict, edit) -> None:
    """Rewrite a checkpoint as if its run had had ``config_changes`` all along: its
    config and its optimizer's parameter groups (``edit(groups)``) hold the new values."""
    ckpt = load_checkpoint(path)
    for key, value in config_changes.items():
        ckpt["config"]["train"][key.split(".", 1)[1]] = value
    edit(_groups(ckpt["optimizer"]))
    save_checkpoint({k: v for k, v in ckpt.items() if k != "format_version"}, path)


def _compare(tmp_path, corpus, first: dict, changes: dict, edit) -> None:
    _run(tmp_path, corpus, "unchanged", **first)
    for name in ("changed", "reference"):
        shutil.copytree(tmp_path / "unchanged", tmp_path / name)
    _give_saved_groups(tmp_path / "reference" / "run" / "ckpt.pt", changes, edit)
    _run(tmp_path, corpus, "unchanged", **{**first, **RESUMED})
    _run(tmp_path, corpus, "changed", **{**first, **RESUMED, **changes})
    _run(tmp_path, corpus, "reference", **{**first, **RESUMED, **changes})
    unchanged, changed = _weights(tmp_path, "unchanged"), _weights(tmp_path, "changed")
    reference = _weights(tmp_path, "reference")
    assert any(not torch.equal(changed[k], unchanged[k]) for k in changed)
    for key, value in changed.items():
        assert torch.equal(value, reference[key]), key


def test_adamw_settings_changed_on_resume_are_applied(tmp_path, shakespeare_path, capsys):
    first = {**FIRST, "train.embedding_lr": 0.002}
    changes = {"train.weight_decay": 0.5, "train.beta2": 0.9, "train.embedding_lr": 0.004}

    def edit(groups):
        for group in groups:
            group["betas"] = (0.9, 0.9)
            if group["weight_decay"]:
                group["weight_decay"] = 0.5
            if group["lr_scale"] == pytest.approx(2.0):  # embedding_lr / learning_rate
                group["lr_scale"] = 4.0

    _compare(tmp_path, shakespeare_path, first, changes, edit)
    out = capsys.readouterr().out
    assert "train.weight_decay: 0.1 -> 0.5" in out and "train.beta2: 0.99 -> 0.9" in out


@pytest.mark.slow  # Muon's bfloat16 steps: about 12 s on 2 shared cores
def test_muon_settings_changed_on_resume_are_applied(tmp_path, shakespeare_path):
    first = {**FIRST, "train.optimizer": "muon", "train.muon_lr": 0.002}
    changes = {"train.muon_lr": 0.01, "train.muon_momentum": 0.8}

    def edit(groups):
        muon = groups[0]  # the Muon optimizer's one group comes first
        muon["momentum"], muon["lr_scale"] = 0.8, 10.0

    _compare(tmp_path, shakespeare_path, first, changes, edit)


@pytest.mark.parametrize(("before", "after"), [(None, 0.004), (0.004, None)])
def test_embedding_lr_to_or_from_null_on_resume_is_refused(
    tmp_path, shakespeare_path, before, after
):
    """null <-> a value adds or removes a parameter group, which the saved moments
    cannot follow: refused, naming the key (it said "does not fit train.optimizer")."""
    _run(tmp_path, shakespeare_path, "a", **{**FIRST, "train.embedding_lr": before})
    with pytest.raises(ConfigError, match=r"train\.embedding_lr") as error:
        _run(tmp_path, shakespeare_path, "a", **{**RESUMED, "train.embedding_lr": after})
    assert f"resume with train.embedding_lr={'null' if before is None else before}" in str(
        error.value
    )
