"""Checkpoints for training: atomic writes, everything a run needs to resume, and the
check that it may.

The format (a plain dict that ``torch.load(..., weights_only=True)`` reads; its keys
are listed in model/checkpoint.py), `load_checkpoint` and `model_from_checkpoint` live
in model/checkpoint.py, where inference reads them without the trainer; they are
importable from here too.
`checkpoint_contents` and `training_state` build it; `check_resume` says whether a run
may continue from it, `restore_training_state` puts the optimizer and RNGs back.
"""

import dataclasses
from pathlib import Path

import torch

from data.batches import BatchSampler
from data.tokenizer import CharTokenizer
from model import GPT, GPTConfig
from model.checkpoint import (  # noqa: F401  (the format lives with the model; names kept here)
    CHECKPOINT_FORMAT,
    COMPILED_PREFIX,
    CheckpointError,
    load_checkpoint,
    model_from_checkpoint,
    save_checkpoint,
    strip_compiled_prefix,
)
from training.averaging import WeightAverage
from training.config import ConfigError, RunConfig, flatten, keys_marked
from training.distributed import DistContext, gather_to_main
from training.rng import capture_rng_state, restore_rng_state

# Everything in GPTConfig that fixes the weights' shapes or meaning (not dropout).
ARCHITECTURE_KEYS = tuple(
    f.name for f in dataclasses.fields(GPTConfig) if f.name not in ("dropout", "vocab_size")
)
# Settings that may change on resume without a note (the schedule's length has its own):
# the fields marked resume_may_change.
RUN_CONTROL_KEYS = keys_marked("resume_may_change")

# What a changed setting does on resume, where that is not what its name suggests.
RESUME_EFFECTS = {
    "seed": " (the TensorBoard sample's seed only: batches and dropout continue the "
    "checkpoint's random streams)",
}


def checkpoint_contents(
    model: GPT, tokenizer: CharTokenizer, cfg: RunConfig, iter_num: int, best_val_loss: float
) -> dict:
    """What sampling needs (a weights-only checkpoint such as best.pt): the uncompiled
    model's weights and config, the vocabulary and its normalisation, the run config,
    the step and the best validation loss (nats/char)."""
    return {
        "model": model.state_dict(),
        "model_config": dataclasses.asdict(model.config),
        "vocab": tokenizer.chars,
        "normalization": tokenizer.normalization,
        "config": cfg.to_dict(),
        "iter_num": iter_num,
        "best_val_loss": best_val_loss,
    }


def training_state(
    optimizer,
    sampler: BatchSampler,
    dist: DistContext,
    device: torch.device,
    average: WeightAverage | None = None,
    trained: GPT | None = None,
) -> dict:
    """What resuming needs on top of `checkpoint_contents`: the optimizer state, every
    rank's RNG and sampler states, and, once weight averaging is under way, the
    ``trained`` model's weights (``model`` then holds the ``average``). Every rank must
    call it (the states are gathered to rank 0, the only one that writes)."""
    rng = {**capture_rng_state(device), "sampler": sampler.state_dict()}
    state = {
        "optimizer": optimizer.state_dict(),
        "rng": {"world_size": dist.world_size, "ranks": gather_to_main(rng, dist)},
    }
    if average is not None and average.active:
        state["training_weights"] = trained.state_dict()
        state["average"] = average.state()
    return state


def check_resume(ckpt: dict, cfg: RunConfig, vocab: list[str], path: Path) -> list[str]:
    """Whether a run configured as ``cfg`` on a corpus with ``vocab`` may continue
    from ``ckpt``: same architecture, vocabulary, validation and test splits and
    normalisation.

    Returns:
        'key: old -> new' for every other setting that differs (a new learning rate,
        say: allowed, and listed at the start of the run).

    Raises:
        ConfigError: listing every difference that forbids the resume.
    """
    saved = ckpt["model_config"]
    problems = [
        f"model.{k} is {getattr(cfg.model, k)} but the checkpoint has {saved[k]}"
        for k in ARCHITECTURE_KEYS
        if getattr(cfg.model, k) != saved.get(k, getattr(GPTConfig(), k))
    ]
    saved_val_fraction = ckpt["config"]["data"]["val_fraction"]
    if saved_val_fraction != cfg.data.val_fraction:
        problems.append(
            f"data.val_fraction is {cfg.data.val_fraction} but the run used "
            f"{saved_val_fraction}: its validation losses would not compare"
        )
    saved_test_fraction = ckpt["config"]["data"].get("test_fraction", 0.0)
    if saved_test_fraction != cfg.data.test_fraction:
        problems.append(
            f"data.test_fraction is {cfg.data.test_fraction} but the run used "
            f"{saved_test_fraction}: its training and validation splits would move; "
            f"resume with data.test_fraction={saved_test_fraction}"
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
    old, new = flatten(ckpt["config"]), flatten(cfg.to_dict())
    return [
        f"{key}: {old.get(key)} -> {value}" + RESUME_EFFECTS.get(key, "")
        for key, value in new.items()
        if key not in RUN_CONTROL_KEYS and old.get(key) != value
    ]


def restore_training_state(
    ckpt: dict,
    model: GPT,
    average: WeightAverage | None,
    optimizer,
    sampler: BatchSampler,
    dist: DistContext,
    device: torch.device,
) -> None:
    """Put back what `checkpoint_contents` and `training_state` saved: the trained
    weights (and their average, if it was under way), the optimizer state, and this
    rank's RNG and sampler states.

    Raises:
        ConfigError: if the optimizer state does not fit the configured optimizer, or
            the checkpoint was written by a different number of processes.
    """
    # With weight averaging under way, "model" is the average of "training_weights".
    model.load_state_dict(strip_compiled_prefix(ckpt.get("training_weights", ckpt["model"])))
    if average is not None and "average" in ckpt:
        average.restore(strip_compiled_prefix(ckpt["model"]), ckpt["average"])
    try:
        optimizer.load_state_dict(ckpt["optimizer"])  # moved to the parameters' device
    except (ValueError, KeyError) as e:
        raise ConfigError(
            "cannot resume: the checkpoint's optimizer state does not fit "
            f"train.optimizer ({e}); resume with the run's optimizer"
        ) from None
    saved = ckpt["rng"]
    if saved["world_size"] != dist.world_size:
        raise ConfigError(
            f"the checkpoint was written by {saved['world_size']} process(es) and this run has "
            f"{dist.world_size}: resume with torchrun --nproc_per_node="
            f"{saved['world_size']} (or without torchrun for 1) to continue exactly"
        )
    state = saved["ranks"][dist.rank]
    sampler.load_state_dict(state["sampler"])
    restore_rng_state(state, device)
