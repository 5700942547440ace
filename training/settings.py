"""Every key of a run's configuration: its type, default and meaning, one dataclass per
section (train; the data section is `data.settings.DataConfig`, the model's
`model.config.GPTConfig`: evaluate.py reads those two without the trainer).

Each field carries its rules beside it (`common.setting.setting`): its meaning, the
values allowed (its type, its choices as a ``Literal``, its ``bounds``) and whether it
is a hyperparameter. `training.config` validates a config by reading them (relations
between keys, such as n_embd divisible by n_head, are in its `relations`), and
``python train.py --help-config`` prints the table made from them, which
docs/configuration.md shows. A new key is one field here (or in `data.settings.DataConfig` or
`model.config.GPTConfig`).
"""

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

from common.setting import setting
from data.settings import DataConfig
from model.config import GPTConfig
from model.scoring import EVAL_BATCH_SIZE, TRAIN_BATCH_SIZE

# The choices of the run config (the model's are in model/config.py); the validator
# reads the allowed values from these types.
Device = Literal["auto", "cpu", "cuda", "mps"]
Dtype = Literal["auto", "float32", "bfloat16", "float16"]  # model.device.DTYPE_NAMES
LrSchedule = Literal["cosine", "wsd"]
Optimizer = Literal["adamw", "muon"]


def _not_blank(out_dir: str | None) -> str | None:
    if out_dir is not None and not str(out_dir).strip():
        return "must not be empty (it would write into the current folder)"
    return None


@dataclass
class TrainConfig:
    """The `train:` section: optimisation, evaluation and what a run logs. Iterations
    count optimizer steps."""

    batch_size: int = setting(TRAIN_BATCH_SIZE, "sequences per micro-batch", bounds="> 0")
    gradient_accumulation_steps: int = setting(1, "micro-batches per optimizer step", bounds="> 0")
    max_iters: int = setting(2000, "optimizer steps", bounds="> 0", resume_may_change=True)
    eval_interval: int = setting(
        250, "evaluate and checkpoint every N steps, and at the end", bounds="> 0"
    )
    log_interval: int = setting(
        10,
        "training scalars every N steps; progress lines too (without a terminal, "
        "at most one every 10 s)",
        bounds="> 0",
    )
    eval_tokens: int = setting(
        131072,
        "characters of the validation split scored at each periodic evaluation: evenly "
        "spread fixed windows, or the whole split when it is shorter (Tiny Shakespeare's "
        "111,540 are)",
        bounds="> 0",
    )
    eval_train_tokens: int = setting(
        32768,
        "size of the fixed training-split sample that is evaluated (characters)",
        bounds="> 0",
    )
    final_full_eval: bool = setting(
        True,
        "score the whole validation split once when training ends (`val/full_loss`); "
        "false skips it on a corpus too large to wait for (evaluate.py can do it later)",
    )
    eval_batch_size: int = setting(
        EVAL_BATCH_SIZE,
        "windows per forward pass during evaluation; fewer where their logits would outgrow "
        "a training step's (a vocabulary of tens of thousands of characters), as the run says",
        bounds="> 0",
    )
    learning_rate: float = setting(1e-3, "peak learning rate, reached after warmup", bounds="> 0")
    min_lr: float = setting(
        1e-4,
        "learning rate of the schedule's last step (lr_decay_iters - 1) and after, "
        "in [0, learning_rate]",
    )
    warmup_iters: int = setting(100, "steps of linear warmup", bounds=">= 0")
    lr_decay_iters: int | None = setting(
        None,
        "length of the schedule in steps, the last of which runs at min_lr; null: "
        "max_iters for a new run, and a resumed run "
        "keeps the length it was first given (so extending a finished run continues at "
        "min_lr) unless this is given anew",
        bounds="> 0",
        resume_may_change=True,
    )
    lr_schedule: LrSchedule = setting(
        "cosine",
        "`cosine` (warmup, cosine decay to min_lr) or `wsd` (warmup, stable, linear "
        "warmdown to min_lr)",
    )
    warmdown_fraction: float = setting(
        0.2, "share of lr_decay_iters spent in the wsd warmdown", bounds="(0, 1]"
    )
    optimizer: Optimizer = setting(
        "adamw", "`adamw`, or `muon`: Muon for the blocks' 2-D weight matrices, AdamW for the rest"
    )
    muon_lr: float | None = setting(
        None, "Muon's peak learning rate (null: learning_rate)", bounds="> 0"
    )
    muon_momentum: float = setting(0.95, "Muon's momentum coefficient", bounds="[0, 1)")
    embedding_lr: float | None = setting(
        None,
        "peak learning rate of the embedding tables (AdamW) (null: learning_rate)",
        bounds="> 0",
        note="null: learning_rate",
    )
    weight_decay: float = setting(
        0.1, "decoupled weight decay, on 2-D weight matrices only", bounds=">= 0"
    )
    beta1: float = setting(0.9, "AdamW's first-moment coefficient", bounds="[0, 1)")
    beta2: float = setting(0.99, "AdamW's second-moment coefficient", bounds="[0, 1)")
    grad_clip: float = setting(
        1.0, "clip the global gradient norm to this (0 = off)", bounds=">= 0"
    )
    ema_decay: float = setting(
        0.0,
        "if > 0, average the weights (an exponential moving average with this decay) from "
        "step ema_start on, and evaluate, save and sample the average",
        bounds="[0, 1)",
        note="0: no averaging",
    )
    ema_start: int = setting(
        0,
        "the step after which weight averaging begins; 0: from the first, with the decay "
        "warmed up (min(ema_decay, (1 + t) / (10 + t)) at the t-th update), so the first "
        "steps' weights do not linger in the average",
        bounds=">= 0",
    )
    compile: bool = setting(
        False,
        "`torch.compile` the model (on CPU with torch's deterministic algorithms, so runs "
        "repeat exactly)",
    )
    dtype: Dtype = setting(
        "auto",
        "precision of training, evaluation and the TensorBoard sample: `float32`; "
        "`bfloat16` or `float16` (autocast: matrix products in that dtype; float16 adds "
        "loss scaling); `auto`: bfloat16 on a CUDA GPU that has it, float16 on one that "
        "has not (T4, V100), float32 on CPU and MPS. The weights and the loss stay float32",
    )
    resume: bool = setting(
        False,
        "continue the run in out_dir from its ckpt.pt",
        hyperparameter=False,
        resume_may_change=True,
    )
    accept_changed_corpus: bool = setting(
        False,
        "with resume: go on even though the corpus differs from the one the checkpoint "
        "recorded (files added, removed or edited; a split's text); the run says so at its "
        "start, judges the best validation loss (best.pt) afresh on the new split, and its "
        "checkpoints then record the new corpus",
        hyperparameter=False,
        resume_may_change=True,
    )
    overwrite: bool = setting(
        False,
        "replace an earlier run in out_dir (its checkpoints, config and events move aside "
        "once the new run's input has been checked, and are deleted at the new run's first "
        "checkpoint, or put back if it ends without one)",
        hyperparameter=False,
        resume_may_change=True,
    )
    init_from: str = setting(
        "",
        "start a new run from another run's weights (fine-tuning): its run folder (its "
        "ckpt.pt) or a ckpt.pt / best.pt file. The model section and data.normalization "
        "come from it (block_size may shrink, or grow with RoPE); the optimizer, schedule, "
        "step count and random streams start afresh; characters the new corpus adds are "
        'appended to its vocabulary (docs/finetune.md). `""`: a run from random weights',
    )
    sample_prompt: str = setting(
        "ROMEO:",
        "the TensorBoard sample at each evaluation continues this text (escapes such as "
        "`\\n` read as sample.py's `--prompt` reads them)",
    )
    sample_tokens: int = setting(
        200, "characters in that sample (0 = no sample)", bounds=">= 0", note="0: no sample"
    )
    attention_prompt: str = setting(
        "To be, or not to be",
        "text of the attention heatmaps at each evaluation (its first block_size characters; "
        '"" = none)',
    )
    attention_interval: int = setting(
        0,
        "draw the heatmaps only at the first evaluation at or after each multiple of this "
        "many steps, and at the last step (0: at every evaluation). Drawing takes seconds "
        "of CPU time: on a GPU, more than the training steps between evaluations",
        bounds=">= 0",
        note="0: heatmaps at every evaluation",
    )
    snapshots: int = setting(
        16,
        "keep float16 copies of the weights at about this many steps spread "
        "logarithmically over the run, plus the best evaluation's, each with its "
        "validation loss and sample, in out_dir/snapshots (the page's training-step "
        "slider; explore_attention.py --at-step); 0: none",
        bounds=">= 0",
        note="0: no snapshots",
    )


@dataclass
class RunConfig:
    """A whole run: top-level keys plus the data, model and train sections."""

    out_dir: str | None = setting(
        None,
        "checkpoints, config.yaml and TensorBoard events (null: runs/<config file stem>)",
        check=_not_blank,
        hyperparameter=False,
    )
    device: Device = setting("auto", "`auto` (cuda, then mps, then cpu), `cpu`, `cuda` or `mps`")
    seed: int = setting(
        1337, "seeds python, numpy and torch, and the batch sampler", bounds="[0, 2**32)"
    )
    data: DataConfig = field(default_factory=DataConfig)
    model: GPTConfig = field(default_factory=GPTConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict:
        """Plain nested dict (YAML- and checkpoint-friendly)."""
        return dataclasses.asdict(self)


SECTIONS = {"data": DataConfig, "model": GPTConfig, "train": TrainConfig}
