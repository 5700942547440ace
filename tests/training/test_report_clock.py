"""The run's time split (training.report.RunClock): the parts add up to the wall time, the
compile estimate, waits for the device at part boundaries only, and a tiny run's
end-of-run line and time/ scalars, all on fake time."""

import re

import pytest

from tests.conftest import read_scalars, tiny_overrides
from training import load_config, train
from training.report import PARTS, RunClock, split_line
from viz.run_events import TIME_PART, TIME_WALL


class FakeClock:
    """Time that moves only when told (``advance``), or by ``tick`` at each reading."""

    def __init__(self, tick: float = 0.0):
        self.now, self.tick = 100.0, tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def test_parts_add_up_and_compiling_is_the_first_calls_excess():
    fake, syncs = FakeClock(), []
    clock = RunClock(sync=lambda: syncs.append(fake.now), clock=fake)
    fake.advance(2.0)  # setup
    clock.switch("steps")
    with clock.first_step():
        fake.advance(10.5)  # compiling + one step
        with clock.part("data", sync=False):
            fake.advance(0.25)
    for _ in range(4):  # four steps of 0.5 s, each drawing its batch for 0.25 s
        with clock.part("data", sync=False):
            fake.advance(0.25)
        fake.advance(0.5)
    for seconds in (7.0, 3.0, 3.5, 2.5):  # evaluations: the first one compiles
        with clock.part("eval", compiled=True):
            fake.advance(seconds)
    with clock.part("views"):
        fake.advance(1.5)
    with clock.part("checkpoints"):
        fake.advance(0.75)
    clock.switch("other")
    fake.advance(0.125)
    split = clock.split(steps_after_first=4, compiled=True)
    assert list(split) == list(PARTS)
    assert split == {
        "setup": 2.0,
        "compile": 10.0 + 4.0,  # 10.5 - 0.5 (a step's average); 7.0 - median(3, 3.5, 2.5)
        "steps": 0.5 + 4 * 0.5,
        "data": 5 * 0.25,
        "eval": 16.0 - 4.0,
        "views": 1.5,
        "checkpoints": 0.75,
        "other": 0.125,
    }
    assert sum(split.values()) == fake.now - 100.0
    # Waits for the device: entering steps, the first step's two ends, and both ends
    # of each evaluation, views and checkpoints; never around the batch draws.
    assert len(syncs) == 1 + 2 + 2 * 4 + 2 + 2 + 1
    # Uncompiled, the first step is a step and evaluations stay evaluations.
    eager = clock.split(steps_after_first=4, compiled=False)
    assert eager["compile"] == 0.0 and eager["steps"] == 12.5 and eager["eval"] == 16.0


def test_split_so_far_counts_the_current_part_up_to_now():
    fake = FakeClock()
    clock = RunClock(clock=fake)
    fake.advance(1.0)
    clock.switch("steps")
    fake.advance(3.0)
    split = clock.split(steps_after_first=0, compiled=True)
    assert split["setup"] == 1.0 and split["steps"] == 3.0 and split["compile"] == 0.0
    with pytest.raises(ValueError, match="unknown part 'evaluation'"):
        clock.switch("evaluation")


def test_the_printed_parts_add_up_to_the_printed_wall_time():
    split = dict.fromkeys(PARTS, 0.26)  # each prints as 0.3 alone; 8 x 0.26 = 2.08
    line = split_line(split)
    wall, parts = parse_split_line(line)
    assert wall == 2.1 and round(sum(parts.values()), 1) == 2.1
    assert line.startswith("wall 2.1 s: setup 0.3 s, ") and "samples+heatmaps" in line


def parse_split_line(line: str) -> tuple[float, dict[str, float]]:
    """(wall seconds, {part label: seconds}) from the end-of-run line."""
    match = re.fullmatch(r"wall (\d+\.\d) s: (.*)", line)
    assert match, line
    parts = dict(re.fullmatch(r"(\S+) (\d+\.\d) s", p).groups() for p in match[2].split(", "))
    return float(match[1]), {label: float(s) for label, s in parts.items()}


def test_a_run_ends_with_its_time_split_and_logs_it(tmp_path, shakespeare_path, capsys):
    overrides = tiny_overrides(
        tmp_path, shakespeare_path, **{"train.eval_tokens": 4096, "train.final_full_eval": False}
    )
    result = train(load_config(None, overrides), clock=FakeClock(tick=0.05))
    last = capsys.readouterr().out.strip().splitlines()[-1]
    wall, parts = parse_split_line(last)
    assert round(sum(parts.values()), 1) == wall
    labels = ["setup", "compile", "steps", "data", "eval", "samples+heatmaps"]
    assert list(parts) == labels + ["checkpoints", "other"]
    split = result.time_split
    assert wall == pytest.approx(sum(split.values()), abs=0.05)
    # Every part the run went through took time on the fake clock; compile is off.
    assert split["compile"] == 0.0
    assert all(split[p] > 0 for p in ("setup", "steps", "data", "eval", "views", "checkpoints"))
    scalars = read_scalars(result.out_dir)
    for part in PARTS:  # at the evaluation of step 3, then at the end (step 6)
        values = scalars[TIME_PART.format(part=part)]
        assert [s for s, _ in values] == [3, 6]
        assert values[-1][1] == pytest.approx(split[part], rel=1e-6)
    assert scalars[TIME_WALL][-1][1] == pytest.approx(wall, abs=0.05)
    assert scalars[TIME_WALL][0][1] < scalars[TIME_WALL][-1][1]
