"""Every command in README.md, README.ko.md, docs/ and dev/ that runs one of the project's
scripts parses: the script exists, it accepts the flags, and train.py's config file and
``section.key=value`` overrides load (as do bench scripts' ``--set`` / ``--recipe-set``).

Each script's module is imported once and its ``main`` called with the command's
arguments; ``ArgumentParser.parse_args`` is wrapped to stop right after parsing, so
nothing trains, samples or reads a checkpoint. Commands are read from fenced code
blocks (a trailing backslash continues a line) and from inline code spans that start
with ``python``; one holding a placeholder (``...``, ``[``, ``FILE``) is left out, and
so is a line that first changes into another checkout (``(cd ../old && python ...)``).
"""

import argparse
import contextlib
import importlib.util
import io
import re
import shlex
import sys

import pytest

from tests.conftest import ROOT
from training.config import load_config

SCRIPTS = {"train.py", "sample.py", "evaluate.py", "explore_attention.py", "plot_losses.py"}
SCRIPTS |= {f"bench/{p.name}" for p in (ROOT / "bench").glob("*.py")}
SCRIPTS |= {"export.py"}
DOCUMENTS = [ROOT / "README.md", ROOT / "README.ko.md", *sorted((ROOT / "docs").glob("*.md"))]
DOCUMENTS += sorted((ROOT / "dev").glob("*.md"))  # the experiments and the development log
PLACEHOLDER = re.compile(r"\.\.\.|\[|\bFILE\b|\bDIR\b|<[a-z_ ]+>")
# A line that first changes into another folder (`(cd ../old && python ...)`) runs that
# checkout's scripts, e.g. an older commit's for a comparison: not this one's to parse.
OTHER_CHECKOUT = re.compile(r"\s*\(?cd\s")
BARE_CD = re.compile(r"\s*cd\s+[^&;|()]+$")


class Parsed(Exception):
    """Raised right after a script's argument parser succeeds, with what it parsed."""

    def __init__(self, namespace):
        self.namespace = namespace


RUNNERS = {"python", "python3", "torchrun"}


def script_in(words: list[str]) -> int | None:
    """Index of the project script a command runs (after python or torchrun), or None."""
    for i, word in enumerate(words):
        if word.removeprefix("./") in SCRIPTS and RUNNERS & set(words[:i]):
            return i
    return None


def commands_in(text: str) -> list[str]:
    """The shell commands of a Markdown text's code blocks and inline code spans."""
    found = []
    for block in re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M):
        lines = re.sub(r"\\\n\s*", " ", block).splitlines()
        # After a line of its own `cd other` the block runs that other project's scripts.
        moved = [i for i, line in enumerate(lines) if BARE_CD.match(line)]
        found += lines[: moved[0]] if moved else lines
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    found += [" ".join(span.split()) for span in re.findall(r"`(python [^`]+)`", text)]
    commands = []
    for line in found:
        if OTHER_CHECKOUT.match(line):
            continue
        for part in split_shell_list(line):
            part = part.strip()
            if part and not PLACEHOLDER.search(part):
                commands.append(part)
    return commands


def split_shell_list(line: str) -> list[str]:
    """A shell line cut at &&, ||, ; and | outside quotes."""
    parts, current, quote = [], "", None
    for char in line:
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "&|;":
            parts.append(current)
            current = ""
            continue
        current += char
    return [*parts, current]


def documented_commands() -> list[tuple[str, str, list[str]]]:
    """(document, command, its words) for each command that runs a project script."""
    found = []
    for doc in DOCUMENTS:
        for command in commands_in(doc.read_text(encoding="utf-8")):
            try:
                words = shlex.split(command, comments=True)
            except ValueError:
                continue
            if script_in(words) is not None:
                found.append((doc.name, command, words))
    return found


_modules: dict[str, object] = {}


def script_module(script: str):
    if script not in _modules:
        path = ROOT / script
        spec = importlib.util.spec_from_file_location(f"doc_command_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, str(path.parent))  # as `python bench/x.py` would have it
        try:
            spec.loader.exec_module(module)
        finally:
            sys.path.remove(str(path.parent))
        _modules[script] = module
    return _modules[script]


def parse(script: str, args: list[str], monkeypatch) -> argparse.Namespace | None:
    """What ``script``'s own parser makes of ``args``; fails with argparse's message.
    None for ``--help``, which prints the flags and exits 0 while parsing."""
    real = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, argv=None, namespace=None):
        raise Parsed(real(self, argv, namespace))

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    monkeypatch.setattr(sys, "argv", [script, *args])
    main = script_module(script).main
    takes_argv = main.__code__.co_argcount > 0
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            main(args) if takes_argv else main()
    except Parsed as parsed:
        return parsed.namespace
    except SystemExit as e:
        if e.code == 0 and {"-h", "--help"} & set(args):
            return None
        pytest.fail(f"{script} {shlex.join(args)}: exit {e.code}: {err.getvalue().strip()}")
    pytest.fail(f"{script} returned without parsing its arguments")


COMMANDS = documented_commands()


def test_commands_run_in_another_checkout_are_left_out():
    text = "```bash\n(cd ../old && python sample.py --gone)\npython sample.py --seed 1\n```\n"
    assert commands_in(text) == ["python sample.py --seed 1"]


def test_a_block_that_changes_into_another_project_stops_there():
    text = "```bash\npython sample.py --seed 1\ncd nanoGPT\n"
    text += "python train.py config/train_shakespeare_char.py --device=cpu\n```\n"
    assert commands_in(text) == ["python sample.py --seed 1"]


def test_the_documents_have_commands_to_check():
    scripts = {words[script_in(words)] for _, _, words in COMMANDS}
    assert {"train.py", "sample.py", "evaluate.py", "explore_attention.py"} <= scripts
    assert len(COMMANDS) >= 30


@pytest.mark.parametrize(
    ("doc", "command", "words"), COMMANDS, ids=[f"{d}: {c[:70]}" for d, c, _ in COMMANDS]
)
def test_documented_command_parses(doc, command, words, monkeypatch):
    at = script_in(words)
    script, args = words[at].removeprefix("./"), words[at + 1 :]
    assert (ROOT / script).is_file(), f"{doc}: {command}: there is no {script}"
    namespace = parse(script, args, monkeypatch)
    if namespace is None:  # --help: the flags were printed, nothing to load
        return
    overrides = []
    if script == "train.py":
        overrides = namespace.overrides
        config = namespace.config
        if config and not (ROOT / config).is_file():
            # A run's own config.yaml (runs/x/config.yaml) exists once the run does.
            assert config.startswith("runs/"), f"{doc}: {command}: no config file {config}"
            config = None
        load_config(ROOT / config if config else None, overrides)
    for name in ("set", "recipe_set"):  # bench scripts' overrides of every case
        overrides += getattr(namespace, name, None) or []
    load_config(None, overrides)


READMES = [doc for doc in DOCUMENTS if doc.name in ("README.md", "README.ko.md")]
# `> FILE` in a shell line, not `2>&1`.
REDIRECT = re.compile(r"(?<![0-9&>])>>?\s*([^\s;&|()]+)")


@pytest.mark.parametrize("doc", READMES, ids=[d.name for d in READMES])
def test_readme_commands_write_no_file_into_the_checkout(doc):
    """A file a README command makes goes under runs/ (ignored by git) or elsewhere
    outside the repository, never beside the code as an untracked file."""
    text = doc.read_text(encoding="utf-8")
    lines = []
    for block in re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M):
        lines += re.sub(r"\\\n\s*", " ", block).splitlines()
    targets = [t for line in lines for t in REDIRECT.findall(line.split("#")[0])]
    assert targets, f"{doc.name}: no command writes a file (the check would check nothing)"
    for target in targets:
        assert target.startswith(("runs/", "/tmp/", "/dev/")), f"{doc.name}: > {target}"


@pytest.mark.parametrize("doc", READMES, ids=[d.name for d in READMES])
def test_readme_training_commands_raise_no_schedule_note(doc):
    """A README's own training command does what it says: no note at its start that a
    setting (ema_start, warmup_iters, ...) will never take effect."""
    from training.schedule import schedule_notices

    checked = 0
    for _, command, words in (c for c in COMMANDS if c[0] == doc.name):
        at = script_in(words)
        if at is None or words[at] != "train.py" or "--config" not in words:
            continue
        args = words[at + 1 :]
        config = args[args.index("--config") + 1]
        overrides = [a for a in args if "=" in a and not a.startswith("-")]
        tc = load_config(ROOT / config if (ROOT / config).is_file() else None, overrides).train
        tc.lr_decay_iters = tc.lr_decay_iters or tc.max_iters  # as the Trainer resolves it
        assert schedule_notices(tc) == [], f"{doc.name}: {command}"
        checked += 1
    assert checked >= 3
