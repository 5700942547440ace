"""conftest.torchrun's retry after gloo's thread abort: the retry starts from the run
folder as it was before the first try (a resumed run from the same checkpoint, with
nothing the aborted try wrote)."""

import pytest

from tests.conftest import GLOO_THREAD_ABORT, torchrun

pytestmark = pytest.mark.slow  # torchrun

# One rank: the first try writes into the run folder, then dies as gloo's abort does.
ABORTS_ONCE = f"""
import pathlib, sys
tries, run = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
n = len(tries.read_text()) if tries.exists() else 0
tries.write_text("x" * (n + 1))
print("try", n, "found", *sorted(p.name for p in run.iterdir()), flush=True)
(run / "ckpt.pt").write_text(f"written by try {{n}}")
(run / f"events.{{n}}").write_text("")
if n == 0:
    print({GLOO_THREAD_ABORT!r}, file=sys.stderr, flush=True)
    sys.exit(134)
"""


def test_a_retried_run_starts_from_the_folder_as_it_was(tmp_path):
    script, tries, run = tmp_path / "aborts_once.py", tmp_path / "tries", tmp_path / "run"
    script.write_text(ABORTS_ONCE, encoding="utf-8")
    run.mkdir()
    (run / "ckpt.pt").write_text("the checkpoint resumed from")
    r = torchrun(script, tries, run, nproc=1, retry_gloo_abort=True, run_folder=run)
    assert r.returncode == 0, r.stderr[-2000:]
    assert tries.read_text() == "xx"
    assert "try 1 found ckpt.pt" in r.stdout and "events.0" not in r.stdout
    assert sorted(p.name for p in run.iterdir()) == ["ckpt.pt", "events.1"]
    assert (run / "ckpt.pt").read_text() == "written by try 1"
    assert not (tmp_path / "run.before-torchrun").exists()
