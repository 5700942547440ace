"""The training loop: batch -> forward -> loss -> backward -> AdamW step, with
deterministic evaluation, checkpoints and TensorBoard logging.

    from training import load_config, train
    result = train(load_config("configs/shakespeare_char_cpu.yaml", ["train.max_iters=100"]))
"""

import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import yaml
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from data import BatchSampler, evaluation_windows, prepare_corpus
from model import GPT, GPTConfig
from training.checkpoint import (
    capture_rng_state,
    load_checkpoint,
    restore_rng_state,
    save_checkpoint,
    strip_compiled_prefix,
)
from training.config import ConfigError, RunConfig
from training.device import autocast_context, resolve_device
from training.evaluate import evaluate_loss, nats_to_bits
from training.interrupt import StopRequest
from training.optim import build_optimizer
from training.schedule import learning_rate_at
from training.tensorboard_views import TensorBoardViews

CKPT_NAME = "ckpt.pt"  # latest state, for resuming
BEST_NAME = "best.pt"  # weights with the lowest validation loss so far
ARCHITECTURE_KEYS = ("n_layer", "n_head", "n_embd", "block_size", "bias")


class NonFiniteLossError(RuntimeError):
    """The loss became NaN or infinite; the last good checkpoint is kept."""


@dataclass
class TrainResult:
    """What a call to `train` did.

    Attributes:
        out_dir: the run folder.
        iter_num: optimizer steps completed in total (including before a resume).
        best_val_loss: lowest validation loss seen, nats per character.
        evals: one dict per evaluation: iter, seconds (wall time since this call
            started training), train_loss, val_loss (nats/char), val_bpc (bits/char).
        losses: {iteration: training loss in nats/char} for every logged iteration.
        interrupted: True if Ctrl-C / SIGTERM stopped the run early.
    """

    out_dir: Path
    iter_num: int = 0
    best_val_loss: float = math.inf
    evals: list = field(default_factory=list)
    losses: dict = field(default_factory=dict)
    interrupted: bool = False


def seed_everything(seed: int) -> None:
    """Seed python's, numpy's and torch's global RNGs (torch seeds CUDA too)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _resume_path(cfg: RunConfig) -> Path | None:
    """The checkpoint to resume from, or None for a fresh run.

    Raises:
        ConfigError: if a fresh run would overwrite an existing checkpoint, or a
            resume finds nothing to resume.
    """
    out_dir = Path(cfg.out_dir)
    ckpt_path = out_dir / CKPT_NAME
    if cfg.train.resume:
        if not ckpt_path.is_file():
            raise ConfigError(
                f"train.resume=true but there is no checkpoint at {ckpt_path}; "
                "drop train.resume to start a new run there"
            )
        return ckpt_path
    if ckpt_path.is_file() and not cfg.train.overwrite:
        raise ConfigError(
            f"{out_dir} already holds a checkpoint ({ckpt_path}). Continue it with "
            "train.resume=true, choose another out_dir=..., or replace it with "
            "train.overwrite=true"
        )
    return None


def _check_resume_compatible(ckpt: dict, cfg: RunConfig, vocab: list[str], path: Path) -> None:
    """Raises ConfigError if the checkpoint's architecture or vocabulary differs."""
    saved = ckpt["model_config"]
    problems = [
        f"model.{k} is {getattr(cfg.model, k)} but the checkpoint has {saved[k]}"
        for k in ARCHITECTURE_KEYS
        if getattr(cfg.model, k) != saved[k]
    ]
    if list(ckpt["vocab"]) != vocab:
        problems.append(
            f"the corpus's vocabulary ({len(vocab)} characters) differs from the "
            f"checkpoint's ({len(ckpt['vocab'])}); resume with the same data.path"
        )
    if problems:
        raise ConfigError(f"cannot resume from {path}:\n  - " + "\n  - ".join(problems))


class Trainer:
    """Owns everything a run needs: corpus, model, optimizer, batch sampler, writer.

    Construction does all the checking and loading (so bad input fails before any
    training); `run` trains.

    Args:
        cfg: a validated RunConfig (see `training.config.load_config`).

    Raises:
        ConfigError: for an unusable device, out_dir, vocab_size or resume.
        data.CorpusError: for an unusable corpus.
        training.checkpoint.CheckpointError: for an unreadable checkpoint on resume.
    """

    def __init__(self, cfg: RunConfig):
        self.cfg = cfg
        self.device = resolve_device(cfg.device)
        self.out_dir = Path(cfg.out_dir)
        resume_path = _resume_path(cfg)
        seed_everything(cfg.seed)

        d, tc = cfg.data, cfg.train
        self.corpus = prepare_corpus(d.path, d.val_fraction, d.cache_dir, d.decode_errors)
        self.corpus.check_fits(cfg.model.block_size)
        vocab_size = self.corpus.tokenizer.vocab_size
        if cfg.model.vocab_size not in (0, vocab_size):
            raise ConfigError(
                f"model.vocab_size is {cfg.model.vocab_size} but {d.path} has {vocab_size} "
                "distinct characters; leave model.vocab_size at 0 (it is set from the corpus)"
            )
        cfg.model.vocab_size = vocab_size

        ckpt = None
        if resume_path is not None:
            ckpt = load_checkpoint(resume_path)
            _check_resume_compatible(ckpt, cfg, self.corpus.tokenizer.chars, resume_path)
        # On resume the architecture is checked equal, so only dropout can differ.
        self.model = GPT(GPTConfig(**vars(cfg.model)))
        if ckpt is not None:
            self.model.load_state_dict(strip_compiled_prefix(ckpt["model"]))
        self.model.to(self.device)
        self.optimizer = build_optimizer(self.model, tc, self.device.type)
        self.sampler = BatchSampler(
            self.corpus.train_ids, cfg.model.block_size, tc.batch_size, cfg.seed, self.device
        )
        self.result = TrainResult(out_dir=self.out_dir)
        if ckpt is not None:
            self.optimizer.load_state_dict(ckpt["optimizer"])  # moved to the params' device
            self.sampler.load_state_dict(ckpt["rng"]["sampler"])
            restore_rng_state(ckpt["rng"], self.device)
            self.result.iter_num = ckpt["iter_num"]
            self.result.best_val_loss = ckpt["best_val_loss"]

        self.val_windows = evaluation_windows(self.corpus.val_ids, cfg.model.block_size)
        self.train_windows = evaluation_windows(
            self.corpus.train_ids, cfg.model.block_size, tc.eval_train_tokens
        )
        self.run_model = torch.compile(self.model) if tc.compile else self.model
        self.tokens_per_iter = tc.batch_size * tc.gradient_accumulation_steps * cfg.model.block_size
        self.writer = None
        self.views = TensorBoardViews(cfg, self.corpus.tokenizer, self.corpus.val_ids)
        self.started = time.perf_counter()

    def autocast(self):
        """Mixed-precision context for this device (bf16 on CUDA, else a no-op)."""
        return autocast_context(self.device)

    def train_step(self, step: int) -> tuple[torch.Tensor, torch.Tensor, float]:
        """One optimizer step over gradient_accumulation_steps micro-batches.

        Returns:
            (loss, grad_norm, lr): the mean training loss in nats/char and the
            gradient norm before clipping, both as device tensors (reading them
            syncs with the device, so callers do it only at log intervals), and the
            learning rate used.
        """
        tc = self.cfg.train
        lr = learning_rate_at(step, tc.learning_rate, tc.min_lr, tc.warmup_iters, tc.lr_decay_iters)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        loss_sum = torch.zeros((), device=self.device)
        for _ in range(tc.gradient_accumulation_steps):
            x, y = self.sampler.next_batch()
            with self.autocast():
                _, loss = self.run_model(x, y)
            # Scale so the accumulated gradient is the gradient of the mean loss.
            loss = loss / tc.gradient_accumulation_steps
            loss.backward()
            loss_sum += loss.detach()
        params = [p for p in self.model.parameters() if p.grad is not None]
        if tc.grad_clip > 0:
            grad_norm = torch.nn.utils.clip_grad_norm_(params, tc.grad_clip)
        else:
            grad_norm = torch.nn.utils.get_total_norm([p.grad for p in params])
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss_sum, grad_norm, lr

    def evaluate(self) -> dict:
        """Loss over the whole validation split and the fixed training sample.

        Returns:
            {"iter", "seconds", "train_loss", "val_loss" (nats/char), "val_bpc" (bits/char)}

        Raises:
            NonFiniteLossError: if the validation loss is NaN or infinite.
        """
        bs = self.cfg.train.eval_batch_size
        val_loss = evaluate_loss(self.run_model, *self.val_windows, bs, self.device, self.autocast)
        train_loss = evaluate_loss(
            self.run_model, *self.train_windows, bs, self.device, self.autocast
        )
        if not math.isfinite(val_loss):
            raise NonFiniteLossError(
                f"the validation loss is {val_loss} at iteration {self.result.iter_num}; the "
                f"last good checkpoint in {self.out_dir} is kept. Lower train.learning_rate."
            )
        return {
            "iter": self.result.iter_num,
            "seconds": time.perf_counter() - self.started,
            "train_loss": train_loss,
            "val_loss": val_loss,
            "val_bpc": nats_to_bits(val_loss),
        }

    def checkpoint(self, with_training_state: bool = True) -> dict:
        """The checkpoint payload (see `training.checkpoint`); without the training
        state it holds only what sampling needs."""
        payload = {
            "model": self.model.state_dict(),
            "model_config": vars(self.model.config).copy(),
            "vocab": self.corpus.tokenizer.chars,
            "config": self.cfg.to_dict(),
            "iter_num": self.result.iter_num,
            "best_val_loss": self.result.best_val_loss,
        }
        if with_training_state:
            payload["optimizer"] = self.optimizer.state_dict()
            payload["rng"] = {
                **capture_rng_state(self.device),
                "sampler": self.sampler.state_dict(),
            }
        return payload

    def evaluate_and_save(self) -> None:
        """Evaluate, log to TensorBoard, write ckpt.pt (and best.pt if improved)."""
        ev = self.evaluate()
        step = ev["iter"]
        self.writer.add_scalar("val/loss", ev["val_loss"], step)
        self.writer.add_scalar("val/bpc", ev["val_bpc"], step)
        self.writer.add_scalar("train/eval_loss", ev["train_loss"], step)
        self.writer.add_scalar("train/eval_bpc", nats_to_bits(ev["train_loss"]), step)
        self.writer.flush()
        self.result.evals.append(ev)
        improved = ev["val_loss"] < self.result.best_val_loss
        if improved:
            self.result.best_val_loss = ev["val_loss"]
        self.views.log_evaluation(self.writer, self.model, step, self.result.best_val_loss)
        tqdm.write(
            f"step {step}: train {ev['train_loss']:.4f}, val {ev['val_loss']:.4f} nats/char "
            f"({ev['val_bpc']:.4f} bits/char), {ev['seconds']:.0f} s"
            + (" *best*" if improved else "")
        )
        save_checkpoint(self.checkpoint(), self.out_dir / CKPT_NAME)
        if improved:
            save_checkpoint(self.checkpoint(with_training_state=False), self.out_dir / BEST_NAME)

    def log_step(self, loss_sum: torch.Tensor, grad_norm: torch.Tensor, lr: float, rate: float):
        """Write the training scalars for the current step; raise on a non-finite loss."""
        step = self.result.iter_num
        loss = loss_sum.item()  # the one host-device sync between log intervals
        if not math.isfinite(loss):
            raise NonFiniteLossError(
                f"the training loss is {loss} at iteration {step}; the last good checkpoint "
                f"in {self.out_dir} is kept. Lower train.learning_rate or raise "
                "train.warmup_iters."
            )
        self.result.losses[step] = loss
        self.writer.add_scalar("train/loss", loss, step)
        self.writer.add_scalar("train/lr", lr, step)
        self.writer.add_scalar("train/grad_norm", float(grad_norm), step)
        self.writer.add_scalar("train/tokens_per_sec", rate, step)
        return {"loss": f"{loss:.4f}", "lr": f"{lr:.2e}", "tok/s": f"{rate:,.0f}"}

    def run(self) -> TrainResult:
        """Train from the current iteration to train.max_iters (see `train`)."""
        cfg, tc, result = self.cfg, self.cfg.train, self.result
        self.out_dir.mkdir(parents=True, exist_ok=True)
        (self.out_dir / "config.yaml").write_text(
            yaml.safe_dump(cfg.to_dict(), sort_keys=False, allow_unicode=True), encoding="utf-8"
        )
        start = result.iter_num
        # On resume, drop events a stopped run may have logged after its checkpoint.
        self.writer = SummaryWriter(str(self.out_dir), purge_step=start + 1 if start else None)
        self.views.log_hparams(self.writer)
        tqdm.write(
            f"training on {self.device}: {self.model.num_params() / 1e6:.2f} M parameters, "
            f"vocab {cfg.model.vocab_size}, {self.tokens_per_iter} tokens/step, "
            f"steps {start}..{tc.max_iters} -> {self.out_dir}"
        )
        self.started = time.perf_counter()
        last_log_time, last_log_step = self.started, start
        progress = tqdm(total=tc.max_iters, initial=start, unit="step", dynamic_ncols=True)
        self.model.train()
        try:
            with StopRequest() as stop:
                for step in range(start, tc.max_iters):
                    if stop.requested:
                        result.interrupted = True
                        break
                    loss_sum, grad_norm, lr = self.train_step(step)
                    result.iter_num = step + 1
                    progress.update(1)
                    if result.iter_num % tc.log_interval == 0:
                        now = time.perf_counter()
                        steps = result.iter_num - last_log_step
                        rate = self.tokens_per_iter * steps / (now - last_log_time)
                        progress.set_postfix(self.log_step(loss_sum, grad_norm, lr, rate))
                        last_log_time, last_log_step = now, result.iter_num
                    if result.iter_num % tc.eval_interval == 0 or result.iter_num == tc.max_iters:
                        self.evaluate_and_save()
                        last_log_time = time.perf_counter()  # keep eval time out of tokens/s
            if result.interrupted:
                save_checkpoint(self.checkpoint(), self.out_dir / CKPT_NAME)
                tqdm.write(
                    f"interrupted at step {result.iter_num}; checkpoint saved to "
                    f"{self.out_dir / CKPT_NAME}. Resume with the same command plus "
                    "train.resume=true"
                )
            elif start >= tc.max_iters:
                tqdm.write(f"nothing to do: the run already has {start} steps (train.max_iters)")
        finally:
            progress.close()
            self.writer.close()
        return result


def train(cfg: RunConfig) -> TrainResult:
    """Train a GPT as ``cfg`` describes; write checkpoints, config.yaml and
    TensorBoard events to ``cfg.out_dir``.

    Every ``train.eval_interval`` steps and at the end, the whole validation split
    and a fixed sample of the training split are evaluated (nats and bits per
    character), ``ckpt.pt`` is written (and ``best.pt`` when validation improves).
    Ctrl-C or SIGTERM saves ``ckpt.pt`` and returns with ``interrupted=True``.

    Returns:
        A `TrainResult`.

    Raises:
        ConfigError, data.CorpusError, training.checkpoint.CheckpointError: bad input,
            before any training (see `Trainer`).
        NonFiniteLossError: if the loss becomes NaN or infinite.
    """
    return Trainer(cfg).run()
