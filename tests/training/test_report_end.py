"""The end of a run on a terminal: the command that resumes it, printed to copy (once
train.resume=true, also for a run that had it); the progress bar above the closing
lines, not drawn again below them; "1 step", not "1 steps"."""

import io
import shlex
import signal
import sys

import train as train_py
from model.checkpoint import load_checkpoint
from tests.conftest import tiny_overrides
from training import load_config, train
from training.loop import Trainer
from training.report import steps

QUIET = {"train.sample_tokens": 0, "train.attention_prompt": "", "train.final_full_eval": False}


def _stop_before(trainer, step: int) -> None:
    """Ctrl-C while step ``step`` (0-based) runs: the run saves at its end."""
    real_step = trainer.train_step

    def step_then_stop(n):
        if n == step:
            signal.raise_signal(signal.SIGINT)
        return real_step(n)

    trainer.train_step = step_then_stop


def _resume_command(out: str) -> str:
    lines = out.splitlines()
    (at,) = [i for i, line in enumerate(lines) if line.endswith("Resume with:")]
    return lines[at + 1].strip()


def test_an_interrupted_run_prints_the_command_that_resumes_it(tmp_path, shakespeare_path, capsys):
    given = tiny_overrides(tmp_path, shakespeare_path, **QUIET)
    trainer = Trainer(load_config(None, given))
    _stop_before(trainer, 1)
    assert trainer.run().iter_num == 2
    trainer.close()
    out = capsys.readouterr().out
    command = _resume_command(out)
    config = tmp_path / "run" / "config.yaml"
    assert command == f"python train.py --config {config} train.resume=true"
    # No verdicts on a stopped run: the command that gives them on its curves so far.
    diagnose = f"what its curves say so far: python evaluate.py --diagnose {tmp_path / 'run'}"
    assert diagnose in out.splitlines()
    # The command as printed, typed: it resumes, and once stopped again says it once.
    words = shlex.split(command)
    assert words[:2] == ["python", "train.py"]
    trainer = Trainer(load_config(*_config_and_overrides(words[2:])))
    _stop_before(trainer, 3)
    assert trainer.run().iter_num == 4
    trainer.close()
    again = _resume_command(capsys.readouterr().out)
    assert again == command and again.count("train.resume") == 1
    assert train_py.main(words[2:]) == 0
    assert load_checkpoint(tmp_path / "run" / "ckpt.pt")["iter_num"] == 6


def _config_and_overrides(words: list[str]) -> tuple[str, list[str]]:
    assert words[0] == "--config"
    return words[1], words[2:]


class Terminal(io.StringIO):
    """stdout and stderr of a terminal, in the order they were written."""

    def isatty(self) -> bool:
        return True


def test_the_progress_bar_is_not_drawn_again_below_the_closing_lines(
    tmp_path, shakespeare_path, monkeypatch
):
    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    monkeypatch.setattr(sys, "stderr", terminal)
    train(load_config(None, tiny_overrides(tmp_path, shakespeare_path, **QUIET)))
    shown = [line.rsplit("\r", 1)[-1] for line in terminal.getvalue().splitlines()]
    shown = [line for line in shown if line.strip()]
    assert shown[-1].startswith("wall "), shown[-3:]  # the time split, the bar above it
    assert any("6/6" in line for line in shown[:-1])


def test_a_run_with_nothing_to_do_counts_its_steps_in_words(tmp_path, shakespeare_path, capsys):
    given = tiny_overrides(tmp_path, shakespeare_path, **QUIET, **{"train.max_iters": 1})
    train(load_config(None, given))
    capsys.readouterr()
    train(load_config(None, [*given, "train.resume=true"]))
    assert (
        "nothing to do: the run already has 1 step (train.max_iters=1); give a larger "
        "train.max_iters to train on"
    ) in capsys.readouterr().out
    assert (steps(1), steps(0), steps(2000)) == ("1 step", "0 steps", "2,000 steps")
