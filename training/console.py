"""What a training run prints: lines for a person, and its progress.

On a terminal the progress is a tqdm bar with the latest loss, and lines print above
it. When the output goes to a file (``python train.py ... > log 2>&1``, nohup, a job
scheduler), a bar's carriage-return updates would make a few huge unreadable lines,
so there is no bar: a plain progress line is printed at a log interval, at most
every ``plain_every`` seconds, and every line ends with a newline.
"""

import sys
import time
import warnings

from tqdm import tqdm

from model.scoring import nats_to_bits


def plain_warnings() -> None:
    """Show Python warnings (a prompt replaced, a font missing) as one plain line,
    ``warning: ...``, instead of a source file path and the source line."""
    warnings.formatwarning = lambda message, category, *args, **kwargs: f"warning: {message}\n"


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
        rate = (step - self._first_step) / max(now - self._started, 1e-9)
        eta = _duration((self.total - step) / rate) if rate > 0 else "?"
        shown = " | ".join(f"{key} {value}" for key, value in fields.items())
        self.say(
            f"step {step}/{self.total} ({100 * step / self.total:.0f}%) | {shown} | "
            f"{_duration(now - self._started)} elapsed, {eta} left"
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
        """The line of a run stopped by Ctrl-C or SIGTERM, its checkpoint written."""
        self.say(
            f"interrupted at step {step}; checkpoint saved to {checkpoint}. Resume with the "
            "same command plus train.resume=true"
        )

    def whole_split_stopped(self, out_dir) -> None:
        """The line of a final whole-split score cut short by Ctrl-C."""
        self.say(
            "whole-split evaluation stopped; the checkpoint is saved: "
            f"python evaluate.py --out-dir {out_dir} gives it"
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


def start_lines(
    cfg, dist, device, num_params: int, tokens_per_iter: int, start: int, notes=(), changed=()
) -> list[str]:
    """What a run says before its first step: ``notes`` (e.g. the schedule's), the
    settings ``changed`` on resume, the start line (device, processes, parameters,
    batch, steps) and, with train.compile, that compiling comes first.

    Args:
        cfg: the resolved RunConfig; dist: the DistContext; device: the torch device.
        num_params: parameters without position embeddings.
        tokens_per_iter: tokens per optimizer step over all ranks.
        start: the step training starts from (after a resume, the checkpoint's).
        notes: lines to say first; empty ones are skipped.
        changed: the settings a resume changed, one description each.
    """
    lines = [note for note in notes if note]
    if changed:
        lines.append("note: resuming with changed settings: " + "; ".join(changed))
    tc, n = cfg.train, dist.world_size
    group = f" x {n} process{'es' if n > 1 else ''} ({dist.backend} process group)"
    lines.append(
        f"training on {device}{group if dist.enabled else ''}: {num_params / 1e6:.2f} M "
        f"parameters (without position embeddings), vocab {cfg.model.vocab_size}, "
        f"global batch {tc.batch_size} x {tc.gradient_accumulation_steps} accumulation x "
        f"{n} ranks = {tokens_per_iter} tokens/step, steps {start}..{tc.max_iters} -> "
        f"{cfg.out_dir}"
    )
    if cfg.train.compile:
        lines.append("compiling the model (torch.compile): the first step takes a while")
    return lines
