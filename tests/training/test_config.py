import importlib.util
import re
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from training.config import (
    SECTIONS,
    ConfigError,
    RunConfig,
    all_keys,
    config_fields,
    config_reference,
    flatten,
    in_bounds,
    load_config,
)


def _load_make_config_table():
    path = ROOT / "docs" / "make_config_table.py"
    spec = importlib.util.spec_from_file_location("make_config_table", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


with_generated_table = _load_make_config_table().with_generated_table

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_shipped_config_loads(path):
    cfg = load_config(path)
    assert cfg.out_dir == f"runs/{path.stem}"
    assert cfg.model.n_embd % cfg.model.n_head == 0


def test_shipped_configs_exist():
    assert {p.name for p in CONFIGS} >= {"shakespeare_char.yaml", "shakespeare_char_cpu.yaml"}


def test_gpu_reference_recipe():
    cfg = load_config(CONFIGS[0].parent / "shakespeare_char.yaml")
    m, t = cfg.model, cfg.train
    assert (m.n_layer, m.n_head, m.n_embd, m.block_size, m.dropout) == (6, 6, 384, 256, 0.2)
    assert (t.batch_size, t.learning_rate, t.max_iters, t.warmup_iters) == (64, 1e-3, 5000, 100)
    assert (t.min_lr, t.beta2) == (1e-4, 0.99)


def test_overrides_are_typed():
    cfg = load_config(
        None,
        [
            "train.max_iters=123",
            "train.learning_rate=3e-4",
            "model.dropout=0",
            "train.resume=true",
            "data.path=my file.txt",
            "out_dir=runs/x",
        ],
    )
    # Unset, the schedule's length is resolved by the run (max_iters, or kept on resume).
    assert cfg.train.max_iters == 123 and cfg.train.lr_decay_iters is None
    assert cfg.train.learning_rate == 3e-4
    assert cfg.model.dropout == 0.0 and isinstance(cfg.model.dropout, float)
    assert cfg.train.resume is True
    assert cfg.data.path == "my file.txt"
    assert cfg.out_dir == "runs/x"
    assert load_config().out_dir == "runs/default"


def test_unknown_keys_suggest_close_names():
    with pytest.raises(ConfigError) as err:
        load_config(None, ["train.learning_rat=1e-3", "n_layer=4"])
    msg = str(err.value)
    assert "train.learning_rate" in msg
    assert "model.n_layer" in msg
    # Where every key is listed: the command that prints them, not files to go through.
    assert "(every key: python train.py --help-config)" in msg
    assert "configs/*.yaml" not in msg


def test_several_problems_reported_together():
    with pytest.raises(ConfigError) as err:
        load_config(
            None,
            [
                "model.n_embd=100",
                "model.n_head=3",
                "train.max_iters=ten",
                "model.dropout=1.5",
                "device=tpu",
                "train.batch_size=0",
            ],
        )
    msg = str(err.value)
    assert "train.max_iters must be an integer" in msg
    assert "divisible by model.n_head" in msg
    assert "model.dropout must be in [0, 1)" in msg
    assert "device must be one of" in msg
    assert "train.batch_size must be > 0" in msg


@pytest.mark.parametrize(
    "override, message",
    [
        ("model.n_layer=0", "model.n_layer must be > 0"),
        ("train.batch_size=-2", "train.batch_size must be > 0"),
        ("train.resume=yes please", "train.resume must be true or false"),
        ("model.vocab_size=-1", "model.vocab_size must be >= 0"),
        ("train.max_iters", "section.key=value"),
        ("data.val_fraction=0", "data.val_fraction"),
    ],
)
def test_bad_values(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])


def test_bad_yaml_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("model: [1, 2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path)
    path.write_text("model:\n  n_layers: 4\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="model.n_layer"):
        load_config(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")


def test_resolved_config_round_trips(tmp_path):
    cfg = load_config(None, ["model.n_layer=3", "train.max_iters=20", "train.warmup_iters=100"])
    assert cfg.train.lr_decay_iters is None
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg.to_dict()), encoding="utf-8")
    assert load_config(path) == cfg


def test_yes_no_on_off_stay_strings_and_sections_are_named():
    assert load_config(None, ["out_dir=off"]).out_dir == "off"
    with pytest.raises(ConfigError, match="model.dropout must be a number, got 'yes'"):
        load_config(None, ["model.dropout=yes"])
    with pytest.raises(ConfigError, match="'train' is a section"):
        load_config(None, ["train=5"])
    with pytest.raises(ConfigError, match="seed must be in"):
        load_config(None, ["seed=-1"])
    with pytest.raises(ConfigError, match="out_dir must not be empty"):
        load_config(None, ["out_dir="])


def test_non_utf8_config_file(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("seed: 1 # caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(path)


def test_quoted_override_values_are_text():
    cfg = load_config(None, ["train.sample_prompt='1606'", 'train.attention_prompt=""'])
    assert cfg.train.sample_prompt == "1606"
    assert cfg.train.attention_prompt == ""


def test_readme_configuration_table_is_the_generated_one():
    """Each key is documented once, beside its field; docs/configuration.md shows the
    table made from those (python train.py --help-config), so no key is missing or stale."""
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert with_generated_table(page) == page, (
        "docs/configuration.md's table is not the generated one: "
        "run `python docs/make_config_table.py`"
    )
    documented = {row.split("`")[1] for row in config_reference().splitlines()[2:]}
    assert documented == set(all_keys())


def test_make_config_table_replaces_only_the_lines_between_the_markers():
    end = "<!-- end config-reference -->"
    stale = f"intro\n<!-- config-reference: x -->\n| old | row |\n{end}\nrest\n"
    fresh = with_generated_table(stale)
    assert fresh.startswith("intro\n<!-- config-reference: x -->\n| key |")
    assert "| old | row |" not in fresh
    assert fresh.endswith(f"{config_reference()}\n{end}\nrest\n")
    with pytest.raises(ValueError, match="markers"):
        with_generated_table("no table here")


def test_korean_guide_key_table_agrees_with_the_generated_one():
    """docs/configuration.ko.md shows a shorter table of the common keys in Korean; its
    keys exist and its defaults are the generated table's, so the two cannot drift apart."""
    generated = {}
    for row in config_reference().splitlines()[2:]:
        cells = row.split(" | ")
        generated[cells[0].strip("| `")] = cells[1]
    text = (ROOT / "docs" / "configuration.ko.md").read_text(encoding="utf-8")
    begin = text.index("\n", text.index("<!-- 아래 키와 기본값은")) + 1
    rows = text[begin : text.index("\n\n", begin)].splitlines()[2:]
    assert len(rows) >= 10
    for row in rows:
        key_cell, default_cell = row.split(" | ")[:2]
        keys = re.findall(r"`([^`]+)`", key_cell)
        defaults = re.findall(r"`[^`]*`", default_cell)
        assert keys and set(keys) <= set(generated), f"configuration.ko.md: unknown key in {row!r}"
        if defaults:  # a default given in words ("Tiny Shakespeare") is not compared
            assert defaults == [generated[key] for key in keys], f"configuration.ko.md: {row!r}"


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_recipes_set_only_what_differs_and_say_why(path):
    """A recipe sets only values that differ from the defaults, each with a comment."""
    text = path.read_text(encoding="utf-8")
    given = flatten(yaml.safe_load(text))
    assert set(given) <= set(all_keys())
    defaults = flatten(RunConfig().to_dict())
    same = [key for key, value in given.items() if defaults[key] == value]
    assert not same, f"{path.name} repeats defaults: {same}"
    for line in text.splitlines():
        code = line.split("#")[0]
        if ":" in code and code.strip().rstrip(":") not in SECTIONS:
            assert "#" in line, f"{path.name}: no comment saying why: {line!r}"


def test_split_fractions_and_include_are_checked():
    with pytest.raises(ConfigError) as e:
        load_config(None, ["data.val_fraction=0.5", "data.test_fraction=0.5", "data.include=,"])
    message = str(e.value)
    assert "data.test_fraction must be in [0, 1 - data.val_fraction) = [0, 0.5), got 0.5" in message
    assert "data.include is empty" in message


def test_the_separator_is_spelt_with_escapes_on_the_command_line_and_in_yaml(tmp_path):
    from data.corpus import unescape_separator

    assert unescape_separator(load_config().data.separator) == "\n"
    given = load_config(None, [r"data.separator='\n--\n'"]).data.separator
    assert unescape_separator(given) == "\n--\n"
    assert unescape_separator(load_config(None, ["data.separator="]).data.separator) == ""
    recipe = tmp_path / "r.yaml"
    recipe.write_text("data:\n  separator: '\\n\\n'\n", encoding="utf-8")
    assert unescape_separator(load_config(recipe).data.separator) == "\n\n"


@pytest.mark.parametrize(
    ("value", "bounds", "inside"),
    [
        (0, "[0, 1)", True),
        (1, "[0, 1)", False),
        (0, "(0, 1]", False),
        (1, "(0, 1]", True),
        (0, "> 0", False),
        (0, ">= 0", True),
        (2**32 - 1, "[0, 2**32)", True),
        (2**32, "[0, 2**32)", False),
    ],
)
def test_bounds_are_read_as_written(value, bounds, inside):
    assert in_bounds(value, bounds) is inside


def _just_outside(bounds: str):
    """A value just below the lower bound of "[lo, ..", "(lo, ..", "> lo" or ">= lo"."""
    text = bounds.strip()
    low = float(text.lstrip("[(>= ").split(",")[0])
    return low if text[0] == "(" or (text[0] == ">" and text[1] != "=") else low - 1


def test_every_bounded_key_rejects_a_value_outside_with_its_name():
    """The rules beside each field are what validation checks: for every key with
    bounds, a value just outside them is reported under that key's name."""
    bounded = {k: f for k, f in config_fields().items() if f.metadata["bounds"]}
    assert len(bounded) >= 30
    for key, f in bounded.items():
        value = _just_outside(f.metadata["bounds"])
        assert not in_bounds(value, f.metadata["bounds"]), key
        if isinstance(f.default, int) or key == "train.lr_decay_iters":
            value = int(value)
        with pytest.raises(ConfigError, match=f"{re.escape(key)} must be"):
            load_config(None, [f"{key}={value}"])


def test_the_lists_other_modules_need_are_read_from_the_fields():
    from training.checkpoint import RUN_CONTROL_KEYS
    from training.run_writer import NOT_HYPERPARAMETERS

    assert set(NOT_HYPERPARAMETERS) == {
        "out_dir",
        "data.cache_dir",
        "train.resume",
        "train.overwrite",
        "train.accept_changed_corpus",
    }
    assert set(RUN_CONTROL_KEYS) == {
        "train.resume",
        "train.max_iters",
        "train.overwrite",
        "model.vocab_size",
        "train.lr_decay_iters",
        "train.accept_changed_corpus",
    }


@pytest.mark.parametrize(
    "argv, override",
    [
        (["--max_iters=100"], "train.max_iters=100"),  # nanoGPT's configurator
        (["--dtype", "float16"], "train.dtype=float16"),  # litgpt-style flag and value
        (["--n_layer", "6", "--dtype=bfloat16"], "model.n_layer=6"),  # the first is named
    ],
)
def test_settings_given_as_flags_name_the_override_to_write(argv, override, capsys):
    """A user from nanoGPT or litgpt writes settings as flags; argparse alone says only
    "unrecognized arguments". train.py names the section.key=value to write instead."""
    from train import main

    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "unrecognized arguments" in err
    assert f"not as flags: {override} (every key" in err
    with pytest.raises(SystemExit):
        main(["--foo"])  # no such key: argparse's message alone
    assert "not as flags" not in capsys.readouterr().err
