"""The progress line a run prints when its output goes to a file."""

import io
import re
import sys
import types

import pytest

import training.report
from model.checkpoint import load_checkpoint
from tests.conftest import read_scalars, shakespeare, tiny_overrides
from training import load_config, train
from training.loop import Trainer
from training.report import Console
from viz.run_events import TRAIN_TOKENS_PER_SEC


def seconds_of(text: str) -> int:
    """'1m05s' -> 65, '7s' -> 7, '1h02m05s' -> 3725."""
    parts = dict((unit, int(n)) for n, unit in re.findall(r"(\d+)([hms])", text))
    return 3600 * parts.get("h", 0) + 60 * parts.get("m", 0) + parts.get("s", 0)


def test_time_left_holds_steady_across_evaluations(monkeypatch, capsys):
    """10 steps/s with a 5 s evaluation every 300 steps, a line every 10 s: each line's
    time left is within a tenth of the run's length of the time that really remains
    (the evaluations still to come included); a rate over the last line's interval
    alone made it jump after each evaluation (25 s too long just after the first, in
    this 120 s run)."""
    clock = [1000.0]
    monkeypatch.setattr(training.report.time, "perf_counter", lambda: clock[0])
    total, step_s, eval_s, eval_every = 1000, 0.1, 5.0, 300
    console = Console(enabled=True, interactive=False, plain_every=10.0)
    console.start(1, total)  # called after the first step
    printed = []  # (step, seconds left as printed, when)
    for step in range(2, total + 1):
        clock[0] += step_s
        console.step(step, {"loss": "1.0"})
        out = capsys.readouterr().out
        if out:
            left = re.search(r"elapsed, (\S+) left", out).group(1)
            printed.append((step, seconds_of(left), clock[0]))
        if step % eval_every == 0:
            clock[0] += eval_s
    end = clock[0]  # after the last evaluation, at step 1000: the run's work is done
    assert len(printed) >= 10
    for step, left, when in printed:
        if step > eval_every:  # once the pace includes an evaluation
            remaining = end - when
            assert abs(left - remaining) <= 0.1 * (end - 1000.0), (step, left, remaining)


def test_time_left_leaves_out_the_slow_steps_before_the_first_log_line(monkeypatch, capsys):
    """The steps just after compiling run slower: here the first 10 take 2 s each, then
    0.1 s. Counted from the first log line (`Console.warmed`), the time left is right
    from the next line on; counted from the first step, it was over twice too long."""
    clock = [1000.0]
    monkeypatch.setattr(training.report.time, "perf_counter", lambda: clock[0])
    total = 2000
    console = Console(enabled=True, interactive=False, plain_every=10.0)
    console.start(1, total)
    printed = []
    for step in range(2, total + 1):
        clock[0] += 2.0 if step <= 10 else 0.1
        if step == 10:
            console.warmed(step)
        console.step(step, {"loss": "1.0"} if step % 10 == 0 else None)
        if out := capsys.readouterr().out:
            printed.append((step, out, clock[0]))
    end = clock[0]
    first_step, first_line, _ = printed[0]
    assert first_step == 10 and first_line.rstrip().endswith("elapsed, estimating")
    step, line, when = printed[1]
    left = seconds_of(re.search(r"elapsed, (\S+) left", line).group(1))
    assert abs(left - (end - when)) <= 2, (step, left, end - when)


def test_the_pace_counts_from_the_steps_done_when_it_starts(tmp_path, monkeypatch):
    """The console starts after the run's first step (compiling stays out of the pace),
    told how many steps are done by then: 1 for a new run, 5 for one resumed at 4. Told
    one too few, every rate counted a step that its time did not include."""
    started = []
    real_start = Console.start
    monkeypatch.setattr(
        Console,
        "start",
        lambda self, step, total: started.append(step) or real_start(self, step, total),
    )
    train(load_config(None, tiny_overrides(tmp_path, shakespeare(), **{"train.max_iters": 4})))
    more = {"train.max_iters": 6, "train.resume": "true"}
    train(load_config(None, tiny_overrides(tmp_path, shakespeare(), **more)))
    assert started == [1, 5]


def test_the_first_logged_throughput_leaves_the_first_step_out(tmp_path, monkeypatch):
    """The first step compiles and warms up: its time must not show in the tokens/s
    logged at step 2. On a fake clock (the throughput's own: the machine's speed and
    load do not enter) the first step takes 1,000 s and every other 0.5 s, so the
    256-token steps log exactly 512 tokens/s at steps 2 and 4 (0.51 if the first step
    counted)."""
    clock = types.SimpleNamespace(now=0.0)
    monkeypatch.setattr(
        training.report, "time", types.SimpleNamespace(perf_counter=lambda: clock.now)
    )
    real_step = Trainer.train_step

    def timed_step(self, step):
        clock.now += 1000.0 if step == 0 else 0.5
        return real_step(self, step)

    monkeypatch.setattr(Trainer, "train_step", timed_step)
    overrides = {"train.max_iters": 4, "train.log_interval": 2}
    result = train(load_config(None, tiny_overrides(tmp_path, shakespeare(), **overrides)))
    rates = dict(read_scalars(result.out_dir)[TRAIN_TOKENS_PER_SEC])
    assert rates == {2: pytest.approx(512.0), 4: pytest.approx(512.0)}, rates


class ClosedPipe(io.TextIOBase):
    """A stdout whose reader has gone (``| head``)."""

    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.slow
def test_closed_stdout_does_not_stop_training(tmp_path, shakespeare_path, monkeypatch):
    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    result = train(load_config(None, tiny_overrides(tmp_path, shakespeare_path)))
    assert result.iter_num == 6
    assert load_checkpoint(tmp_path / "run" / "ckpt.pt")["iter_num"] == 6
