"""Where a run's wall time goes: the training steps, and everything outside them.

`Trainer` keeps one `RunClock`. At any moment the clock charges the time to one part;
the trainer moves it from part to part (``with clock.part("eval"): ...``). The parts
are consecutive stretches of one clock, so they add up to the wall time exactly:

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
it says.

The clock is injectable (``clock=``), so that tests can drive it with fake time.
"""

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator

import torch

# In the order the split is printed and logged (TensorBoard: time/<part>_seconds).
PARTS = ("setup", "compile", "steps", "data", "eval", "views", "checkpoints", "other")
LABELS = {"views": "samples+heatmaps"}  # how the end-of-run line names a part
FIRST_STEP = "first_step"  # the first training step's time, split by `split`


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
