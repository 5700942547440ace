"""Hints that satisfy every rule in force, and slips that get one.

``model.n_head=3`` suggested n_embd=129, which the RoPE recipe then refused (an odd
head size); ``python train.py configs/x.yaml`` (no --config) said only "must look like
section.key=value".
"""

import pytest

import train as train_py
from training.config import ConfigError, load_config


def _problems(overrides: list[str]) -> str:
    try:
        load_config(None, overrides)
    except ConfigError as e:
        return str(e)
    return ""


def test_the_rope_recipe_with_three_heads_is_offered_a_width_it_accepts():
    refused = _problems(["model.position=rope", "model.n_head=3"])
    assert "for example n_embd=126" in refused  # 3 heads of 42: even
    assert _problems(["model.position=rope", "model.n_head=3", "model.n_embd=126"]) == ""


@pytest.mark.parametrize("position", ["learned", "rope"])
def test_every_suggested_width_is_accepted(position):
    for n_head in range(1, 13):
        for n_embd in range(1, 200, 7):
            given = [f"model.position={position}", f"model.n_head={n_head}"]
            refused = _problems([*given, f"model.n_embd={n_embd}"])
            if not refused:
                continue
            width = int(refused.split("for example n_embd=")[1].split()[0])
            assert _problems([*given, f"model.n_embd={width}"]) == "", (n_head, n_embd)
            assert abs(width - n_embd) <= n_head * (2 if position == "rope" else 1)


def test_a_recipe_given_without_config_is_named(capsys):
    assert train_py.main(["configs/shakespeare_char_cpu.yaml"]) == 2
    err = capsys.readouterr().err
    assert "did you mean --config configs/shakespeare_char_cpu.yaml?" in err


def test_a_value_typed_after_a_space_is_named():
    refused = _problems(["train.max_iters", "100"])
    assert "write train.max_iters=VALUE, with no space around '='" in refused
