"""bench/gpu_check.py in its CPU mode (--device cpu --quick): every step runs, tiny, and
the table says what each found; a failing step does not stop the next one."""

import io
import os
import runpy
import signal
import subprocess
import sys
import time
import types

import pytest
import torch

from tests.conftest import ROOT

pytestmark = pytest.mark.slow  # runs bench/ scripts

TIMEOUT_S = 600  # the steps have their own limits; this only guards against a hang


def gpu_check(tmp_path, *args, corpus=None):
    """Run the check in CPU mode with its runs and report under tmp_path."""
    cmd = [sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--device", "cpu", "--quick"]
    cmd += ["--runs-dir", str(tmp_path / "runs"), "--report-dir", str(tmp_path / "report")]
    if corpus is not None:
        cmd += ["--corpus", str(corpus)]
    env = {k: v for k, v in os.environ.items() if k not in ("OUT", "MINIGPT_TEST_DEVICE")}
    return subprocess.run(
        cmd + list(args),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=TIMEOUT_S,
    )


def table_rows(tmp_path) -> dict[str, list[str]]:
    """{step number: [title, status, key figures, seconds]} from gpu_check.md."""
    text = (tmp_path / "report" / "gpu_check.md").read_text(encoding="utf-8")
    rows = [line.strip("|").split(" | ") for line in text.splitlines() if line.startswith("| ")]
    return {row[0].split(".")[0].strip(): [c.strip() for c in row] for row in rows[1:]}


def test_quick_cpu_check_runs_every_step_and_writes_the_table(tmp_path, shakespeare_path):
    r = gpu_check(tmp_path, "--target-val", "4.05", corpus=shakespeare_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = table_rows(tmp_path)
    assert sorted(rows) == ["1", "2", "3", "4", "5", "6"]
    assert all(row[1] == "passed" for row in rows.values()), rows
    assert rows["1"][2] == "7 passed"  # the two quick tests' 3 + 4 cases, on cpu
    assert "process group of 1 (gloo), 6 steps, val" in rows["2"][2]
    recipe = rows["3"][2]
    assert "val <= 4.05 at step " in recipe and "; 10/10 steps; wall " in recipe
    assert ", samples+heatmaps " in recipe  # the run's time split (training/report.py)
    # 10 tiny steps: the target of --target-val, not a figure of the real recipe (the
    # schedule that ends at min_lr moved it from 3.9888 to 4.0010).
    assert float(recipe.split("best val ")[1].split()[0]) <= 4.05
    modern = rows["4"][2]
    assert "SIGTERM 4 s after the start" in rows["4"][0] and ", reference recipe " in modern
    assert "; wall " in modern and ", checkpoints " in modern  # split, also when stopped
    assert "MFU" in rows["5"][2] and "float32" in rows["5"][2]
    assert "chars/s with the KV cache" in rows["6"][2]
    report = tmp_path / "report"
    assert "interrupted at step" in (report / "gpu_check.log").read_text(encoding="utf-8")
    # Tiny runs' losses are not the recipes': the report says so.
    assert "their losses say nothing about the recipes" in (report / "gpu_check.md").read_text(
        encoding="utf-8"
    )
    for name in ("events_recipe", "events_modern"):
        assert (report / name / "events.out.tfevents.gpu_check").stat().st_size > 1000


def test_a_failing_step_is_reported_and_the_next_one_runs(tmp_path, shakespeare_path):
    bad = ["--recipe-set", "model.n_head=3", "--steps", "recipe,sample_speed"]
    r = gpu_check(tmp_path, *bad, corpus=shakespeare_path)
    assert r.returncode == 1
    rows = table_rows(tmp_path)
    assert rows["3"][1] == "failed" and rows["6"][1] == "passed"
    report = (tmp_path / "report" / "gpu_check.md").read_text(encoding="utf-8")
    assert "must be divisible by model.n_head (3)" in report  # the end of train.py's output


def test_steps_the_budget_cannot_fit_are_not_run(tmp_path, shakespeare_path):
    r = gpu_check(tmp_path, "--budget", "5", corpus=shakespeare_path)
    assert r.returncode == 1
    rows = table_rows(tmp_path)
    assert len(rows) == 6 and all(row[1] == "not run" for row in rows.values())


def test_missing_corpus_and_missing_gpu_are_named_before_any_step(tmp_path):
    r = gpu_check(tmp_path, corpus=tmp_path / "nowhere.txt")
    assert r.returncode == 2 and "no corpus at" in r.stderr and "--corpus PATH" in r.stderr
    if not torch.cuda.is_available():
        r = subprocess.run(
            [sys.executable, str(ROOT / "bench" / "gpu_check.py")],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
        assert r.returncode == 2 and "--device cpu --quick" in r.stderr
    assert not (tmp_path / "report").exists()


def test_a_command_past_its_limit_is_asked_to_stop_then_killed(tmp_path, monkeypatch):
    """SIGTERM grace_s before the limit, SIGKILL at it. run_timed's clock is a fake one
    that moves on only once the command has done what it should by then (started; then
    answered SIGTERM), so a busy machine slow to start Python cannot fail the test."""
    run_timed = runpy.run_path(str(ROOT / "bench" / "timed_process.py"))["run_timed"]
    stubborn = (  # answers SIGTERM with a line, then keeps running
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: print('asked to stop', flush=True))\n"
        "print('started', flush=True)\n"
        "time.sleep(60)\n"
    )
    log = io.StringIO()  # run_timed writes each line here, under its lock
    clock = types.SimpleNamespace(now=0.0)
    real_start = time.monotonic()

    def sleep(seconds):
        time.sleep(0.01)
        expected = "started" if clock.now < 3 else "asked to stop"  # SIGTERM at 6 - 3 s
        if expected in log.getvalue() or time.monotonic() - real_start > TIMEOUT_S:
            clock.now += seconds

    fake_time = types.SimpleNamespace(monotonic=lambda: clock.now, sleep=sleep)
    monkeypatch.setitem(run_timed.__globals__, "time", fake_time)
    r = run_timed([sys.executable, "-c", stubborn], limit_s=6, grace_s=3, log=log, cwd=tmp_path)
    assert r.timed_out and not r.stopped_at_marker
    assert r.returncode == -signal.SIGKILL and 6 <= r.seconds < 6.5
    assert r.stdout.splitlines() == ["started", "asked to stop"]
    assert log.getvalue().splitlines() == r.stdout.splitlines()


def test_the_device_step_runs_the_test_files_that_use_the_device():
    """Step 1's files: those of tests/<package>/ that name the test device. Since the
    tests moved into packages, a glob of tests/test_*.py found none, and a GPU check
    would have run no test on the GPU."""
    sys.path.insert(0, str(ROOT / "bench"))
    from gpu_check import device_test_files

    files = device_test_files()
    for expected in ("tests/model/test_engine_generation.py", "tests/training/test_precision.py"):
        assert expected in files, files
    assert "tests/bench/test_gpu_check.py" not in files
    assert "tests/docs/test_readme.py" not in files  # uses no device


def test_test_counts_are_read_from_a_stopped_run_in_either_format():
    """A tests step stopped at its limit has no summary line: the counts come from the
    -v lines printed so far, one process's or pytest-xdist's."""
    sys.path.insert(0, str(ROOT / "bench"))
    from gpu_check import pytest_counts

    one_process = (
        "tests/test_a.py::test_one PASSED                    [  1%]\n"
        "tests/test_a.py::test_two[To be, or not] FAILED     [  2%]\n"
        "tests/test_b.py::test_three PASSED                  [  3%]\n"
        "tests/test_b.py::test_four\n"
    )
    workers = (
        "[gw1] [  1%] PASSED tests/test_a.py::test_one \n"
        "[gw0] [  2%] SKIPPED tests/test_a.py::test_two[To be, or not] \n"
        "[gw1] [  3%] PASSED tests/test_b.py::test_three \n"
    )
    assert pytest_counts(one_process) == {"passed so far": 2, "failed so far": 1}
    assert pytest_counts(workers) == {"passed so far": 2, "skipped so far": 1}
    finished = workers + "========= 2 passed, 1 skipped in 3.10s =========\n"
    assert pytest_counts(finished) == {"passed": 2, "skipped": 1}


def test_a_longer_modern_run_gets_a_longer_limit(shakespeare_path):
    """--modern-seconds 300 (the 1.44-in-5-minutes target) must not be cut at the
    default run's limit."""
    sys.path.insert(0, str(ROOT / "bench"))
    from gpu_check import STEPS, most_seconds, parse_args

    default = STEPS["modern"][1]
    base = ["--device", "cpu", "--corpus", str(shakespeare_path)]
    assert most_seconds("modern", parse_args(base)) == default
    longer = parse_args(base + ["--modern-seconds", "300"])
    assert most_seconds("modern", longer) == 300 + default - 75
    assert most_seconds("recipe", longer) == STEPS["recipe"][1]


def write_test_files(folder):
    """Three test files for bench/parallel_tests.py: one passing and one failing test,
    a test that would run for two minutes, and one passing test."""
    (folder / "test_fast.py").write_text(
        "def test_one():\n    pass\n\ndef test_two():\n    assert 1 + 1 == 3\n", encoding="utf-8"
    )
    (folder / "test_slow.py").write_text(
        "import time\n\ndef test_sleeps():\n    time.sleep(120)\n", encoding="utf-8"
    )
    (folder / "test_late.py").write_text("def test_never():\n    pass\n", encoding="utf-8")


class GatedClock:
    """A fake clock for bench/parallel_tests.py's Runner: it stands still until
    ``ready()`` says the real pytest processes have got where the test wants them, then
    moves on by each sleep's seconds. The budget then runs out at that point, however
    slowly the machine starts Python (the 0.01 s real pause only lets them run)."""

    def __init__(self, ready=lambda: True):
        self.now, self.ready, self.real_start = 0.0, ready, time.monotonic()

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        time.sleep(0.01)
        if self.ready() or time.monotonic() - self.real_start > TIMEOUT_S:
            self.now += seconds


def parallel_runner(tmp_path, workers, budget_s):
    """A Runner of the three test files (slow first) on a GatedClock, and that clock."""
    sys.path.insert(0, str(ROOT / "bench"))
    from parallel_tests import Runner

    write_test_files(tmp_path)
    items = ["test_slow.py", "test_fast.py", "test_late.py"]
    gate = GatedClock()
    args = (["-p", "no:cacheprovider"], tmp_path)
    runner = Runner(items, workers, budget_s, *args, clock=gate.clock, sleep=gate.sleep)
    return runner, gate


def item(runner, name):
    return next(i for i in runner.items if i.name == name)


def test_parallel_tests_stop_at_their_budget_and_add_up_what_ran(tmp_path, capsys):
    """bench/parallel_tests.py (the tests step without pytest-xdist): items run side by
    side, one that outlasts the budget is stopped and named, and the summary line adds
    up what did run, in the form step 1 reads. The 12 s budget is on a fake clock that
    moves only once the fast items have ended and the slow one runs."""
    runner, gate = parallel_runner(tmp_path, workers=2, budget_s=12)
    fast, late = item(runner, "test_fast.py"), item(runner, "test_late.py")
    gate.ready = lambda: (
        "test_slow.py" in runner.running
        and None
        not in (
            fast.returncode,
            late.returncode,
        )
    )
    runner.run()
    out = capsys.readouterr().out
    assert not runner.all_passed
    lines = out.splitlines()
    assert "budget of 12 s spent: stopping" in lines
    assert "stopped before their end: test_slow.py" in lines
    assert "===== 2 passed, 1 failed in 12." in out  # test_fast's 1 + 1, and test_late's
    assert "not started" not in out  # the second worker ran test_late after test_fast
    assert item(runner, "test_slow.py").stopped and not fast.stopped
    sys.path.insert(0, str(ROOT / "bench"))
    from gpu_check import pytest_counts

    assert pytest_counts(out) == {"passed": 2, "failed": 1}


def test_parallel_tests_start_nothing_once_the_budget_is_spent(tmp_path, capsys):
    """One worker, a 3 s budget (fake clock) spent while the slow item runs: the other
    two are named as not started."""
    runner, gate = parallel_runner(tmp_path, workers=1, budget_s=3)
    gate.ready = lambda: "test_slow.py" in runner.running
    runner.run()
    lines = capsys.readouterr().out.splitlines()
    assert "stopped before their end: test_slow.py" in lines
    assert "not started: test_fast.py, test_late.py" in lines
    assert item(runner, "test_fast.py").returncode is None


def test_parallel_tests_command_passes_pytest_arguments_and_sums_up(tmp_path):
    """The command line, no budget: pytest's arguments after --, and the exit status 1
    that a failed test gives."""
    write_test_files(tmp_path)
    script = ROOT / "bench" / "parallel_tests.py"
    cmd = [sys.executable, str(script), "--workers", "2", "test_fast.py", "test_late.py"]
    r = subprocess.run(
        cmd + ["--", "-p", "no:cacheprovider", "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert "===== 2 passed, 1 failed in " in r.stdout
    assert not (tmp_path / ".pytest_cache").exists()  # -p no:cacheprovider reached pytest
