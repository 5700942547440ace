"""The page's number formatting (viz/page/core.js), run in node: a change that rounds to
zero reads 0.000 in the changes view, never −0.000."""

import json
import re
import shutil
import subprocess

import pytest

from viz.page_files import SCRIPT_DIR

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="needs node")


def page_function(name: str) -> str:
    """One top-level function of core.js, its text up to the closing brace at column 0."""
    core = (SCRIPT_DIR / "core.js").read_text(encoding="utf-8")
    return re.search(rf"^function {name}\(.*?^\}}$", core, re.S | re.M).group(0)


def run_format(function: str, values: list[float], decimals: int) -> list[str]:
    program = (
        page_function("formatFixed")
        + page_function(function)
        + f"\nfor (const x of {json.dumps(values)}) console.log({function}(x, {decimals}));"
    )
    out = subprocess.run(["node", "-e", program], capture_output=True, text=True, check=True)
    return out.stdout.split("\n")[:-1]


def test_a_change_that_rounds_to_zero_reads_zero():
    values = [-0.0001, -0.0004999, 0.0002, -0.0, -0.0006, 0.0125, -1.5]
    assert run_format("formatChange", values, 3) == [
        "0.000",
        "0.000",
        "0.000",
        "0.000",
        "-0.001",
        "0.013",  # 0.0125 is a little above the tie as a float, as in Python
        "-1.500",
    ]
    assert run_format("formatChange", [-0.00004], 4) == ["0.0000"]


def test_the_changes_view_formats_with_format_change():
    training = (SCRIPT_DIR / "training.js").read_text(encoding="utf-8")
    assert 'kind === "difference" ? formatChange : formatFixed' in training
    assert "formatChange(largest.value" in training
