"""What a run writes to TensorBoard: its scalars (their tags are spelled in
`viz.run_events`, whose docstring lists them), the HParams table, and at each
evaluation what the model writes and where it looks.

The scalars: `RunWriter`, rank 0's event writer, one method per moment of the run.

The HParams table: at the start of each run (and of each resumed stretch), the run's
hyperparameters (its resolved config, flattened, without the settings of where and
how it runs) as a session-start summary in the run's own folder, written from the
hparams plugin's protocol buffers (TensorBoard's own ``hparams.summary`` helpers need
TensorFlow; torch's ``SummaryWriter.add_hparams`` writes to a sub-folder, a second
"run" per run). No experiment summary is written: TensorBoard reads one for the whole
logdir, from whichever run it finds first, so a summary written by each run declared
"differs" for its own values only (tensorboard#6965, #5596). Without one, TensorBoard
builds the table from every run's hyperparameters, flags those that differ between
the runs it shows, ticks the first five of them, and takes the metrics from the
runs' scalars in tag order, ticking the first five: loss/train and loss/val first
(`viz.run_events`). TensorBoard keeps a run's
first hyperparameters: a resumed run that changed some says so at its start
(`hparams_resume_note`).

The views (`TensorBoardViews`), at each evaluation:

    samples/fixed_prompt   TEXT    train.sample_tokens characters continuing
                                   train.sample_prompt, sampled with the run's seed
    attention/layer_<l>    IMAGES  layer l's heads in a near-square grid, for
                                   train.attention_prompt (at every evaluation, or
                                   every train.attention_interval steps)

The fixed seed and prompts make evaluations comparable: the same question is asked
of the model at step 500 and at step 3,500. Sampling uses its own torch.Generator and
the model in eval mode, so the training run's RNG streams, and its losses, are the
same with or without these views. The default prompts (``"ROMEO:"``, ``"To be, or
not to be"``) suit Tiny Shakespeare; a Korean corpus has none of those letters, and a
model cannot be fed a character outside its vocabulary. Rather than stop a training
run over a picture, such a prompt is replaced by text the corpus certainly has
(`usable_prompt`).

TensorBoard shows a sample of each tag's steps, not all of them: 10 images and 10
texts (100 through its fast loader), 1,000 scalars, chosen at random with the last
one kept. `tensorboard_command` gives the ``--samples_per_plugin`` flag that keeps
every step a run writes; ``0``, which the flag's help suggests for "all", shows no
image at all in TensorBoard 2.21.
"""

import contextlib
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.plugins.hparams import metadata, plugin_data_pb2
from torch.utils.tensorboard import SummaryWriter

from data.escapes import unescape
from data.normalization import continues_cluster, safe_cut, whole_cut
from data.tokenizer import CharTokenizer
from model import GPT
from model.engine import generate
from model.sampling import Sampling
from model.scoring import nats_to_bits
from training.config import RunConfig, flatten, keys_marked
from viz.attention_weights import prompt_attention
from viz.run_events import (
    ATTENTION_IMAGE,
    LOSS_TRAIN,
    LOSS_VAL,
    SAMPLE_TEXT,
    TIME_PART,
    TIME_WALL,
    TRAIN_EVAL_BPC,
    TRAIN_EVAL_LOSS,
    TRAIN_GRAD_NORM,
    TRAIN_LOSS,
    TRAIN_LR,
    TRAIN_SKIPPED_STEPS,
    TRAIN_TOKENS_PER_SEC,
    VAL_BEST_LOSS,
    VAL_BPC,
    VAL_FULL_BPC,
    VAL_FULL_LOSS,
    VAL_LOSS,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# Settings of where and how to run, not of the experiment: they differ between runs
# that are the same experiment, or between the segments of one resumed run. They are
# the fields marked hyperparameter=False.
NOT_HYPERPARAMETERS = keys_marked("hyperparameter", False)

# The README's sampling settings: varied enough to read, likely enough to be sensible.
SAMPLE_TEMPERATURE = 0.8
SAMPLE_TOP_K = 40

# Steps TensorBoard keeps per image and text tag with `tensorboard_command`'s flag: every
# evaluation of a run of up to that many (a longer run's command names its own number).
KEPT_EVALUATIONS = 1000
DEFAULT_KEPT_SCALARS = 1000  # TensorBoard's own limit for a scalar tag
# TensorBoard opens on TIME SERIES (every tag's card); the address's #scalars opens its
# SCALARS tab, where loss/train and loss/val come first. 6006: TensorBoard's default port.
TENSORBOARD_SCALARS_URL = "http://localhost:6006/#scalars"


def tensorboard_command(logdir: str | Path = "runs", evaluations: int = 0, logged: int = 0) -> str:
    """The command that opens TensorBoard on ``logdir`` with every step shown.

    Args:
        logdir: the folder holding the run folders.
        evaluations: how many evaluations (samples, heatmaps) a run writes; past
            KEPT_EVALUATIONS the flag keeps that many.
        logged: how many steps a scalar tag gets (max_iters / log_interval); past
            TensorBoard's 1,000 the flag names scalars too.

    Returns:
        e.g. ``tensorboard --logdir runs --samples_per_plugin images=1000,text=1000``.
    """
    kept = max(KEPT_EVALUATIONS, evaluations)
    plugins = [f"images={kept}", f"text={kept}"]
    if logged > DEFAULT_KEPT_SCALARS:
        plugins.insert(0, f"scalars={logged}")
    return f"tensorboard --logdir {logdir} --samples_per_plugin {','.join(plugins)}"


def tensorboard_line(cfg) -> str:
    """What a run says about TensorBoard at its start (``cfg``: the RunConfig)."""
    t = cfg.train
    evaluations = t.max_iters // t.eval_interval + 1  # and one at the last step
    logdir = Path(cfg.out_dir).parent
    command = tensorboard_command(logdir, evaluations, t.max_iters // t.log_interval)
    return (
        f"TensorBoard, with every evaluation's sample and heatmaps: {command}; "
        f"open {TENSORBOARD_SCALARS_URL} for the losses first"
    )


class RunWriter:
    """A run's TensorBoard event writer (rank 0 only).

    Args:
        out_dir: the run folder; the event file goes there.
        purge_step: on resume, the first step this run writes: events a stopped run
            logged from that step on (after its checkpoint) are dropped. None for a
            new run.
    """

    def __init__(self, out_dir: Path, purge_step: int | None = None):
        self.writer = SummaryWriter(str(out_dir), purge_step=purge_step)

    def hyperparameters(self, config: dict) -> None:
        """The run's resolved config (``RunConfig.to_dict()``) for the HParams tab."""
        self.writer.file_writer.add_summary(session_start_summary(config))

    def training_step(
        self,
        step: int,
        loss: float,
        lr: float,
        grad_norm: float,
        tokens_per_sec: float,
        skipped_steps: int | None = None,
    ) -> None:
        """The scalars of one logged step: loss in nats/char, gradient norm before
        clipping, throughput in tokens per second, and with loss scaling (float16) the
        steps it has skipped since the run began (None: no loss scaling)."""
        self.writer.add_scalar(TRAIN_LOSS, loss, step)
        self.writer.add_scalar(LOSS_TRAIN, loss, step)
        self.writer.add_scalar(TRAIN_LR, lr, step)
        self.writer.add_scalar(TRAIN_GRAD_NORM, grad_norm, step)
        self.writer.add_scalar(TRAIN_TOKENS_PER_SEC, tokens_per_sec, step)
        if skipped_steps is not None:
            self.writer.add_scalar(TRAIN_SKIPPED_STEPS, skipped_steps, step)

    def evaluation(self, step: int, val_loss: float, train_loss: float, best: float) -> None:
        """An evaluation's losses, in nats/char (bits/char derived), and the best
        validation loss so far; flushed, so TensorBoard shows them at once."""
        self.writer.add_scalar(VAL_LOSS, val_loss, step)
        self.writer.add_scalar(LOSS_VAL, val_loss, step)
        self.writer.add_scalar(VAL_BPC, nats_to_bits(val_loss), step)
        self.writer.add_scalar(TRAIN_EVAL_LOSS, train_loss, step)
        self.writer.add_scalar(TRAIN_EVAL_BPC, nats_to_bits(train_loss), step)
        self.writer.add_scalar(VAL_BEST_LOSS, best, step)
        self.writer.flush()

    def full_evaluation(self, step: int, val_loss: float) -> None:
        """The loss over the whole validation split at the end of training, in
        nats/char (bits/char derived); flushed."""
        self.writer.add_scalar(VAL_FULL_LOSS, val_loss, step)
        self.writer.add_scalar(VAL_FULL_BPC, nats_to_bits(val_loss), step)
        self.writer.flush()

    def sample(self, step: int, markdown: str) -> None:
        """The fixed-prompt sample, as TensorBoard markdown."""
        self.writer.add_text(SAMPLE_TEXT, markdown, step)

    def attention(self, step: int, images: list[np.ndarray]) -> None:
        """One (H, W, 3) uint8 heatmap image per layer."""
        for layer, image in enumerate(images):
            self.writer.add_image(
                ATTENTION_IMAGE.format(layer=layer), image, step, dataformats="HWC"
            )

    def time_split(self, step: int, split: dict[str, float]) -> None:
        """Where the wall time went so far: seconds per part (TIME_PART) and in all
        (TIME_WALL); flushed."""
        for part, seconds in split.items():
            self.writer.add_scalar(TIME_PART.format(part=part), seconds, step)
        self.writer.add_scalar(TIME_WALL, sum(split.values()), step)
        self.writer.flush()

    def flush(self) -> None:
        """Write everything pending to the event file."""
        self.writer.flush()

    def close(self) -> None:
        """Flush and close the event file."""
        self.writer.close()


def hyperparameters(config: dict) -> dict:
    """The hyperparameters of a run: its resolved config (``RunConfig.to_dict()``),
    flattened to dotted keys, without NOT_HYPERPARAMETERS; None becomes "null"."""
    return {
        key: "null" if value is None else value
        for key, value in flatten(config).items()
        if key not in NOT_HYPERPARAMETERS
    }


def session_start_summary(config: dict) -> Summary:
    """The hparams plugin's session-start summary of one run: its hyperparameters
    (`hyperparameters` of ``config``, the run's ``RunConfig.to_dict()``), to write with
    ``writer.file_writer.add_summary``."""
    session = plugin_data_pb2.SessionStartInfo(start_time_secs=time.time())
    for name, value in hyperparameters(config).items():
        value = stored_value(value)
        if isinstance(value, bool):
            session.hparams[name].bool_value = value
        elif isinstance(value, float):
            session.hparams[name].number_value = value
        else:
            session.hparams[name].string_value = value
    content = plugin_data_pb2.HParamsPluginData(session_start_info=session)
    value = Summary.Value(
        tag=metadata.SESSION_START_INFO_TAG,
        metadata=metadata.create_summary_metadata(content),
        tensor=metadata.NULL_TENSOR,
    )
    return Summary(value=[value])


def stored_value(value) -> bool | float | str:
    """A hyperparameter as the session-start summary holds it: a bool, a number (as a
    float), or text."""
    if isinstance(value, bool):  # before int: bool is an int subclass
        return value
    if isinstance(value, (int, float)):
        return float(value)
    return str(value)


def first_hyperparameters(out_dir: Path, looked_at: int = 20) -> dict | None:
    """The hyperparameters of the run in ``out_dir`` as TensorBoard's HParams tab shows
    them: the session-start summary of its oldest event file (the run's first start;
    TensorBoard keeps a tag's first summary). None if there is none to read.

    Args:
        looked_at: events read from the start of that file (the summary is among the
            first two a run writes).
    """
    files = sorted(Path(out_dir).glob("events.out.tfevents*"))
    if not files:
        return None
    # Read only on resume: the loader's import (~0.3 s) stays out of every other start.
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    try:
        for number, event in enumerate(EventFileLoader(str(files[0])).Load()):
            for value in event.summary.value:
                if value.tag == metadata.SESSION_START_INFO_TAG:
                    info = metadata.parse_session_start_info_plugin_data(
                        value.metadata.plugin_data.content
                    )
                    return {
                        name: getattr(v, v.WhichOneof("kind")) for name, v in info.hparams.items()
                    }
            if number >= looked_at:
                break
    except (OSError, ValueError):  # an unreadable file: nothing to compare with
        return None
    return None


def hparams_resume_note(out_dir: Path, config: dict) -> str:
    """What a resumed run says about TensorBoard's HParams tab when its hyperparameters
    (``config``: the run's ``RunConfig.to_dict()``) differ from those the run first
    started with, which the tab keeps (`first_hyperparameters`); "" when none do."""
    first = first_hyperparameters(out_dir)
    if not first:
        return ""

    def shown(value) -> str:
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value).lower() if isinstance(value, bool) else str(value)

    changed = [
        f"{name}={shown(first[name])}"
        for name, value in hyperparameters(config).items()
        if name in first and first[name] != stored_value(value)
    ]
    if not changed:
        return ""
    return (
        "note: TensorBoard's HPARAMS tab keeps the hyperparameters this run first started "
        f"with: its row will show {', '.join(changed)} beside the metrics logged from here "
        "on (SCALARS' train/lr shows each step's learning rate)"
    )


class PromptFallbackWarning(UserWarning):
    """A configured prompt had characters outside the vocabulary and was replaced."""


def usable_prompt(
    prompt: str,
    tokenizer: CharTokenizer,
    val_ids: np.ndarray,
    key: str,
    max_chars: int | None = None,
) -> str:
    """``prompt`` itself if it fits and the vocabulary has all its characters, else a
    stand-in.

    The prompt's escapes (``\\n``, see `data.escapes`) are read first, as sample.py
    reads --prompt's. The prompt is then put in the corpus's normalisation form (as every text given
    to the model is). A prompt longer than ``max_chars`` is cut to its first
    ``max_chars`` characters. A prompt with characters outside the vocabulary is
    replaced by about as many characters from the start of the first full line of the
    validation split (from its very start if no line fits): held-out text of the
    corpus, so every character is known and the text reads like the corpus. No cut
    splits a character: a decomposed syllable or an accent stays whole
    (`data.normalization.safe_cut`), so a cut may keep a few code points fewer.

    Args:
        prompt: the configured prompt (non-empty).
        tokenizer: the corpus's tokenizer.
        val_ids: (N,) token ids of the validation split.
        key: the config key the prompt came from, for the warnings.
        max_chars: the longest prompt the caller can use (e.g. block_size), or None.

    Returns:
        A non-empty prompt of at most len(prompt) (and max_chars) code points, all in
        the vocabulary.

    Warns:
        PromptFallbackWarning: saying what was cut or replaced, and by what.
    """
    prompt = tokenizer.normalize(unescape(prompt))  # as --prompt reads it (data.escapes)
    if max_chars is not None and len(prompt) > max_chars:
        cut = safe_cut(prompt, max_chars) or max_chars  # one cluster longer than the context
        warnings.warn(
            f"{key} has {len(prompt)} characters, more than the model's context "
            f"({max_chars}); using its first {cut}",
            PromptFallbackWarning,
            stacklevel=2,
        )
        prompt = prompt[:cut]
    known = set(tokenizer.chars)
    missing = [c for c in dict.fromkeys(prompt) if c not in known]
    if not missing:
        return prompt
    n = len(prompt)
    # Enough text to find a line start and n characters after it.
    text = tokenizer.decode(val_ids[: 4 * n + 256])
    start = text.find("\n") + 1
    if len(text) - start < n:
        start = 0
    while start < len(text) - 1 and continues_cluster(text[start]):
        start += 1  # the validation split may begin inside a character
    rest = text[start:]
    replacement = rest[: whole_cut(rest, n)]
    shown = ", ".join(f"{c!r} (U+{ord(c):04X})" for c in missing[:8])
    warnings.warn(
        f"{key}={prompt!r} has characters the corpus lacks ({shown}); using "
        f"{replacement!r} from the validation text instead. Set {key} to text in the "
        "corpus's own script to choose it yourself.",
        PromptFallbackWarning,
        stacklevel=2,
    )
    return replacement


def figure_to_rgb(fig: "Figure") -> np.ndarray:
    """Render a matplotlib figure with the Agg backend.

    Returns:
        (H, W, 3) uint8 array, H and W in pixels (inches x the figure's dpi).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


def sample_markdown(prompt: str, text: str, seed: int) -> str:
    """A sample as TensorBoard markdown: a settings line, then the text as a code block
    (indented four spaces) so its line breaks and spacing survive."""
    header = (
        f"prompt {prompt!r}, seed {seed}, temperature {SAMPLE_TEMPERATURE}, top-k {SAMPLE_TOP_K}"
    )
    body = "\n".join("    " + line for line in text.split("\n"))
    return f"{header}\n\n{body}"


class TensorBoardViews:
    """Logs a run's fixed-seed sample and attention heatmaps to TensorBoard.

    Construction settles the prompts once (a prompt with characters the corpus lacks
    is replaced, with a `PromptFallbackWarning`) and the font for the
    heatmaps (a `viz.fonts.MissingGlyphWarning` if none can draw the prompt).

    Args:
        cfg: the run's config; uses seed, train.sample_prompt, train.sample_tokens
            (0: no sample) and train.attention_prompt ("": no heatmaps).
        tokenizer: the corpus's tokenizer.
        val_ids: (N,) token ids of the validation split, for the prompt fallback.
        autocast: factory of the context the sample is generated in: the run's
            precision (`training.precision.Precision.autocast`); none by default.
    """

    def __init__(
        self,
        cfg: RunConfig,
        tokenizer: CharTokenizer,
        val_ids: np.ndarray,
        autocast=contextlib.nullcontext,
    ):
        t = cfg.train
        self.cfg = cfg
        self.autocast = autocast
        self.tokenizer = tokenizer
        self.sample_prompt = ""
        if t.sample_tokens > 0:
            self.sample_prompt = usable_prompt(
                t.sample_prompt, tokenizer, val_ids, "train.sample_prompt"
            )
        self.attention_prompt = ""
        self.font = None
        self.figures = {}  # layer -> its heatmap figure, built once
        self.last_sample: tuple[int, str] | None = None  # (step, text) of the last evaluation
        if t.attention_prompt:
            self.attention_prompt = usable_prompt(
                t.attention_prompt,
                tokenizer,
                val_ids,
                "train.attention_prompt",
                max_chars=cfg.model.block_size,  # the explicit attention path's limit
            )
            # matplotlib (~0.4 s to import) loads only for a run that draws heatmaps.
            from viz.fonts import text_font

            self.font = text_font(self.attention_prompt)

    def encode(self, prompt: str) -> torch.Tensor:
        """(T,) int64 token ids of a prompt already known to be in the vocabulary."""
        return torch.from_numpy(self.tokenizer.encode(prompt).astype(np.int64))

    def sample(self, model: GPT, tokens: int | None = None) -> str:
        """train.sample_tokens characters (or ``tokens``, at most that) after the sample
        prompt, with the run's seed, in the run's precision. A shorter sample is the
        start of the full one: the same seed draws the same characters first.

        Returns:
            The prompt followed by the generated text.
        """
        device = next(model.parameters()).device
        generator = torch.Generator(device=device).manual_seed(self.cfg.seed)
        was_training = model.training
        model.eval()
        try:
            idx = self.encode(self.sample_prompt).to(device).unsqueeze(0)
            sampling = Sampling(SAMPLE_TEMPERATURE, SAMPLE_TOP_K, generator=generator)
            with self.autocast():
                count = self.cfg.train.sample_tokens
                out = generate(
                    model, idx, count if tokens is None else min(tokens, count), sampling
                )
        finally:
            model.train(was_training)
        return self.tokenizer.decode(out[0].tolist())

    def sample_start(self, model: GPT, step: int, tokens: int) -> str:
        """The sample's first ``tokens`` characters after the prompt (`sample`), at
        ``step``: cut from the evaluation's sample when one was drawn at this step (the
        same weights, prompt and seed give the same characters), else generated."""
        if self.last_sample is not None and self.last_sample[0] == step:
            count = min(tokens, self.cfg.train.sample_tokens)
            return self.last_sample[1][: len(self.sample_prompt) + count]
        return self.sample(model, tokens)

    def attention_images(self, model: GPT) -> list[np.ndarray]:
        """One heatmap image per layer for the attention prompt, its heads in a near-square
        grid (`square_heads_per_row`). Each layer's figure is built at the first call and
        given the new weights at the next (`viz.attention_plot.update_attention_grid`);
        TensorBoard shows each image's step.

        Returns:
            n_layer arrays, each (H, W, 3) uint8.
        """
        from viz.attention_plot import (
            attention_grid_figure,
            square_heads_per_row,
            update_attention_grid,
        )

        weights = prompt_attention(model, self.encode(self.attention_prompt))
        images = []
        for layer in range(weights.size(0)):
            layer_weights = weights[layer : layer + 1]
            if layer in self.figures:
                fig = update_attention_grid(self.figures[layer], layer_weights)
            else:
                fig = self.figures[layer] = attention_grid_figure(
                    layer_weights,
                    self.attention_prompt,
                    layers=[layer],
                    font=self.font,
                    title=repr(self.attention_prompt),
                    # A card shows the whole image at its width: a square grid shows it
                    # largest (four heads side by side came out a strip).
                    heads_per_row=square_heads_per_row(weights.size(1)),
                )
            images.append(figure_to_rgb(fig))
        return images

    def log_evaluation(self, writer: RunWriter, model: GPT, step: int) -> None:
        """Write the fixed sample and the attention heatmaps at ``step``, then flush.
        Restores the model's train/eval mode."""
        if self.sample_prompt:
            text = self.sample(model)
            self.last_sample = (step, text)
            writer.sample(step, sample_markdown(self.sample_prompt, text, self.cfg.seed))
        if self.attention_due(step):
            writer.attention(step, self.attention_images(model))
        writer.flush()

    def attention_due(self, step: int) -> bool:
        """Whether the evaluation at ``step`` draws the heatmaps: every one with
        train.attention_interval 0, else the first evaluation at or after each of its
        multiples (one lies in (step - eval_interval, step]), and the last step."""
        t = self.cfg.train
        interval = t.attention_interval
        if not self.attention_prompt:
            return False
        if interval == 0 or step == t.max_iters:
            return True
        return step // interval > (step - t.eval_interval) // interval
