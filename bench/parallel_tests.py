"""Run pytest over several test files at once, in processes of its own, within a time
budget: bench/gpu_check.py's test step where pytest-xdist is not installed.

    python bench/parallel_tests.py --workers 4 --budget 150 tests/test_a.py tests/test_b.py
    python bench/parallel_tests.py --workers 2 tests/test_a.py::test_one -- --tb=line

Each item (a test file, or a test id) runs in a pytest process of its own
(``python -m pytest -v <pytest arguments> ITEM``), ``--workers`` of them at a time,
in the order given (put the longest first). A process's output is printed whole
when it ends, so lines never interleave. When ``--budget`` seconds have passed, no
item starts any more and the running ones are stopped (SIGTERM, then SIGKILL); so
they are when this script gets SIGTERM. Then come the items' seconds, slowest first,
what did not finish, and one summary line in pytest's form (``12 passed, 1 failed in
95.3s``), the counts of every item added up (of a stopped one, the results it had
printed). The exit status is 0 only if every item ran to its end and passed.
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

RESULT_WORDS = ("passed", "failed", "skipped", "error", "deselected")


def pytest_counts(output: str) -> dict[str, int]:
    """{"passed": n, "failed": n, ...} from pytest's last summary line; without one (it
    was stopped), the results -v printed so far, as {"passed so far": n, ...}."""
    summary = [line for line in output.splitlines() if re.search(r"\d+ (passed|failed)", line)]
    if not summary:
        # One process: "path::test[id, maybe with spaces] PASSED   [ 5%]";
        # pytest-xdist: "[gw0] [  5%] PASSED path::test[...]".
        one = r"^\S+::.* (PASSED|FAILED|SKIPPED|ERROR)\s+\[\s*\d+%\]\s*$"
        xdist = r"^\[gw\d+\] \[\s*\d+%\] (PASSED|FAILED|SKIPPED|ERROR) "
        results = re.findall(one, output, re.MULTILINE) + re.findall(xdist, output, re.MULTILINE)
        words = ("PASSED", "FAILED", "SKIPPED", "ERROR")
        return {f"{w.lower()} so far": results.count(w) for w in words if w in results}
    pairs = re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected)", summary[-1])
    return {word.rstrip("s") if word.startswith("error") else word: int(n) for n, word in pairs}


@dataclass
class Item:
    """One pytest process: what it ran and how it ended."""

    name: str
    output: str = ""
    seconds: float = 0.0
    returncode: int | None = None  # None: not started
    stopped: bool = False  # stopped at the budget (or by SIGTERM) before it ended


class Runner:
    """Runs the items, ``workers`` at a time, until they end or the budget is spent."""

    def __init__(
        self,
        items,
        workers,
        budget_s,
        pytest_args,
        cwd,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        """
        Args:
            items: test files or ids, each run by a pytest process of its own, in order.
            workers: how many of those processes run at a time.
            budget_s: seconds after which no item starts and the running ones stop.
            pytest_args: arguments given to every pytest process.
            cwd: the folder the processes run in.
            clock: seconds, for the budget and the items' times.
            sleep: waits this many seconds between two checks of the budget.

        A test passes a fake clock and sleep, so that the budget runs out when the test
        says, whatever the machine's speed.
        """
        self.items = [Item(name) for name in items]
        self.workers, self.budget_s, self.pytest_args, self.cwd = (
            workers,
            budget_s,
            pytest_args,
            cwd,
        )
        self.clock, self.sleep = clock, sleep
        self.lock = threading.Lock()
        self.next = 0
        self.running: dict[str, subprocess.Popen] = {}
        self.stopping = threading.Event()
        self.started = clock()

    def take(self) -> Item | None:
        """The next item not yet started, or None (all taken, or stopping)."""
        with self.lock:
            if self.stopping.is_set() or self.next == len(self.items):
                return None
            self.next += 1
            return self.items[self.next - 1]

    def work(self) -> None:
        """One worker: run items one after another."""
        while (item := self.take()) is not None:
            cmd = [sys.executable, "-m", "pytest", "-v", *self.pytest_args, item.name]
            with tempfile.TemporaryFile("w+", encoding="utf-8") as out:
                began = self.clock()
                try:
                    proc = subprocess.Popen(
                        cmd, cwd=self.cwd, stdout=out, stderr=subprocess.STDOUT, process_group=0
                    )
                except OSError as e:  # counted as a failed item; the others go on
                    item.returncode, item.output = -1, f"could not start {cmd}: {e}"
                    continue
                with self.lock:
                    self.running[item.name] = proc
                if self.stopping.is_set():  # stopped while it was starting
                    self.stop_one(proc)
                item.returncode = proc.wait()
                with self.lock:
                    self.running.pop(item.name)
                    item.stopped = self.stopping.is_set() and item.returncode != 0
                item.seconds = self.clock() - began
                out.seek(0)
                item.output = out.read()
            with self.lock:
                print(f"===== {item.name} ({item.seconds:.1f} s)", flush=True)
                print(item.output.rstrip("\n"), flush=True)

    @staticmethod
    def stop_one(proc: subprocess.Popen) -> None:
        """SIGTERM to the item's process group, SIGKILL 5 s later if it still runs."""
        for sig, wait_s in ((signal.SIGTERM, 5), (signal.SIGKILL, None)):
            try:
                os.killpg(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                return
            if wait_s is None:
                return
            try:
                proc.wait(timeout=wait_s)
                return
            except subprocess.TimeoutExpired:
                continue

    def stop(self) -> None:
        """Start nothing more; stop the running items."""
        self.stopping.set()
        with self.lock:
            running = list(self.running.values())
        for proc in running:
            self.stop_one(proc)

    def run(self) -> None:
        """Run every item (or until the budget is spent)."""
        threads = [threading.Thread(target=self.work, daemon=True) for _ in range(self.workers)]
        for thread in threads:
            thread.start()
        try:
            while any(t.is_alive() for t in threads):
                if self.clock() - self.started >= self.budget_s and not self.stopping.is_set():
                    print(f"budget of {self.budget_s:.0f} s spent: stopping", flush=True)
                    self.stop()
                self.sleep(0.2)
        except BaseException:  # SIGTERM (see main) or Ctrl-C: nothing may outlive this
            self.stop()
            for thread in threads:
                thread.join(timeout=10)
            raise
        finally:
            self.report()

    def report(self) -> None:
        """Seconds per item, what did not finish, and the summary line."""
        ran = sorted((i for i in self.items if i.returncode is not None), key=lambda i: -i.seconds)
        print("===== seconds per item, slowest first", flush=True)
        for item in ran:
            print(f"{item.seconds:7.1f} s  {item.name}{'  (stopped)' if item.stopped else ''}")
        stopped = [i.name for i in self.items if i.stopped]
        not_started = [i.name for i in self.items if i.returncode is None]
        if stopped:
            print("stopped before their end: " + ", ".join(stopped))
        if not_started:
            print("not started: " + ", ".join(not_started))
        totals: dict[str, int] = {}
        for item in ran:
            for word, n in pytest_counts(item.output).items():
                word = word.removesuffix(" so far")
                totals[word] = totals.get(word, 0) + n
        shown = [f"{totals[w]} {w}" for w in RESULT_WORDS if totals.get(w)]
        if not shown:
            shown = ["0 passed"]
        seconds = self.clock() - self.started
        print(f"===== {', '.join(shown)} in {seconds:.1f}s =====", flush=True)

    @property
    def all_passed(self) -> bool:
        """Every item ran to its end with exit status 0."""
        return all(i.returncode == 0 and not i.stopped for i in self.items)


def stop_on_sigterm(signum, frame) -> None:
    """SIGTERM (bench/gpu_check.py's limit) ends the run like Ctrl-C, with its report."""
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run the items, return 0 if all passed, else 1."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--workers", type=int, default=4, help="pytest processes at a time")
    p.add_argument("--budget", type=float, default=float("inf"), help="seconds in all")
    p.add_argument("items", nargs="+", help="test files or ids; after --, pytest's arguments")
    argv = sys.argv[1:] if argv is None else argv
    ours, pytest_args = argv, []
    if "--" in argv:
        ours, pytest_args = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    args = p.parse_args(ours)
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    runner = Runner(args.items, max(1, args.workers), args.budget, pytest_args, Path.cwd())
    try:
        runner.run()
    except SystemExit:
        return 1
    return 0 if runner.all_passed else 1


if __name__ == "__main__":
    sys.exit(main())
