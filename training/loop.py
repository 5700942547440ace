"""The training loop: batch -> forward -> loss -> backward -> AdamW step, with
deterministic evaluation, checkpoints and TensorBoard logging.

    from training import load_config, train
    result = train(load_config("configs/shakespeare_char_cpu.yaml", ["train.max_iters=100"]))
"""

import contextlib
import copy
import dataclasses
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import yaml
from torch.distributed import ReduceOp
from torch.nn.parallel import DistributedDataParallel

from data import BatchSampler, evaluation_windows, prepare_corpus
from model import GPT, GPTConfig
from training.checkpoint import (
    capture_rng_state,
    load_checkpoint,
    restore_rng_state,
    save_checkpoint,
    strip_compiled_prefix,
)
from training.config import ConfigError, RunConfig, flatten
from training.console import Console
from training.device import autocast_context
from training.distributed import (
    all_reduce,
    gather_to_main,
    init_distributed,
    shutdown_distributed,
)
from training.evaluate import nats_to_bits, summed_loss
from training.interrupt import StopRequest
from training.optim import build_optimizer
from training.run_folder import BEST_NAME, CKPT_NAME, CONFIG_NAME, RunFolder
from training.run_writer import RunWriter
from training.schedule import resolve_schedule_length, scheduled_learning_rate
from training.tensorboard_views import TensorBoardViews

# Everything in GPTConfig that fixes the weights' shapes or meaning (not dropout).
ARCHITECTURE_KEYS = tuple(
    f.name for f in dataclasses.fields(GPTConfig) if f.name not in ("dropout", "vocab_size")
)


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
        losses: {iteration: training loss in nats/char} for every logged iteration
            (the loss of that iteration's batches, averaged over ranks).
        interrupted: True if Ctrl-C / SIGTERM stopped the run early.
        signal: the signal number that stopped it, if any.
        rank: this process's rank (0 unless launched by torchrun).
    """

    out_dir: Path
    iter_num: int = 0
    best_val_loss: float = math.inf
    evals: list = field(default_factory=list)
    losses: dict = field(default_factory=dict)
    interrupted: bool = False
    signal: int | None = None
    rank: int = 0


def seed_everything(seed: int) -> None:
    """Seed python's, numpy's and torch's global RNGs (torch seeds CUDA too)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _changed_settings(saved: dict, current: dict) -> list[str]:
    """'key: old -> new' for every setting that differs (run-control keys left out)."""
    ignored = {
        "train.resume",
        "train.max_iters",
        "train.overwrite",
        "model.vocab_size",
        "train.lr_decay_iters",  # said by the schedule line
    }
    old = flatten(saved)
    return [
        f"{key}: {old.get(key)} -> {value}"
        for key, value in flatten(current).items()
        if key not in ignored and old.get(key) != value
    ]


def _check_resume_compatible(ckpt: dict, cfg: RunConfig, vocab: list[str], path: Path) -> None:
    """Raises ConfigError if the checkpoint's architecture or vocabulary differs."""
    saved = ckpt["model_config"]
    problems = [
        f"model.{k} is {getattr(cfg.model, k)} but the checkpoint has {saved[k]}"
        for k in ARCHITECTURE_KEYS
        if getattr(cfg.model, k) != saved.get(k, getattr(GPTConfig(), k))
    ]
    saved_data = ckpt["config"]["data"]
    if saved_data["val_fraction"] != cfg.data.val_fraction:
        problems.append(
            f"data.val_fraction is {cfg.data.val_fraction} but the run used "
            f"{saved_data['val_fraction']}: its validation losses would not compare"
        )
    saved_normalization = ckpt.get("normalization", "none")
    if saved_normalization != cfg.data.normalization:
        problems.append(
            f"data.normalization is {cfg.data.normalization} but the run used "
            f"{saved_normalization}: resume with data.normalization={saved_normalization}"
        )
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

    Under torchrun (see `training.distributed`) each rank builds a Trainer: ranks
    draw different batches, gradients are averaged by DDP, evaluation is split
    across ranks and summed, and rank 0 alone writes files.

    Args:
        cfg: a validated RunConfig (see `training.config.load_config`).

    Raises:
        ConfigError: for an unusable device, out_dir, vocab_size or resume.
        data.CorpusError: for an unusable corpus.
        training.checkpoint.CheckpointError: for an unreadable checkpoint on resume.
    """

    def __init__(self, cfg: RunConfig):
        # config.yaml records the config as given (vocab_size 0: "from the corpus"),
        # so it can be reused on another corpus; the working copy is resolved below.
        self.given_cfg = cfg
        cfg = self.cfg = copy.deepcopy(cfg)
        self.dist, self.device = init_distributed(cfg.device)
        self.out_dir = Path(cfg.out_dir)
        self.folder = RunFolder(
            self.out_dir, cfg.train.resume, cfg.train.overwrite, lock=self.dist.is_main
        )
        try:
            self._setup(cfg, self.folder.resume_path)
        except BaseException:
            self.close(started=False)  # unlock, and leave nothing behind
            raise

    def _setup(self, cfg: RunConfig, resume_path: Path | None) -> None:
        """Everything after the folder checks: corpus, model, optimizer, sampler."""
        seed_everything(cfg.seed)

        d, tc = cfg.data, cfg.train
        self.console = Console(enabled=self.dist.is_main)
        self.corpus = prepare_corpus(
            d.path, d.val_fraction, d.cache_dir, d.decode_errors, d.normalization
        )
        self.say(self.corpus.origin)
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
        tc.lr_decay_iters, self.schedule_note = resolve_schedule_length(
            tc,
            ckpt["config"]["train"]["lr_decay_iters"] if ckpt else None,
            ckpt["iter_num"] if ckpt else 0,
        )
        if ckpt is not None:
            self.changed_on_resume = _changed_settings(ckpt["config"], cfg.to_dict())
        # On resume the architecture is checked equal, so only dropout can differ.
        self.model = GPT(GPTConfig(**vars(cfg.model)))
        if ckpt is not None:
            self.model.load_state_dict(strip_compiled_prefix(ckpt["model"]))
        self.model.to(self.device)
        self.optimizer = build_optimizer(self.model, tc, self.device.type)
        # Listed once, not rebuilt on every step (tied weights appear once).
        self.trainable = [p for p in self.model.parameters() if p.requires_grad]
        # Each rank draws its own batches; rank 0 keeps the single-process stream.
        self.sampler = BatchSampler(
            self.corpus.train_ids,
            cfg.model.block_size,
            tc.batch_size,
            cfg.seed + self.dist.rank,
            self.device,
        )
        self.result = TrainResult(out_dir=self.out_dir, rank=self.dist.rank)
        if ckpt is not None:
            try:
                self.optimizer.load_state_dict(ckpt["optimizer"])  # moved to params' device
            except (ValueError, KeyError) as e:
                raise ConfigError(
                    f"cannot resume from {resume_path}: its optimizer state does not fit "
                    f"train.optimizer={tc.optimizer} ({e}); resume with the run's optimizer"
                ) from None
            self._restore_rng(ckpt["rng"], resume_path)
            self.result.iter_num = ckpt["iter_num"]
            self.result.best_val_loss = ckpt["best_val_loss"]

        # Evaluation windows are split across ranks; their losses are summed.
        rank, world = self.dist.rank, self.dist.world_size
        val_x, val_y = evaluation_windows(self.corpus.val_ids, cfg.model.block_size)
        train_x, train_y = evaluation_windows(
            self.corpus.train_ids, cfg.model.block_size, tc.eval_train_tokens
        )
        self.val_windows = (val_x[rank::world], val_y[rank::world])
        self.train_windows = (train_x[rank::world], train_y[rank::world])
        self.run_model = torch.compile(self.model) if tc.compile else self.model
        # Evaluation bypasses DDP, whose forward expects a backward pass to follow.
        self.eval_model = self.run_model
        if self.dist.enabled:
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.run_model = DistributedDataParallel(self.run_model, device_ids=ids)
        self.tokens_per_iter = (
            tc.batch_size * tc.gradient_accumulation_steps * cfg.model.block_size * world
        )
        self.writer = None
        if resume_path is None:
            self.changed_on_resume = []
        self.views = TensorBoardViews(cfg, self.corpus.tokenizer, self.corpus.val_ids)
        self.started = time.perf_counter()
        # First iteration (1-based, as logged) whose loss was NaN/inf, or -1. It stays
        # on the device, so checking costs no sync per step; read before logs and saves.
        self.first_nonfinite_step = torch.full((), -1, dtype=torch.long, device=self.device)

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
        lr = scheduled_learning_rate(step, tc)
        for group in self.optimizer.param_groups:
            group["lr"] = lr * group["lr_scale"]
        loss_sum = torch.zeros((), device=self.device)
        for micro_step in range(tc.gradient_accumulation_steps):
            x, y = self.sampler.next_batch()
            # Under DDP, gradients are averaged across ranks on the last micro-step only.
            last = micro_step == tc.gradient_accumulation_steps - 1
            sync = (
                self.run_model.no_sync()
                if self.dist.enabled and not last
                else contextlib.nullcontext()
            )
            with sync:
                with self.autocast():
                    _, loss = self.run_model(x, y)
                    # Scale so the accumulated gradient is the gradient of the mean loss.
                    loss = loss / tc.gradient_accumulation_steps
                loss.backward()
            loss_sum += loss.detach()
        newly_bad = (self.first_nonfinite_step < 0) & ~torch.isfinite(loss_sum)
        self.first_nonfinite_step = torch.where(newly_bad, step + 1, self.first_nonfinite_step)
        if tc.grad_clip > 0:
            grad_norm = torch.nn.utils.clip_grad_norm_(self.trainable, tc.grad_clip)
        else:
            grad_norm = torch.nn.utils.get_total_norm(
                [p.grad for p in self.trainable if p.grad is not None]
            )
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
        losses = []
        for x, y in (self.val_windows, self.train_windows):
            total, count = summed_loss(
                self.eval_model, x, y, self.cfg.train.eval_batch_size, self.device, self.autocast
            )
            totals = torch.stack(
                [total, torch.tensor(count, dtype=torch.float64, device=self.device)]
            )
            all_reduce(totals, self.dist)  # every rank gets the same loss
            losses.append((totals[0] / totals[1]).item())
        val_loss, train_loss = losses
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
            "normalization": self.corpus.tokenizer.normalization,
            "config": self.cfg.to_dict(),
            "iter_num": self.result.iter_num,
            "best_val_loss": self.result.best_val_loss,
        }
        if with_training_state:
            payload["optimizer"] = self.optimizer.state_dict()
            rng = {**capture_rng_state(self.device), "sampler": self.sampler.state_dict()}
            payload["rng"] = {
                "world_size": self.dist.world_size,
                "ranks": gather_to_main(rng, self.dist),
            }
        return payload

    def _restore_rng(self, saved: dict, path: Path) -> None:
        """Give each rank back its own RNG and sampler states from the checkpoint.

        Raises:
            ConfigError: if the checkpoint was written by a different number of ranks.
        """
        if saved["world_size"] != self.dist.world_size:
            raise ConfigError(
                f"{path} was written by {saved['world_size']} process(es) and this run has "
                f"{self.dist.world_size}: resume with torchrun --nproc_per_node="
                f"{saved['world_size']} (or without torchrun for 1) to continue exactly"
            )
        state = saved["ranks"][self.dist.rank]
        self.sampler.load_state_dict(state["sampler"])
        restore_rng_state(state, self.device)

    def say(self, message: str) -> None:
        """Print a line for the person running this (rank 0 only; see `Console`)."""
        self.console.say(message)

    def close(self, started: bool = True) -> None:
        """Release the run folder (its lock is also released when the process ends;
        ``started=False`` after a failed start also removes what the start created)
        and, under DDP, the DistributedDataParallel wrapper, whose gradient reducer
        must be gone before the process group is destroyed."""
        self.folder.release(started)
        if isinstance(getattr(self, "run_model", None), DistributedDataParallel):
            self.run_model = self.eval_model

    def check_finite(self) -> None:
        """Raise NonFiniteLossError if any training loss so far was NaN or infinite
        (on any rank); called before every log and save, so no non-finite model is
        ever written."""
        bad = all_reduce(self.first_nonfinite_step.clone(), self.dist, op=ReduceOp.MAX)
        bad_step = int(bad)
        if bad_step >= 0:
            kept = (
                f"the last good checkpoint in {self.out_dir} is kept"
                if (self.out_dir / CKPT_NAME).is_file()
                else "no checkpoint had been written yet"
            )
            raise NonFiniteLossError(
                f"the training loss became NaN or infinite at iteration {bad_step}; "
                f"training stopped and {kept}. Lower train.learning_rate, raise "
                "train.warmup_iters, or set train.grad_clip."
            )

    def save(self) -> None:
        """Write ckpt.pt (the full training state), after checking the run is finite.
        Every rank must call it (RNG states are gathered); rank 0 writes."""
        self.check_finite()
        payload = self.checkpoint()
        if self.dist.is_main:
            save_checkpoint(payload, self.out_dir / CKPT_NAME)

    def evaluate_and_save(self) -> None:
        """Evaluate, log to TensorBoard, write ckpt.pt (and best.pt if improved)."""
        self.check_finite()
        ev = self.evaluate()
        self.result.evals.append(ev)
        improved = ev["val_loss"] < self.result.best_val_loss
        if improved:
            self.result.best_val_loss = ev["val_loss"]
        self.save()
        if not self.dist.is_main:
            return
        step = ev["iter"]
        self.writer.evaluation(step, ev["val_loss"], ev["train_loss"], self.result.best_val_loss)
        if improved:
            save_checkpoint(self.checkpoint(with_training_state=False), self.out_dir / BEST_NAME)
        self.views.log_evaluation(self.writer, self.model, step)
        self.say(
            f"step {step}: train {ev['train_loss']:.4f}, val {ev['val_loss']:.4f} nats/char "
            f"({ev['val_bpc']:.4f} bits/char), {ev['seconds']:.0f} s"
            + (" *best*" if improved else "")
        )

    def log_step(self, loss_sum: torch.Tensor, grad_norm: torch.Tensor, lr: float, rate: float):
        """Record the training scalars for the current step (the loss averaged over
        ranks); raise on a non-finite loss.

        Returns:
            Short strings for the progress bar.
        """
        step = self.result.iter_num
        self.check_finite()
        loss_sum = all_reduce(loss_sum.clone(), self.dist) / self.dist.world_size
        loss = loss_sum.item()  # with check_finite, the only host-device syncs per interval
        self.result.losses[step] = loss
        if self.dist.is_main:
            self.writer.training_step(step, loss, lr, float(grad_norm), rate)
        return {"loss": f"{loss:.4f}", "lr": f"{lr:.2e}", "tok/s": f"{rate:,.0f}"}

    def stop_agreed(self, stop: StopRequest) -> bool:
        """Whether to stop before the next step. A single process checks its own
        flag every step; ranks agree (any rank stopping stops all) at log intervals,
        so that they all leave the loop at the same step."""
        if not self.dist.enabled:
            return stop.requested
        if self.result.iter_num % self.cfg.train.log_interval:
            return False
        flag = torch.tensor(float(stop.requested), device=self.device)
        return bool(all_reduce(flag, self.dist, op=ReduceOp.MAX))

    def notices(self) -> list[str]:
        """Things about the schedule a user may not expect, said once at the start."""
        tc, notes = self.cfg.train, []
        if tc.warmup_iters >= tc.max_iters:
            notes.append(
                f"note: train.warmup_iters={tc.warmup_iters} >= train.max_iters="
                f"{tc.max_iters}: the learning rate never reaches train.learning_rate"
            )
        elif tc.lr_decay_iters > tc.max_iters:
            notes.append(
                f"note: the learning-rate schedule runs to train.lr_decay_iters="
                f"{tc.lr_decay_iters}, past train.max_iters={tc.max_iters}; this run stops "
                f"before the decay ends (set train.lr_decay_iters={tc.max_iters} to finish it)"
            )
        return notes

    def run(self) -> TrainResult:
        """Train from the current iteration to train.max_iters (see `train`)."""
        cfg, tc, result = self.cfg, self.cfg.train, self.result
        start = result.iter_num
        if start >= tc.max_iters:
            self.say(f"nothing to do: the run already has {start} steps (train.max_iters)")
            return result
        if self.dist.is_main:
            self.folder.replace_earlier_run()
            (self.out_dir / CONFIG_NAME).write_text(
                yaml.safe_dump(self.given_cfg.to_dict(), sort_keys=False, allow_unicode=True),
                encoding="utf-8",
            )
            # On resume, drop events a stopped run may have logged after its checkpoint.
            self.writer = RunWriter(self.out_dir, purge_step=start + 1 if start else None)
            self.writer.hyperparameters(self.cfg.to_dict())
        world = self.dist.world_size
        for note in self.notices():
            self.say(note)
        if self.schedule_note:
            self.say(self.schedule_note)
        if self.changed_on_resume:
            self.say("note: resuming with changed settings: " + "; ".join(self.changed_on_resume))
        self.say(
            f"training on {self.device}"
            + (f" x {world} processes" if world > 1 else "")
            + f": {self.model.num_params() / 1e6:.2f} M parameters (without position "
            f"embeddings), vocab {cfg.model.vocab_size}, global batch {tc.batch_size} x "
            f"{tc.gradient_accumulation_steps} accumulation x {world} ranks = "
            f"{self.tokens_per_iter} tokens/step, steps {start}..{tc.max_iters} -> {self.out_dir}"
        )
        if tc.compile:
            self.say("compiling the model (torch.compile): the first step takes a while")
        self.started = time.perf_counter()
        last_log_time, last_log_step = self.started, start
        self.model.train()
        try:
            with StopRequest() as stop:
                for step in range(start, tc.max_iters):
                    if self.stop_agreed(stop):
                        result.interrupted = True
                        result.signal = stop.signum
                        break
                    loss_sum, grad_norm, lr = self.train_step(step)
                    result.iter_num = step + 1
                    if step == start:  # compiling and warm-up stay out of the bar's estimate
                        self.console.start(step, tc.max_iters)
                    fields = None
                    if result.iter_num % tc.log_interval == 0:
                        now = time.perf_counter()
                        steps = result.iter_num - last_log_step
                        rate = self.tokens_per_iter * steps / (now - last_log_time)
                        fields = self.log_step(loss_sum, grad_norm, lr, rate)
                        last_log_time, last_log_step = now, result.iter_num
                    self.console.step(result.iter_num, fields)
                    if result.iter_num % tc.eval_interval == 0 or result.iter_num == tc.max_iters:
                        self.evaluate_and_save()
                        # Keep evaluation time out of the next tokens/s figure.
                        last_log_time, last_log_step = time.perf_counter(), result.iter_num
                if result.interrupted:
                    stop.saving = True  # a further Ctrl-C must not cut the save short
                    self.save()
                    self.say(
                        f"interrupted at step {result.iter_num}; checkpoint saved to "
                        f"{self.out_dir / CKPT_NAME}. Resume with the same command plus "
                        "train.resume=true"
                    )
        finally:
            self.console.close()
            if self.writer is not None:
                self.writer.close()
            self.close()
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
    trainer, finished = None, False
    try:
        trainer = Trainer(cfg)
        result = trainer.run()
        finished = True
        return result
    finally:
        if trainer is not None:
            trainer.close()
            del trainer  # nothing may hold the process group when it is destroyed
        shutdown_distributed(finished)
