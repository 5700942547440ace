"""Unknown flags answered with the spelling this command uses.

Users arrive with the peers' spellings: nanoGPT's ``sample.py --max_new_tokens 5``
or ``--start``, litgpt's ``--checkpoint_dir``. argparse alone ends in "unrecognized
arguments"; `explain_unknown_flags` adds the flag to write on the next line (exit
status 2 still), and every command installs it on its parser:

    parser = explain_unknown_flags(build_parser(), spelling_hint)
"""

import argparse
import difflib
from collections.abc import Callable

UNRECOGNIZED = "unrecognized arguments: "
# Other projects' names for this project's flags (normalized: lowercase, hyphens).
PEER_NAMES = {
    "start": "prompt",  # nanoGPT's sample.py
    "checkpoint-dir": "out-dir",  # litgpt
    "ckpt-path": "checkpoint",
    "max-tokens": "max-new-tokens",
    "num-return-sequences": "num-samples",  # transformers' generate
}

Hint = Callable[[argparse.ArgumentParser, list[str], list[str]], str]


def normalized(flag: str) -> str:
    """``--Max_New_Tokens=5`` -> ``max-new-tokens``: the name without dashes, value or case."""
    return flag.lstrip("-").partition("=")[0].lower().replace("_", "-")


def spelling_hint(parser: argparse.ArgumentParser, unknown: list[str], argv: list[str]) -> str:
    """For each unknown ``--flag`` that names one of ``parser``'s flags in another
    spelling (underscores, case, a peer's name, a close typo): "write --max-new-tokens,
    not --max_new_tokens (every flag: python sample.py --help)"; "" when none does."""
    flags = {
        normalized(option): option
        for action in parser._actions  # argparse keeps no public list of its flags
        for option in action.option_strings
        if option.startswith("--")
    }
    fixes = []
    for flag in (a for a in unknown if a.startswith("--")):
        name = normalized(flag)
        name = PEER_NAMES.get(name, name) if PEER_NAMES.get(name) in flags else name
        close = difflib.get_close_matches(name, flags, n=1, cutoff=0.8)
        if close:
            fixes.append(f"{flags[close[0]]}, not {flag.partition('=')[0]}")
    if not fixes:
        return ""
    return f"write {'; '.join(fixes)} (every flag: python {parser.prog} --help)"


def explain_unknown_flags(
    parser: argparse.ArgumentParser, hint: Hint = spelling_hint, argv: list[str] | None = None
) -> argparse.ArgumentParser:
    """Make ``parser``'s "unrecognized arguments" error add ``hint``'s line, if any.

    Args:
        parser: the command's parser; its ``error`` is wrapped (still exits 2).
        hint: (parser, the unknown arguments, the command line) -> the line to add.
        argv: the command line parsed (for hints that read a flag's value); None:
            the unknown arguments only.

    Returns:
        ``parser``, for chaining.
    """
    refuse = parser.error

    def refuse_with_hint(message: str):
        if message.startswith(UNRECOGNIZED):
            unknown = message.removeprefix(UNRECOGNIZED).split()
            line = hint(parser, unknown, unknown if argv is None else argv)
            message += f"\n{line}" if line else ""
        refuse(message)

    parser.error = refuse_with_hint
    return parser
