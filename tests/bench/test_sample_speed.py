"""bench/sample_speed.py's table and its two-sided comparisons (its timings are not
tested: speed is measured on a quiet machine, docs/benchmarks.md): a row per model and
batch size, read back by the comparisons from a fresh process; the order in which the
two sides run, and the ratio of their rates."""

import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT, TEST_DEVICE

sys.path.insert(0, str(ROOT / "bench"))
import sample_speed  # noqa: E402

SCRIPT = ROOT / "bench" / "sample_speed.py"
RATE = re.compile(r"[0-9][0-9,]*")  # characters per second, thousands separated


def finished(stdout: str, returncode: int = 0) -> subprocess.CompletedProcess:
    return subprocess.CompletedProcess([], returncode, stdout=stdout, stderr="")


@pytest.mark.slow  # times the CPU recipe's shape
def test_the_table_has_a_row_per_model_and_batch_size(capsys, monkeypatch):
    args = ["--models", "cpu", "--batch-sizes", "1,2", "--new-tokens", "3"]
    sample_speed.main([*args, "--device", TEST_DEVICE.type])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith(" threads, 3 new characters per sequence, prompt 1")
    assert lines[1:4] == ["decode step: the device's default", "| model | batch | chars/s |",
                          "|---|---|---|"]  # fmt: skip
    label = "4 layers, 4 heads, 128 wide, block 128, rope"  # SHAPES["cpu"]
    cells = [line.split("|")[1:-1] for line in lines[4:]]
    assert [(name.strip(), batch.strip()) for name, batch, _ in cells] == [
        (label, "1"),
        (label, "2"),
    ]
    assert all(RATE.fullmatch(rate.strip()) for *_, rate in cells), lines
    # A comparison runs the script in a fresh process and reads the rate of its one row.
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: finished("\n".join(lines[:5])))
    rate = sample_speed.row_rate(SCRIPT, "cpu", 1, sample_speed.parse_args([]))
    assert rate == float(cells[0][2].replace(",", ""))


def test_row_rate_runs_the_row_alone_with_the_flags_given(monkeypatch):
    commands = []

    def run(cmd, cwd, **kwargs):
        commands.append((cmd, cwd))
        return finished("torch ...\n| model | batch | chars/s |\n| 4 layers, x | 2 | 1,234 |\n")

    monkeypatch.setattr(subprocess, "run", run)
    args = sample_speed.parse_args(["--new-tokens", "7", "--threads", "1", "--no-compile"])
    assert sample_speed.row_rate(SCRIPT, "cpu", 2, args, ("--cpu-products",)) == 1234.0
    cmd, cwd = commands[0]
    assert cwd == ROOT and cmd[1:] == [
        str(SCRIPT), "--models", "cpu", "--batch-sizes", "2", "--cpu-products",
        "--new-tokens", "7", "--prompt-len", "1", "--device", "cpu", "--seed", "0",
        "--threads", "1", "--no-compile",
    ]  # fmt: skip
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: finished("Traceback ...", 1))
    with pytest.raises(SystemExit, match="--batch-sizes 2 .* failed:\nTraceback"):
        sample_speed.row_rate(SCRIPT, "cpu", 2, args)


@pytest.mark.parametrize(
    "mode, header, extras",
    [
        (["--against", str(ROOT)], f"| {ROOT} (chars/s) | this checkout (chars/s) | this / other |",
         [(), (), (), ()]),
        (["--products-ab"], "| --no-cpu-products (chars/s) | --cpu-products (chars/s) | on / off |",
         [("--no-cpu-products",), ("--cpu-products",), ("--cpu-products",),
          ("--no-cpu-products",)]),
    ],
    ids=["against", "products-ab"],
)  # fmt: skip
def test_a_comparison_alternates_the_sides_and_gives_their_ratio(
    capsys, monkeypatch, mode, header, extras
):
    """Two rounds: the first side, then the second; then the second first. The row gives
    each side's rates in round order and the range of second / first."""
    rates = iter([100.0, 150.0, 1600.0, 900.0])  # in the order the runs happen
    calls = []

    def row_rate(script, name, batch, args, extra=()):
        calls.append((script, name, batch, extra))
        return next(rates)

    monkeypatch.setattr(sample_speed, "row_rate", row_rate)
    sample_speed.main(["--models", "cpu", "--batch-sizes", "2", "--rounds", "2", *mode])
    assert [extra for *_, extra in calls] == extras
    assert {(name, batch) for _, name, batch, _ in calls} == {("cpu", 2)}
    # Side 1: 100 then 900; side 2: 150 then 1,600; ratios 1.50 and 1.78.
    assert capsys.readouterr().out.splitlines() == [
        f"| model | batch {header}",
        "|---|---|---|---|---|",
        "| cpu | 2 | 100 / 900 | 150 / 1,600 | 1.50-1.78 |",
    ]
