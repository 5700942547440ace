"""Checkpoints for training: what a run saves to resume exactly, and the checks a
resume must pass.

The format (a plain dict that ``torch.load(..., weights_only=True)`` reads; its keys
are listed in model/checkpoint.py), the atomic `save_checkpoint`, `load_checkpoint`
and `model_from_checkpoint` live in model/checkpoint.py, where inference reads them
without the trainer. Here:

- `checkpoint_contents` and `training_state` build a checkpoint; `check_resume` says
  whether a run may continue from one, `restore_training_state` puts the weights, the
  optimizer and the RNGs back.
- The random number generators: seeding them all, and capturing and restoring their
  states, so that a resumed run draws the same numbers as an uninterrupted one.
- The corpus record, the checkpoint's ``corpus`` entry:

      files    [[name, size in bytes, sha256 hex], ...] of data.path's files, in order
      splits   {"train": [characters, sha256 hex of the token ids], "val": [...],
                "test": [...]}

  An added, removed or edited file, or lines shuffled in one, would otherwise resume
  without a word, and text the run validated on could become training text. A resume
  where a split's text differs is refused, naming what changed (a renamed file that
  leaves every split's text as it was is no change); ``train.accept_changed_corpus=true``
  goes on anyway, says so at the start, judges the best validation loss (and best.pt)
  afresh on the new split, and the run's checkpoints then record the new corpus. A
  checkpoint written before this entry existed resumes, with a note that its corpus
  could not be checked.
- The environment record, the checkpoint's ``environment`` entry (below).
"""

import dataclasses
import hashlib
import random
from pathlib import Path

import numpy as np
import torch

from data.batches import BatchSampler
from data.corpus import Corpus
from data.tokenizer import CharTokenizer
from model import GPT, GPTConfig
from model.checkpoint import strip_compiled_prefix
from training.config import ConfigError, RunConfig, flatten, keys_marked
from training.distributed import DistContext, gather_to_main
from training.optim import WeightAverage

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
    "train.dtype": " (the steps from here on compute in the new precision; a switch to "
    "float16 starts loss scaling from its initial scale)",
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
    saved_embedding_lr = ckpt["config"]["train"].get("embedding_lr")
    if (saved_embedding_lr is None) != (cfg.train.embedding_lr is None):
        shown = "null" if saved_embedding_lr is None else saved_embedding_lr
        problems.append(
            f"train.embedding_lr is {cfg.train.embedding_lr} but the run used {shown}: "
            "between null and a value the embedding tables move to or from a parameter "
            f"group of their own, which the saved optimizer state cannot follow; resume "
            f"with train.embedding_lr={shown} (another value than null is applied)"
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
    configured = group_settings(optimizer)  # the run's config, before the saved ones
    try:
        optimizer.load_state_dict(ckpt["optimizer"])  # moved to the parameters' device
    except (ValueError, KeyError) as e:
        raise ConfigError(
            "cannot resume: the checkpoint's optimizer state does not fit "
            f"train.optimizer ({e}); resume with the run's optimizer"
        ) from None
    # load_state_dict brings back the saved groups' settings too: a weight_decay,
    # beta2, embedding_lr, muon_lr or muon_momentum changed on resume would be listed
    # as changed and not applied. The moment estimates (the state) stay as saved.
    for group, settings in zip(optimizer.param_groups, configured, strict=True):
        group.update(settings)
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


def group_settings(optimizer) -> list[dict]:
    """Each parameter group's settings (weight_decay, betas, momentum, lr_scale, ...:
    everything but its parameters), in the order of ``optimizer.param_groups``."""
    return [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups]


# A prime above any number of ranks: rank r's dropout seed is seed + r x this (mod 2**32).
RANK_SEED_STRIDE = 1_000_003


def seed_everything(seed: int) -> None:
    """Seed python's, numpy's and torch's global RNGs (torch seeds CUDA too)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def seed_rank_stream(seed: int, rank: int) -> None:
    """Give data-parallel rank ``rank`` its own torch RNG stream (dropout's masks), once
    the weights are drawn: ranks then start from the same weights but drop different
    units, as one process with their whole batch would. Rank 0 keeps the stream of a
    single-process run (same losses); rank r > 0 is seeded with (seed + r x
    RANK_SEED_STRIDE) mod 2**32 (torch's CPU generator keeps 32 bits of a seed), a
    value no rank's batch sampler (seed + r) is seeded with.
    """
    if rank:
        torch.manual_seed((seed + rank * RANK_SEED_STRIDE) % 2**32)  # CUDA's generators too


def capture_rng_state(device: torch.device) -> dict:
    """Every global RNG state (python, numpy, torch CPU, and CUDA when training on it),
    as checkpoint-safe values."""
    np_state = np.random.get_state(legacy=False)
    state = {
        "python": random.getstate(),
        "numpy": {
            "key": torch.from_numpy(np_state["state"]["key"].astype(np.int64)),
            "pos": np_state["state"]["pos"],
            "has_gauss": np_state["has_gauss"],
            "gauss": np_state["gauss"],
        },
        "torch": torch.get_rng_state(),
    }
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict, device: torch.device) -> None:
    """Restore states saved by `capture_rng_state` (CUDA ones only when on CUDA)."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    np_state = state["numpy"]
    np.random.set_state(
        {
            "bit_generator": "MT19937",
            "state": {"key": np_state["key"].numpy().astype(np.uint32), "pos": np_state["pos"]},
            "has_gauss": np_state["has_gauss"],
            "gauss": np_state["gauss"],
        }
    )
    torch.set_rng_state(state["torch"].cpu())
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


CORPUS_KEY = "corpus"  # the checkpoint's entry
HASH_BLOCK_BYTES = 8 << 20
SHOWN_FILES = 5  # file names listed per kind of change; the rest are counted


def split_digest(ids: np.ndarray) -> str:
    """sha256 (hex) of a split's token ids as bytes. A split mapped from the cache's
    token file is read from the file, block by block (touching a memory map's pages
    would count them as this process's memory, see `data.batches`)."""
    digest = hashlib.sha256()
    if isinstance(ids, np.memmap) and ids.filename is not None and len(ids):
        remaining = len(ids) * ids.itemsize
        with open(ids.filename, "rb") as f:
            f.seek(ids.offset)
            while remaining > 0:
                block = f.read(min(HASH_BLOCK_BYTES, remaining))
                if not block:
                    break
                digest.update(block)
                remaining -= len(block)
        return digest.hexdigest()
    step = max(1, HASH_BLOCK_BYTES // max(1, ids.itemsize))
    for start in range(0, len(ids), step):
        digest.update(np.ascontiguousarray(ids[start : start + step]).tobytes())
    return digest.hexdigest()


def corpus_record(corpus: Corpus) -> dict:
    """The checkpoint's ``corpus`` entry for ``corpus`` (see the module docstring)."""
    splits = {"train": corpus.train_ids, "val": corpus.val_ids, "test": corpus.test_ids}
    return {
        "files": [[name, size, sha] for name, size, sha in corpus.files],
        "splits": {name: [len(ids), split_digest(ids)] for name, ids in splits.items()},
    }


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:SHOWN_FILES])
    more = len(names) - SHOWN_FILES
    return shown + (f" and {more:,} more" if more > 0 else "")


def corpus_changes(saved: dict, current: dict) -> list[str]:
    """What differs between two ``corpus`` records, one line per kind of change:
    files added, removed or edited, and the splits whose text differs. Nothing when
    every split's text is the same (files renamed, or moved to another folder, give
    the run the same text)."""
    words = {"train": "training", "val": "validation", "test": "test"}
    splits = []
    for split, word in words.items():
        (n_old, sha_old), (n_new, sha_new) = saved["splits"][split], current["splits"][split]
        if sha_old != sha_new:
            sizes = f"{n_old:,} -> {n_new:,} characters" if n_old != n_new else "same length"
            splits.append(f"the {word} split's text differs ({sizes})")
    if not splits:
        return []
    old = {name: (size, sha) for name, size, sha in saved["files"]}
    new = {name: (size, sha) for name, size, sha in current["files"]}
    changes = []
    added = [name for name in new if name not in old]
    removed = [name for name in old if name not in new]
    edited = [name for name in new if name in old and new[name] != old[name]]
    if added:
        changes.append(f"files added: {_names(added)}")
    if removed:
        changes.append(f"files removed: {_names(removed)}")
    if edited:
        changes.append(f"files changed: {_names(edited)}")
    return changes + splits


def check_corpus_on_resume(ckpt: dict, current: dict, accept: bool, path: Path) -> list[str]:
    """Whether a run may resume from ``ckpt`` on the corpus whose record is ``current``.

    Args:
        ckpt: the loaded checkpoint.
        current: `corpus_record` of the corpus the run reads now.
        accept: train.accept_changed_corpus.
        path: the checkpoint's file, for the messages.

    Returns:
        Lines to say at the start: that a changed corpus was accepted, or that the
        checkpoint predates corpus records; none for the same corpus.

    Raises:
        ConfigError: naming what changed and the ways to go on, if the corpus differs
            and ``accept`` is False.
    """
    saved = ckpt.get(CORPUS_KEY)
    if saved is None:
        return [
            f"note: {path} was written before checkpoints recorded their corpus: the "
            "corpus cannot be checked against the run's (the checkpoints this run "
            "writes record it)"
        ]
    changes = corpus_changes(saved, current)
    if not changes:
        return []
    if accept:
        return [
            "note: train.accept_changed_corpus=true: resuming on a corpus that changed since "
            f"step {ckpt['iter_num']} (" + "; ".join(changes) + "): validation losses from "
            "before and after do not compare, so the best validation loss starts over on "
            "the new split (best.pt is replaced at its first evaluation)"
        ]
    raise ConfigError(
        f"cannot resume from {path}: the corpus has changed since the checkpoint was "
        "written:\n  - " + "\n  - ".join(changes) + "\nIts validation losses would not "
        "compare, and text the run validated on may now be training text. Resume on the "
        "corpus as it was; or start a new run (train.resume=false train.overwrite=true, "
        "or another out_dir); or go on with this corpus: train.accept_changed_corpus=true"
    )


# The environment record: where a run trains, as far as its numbers depend on it;
# recorded in each checkpoint and compared on resume.
#
# A resumed run repeats an uninterrupted run's losses bit for bit only in the same
# environment: the same torch (kernels and their reduction order change between
# releases), the same kind of device (CPU and GPU round differently; a GPU model's
# kernels differ from another's), and on CPU the same number of threads (a reduction
# keeps one partial sum per thread and adds them in thread order, so another count
# adds in another order; see `training.loop`). None of these is a config key, so a
# resume on another machine or after an upgrade used to go on without a word. The
# checkpoint's ``environment`` entry:
#
#     torch     torch.__version__, e.g. "2.13.0+cpu"
#     device    "cpu", or the accelerator's kind and name, e.g. "cuda: NVIDIA H200"
#     threads   torch.get_num_threads() (compared on CPU only)
#
# A checkpoint written before this entry existed resumes without the comparison.

ENVIRONMENT_KEY = "environment"  # the checkpoint's entry


def environment_record(device: torch.device) -> dict:
    """The checkpoint's ``environment`` entry for a run on ``device`` (see the module
    docstring)."""
    name = device.type
    if device.type == "cuda":
        name = f"cuda: {torch.cuda.get_device_name(device)}"
    # str(): torch.__version__ is a str subclass, which weights_only loading refuses.
    return {"torch": str(torch.__version__), "device": name, "threads": torch.get_num_threads()}


def environment_changes(saved: dict | None, current: dict) -> list[str]:
    """'what: then -> now' for each part of the environment that differs between a
    checkpoint's record (``saved``; None for a checkpoint without one: nothing to
    compare) and the resumed run's (``current``); the thread count only where both
    train on CPU."""
    if not saved:
        return []
    changes = []
    for key, what in (("torch", "torch"), ("device", "device")):
        if key in saved and saved[key] != current[key]:
            changes.append(f"{what} {saved[key]} -> {current[key]}")
    on_cpu = saved.get("device") == current["device"] == "cpu"
    if on_cpu and "threads" in saved and saved["threads"] != current["threads"]:
        changes.append(f"CPU threads {saved['threads']} -> {current['threads']}")
    return changes


def environment_note(saved: dict | None, current: dict) -> str:
    """What a resumed run says when its environment differs from its checkpoint's
    (`environment_changes`), or ""."""
    changes = environment_changes(saved, current)
    if not changes:
        return ""
    return (
        "note: resuming in another environment (" + "; ".join(changes) + "): training "
        "goes on, but its losses will not repeat an uninterrupted run's bit for bit"
    )
