"""Run configuration: typed dataclasses (one per section), YAML files and dotted overrides.

    python train.py --config configs/shakespeare_char.yaml train.max_iters=200 model.dropout=0

Defaults live in the dataclasses below; a YAML file sets any of them; each
``section.key=value`` argument overrides one (values are parsed as YAML, so 3e-4,
true and null work). Unknown keys, wrong types and impossible values are all
reported together, before any work starts, with the closest valid names.
"""

import dataclasses
import difflib
import math
import types
import typing
from pathlib import Path
from typing import Literal

import yaml

from data.escapes import unescape_argument
from training.schedule import warmup_outlasting_schedule
from training.settings import (
    SECTIONS,
    DataConfig,
    DecodeErrors,
    Device,
    LrSchedule,
    Optimizer,
    RunConfig,
    TrainConfig,
)
from training.yaml_errors import describe_yaml_error

__all__ = [
    "SECTIONS",
    "ConfigError",
    "DataConfig",
    "DecodeErrors",
    "Device",
    "LrSchedule",
    "Optimizer",
    "RunConfig",
    "TrainConfig",
    "all_keys",
    "build_config",
    "config_reference",
    "flatten",
    "load_config",
    "parse_override",
    "parse_value",
    "validate",
]


class ConfigError(ValueError):
    """A configuration problem; the message lists every problem found and the fix."""


def _show(value) -> str:
    """A default as the README's table shows it."""
    if value is None or isinstance(value, bool):
        return f"`{yaml.safe_dump(value).splitlines()[0]}`"
    return f"`{value}`" if value != "" else '`""`'


def config_reference() -> str:
    """Every config key with its default and meaning, as the Markdown table in
    README.md (generated here, so each key is documented once: beside its field).
    ``python train.py --help-config`` prints it."""
    rows = ["| key | default | meaning |", "|---|---|---|"]
    sections = [("", RunConfig)] + [(f"{name}.", cls) for name, cls in SECTIONS.items()]
    for prefix, cls in sections:
        for f in dataclasses.fields(cls):
            if f.name not in SECTIONS:
                rows.append(f"| `{prefix}{f.name}` | {_show(f.default)} | {f.metadata['doc']} |")
    return "\n".join(rows)


def all_keys() -> list[str]:
    """Every settable dotted key, e.g. 'train.learning_rate'."""
    keys = [f.name for f in dataclasses.fields(RunConfig) if f.name not in SECTIONS]
    for section, cls in SECTIONS.items():
        keys += [f"{section}.{f.name}" for f in dataclasses.fields(cls)]
    return keys


def _field_types() -> dict[str, typing.Any]:
    types_by_key = {}
    hints = typing.get_type_hints(RunConfig)
    for name in hints:
        if name not in SECTIONS:
            types_by_key[name] = hints[name]
    for section, cls in SECTIONS.items():
        for name, hint in typing.get_type_hints(cls).items():
            types_by_key[f"{section}.{name}"] = hint
    return types_by_key


def _coerce(key: str, value, hint):
    """Check ``value`` against the type ``hint``; return it (ints widen to float).

    Raises:
        TypeError: with a message naming the key and the expected type.
    """
    args = typing.get_args(hint)
    if typing.get_origin(hint) is Literal:
        if value not in args:
            raise TypeError(f"{key} must be one of {', '.join(args)}, got {value!r}")
        return value
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        # "none" means null where a key may be null (train.muon_lr=none), as in Python.
        if type(None) in args and (value is None or str(value).lower() == "none"):
            return None
        hint = next(a for a in args if a is not type(None))
    if hint is float and not isinstance(value, bool) and isinstance(value, (int, float, str)):
        # YAML 1.1 reads "3e-4" (no dot) as a string; accept it as the number it is.
        try:
            number = float(value)
        except ValueError:
            raise TypeError(f"{key} must be a number, got {value!r}") from None
        if not math.isfinite(number):
            raise TypeError(f"{key} must be a finite number, got {value!r}")
        return number
    if hint is bool and not isinstance(value, bool):
        raise TypeError(f"{key} must be true or false, got {value!r}")
    if hint is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError(f"{key} must be an integer, got {value!r}")
    if hint is str and isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)  # e.g. train.sample_prompt=1606: a number typed as text
    if hint in (float, str) and not isinstance(value, hint):
        raise TypeError(f"{key} must be a {hint.__name__}, got {value!r}")
    return value


def _unknown_key_message(key: str) -> str:
    if key in SECTIONS:
        return f"{key!r} is a section: set its keys one by one, e.g. {key}.KEY=VALUE"
    close = difflib.get_close_matches(key, all_keys(), n=3, cutoff=0.5)
    if not close:  # maybe the right key in the wrong section
        leaf = key.rsplit(".", 1)[-1]
        close = [k for k in all_keys() if k.rsplit(".", 1)[-1] == leaf]
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"unknown key {key!r}{hint} (valid keys: see configs/*.yaml or README)"


def flatten(tree: dict, prefix: str = "") -> dict:
    """Nested dicts to dotted keys: {"train": {"learning_rate": 1e-3}} ->
    {"train.learning_rate": 1e-3}."""
    flat = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def parse_value(text: str):
    """Read an override's value: true/false, null (or ~), an int, a float, else the text.

    Unlike YAML 1.1, "yes", "no", "on" and "off" stay strings, so out_dir=off is a
    folder name; quotes ('...' or "...") make any value a string.
    """
    stripped = text.strip()
    if len(stripped) >= 2 and stripped[0] == stripped[-1] and stripped[0] in "'\"":
        return stripped[1:-1]  # quoted: always text, e.g. train.sample_prompt='1606'
    lowered = stripped.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "~"):
        return None  # "none" stays text (data.normalization=none); see `_coerce`
    for number in (int, float):
        try:
            return number(text)
        except ValueError:
            pass
    return text


def parse_override(arg: str) -> tuple[str, typing.Any]:
    """'train.max_iters=100' -> ('train.max_iters', 100); see `parse_value`.

    Raises:
        ConfigError: if the argument has no '='.
    """
    if "=" not in arg:
        raise ConfigError(f"override {arg!r} must look like section.key=value")
    key, text = arg.split("=", 1)
    return key.strip(), parse_value(text)


def build_config(values: dict, problems: list[str] | None = None) -> RunConfig:
    """Build a RunConfig from a flat {dotted key: value} dict on top of the defaults.

    Raises:
        ConfigError: listing every unknown key, wrong type and impossible value.
    """
    problems = [] if problems is None else problems
    hints = _field_types()
    cfg = RunConfig()
    for key, value in values.items():
        if key not in hints:
            problems.append(_unknown_key_message(key))
            continue
        try:
            value = _coerce(key, value, hints[key])
        except TypeError as e:
            problems.append(str(e))
            continue
        target = cfg
        *sections, leaf = key.split(".")
        for section in sections:
            target = getattr(target, section)
        setattr(target, leaf, value)
    # Values that failed their type check kept their defaults, so the remaining
    # values can still be checked: every problem is reported in one message.
    problems += validate(cfg)
    if problems:
        raise ConfigError("invalid configuration:\n  - " + "\n  - ".join(problems))
    return cfg


def validate(cfg: RunConfig) -> list[str]:
    """Impossible values in a type-correct config, as messages naming the keys."""
    problems = []
    m, t = cfg.model, cfg.train
    if m.vocab_size < 0:
        problems.append(f"model.vocab_size must be >= 0 (0: from the corpus), got {m.vocab_size}")
    positive = {
        "model.n_layer": m.n_layer,
        "model.n_head": m.n_head,
        "model.n_embd": m.n_embd,
        "model.block_size": m.block_size,
        "train.batch_size": t.batch_size,
        "train.gradient_accumulation_steps": t.gradient_accumulation_steps,
        "train.max_iters": t.max_iters,
        "train.eval_interval": t.eval_interval,
        "train.log_interval": t.log_interval,
        "train.eval_tokens": t.eval_tokens,
        "train.eval_train_tokens": t.eval_train_tokens,
        "train.eval_batch_size": t.eval_batch_size,
        "train.learning_rate": t.learning_rate,
    }
    problems += [f"{k} must be > 0, got {v}" for k, v in positive.items() if v <= 0]
    if m.n_head > 0 and m.n_embd % m.n_head:
        problems.append(
            f"model.n_embd ({m.n_embd}) must be divisible by model.n_head ({m.n_head}); "
            f"for example n_embd={m.n_head * max(1, round(m.n_embd / m.n_head))}"
        )
    if m.position == "rope" and m.n_head > 0 and (m.n_embd // m.n_head) % 2:
        problems.append(
            f"model.position=rope needs an even head size, but n_embd / n_head = "
            f"{m.n_embd // m.n_head}"
        )
    if m.logit_softcap < 0:
        problems.append(f"model.logit_softcap must be >= 0 (0 = off), got {m.logit_softcap}")
    if m.rope_base <= 1:
        problems.append(f"model.rope_base must be > 1, got {m.rope_base}")
    if not 0 <= m.dropout < 1:
        problems.append(f"model.dropout must be in [0, 1), got {m.dropout}")
    d = cfg.data
    if not 0 < d.val_fraction < 1:
        problems.append(f"data.val_fraction must be in (0, 1), got {d.val_fraction}")
    elif not 0 <= d.test_fraction < 1 - d.val_fraction:
        problems.append(
            f"data.test_fraction must be in [0, 1 - data.val_fraction) = [0, "
            f"{1 - d.val_fraction:g}), got {d.test_fraction}"
        )
    if not d.include.replace(",", "").strip():
        problems.append("data.include is empty; use '*' for every file, or e.g. '*.c,*.h'")
    if not 0 <= t.min_lr <= t.learning_rate:
        problems.append(f"train.min_lr must be in [0, train.learning_rate], got {t.min_lr}")
    if t.warmup_iters < 0:
        problems.append(f"train.warmup_iters must be >= 0, got {t.warmup_iters}")
    if t.lr_decay_iters is not None and t.lr_decay_iters <= 0:
        problems.append(f"train.lr_decay_iters must be > 0, got {t.lr_decay_iters}")
    if t.warmup_iters >= 0 and t.lr_decay_iters is not None and t.lr_decay_iters > 0:
        problems += filter(None, [warmup_outlasting_schedule(t)])
    if not 0 <= cfg.seed < 2**32:
        problems.append(f"seed must be in [0, 2**32), got {cfg.seed}")
    if cfg.out_dir is not None and not str(cfg.out_dir).strip():
        problems.append("out_dir must not be empty (it would write into the current folder)")
    if not 0 < t.warmdown_fraction <= 1:
        problems.append(f"train.warmdown_fraction must be in (0, 1], got {t.warmdown_fraction}")
    if not 0 <= t.ema_decay < 1:
        problems.append(f"train.ema_decay must be in [0, 1) (0: no averaging), got {t.ema_decay}")
    if t.ema_start < 0:
        problems.append(f"train.ema_start must be >= 0, got {t.ema_start}")
    if t.embedding_lr is not None and t.embedding_lr <= 0:
        problems.append(
            f"train.embedding_lr must be > 0 (null: learning_rate), got {t.embedding_lr}"
        )
    if t.muon_lr is not None and t.muon_lr <= 0:
        problems.append(f"train.muon_lr must be > 0, got {t.muon_lr}")
    for key, value in (
        ("train.beta1", t.beta1),
        ("train.beta2", t.beta2),
        ("train.muon_momentum", t.muon_momentum),
    ):
        if not 0 <= value < 1:
            problems.append(f"{key} must be in [0, 1), got {value}")
    for key, value in (("train.weight_decay", t.weight_decay), ("train.grad_clip", t.grad_clip)):
        if value < 0:
            problems.append(f"{key} must be >= 0, got {value}")
    if t.sample_tokens < 0:
        problems.append(f"train.sample_tokens must be >= 0 (0: no sample), got {t.sample_tokens}")
    if t.attention_interval < 0:
        problems.append(
            f"train.attention_interval must be >= 0 (0: heatmaps at every evaluation), "
            f"got {t.attention_interval}"
        )
    for key, text in (
        ("train.sample_prompt", t.sample_prompt),
        ("train.attention_prompt", t.attention_prompt),
    ):
        try:
            unescape_argument(key, text)  # read as sample.py reads --prompt
        except ValueError as e:
            problems.append(str(e))
    if t.sample_tokens > 0 and not t.sample_prompt:
        problems.append(
            "train.sample_prompt is empty; set it, or train.sample_tokens=0 for no sample"
        )
    return problems


def load_config(path: str | Path | None = None, overrides: list[str] = ()) -> RunConfig:
    """Read a YAML config (optional), apply ``section.key=value`` overrides, validate.

    The default out_dir is runs/<config file stem> (runs/default without a file).
    train.lr_decay_iters stays None unless given: the Trainer resolves it (see
    `training.schedule.resolve_schedule_length`).

    Raises:
        ConfigError: for an unreadable file, bad YAML, or any invalid key or value.
    """
    values: dict = {}
    problems: list[str] = []
    if path is not None:
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
            tree = yaml.safe_load(text) or {}
        except OSError as e:
            raise ConfigError(f"cannot read config file {path}: {e.strerror}") from None
        except UnicodeDecodeError as e:
            raise ConfigError(f"{path} is not UTF-8 text (byte offset {e.start})") from None
        except yaml.YAMLError as e:
            raise ConfigError(describe_yaml_error(path, text, e)) from None
        if not isinstance(tree, dict):
            raise ConfigError(f"{path} must hold a mapping of sections (data, model, train)")
        for key, value in tree.items():
            if key in SECTIONS and not isinstance(value, dict):
                problems.append(f"{path}: section {key!r} must be a mapping of keys")
        values.update({k: v for k, v in flatten(tree).items() if k not in SECTIONS})
    for arg in overrides:
        try:
            key, value = parse_override(arg)
        except ConfigError as e:
            problems.append(str(e))
            continue
        values[key] = value
    if values.get("out_dir") is None:
        values["out_dir"] = str(Path("runs") / (path.stem if path is not None else "default"))
    return build_config(values, problems)
