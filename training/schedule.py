"""Learning-rate schedule: linear warmup, then cosine decay to a floor."""

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
