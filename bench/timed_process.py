"""Running one command under a time limit and keeping its output, so that a hung or
failing step of bench/gpu_check.py cannot stop the steps after it.

    result = run_timed(["python", "train.py", ...], limit_s=120, log=open_log_file,
                       stop_after=("training on", 60))

The command runs in its own process group. It is asked to stop with SIGTERM (which
train.py answers by saving a checkpoint and exiting) either ``stop_after`` seconds after
a marker line appears on its standard output, or ``grace_s`` seconds before the limit;
at the limit its whole process group is killed, as it is when the caller is interrupted.
Its output is copied, line by line, to a log file as it arrives.
"""

import os
import signal
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

TAIL_LINES = 30  # lines of standard error kept for a failure report


@dataclass
class Finished:
    """How a command ended.

    Attributes:
        returncode: its exit status (negative: killed by that signal number).
        seconds: wall-clock time from start to end.
        stdout: everything it printed on standard output.
        stderr_tail: the last TAIL_LINES lines of standard error (progress-bar redraws
            reduced to their last state).
        stopped_at_marker: SIGTERM was sent ``stop_after`` seconds after the marker.
        timed_out: the limit came first (SIGTERM at limit - grace, then SIGKILL at the
            limit if it had not ended).
    """

    returncode: int
    seconds: float
    stdout: str
    stderr_tail: str
    stopped_at_marker: bool = False
    timed_out: bool = False

    def tail(self, lines: int = TAIL_LINES) -> str:
        """The end of the output: standard error's last lines, else standard output's."""
        text = self.stderr_tail.strip() or self.stdout.strip()
        return "\n".join(text.splitlines()[-lines:])


def _last_redraw(line: str) -> str:
    """A progress bar redraws itself after carriage returns: keep what was last shown."""
    return line.rstrip("\n").rsplit("\r", 1)[-1]


def _signal_group(pgid: int, sig: int) -> None:
    """Send sig to the command's process group (it may already have ended)."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run_timed(
    cmd: list[str],
    *,
    limit_s: float,
    log: TextIO,
    cwd: Path,
    env: dict | None = None,
    stop_after: tuple[str, float] | None = None,
    grace_s: float = 15.0,
) -> Finished:
    """Run ``cmd`` until it ends or ``limit_s`` seconds have passed.

    Args:
        cmd: the command and its arguments.
        limit_s: seconds after which the process group is killed.
        log: text file that receives every line of output as it arrives.
        cwd: working folder.
        env: the environment (default: this process's).
        stop_after: (marker, seconds): send SIGTERM that many seconds after a line of
            standard output containing marker first appears.
        grace_s: SIGTERM this many seconds before the limit, to let it stop cleanly.

    Returns:
        A `Finished`.

    Raises:
        OSError: if the command cannot be started at all.
    """
    lock = threading.Lock()
    stdout_lines: list[str] = []
    stderr_tail: deque[str] = deque(maxlen=TAIL_LINES)
    marker_seen_at: list[float] = []
    started = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        encoding="utf-8",
        errors="replace",
        process_group=0,  # its own group (same session): one kill reaches its children
    )

    def read(stream, is_stdout: bool) -> None:
        for raw in stream:
            line = _last_redraw(raw)
            with lock:
                log.write(line + "\n")
                if is_stdout:
                    stdout_lines.append(line)
                    if stop_after and not marker_seen_at and stop_after[0] in line:
                        marker_seen_at.append(time.monotonic())
                elif line.strip():
                    stderr_tail.append(line)

    readers = [
        threading.Thread(target=read, args=(proc.stdout, True), daemon=True),
        threading.Thread(target=read, args=(proc.stderr, False), daemon=True),
    ]
    for reader in readers:
        reader.start()

    stopped_at_marker = timed_out = term_sent = False
    try:
        while proc.poll() is None:
            now = time.monotonic()
            if not term_sent and stop_after and marker_seen_at:
                if now - marker_seen_at[0] >= stop_after[1]:
                    proc.send_signal(signal.SIGTERM)
                    term_sent = stopped_at_marker = True
            if not term_sent and now - started >= limit_s - grace_s:
                proc.send_signal(signal.SIGTERM)
                term_sent = timed_out = True
            if now - started >= limit_s:
                _signal_group(proc.pid, signal.SIGKILL)
                timed_out = True
                break
            time.sleep(0.2)
    except BaseException:  # the caller was interrupted: nothing of the command outlives it
        _signal_group(proc.pid, signal.SIGKILL)
        raise
    proc.wait()
    seconds = time.monotonic() - started
    # Children it left behind (and their hold on the pipes) end with the group.
    _signal_group(proc.pid, signal.SIGKILL)
    for reader in readers:
        reader.join(timeout=5)
    with lock:
        log.flush()
        return Finished(
            returncode=proc.returncode,
            seconds=seconds,
            stdout="\n".join(stdout_lines),
            stderr_tail="\n".join(stderr_tail),
            stopped_at_marker=stopped_at_marker,
            timed_out=timed_out,
        )
