"""What a run's curves say went wrong, and the setting to change: the verdicts a run
prints at its end and ``evaluate.py --diagnose RUN`` prints for any run folder.

    record = read_run("runs/shakespeare_char_cpu")
    for line in diagnose(record): print(line)

The rules, each from the run's TensorBoard scalars (`viz.run_events`) and its
checkpoint's config and corpus record, with the bounds below:

    overfitting        the validation loss passed its minimum and rose by more than
                       OVERFIT_MARGIN nats/char while the training loss (its fixed
                       evaluation sample) kept falling
    learning rate      a logged training loss more than SPIKE_NATS above the lowest
      too high         before it, the training loss on its fixed evaluation sample up
                       more than RISE_NATS between two evaluations (with Muon a ten
                       times higher rate does not spike, it climbs back), or more
                       than SKIPPED_SHARE of the steps skipped by float16 loss scaling
    still learning     the last evaluation improved on the one before by at least
                       STILL_LEARNING_NATS nats/char and by STILL_LEARNING_SHARE of the
                       mean gain per evaluation since the first (the curve has not bent:
                       the CPU recipe's last gain, 0.046, is 0.59 of its mean, 0.078)
    model too large    more than PARAMS_PER_CHAR parameters per training character
    model too small    training and validation loss within SMALL_GAP_NATS and above
                       SMALL_LOSS_SHARE of ln(vocab_size) (a uniform guess's loss),
                       while no longer learning fast
    block_size         longer than the median document (file) of a corpus of several

Nothing is said when no rule holds. Each verdict is one line naming the setting and a
value to try. The bounds are rules of thumb, stated so a reader can judge them.
"""

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from model.checkpoint import CKPT_NAME, load_checkpoint
from training.checkpoint import CORPUS_KEY
from viz.head_scores import formation_lines
from viz.run_events import (
    HEAD_SCORE_TAG,
    TRAIN_EVAL_LOSS,
    TRAIN_LOSS,
    TRAIN_SKIPPED_STEPS,
    VAL_LOSS,
    read_scalar_curves,
)

OVERFIT_MARGIN = 0.02  # nats/char above the minimum validation loss
SPIKE_NATS = 0.5  # a training loss this far above the lowest before it
RISE_NATS = 0.05  # the training loss on its evaluation sample, up between evaluations
SKIPPED_SHARE = 0.01  # of the steps, skipped by float16 loss scaling
STILL_LEARNING_NATS = 0.02  # improvement at the last evaluation...
STILL_LEARNING_SHARE = 0.75  # ...and as a share of the mean gain per evaluation
PARAMS_PER_CHAR = 2.0  # parameters per character of training text
SMALL_GAP_NATS = 0.05  # |train - val| at the end
SMALL_LOSS_SHARE = 0.6  # of ln(vocab_size)


@dataclass
class RunRecord:
    """What the diagnosis reads of a run.

    Attributes:
        curves: {tag: `viz.run_events.ScalarCurve`} of the run's scalars.
        config: the run's resolved config (``RunConfig.to_dict()``).
        n_params: parameters of the model (every tensor of its state_dict).
        train_chars: characters of the training split.
        file_sizes: bytes of each corpus file, in reading order.
    """

    curves: dict
    config: dict
    n_params: int
    train_chars: int
    file_sizes: list[int] = field(default_factory=list)

    def formed_heads(self) -> list[str]:
        """The lines of `viz.head_scores.formation_lines` for the heads the run scored."""
        history = {}
        for tag, curve in self.curves.items():
            match = HEAD_SCORE_TAG.fullmatch(tag)
            if match:
                key = (match.group(1), int(match.group(2)), int(match.group(3)))
                history[key] = list(zip(curve.steps.tolist(), curve.values.tolist(), strict=True))
        return formation_lines(history)


def read_run(run_dir: str | Path, config: dict | None = None, model=None, corpus=None) -> RunRecord:
    """Read what `diagnose` needs from a run folder: its scalars, and the config, model
    size and corpus record of its ckpt.pt (or of ``config``, ``model`` and ``corpus``,
    the running trainer's, when all are given).

    Raises:
        FileNotFoundError: if the folder holds no event files.
        model.checkpoint.CheckpointError: if ckpt.pt is needed and unreadable.
    """
    curves = read_scalar_curves(run_dir)
    if config is None or model is None or corpus is None:
        ckpt = load_checkpoint(Path(run_dir) / CKPT_NAME)
        config = ckpt["config"]
        n_params = sum(t.numel() for t in ckpt["model"].values())
        corpus = ckpt.get(CORPUS_KEY) or {}
    else:
        n_params = sum(t.numel() for t in model.state_dict().values())
    splits = corpus.get("splits", {})
    train_chars = splits.get("train", [0])[0]
    sizes = [size for _, size, _ in corpus.get("files", [])]
    return RunRecord(curves, config, n_params, train_chars, sizes)


def _values(record: RunRecord, tag: str) -> tuple[np.ndarray, np.ndarray]:
    curve = record.curves.get(tag)
    if curve is None:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    return curve.steps, curve.values


def still_learning(record: RunRecord) -> str | None:
    """The still-learning verdict, or None."""
    steps, val = _values(record, VAL_LOSS)
    if len(val) < 2:
        return None
    gain, mean_gain = val[-2] - val[-1], (val[0] - val[-1]) / (len(val) - 1)
    if gain < STILL_LEARNING_NATS or gain < STILL_LEARNING_SHARE * mean_gain:
        return None
    max_iters = record.config["train"]["max_iters"]
    return (
        f"still learning fast at the end: the validation loss fell {gain:.3f} nats/char "
        f"({val[-2]:.3f} -> {val[-1]:.3f}) over the last {steps[-1] - steps[-2]} steps; "
        f"train longer: set train.max_iters={2 * max_iters} (now {max_iters}) in a new run, "
        "whose learning-rate schedule stretches with it"
    )


def overfitting(record: RunRecord) -> str | None:
    """The overfitting verdict, or None."""
    steps, val = _values(record, VAL_LOSS)
    train_steps, train = _values(record, TRAIN_EVAL_LOSS)
    if len(val) < 2 or len(train) < 2:
        return None
    low = int(np.argmin(val))
    rise = val[-1] - val[low]
    at_low = train[np.searchsorted(train_steps, steps[low])] if steps[low] in train_steps else None
    if rise <= OVERFIT_MARGIN or at_low is None or train[-1] >= at_low:
        return None
    dropout = record.config["model"].get("dropout", 0.0)
    try_dropout = min(0.5, round(dropout + 0.2, 2))
    return (
        f"overfitting: the validation loss rose {rise:.3f} nats/char from its minimum "
        f"{val[low]:.3f} at step {steps[low]} to {val[-1]:.3f} at step {steps[-1]} while "
        f"the training loss fell {at_low:.3f} -> {train[-1]:.3f}; set model.dropout="
        f"{try_dropout} (now {dropout}), or train.max_iters={steps[low]} (best.pt holds "
        f"step {steps[low]}'s weights)"
    )


def _largest_rise(values: np.ndarray, before: np.ndarray) -> tuple[int, float]:
    """The i where ``values[i + 1] - before[i]`` is largest, and that rise (nats/char);
    ``values`` (n,), ``before`` (n - 1,): the previous value, or the lowest so far."""
    rises = values[1:] - before
    worst = int(np.argmax(rises))
    return worst, float(rises[worst])


def learning_rate_too_high(record: RunRecord) -> str | None:
    """The learning-rate verdict (loss spikes or skipped float16 steps), or None."""
    lr = record.config["train"]["learning_rate"]
    change = f"set train.learning_rate={lr / 3:.3g} (now {lr:.3g})"
    steps, loss = _values(record, TRAIN_LOSS)
    if len(loss) >= 2:
        lowest_before = np.minimum.accumulate(loss)[:-1]
        worst, jump = _largest_rise(loss, lowest_before)
        if jump > SPIKE_NATS:
            return (
                f"learning rate too high: the training loss jumped to {loss[worst + 1]:.3f} at "
                f"step {steps[worst + 1]}, {jump:.2f} nats/char above its lowest "
                f"before ({lowest_before[worst]:.3f}); {change}"
            )
    eval_steps, train = _values(record, TRAIN_EVAL_LOSS)
    if len(train) >= 2:
        worst, rise = _largest_rise(train, train[:-1])
        if rise > RISE_NATS:
            return (
                f"learning rate too high: the training loss rose between evaluations, "
                f"{train[worst]:.3f} at step {eval_steps[worst]} -> {train[worst + 1]:.3f} at "
                f"step {eval_steps[worst + 1]} (the steps overshoot); {change}"
            )
    skip_steps, skipped = _values(record, TRAIN_SKIPPED_STEPS)
    if len(skipped) and skipped[-1] > SKIPPED_SHARE * max(1, skip_steps[-1]):
        return (
            f"learning rate too high: float16 loss scaling skipped {int(skipped[-1])} of "
            f"{skip_steps[-1]} steps (gradients overflowed); {change}, or train.dtype=bfloat16 "
            "where the GPU has it"
        )
    return None


def model_size(record: RunRecord, learning: bool) -> str | None:
    """The too-large or too-small verdict, or None. A fine-tuned run's model.n_embd is
    its parent's (train.init_from refuses another), so its advice names what it can change.
    """
    model = record.config["model"]
    n_embd, n_head = model["n_embd"], model["n_head"]
    parent = record.config["train"].get("init_from") or ""
    if record.train_chars and record.n_params > PARAMS_PER_CHAR * record.train_chars:
        ratio = record.n_params / record.train_chars
        # The block's weights grow as n_embd squared: scale it by sqrt(bound / ratio).
        step = 2 * n_head
        smaller = max(step, int(n_embd * math.sqrt(PARAMS_PER_CHAR / ratio)) // step * step)
        change = f"set model.n_embd={smaller} (now {n_embd}), or train on more text"
        if parent:
            change = (
                f"its size is its parent's ({parent}): fine-tune on more text, or for fewer "
                "steps (train.max_iters) and keep best.pt, the lowest validation loss"
            )
        return (
            f"model too large for its corpus: {record.n_params:,} parameters for "
            f"{record.train_chars:,} training characters ({ratio:.1f} per character, more "
            f"than {PARAMS_PER_CHAR:g}); {change}"
        )
    _, val = _values(record, VAL_LOSS)
    _, train = _values(record, TRAIN_EVAL_LOSS)
    vocab = model.get("vocab_size") or 0
    if learning or not len(val) or not len(train) or vocab < 2:
        return None
    high = SMALL_LOSS_SHARE * math.log(vocab)
    if abs(val[-1] - train[-1]) < SMALL_GAP_NATS and val[-1] > high:
        change = f"set model.n_embd={2 * n_embd} (now {n_embd})"
        if parent:
            change = (
                f"its size is its parent's ({parent}): fine-tune a larger parent, or train "
                f"a new model without train.init_from and with model.n_embd={2 * n_embd}"
            )
        return (
            f"model too small: training and validation loss are equal ({train[-1]:.3f}, "
            f"{val[-1]:.3f}) and high (above {high:.2f}, {SMALL_LOSS_SHARE:g} of a uniform "
            f"guess's ln {vocab}); {change}"
        )
    return None


def block_size_too_long(record: RunRecord) -> str | None:
    """The block_size verdict, or None."""
    block_size = record.config["model"]["block_size"]
    if len(record.file_sizes) < 2:
        return None
    median = int(np.median(record.file_sizes))
    if median >= block_size:
        return None
    shorter = 1 << max(3, median.bit_length() - 1)  # a power of two at most the median
    return (
        f"block_size longer than the corpus's documents: model.block_size={block_size} but "
        f"the median of its {len(record.file_sizes)} files is {median} bytes, so most "
        f"windows run across documents; set model.block_size={shorter}"
    )


def diagnose(record: RunRecord) -> list[str]:
    """One line per rule that holds (see the module docstring); [] when none does."""
    learning = still_learning(record)
    verdicts = [
        overfitting(record),
        learning_rate_too_high(record),
        learning,
        model_size(record, learning is not None),
        block_size_too_long(record),
    ]
    return [v for v in verdicts if v]
