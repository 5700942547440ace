"""Deterministic evaluation: next-character loss over fixed windows.

Periodic evaluations score a fixed sample of each split, capped by train.eval_tokens
(validation; the whole split when it is shorter, as Tiny Shakespeare's 111,540
characters are) and train.eval_train_tokens (training): the same windows at every
evaluation, so two evaluations, or two runs, compare exactly, and their cost does not
grow with the corpus. The whole validation split (every character after its first,
in non-overlapping windows of block_size) is scored once at the end of training, and
by evaluate.py. All in nats per character (and bits: nats / ln 2). The loss over
windows is `model.scoring`'s; this module adds the fixed samples of a run and the
data-parallel sum.
"""

import math
import time

import torch
from torch import nn

from data.batches import EvaluationWindows
from data.corpus import Corpus
from model.scoring import nats_to_bits, rows_per_forward, windows_loss
from training.distributed import DistContext, NonFiniteLossError, all_reduce


class WholeSplitStopped(Exception):
    """Raised by `Evaluator.final_val_loss` when asked to stop part-way."""


class Evaluator:
    """The fixed evaluation windows of a run, and the losses of a model over them.

    Periodic evaluations score at most train.eval_tokens characters of the validation
    split (evenly spread windows; the whole split when it is shorter, as Tiny
    Shakespeare's is) and train.eval_train_tokens of the training split, so their cost
    does not grow with the corpus; `whole_split_loss` scores every character of a split.

    Under data parallelism the windows are dealt out across ranks (rank r takes every
    world_size-th) and the summed losses and counts are all-reduced, so every rank
    gets the same numbers.

    Args:
        corpus: the prepared corpus.
        cfg: the run config (a RunConfig); uses model.block_size (window length),
            train.eval_tokens, train.eval_train_tokens (sample sizes) and
            train.eval_batch_size (windows per forward pass; fewer for a large
            vocabulary, see `rows_per_forward`, and ``note`` says so).
        dist: this process's place in the job.
        device: where to evaluate.
        autocast: factory of the mixed-precision context (see `model.device`).
    """

    def __init__(self, corpus: Corpus, cfg, dist: DistContext, device: torch.device, autocast=None):
        T, tc = cfg.model.block_size, cfg.train
        self.corpus, self.block_size = corpus, T
        self.windows = {
            "val": EvaluationWindows(corpus.val_ids, T, tc.eval_tokens),
            "train": EvaluationWindows(corpus.train_ids, T, tc.eval_train_tokens),
        }
        # The model's vocabulary sizes the logits (evaluate.py --data-path may score a
        # corpus with fewer characters).
        vocab = cfg.model.vocab_size or corpus.tokenizer.vocab_size
        self.batch_size = rows_per_forward(tc.eval_batch_size, tc.batch_size, T, vocab)
        self.dist, self.device, self.autocast = dist, device, autocast
        # What the run says at its start when the evaluation batch was lowered.
        self.note = ""
        if self.batch_size < tc.eval_batch_size:
            mb = 4 * self.batch_size * T * vocab / 1e6
            self.note = (
                f"note: evaluation runs {self.batch_size} windows per forward pass, not "
                f"train.eval_batch_size={tc.eval_batch_size}: with {vocab:,} characters "
                f"their logits take {mb:,.0f} MB, as a training step's do"
            )

    def evaluate(self, model: nn.Module, step: int, seconds: float) -> dict:
        """One evaluation of ``model`` after ``step`` steps, ``seconds`` into the run.

        Returns:
            {"iter", "seconds", "train_loss", "val_loss" (nats/char), "val_bpc" (bits/char)}

        Raises:
            NonFiniteLossError: if the validation loss is NaN or infinite.
        """
        losses = self.losses(model)
        if not math.isfinite(losses["val"]):
            raise NonFiniteLossError(
                f"the validation loss is {losses['val']} at iteration {step}; the last good "
                "checkpoint is kept. Lower train.learning_rate."
            )
        return {
            "iter": step,
            "seconds": seconds,
            "train_loss": losses["train"],
            "val_loss": losses["val"],
            "val_bpc": nats_to_bits(losses["val"]),
        }

    @property
    def periodic_val_covers_split(self) -> bool:
        """True if each periodic evaluation already scores the whole validation split."""
        return self.windows["val"].covers_split

    def losses(self, model: nn.Module) -> dict[str, float]:
        """{"val": loss, "train": loss}, mean cross-entropy in nats per character over
        the fixed windows (model in eval mode while evaluating; its mode is restored)."""
        return {split: self.mean_loss(model, w) for split, w in self.windows.items()}

    def whole_split_windows(self, split: str = "val", id_map=None) -> EvaluationWindows:
        """Windows that score every character of ``split`` ("val", "train" or "test")
        after its first (``id_map``: see `data.batches.EvaluationWindows`)."""
        c = self.corpus
        ids = {"train": c.train_ids, "val": c.val_ids, "test": c.test_ids}[split]
        return EvaluationWindows(ids, self.block_size, id_map=id_map)

    def whole_split_loss(self, model: nn.Module, split: str = "val", on_windows=None) -> float:
        """Mean cross-entropy in nats per character over every character of ``split``
        after its first (`whole_split_windows`; see `mean_loss` for ``on_windows``)."""
        return self.mean_loss(model, self.whole_split_windows(split), on_windows)

    def mean_loss(self, model: nn.Module, windows: EvaluationWindows, on_windows=None) -> float:
        """Mean cross-entropy in nats per character over ``windows``, dealt out across
        ranks and all-reduced.

        Args:
            on_windows: called with the number of this rank's windows after each
                batch (a progress bar).
        """
        rank, world = self.dist.rank, self.dist.world_size
        batches = windows.batches(self.batch_size, rank, world)
        total, count = windows_loss(model, batches, self.device, self.autocast, on_windows)
        totals = torch.stack([total, torch.tensor(count, dtype=total.dtype, device=self.device)])
        all_reduce(totals, self.dist)
        return (totals[0] / totals[1]).item()

    def final_val_loss(
        self, model: nn.Module, evals: list[dict], iter_num: int, should_stop, say
    ) -> tuple[float, str]:
        """The whole validation split's loss when training ends, in nats per character.

        The last periodic number is reused when the periodic evaluation covered the
        whole split and ran at ``iter_num``; otherwise the split is scored (announced
        through ``say``) and the time it took is reported.

        Args:
            model: the model to score (the weight average when there is one).
            evals: the run's periodic evaluations (see `evaluate`), oldest first.
            iter_num: the step training ended at.
            should_stop: called after each batch; True stops the scoring.
            say: prints one line.

        Returns:
            (loss, how): the loss and a few words on how it was obtained.

        Raises:
            WholeSplitStopped: if ``should_stop()`` returned True.
        """
        last = evals[-1] if evals else None
        if self.periodic_val_covers_split and last is not None and last["iter"] == iter_num:
            return last["val_loss"], "the last evaluation covered it"
        say(f"evaluating the whole validation split ({len(self.corpus.val_ids):,} characters)")
        started = time.perf_counter()

        def stop_if_asked(_windows: int) -> None:
            if should_stop():
                raise WholeSplitStopped

        loss = self.whole_split_loss(model, "val", stop_if_asked)
        return loss, f"{time.perf_counter() - started:.0f} s"
