"""What a run continues from: the checkpoint of train.resume, checked against the run
before anything is built, and put back once the model, optimizer and sampler exist.

    resume = Resume.load(folder.resume_path, cfg, corpus, corpus_record(corpus), device)
    ...  # build the model, optimizer, sampler as for a new run
    resume.restore(model, average, optimizer, sampler, dist, device)

A new run's `Resume` is empty (no checkpoint): it starts at step 0, changes nothing
and restores nothing, so the trainer builds both kinds of run the same way.
"""

import math
from dataclasses import dataclass, field
from pathlib import Path

import torch

from data.batches import BatchSampler
from data.corpus import Corpus
from model import GPT
from model.checkpoint import load_checkpoint
from training.checkpoint import (
    CORPUS_KEY,
    ENVIRONMENT_KEY,
    check_corpus_on_resume,
    check_resume,
    corpus_changes,
    restore_training_state,
)
from training.config import RunConfig
from training.distributed import DistContext
from training.optim import WeightAverage
from training.precision import restore_loss_scaling, saved_dtype


@dataclass
class Resume:
    """The checkpoint a run continues from, already checked against the run.

    Attributes:
        ckpt: the checkpoint dict (`model.checkpoint` lists its keys), with train.dtype
            filled in for a checkpoint from before that key; None for a new run.
        changed_settings: 'key: old -> new' for each setting the resume changes.
        corpus_notes: what the run says about its corpus against the checkpoint's.
        corpus_changed: the splits' text differs (train.accept_changed_corpus let it
            through), so the old best validation loss does not compare.
    """

    ckpt: dict | None = None
    changed_settings: list[str] = field(default_factory=list)
    corpus_notes: list[str] = field(default_factory=list)
    corpus_changed: bool = False

    @classmethod
    def load(
        cls,
        path: Path | None,
        cfg: RunConfig,
        corpus: Corpus,
        record: dict,
        device: torch.device,
    ) -> "Resume":
        """Read the checkpoint at ``path`` and check that ``cfg`` on ``corpus`` (whose
        `training.checkpoint.corpus_record` is ``record``) may continue it on
        ``device``; an empty Resume if ``path`` is None (a new run).

        Raises:
            model.checkpoint.CheckpointError: for an unreadable checkpoint.
            ConfigError: for an architecture, vocabulary, split or corpus the
                checkpoint's run did not have (see `training.checkpoint.check_resume`
                and `check_corpus_on_resume`).
        """
        if path is None:
            return cls()
        ckpt = load_checkpoint(path)
        # A checkpoint from before train.dtype: what its run computed in.
        ckpt["config"].setdefault("train", {})["dtype"] = saved_dtype(ckpt, device)
        changed = check_resume(ckpt, cfg, corpus.tokenizer.chars, path)
        accept = cfg.train.accept_changed_corpus
        notes = check_corpus_on_resume(ckpt, record, accept, path)
        saved_record = ckpt.get(CORPUS_KEY)
        corpus_changed = bool(saved_record and corpus_changes(saved_record, record))
        return cls(ckpt, changed, notes, corpus_changed)

    @property
    def iter_num(self) -> int:
        """The step the run starts from: the checkpoint's, or 0."""
        return self.ckpt["iter_num"] if self.ckpt else 0

    @property
    def best_val_loss(self) -> float:
        """The best validation loss so far (nats/char): the checkpoint's, or inf for a
        new run and on a changed corpus, whose old split's losses do not compare (the
        best, and best.pt, are then judged again on the split as it is now)."""
        if not self.ckpt or self.corpus_changed:
            return math.inf
        return self.ckpt["best_val_loss"]

    @property
    def saved_lr_decay_iters(self) -> int | None:
        """The schedule's length the checkpoint's run resolved, or None."""
        return self.ckpt["config"]["train"]["lr_decay_iters"] if self.ckpt else None

    @property
    def saved_environment(self) -> dict | None:
        """The checkpoint's environment record (torch, device, threads), or None."""
        return self.ckpt.get(ENVIRONMENT_KEY) if self.ckpt else None

    def restore(
        self,
        model: GPT,
        average: WeightAverage | None,
        optimizer: torch.optim.Optimizer,
        sampler: BatchSampler,
        dist: DistContext,
        device: torch.device,
    ) -> None:
        """Put the checkpoint's weights, weight average, optimizer state and this
        rank's RNG and sampler states back (nothing for a new run). The architecture
        was checked equal in `load`: only dropout may differ.

        Raises:
            ConfigError: see `training.checkpoint.restore_training_state`.
        """
        if self.ckpt:
            restore_training_state(self.ckpt, model, average, optimizer, sampler, dist, device)

    def restore_loss_scaling(self, scaler: torch.amp.GradScaler) -> int:
        """Put float16's loss scale back (see `training.precision.restore_loss_scaling`).

        Returns:
            The optimizer steps loss scaling skipped before the checkpoint (0 for a new
            run).
        """
        return restore_loss_scaling(self.ckpt, scaler) if self.ckpt else 0
