"""Text settings keep the text as typed, in overrides and in YAML files.

``out_dir=007`` trained into a folder ``7``; in a YAML file ``sample_prompt: 12:30``
became '750' (YAML 1.1 reads base 60) and ``0755`` '493' (octal); ``data.path=2024.10``
became 2024.1. Every key of type text is checked, so a new one is covered too.
"""

import typing

import pytest

from training.config import _field_types, load_config

TEXT_KEYS = [
    key
    for key, hint in _field_types().items()
    if hint is str
    or (typing.get_origin(hint) is not typing.Literal and str in typing.get_args(hint))
]


def _value(cfg, key: str):
    target = cfg
    for part in key.split("."):
        target = getattr(target, part)
    return target


def test_the_text_keys_are_the_paths_and_prompts():
    assert set(TEXT_KEYS) == {
        "out_dir",
        "data.path",
        "data.include",
        "data.separator",
        "data.cache_dir",
        "train.sample_prompt",
        "train.attention_prompt",
        "train.init_from",
    }


@pytest.mark.parametrize("key", TEXT_KEYS)
@pytest.mark.parametrize("typed", ["007", "2024.10", "0755", "1e3", "true", "off", "12:30"])
def test_an_override_keeps_the_text_as_typed(key, typed):
    assert _value(load_config(None, [f"{key}={typed}"]), key) == typed


@pytest.mark.parametrize("key", TEXT_KEYS)
@pytest.mark.parametrize("typed", ["007", "2024.10", "0755", "12:30", "off", "2024-10-01", "1_000"])
def test_a_yaml_value_keeps_the_text_as_typed(tmp_path, key, typed):
    section, _, leaf = key.rpartition(".")
    text = f"{section}:\n  {leaf}: {typed}\n" if section else f"{leaf}: {typed}\n"
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    assert _value(load_config(path), key) == typed


def test_quotes_and_null_keep_their_meaning(tmp_path):
    cfg = load_config(None, ["out_dir='007'", 'train.sample_prompt="12:30"'])
    assert (cfg.out_dir, cfg.train.sample_prompt) == ("007", "12:30")
    assert load_config(None, ["out_dir=null"]).out_dir == "runs/default"  # the default
    path = tmp_path / "c.yaml"
    path.write_text("out_dir: '0755'\ntrain:\n  max_iters: 0x10\n", encoding="utf-8")
    cfg = load_config(path)
    assert (cfg.out_dir, cfg.train.max_iters) == ("0755", 16)  # numbers stay numbers
