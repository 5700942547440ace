"""Learning-rate schedules: linear warmup, then cosine decay or warmup-stable-decay."""

import math


def learning_rate_at(
    step: int, learning_rate: float, min_lr: float, warmup_iters: int, lr_decay_iters: int
) -> float:
    """Learning rate for optimizer step ``step`` (0-based).

    Linear warmup from learning_rate / (warmup_iters + 1) to learning_rate over
    ``warmup_iters`` steps, then half a cosine from learning_rate down to min_lr at
    ``lr_decay_iters``, then min_lr (SGDR, Loshchilov & Hutter 2017, without restarts).
    Depends only on these arguments, never on where a run stops, so a resumed run
    follows the same curve.

    Returns:
        The learning rate (same units as ``learning_rate``).
    """
    if step < warmup_iters:
        return learning_rate * (step + 1) / (warmup_iters + 1)
    if step >= lr_decay_iters:
        return min_lr
    progress = (step - warmup_iters) / max(1, lr_decay_iters - warmup_iters)
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
    linear warmdown to min_lr over the last ``warmdown_fraction`` of lr_decay_iters,
    then min_lr (Hägele et al. 2024, "Scaling Laws and Compute-Optimal Training
    Beyond Fixed Training Durations").
    """
    if step < warmup_iters:
        return learning_rate * (step + 1) / (warmup_iters + 1)
    if step >= lr_decay_iters:
        return min_lr
    warmdown_iters = max(1, round(warmdown_fraction * lr_decay_iters))
    warmdown_start = max(warmup_iters, lr_decay_iters - warmdown_iters)
    if step < warmdown_start:
        return learning_rate
    progress = (step - warmdown_start) / max(1, lr_decay_iters - warmdown_start)
    return learning_rate + progress * (min_lr - learning_rate)


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
