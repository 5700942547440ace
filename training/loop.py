"""The training loop: batch -> forward -> loss -> backward -> optimizer step, with
periodic evaluation and checkpoints.

    from training import load_config, train
    result = train(load_config("configs/shakespeare_char_cpu.yaml", ["train.max_iters=100"]))

`Trainer.run` is the loop, in the order of nanoGPT's train.py: the learning rate, the
micro-steps, clipping and the optimizer step (`Trainer.train_step`), the log, and every
train.eval_interval steps an evaluation and a checkpoint (`Trainer.evaluate_and_save`);
a stop request (Ctrl-C, SIGTERM) is checked before each step. What is printed, timed
and written to TensorBoard around the steps goes through one `training.report.Reporter`.
The precision (train.dtype: autocast, and loss scaling for float16) is
`training.precision`'s.

torch.compile (train.compile) goes through `training.compiling`, which says what makes a
compiled CPU run repeat exactly; what a resumed run continues from is `training.resume`'s.
"""

import contextlib
import copy
import dataclasses
import time
from pathlib import Path

import torch
from torch.nn.parallel import DistributedDataParallel

from common.signals import signals_raise
from data import BatchSampler, Corpus, prepare_corpus
from model import GPT, GPTConfig
from model.checkpoint import BEST_NAME, CKPT_NAME, save_checkpoint
from training.checkpoint import (
    CORPUS_KEY,
    ENVIRONMENT_KEY,
    checkpoint_contents,
    corpus_record,
    environment_note,
    environment_record,
    seed_everything,
    seed_rank_stream,
    training_state,
)
from training.compiling import compile_model, resolve_compile
from training.config import RunConfig
from training.distributed import init_distributed, shutdown_distributed, wrap_for_data_parallel
from training.evaluate import Evaluator, WholeSplitStopped
from training.init_from import PARENT_KEY, start_from_parent
from training.optim import WeightAverage, build_optimizer
from training.precision import SkippedSteps, loss_scaling_state, resolve_precision
from training.report import Reporter, RunStart, TrainResult, start_lines, steps
from training.resume import Resume
from training.run_folder import RunFolder
from training.run_writer import TensorBoardViews, hparams_resume_note, tensorboard_line
from training.schedule import resolve_schedule_length, schedule_notices, scheduled_learning_rate
from training.watch import RunWatch


class Trainer:
    """Owns everything a run needs: corpus, model, optimizer, batch sampler, reporter.

    Construction does all the checking and loading (so bad input fails before any
    training, and leaves nothing behind); `run` trains. Under torchrun each rank
    builds a Trainer: ranks draw different batches, DDP averages the gradients,
    evaluation is split across ranks, and rank 0 alone writes files.

    Args:
        cfg: a validated RunConfig (see `training.config.load_config`).
        clock: seconds from a fixed origin, for the run's time split (see
            `training.report.RunClock`); tests pass fake time.

    Raises:
        ConfigError: for an unusable device, train.dtype, out_dir, vocab_size or resume.
        data.CorpusError: for an unusable corpus.
        model.checkpoint.CheckpointError: for an unreadable checkpoint on resume.
    """

    def __init__(self, cfg: RunConfig, clock=time.perf_counter):
        # train.init_from: the model section from the parent (training.init_from).
        cfg, self.parent = start_from_parent(cfg)
        # config.yaml records the config as given (vocab_size 0: "from the corpus";
        # lr_decay_iters as given), so it can be reused; the working copy is resolved.
        self.given_cfg = cfg
        self.cfg = copy.deepcopy(cfg)
        self.dist, self.device = init_distributed(cfg.device)
        # train.dtype: a dtype this device cannot compute in is refused before any work.
        self.precision = resolve_precision(cfg.train.dtype, self.device)
        self.report = Reporter(self.cfg, self.dist, self.device, clock)  # the clock starts
        self.result = self.report.result
        if self.parent:  # HParams: parent.path, parent.step, ...
            self.report.extra_hparams = self.parent.hparams()
        # Process-wide settings this run changes, put back by `close`.
        self.scope = contextlib.ExitStack()
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
        # The precision of the forward passes (training.precision); float32: no autocast.
        self.autocast = self.precision.autocast
        cfg.train.dtype = self.precision.name  # resolved in the working copy, as saved
        tc, dist = cfg.train, self.dist
        self.compile_note = resolve_compile(tc, self.device)  # before anything compiles
        self.corpus = self._prepare_corpus(cfg)
        self.corpus_record = corpus_record(self.corpus)  # saved in ckpt.pt
        self.environment = environment_record(self.device)  # saved in ckpt.pt, too
        # The checkpoint of train.resume, checked against this run (empty for a new run).
        self.resume = resume = Resume.load(
            self.folder.resume_path, cfg, self.corpus, self.corpus_record, self.device
        )
        tc.lr_decay_iters, self.schedule_note = resolve_schedule_length(
            tc, resume.saved_lr_decay_iters, resume.iter_num
        )
        # self.model is the plain module: checkpoints save its weights. fast_model is
        # it compiled (train.compile), for evaluation; train_model is fast_model wrapped
        # by DDP under torchrun, for the training step only (DDP's forward expects a
        # backward pass to follow).
        self.model = GPT(GPTConfig(**vars(cfg.model))).to(self.device)
        if self.parent and not resume.ckpt:  # a resumed child has its own weights
            self.parent.load_weights(self.model)
        self.average = None  # weight averaging (train.ema_decay), see training.optim
        if tc.ema_decay > 0:
            self.average = WeightAverage(self.model, tc.ema_decay, tc.ema_start)
        self.fast_model = self.model
        if tc.compile:
            self.fast_model = compile_model(self.model, self.device, self.scope)
        self.train_model = wrap_for_data_parallel(self.fast_model, dist, self.device)
        self.optimizer = build_optimizer(self.model, tc, self.device.type)
        # Loss scaling with float16; disabled (every call passes through) otherwise.
        self.scaler = self.precision.grad_scaler()
        seed_rank_stream(cfg.seed, dist.rank)  # same weights, each rank its own dropout
        self.trainable = [p for p in self.model.parameters() if p.requires_grad]
        # Each rank draws its own batches; rank 0 keeps the single-process stream.
        seed, block_size = cfg.seed + dist.rank, cfg.model.block_size
        self.sampler = BatchSampler(
            self.corpus.train_ids, block_size, tc.batch_size, seed, self.device
        )
        resume.restore(self.model, self.average, self.optimizer, self.sampler, dist, self.device)
        self.result.iter_num, self.result.best_val_loss = resume.iter_num, resume.best_val_loss
        skipped_before = resume.restore_loss_scaling(self.scaler)
        if self.precision.loss_scaling:
            self.report.skipped_steps = SkippedSteps(self.device, skipped_before)
        self.saved_step = None  # the step of the last ckpt.pt this run wrote
        self.evaluator = Evaluator(self.corpus, cfg, dist, self.device, self.autocast)
        self.report.views = TensorBoardViews(
            cfg, self.corpus.tokenizer, self.corpus.val_ids, self.autocast
        )

    def _prepare_corpus(self, cfg: RunConfig) -> Corpus:
        """The corpus of cfg.data, checked to fit the model; cfg.model.vocab_size (0:
        "from the corpus") becomes the tokenizer's."""
        show_progress = self.dist.is_main and self.report.console.interactive
        # DataConfig's keys are prepare_corpus's arguments, by name.
        corpus = prepare_corpus(
            **dataclasses.asdict(cfg.data), progress=show_progress, say=self.report.say
        )
        self.report.say(corpus.origin)
        if self.parent:  # the parent's ids first, then the characters this corpus adds
            corpus = self.parent.renumber(corpus)
        corpus.check_fits(cfg.model.block_size, cfg.model.vocab_size)
        cfg.model.vocab_size = corpus.tokenizer.vocab_size
        return corpus

    def run(self) -> TrainResult:
        """Train from the current iteration to train.max_iters (see `train`)."""
        tc, result, report = self.cfg.train, self.result, self.report
        start = result.iter_num
        if start >= tc.max_iters:
            report.say(
                f"nothing to do: the run already has {steps(start)} (train.max_iters="
                f"{tc.max_iters}); give a larger train.max_iters to train on"
            )
            return result
        if self.dist.is_main:
            comment = self.parent.config_comment() if self.parent else ""
            self.folder.start(self.given_cfg.to_dict(), comment)  # config.yaml
        watch = RunWatch(self, start)  # snapshots, head scores, verdicts (training.watch)
        self.model.train()
        with contextlib.closing(self), report.training(start, self.opening_lines(start)):
            for step in range(start, tc.max_iters):
                if report.stop_requested():
                    break
                with report.timing(step):  # the first step (it compiles) is timed apart
                    loss, grad_norm, lr = self.train_step(step)
                result.iter_num = step + 1
                report.log(result.iter_num, loss, lr, grad_norm)
                if result.iter_num % tc.eval_interval == 0 or result.iter_num == tc.max_iters:
                    self.evaluate_and_save()
                watch.after_step(result.iter_num, self.evaluated_models()[1])
            if not result.interrupted and tc.final_full_eval:
                self.evaluate_whole_split()
            for line in [] if result.interrupted else watch.end_lines():
                report.say(line)
            if result.interrupted:
                with report.saving_stopped_run():
                    if self.saved_step != result.iter_num:  # a stop right after a save
                        self.save()
            report.end()
        return result

    def train_step(self, step: int) -> tuple[torch.Tensor, torch.Tensor, float]:
        """One optimizer step (0-based ``step``) over gradient_accumulation_steps
        micro-batches.

        The forward passes run in the run's precision (`training.precision`); with
        float16 the loss is scaled before the backward pass and the gradients unscaled
        before clipping, and a step whose gradients overflowed is skipped.

        Returns:
            (loss, grad_norm, lr): this rank's mean training loss in nats/char and the
            gradient norm before clipping (not finite for a skipped step), both device
            tensors (reading them waits for the device, so callers do it only at log
            intervals), and the learning rate.
        """
        tc = self.cfg.train
        lr = scheduled_learning_rate(step, tc)
        for group in self.optimizer.param_groups:
            group["lr"] = lr * group["lr_scale"]
        loss_sum = torch.zeros((), device=self.device)
        for micro_step in range(tc.gradient_accumulation_steps):
            with self.report.part("data", sync=False):  # no wait for the device
                x, y = self.sampler.next_batch()
            # Under DDP, gradients are averaged across ranks on the last micro-step only.
            last = micro_step == tc.gradient_accumulation_steps - 1
            no_sync = self.dist.enabled and not last
            with self.train_model.no_sync() if no_sync else contextlib.nullcontext():
                with self.autocast():
                    _, loss = self.train_model(x, y)
                    # Scale so the accumulated gradient is the gradient of the mean loss.
                    loss = loss / tc.gradient_accumulation_steps
                # float16: backward from the loss times the loss scale (else the loss).
                self.scaler.scale(loss).backward()
            loss_sum += loss.detach()
        # float16: divide the gradients by the scale, so that clipping and the logged
        # norm see the true ones (a no-op without loss scaling).
        self.scaler.unscale_(self.optimizer)
        if tc.grad_clip > 0:
            grad_norm = torch.nn.utils.clip_grad_norm_(self.trainable, tc.grad_clip)
        else:
            grads = [p.grad for p in self.trainable if p.grad is not None]
            grad_norm = torch.nn.utils.get_total_norm(grads)
        # float16: skipped if a gradient overflowed, and the scale adapts (`update`).
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        if self.average is not None:
            self.average.update(self.model, step + 1)
        return loss_sum, grad_norm, lr

    def opening_lines(self, start: int) -> list[str]:
        """What the run says before its first step, from step ``start``: notes on the
        corpus, the precision, the schedule, the evaluation batch and TensorBoard, the settings a
        resume changed, and the start line (see `training.report.start_lines`)."""
        resume = self.resume
        notes = [*self.folder.notes, *resume.corpus_notes]
        notes.append(environment_note(resume.saved_environment, self.environment))
        notes += schedule_notices(self.cfg.train)
        notes += [self.compile_note, self.precision.note, self.schedule_note, self.evaluator.note]
        notes.append(tensorboard_line(self.cfg))
        if self.parent:
            notes.append(self.parent.start_line(self.model.config))
        if start and self.dist.is_main:  # what HPARAMS will show beside this stretch
            notes.append(hparams_resume_note(self.out_dir, self.cfg.to_dict()))
        opening = RunStart(
            self.cfg,
            self.dist,
            self.device,
            num_params=self.model.num_params(),
            tokens_per_iter=self.report.tokens_per_step,
            start=start,
            notes=notes,
            changed=resume.changed_settings,
            precision=self.precision.describe(),
        )
        return start_lines(opening)

    def evaluated_models(self) -> tuple[torch.nn.Module, GPT]:
        """What is evaluated, saved as the model and sampled: the weight average once
        it is under way (train.ema_decay), else the trained model. Returns (the module
        to run, compiled if train.compile; the plain GPT holding those weights)."""
        if self.average is not None and self.average.active:
            return self.average.module, self.average.module
        return self.fast_model, self.model

    def evaluate_and_save(self) -> None:
        """Evaluate, write the checkpoints, and report the result (TensorBoard, console).

        Raises:
            NonFiniteLossError: if a training or the validation loss is not finite.
        """
        report, result = self.report, self.result
        report.check_finite()
        fast, shown = self.evaluated_models()
        compiled = fast is self.fast_model and self.cfg.train.compile
        seconds = report.seconds()
        with report.part("eval", compiled=compiled):
            ev = self.evaluator.evaluate(fast, result.iter_num, seconds)
        improved = ev["val_loss"] < result.best_val_loss
        result.best_val_loss = min(ev["val_loss"], result.best_val_loss)
        with report.part("checkpoints"):
            self.save(best=improved)
        report.evaluation(ev, improved, shown)

    def save(self, best: bool = False) -> None:
        """Write ckpt.pt (the full training state) after checking the run is finite,
        and best.pt (weights only) if ``best``. Every rank must call it; rank 0 writes."""
        self.report.check_finite()
        r, (_, shown) = self.result, self.evaluated_models()
        contents = checkpoint_contents(
            shown, self.corpus.tokenizer, self.cfg, r.iter_num, r.best_val_loss
        )
        if self.parent:
            contents[PARENT_KEY] = self.parent.record
        state = training_state(
            self.optimizer, self.sampler, self.dist, self.device, self.average, self.model
        )
        state |= loss_scaling_state(self.scaler, self.report.skipped_steps)
        if self.dist.is_main:
            record = {CORPUS_KEY: self.corpus_record, ENVIRONMENT_KEY: self.environment}
            save_checkpoint({**contents, **state, **record}, self.out_dir / CKPT_NAME)
            if best:
                save_checkpoint(contents, self.out_dir / BEST_NAME)
            self.folder.saved()  # a run this one replaces can go now
        self.saved_step = r.iter_num

    def evaluate_whole_split(self) -> None:
        """Score the whole validation split once, at the end of training, and report it
        (see `Evaluator.final_val_loss`); a single process stops scoring at Ctrl-C."""
        evaluated, _ = self.evaluated_models()  # the weight average once it has begun
        try:
            with self.report.part("eval"):
                loss, how = self.evaluator.final_val_loss(
                    evaluated,
                    self.result.evals,
                    self.result.iter_num,
                    self.report.stop_scoring,
                    self.report.say,
                )
        except WholeSplitStopped:
            loss, how = None, "stopped"  # the checkpoint is written: the report says so
        self.report.whole_split(len(self.corpus.val_ids), loss, how)

    def close(self, started: bool = True) -> None:
        """Release the run folder (its lock is also released when the process ends;
        after a failed start, or a new run's end without a checkpoint, this also removes
        what the run wrote: see `training.run_folder`); under DDP, drop the
        DistributedDataParallel wrapper, whose gradient reducer must be gone before the
        process group is destroyed; and put back the process-wide settings the run
        changed (torch's deterministic algorithms)."""
        removed = self.folder.release(started)
        if removed:
            self.report.say(
                f"no checkpoint was written: removed {', '.join(removed)} from "
                f"{self.out_dir}, so the same command starts the run afresh"
            )
        if self.folder.restored:  # train.overwrite: the run it was to replace
            self.report.say(
                f"the earlier run in {self.out_dir} is back in place "
                f"({', '.join(self.folder.restored)})"
            )
        if isinstance(getattr(self, "train_model", None), DistributedDataParallel):
            self.train_model = self.fast_model
        self.scope.close()


def train(cfg: RunConfig, clock=time.perf_counter) -> TrainResult:
    """Train a GPT as ``cfg`` describes; write checkpoints, config.yaml and
    TensorBoard events to ``cfg.out_dir``.

    Every ``train.eval_interval`` steps and at the end, fixed samples of the
    validation split (train.eval_tokens characters at most: all of Tiny Shakespeare's)
    and of the training split are evaluated (nats and bits per character), ``ckpt.pt``
    is written (and ``best.pt`` when validation improves). When training ends, the
    whole validation split is evaluated once (train.final_full_eval).
    Ctrl-C or SIGTERM during training saves ``ckpt.pt`` at the end of the step and
    returns with ``interrupted=True``. Before training begins (preparing the corpus,
    building the model, loading a checkpoint), they stop the run at once, and a new
    run leaves nothing behind (`training.run_folder`): KeyboardInterrupt for Ctrl-C,
    `common.signals.Terminated` (a SystemExit with status 128 + the signal number) for
    SIGTERM and SIGHUP, whose default action would end the process with no cleanup.

    The run ends with a line splitting its wall time (compiling, steps, evaluation,
    samples and heatmaps, checkpoints, ...; see `training.report.RunClock`), also
    logged to TensorBoard (wall_time/...). ``clock``: the time source of that split.

    Returns:
        A `TrainResult`.

    Raises:
        ConfigError, data.CorpusError, model.checkpoint.CheckpointError: bad input,
            before any training (see `Trainer`).
        NonFiniteLossError: if the loss becomes NaN or infinite.
        common.signals.Terminated: on SIGTERM or SIGHUP before training begins.
    """
    trainer, finished = None, False
    try:
        # Until the loop's stop request takes the signals over (and again after it).
        with signals_raise("a new run leaves nothing behind"):
            trainer = Trainer(cfg, clock)
            result = trainer.run()
        finished = True
        return result
    finally:
        if trainer is not None:
            trainer.close()
            del trainer  # nothing may hold the process group when it is destroyed
        shutdown_distributed(finished)
