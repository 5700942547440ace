"""What snapshots and head scores add to a training run: their share of the wall time,
and the snapshots' size on disk.

    python bench/watch_overhead.py                                    # the CPU recipe
    python bench/watch_overhead.py train.max_iters=200 train.compile=false   # a quick look

Trains the CPU recipe (configs/shakespeare_char_cpu.yaml plus the overrides given) once
into a fresh folder under /tmp, timing every call of `training.watch.RunWatch.after_step`
(head scores at each evaluation and snapshot; the snapshots: weights, a short validation
score, a sample) and `end_lines` (heads formed, verdicts). One run, not two compared: on a
machine shared with other work, the difference of two runs' wall times is mostly noise,
while the time inside the watch is measured directly. Then times the page's answer for a
snapshot (loading it, then a prompt). Prints a table.
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from training import load_config, train  # noqa: E402
from training.watch import RunWatch  # noqa: E402
from viz.snapshot_explorers import SnapshotExplorers  # noqa: E402
from viz.snapshots import SNAPSHOTS_DIR, read_snapshot_index  # noqa: E402

RECIPE = "configs/shakespeare_char_cpu.yaml"


def timed(method, spent: list[float]):
    """``method`` wrapped so each call adds its seconds to ``spent``."""

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - start)

    return wrapper


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("set", nargs="*", help="section.key=value settings of the run")
    overrides = parser.parse_args(argv).set
    spent: list[float] = []
    RunWatch.after_step = timed(RunWatch.after_step, spent)
    RunWatch.end_lines = timed(RunWatch.end_lines, spent)
    # A fresh folder under /tmp, unless an out_dir=... setting (a later override) names one.
    fresh = Path(tempfile.mkdtemp(prefix="watch-overhead-")) / "run"
    cfg = load_config(RECIPE, [f"out_dir={fresh}", *overrides])
    out_dir = Path(cfg.out_dir)
    started = time.perf_counter()
    result = train(cfg)
    wall = time.perf_counter() - started
    entries = read_snapshot_index(out_dir)
    size = sum(p.stat().st_size for p in (out_dir / SNAPSHOTS_DIR).iterdir())
    explorers = SnapshotExplorers(out_dir, torch.device("cpu"))
    start = time.perf_counter()
    explorer = explorers.explorer(entries[len(entries) // 2]["step"])
    loaded = time.perf_counter() - start
    start = time.perf_counter()
    explorer.explain("To be, or not to be")
    answered = time.perf_counter() - start
    print(f"| {RECIPE} {' '.join(overrides)} | value |")
    print("|---|---|")
    print(f"| steps | {result.iter_num} |")
    print(f"| wall time of the run | {wall:.1f} s |")
    print(f"| in snapshots + head scores | {sum(spent):.2f} s ({100 * sum(spent) / wall:.2f} %) |")
    print(f"| snapshots | {len(entries)}, {size / 1e6:.1f} MB |")
    print(f"| page: load a snapshot | {1000 * loaded:.0f} ms |")
    print(f"| page: answer a prompt at it | {1000 * answered:.0f} ms |")


if __name__ == "__main__":
    main()
