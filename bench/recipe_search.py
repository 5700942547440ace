"""Search for a recipe: train candidate configs, each as its own `train.py` command, and
tabulate their whole-split validation loss against the wall time of the command.

    python bench/recipe_search.py --candidates bench/recipe_candidates.txt --budget first
    python bench/recipe_search.py --candidate 'bf16: train.dtype=bfloat16' \\
        --candidate 'bf16-wide: train.dtype=bfloat16 model.n_embd=192 model.n_head=6' \\
        --budget 283

A candidate is a name and the overrides that make it from the base config
(``--config``, the CPU recipe by default): ``NAME: section.key=value ...``, given with
``--candidate`` or one a line in a ``--candidates`` file (``#`` starts a comment). Its
shape, dtype (train.dtype), compiling (train.compile) and length (train.max_iters) are
overrides like any other.

The length. A candidate that sets train.max_iters runs that many steps. Otherwise, with
``--budget SECONDS``, its steps are fitted to the budget: a probe (bench/train_speed.py's
timed steps, in a fresh process) measures its ms/step, and

    max_iters = (budget - overhead) / (seconds per step), rounded down to 100s

where ``--overhead`` is what a run spends outside its steps (setup, compiling,
evaluations, the TensorBoard views; 30 s for the CPU recipe on a warm compile cache,
docs/benchmarks.md). train.eval_interval becomes max_iters / 4 and, where the base config
averages the weights, train.ema_start keeps as many steps before the end as the base
config does. ``--budget first`` takes the wall time of the first candidate, run as
given (the shipped recipe, say), as the budget of the others. Without ``--budget`` the
base config's max_iters stands.

Each candidate then runs as ``python train.py --config BASE OVERRIDES
out_dir=OUT/NAME train.overwrite=true`` (one after the other: run this on a quiet
machine, nothing else timing), and its figures are read back from its TensorBoard events:
the whole validation split's loss (val/full_loss), the best periodic one, the command's
wall time and the run's own time split. Each row is appended to OUT/results.jsonl as
it is measured, and the table is printed at the end.
"""

import argparse
import json
import multiprocessing as mp
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from train_speed import case_result, run_case  # noqa: E402

from data.corpus import DEFAULT_CORPUS_PATH, ensure_default_corpus  # noqa: E402
from training.config import ConfigError, load_config  # noqa: E402
from viz.run_events import (  # noqa: E402
    TIME_PART,
    TIME_WALL,
    TRAIN_TOKENS_PER_SEC,
    VAL_BEST_LOSS,
    VAL_FULL_LOSS,
    read_scalar_curves,
)

BASE = ROOT / "configs" / "shakespeare_char_cpu.yaml"
OVERHEAD_S = 30.0  # the CPU recipe's time outside its steps, warm compile cache
ROUND_TO = 100  # max_iters fitted to a budget is a multiple of this (4 evaluations)
PROBE_STEPS, PROBE_WARMUP = 30, 5


def parse_candidate(text: str) -> tuple[str, list[str]]:
    """'NAME: key=value ...' -> (NAME, ["key=value", ...]).

    Raises:
        ValueError: if there is no name before the colon, or an override has no '='.
    """
    name, colon, rest = text.partition(":")
    name = name.strip()
    if not colon or not name or any(c.isspace() or c == "/" for c in name):
        raise ValueError(f"candidate {text!r} must look like 'NAME: section.key=value ...'")
    overrides = shlex.split(rest)
    for override in overrides:
        if "=" not in override:
            raise ValueError(f"candidate {name}: override {override!r} must be section.key=value")
    return name, overrides


def read_candidates(texts: list[str], files: list[str]) -> list[tuple[str, list[str]]]:
    """The candidates of --candidates files (first) and --candidate flags, in order.

    Raises:
        ValueError: for a malformed candidate or a name given twice.
    """
    lines = []
    for file in files:
        for line in Path(file).read_text(encoding="utf-8").splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                lines.append(line)
    candidates = [parse_candidate(text) for text in lines + texts]
    names = [name for name, _ in candidates]
    if len(set(names)) != len(names):
        raise ValueError(f"candidate names must differ: {', '.join(names)}")
    return candidates


def fitted_overrides(
    base_cfg, overrides: list[str], ms_per_step: float, budget_s: float, overhead_s: float
) -> list[str]:
    """The overrides that fit a candidate (``base_cfg``, the base config with its
    ``overrides`` applied) to ``budget_s`` seconds: max_iters, eval_interval and, with
    weight averaging, ema_start (see the module docstring).

    Raises:
        ValueError: if not even ROUND_TO steps fit.
    """
    steps = int((budget_s - overhead_s) * 1000 / ms_per_step) // ROUND_TO * ROUND_TO
    if steps < ROUND_TO:
        raise ValueError(
            f"{ms_per_step:.0f} ms/step: fewer than {ROUND_TO} steps fit in {budget_s:.0f} s "
            f"less {overhead_s:.0f} s of overhead"
        )
    t = base_cfg.train
    fitted = [f"train.max_iters={steps}", f"train.eval_interval={steps // 4}"]
    given = {o.split("=", 1)[0] for o in overrides}
    if t.ema_decay > 0 and "train.ema_start" not in given:
        tail = max(0, t.max_iters - t.ema_start)  # averaged steps of the base config
        fitted.append(f"train.ema_start={max(0, steps - tail)}")
    return fitted


def probe_ms_per_step(config: Path, overrides: list[str]) -> float:
    """ms per training step of a candidate: bench/train_speed.py's timed steps, in a
    fresh process."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(
        target=run_case, args=("probe", config, overrides, PROBE_STEPS, PROBE_WARMUP, queue)
    )
    proc.start()
    row = case_result("probe", proc, queue)
    proc.join()
    return row["ms_per_iter"]


def last(curves: dict, tag: str) -> float | None:
    """The last value logged under ``tag``, or None."""
    curve = curves.get(tag)
    return float(curve.values[-1]) if curve is not None and len(curve.values) else None


def train_candidate(name: str, config: Path, overrides: list[str], out: Path) -> dict:
    """Run ``python train.py`` for one candidate and read its figures back.

    Returns:
        {"name", "overrides", "max_iters", "whole_val_loss", "best_val_loss",
        "command_s" (the whole command), "wall_s" and "steps_s" (the run's time split),
        "tokens_per_s" (the median logged), "returncode"}.
    """
    folder = out / name
    cmd = [sys.executable, str(ROOT / "train.py"), "--config", str(config), *overrides]
    cmd += [f"out_dir={folder}", "train.overwrite=true"]
    print("$ " + shlex.join(cmd[1:]), flush=True)
    started = time.perf_counter()
    finished = subprocess.run(cmd, cwd=ROOT)
    seconds = time.perf_counter() - started
    row = {"name": name, "overrides": overrides, "command_s": seconds}
    row["returncode"] = finished.returncode
    if finished.returncode != 0:
        return row
    curves = read_scalar_curves(folder)
    rates = sorted(curves[TRAIN_TOKENS_PER_SEC].values) if TRAIN_TOKENS_PER_SEC in curves else []
    row.update(
        max_iters=load_config(config, overrides).train.max_iters,
        whole_val_loss=last(curves, VAL_FULL_LOSS),
        best_val_loss=last(curves, VAL_BEST_LOSS),
        wall_s=last(curves, TIME_WALL),
        steps_s=last(curves, TIME_PART.format(part="steps")),
        tokens_per_s=float(rates[len(rates) // 2]) if rates else None,
    )
    return row


def table(rows: list[dict]) -> list[str]:
    """The Markdown table of the candidates, best whole-split loss first."""
    columns = [
        "candidate",
        "overrides",
        "steps",
        "whole val (nats/char)",
        "best periodic val",
        "command s",
        "run wall s",
        "steps s",
        "tokens/s",
    ]
    lines = ["| " + " | ".join(columns) + " |", "|---" * len(columns) + "|"]

    def figure(value, spec):
        return "" if value is None else format(value, spec)

    done = sorted(
        (r for r in rows if r.get("whole_val_loss") is not None),
        key=lambda r: r["whole_val_loss"],
    )
    for r in done + [r for r in rows if r.get("whole_val_loss") is None]:
        lines.append(
            f"| {r['name']} | {' '.join(r['overrides']) or '(as given)'} | "
            f"{figure(r.get('max_iters'), ',')} | {figure(r.get('whole_val_loss'), '.4f')} | "
            f"{figure(r.get('best_val_loss'), '.4f')} | {r['command_s']:.0f} | "
            f"{figure(r.get('wall_s'), '.1f')} | {figure(r.get('steps_s'), '.1f')} | "
            f"{figure(r.get('tokens_per_s'), ',.0f')} |"
            + ("" if r["returncode"] == 0 else f" failed (exit status {r['returncode']})")
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, fit and train every candidate, print the table; the exit status
    is 2 for bad arguments, 1 if a candidate failed."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", default=str(BASE), help="the base config of every candidate")
    parser.add_argument(
        "--candidate", action="append", default=[], help="'NAME: section.key=value ...'"
    )
    parser.add_argument(
        "--candidates", action="append", default=[], help="a file of candidates, one a line"
    )
    parser.add_argument(
        "--budget",
        help="seconds of the whole command each candidate without train.max_iters is "
        "fitted to, or 'first': the first candidate's wall time",
    )
    parser.add_argument(
        "--overhead",
        type=float,
        default=OVERHEAD_S,
        help="seconds a run spends outside its steps (default %(default)s)",
    )
    parser.add_argument(
        "--out", default="runs/recipe_search", help="where the runs and results.jsonl go"
    )
    args = parser.parse_args(argv)
    config = Path(args.config)
    try:
        candidates = read_candidates(args.candidate, args.candidates)
        if not candidates:
            raise ValueError("no candidates: give --candidate or --candidates")
        budget = None
        if args.budget not in (None, "first"):
            try:
                budget = float(args.budget)
            except ValueError:
                raise ValueError(
                    f"--budget must be seconds or 'first', got {args.budget!r}"
                ) from None
        for name, overrides in candidates:  # every config is checked before any work
            try:
                load_config(config, overrides)
            except ConfigError as e:
                raise ValueError(f"candidate {name}: {e}") from None
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    ensure_default_corpus(ROOT / DEFAULT_CORPUS_PATH)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for index, (name, overrides) in enumerate(candidates):
        base_cfg = load_config(config, overrides)
        given = {o.split("=", 1)[0] for o in overrides}
        fit = budget is not None and "train.max_iters" not in given
        if args.budget == "first" and index > 0:
            fit = "train.max_iters" not in given
        if fit:
            ms = probe_ms_per_step(config, overrides)
            try:
                extra = fitted_overrides(base_cfg, overrides, ms, budget, args.overhead)
            except ValueError as e:
                print(f"candidate {name}: {e}; skipped", file=sys.stderr)
                continue
            print(f"{name}: {ms:.1f} ms/step -> {' '.join(extra)}", flush=True)
            overrides = overrides + extra
        row = train_candidate(name, config, overrides, out)
        rows.append(row)
        with open(out / "results.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
        if args.budget == "first" and index == 0:
            if row["returncode"] != 0:
                print(f"error: {name} failed: no budget to fit the others to", file=sys.stderr)
                return 1
            budget = row["command_s"]
            print(f"budget: {budget:.0f} s, the wall time of {name}", flush=True)
    print("\n".join(table(rows)))
    return 0 if all(r["returncode"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
