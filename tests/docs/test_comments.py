"""Comments and docstrings say what the code does and why; measurements live in
docs/benchmarks.md with their commands (and the host they ran on), where they can be
kept true. This scans model/, training/ and data/ for benchmark figures."""

import ast
import io
import re
import tokenize

import pytest

from tests.conftest import ROOT

# A figure that belongs in docs/benchmarks.md: a duration in ms/µs, a bandwidth, a
# speed-up, a share of time, or "measured ... fastest".
BENCHMARK_FIGURE = re.compile(
    r"\d+(\.\d+)?\s*(ms|µs|us|ns)\b"
    r"|\d+(\.\d+)?\s*[KMGT]B/s\b"
    r"|\d+(\.\d+)?\s*(chars|tokens|characters)/s\b"
    r"|\d+(\.\d+)?\s*x\s+(faster|slower|less|more|the)\b"
    r"|\d+(\.\d+)?\s*times\s+(faster|slower|the)\b"
    r"|\d+(\.\d+)?\s*%\s*(of\s+(the\s+|each\s+|a\s+)?(time|step|run)|less|more|faster|slower)"
    r"|\btwice\s+the\s+time\b"
    r"|\bmeasured\s+(fastest|slowest)\b",
    re.IGNORECASE,
)
# A folder on the developers' machines, where an example path should be neutral.
MACHINE_PATH = re.compile(r"/work/")
PACKAGES = ["training", "data", "model"]


def comments_and_docstrings(path):
    """(line number, text) of every comment and docstring in a Python file."""
    source = path.read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    for offset, line in enumerate(body[0].value.value.splitlines()):
                        yield body[0].lineno + offset, line


def figures_in(package: str) -> list[str]:
    """'file:line: text' for each comment or docstring line holding a benchmark
    figure or a machine's own path."""
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for line, text in comments_and_docstrings(path):
            if BENCHMARK_FIGURE.search(text) or MACHINE_PATH.search(text):
                found.append(f"{path.relative_to(ROOT)}:{line}: {text.strip()}")
    return found


@pytest.mark.parametrize(
    "package",
    [
        "training",
        "data",
        "model",
    ],
)
def test_no_benchmark_figure_in_comments_or_docstrings(package):
    found = figures_in(package)
    assert not found, "move these figures to docs/benchmarks.md:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "text",
    [
        "# about 10 GB/s on our 2-core machines",
        "# 5-8% less time on two machines",
        "# 1 MB measured fastest; 8 MB took twice the time",
        "# cost about 0.2 ms per batch",
        "# a decode step runs about 1.8x faster",
    ],
)
def test_the_scan_finds_the_figures_it_is_for(text):
    assert BENCHMARK_FIGURE.search(text)


@pytest.mark.parametrize(
    "text",
    [
        "# uint16 up to 65,535 symbols",
        "\"\"\"3725 -> '1h02m05s', 65 -> '1m05s', 7 -> '7s'.\"\"\"",
        "# (B, n_head, T, T) attention weights",
        "# share of lr_decay_iters spent in the warmdown, e.g. 20%",
        "# 1 MB pieces bound the memory",
    ],
)
def test_the_scan_leaves_ordinary_numbers_alone(text):
    assert not BENCHMARK_FIGURE.search(text)
