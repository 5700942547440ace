"""What a run reports as it trains: the lines it prints, where its wall time goes, its
throughput, and `Reporter`, the one object the training loop hands its bookkeeping to
(the stop request, the first step's clock, the NaN check, the logged loss averaged
over ranks, the console and the TensorBoard writer). `TrainResult` is what a run
returns.

The console. On a terminal the progress is a tqdm bar with the latest loss, and lines
print above it. When the output goes to a file (``python train.py ... > log 2>&1``,
nohup, a job scheduler), a bar's carriage-return updates would make a few huge
unreadable lines, so there is no bar: a plain progress line is printed at a log
interval, at most every ``plain_every`` seconds, and every line ends with a newline.

The run clock. At any moment the `RunClock` charges the time to one part; the
reporter and the trainer move it from part to part (``with clock.part("eval"):
...``). The parts are consecutive stretches of one clock, so they add up to the wall
time exactly:

    setup        building the run: corpus, model, optimizer, run folder, event writer
    compile      torch.compile: the first training step's time beyond an average
                 step's, and the first evaluation of the compiled model's beyond the
                 median of its later ones (estimates: compiling happens inside calls)
    steps        training steps (forward, backward, optimizer step, logging)
    data         drawing batches on the host (host time only, see below)
    eval         periodic evaluations and the final whole-split score
    views        the TensorBoard sample and attention heatmaps
    checkpoints  writing ckpt.pt and best.pt
    other        the rest: after the last step and before the split is made

On CUDA the device runs behind the host, so a boundary between two parts waits for it
(``torch.cuda.synchronize``) and the device's work lands in the part that queued it.
Boundaries come at the first step, evaluations, views and checkpoints only, never
once per step. ``data`` does not wait: it is the host's time in the batch sampler;
while the device still has queued work that time overlaps with it, so on CUDA it is
an upper bound on how long the device waited for batches. On CPU every part is what
it says. The clock is injectable (``clock=``), so that tests can drive it with fake
time.
"""

import contextlib
import math
import shlex
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm import tqdm

from model.checkpoint import CKPT_NAME
from model.scoring import nats_to_bits
from training.config import RunConfig
from training.distributed import DistContext, NonFiniteWatch, StopRequest, all_reduce
from training.precision import SkippedSteps
from training.run_folder import training_command
from training.run_writer import RunWriter, TensorBoardViews

# In the order the split is printed and logged (TensorBoard: wall_time/<part>_seconds).
PARTS = ("setup", "compile", "steps", "data", "eval", "views", "checkpoints", "other")
LABELS = {"views": "samples+heatmaps"}  # how the end-of-run line names a part
FIRST_STEP = "first_step"  # the first training step's time, split by `split`


def plain_warnings() -> None:
    """Show Python warnings (a prompt replaced, a font missing) as one plain line,
    ``warning: ...``, instead of a source file path and the source line."""
    warnings.formatwarning = lambda message, category, *args, **kwargs: f"warning: {message}\n"


def steps(n: int) -> str:
    """``n`` optimizer steps in words: "1 step", "2,000 steps"."""
    return f"{n:,} step" + ("" if n == 1 else "s")


def _duration(seconds: float) -> str:
    """3725 -> '1h02m05s', 65 -> '1m05s', 7 -> '7s'."""
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class Console:
    """A run's output on one process (rank 0 prints; other ranks are silent).

    Args:
        enabled: False on ranks other than 0.
        interactive: draw a progress bar; default: whether stderr (where the bar
            goes) is a terminal.
        plain_every: without a bar, the least number of seconds between two
            progress lines.
    """

    def __init__(self, enabled: bool, interactive: bool | None = None, plain_every: float = 10.0):
        self.enabled = enabled
        self.interactive = sys.stderr.isatty() if interactive is None else interactive
        self.plain_every = plain_every
        self.bar = None
        self.total = 0
        self._quiet = False  # stdout was closed: say nothing more
        self._started = self._last_line = 0.0
        self._first_step = 0
        self._pace_from = None  # (time, step) the time left is counted from, once warm

    def say(self, message: str) -> None:
        """Print a line (above the bar, if there is one). If stdout is closed
        (``| head``), further lines are dropped and training carries on."""
        if not self.enabled or self._quiet:
            return
        try:
            if self.bar is not None:
                self.bar.write(message, file=sys.stdout)
            else:
                print(message, flush=True)
        except (BrokenPipeError, OSError):
            self._quiet = True

    def start(self, step: int, total: int) -> None:
        """Begin showing progress from ``step`` (steps already done) towards ``total``.
        Called after the run's first step, so that compiling and warming up do not
        enter the bar's estimate of the time left."""
        self.total = total
        self._started = self._last_line = time.perf_counter()
        self._first_step = step
        if self.enabled and self.interactive:
            # smoothing=0: the rate over the whole run, evaluations included, as below.
            self.bar = tqdm(total=total, initial=step, unit="step", dynamic_ncols=True, smoothing=0)

    def warmed(self, step: int) -> None:
        """The warm-up is over at ``step`` (the run's first log interval): the time left
        is counted from here. The steps just after compiling still run slower (kernels
        warming up, the optimizer's state being made); counted in, they made the first
        estimates of a CPU run several times too long, enough to make a newcomer stop
        it. The bar starts again from here for the same reason."""
        self._pace_from = (time.perf_counter(), step)
        if self.bar is not None:
            self.bar.leave = False  # replaced where it stood, not left above the new one
            self.bar.close()
            self.bar = tqdm(
                total=self.total, initial=step, unit="step", dynamic_ncols=True, smoothing=0
            )

    def step(self, step: int, fields: dict[str, str] | None = None) -> None:
        """Record that ``step`` steps are done; ``fields`` (loss, lr, tok/s as text)
        come at log intervals and are shown on the bar or in a plain line."""
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(step - self.bar.n)
            if fields:
                self.bar.set_postfix(fields, refresh=False)
            return
        now = time.perf_counter()
        first = self._last_line == self._started  # show the pace early, then now and then
        if fields is None or (not first and now - self._last_line < self.plain_every):
            return
        # Steps per second since the start, the evaluations' time included: they recur
        # as steps do, and a rate over the last interval alone would jump after each.
        since, first_step = self._pace_from or (self._started, self._first_step)
        rate = (step - first_step) / max(now - since, 1e-9)
        left = f"{_duration((self.total - step) / rate)} left" if rate > 0 else "estimating"
        shown = " | ".join(f"{key} {value}" for key, value in fields.items())
        self.say(
            f"step {step}/{self.total} ({100 * step / self.total:.0f}%) | {shown} | "
            f"{_duration(now - self._started)} elapsed, {left}"
        )
        self._last_line = now

    def evaluation(self, ev: dict, improved: bool) -> None:
        """The line of one evaluation (``ev`` as `training.evaluate.Evaluator.evaluate`
        returns it; losses in nats and bits per character)."""
        self.say(
            f"step {ev['iter']}: train {ev['train_loss']:.4f}, val {ev['val_loss']:.4f} "
            f"nats/char ({ev['val_bpc']:.4f} bits/char), {ev['seconds']:.0f} s"
            + (" *best*" if improved else "")
        )

    def whole_split(self, n_chars: int, loss: float, how: str) -> None:
        """The line of the final whole-split score (``loss`` in nats per character)."""
        self.say(
            f"whole validation split ({n_chars:,} characters): {loss:.4f} nats/char "
            f"({nats_to_bits(loss):.4f} bits/char; {how})"
        )

    def interrupted(self, step: int, checkpoint) -> None:
        """The lines of a run stopped by Ctrl-C or SIGTERM, its checkpoint written: the
        command that resumes it, to copy (`training.run_folder.training_command`: the
        run's config.yaml, which holds every setting it was given), and the one that
        diagnoses its curves so far."""
        command = training_command(Path(checkpoint).parent, "train.resume=true")
        self.say(f"interrupted at step {step}; checkpoint saved to {checkpoint}. Resume with:")
        self.say(f"  {command}")
        # The end-of-run verdicts judge a whole run; a stopped one asks for them.
        folder = shlex.quote(str(Path(checkpoint).parent))
        self.say(f"what its curves say so far: python evaluate.py --diagnose {folder}")

    def whole_split_stopped(self, out_dir) -> None:
        """The line of a final whole-split score cut short by Ctrl-C."""
        self.say(
            "whole-split evaluation stopped; the checkpoint is saved: "
            f"python evaluate.py --out-dir {shlex.quote(str(out_dir))} gives it"
        )

    def close(self) -> None:
        """Close the bar (if any)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class Throughput:
    """Tokens per second over the steps since the last measurement.

    Args:
        tokens_per_step: tokens one optimizer step trains on (all ranks together).
        step: the step counting starts from.
    """

    def __init__(self, tokens_per_step: int, step: int):
        self.tokens_per_step = tokens_per_step
        self.restart(step)

    def restart(self, step: int) -> None:
        """Count from ``step``, now (after an evaluation, so its time is left out)."""
        self._time, self._step = time.perf_counter(), step

    def measure(self, step: int) -> float:
        """Tokens per second from the last restart or measurement to ``step``; restarts."""
        now = time.perf_counter()
        rate = self.tokens_per_step * (step - self._step) / max(now - self._time, 1e-9)
        self._time, self._step = now, step
        return rate


@dataclass
class RunStart:
    """What a run says before its first step is made of (see `start_lines`).

    Attributes:
        cfg: the resolved RunConfig.
        dist: the DistContext.
        device: the torch device it trains on.
        num_params: parameters without position embeddings.
        tokens_per_iter: tokens per optimizer step over all ranks.
        start: the step training starts from (after a resume, the checkpoint's).
        notes: lines to say first; empty ones are skipped.
        changed: the settings a resume changed, one description each.
        precision: the dtype the run computes in, as
            `training.precision.Precision.describe` says it.
    """

    cfg: RunConfig
    dist: DistContext
    device: torch.device
    num_params: int
    tokens_per_iter: int
    start: int
    notes: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    precision: str = ""


def start_lines(run: RunStart) -> list[str]:
    """What a run says before its first step: ``run.notes`` (e.g. the schedule's), the
    settings ``run.changed`` on resume, the start line (device, processes, precision,
    parameters, batch, steps) and, with train.compile, that compiling comes first."""
    lines = [note for note in run.notes if note]
    if run.changed:
        lines.append("note: resuming with changed settings: " + "; ".join(run.changed))
    cfg, dist = run.cfg, run.dist
    tc, n = cfg.train, dist.world_size
    group = f" x {n} process{'es' if n > 1 else ''} ({dist.backend} process group)"
    precision = f", {run.precision}" if run.precision else ""
    lines.append(
        f"training on {run.device}{group if dist.enabled else ''}{precision}: "
        f"{run.num_params / 1e6:.2f} M parameters (without position embeddings), vocab "
        f"{cfg.model.vocab_size}, "
        f"global batch {tc.batch_size} x {tc.gradient_accumulation_steps} accumulation x "
        f"{n} ranks = {run.tokens_per_iter} tokens/step, steps {run.start}..{tc.max_iters} "
        f"-> {cfg.out_dir}"
    )
    if cfg.train.compile:
        lines.append("compiling the model (torch.compile): the first step takes a while")
    return lines


def device_sync(device: torch.device) -> Callable[[], None]:
    """What waits for ``device``'s queued work: torch.cuda.synchronize (or the mps
    one) for an accelerator, nothing for the CPU, whose work is done when it returns."""
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    if device.type == "mps":
        return torch.mps.synchronize
    return lambda: None


class RunClock:
    """Charges a run's wall time to the parts listed in PARTS.

    It starts in ``setup`` when created. `part` moves it into a part for the length
    of a ``with`` block; `switch` moves it for good.

    Args:
        sync: waits for the device (see `device_sync`); called at each boundary of a
            part that syncs. Default: nothing (CPU).
        clock: seconds from any fixed origin; time.perf_counter by default.
    """

    def __init__(
        self, sync: Callable[[], None] | None = None, clock: Callable[[], float] = time.perf_counter
    ):
        self._sync = sync or (lambda: None)
        self._clock = clock
        self._totals = dict.fromkeys((*PARTS, FIRST_STEP), 0.0)
        self._started = self._last = clock()
        self._current = "setup"
        self._compiled_evals: list[float] = []  # seconds of each evaluation of compiled code

    def switch(self, name: str, sync: bool = True) -> None:
        """Charge the time since the last boundary to the current part, and from now
        on to ``name`` (after waiting for the device, unless ``sync`` is False)."""
        if name not in self._totals:
            raise ValueError(f"unknown part {name!r}: one of {', '.join(PARTS)}")
        if sync:
            self._sync()
        now = self._clock()
        self._totals[self._current] += now - self._last
        self._last, self._current = now, name

    @contextlib.contextmanager
    def part(self, name: str, sync: bool = True, compiled: bool = False) -> Iterator[None]:
        """Charge the ``with`` block's time to ``name``, then go back to the part
        before it. ``sync=False``: do not wait for the device at the boundaries (for
        host-only work inside a step). ``compiled`` (evaluations): the block runs
        compiled code, so its first run includes compiling (see `split`)."""
        previous, before = self._current, self._totals[name]
        self.switch(name, sync)
        try:
            yield
        finally:
            self.switch(previous, sync)
            if compiled:
                self._compiled_evals.append(self._totals[name] - before)

    def first_step(self) -> contextlib.AbstractContextManager:
        """The ``with`` block of the run's first training step (see `split`)."""
        return self.part(FIRST_STEP)

    def split(self, steps_after_first: int, compiled: bool) -> dict[str, float]:
        """Seconds in each part so far (the current part up to now), in PARTS order;
        they add up to the wall time since the clock was created.

        Compiling happens inside the first call of compiled code, so it is estimated:
        with ``compiled``, the first step's time beyond the average of the
        ``steps_after_first`` later steps (all of it when there are none), plus the
        first evaluation of compiled code beyond the median of the later ones (none
        without later ones: one evaluation cannot be split). Without it, the first
        step counts as a step.
        """
        totals = dict(self._totals)
        totals[self._current] += self._clock() - self._last
        first = totals.pop(FIRST_STEP)
        split = {name: totals[name] for name in PARTS}
        if compiled:
            average = split["steps"] / steps_after_first if steps_after_first > 0 else 0.0
            compiling = max(0.0, first - average)
            split["compile"] += compiling
            split["steps"] += first - compiling
            evals = self._compiled_evals
            if len(evals) > 1:
                extra = min(max(0.0, evals[0] - statistics.median(evals[1:])), split["eval"])
                split["compile"] += extra
                split["eval"] -= extra
        else:
            split["steps"] += first
        return split


def split_line(split: dict[str, float]) -> str:
    """The end-of-run line: ``wall 263.1 s: setup 2.0 s, compile 14.2 s, ...``.

    Each part is rounded to tenths of a second so that the printed parts add up to
    the printed wall time exactly (largest remainders rounded up).
    """
    wall = sum(split.values())
    tenths = {name: seconds * 10 for name, seconds in split.items()}
    rounded = {name: int(t) for name, t in tenths.items()}  # each part is >= 0
    short = round(wall * 10) - sum(rounded.values())
    for name in sorted(tenths, key=lambda n: tenths[n] - rounded[n], reverse=True)[:short]:
        rounded[name] += 1
    parts = ", ".join(f"{LABELS.get(n, n)} {rounded[n] / 10:.1f} s" for n in split)
    return f"wall {round(wall * 10) / 10:.1f} s: {parts}"


@dataclass
class TrainResult:
    """What a call to `train` did.

    Attributes:
        out_dir: the run folder.
        iter_num: optimizer steps completed in total (including before a resume).
        best_val_loss: lowest validation loss seen, nats per character.
        evals: one dict per evaluation: iter, seconds (wall time since this call
            started training), train_loss, val_loss (nats/char), val_bpc (bits/char).
        full_val_loss: the loss over the whole validation split when training ended
            (nats/char); None if it was not computed (interrupted, nothing to do, or
            train.final_full_eval=false).
        losses: {iteration: training loss in nats/char} for every logged iteration
            (the loss of that iteration's batches, averaged over ranks).
        interrupted: True if Ctrl-C / SIGTERM stopped the run early.
        signal: the signal number that stopped it, if any.
        rank: this process's rank (0 unless launched by torchrun).
        skipped_steps: optimizer steps that loss scaling skipped (train.dtype float16:
            their gradients overflowed), in the whole run; None without loss scaling.
        time_split: seconds of this process's wall time in each part (setup, compile,
            steps, data, eval, views, checkpoints, other; see `RunClock`),
            adding up to it; empty if the run had nothing to do.
    """

    out_dir: Path
    iter_num: int = 0
    best_val_loss: float = math.inf
    evals: list = field(default_factory=list)
    full_val_loss: float | None = None
    losses: dict = field(default_factory=dict)
    interrupted: bool = False
    signal: int | None = None
    rank: int = 0
    skipped_steps: int | None = None
    time_split: dict = field(default_factory=dict)


class Reporter:
    """The bookkeeping of one run around its training steps, on one process.

    The loop asks it whether to stop, hands it each step's loss and each evaluation,
    and tells it when training begins and ends; it keeps the run's clock, console,
    TensorBoard writer (rank 0), throughput and NaN watch, and fills in the
    `TrainResult`. Created when the `Trainer` is: from then on the clock runs
    (``setup``).

    Args:
        cfg: the run's RunConfig (the trainer's working copy: train.max_iters,
            log_interval, compile; read when used, so values resolved later count).
        dist: this process's place in the job.
        device: where the run trains.
        clock: seconds from a fixed origin, for the time split; tests pass fake time.

    Attributes:
        result: the `TrainResult` the run returns.
        console: what the run prints (rank 0 only).
        clock: the `RunClock` of the time split.
        views: the `TensorBoardViews` drawn at each evaluation; set by the trainer once
            the corpus is known.
        stop: the `StopRequest` (Ctrl-C, SIGTERM), installed while training runs.
        tokens_per_step: tokens one optimizer step trains on, all ranks together.
        extra_hparams: sections the HParams tab shows beside the config's, e.g.
            ``{"parent": {...}}`` for a run started from another (train.init_from).
        skipped_steps: the count of steps loss scaling skipped
            (`training.precision.SkippedSteps`), set by the trainer of a float16 run;
            None otherwise.
    """

    def __init__(
        self, cfg: RunConfig, dist: DistContext, device: torch.device, clock=time.perf_counter
    ):
        self.clock = RunClock(device_sync(device), clock)  # from here on: "setup"
        self.cfg, self.dist, self.device = cfg, dist, device
        self.out_dir = Path(cfg.out_dir)
        self.console = Console(enabled=dist.is_main)
        self.result = TrainResult(out_dir=self.out_dir, rank=dist.rank)
        self.nonfinite = NonFiniteWatch(device)
        self.stop = StopRequest()
        self.views: TensorBoardViews | None = None
        self.skipped_steps: SkippedSteps | None = None
        self.writer: RunWriter | None = None  # rank 0 opens it when training begins
        tc = cfg.train
        self.tokens_per_step = tc.batch_size * tc.gradient_accumulation_steps
        self.tokens_per_step *= cfg.model.block_size * dist.world_size
        self.first_step = 0  # the step this run's training begins at
        self.paced = False  # whether the console counts the time left yet
        self.started = 0.0  # when it began, for the evaluations' seconds
        self.throughput: Throughput | None = None  # from when training begins
        self.extra_hparams: dict = {}  # sections beside the config's (a fine-tune's parent)

    def say(self, line: str) -> None:
        """Print a line (rank 0; above the progress bar, if there is one)."""
        self.console.say(line)

    def part(
        self, name: str, sync: bool = True, compiled: bool = False
    ) -> contextlib.AbstractContextManager:
        """Charge the ``with`` block's time to part ``name`` (see `RunClock.part`)."""
        return self.clock.part(name, sync, compiled)

    @contextlib.contextmanager
    def training(self, start: int, lines: list[str]) -> Iterator[None]:
        """The ``with`` block of the training steps, from step ``start``: opens the event
        file (rank 0) with the run's hyperparameters, says ``lines``, starts the clock
        on ``steps`` and the throughput, and installs the stop request; afterwards
        removes it and closes the bar and the event file."""
        try:  # the event file and its writer thread are closed however this ends
            if self.dist.is_main:
                # On resume, drop events a stopped run may have logged after its checkpoint.
                self.writer = RunWriter(self.out_dir, purge_step=start + 1 if start else None)
                self.writer.hyperparameters({**self.cfg.to_dict(), **self.extra_hparams})
            for line in lines:
                self.say(line)
            self.first_step, self.started = start, time.perf_counter()
            self.throughput = Throughput(self.tokens_per_step, start)
            self.clock.switch("steps")
            with self.stop:
                yield
        finally:
            self.console.close()
            if self.writer is not None:
                self.writer.close()

    def stop_requested(self) -> bool:
        """Whether to stop before the next step (Ctrl-C or SIGTERM; data-parallel ranks
        agree at every step, see `StopRequest.agreed`); if so, the result says the run
        was interrupted, and by which signal."""
        if not self.stop.agreed(self.dist):
            return False
        self.result.interrupted, self.result.signal = True, self.stop.signum
        return True

    def timing(self, step: int) -> contextlib.AbstractContextManager:
        """The ``with`` block of training step ``step`` (0-based): the run's first, which
        compiles with train.compile, is timed apart (see `RunClock.split`), and a
        signal during it stops the run at once (`StopRequest.at_once`)."""
        return self._first_step_block() if step == self.first_step else contextlib.nullcontext()

    @contextlib.contextmanager
    def _first_step_block(self) -> Iterator[None]:
        self.stop.at_once = True
        try:
            with self.clock.first_step():
                yield
        finally:
            self.stop.at_once = False

    def log(self, step: int, loss: torch.Tensor, lr: float, grad_norm: torch.Tensor) -> None:
        """After optimizer step ``step`` (1-based: steps done): record on the device
        whether its loss is finite, and show the progress. At log intervals, check
        that no rank's loss has left the finite numbers, average the loss over ranks
        and log it with the learning rate, gradient norm and throughput (TensorBoard,
        console, `TrainResult.losses`), and with loss scaling the steps it skipped
        (TensorBoard; the console when there are any).

        Args:
            loss: this rank's mean training loss in nats/char, a 0-dim device tensor.
            lr: the step's learning rate.
            grad_norm: the gradient norm before clipping, a 0-dim device tensor.

        Raises:
            NonFiniteLossError: if a rank's loss has been NaN or infinite.
        """
        tc, dist = self.cfg.train, self.dist
        self.nonfinite.record(loss, step - 1)  # no wait for the device
        if self.skipped_steps is not None:
            self.skipped_steps.record(grad_norm)  # no wait either
        if step == self.first_step + 1:  # compiling and warm-up stay out of the bar's estimate
            self.console.start(step, tc.max_iters)
            if step % tc.log_interval:  # and out of the first tok/s
                self.throughput.restart(step)
        fields = None
        if step % tc.log_interval == 0:
            if not self.paced:  # the time left counts from the first log interval
                self.console.warmed(step)
                self.paced = True
            self.check_finite()
            # With the check above, the only host-device syncs per interval.
            loss = (all_reduce(loss.clone(), dist) / dist.world_size).item()
            rate = self.throughput.measure(step)
            self.result.losses[step] = loss
            skipped = self.skipped_steps.total() if self.skipped_steps is not None else None
            if dist.is_main:
                self.writer.training_step(step, loss, lr, float(grad_norm), rate, skipped)
            fields = {"loss": f"{loss:.4f}", "lr": f"{lr:.2e}", "tok/s": f"{rate:,.0f}"}
            if skipped:
                fields["skipped"] = f"{skipped:,}"
        self.console.step(step, fields)

    def check_finite(self) -> None:
        """Raise if any rank has recorded a non-finite training loss (a collective: every
        rank must call it; see `NonFiniteWatch.check`).

        Raises:
            NonFiniteLossError: naming the step, with what to change.
        """
        self.nonfinite.check(self.dist, self.out_dir / CKPT_NAME)

    def seconds(self) -> float:
        """Wall time since training began, in seconds (an evaluation's ``seconds``)."""
        return time.perf_counter() - self.started

    def evaluation(self, ev: dict, improved: bool, model) -> None:
        """Report an evaluation (``ev`` as `training.evaluate.Evaluator.evaluate` returns
        it, ``improved`` if its validation loss is the best so far): keep it in the
        result; on rank 0, log its losses, the sample and heatmaps of ``model`` and, before
        the last step, the time split so far; say it. The throughput then counts from
        here, the evaluation's time left out."""
        step = ev["iter"]
        self.result.evals.append(ev)
        if self.dist.is_main:
            self.writer.evaluation(
                step, ev["val_loss"], ev["train_loss"], self.result.best_val_loss
            )
            with self.part("views"):
                self.views.log_evaluation(self.writer, model, step)
            if step < self.cfg.train.max_iters:  # the last step's split comes at the end
                self.writer.time_split(step, self.time_split())
        self.console.evaluation(ev, improved)
        self.throughput.restart(step)

    def stop_scoring(self) -> bool:
        """Whether the final whole-split score should stop now: a single process stops at
        Ctrl-C (the checkpoint is already written); data-parallel ranks finish it."""
        return self.stop.requested and not self.dist.enabled

    def whole_split(self, n_chars: int, loss: float | None, how: str = "") -> None:
        """Report the final score of the whole validation split (``n_chars``
        characters; ``loss`` in nats/char, ``how`` it was obtained): kept in the result,
        logged (val/full_loss) and said; ``loss`` None: its scoring was stopped."""
        self.console.close()  # the bar stays above the closing lines, not below them
        if loss is None:
            self.console.whole_split_stopped(self.out_dir)
            return
        self.result.full_val_loss = loss
        if self.dist.is_main:
            self.writer.full_evaluation(self.result.iter_num, loss)
        self.console.whole_split(n_chars, loss, how)

    @contextlib.contextmanager
    def saving_stopped_run(self) -> Iterator[None]:
        """The ``with`` block that saves a run stopped by Ctrl-C or SIGTERM: a further
        Ctrl-C does not cut it short; afterwards, the line saying how to resume."""
        self.stop.saving = True
        with self.part("checkpoints"):
            yield
        self.console.close()  # the bar stays above the closing lines, not below them
        self.console.interrupted(self.result.iter_num, self.out_dir / CKPT_NAME)

    def time_split(self) -> dict[str, float]:
        """Seconds of this process's wall time so far in each part (`PARTS`)."""
        steps_after_first = max(0, self.result.iter_num - self.first_step - 1)
        return self.clock.split(steps_after_first, compiled=self.cfg.train.compile)

    def end(self) -> None:
        """The run's last word: its time split, kept in the result, logged (wall_time/...) and
        said in one line."""
        self.clock.switch("other")
        self.console.close()  # the bar stays above the closing lines, not below them
        if self.skipped_steps is not None:
            self.result.skipped_steps = self.skipped_steps.total()
        split = self.result.time_split = self.time_split()
        if self.dist.is_main:
            self.writer.time_split(self.result.iter_num, split)
        self.say(split_line(split))
