"""Every command answers a flag spelled as in the peers (nanoGPT's ``--max_new_tokens``,
``--start``; litgpt's ``--checkpoint_dir``) with the spelling to write, on the line
after argparse's own error, still exiting 2 (cli/flag_hints.py)."""

import argparse
import sys
from pathlib import Path
from unittest import mock

import pytest

import evaluate
import explore_attention
import export
import plot_losses
import sample
import train
from cli.flag_hints import explain_unknown_flags, spelling_hint

COMMANDS = {
    "sample.py": sample,
    "evaluate.py": evaluate,
    "explore_attention.py": explore_attention,
    "export.py": export,
    "plot_losses.py": plot_losses,
}


def refusal(module, argv, capsys) -> list[str]:
    """The lines a command's main prints for ``argv``, which it must refuse with 2, run
    as ``python <its file>`` (argparse names the command after sys.argv[0])."""
    with (
        mock.patch.object(sys, "argv", [Path(module.__file__).name]),
        pytest.raises(SystemExit) as stop,
    ):
        module.main(argv)
    assert stop.value.code == 2
    return capsys.readouterr().err.splitlines()


@pytest.mark.parametrize("name", COMMANDS)
def test_each_command_names_its_spelling_of_out_dir(name, capsys):
    argv = ["--out_dir", "runs/x"] + (["--to", "hf"] if name == "export.py" else [])
    lines = refusal(COMMANDS[name], argv, capsys)
    assert lines[-2] == f"{name}: error: unrecognized arguments: --out_dir runs/x"
    assert lines[-1] == f"write --out-dir, not --out_dir (every flag: python {name} --help)"


def test_sample_names_nanogpts_flags(capsys):
    argv = ["--max_new_tokens", "5", "--start=ROMEO:", "--Top_K", "3", "--num_samples=2"]
    lines = refusal(sample, argv, capsys)
    assert lines[-1] == (
        "write --max-new-tokens, not --max_new_tokens; --prompt, not --start; "
        "--top-k, not --Top_K; --num-samples, not --num_samples "
        "(every flag: python sample.py --help)"
    )


def test_train_names_its_own_flags_and_its_settings(capsys):
    lines = refusal(train, ["--help_config"], capsys)
    assert (
        lines[-1] == "write --help-config, not --help_config (every flag: python train.py --help)"
    )
    lines = refusal(train, ["--max_iters", "100"], capsys)
    assert lines[-1] == (
        "train.py takes settings as section.key=value, not as flags: train.max_iters=100 "
        "(every key: python train.py --help-config)"
    )


def test_a_flag_no_spelling_names_gets_argparses_error_alone(capsys):
    lines = refusal(sample, ["--bogus", "3"], capsys)
    assert lines[-1] == "sample.py: error: unrecognized arguments: --bogus 3"


def test_the_hint_reads_only_flags():
    parser = argparse.ArgumentParser(prog="x.py")
    parser.add_argument("--top-k")
    assert spelling_hint(parser, ["5", "-k"], []) == ""
    assert spelling_hint(parser, ["--top_k=5"], []) == (
        "write --top-k, not --top_k (every flag: python x.py --help)"
    )
    assert explain_unknown_flags(parser) is parser


def test_train_reads_the_other_commands_hyphens_as_a_settings_underscores(capsys):
    lines = refusal(train, ["--out-dir", "runs/x", "--max-iters=5"], capsys)
    assert lines[-1] == (
        "train.py takes settings as section.key=value, not as flags: out_dir=runs/x "
        "(every key: python train.py --help-config)"
    )
