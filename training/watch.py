"""Watching a run learn: after each step the loop asks `RunWatch` whether anything is
due, and it takes the snapshot (`training.snapshots`), logs the heads' scores
(`viz.head_scores`) and the snapshot's sample to TensorBoard; at the end of the run it
says which heads formed and what the run's curves suggest changing
(`training.diagnose`). Rank 0 only: the other ranks' `RunWatch` does nothing.

What it costs: a snapshot is one float16 copy of the weights, a score of
SNAPSHOT_VAL_TOKENS validation characters between evaluations and a sample of
SNAPSHOT_SAMPLE_TOKENS characters; head scores are two forward passes of at most
block_size characters. docs/watching.md gives the measured figures and the command
that measures them.
"""

import numpy as np
import torch

from data.batches import EvaluationWindows
from model import GPT
from model.scoring import mean_windows_loss, nats_to_bits
from training.checkpoint import checkpoint_contents
from training.diagnose import diagnose, read_run
from training.snapshots import SNAPSHOT_SAMPLE_TOKENS, SNAPSHOT_VAL_TOKENS, SnapshotKeeper
from viz.head_scores import head_scores, induction_ids, induction_period
from viz.run_events import HEAD_SCORE, SNAPSHOT_TEXT


def snapshot_markdown(step: int, val_loss: float, sample: str) -> str:
    """A snapshot's TensorBoard text: its step and validation loss, then its sample as
    a code block (indented four spaces, so line breaks survive)."""
    header = (
        f"step {step}: validation loss {val_loss:.3f} nats/char ({nats_to_bits(val_loss):.3f} bits)"
    )
    if not sample:
        return header
    return header + "\n\n" + "\n".join("    " + line for line in sample.split("\n"))


class RunWatch:
    """Snapshots, head scores and the end-of-run lines of one run.

    Args:
        trainer: the `training.loop.Trainer` (its cfg, corpus, dist, device, autocast,
            report and out_dir are read).
        start: the step training starts from.
    """

    def __init__(self, trainer, start: int):
        cfg, self.trainer = trainer.cfg, trainer
        self.active = trainer.dist.is_main
        if not self.active:
            return
        T = cfg.model.block_size
        val_ids = trainer.corpus.val_ids
        self.keeper = SnapshotKeeper(
            trainer.out_dir, cfg.train.max_iters, cfg.train.snapshots, start
        )
        self.text_ids = torch.from_numpy(np.asarray(val_ids[:T], dtype=np.int64))
        self.repeat_ids = induction_ids(cfg.model.vocab_size, induction_period(T))
        self.windows = EvaluationWindows(val_ids, T, SNAPSHOT_VAL_TOKENS)

    def after_step(self, step: int, model: GPT) -> None:
        """After optimizer step ``step`` (and its evaluation, if any): log head scores
        at an evaluation or a snapshot, and take the snapshot if one is due. ``model``:
        the weights evaluated and sampled (`Trainer.evaluated_models`)."""
        if not self.active:
            return
        t, result = self.trainer, self.trainer.result
        ev = result.evals[-1] if result.evals and result.evals[-1]["iter"] == step else None
        best = ev is not None and ev["val_loss"] <= result.best_val_loss
        snapshot = self.keeper.due(step, best)
        if ev is None and not snapshot:
            return
        writer = t.report.writer
        with t.report.part("views"):
            if len(self.text_ids) >= 2:
                self.log_head_scores(writer, step, model)
            if snapshot:
                self.take_snapshot(writer, step, model, ev, best)
            writer.flush()

    def log_head_scores(self, writer, step: int, model: GPT) -> None:
        """Each head's four scores (`viz.head_scores.MEASURES`) to TensorBoard."""
        device = next(model.parameters()).device
        with self.trainer.autocast():  # the run's precision, as every other forward pass
            scores = head_scores(model, self.text_ids.to(device), self.repeat_ids.to(device))
        for measure, table in scores.items():
            for (layer, head), value in np.ndenumerate(table.numpy()):
                tag = HEAD_SCORE.format(measure=measure, layer=layer, head=head)
                writer.writer.add_scalar(tag, float(value), step)

    def take_snapshot(self, writer, step: int, model: GPT, ev: dict | None, best: bool) -> None:
        """Write the snapshot after ``step``, with the evaluation's validation loss
        (``ev``) or a score of the first SNAPSHOT_VAL_TOKENS validation characters."""
        t = self.trainer
        if ev is not None:
            val_loss = ev["val_loss"]
            val_chars = min(t.cfg.train.eval_tokens, len(t.corpus.val_ids))
        else:
            batch = t.evaluator.batch_size
            windows = self.windows.batches(batch)
            val_loss = mean_windows_loss(model, windows, t.device, t.autocast)
            val_chars = SNAPSHOT_VAL_TOKENS
        views = t.report.views
        sample = ""
        if views is not None and views.sample_prompt:
            sample = views.sample_start(model, step, SNAPSHOT_SAMPLE_TOKENS)
        contents = checkpoint_contents(
            model, t.corpus.tokenizer, t.cfg, step, t.result.best_val_loss
        )
        self.keeper.take(step, contents, model, val_loss, val_chars, sample, best)
        writer.writer.add_text(SNAPSHOT_TEXT, snapshot_markdown(step, val_loss, sample), step)

    def end_lines(self) -> list[str]:
        """What the run says when it ends: the heads that formed and the diagnosis's
        verdicts (`training.diagnose`), read back from the run folder."""
        if not self.active:
            return []
        self.trainer.report.writer.flush()
        t = self.trainer
        record = read_run(t.out_dir, t.cfg.to_dict(), t.model, t.corpus_record)
        return [*record.formed_heads(), *diagnose(record)]
