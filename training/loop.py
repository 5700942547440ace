"""The training loop: batches -> forward -> loss -> backward -> AdamW step, with
evaluation, checkpoints and TensorBoard logging.

    from training import load_config, train
    result = train(load_config("configs/shakespeare_char_cpu.yaml", ["train.max_iters=100"]))
"""

import math
import signal
import threading
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
    CheckpointError,
    capture_rng_state,
    load_checkpoint,
    restore_rng_state,
    save_checkpoint,
    strip_compiled_prefix,
)
from training.config import ConfigError, RunConfig
from training.device import autocast_context, resolve_device
from training.evaluate import evaluate_loss, nats_to_bits
from training.optim import build_optimizer
from training.schedule import learning_rate_at

CKPT_NAME = "ckpt.pt"  # latest state, for resuming
BEST_NAME = "best.pt"  # weights with the lowest validation loss so far
ARCHITECTURE_KEYS = ("n_layer", "n_head", "n_embd", "block_size", "bias")


class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or infinite; the last good checkpoint is kept."""


@dataclass
class TrainResult:
    """What a call to `train` did.

    Attributes:
        out_dir: the run folder.
        iter_num: optimizer steps completed in total (including before a resume).
        best_val_loss: lowest validation loss seen, nats per character.
        evals: one dict per evaluation: iter, seconds (wall time since this call
            started), train_loss, val_loss (nats/char), val_bpc (bits/char).
        losses: {iteration: training loss in nats} for every logged iteration.
        interrupted: True if Ctrl-C / SIGTERM stopped the run early.
    """

    out_dir: Path
    iter_num: int = 0
    best_val_loss: float = math.inf
    evals: list = field(default_factory=list)
    losses: dict = field(default_factory=dict)
    interrupted: bool = False


class _StopRequest:
    """Turns the first Ctrl-C / SIGTERM into a flag checked between iterations, so
    the run saves a consistent checkpoint; a second Ctrl-C stops at once."""

    def __init__(self):
        self.requested = False
        self._previous = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def seed_everything(seed: int) -> None:
    """Seed python's, numpy's and torch's global RNGs (torch seeds CUDA too)."""
    import random

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _check_out_dir(cfg: RunConfig, out_dir: Path) -> Path | None:
    """Return the checkpoint to resume from, or None for a fresh run.

    Raises:
        ConfigError: if a fresh run would overwrite an existing checkpoint, or a
            resume finds nothing to resume.
    """
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
    saved = ckpt["model_config"]
    problems = [
        f"model.{k} is {getattr(cfg.model, k)} but the checkpoint has {saved[k]}"
        for k in ARCHITECTURE_KEYS
        if getattr(cfg.model, k) != saved[k]
    ]
    if list(ckpt["vocab"]) != vocab:
        problems.append(
            f"the corpus's vocabulary ({len(vocab)} characters) differs from the "
            f"checkpoint's ({len(ckpt['vocab'])}); resume on the same data.path"
        )
    if problems:
        raise ConfigError(f"cannot resume from {path}:\n  - " + "\n  - ".join(problems))


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
        ConfigError: for an unusable device, out_dir or resume.
        data.CorpusError: for an unusable corpus.
        training.checkpoint.CheckpointError: for an unreadable checkpoint on resume.
        NonFiniteLossError: if the loss becomes NaN or infinite.
    """
    device = resolve_device(cfg.device)
    tc = cfg.train
    out_dir = Path(cfg.out_dir)
    resume_path = _check_out_dir(cfg, out_dir)
    seed_everything(cfg.seed)

    corpus = prepare_corpus(
        cfg.data.path, cfg.data.val_fraction, cfg.data.cache_dir, cfg.data.decode_errors
    )
    corpus.check_fits(cfg.model.block_size)
    if cfg.model.vocab_size not in (0, corpus.tokenizer.vocab_size):
        raise ConfigError(
            f"model.vocab_size is {cfg.model.vocab_size} but {cfg.data.path} has "
            f"{corpus.tokenizer.vocab_size} distinct characters; leave model.vocab_size "
            "at 0 (it is set from the corpus)"
        )
    cfg.model.vocab_size = corpus.tokenizer.vocab_size

    ckpt = None
    if resume_path is not None:
        ckpt = load_checkpoint(resume_path)
        _check_resume_compatible(ckpt, cfg, corpus.tokenizer.chars, resume_path)
    # On resume the architecture is checked equal, so only dropout can differ.
    model = GPT(GPTConfig(**vars(cfg.model)))
    if ckpt is not None:
        model.load_state_dict(strip_compiled_prefix(ckpt["model"]))
    model.to(device)
    optimizer = build_optimizer(model, tc, device.type)
    sampler = BatchSampler(corpus.train_ids, cfg.model.block_size, tc.batch_size, cfg.seed, device)
    result = TrainResult(out_dir=out_dir)
    if ckpt is not None:
        optimizer.load_state_dict(ckpt["optimizer"])  # moves state to the params' device
        sampler.load_state_dict(ckpt["rng"]["sampler"])
        restore_rng_state(ckpt["rng"], device)
        result.iter_num = ckpt["iter_num"]
        result.best_val_loss = ckpt["best_val_loss"]
        del ckpt

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "config.yaml").write_text(
        yaml.safe_dump(cfg.to_dict(), sort_keys=False, allow_unicode=True), encoding="utf-8"
    )
    val_windows = evaluation_windows(corpus.val_ids, cfg.model.block_size)
    train_windows = evaluation_windows(corpus.train_ids, cfg.model.block_size, tc.eval_train_tokens)
    autocast = lambda: autocast_context(device)  # noqa: E731
    run_model = torch.compile(model) if tc.compile else model
    tokens_per_iter = tc.batch_size * tc.gradient_accumulation_steps * cfg.model.block_size

    def checkpoint_payload(with_optimizer: bool) -> dict:
        payload = {
            "model": model.state_dict(),
            "model_config": vars(model.config).copy(),
            "vocab": corpus.tokenizer.chars,
            "config": cfg.to_dict(),
            "iter_num": result.iter_num,
            "best_val_loss": result.best_val_loss,
        }
        if with_optimizer:
            payload["optimizer"] = optimizer.state_dict()
            payload["rng"] = {**capture_rng_state(device), "sampler": sampler.state_dict()}
        return payload

    def evaluate_and_save(writer: SummaryWriter, started: float) -> None:
        val_loss = evaluate_loss(run_model, *val_windows, tc.eval_batch_size, device, autocast)
        train_loss = evaluate_loss(run_model, *train_windows, tc.eval_batch_size, device, autocast)
        if not math.isfinite(val_loss):
            raise NonFiniteLossError(
                f"the validation loss is {val_loss} at iteration {result.iter_num}; the last "
                f"good checkpoint in {out_dir} is kept. Lower train.learning_rate."
            )
        step = result.iter_num
        writer.add_scalar("val/loss", val_loss, step)
        writer.add_scalar("val/bpc", nats_to_bits(val_loss), step)
        writer.add_scalar("train/eval_loss", train_loss, step)
        writer.add_scalar("train/eval_bpc", nats_to_bits(train_loss), step)
        writer.flush()
        seconds = time.perf_counter() - started
        result.evals.append(
            {
                "iter": step,
                "seconds": seconds,
                "train_loss": train_loss,
                "val_loss": val_loss,
                "val_bpc": nats_to_bits(val_loss),
            }
        )
        improved = val_loss < result.best_val_loss
        if improved:
            result.best_val_loss = val_loss
        tqdm.write(
            f"step {step}: train {train_loss:.4f}, val {val_loss:.4f} nats/char "
            f"({nats_to_bits(val_loss):.4f} bits/char), {seconds:.0f} s"
            + (" *best*" if improved else "")
        )
        save_checkpoint(checkpoint_payload(with_optimizer=True), out_dir / CKPT_NAME)
        if improved:
            save_checkpoint(checkpoint_payload(with_optimizer=False), out_dir / BEST_NAME)

    writer = SummaryWriter(
        log_dir=str(out_dir), purge_step=result.iter_num + 1 if result.iter_num else None
    )
    start_iter = result.iter_num
    if start_iter >= tc.max_iters:
        tqdm.write(
            f"nothing to do: the run has {start_iter} steps and train.max_iters={tc.max_iters}"
        )
    tqdm.write(
        f"training on {device}: {model.num_params() / 1e6:.2f} M parameters, "
        f"vocab {corpus.tokenizer.vocab_size}, {tokens_per_iter} tokens/step, "
        f"steps {start_iter}..{tc.max_iters} -> {out_dir}"
    )
    started = time.perf_counter()
    last_log_time, last_log_iter = started, start_iter
    model.train()
    progress = tqdm(total=tc.max_iters, initial=start_iter, unit="step", dynamic_ncols=True)
    try:
        with _StopRequest() as stop:
            for it in range(start_iter, tc.max_iters):
                if stop.requested:
                    result.interrupted = True
                    break
                lr = learning_rate_at(
                    it, tc.learning_rate, tc.min_lr, tc.warmup_iters, tc.lr_decay_iters
                )
                for group in optimizer.param_groups:
                    group["lr"] = lr
                loss_sum = torch.zeros((), device=device)
                for _ in range(tc.gradient_accumulation_steps):
                    x, y = sampler.next_batch()
                    with autocast():
                        _, loss = run_model(x, y)
                    # Scale so the accumulated gradient is that of the mean loss.
                    loss = loss / tc.gradient_accumulation_steps
                    loss.backward()
                    loss_sum += loss.detach()
                if tc.grad_clip > 0:
                    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), tc.grad_clip)
                else:
                    grad_norm = torch.nn.utils.get_total_norm(
                        [p.grad for p in model.parameters() if p.grad is not None]
                    )
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                result.iter_num = it + 1
                progress.update(1)

                if result.iter_num % tc.log_interval == 0:
                    loss_value = loss_sum.item()  # the only host sync between logs
                    if not math.isfinite(loss_value):
                        raise NonFiniteLossError(
                            f"the training loss is {loss_value} at iteration {it}; the last "
                            f"good checkpoint in {out_dir} is kept. Lower "
                            "train.learning_rate or raise train.warmup_iters."
                        )
                    now = time.perf_counter()
                    tokens_per_sec = (
                        tokens_per_iter * (result.iter_num - last_log_iter) / (now - last_log_time)
                    )
                    last_log_time, last_log_iter = now, result.iter_num
                    result.losses[result.iter_num] = loss_value
                    writer.add_scalar("train/loss", loss_value, result.iter_num)
                    writer.add_scalar("train/lr", lr, result.iter_num)
                    writer.add_scalar("train/grad_norm", float(grad_norm), result.iter_num)
                    writer.add_scalar("train/tokens_per_sec", tokens_per_sec, result.iter_num)
                    progress.set_postfix(
                        loss=f"{loss_value:.4f}", lr=f"{lr:.2e}", tok_s=f"{tokens_per_sec:,.0f}"
                    )

                if result.iter_num % tc.eval_interval == 0 or result.iter_num == tc.max_iters:
                    evaluate_and_save(writer, started)
                    last_log_time = time.perf_counter()  # keep eval time out of tokens/s
        if result.interrupted:
            save_checkpoint(checkpoint_payload(with_optimizer=True), out_dir / CKPT_NAME)
            tqdm.write(
                f"interrupted at step {result.iter_num}; checkpoint saved to "
                f"{out_dir / CKPT_NAME}. Resume with the same command plus train.resume=true"
            )
    finally:
        progress.close()
        writer.close()
    return result


__all__ = [
    "train",
    "TrainResult",
    "NonFiniteLossError",
    "CheckpointError",
    "CKPT_NAME",
    "BEST_NAME",
]
