"""Learning-rate schedules: linear warmup, then cosine decay or warmup-stable-decay."""

import copy
import math


def learning_rate_at(
    step: int, learning_rate: float, min_lr: float, warmup_iters: int, lr_decay_iters: int
) -> float:
    """Learning rate for optimizer step ``step`` (0-based).

    Linear warmup from learning_rate / (warmup_iters + 1) at step 0 to learning_rate
    at step ``warmup_iters``, then half a cosine down to min_lr at step
    ``lr_decay_iters - 1``, the schedule's last step, then min_lr (SGDR, Loshchilov &
    Hutter 2017, without restarts). A run of ``lr_decay_iters`` steps (the default:
    max_iters) thus takes its last optimizer step at min_lr; a decay of one step
    (warmup_iters = lr_decay_iters - 1) is that step, at min_lr. Depends only on these
    arguments, never on where a run stops, so a resumed run follows the same curve.

    Returns:
        The learning rate (same units as ``learning_rate``).
    """
    if step < warmup_iters:
        return learning_rate * (step + 1) / (warmup_iters + 1)
    last = lr_decay_iters - 1  # the schedule's last step runs at min_lr
    if step >= last:
        return min_lr
    progress = (step - warmup_iters) / (last - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (learning_rate - min_lr)


def wsd_learning_rate_at(
    step: int,
    learning_rate: float,
    min_lr: float,
    warmup_iters: int,
    lr_decay_iters: int,
    warmdown_fraction: float,
) -> float:
    """Warmup-stable-decay ("trapezoidal") learning rate for step ``step`` (0-based).

    Linear warmup as in `learning_rate_at`, then constant at learning_rate, then a
    linear warmdown over the last ``round(warmdown_fraction x lr_decay_iters)`` steps
    of the schedule (none of them before the warmup's end): each of those steps runs
    below learning_rate, and the last, step ``lr_decay_iters - 1``, at min_lr; then
    min_lr (Hägele et al. 2024, "Scaling Laws and Compute-Optimal Training Beyond
    Fixed Training Durations").
    """
    if step < warmup_iters:
        return learning_rate * (step + 1) / (warmup_iters + 1)
    if step >= lr_decay_iters - 1:
        return min_lr
    warmdown_start = warmdown_start_step(warmup_iters, lr_decay_iters, warmdown_fraction)
    if step < warmdown_start:
        return learning_rate
    # From learning_rate at the step before the warmdown to min_lr at its last step.
    progress = (step - warmdown_start + 1) / (lr_decay_iters - warmdown_start)
    return learning_rate + progress * (min_lr - learning_rate)


def warmdown_start_step(warmup_iters: int, lr_decay_iters: int, warmdown_fraction: float) -> int:
    """The first step of the wsd warmdown (0-based): ``round(warmdown_fraction x
    lr_decay_iters)`` steps (at least one) before the schedule's end, and not before
    the warmup's end."""
    warmdown_iters = max(1, round(warmdown_fraction * lr_decay_iters))
    return max(warmup_iters, lr_decay_iters - warmdown_iters)


def scheduled_learning_rate(step: int, cfg) -> float:
    """The learning rate that ``cfg.lr_schedule`` gives at ``step`` (``cfg``: TrainConfig)."""
    if cfg.lr_schedule == "wsd":
        return wsd_learning_rate_at(
            step,
            cfg.learning_rate,
            cfg.min_lr,
            cfg.warmup_iters,
            cfg.lr_decay_iters,
            cfg.warmdown_fraction,
        )
    return learning_rate_at(
        step, cfg.learning_rate, cfg.min_lr, cfg.warmup_iters, cfg.lr_decay_iters
    )


def resolve_schedule_length(cfg, saved_length: int | None, start: int) -> tuple[int, str]:
    """The schedule's length in steps (``lr_decay_iters``), and one line saying what
    a resumed run does with it.

    A new run's schedule lasts ``cfg.lr_decay_iters`` steps, or ``cfg.max_iters``
    when that is not given. A resumed run keeps the length its schedule was first
    given, even when ``max_iters`` grows: extending a finished run continues at the
    end of its curve (``min_lr``) instead of jumping back up. A ``lr_decay_iters``
    given anew replaces it.

    Args:
        cfg: the TrainConfig (uses lr_decay_iters, max_iters, min_lr, and whatever
            `scheduled_learning_rate` uses).
        saved_length: the resumed checkpoint's resolved lr_decay_iters, or None for a
            new run.
        start: the step the run starts from (the checkpoint's iteration).

    Returns:
        (length, note): note is "" for a new run.
    """
    if saved_length is None:
        return (cfg.lr_decay_iters or cfg.max_iters), ""
    given = cfg.lr_decay_iters
    length = saved_length if given is None else given
    resolved = copy.copy(cfg)
    resolved.lr_decay_iters = length
    before = copy.copy(cfg)
    before.lr_decay_iters = saved_length
    lr_then = scheduled_learning_rate(max(start - 1, 0), before)
    lr_next = scheduled_learning_rate(start, resolved)
    where = f"resuming at step {start} of {cfg.max_iters}: the {cfg.lr_schedule} learning-rate "
    if given is None or given == saved_length:
        # Warmup comes first: with warmup_iters past the schedule's end, it goes on.
        past = (
            f"run at train.min_lr={cfg.min_lr:.1e}"
            if cfg.warmup_iters <= length
            else f"continue the warmup to step {cfg.warmup_iters} (train.warmup_iters), "
            f"then run at train.min_lr={cfg.min_lr:.1e}"
        )
        tail = (
            f"; steps past {length} {past}"
            f" (give train.lr_decay_iters={cfg.max_iters} to stretch it)"
            if cfg.max_iters > length
            else ""
        )
        return length, f"{where}schedule keeps its length of {length} steps{tail}"
    return length, (
        f"{where}schedule now lasts train.lr_decay_iters={length} steps instead of "
        f"{saved_length}: the learning rate goes from {lr_then:.2e} at step {start} to "
        f"{lr_next:.2e} at step {start + 1}"
    )


def warmup_outlasting_schedule(cfg) -> str | None:
    """Why a given ``train.lr_decay_iters`` cannot be used with ``train.warmup_iters``,
    or None if it can (``cfg``: TrainConfig, lr_decay_iters as given).

    A schedule that ends at or before its warmup does (``lr_decay_iters <=
    warmup_iters``), inside the run (``lr_decay_iters < max_iters``), would warm up
    past its own end and then drop at once from near learning_rate to min_lr. Left
    as null, lr_decay_iters is max_iters, and a warmup as long as the run only means
    the peak is never reached (see `schedule_notices`).
    """
    decay, warmup = cfg.lr_decay_iters, cfg.warmup_iters
    if decay is None or warmup < decay or decay >= cfg.max_iters:
        return None
    if warmup < cfg.max_iters:
        peak = cfg.learning_rate * warmup / (warmup + 1)  # the last warmup step's rate
        what = (
            f"the learning rate would warm up to {peak:.2e} at step {warmup}, then drop to "
            f"train.min_lr={cfg.min_lr:.1e} at step {warmup + 1}"
        )
    else:
        what = f"the learning rate would still be warming up at step {cfg.max_iters}"
    return (
        f"train.warmup_iters={warmup} is not below train.lr_decay_iters={decay}, the "
        f"schedule's length: {what}. Set train.lr_decay_iters above {warmup} (e.g. "
        f"train.lr_decay_iters={cfg.max_iters}, the run's length, or leave it out), or a "
        f"warmup well inside the schedule (e.g. train.warmup_iters={decay // 10})"
    )


def schedule_notices(cfg) -> list[str]:
    """Things about the run's step schedule (warmup, decay, weight averaging) a user may
    not expect, to say once at the start (``cfg``: TrainConfig with lr_decay_iters
    resolved)."""
    notes = []
    if cfg.warmup_iters >= cfg.max_iters:
        notes.append(
            f"note: train.warmup_iters={cfg.warmup_iters} >= train.max_iters="
            f"{cfg.max_iters}: the learning rate never reaches train.learning_rate"
        )
    elif cfg.lr_decay_iters > cfg.max_iters:
        notes.append(
            f"note: the learning-rate schedule runs to train.lr_decay_iters="
            f"{cfg.lr_decay_iters}, past train.max_iters={cfg.max_iters}; this run stops "
            f"before the decay ends (set train.lr_decay_iters={cfg.max_iters} to finish it)"
        )
    cliff = steep_decay(cfg)
    if cliff:
        notes.append(cliff)
    if cfg.ema_decay > 0 and cfg.ema_start >= cfg.max_iters:
        # WeightAverage (training.optim) folds in weights only once steps > ema_start.
        notes.append(
            f"note: train.ema_start={cfg.ema_start} >= train.max_iters={cfg.max_iters}: "
            "weight averaging never begins, and the run evaluates and saves the trained "
            f"weights (set train.ema_start below {cfg.max_iters} to average)"
        )
    elif cfg.ema_decay > 0 and cfg.ema_start > 0:
        # A chosen start has no warm-up (training.optim): the weights after step
        # ema_start + 1 keep decay ** (later folds) of the final average, which
        # matters where that step lies well before the end.
        share = cfg.ema_decay ** (cfg.max_iters - cfg.ema_start - 1)
        long_before = cfg.max_iters - cfg.ema_start > cfg.max_iters / 10
        if share >= DOMINANT_SHARE and long_before:
            notes.append(
                f"note: train.ema_decay={cfg.ema_decay:g} averages over about "
                f"{1 / (1 - cfg.ema_decay):.0f} steps, but {cfg.max_iters - cfg.ema_start} "
                f"follow train.ema_start={cfg.ema_start}: {share:.0%} of the average the "
                "run evaluates and saves will be the weights of that step (a smaller "
                "train.ema_decay, or train.ema_start=0, which warms the decay up)"
            )
    elif cfg.ema_decay > 0:  # from the first step: WeightAverage warms the decay up
        full = math.ceil((10 * cfg.ema_decay - 1) / (1 - cfg.ema_decay))
        notes.append(
            f"note: weight averaging from the first step (train.ema_start=0) warms its "
            f"decay up, min({cfg.ema_decay:g}, (1 + t) / (10 + t)) at update t, so the "
            f"first, untrained weights are soon outweighed; it reaches "
            f"train.ema_decay={cfg.ema_decay:g} at update {full:,}"
        )
    return notes


# The share of the first averaged weights in the final average that a note points out
# (where they come from more than a tenth of the run before its end): the average is
# then more the weights of that step than of all later ones.
DOMINANT_SHARE = 0.5


# A decay that falls this many times faster than the warmup rose is noted as a cliff.
STEEP_DECAY_RATIO = 4


def steep_decay(cfg) -> str | None:
    """A note when the run's learning rate falls from its warmup's height to min_lr in
    a step or a few, far faster than it rose (fewer than warmup_iters /
    STEEP_DECAY_RATIO steps), within the run; else None (``cfg``: TrainConfig with
    lr_decay_iters resolved).

    ``warmup_iters=19, lr_decay_iters=20`` is such a case: 0.001 at step 19, then
    train.min_lr at step 20. Its steps are 1-based, as the run logs them.
    """
    warmup, decay = cfg.warmup_iters, cfg.lr_decay_iters
    if warmup == 0 or decay > cfg.max_iters or cfg.min_lr >= cfg.learning_rate:
        return None
    falls_from = warmup  # the first step below the warmup's last (1-based: warmup + 1)
    if cfg.lr_schedule == "wsd":
        falls_from = warmdown_start_step(warmup, decay, cfg.warmdown_fraction)
    falling = decay - falls_from  # steps from the last one at the top to min_lr
    if falling <= 0 or falling * STEEP_DECAY_RATIO >= warmup:
        return None
    top = scheduled_learning_rate(falls_from - 1, cfg)
    return (
        f"note: the learning rate falls from {top:.2e} at step {falls_from} to "
        f"train.min_lr={cfg.min_lr:.1e} at step {decay} ({falling} step"
        f"{'s' if falling > 1 else ''}) after a warmup of {warmup} steps "
        f"(train.warmup_iters={warmup}, schedule length train.lr_decay_iters={decay}): a "
        f"cliff more than a decay. For a gradual one, shorten the warmup (e.g. "
        f"train.warmup_iters={decay // 10}) or lengthen the schedule"
    )
