"""Run configuration: typed dataclasses (one per section), YAML files and dotted overrides.

    python train.py --config configs/shakespeare_char.yaml train.max_iters=200 model.dropout=0

Defaults live in the dataclasses (`training.settings`); a YAML file sets any of them; each
``section.key=value`` argument overrides one (values are parsed as YAML, so 3e-4,
true and null work), except that a text key (out_dir, data.path, the prompts) keeps
its text as typed: out_dir=007 is the folder "007", and so it is in a YAML file, where
YAML 1.1 would read ``sample_prompt: 12:30`` as 750 (`text_as_typed`). Unknown keys,
wrong types and impossible values are all reported together, before any work starts,
with the closest valid names.

Reading the YAML: a key given twice is refused (PyYAML keeps the last without a word,
so an edit further up a file could be undone by an old line further down), and
PyYAML's syntax errors become one line, as compilers give them, ``file:line:col:
what`` (PyYAML says ``in "<unicode string>", line 6, column 1`` over five lines, and
a tab in the indentation, the commonest slip in a hand-edited config, reads "found
character '\\t' that cannot start any token").
"""

import dataclasses
import difflib
import math
import re
import types
import typing
from pathlib import Path
from typing import Literal

import yaml
from yaml.constructor import ConstructorError

from data.escapes import unescape_argument
from data.settings import DataConfig, DecodeErrors
from training.schedule import warmup_outlasting_schedule
from training.settings import (
    SECTIONS,
    Device,
    Dtype,
    LrSchedule,
    Optimizer,
    RunConfig,
    TrainConfig,
)

__all__ = [
    "SECTIONS",
    "ConfigError",
    "DataConfig",
    "DecodeErrors",
    "Device",
    "Dtype",
    "LrSchedule",
    "Optimizer",
    "RunConfig",
    "TrainConfig",
    "all_keys",
    "build_config",
    "config_fields",
    "config_reference",
    "flatten",
    "in_bounds",
    "keys_marked",
    "load_config",
    "parse_override",
    "parse_value",
    "relations",
    "validate",
]


class ConfigError(ValueError):
    """A configuration problem; the message lists every problem found and the fix."""


def _show(value) -> str:
    """A default as docs/configuration.md's table shows it."""
    if value is None or isinstance(value, bool):
        return f"`{yaml.safe_dump(value).splitlines()[0]}`"
    return f"`{value}`" if value != "" else '`""`'


def _allowed(hint, rules: dict) -> str:
    """The values a key takes, as the configuration table shows them: choices, type, bounds."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) is Literal:
        return ", ".join(f"`{a}`" for a in args)
    nullable = type(None) in args
    if nullable:
        hint = next(a for a in args if a is not type(None))
    text = {bool: "`true`, `false`", int: "integer", float: "number", str: "text"}[hint]
    if rules.get("bounds"):
        bounds = rules["bounds"]
        text += f" in `{bounds}`" if bounds.lstrip()[0] in "[(" else f" `{bounds}`"
    return text + (", or `null`" if nullable else "")


def config_reference() -> str:
    """Every config key with its default, allowed values and meaning, as the Markdown
    table in docs/configuration.md (generated here, so each key is documented once: beside its
    field). ``python train.py --help-config`` prints it."""
    rows = ["| key | default | values | meaning |", "|---|---|---|---|"]
    hints = _field_types()
    for key, f in config_fields().items():
        allowed = _allowed(hints[key], f.metadata)
        rows.append(f"| `{key}` | {_show(f.default)} | {allowed} | {f.metadata['doc']} |")
    return "\n".join(rows)


def all_keys() -> list[str]:
    """Every settable dotted key, e.g. 'train.learning_rate'."""
    return list(config_fields())


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
    return f"unknown key {key!r}{hint} (every key: python train.py --help-config)"


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


def _is_text(key: str) -> bool:
    """Whether ``key`` holds free text (a path, a prompt): str or str | None, not a
    choice among names."""
    hint = _field_types().get(key)
    return hint is str or (
        typing.get_origin(hint) in (types.UnionType, typing.Union) and str in typing.get_args(hint)
    )


def parse_text(text: str, nullable: bool):
    """Read an override's value for a text key as typed: ``out_dir=007`` is the folder
    "007", not 7, and ``data.path=2024.10`` keeps its 0. Quotes are taken off; null
    (or ~) is None where the key may be null."""
    stripped = text.strip()
    if len(stripped) >= 2 and stripped[0] == stripped[-1] and stripped[0] in "'\"":
        return stripped[1:-1]
    if nullable and stripped.lower() in ("null", "~"):
        return None
    return text


def _slip_hint(arg: str) -> str:
    """What an argument without '=' was probably meant as: a recipe given without
    --config, or a key whose value was typed after a space."""
    if arg.lower().endswith((".yaml", ".yml")):
        return f"; did you mean --config {arg}?"
    if arg.strip() in all_keys():
        return f"; write {arg.strip()}=VALUE, with no space around '='"
    return ""


def parse_override(arg: str) -> tuple[str, typing.Any]:
    """'train.max_iters=100' -> ('train.max_iters', 100); see `parse_value`, and for a
    text key (out_dir, data.path, train.sample_prompt, ...) `parse_text`.

    Raises:
        ConfigError: if the argument has no '='.
    """
    if "=" not in arg:
        raise ConfigError(f"override {arg!r} must look like section.key=value{_slip_hint(arg)}")
    key, text = arg.split("=", 1)
    key = key.strip()
    if _is_text(key):
        return key, parse_text(text, nullable=_field_types()[key] is not str)
    return key, parse_value(text)


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


def config_fields() -> dict[str, dataclasses.Field]:
    """Every settable dotted key with its dataclass field, whose metadata holds the
    key's rules (`common.setting.setting`), in the configuration table's order."""
    fields = {f.name: f for f in dataclasses.fields(RunConfig) if f.name not in SECTIONS}
    for section, cls in SECTIONS.items():
        fields.update({f"{section}.{f.name}": f for f in dataclasses.fields(cls)})
    return fields


def keys_marked(marker: str, value: bool = True) -> tuple[str, ...]:
    """The dotted keys whose field sets ``marker`` (e.g. "resume_may_change") to
    ``value``: the lists other modules need are read from the fields."""
    return tuple(k for k, f in config_fields().items() if f.metadata.get(marker) is value)


_INTERVAL = re.compile(r"([\[(])\s*([^,]+?)\s*,\s*([^\])]+?)\s*([\])])")
_ONE_BOUND = re.compile(r"(>=|>|<=|<)\s*(\S+)")


def _number(text: str) -> float:
    base, _, power = text.partition("**")  # "2**32"
    return float(base) ** float(power) if power else float(text)


def in_bounds(value, bounds: str) -> bool:
    """Whether ``value`` lies in ``bounds``: an interval such as "[0, 1)" or "(0, 1]",
    or one bound such as "> 0" or ">= 0".

    Raises:
        ValueError: if ``bounds`` is written in neither form.
    """
    if interval := _INTERVAL.fullmatch(bounds.strip()):
        opening, low, high, closing = interval.groups()
        low, high = _number(low), _number(high)
        above = value >= low if opening == "[" else value > low
        below = value <= high if closing == "]" else value < high
        return above and below
    if bound := _ONE_BOUND.fullmatch(bounds.strip()):
        op, limit = bound.group(1), _number(bound.group(2))
        return {">=": value >= limit, ">": value > limit, "<=": value <= limit, "<": value < limit}[
            op
        ]
    raise ValueError(f"bounds {bounds!r} must look like '[0, 1)' or '> 0'")


def _field_problem(key: str, value, rules: dict) -> str | None:
    """The problem with one key's value under its own field's rules, or None."""
    bounds = rules.get("bounds")
    if bounds and value is not None and not in_bounds(value, bounds):
        where = f"in {bounds}" if bounds.lstrip()[0] in "[(" else bounds
        note = f" ({rules['note']})" if rules.get("note") else ""
        return f"{key} must be {where}{note}, got {value}"
    if rules.get("check") and (problem := rules["check"](value)):
        return f"{key} {problem}"
    return None


def suggested_width(m) -> int:
    """The n_embd nearest to ``m.n_embd`` that every rule on the width in force
    accepts: a multiple of n_head, and with position=rope of 2 x n_head (an even head
    size); so a hint never leads into the next refusal (``m``: GPTConfig, n_head > 0)."""
    step = m.n_head * (2 if m.position == "rope" else 1)
    return step * max(1, round(m.n_embd / step))


def relations(cfg: RunConfig) -> list[str]:
    """Rules between keys, checked once each key is within its own bounds."""
    problems = []
    m, d, t = cfg.model, cfg.data, cfg.train
    if m.n_head > 0 and m.n_embd % m.n_head:
        problems.append(
            f"model.n_embd ({m.n_embd}) must be divisible by model.n_head ({m.n_head}); "
            f"for example n_embd={suggested_width(m)}"
        )
    elif m.position == "rope" and m.n_head > 0 and (m.n_embd // m.n_head) % 2:
        problems.append(
            f"model.position=rope needs an even head size, but n_embd / n_head = "
            f"{m.n_embd // m.n_head}; for example n_embd={suggested_width(m)}"
        )
    if 0 < d.val_fraction < 1 and not 0 <= d.test_fraction < 1 - d.val_fraction:
        problems.append(
            f"data.test_fraction must be in [0, 1 - data.val_fraction) = [0, "
            f"{1 - d.val_fraction:g}), got {d.test_fraction}"
        )
    if not 0 <= t.min_lr <= t.learning_rate:
        problems.append(f"train.min_lr must be in [0, train.learning_rate], got {t.min_lr}")
    if t.warmup_iters >= 0 and t.lr_decay_iters is not None and t.lr_decay_iters > 0:
        problems += filter(None, [warmup_outlasting_schedule(t)])
    for key, text in (
        ("data.separator", d.separator),  # bad escapes, lone surrogates: before preparing
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


def validate(cfg: RunConfig) -> list[str]:
    """Impossible values in a type-correct config, as messages naming the keys: each
    key against the rules beside its field, then the `relations` between keys."""
    flat = flatten(cfg.to_dict())
    problems = [
        problem
        for key, f in config_fields().items()
        if (problem := _field_problem(key, flat[key], f.metadata))
    ]
    return problems + relations(cfg)


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that raises ConstructorError on a key given twice in one
    mapping, marked at the second one."""

    def construct_mapping(self, node, deep=False):
        first: dict = {}  # key -> its node
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                earlier = first.setdefault(key, key_node)
            except TypeError:  # an unhashable key: the base class says so
                break
            if earlier is not key_node:
                at = earlier.start_mark
                problem = (
                    f"key {key!r} is given twice (first at {at.line + 1}:{at.column + 1}); keep one"
                )
                raise ConstructorError(None, None, problem, key_node.start_mark)
        return super().construct_mapping(node, deep)


def _plain_scalars(node, prefix: str = "") -> dict[str, str]:
    """{dotted key: the text as typed} of every unquoted scalar in a composed YAML
    mapping and its sections."""
    found = {}
    if not isinstance(node, yaml.MappingNode):
        return found
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            continue
        dotted = f"{prefix}{key_node.value}"
        if isinstance(value_node, yaml.ScalarNode) and value_node.style is None:
            found[dotted] = value_node.value
        found.update(_plain_scalars(value_node, dotted + "."))
    return found


def text_as_typed(text: str, values: dict) -> dict:
    """``values`` (a YAML file's, flattened) with each text key that YAML 1.1 read as
    something else given back as typed: ``sample_prompt: 12:30`` was 750 (base 60),
    ``0755`` 493 (octal), ``data.path: 2024.10`` 2024.1, ``out_dir: off`` False, and a
    date a datetime.date. Quoted values and null are left as they are."""
    typed = _plain_scalars(yaml.compose(text, Loader=_UniqueKeyLoader))
    return {
        key: typed[key]
        if key in typed and _is_text(key) and value is not None and not isinstance(value, str)
        else value
        for key, value in values.items()
    }


def load_yaml(text: str):
    """``yaml.safe_load(text)``, refusing a key given twice in one mapping.

    Raises:
        yaml.YAMLError: for a syntax error or a repeated key (see `describe_yaml_error`).
    """
    # A SafeLoader subclass: plain data only, no tags that construct objects or run code.
    return yaml.load(text, Loader=_UniqueKeyLoader)


def describe_yaml_error(path: str | Path, text: str, error: yaml.YAMLError) -> str:
    """One line naming ``path``, the 1-based line and column, and what is wrong.

    Args:
        path: the file that was parsed.
        text: its text (to see the character the error points at).
        error: what `load_yaml` (text) raised.

    Returns:
        e.g. ``configs/my.yaml:6:1: not valid YAML: a tab indents this line; indent
        with spaces``.
    """
    mark = getattr(error, "problem_mark", None)
    if mark is None:  # not a syntax error with a place (should not happen for text)
        return f"{path}: not valid YAML: {' '.join(str(error).split())}"
    where = f"{path}:{mark.line + 1}:{mark.column + 1}"
    lines = text.splitlines()
    line = lines[mark.line] if mark.line < len(lines) else ""
    if mark.column < len(line) and line[mark.column] == "\t":
        if not line[: mark.column].strip():
            return f"{where}: not valid YAML: a tab indents this line; indent with spaces"
        return f"{where}: not valid YAML: a tab where YAML allows none; type a space instead"
    problem = error.problem or "syntax error"
    if problem.startswith("expected <block end>"):
        problem = "this line is indented to no level of the lines above it"
    context, start = error.context, getattr(error, "context_mark", None)
    if context and start is not None and (start.line, start.column) != (mark.line, mark.column):
        problem += f" ({context} begun at {start.line + 1}:{start.column + 1})"
    return f"{where}: not valid YAML: {problem}"


SHIPPED_CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def shipped_configs_hint(missing: Path) -> str:
    """For a --config file that is not there: ' (did you mean X?); the configs that
    exist: ...' (the checkout's configs/*.yaml, as paths from the current folder where
    they are under it), or "" when there are none."""
    shipped = sorted(SHIPPED_CONFIGS.glob("*.yaml"))
    if not shipped:
        return ""

    def shown(path: Path) -> str:
        try:
            return str(path.relative_to(Path.cwd()))
        except ValueError:
            return str(path)

    close = difflib.get_close_matches(missing.name, [p.name for p in shipped], n=1)
    meant = f" (did you mean {shown(SHIPPED_CONFIGS / close[0])}?)" if close else ""
    return f"{meant}; the configs that exist: {', '.join(shown(p) for p in shipped)}"


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
            tree = load_yaml(text) or {}
        except FileNotFoundError as e:
            raise ConfigError(
                f"cannot read config file {path}: {e.strerror}{shipped_configs_hint(path)}"
            ) from None
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
        flat = {k: v for k, v in flatten(tree).items() if k not in SECTIONS}
        values.update(text_as_typed(text, flat))
    for arg in overrides:
        try:
            key, value = parse_override(arg)
        except ConfigError as e:
            problems.append(str(e))
            continue
        values[key] = value
    given = frozenset(values)  # what the file and the overrides set, for train.init_from
    if values.get("out_dir") is None:
        values["out_dir"] = str(Path("runs") / (path.stem if path is not None else "default"))
    cfg = build_config(values, problems)
    cfg.given_keys = given  # not a config key: see `training.init_from.given_keys`
    return cfg
