"""One-command GPU check: the test suite on CUDA, NCCL under torchrun, the two GPU
recipes and the two benchmarks, summed up in one table.

    python bench/gpu_check.py                         # on a GPU machine, about 7 minutes
    python bench/gpu_check.py --device cpu --quick    # the same steps, tiny, on CPU
    python bench/gpu_check.py --steps recipe,modern --modern-seconds 300   # a subset

Steps, each in its own process under its own time limit:

  1 tests         python -m pytest with MINIGPT_TEST_DEVICE=cuda (see tests/conftest.py) on
                  the test files that use that device, in 4 processes on a machine with 8
                  CPUs or more (pytest-xdist where installed, else bench/parallel_tests.py)
  2 nccl          torchrun --standalone --nproc_per_node=1 train.py: a small model trained
                  in a process group of one with the nccl backend (DDP's gradients and the
                  loop's all-reduces go through NCCL)
  3 recipe        configs/shakespeare_char.yaml as shipped: when validation first reaches
                  --target-val (1.47) and the best validation loss
  4 modern        configs/shakespeare_char_modern.yaml, stopped with SIGTERM (train.py
                  saves and exits) --modern-seconds after training starts; compared with
                  the recipe of step 3 at the same step
  5 train_speed   bench/train_speed.py on both recipes: ms/step, tokens/s, MFU
  6 sample_speed  bench/sample_speed.py: characters/s with the KV cache (the step compiled)

Times of steps 3 and 4 are on the run's clock (see TIMES below); each step's "seconds"
is its whole command's wall-clock time.

Fail-soft: a step that fails or reaches its time limit is recorded with the end of its
output, and the next step runs. The whole check keeps within --budget seconds: a step's
limit is cut so that the steps after it keep their minimum. After every step the table
is written to gpu_check.md, and all output to gpu_check.log, in $OUT when that variable
is set (the recipes' TensorBoard event files are copied there too), else in
runs/gpu_check/. Runs and caches go to runs/gpu_check/ and replace the last check's.

The corpus is read from data/tinyshakespeare/input.txt (or --corpus), which ships with
the code, its sha256 checked as training checks it (downloaded if the copy is missing);
one that cannot be had is reported before any step runs.
"""

import argparse
import hashlib
import os
import platform
import re
import shutil
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from parallel_tests import pytest_counts  # noqa: E402  (bench/, beside this file)
from timed_process import Finished, run_timed  # noqa: E402

from data.corpus import (  # noqa: E402
    DEFAULT_CORPUS_PATH,
    TINY_SHAKESPEARE_SHA256,
    ensure_default_corpus,
)
from data.errors import CorpusError  # noqa: E402
from training.config import ConfigError, load_config  # noqa: E402
from viz.run_events import (  # noqa: E402
    TRAIN_LOSS,
    TRAIN_TOKENS_PER_SEC,
    VAL_LOSS,
    read_scalar_curves,  # noqa: E402
)

RECIPE = "configs/shakespeare_char.yaml"
MODERN = "configs/shakespeare_char_modern.yaml"
TRAINING_STARTED = "training on "  # train.py's line just before the first step
TIMES = (
    "Times in the key figures of steps 3 and 4 count from the run's first TensorBoard "
    "event, written just before its first step: torch.compile and the evaluations (with "
    "their TensorBoard sample and heatmaps) are inside them, process start and corpus "
    "loading are not. The seconds column is each step's whole command."
)

# Overrides that make any recipe tiny, for --quick (CPU, about a minute in all) and
# step 2: evaluations are cheap (1% of the corpus validates, a short sample, no attention
# heatmaps), so that a tiny run can evaluate after every step.
TINY = [
    "data.val_fraction=0.01",
    "model.n_layer=2",
    "model.n_head=2",
    "model.n_embd=32",
    "model.block_size=32",
    "model.dropout=0.0",
    "train.batch_size=8",
    "train.warmup_iters=2",
    "train.eval_train_tokens=2048",
    "train.eval_batch_size=512",
    "train.compile=false",
    "train.sample_tokens=8",
    "train.attention_prompt=''",
]
QUICK_NOTE = (
    "--quick checks that every step runs, with tiny models (the recipes at 2 layers 32 "
    "wide, the sampling benchmark on its smallest shape, 4 layers 128 wide) for a few "
    "steps: their losses say nothing about the recipes, and the targets are not "
    "expected to be reached. A step passes when its command does what the step needs."
)
# --quick runs these tests only (the attention paths and KV-cache parity): the switch and
# the report are what it checks; steps 2 to 4 train.
QUICK_TESTS = [
    "tests/model/test_attention.py::test_fast_path_equals_explicit_path",
    "tests/model/test_engine_generation.py::test_cached_logits_equal_full_forward_at_every_step",
]


@dataclass
class StepResult:
    """One row of the table.

    Attributes:
        title: what the step ran.
        status: passed, failed, timed out, or not run.
        figures: the key figures, or why it failed.
        seconds: wall-clock seconds of the step's command (None if not run).
        tail: the end of its output, shown under the table when it did not pass.
    """

    title: str
    status: str
    figures: str
    seconds: float | None = None
    tail: str = ""


@dataclass
class Check:
    """What every step needs: the options, where to write, what earlier steps found."""

    args: argparse.Namespace
    runs_dir: Path
    report_dir: Path
    log: TextIO  # the open gpu_check.log
    recipe_val: dict = field(default_factory=dict)  # training step -> val loss, check step 3

    @property
    def device(self) -> str:
        return self.args.device

    @property
    def quick(self) -> bool:
        return self.args.quick

    def env(self, **extra) -> dict:
        """The children's environment: unbuffered output, so lines arrive as printed."""
        return {**os.environ, "PYTHONUNBUFFERED": "1", **extra}

    def run(self, title: str, cmd: list[str], limit_s: float, **kwargs) -> Finished:
        """Run one step's command, with a header for it in the log."""
        self.log.write(f"\n===== {title}: {' '.join(cmd)} (limit {limit_s:.0f} s)\n")
        self.log.flush()
        return run_timed(cmd, limit_s=limit_s, log=self.log, cwd=ROOT, **kwargs)


def failed(title: str, finished: Finished, why: str) -> StepResult:
    """A row for a command that did not do what the step needs."""
    status = "timed out" if finished.timed_out else "failed"
    if finished.timed_out:
        why = f"{why}; reached its time limit"
    return StepResult(title, status, why, finished.seconds, finished.tail())


# --- 1. the test suite ----------------------------------------------------------------


# The names by which a test file uses the checked device (see tests/conftest.py).
DEVICE_NAMES = ("TEST_DEVICE", "ON_CUDA", "tiny_overrides")


def device_test_files() -> list[str]:
    """The test files that use the checked device (they name one of DEVICE_NAMES),
    largest first (roughly the longest first, for the parallel runner), without this
    script's own test (its CPU mode is not what a GPU checks). The rest run on CPU
    whatever the device: the CPU suite covers them."""
    files = [
        path
        for path in sorted((ROOT / "tests").rglob("test_*.py"))  # tests/<package>/...
        if path.name != "test_gpu_check.py"
        and any(name in path.read_text(encoding="utf-8") for name in DEVICE_NAMES)
    ]
    files.sort(key=lambda path: -path.stat().st_size)
    return [str(path.relative_to(ROOT)) for path in files]


def has_xdist() -> bool:
    """Whether pytest-xdist is installed (requirements.txt pins it: pyproject.toml's
    addopts run the suite with ``-n auto``)."""
    try:
        import xdist  # noqa: F401
    except ImportError:
        return False
    return True


def suite_workers(check: Check) -> int:
    """Test processes for step 1: 1 with --quick (its two tests in one process: each
    process costs a torch import; bench/parallel_tests.py has its own tests), 4 on a
    machine with 8 or more CPUs (each with its share of the CPU threads; the GPU is
    shared), else 1."""
    if check.quick:
        return 1
    return 4 if (os.cpu_count() or 1) >= 8 else 1


def step_tests(check: Check, limit_s: float) -> StepResult:
    """pytest with the device-dependent tests on the checked device, in parallel."""
    title = f"1. tests, MINIGPT_TEST_DEVICE={check.device}"
    items = QUICK_TESTS if check.quick else device_test_files()
    pytest_args = ["-p", "no:cacheprovider", "--tb=short"]
    env = check.env(MINIGPT_TEST_DEVICE=check.device)
    workers = suite_workers(check)
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // workers)))
    if check.quick:  # two tests: one process, no parallel runner
        no_workers = ["-n", "0"] if has_xdist() else []
        cmd = [sys.executable, "-m", "pytest", "-v", *pytest_args, *no_workers, *items]
        title += ", 1 pytest process"
    elif workers > 1 and has_xdist():
        cmd = [sys.executable, "-m", "pytest", "-v", *pytest_args, "-n", str(workers), *items]
        title += f", {workers} pytest-xdist workers"
    else:  # one pytest process per file, `workers` at a time, stopped within the limit
        budget = max(1.0, limit_s - 25)  # ends before run_timed's SIGTERM (15 s before)
        cmd = [sys.executable, "bench/parallel_tests.py", "--workers", str(workers)]
        # -n 0: one test at a time in each process, whatever pyproject's addopts say.
        no_workers = ["-n", "0"] if has_xdist() else []
        cmd += ["--budget", f"{budget:.0f}", *items, "--", *pytest_args, *no_workers]
        title += f", {workers} pytest processes at a time"
    finished = check.run(title, cmd, limit_s, env=env)
    counts = pytest_counts(finished.stdout)
    figures = ", ".join(f"{n} {word}" for word, n in counts.items()) or "no summary"
    names = re.findall(r"^(?:FAILED|ERROR) (\S+)", finished.stdout, re.MULTILINE)
    if names:
        figures += ": " + ", ".join(n.split("::")[-1] for n in names[:6])
    if f"test device: {check.device}" not in finished.stdout:
        return failed(title, finished, f"the tests did not run on {check.device} ({figures})")
    unfinished = re.findall(
        r"^(stopped before their end|not started): (.*)$", finished.stdout, re.M
    )
    for what, which in unfinished:  # the parallel runner's budget was spent
        figures += f"; {what}: {which}"
    if unfinished:
        return StepResult(title, "timed out", figures, finished.seconds, finished.tail())
    if finished.returncode != 0 or not counts.get("passed"):
        return failed(title, finished, figures)
    return StepResult(title, "passed", figures, finished.seconds)


# --- 2. NCCL under torchrun -------------------------------------------------------------


def step_nccl(check: Check, limit_s: float) -> StepResult:
    """A small run in a torchrun job of one process: nccl on CUDA, gloo on CPU."""
    backend = "nccl" if check.device == "cuda" else "gloo"
    title = f"2. torchrun --nproc_per_node=1, {backend}"
    out_dir = check.runs_dir / "nccl"
    shutil.rmtree(out_dir, ignore_errors=True)  # no figures from an earlier check
    steps = 6 if check.quick else 60
    overrides = TINY + [
        f"device={check.device}",
        f"data.path={check.args.corpus}",
        f"data.cache_dir={check.runs_dir / 'cache'}",
        f"out_dir={out_dir}",
        "train.overwrite=true",
        f"train.max_iters={steps}",
        f"train.eval_interval={steps // 2}",
        f"train.log_interval={steps // 6}",
    ]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1"]
    # NCCL_DEBUG=INFO makes NCCL log its version and each communicator it sets up.
    env = check.env(NCCL_DEBUG="INFO") if backend == "nccl" else check.env()
    finished = check.run(title, cmd + ["train.py", *overrides], limit_s, env=env)
    if finished.returncode != 0:
        return failed(title, finished, f"torchrun exit status {finished.returncode}")
    group = f" x 1 process ({backend} process group)"
    if group not in finished.stdout:
        return failed(title, finished, f"train.py did not report{group}")
    try:
        val = read_scalar_curves(out_dir, [VAL_LOSS])[VAL_LOSS]
    except (FileNotFoundError, KeyError):
        return failed(title, finished, "no validation loss in the run's events")
    figures = f"process group of 1 ({backend}), {steps} steps, val {val.values[-1]:.3f}"
    if backend == "nccl":  # NCCL's own log lines (NCCL_DEBUG=INFO), where it printed them
        log = finished.stdout + "\n" + finished.stderr_tail
        version = re.search(r"NCCL version ([\w.+-]+)", log)
        figures += f"; NCCL {version.group(1)}" if version else ""
        figures += "; NCCL logged Init COMPLETE" if "Init COMPLETE" in log else ""
    return StepResult(title, "passed", figures, finished.seconds)


# --- 3 and 4. the recipes -----------------------------------------------------------------


def recipe_overrides(check: Check, out_dir: Path, quick_steps: int, quick_eval: int) -> list[str]:
    """The recipe as shipped on the checked device, plus --recipe-set; with --quick,
    tiny, for quick_steps steps evaluated every quick_eval."""
    overrides = [
        f"device={check.device}",
        f"data.path={check.args.corpus}",
        f"data.cache_dir={check.runs_dir / 'cache'}",
        f"out_dir={out_dir}",
        "train.overwrite=true",
    ]
    if check.quick:
        overrides += TINY + [f"train.{k}={quick_steps}" for k in ("max_iters", "lr_decay_iters")]
        overrides += [f"train.eval_interval={quick_eval}", f"train.log_interval={quick_eval}"]
    return overrides + check.args.recipe_set


@dataclass
class RunFigures:
    """What a recipe run's event files say.

    Attributes:
        val_steps, val_seconds, val_losses: each evaluation's step, seconds on the
            run's clock and validation loss (nats/char).
        last_step: the last logged training step.
        first_log_seconds: when the first training loss was logged (mostly compile).
        ms_per_step: median over the logged intervals, from train/tokens_per_sec.
    """

    val_steps: np.ndarray
    val_seconds: np.ndarray
    val_losses: np.ndarray
    last_step: int
    first_log_seconds: float
    ms_per_step: float

    def first_reaching(self, target: float) -> tuple[int, float] | None:
        """(step, seconds) of the first evaluation with val loss <= target, or None."""
        hits = np.flatnonzero(self.val_losses <= target)
        return (
            (int(self.val_steps[hits[0]]), float(self.val_seconds[hits[0]])) if len(hits) else None
        )

    def best(self) -> tuple[float, int]:
        """(lowest val loss, its step)."""
        i = int(np.argmin(self.val_losses))
        return float(self.val_losses[i]), int(self.val_steps[i])


def read_run(out_dir: Path, tokens_per_step: int) -> RunFigures | None:
    """The figures of a run folder's events, or None without an evaluation."""
    try:
        curves = read_scalar_curves(out_dir, [VAL_LOSS, TRAIN_LOSS, TRAIN_TOKENS_PER_SEC])
    except FileNotFoundError:
        return None
    if VAL_LOSS not in curves or TRAIN_LOSS not in curves:
        return None
    val, loss = curves[VAL_LOSS], curves[TRAIN_LOSS]
    rates = curves.get(TRAIN_TOKENS_PER_SEC)
    ms = float("nan")
    if rates is not None:
        ms = 1000 * tokens_per_step / float(np.median(rates.values))
    return RunFigures(
        val.steps, val.seconds, val.values, int(loss.steps[-1]), float(loss.seconds[0]), ms
    )


def copy_events(check: Check, out_dir: Path, name: str) -> None:
    """Copy a run's event file to <report dir>/<name>/ when the report goes elsewhere
    than the runs ($OUT), for plots later."""
    if check.report_dir.resolve() == check.runs_dir.resolve():
        return
    events = sorted(out_dir.glob("events.out.tfevents.*"))
    if events and events[-1].stat().st_size < 16 * 2**20:  # what comes back from $OUT
        target = check.report_dir / name
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(events[-1], target / "events.out.tfevents.gpu_check")


def run_recipe(
    check: Check, title: str, config: str, name: str, limit_s: float, quick: tuple, **kwargs
):
    """Run train.py on a recipe (quick: (steps, eval_interval) for --quick).

    Returns:
        (Finished, RunFigures or None, max_iters or None when the config is invalid).
    """
    out_dir = check.runs_dir / name
    shutil.rmtree(out_dir, ignore_errors=True)  # no figures from an earlier check
    overrides = recipe_overrides(check, out_dir, *quick)
    cmd = [sys.executable, "train.py", "--config", config, *overrides]
    finished = check.run(title, cmd, limit_s, env=check.env(), **kwargs)
    try:
        cfg = load_config(ROOT / config, overrides)
    except ConfigError:  # train.py said why: its output ends the report
        return finished, None, None
    t, m = cfg.train, cfg.model
    figures = read_run(out_dir, t.batch_size * t.gradient_accumulation_steps * m.block_size)
    copy_events(check, out_dir, f"events_{name}")
    return finished, figures, t.max_iters


def describe_run(figures: RunFigures, target: float) -> str:
    """Key figures shared by steps 3 and 4."""
    best, best_step = figures.best()
    hit = figures.first_reaching(target)
    reached = f"at step {hit[0]}, {hit[1]:.0f} s" if hit else "not reached"
    # The run's clock at its last evaluation, less its steps at the median step time:
    # what compiling and evaluating (sample and heatmaps included) took up to there.
    last_step, last_seconds = int(figures.val_steps[-1]), float(figures.val_seconds[-1])
    outside = last_seconds - last_step * figures.ms_per_step / 1000
    return (
        f"val <= {target} {reached}; best val {best:.4f} at step {best_step}; "
        f"{figures.ms_per_step:.1f} ms/step; first log (compile) at "
        f"{figures.first_log_seconds:.0f} s; by step {last_step} ({last_seconds:.0f} s) "
        f"about {outside:.0f} s outside training steps"
    )


def time_split(output: str) -> str:
    """ "; <train.py's end-of-run line>": where the run's wall time went (setup,
    compile, steps, data, eval, samples+heatmaps, checkpoints, other; see
    training/report.py), or "" if it printed none."""
    lines = re.findall(r"^wall \d+\.\d s: .*$", output, re.MULTILINE)
    return f"; {lines[-1]}" if lines else ""


def step_recipe(check: Check, limit_s: float) -> StepResult:
    """The GPU recipe as shipped: time to --target-val and the best val."""
    title = f"3. {RECIPE}"
    finished, figures, max_iters = run_recipe(check, title, RECIPE, "recipe", limit_s, (10, 1))
    if figures is None:
        return failed(title, finished, "no evaluation was logged")
    steps, losses = figures.val_steps.tolist(), figures.val_losses.tolist()
    check.recipe_val = dict(zip(steps, losses, strict=True))
    text = f"{describe_run(figures, check.args.target_val)}; {figures.last_step}/{max_iters} steps"
    text += time_split(finished.stdout)
    if finished.returncode != 0 or figures.last_step < max_iters:
        return failed(title, finished, text)
    return StepResult(title, "passed", text, finished.seconds)


def step_modern(check: Check, limit_s: float) -> StepResult:
    """The modern recipe for a fixed time after training starts, stopped by SIGTERM."""
    seconds = check.args.modern_seconds or (4 if check.quick else MODERN_SECONDS)
    title = f"4. {MODERN}, SIGTERM {seconds:.0f} s after the start"
    # --quick: more steps than 4 s allow, so that it is the signal that stops the run,
    # and an evaluation after every step, so that one comes before it on a busy machine.
    finished, figures, _ = run_recipe(
        check, title, MODERN, "modern", limit_s, (10**6, 1), stop_after=(TRAINING_STARTED, seconds)
    )
    if figures is None:
        return failed(title, finished, "no evaluation was logged")
    stopped_at = re.search(r"interrupted at step (\d+)", finished.stdout)
    steps = stopped_at.group(1) if stopped_at else figures.last_step
    text = f"{steps} steps; {describe_run(figures, check.args.modern_target)}"
    common = [s for s in figures.val_steps.tolist() if s in check.recipe_val]
    if common:  # the same step of the same schedule: what the modern block buys per step
        at = common[-1]
        here = figures.val_losses[figures.val_steps.tolist().index(at)]
        reference = check.recipe_val[at]  # the reference recipe's run, check step 3
        text += f"; at training step {at}: val {here:.4f}, reference recipe {reference:.4f}"
    text += time_split(finished.stdout)
    stopped = finished.stopped_at_marker and "checkpoint saved" in finished.stdout
    if not (stopped or finished.returncode == 0):
        return failed(title, finished, text)
    return StepResult(title, "passed", text, finished.seconds)


# --- 5 and 6. the benchmarks ---------------------------------------------------------------


def markdown_rows(output: str) -> list[dict[str, str]]:
    """The rows of the Markdown table a benchmark printed, keyed by column name."""
    lines = [line for line in output.splitlines() if line.startswith("|")]
    if len(lines) < 3:
        return []

    def cells(line: str) -> list[str]:
        return [c.strip() for c in line.strip().strip("|").split("|")]

    header = cells(lines[0])
    return [dict(zip(header, cells(line), strict=False)) for line in lines[2:]]


def run_benchmark(check: Check, title: str, cmd: list[str], limit_s: float, describe) -> StepResult:
    """Run a benchmark script that prints a Markdown table; describe(row) -> its figures."""
    finished = check.run(title, cmd, limit_s, env=check.env())
    rows = markdown_rows(finished.stdout)
    if finished.returncode != 0 or not rows:
        return failed(title, finished, f"exit status {finished.returncode}")
    return StepResult(title, "passed", "; ".join(describe(r) for r in rows), finished.seconds)


def train_speed_figures(row: dict[str, str]) -> str:
    """One case of bench/train_speed.py's table, in a line."""
    return (
        f"{row['case']}: {row['ms/iter']} ms/step, {row['tokens/s']} tokens/s, MFU {row['MFU']} "
        f"of {row['peak GFLOP/s']} GFLOP/s {row['peak dtype']}, {row['peak MB']} MB"
    )


def sample_speed_figures(row: dict[str, str]) -> str:
    """One row of bench/sample_speed.py's table, in a line."""
    parts = [part.strip() for part in row["model"].split(",")]  # layers, heads, width, ...
    return (
        f"{parts[0]}, {parts[2]}, {parts[-1]}, batch {row['batch']}: "
        f"{row['chars/s']} chars/s with the KV cache (model/engine.py)"
    )


def step_train_speed(check: Check, limit_s: float) -> StepResult:
    """bench/train_speed.py on the recipes (one, tiny, with --quick)."""
    title = "5. bench/train_speed.py"
    # It reads the corpus at data/tinyshakespeare/input.txt, as step 3 does by default.
    cmd = [sys.executable, "bench/train_speed.py", "--device", check.device]
    if check.quick:
        cmd += ["--config", RECIPE, "--iters", "2", "--warmup", "1"]
        cmd += [a for o in TINY for a in ("--set", o)]
    else:
        cmd += ["--config", RECIPE, "--config", MODERN, "--iters", "50"]
    return run_benchmark(check, title, cmd, limit_s, train_speed_figures)


def step_sample_speed(check: Check, limit_s: float) -> StepResult:
    """bench/sample_speed.py on the CPU and GPU recipes' shapes."""
    title = "6. bench/sample_speed.py"
    cmd = [sys.executable, "bench/sample_speed.py", "--device", check.device]
    if check.quick:
        cmd += ["--models", "cpu", "--batch-sizes", "1", "--new-tokens", "8"]
    else:
        cmd += ["--models", "cpu,6x384,6x384-rope", "--batch-sizes", "1,8", "--new-tokens", "500"]
    return run_benchmark(check, title, cmd, limit_s, sample_speed_figures)


# name -> (function, most seconds, least seconds worth starting it with)
STEPS = {
    "tests": (step_tests, 150, 30),
    "nccl": (step_nccl, 60, 20),
    "recipe": (step_recipe, 250, 60),
    "modern": (step_modern, 120, 40),
    "train_speed": (step_train_speed, 75, 25),
    "sample_speed": (step_sample_speed, 45, 15),
}

MODERN_SECONDS = 75  # step 4's default training time


def most_seconds(name: str, args: argparse.Namespace) -> float:
    """The most seconds a step may take: STEPS' figure, and for step 4 with
    --modern-seconds, that training time plus what the default leaves for start-up,
    compiling and the final save."""
    most = STEPS[name][1]
    if name == "modern" and args.modern_seconds:
        most = max(most, args.modern_seconds + most - MODERN_SECONDS)
    return most


# --- the report --------------------------------------------------------------------------


def environment_lines(check: Check) -> list[str]:
    """Where and on what the check ran."""
    lines = [f"when: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC"]
    if check.device == "cuda":
        props = torch.cuda.get_device_properties(0)
        try:  # a tuple in recent releases; its form has changed before
            nccl = ".".join(str(v) for v in torch.cuda.nccl.version())
        except Exception as e:  # the report must not fail on a version string
            nccl = f"unknown ({e!r})"
        lines.append(
            f"device: {props.name} ({props.total_memory / 2**30:.0f} GiB); torch "
            f"{torch.__version__}, CUDA {torch.version.cuda}, NCCL {nccl}"
        )
    else:
        lines.append(
            f"device: cpu ({platform.processor() or platform.machine()}); torch {torch.__version__}"
        )
    lines.append(f"python {platform.python_version()}, {os.cpu_count()} CPUs")
    digest = hashlib.sha256(Path(check.args.corpus).read_bytes()).hexdigest()
    same = "Tiny Shakespeare" if digest == TINY_SHAKESPEARE_SHA256 else "NOT Tiny Shakespeare"
    lines.append(f"corpus: {check.args.corpus} (sha256 {digest[:12]}: {same})")
    lines.append("command: " + " ".join([Path(sys.executable).name, *sys.argv]))
    return lines


def table(check: Check, environment: list[str], results: list[StepResult]) -> str:
    """The Markdown report: environment, one row per step, tails of failed steps."""
    mode = " (--quick)" if check.quick else ""
    out = [f"# GPU check on {check.device}{mode}", ""] + [f"- {line}" for line in environment]
    out += ["", "| step | status | key figures | seconds |", "|---|---|---|---|"]
    for r in results:
        seconds = "" if r.seconds is None else f"{r.seconds:.0f}"
        out.append(f"| {r.title} | {r.status} | {r.figures.replace('|', '/')} | {seconds} |")
    out += ["", TIMES, ""]
    if check.quick:
        out += [QUICK_NOTE, ""]
    for r in results:
        if r.tail:
            out += [f"## {r.title}: {r.status}, end of its output", "", "```", r.tail, "```", ""]
    return "\n".join(out)


def write_report(check: Check, environment: list[str], results: list[StepResult]) -> str:
    """Write gpu_check.md (replacing the last version); returns its text."""
    report = table(check, environment, results)
    (check.report_dir / "gpu_check.md").write_text(report + "\n", encoding="utf-8")
    return report


def stop_on_sigterm(signum, frame) -> None:
    """SIGTERM (a limit on the whole check) ends it like Ctrl-C: the running step's
    processes are killed and the report written so far stays."""
    raise SystemExit(128 + signum)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--quick", action="store_true", help="tiny models and few steps")
    p.add_argument("--steps", default=",".join(STEPS), help=f"comma list of {list(STEPS)}")
    p.add_argument("--budget", type=float, default=450, help="seconds for all steps together")
    p.add_argument("--corpus", type=Path, default=ROOT / DEFAULT_CORPUS_PATH)
    p.add_argument("--target-val", type=float, default=1.47, help="step 3's target (nats/char)")
    p.add_argument("--modern-target", type=float, default=1.44, help="step 4's target")
    p.add_argument("--modern-seconds", type=float, help="step 4's training time (75; --quick 4)")
    p.add_argument("--recipe-set", action="append", default=[], metavar="KEY=VALUE",
                   help="an override for steps 3 and 4, e.g. train.sample_tokens=0")  # fmt: skip
    p.add_argument("--runs-dir", type=Path, default=ROOT / "runs" / "gpu_check")
    p.add_argument("--report-dir", type=Path, help="default: $OUT, else --runs-dir")
    args = p.parse_args(argv)
    # The steps run from the repository root: their paths must not depend on the caller's.
    args.corpus, args.runs_dir = args.corpus.resolve(), args.runs_dir.resolve()
    unknown = set(args.steps.split(",")) - set(STEPS)
    if unknown:
        p.error(f"--steps: unknown {sorted(unknown)}; choose from {', '.join(STEPS)}")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: CUDA is not available here; on CPU use --device cpu --quick")
    if args.corpus == (ROOT / DEFAULT_CORPUS_PATH).resolve():
        try:  # the check training makes: the shipped copy's sha256 (downloaded if missing)
            ensure_default_corpus(args.corpus)
        except CorpusError as e:
            p.error(f"{e} (a working tree copied to a GPU machine must take the corpus along)")
    if not args.corpus.is_file():
        p.error(f"no corpus at {args.corpus}: give --corpus PATH to a copy of Tiny Shakespeare")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the chosen steps within the budget; 0 if every step passed, else 1."""
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    report_dir = (args.report_dir or Path(os.environ.get("OUT") or args.runs_dir)).resolve()
    report_dir.mkdir(parents=True, exist_ok=True)
    args.runs_dir.mkdir(parents=True, exist_ok=True)
    chosen = [name for name in STEPS if name in args.steps.split(",")]
    deadline = time.monotonic() + args.budget
    results: list[StepResult] = []
    with open(report_dir / "gpu_check.log", "w", encoding="utf-8") as log:
        check = Check(args, args.runs_dir, report_dir, log)
        environment = environment_lines(check)
        print("\n".join(environment), flush=True)
        for i, name in enumerate(chosen):
            function, _, least = STEPS[name]
            most = most_seconds(name, args)
            reserve = sum(STEPS[later][2] for later in chosen[i + 1 :])
            limit = min(most, deadline - time.monotonic() - reserve)
            number = f"{list(STEPS).index(name) + 1}. {name}"
            if limit < least:
                why = f"{limit + reserve:.0f} s of --budget left, {least} s needed"
                result = StepResult(number, "not run", why)
            else:
                print(f"{number}: up to {limit:.0f} s ...", flush=True)
                # Written first, so that a check killed from outside still says where.
                running = StepResult(number, "running", f"started, limit {limit:.0f} s")
                write_report(check, environment, results + [running])
                try:
                    result = function(check, limit)
                except Exception as e:  # a bug here must not cost the later steps
                    why = f"the check itself: {e!r}"
                    result = StepResult(number, "failed", why, tail=traceback.format_exc())
            results.append(result)
            print(f"  {result.status}: {result.figures}", flush=True)
            report = write_report(check, environment, results)
    print("\n" + report, flush=True)
    print(f"written to {report_dir / 'gpu_check.md'}", flush=True)
    return 0 if all(r.status == "passed" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
