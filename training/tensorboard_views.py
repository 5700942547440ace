"""What TensorBoard shows of a run besides its scalars: what the model writes, where
it looks, and which hyperparameters produced it.

At each evaluation (`Trainer.evaluate_and_save` calls `TensorBoardViews.log_evaluation`),
through the run's `training.run_writer.RunWriter`:

    samples/fixed_prompt   TEXT    train.sample_tokens characters continuing
                                   train.sample_prompt, sampled with the run's seed
    attention/layer_<l>    IMAGES  layer l's heads side by side, for
                                   train.attention_prompt (at every evaluation, or
                                   every train.attention_interval steps)

The fixed seed and prompts make evaluations comparable: the same question is asked
of the model at step 500 and at step 3,500. Sampling uses its own torch.Generator and
the model in eval mode, so the training run's RNG streams, and its losses, are the
same with or without these views.
"""

import numpy as np
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from data.tokenizer import CharTokenizer
from model import GPT
from model.engine import generate
from model.sampling import Sampling
from training.config import RunConfig
from training.prompts import usable_prompt
from training.run_writer import RunWriter
from viz.attention_plot import attention_grid_figure
from viz.attention_weights import prompt_attention
from viz.fonts import text_font

# The README's sampling settings: varied enough to read, likely enough to be sensible.
SAMPLE_TEMPERATURE = 0.8
SAMPLE_TOP_K = 40


def figure_to_rgb(fig: Figure) -> np.ndarray:
    """Render a matplotlib figure with the Agg backend.

    Returns:
        (H, W, 3) uint8 array, H and W in pixels (inches x the figure's dpi).
    """
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
    """Logs a run's samples, attention heatmaps and hyperparameters to TensorBoard.

    Construction settles the prompts once (a prompt with characters the corpus lacks
    is replaced, with a `training.prompts.PromptFallbackWarning`) and the font for the
    heatmaps (a `viz.fonts.MissingGlyphWarning` if none can draw the prompt).

    Args:
        cfg: the run's config; uses seed, train.sample_prompt, train.sample_tokens
            (0: no sample) and train.attention_prompt ("": no heatmaps).
        tokenizer: the corpus's tokenizer.
        val_ids: (N,) token ids of the validation split, for the prompt fallback.
    """

    def __init__(self, cfg: RunConfig, tokenizer: CharTokenizer, val_ids: np.ndarray):
        t = cfg.train
        self.cfg = cfg
        self.tokenizer = tokenizer
        self.sample_prompt = ""
        if t.sample_tokens > 0:
            self.sample_prompt = usable_prompt(
                t.sample_prompt, tokenizer, val_ids, "train.sample_prompt"
            )
        self.attention_prompt = ""
        self.font = None
        if t.attention_prompt:
            self.attention_prompt = usable_prompt(
                t.attention_prompt,
                tokenizer,
                val_ids,
                "train.attention_prompt",
                max_chars=cfg.model.block_size,  # the explicit attention path's limit
            )
            self.font = text_font(self.attention_prompt)

    def encode(self, prompt: str) -> torch.Tensor:
        """(T,) int64 token ids of a prompt already known to be in the vocabulary."""
        return torch.from_numpy(self.tokenizer.encode(prompt).astype(np.int64))

    def sample(self, model: GPT) -> str:
        """train.sample_tokens characters after the sample prompt, with the run's seed.

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
            out = generate(model, idx, self.cfg.train.sample_tokens, sampling)
        finally:
            model.train(was_training)
        return self.tokenizer.decode(out[0].tolist())

    def attention_images(self, model: GPT, step: int) -> list[np.ndarray]:
        """One heatmap image per layer for the attention prompt, heads side by side.

        Returns:
            n_layer arrays, each (H, W, 3) uint8.
        """
        weights = prompt_attention(model, self.encode(self.attention_prompt))
        images = []
        for layer in range(weights.size(0)):
            fig = attention_grid_figure(
                weights[layer : layer + 1],
                self.attention_prompt,
                layers=[layer],
                font=self.font,
                title=f"step {step}: {self.attention_prompt!r}",
            )
            images.append(figure_to_rgb(fig))
        return images

    def log_evaluation(self, writer: RunWriter, model: GPT, step: int) -> None:
        """Write the fixed sample and the attention heatmaps at ``step``, then flush.
        Restores the model's train/eval mode."""
        if self.sample_prompt:
            text = self.sample(model)
            writer.sample(step, sample_markdown(self.sample_prompt, text, self.cfg.seed))
        if self.attention_due(step):
            writer.attention(step, self.attention_images(model, step))
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
