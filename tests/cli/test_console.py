"""Every command on a console that cannot print its text, and with a reader that leaves
early (cli/console.py): each does its work and exits as it would otherwise, printing
what the console cannot encode as escapes, and ends quietly when the pipe closes.

They used to: train.py died at its start line on ``PYTHONIOENCODING=ascii`` with an
out_dir such as runs/로그, leaving a folder that a plain rerun refused; evaluate.py,
plot_losses.py and export.py did their work, then exited 1 with a traceback; and
``python train.py ... | head -2`` trained to the end, then exited 1 with a
BrokenPipeError from the final print (issue 33, items 3 and 6).
"""

import os
import subprocess
import sys

import pytest

from model.checkpoint import load_checkpoint
from tests.conftest import ROOT, TIMEOUT_S, shakespeare, tiny_overrides

ASCII_CONSOLE = {**os.environ, "PYTHONIOENCODING": "ascii", "OMP_NUM_THREADS": "1"}
LOG = "\\ub85c\\uadf8"  # how an ASCII console shows the folder name 로그
QUIET = {"train.sample_tokens": 0, "train.max_iters": 3, "device": "cpu"}


def command(script: str, *args) -> list[str]:
    return [sys.executable, str(ROOT / script), *[str(a) for a in args]]


def run_on_ascii_console(script: str, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        command(script, *args),
        cwd=ROOT,
        env=ASCII_CONSOLE,
        capture_output=True,
        timeout=TIMEOUT_S,
    )


def run_with_stdout_closed(script: str, *args) -> tuple[int, str]:
    """Run a command whose reader has left before it writes a byte: the pipe's read
    end is closed at once, so its first write to stdout meets a closed pipe."""
    proc = subprocess.Popen(
        command(script, *args),
        cwd=ROOT,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()
    try:
        _, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        proc.kill()
    return proc.returncode, err.decode("utf-8", "replace")


@pytest.fixture(scope="module")
def korean_named_run(tmp_path_factory):
    """A 3-step run trained by train.py on an ASCII console into .../로그/run, and what
    it printed."""
    out = tmp_path_factory.mktemp("console") / "로그"
    r = run_on_ascii_console("train.py", *tiny_overrides(out, shakespeare(), **QUIET))
    return out / "run", r


def test_train_prints_a_name_the_console_cannot_encode_as_escapes(korean_named_run):
    run, r = korean_named_run
    assert r.returncode == 0, r.stderr.decode("ascii", "replace")[-2000:]
    out = r.stdout.decode("ascii")  # nothing but ASCII reached the console
    assert f"{LOG}{os.sep}run" in out and "best val loss" in out
    assert load_checkpoint(run / "ckpt.pt")["iter_num"] == 3


@pytest.mark.parametrize(
    "script, args, printed",
    [
        ("evaluate.py", ["--device", "cpu"], "nats/char"),
        ("plot_losses.py", [], "wrote"),
        ("sample.py", ["--device", "cpu", "--prompt", "KING", "--max-new-tokens", "5"], "KING"),
        ("explore_attention.py", ["--device", "cpu", "--prompt", "KING"], "wrote"),
    ],
)
def test_commands_finish_on_a_console_that_cannot_print_the_folder(
    korean_named_run, script, args, printed
):
    run, _ = korean_named_run
    r = run_on_ascii_console(script, "--out-dir", run, *args)
    assert r.returncode == 0, r.stderr.decode("ascii", "replace")[-2000:]
    out = r.stdout.decode("ascii")
    assert printed in out and (script in ("sample.py", "evaluate.py") or LOG in out), out
    # sample.py says on stderr which weights it samples, the folder escaped as on stdout.
    said = f"{LOG}{os.sep}run{os.sep}ckpt.pt (step 3, ".encode("ascii")
    if script == "sample.py":
        assert r.stderr.startswith(b"sampling ") and said in r.stderr, r.stderr
    else:
        assert r.stderr == b"", r.stderr


def test_export_finishes_on_a_console_that_cannot_print_the_folder(korean_named_run):
    pytest.importorskip("transformers")
    run, _ = korean_named_run
    r = run_on_ascii_console("export.py", "--out-dir", run, "--to", run.parent / "hf")
    assert r.returncode == 0, r.stderr.decode("ascii", "replace")[-2000:]
    assert f"{LOG}{os.sep}hf" in r.stdout.decode("ascii")


@pytest.mark.parametrize(
    "script, args",
    [
        ("train.py", ["--help-config"]),
        ("train.py", ["--help"]),
        ("evaluate.py", ["--device", "cpu"]),
        ("plot_losses.py", []),
        ("explore_attention.py", ["--device", "cpu", "--prompt", "KING"]),
        ("sample.py", ["--device", "cpu", "--max-new-tokens", "5"]),
    ],
)
def test_commands_end_quietly_when_the_reader_has_left(korean_named_run, script, args):
    run, _ = korean_named_run
    if script != "train.py":
        args = ["--out-dir", run, *args]
    code, err = run_with_stdout_closed(script, *args)
    if script == "sample.py":  # its one line on stderr, which weights it samples
        assert err.startswith("sampling ") and len(err.splitlines()) == 1, err
        err = ""
    assert (code, err) == (0, "")


def test_training_goes_to_the_end_when_the_reader_has_left(tmp_path, shakespeare_path):
    """`python train.py ... | head -2`: the lines after the reader left are dropped,
    the run trains and saves to the end, and exits 0."""
    code, err = run_with_stdout_closed(
        "train.py", *tiny_overrides(tmp_path, shakespeare_path, **QUIET)
    )
    assert code == 0 and "Traceback" not in err, err[-2000:]
    assert load_checkpoint(tmp_path / "run" / "ckpt.pt")["iter_num"] == 3
