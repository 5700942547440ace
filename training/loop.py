"""The training loop: batch -> forward -> loss -> backward -> optimizer step, with
periodic evaluation, checkpoints and TensorBoard logging.

    from training import load_config, train
    result = train(load_config("configs/shakespeare_char_cpu.yaml", ["train.max_iters=100"]))

The pieces it uses, one module each: the run folder's rules (`training.run_folder`),
what a checkpoint holds and when a resume is allowed (`training.checkpoint`), the
learning-rate schedule (`training.schedule`), evaluation (`training.evaluate`), what
TensorBoard shows (`training.run_writer`, `training.tensorboard_views`), what is
printed (`training.console`), where the wall time goes (`training.run_clock`), data
parallelism (`training.distributed`), the NaN check (`training.nonfinite`) and Ctrl-C
(`training.interrupt`).
"""

import contextlib
import copy
import dataclasses
import functools
import time
from pathlib import Path

import torch
from torch.nn.parallel import DistributedDataParallel

from data import BatchSampler, prepare_corpus
from model import GPT, GPTConfig
from model.checkpoint import load_checkpoint, save_checkpoint
from model.device import autocast_context
from training.checkpoint import (
    CORPUS_KEY,
    check_corpus_on_resume,
    check_resume,
    checkpoint_contents,
    corpus_record,
    restore_training_state,
    seed_everything,
    seed_rank_stream,
    training_state,
)
from training.compile import compile_model
from training.config import RunConfig
from training.console import Console, Throughput, start_lines
from training.distributed import (
    NonFiniteLossError,
    NonFiniteWatch,
    StopRequest,
    all_reduce,
    init_distributed,
    shutdown_distributed,
    wrap_for_data_parallel,
)
from training.evaluate import Evaluator, WholeSplitStopped
from training.optim import WeightAverage, build_optimizer
from training.result import TrainResult
from training.run_clock import RunClock, device_sync, split_line
from training.run_folder import BEST_NAME, CKPT_NAME, RunFolder
from training.run_writer import RunWriter, TensorBoardViews, tensorboard_line
from training.schedule import resolve_schedule_length, schedule_notices, scheduled_learning_rate

__all__ = ["NonFiniteLossError", "TrainResult", "Trainer", "train"]


class Trainer:
    """Owns everything a run needs: corpus, model, optimizer, batch sampler, writer.

    Construction does all the checking and loading (so bad input fails before any
    training, and leaves nothing behind); `run` trains. Under torchrun each rank
    builds a Trainer: ranks draw different batches, DDP averages the gradients,
    evaluation is split across ranks, and rank 0 alone writes files.

    Args:
        cfg: a validated RunConfig (see `training.config.load_config`).
        clock: seconds from a fixed origin, for the run's time split (see
            `training.run_clock`); tests pass fake time.

    Raises:
        ConfigError: for an unusable device, out_dir, vocab_size or resume.
        data.CorpusError: for an unusable corpus.
        training.checkpoint.CheckpointError: for an unreadable checkpoint on resume.
    """

    def __init__(self, cfg: RunConfig, clock=time.perf_counter):
        # config.yaml records the config as given (vocab_size 0: "from the corpus";
        # lr_decay_iters as given), so it can be reused; the working copy is resolved.
        self.given_cfg = cfg
        self.cfg = copy.deepcopy(cfg)
        self.dist, self.device = init_distributed(cfg.device)
        self.clock = RunClock(device_sync(self.device), clock)  # from here on: "setup"
        self.first_step = 0  # the step this call of `run` starts from
        self.out_dir = Path(cfg.out_dir)
        tc = cfg.train
        self.folder = RunFolder(self.out_dir, tc.resume, tc.overwrite, lock=self.dist.is_main)
        try:
            self._build(self.cfg)
        except BaseException:
            self.close(started=False)  # unlock, and leave nothing behind
            raise

    def _build(self, cfg: RunConfig) -> None:
        """Corpus, model, optimizer, sampler, evaluation: everything after the folder."""
        seed_everything(cfg.seed)
        self.console = Console(enabled=self.dist.is_main)
        # Mixed precision for this device (bf16 on CUDA, else a no-op).
        self.autocast = functools.partial(autocast_context, self.device)
        d, tc, dist = cfg.data, cfg.train, self.dist
        # DataConfig's keys are prepare_corpus's arguments, by name.
        show_progress = dist.is_main and self.console.interactive
        self.corpus = prepare_corpus(
            **dataclasses.asdict(d), progress=show_progress, say=self.console.say
        )
        self.console.say(self.corpus.origin)
        self.corpus.check_fits(cfg.model.block_size, cfg.model.vocab_size)
        cfg.model.vocab_size = self.corpus.tokenizer.vocab_size
        resume_path = self.folder.resume_path
        ckpt = load_checkpoint(resume_path) if resume_path else None
        self.changed_on_resume = (
            check_resume(ckpt, cfg, self.corpus.tokenizer.chars, resume_path) if ckpt else []
        )
        self.corpus_record = corpus_record(self.corpus)  # saved in ckpt.pt
        self.corpus_notes = []
        if ckpt:
            accept = tc.accept_changed_corpus
            self.corpus_notes = check_corpus_on_resume(
                ckpt, self.corpus_record, accept, resume_path
            )
        tc.lr_decay_iters, self.schedule_note = resolve_schedule_length(
            tc,
            ckpt["config"]["train"]["lr_decay_iters"] if ckpt else None,
            ckpt["iter_num"] if ckpt else 0,
        )
        # self.model is the plain module: checkpoints save its weights. fast_model is
        # it compiled (train.compile), for evaluation; train_model is fast_model wrapped
        # by DDP under torchrun, for the training step only (DDP's forward expects a
        # backward pass to follow).
        self.model = GPT(GPTConfig(**vars(cfg.model))).to(self.device)
        self.average = None  # weight averaging (train.ema_decay), see training.averaging
        if tc.ema_decay > 0:
            self.average = WeightAverage(self.model, tc.ema_decay, tc.ema_start)
        self.fast_model = compile_model(self.model, self.device) if tc.compile else self.model
        self.train_model = wrap_for_data_parallel(self.fast_model, dist, self.device)
        self.optimizer = build_optimizer(self.model, tc, self.device.type)
        seed_rank_stream(cfg.seed, dist.rank)  # same weights, each rank its own dropout
        self.trainable = [p for p in self.model.parameters() if p.requires_grad]
        # Each rank draws its own batches; rank 0 keeps the single-process stream.
        seed, block_size = cfg.seed + dist.rank, cfg.model.block_size
        self.sampler = BatchSampler(
            self.corpus.train_ids, block_size, tc.batch_size, seed, self.device
        )
        self.result = TrainResult(out_dir=self.out_dir, rank=dist.rank)
        if ckpt:  # on resume, the architecture is checked equal: only dropout may differ
            restore_training_state(
                ckpt, self.model, self.average, self.optimizer, self.sampler, dist, self.device
            )
            self.result.iter_num = ckpt["iter_num"]
            self.result.best_val_loss = ckpt["best_val_loss"]
        self.evaluator = Evaluator(self.corpus, cfg, dist, self.device, self.autocast)
        self.views = TensorBoardViews(cfg, self.corpus.tokenizer, self.corpus.val_ids)
        self.nonfinite = NonFiniteWatch(self.device)
        self.tokens_per_iter = tc.batch_size * tc.gradient_accumulation_steps * block_size
        self.tokens_per_iter *= dist.world_size
        self.writer = None  # rank 0 opens it when training starts

    def train_step(self, step: int) -> tuple[torch.Tensor, torch.Tensor, float]:
        """One optimizer step (0-based ``step``) over gradient_accumulation_steps
        micro-batches.

        Returns:
            (loss, grad_norm, lr): this rank's mean training loss in nats/char and the
            gradient norm before clipping, both device tensors (reading them waits for
            the device, so callers do it only at log intervals), and the learning rate.
        """
        tc = self.cfg.train
        lr = scheduled_learning_rate(step, tc)
        for group in self.optimizer.param_groups:
            group["lr"] = lr * group["lr_scale"]
        loss_sum = torch.zeros((), device=self.device)
        for micro_step in range(tc.gradient_accumulation_steps):
            with self.clock.part("data", sync=False):  # no wait for the device per step
                x, y = self.sampler.next_batch()
            # Under DDP, gradients are averaged across ranks on the last micro-step only.
            last = micro_step == tc.gradient_accumulation_steps - 1
            no_sync = self.dist.enabled and not last
            with self.train_model.no_sync() if no_sync else contextlib.nullcontext():
                with self.autocast():
                    _, loss = self.train_model(x, y)
                    # Scale so the accumulated gradient is the gradient of the mean loss.
                    loss = loss / tc.gradient_accumulation_steps
                loss.backward()
            loss_sum += loss.detach()
        self.nonfinite.record(loss_sum, step)
        if tc.grad_clip > 0:
            grad_norm = torch.nn.utils.clip_grad_norm_(self.trainable, tc.grad_clip)
        else:
            grads = [p.grad for p in self.trainable if p.grad is not None]
            grad_norm = torch.nn.utils.get_total_norm(grads)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.average is not None:
            self.average.update(self.model, step + 1)
        return loss_sum, grad_norm, lr

    def evaluated_models(self) -> tuple[torch.nn.Module, GPT]:
        """What is evaluated, saved as the model and sampled: the weight average once
        it is under way (train.ema_decay), else the trained model. Returns (the module
        to run, compiled if train.compile; the plain GPT holding those weights)."""
        if self.average is not None and self.average.active:
            return self.average.module, self.average.module
        return self.fast_model, self.model

    def save(self, best: bool = False) -> None:
        """Write ckpt.pt (the full training state) after checking the run is finite,
        and best.pt (weights only) if ``best``. Every rank must call it; rank 0 writes."""
        self.nonfinite.check(self.dist, self.out_dir / CKPT_NAME)
        r, (_, shown) = self.result, self.evaluated_models()
        contents = checkpoint_contents(
            shown, self.corpus.tokenizer, self.cfg, r.iter_num, r.best_val_loss
        )
        state = training_state(
            self.optimizer, self.sampler, self.dist, self.device, self.average, self.model
        )
        if self.dist.is_main:
            save_checkpoint(
                {**contents, **state, CORPUS_KEY: self.corpus_record}, self.out_dir / CKPT_NAME
            )
            if best:
                save_checkpoint(contents, self.out_dir / BEST_NAME)

    def evaluate_and_save(self, started: float) -> None:
        """Evaluate, write the checkpoints, log to TensorBoard and say the result.

        Raises:
            NonFiniteLossError: if a training or the validation loss is not finite.
        """
        self.nonfinite.check(self.dist, self.out_dir / CKPT_NAME)
        fast, shown = self.evaluated_models()
        step, seconds = self.result.iter_num, time.perf_counter() - started
        compiled = fast is self.fast_model and self.cfg.train.compile
        with self.clock.part("eval", compiled=compiled):
            ev = self.evaluator.evaluate(fast, step, seconds)
        self.result.evals.append(ev)
        val = ev["val_loss"]
        improved = val < self.result.best_val_loss
        self.result.best_val_loss = min(val, self.result.best_val_loss)
        with self.clock.part("checkpoints"):
            self.save(best=improved)
        if self.dist.is_main:
            self.writer.evaluation(step, val, ev["train_loss"], self.result.best_val_loss)
            with self.clock.part("views"):
                self.views.log_evaluation(self.writer, shown, step)
            if step < self.cfg.train.max_iters:  # the last step's split comes at the end
                self.writer.time_split(step, self.time_split())
        self.console.evaluation(ev, improved)

    def time_split(self) -> dict[str, float]:
        """Seconds of this process's wall time so far in each part (setup, compile,
        steps, data, eval, views, checkpoints, other; see `training.run_clock`)."""
        steps_after_first = max(0, self.result.iter_num - self.first_step - 1)
        return self.clock.split(steps_after_first, compiled=self.cfg.train.compile)

    def evaluate_whole_split(self, stop: StopRequest) -> None:
        """Score the whole validation split once, at the end of training, log it
        (val/full_loss) and say it (see `Evaluator.final_val_loss`). A single process
        stops scoring at Ctrl-C (the checkpoint is already written); data-parallel
        ranks finish it."""
        evaluated, _ = self.evaluated_models()  # the weight average once it has begun
        try:
            with self.clock.part("eval"):
                loss, how = self.evaluator.final_val_loss(
                    evaluated,
                    self.result.evals,
                    self.result.iter_num,
                    lambda: stop.requested and not self.dist.enabled,
                    self.console.say,
                )
        except WholeSplitStopped:
            self.console.whole_split_stopped(self.out_dir)
            return
        self.result.full_val_loss = loss
        if self.dist.is_main:
            self.writer.full_evaluation(self.result.iter_num, loss)
        self.console.whole_split(len(self.corpus.val_ids), loss, how)

    def run(self) -> TrainResult:
        """Train from the current iteration to train.max_iters (see `train`)."""
        cfg, tc, result, dist = self.cfg, self.cfg.train, self.result, self.dist
        start = self.first_step = result.iter_num
        if start >= tc.max_iters:
            self.console.say(f"nothing to do: the run already has {start} steps (train.max_iters)")
            return result
        if dist.is_main:
            self.folder.start(self.given_cfg.to_dict())
            # On resume, drop events a stopped run may have logged after its checkpoint.
            self.writer = RunWriter(self.out_dir, purge_step=start + 1 if start else None)
            self.writer.hyperparameters(self.cfg.to_dict())
        notes = self.corpus_notes + schedule_notices(tc)
        notes += [self.schedule_note, self.evaluator.note]
        notes.append(tensorboard_line(cfg))
        n_params, changed = self.model.num_params(), self.changed_on_resume
        for line in start_lines(
            cfg, dist, self.device, n_params, self.tokens_per_iter, start, notes, changed
        ):
            self.console.say(line)
        started = time.perf_counter()
        throughput = Throughput(self.tokens_per_iter, start)
        self.model.train()
        self.clock.switch("steps")
        try:
            with StopRequest() as stop:
                for step in range(start, tc.max_iters):
                    if stop.agreed(dist, step, tc.log_interval, self.device):
                        result.interrupted, result.signal = True, stop.signum
                        break
                    # The first step compiles (train.compile): the clock times it apart.
                    with self.clock.first_step() if step == start else contextlib.nullcontext():
                        loss, grad_norm, lr = self.train_step(step)
                    result.iter_num = step + 1
                    if step == start:  # compiling and warm-up stay out of the bar's estimate
                        self.console.start(result.iter_num, tc.max_iters)
                        if result.iter_num % tc.log_interval:  # and out of the first tok/s
                            throughput.restart(result.iter_num)
                    fields = None
                    if result.iter_num % tc.log_interval == 0:
                        self.nonfinite.check(dist, self.out_dir / CKPT_NAME)
                        # With the check above, the only host-device syncs per interval.
                        loss = (all_reduce(loss.clone(), dist) / dist.world_size).item()
                        rate = throughput.measure(result.iter_num)
                        result.losses[result.iter_num] = loss
                        if dist.is_main:
                            self.writer.training_step(
                                result.iter_num, loss, lr, float(grad_norm), rate
                            )
                        fields = {"loss": f"{loss:.4f}", "lr": f"{lr:.2e}", "tok/s": f"{rate:,.0f}"}
                    self.console.step(result.iter_num, fields)
                    if result.iter_num % tc.eval_interval == 0 or result.iter_num == tc.max_iters:
                        self.evaluate_and_save(started)
                        throughput.restart(result.iter_num)  # evaluation time left out
                if not result.interrupted and tc.final_full_eval:
                    self.evaluate_whole_split(stop)
                if result.interrupted:
                    stop.saving = True  # a further Ctrl-C must not cut the save short
                    with self.clock.part("checkpoints"):
                        self.save()
                    self.console.interrupted(result.iter_num, self.out_dir / CKPT_NAME)
                self.clock.switch("other")
                result.time_split = self.time_split()
                if dist.is_main:
                    self.writer.time_split(result.iter_num, result.time_split)
                self.console.say(split_line(result.time_split))
        finally:
            self.console.close()
            if self.writer is not None:
                self.writer.close()
            self.close()
        return result

    def close(self, started: bool = True) -> None:
        """Release the run folder (its lock is also released when the process ends;
        ``started=False`` after a failed start also removes what the start created)
        and, under DDP, the DistributedDataParallel wrapper, whose gradient reducer
        must be gone before the process group is destroyed."""
        self.folder.release(started)
        if isinstance(getattr(self, "train_model", None), DistributedDataParallel):
            self.train_model = self.fast_model


def train(cfg: RunConfig, clock=time.perf_counter) -> TrainResult:
    """Train a GPT as ``cfg`` describes; write checkpoints, config.yaml and
    TensorBoard events to ``cfg.out_dir``.

    Every ``train.eval_interval`` steps and at the end, fixed samples of the
    validation split (train.eval_tokens characters at most: all of Tiny Shakespeare's)
    and of the training split are evaluated (nats and bits per character), ``ckpt.pt``
    is written (and ``best.pt`` when validation improves). When training ends, the
    whole validation split is evaluated once (train.final_full_eval).
    Ctrl-C or SIGTERM saves ``ckpt.pt`` and returns with ``interrupted=True``.

    The run ends with a line splitting its wall time (compiling, steps, evaluation,
    samples and heatmaps, checkpoints, ...; see `training.run_clock`), also logged
    to TensorBoard (time/...). ``clock``: the time source of that split.

    Returns:
        A `TrainResult`.

    Raises:
        ConfigError, data.CorpusError, training.checkpoint.CheckpointError: bad input,
            before any training (see `Trainer`).
        NonFiniteLossError: if the loss becomes NaN or infinite.
    """
    trainer, finished = None, False
    try:
        trainer = Trainer(cfg, clock)
        result = trainer.run()
        finished = True
        return result
    finally:
        if trainer is not None:
            trainer.close()
            del trainer  # nothing may hold the process group when it is destroyed
        shutdown_distributed(finished)
