"""The checkpoint file: its format, and reading it back (sample.py, evaluate.py and
explore_attention.py load checkpoints with this module alone, without the trainer).

A checkpoint is a plain dict of tensors, numbers, strings and lists, so
``torch.load(..., weights_only=True)`` can read it and a downloaded file cannot run code:

    format_version   int, CHECKPOINT_FORMAT
    model            the uncompiled model's state_dict
    model_config     GPTConfig fields (vocab_size included)
    vocab            list of the tokenizer's characters, in id order (code-point order,
                     except after characters a fine-tuned run appended: train.init_from)
    normalization    the corpus's Unicode normalisation (data.normalization), applied
                     to prompts too; absent in files written before it existed ("none")
    config           the resolved run config (nested dict)
    iter_num         optimizer steps completed
    best_val_loss    lowest validation loss so far (nats per character)
    optimizer        optimizer state_dict (absent in weights-only files: best.pt)
    training_weights with weight averaging (train.ema_decay) under way: the weights being
                     trained, while ``model`` holds their average (what is evaluated and
                     sampled); absent otherwise
    average          {"updates": n}: how many steps that average holds (absent without)
    rng              {"world_size": N, "ranks": [...]}: for each rank, its python, numpy,
                     torch (and cuda) RNG states and its batch sampler's position
                     (absent in weights-only files)
    corpus           the files and splits trained on, see `training.checkpoint`
                     (ckpt.pt only; absent in files written before it existed)
    environment      the torch version, device and CPU threads it was trained with, see
                     `training.checkpoint`'s environment record (ckpt.pt only; absent
                     in older files)
    parent           a run started from another (train.init_from): that checkpoint's
                     path, step, best validation loss, data settings and corpus record
                     (training/init_from.py); absent otherwise
    scaler           train.dtype float16 only (ckpt.pt): torch.amp.GradScaler's
                     state_dict, the loss scale and its growth tracker
    skipped_steps    with ``scaler``: optimizer steps loss scaling has skipped so far

``config["train"]["dtype"]`` is the dtype the run resolved (float32, bfloat16 or
float16); a file written before that key existed has none.

training/checkpoint.py builds the training parts and checks a resume.
"""

import os
from pathlib import Path

import torch

from data.tokenizer import CharTokenizer
from model.config import GPTConfig
from model.gpt import GPT

CHECKPOINT_FORMAT = 1
COMPILED_PREFIX = "_orig_mod."
# The files of a run folder (training/run_folder.py) that a command line looks for.
CKPT_NAME = "ckpt.pt"  # latest state, for resuming
BEST_NAME = "best.pt"  # weights with the lowest validation loss so far
CONFIG_NAME = "config.yaml"
LOCK_NAME = ".lock"  # held by the training run writing the folder


class CheckpointError(RuntimeError):
    """A checkpoint is missing, unreadable or incompatible; the message names the file."""


def save_checkpoint(payload: dict, path: str | Path) -> None:
    """Write ``payload`` to ``path`` atomically: a temporary file in the same folder,
    flushed to disk, then renamed over the old one. A failure part-way leaves the
    previous file untouched.

    Raises:
        OSError: if writing fails (the temporary file is removed).
    """
    path = Path(path)
    tmp = temporary_path(path)
    try:
        with open(tmp, "wb") as f:
            torch.save({"format_version": CHECKPOINT_FORMAT, **payload}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def temporary_path(path: str | Path) -> Path:
    """Where `save_checkpoint` writes ``path`` before renaming it into place
    (``.ckpt.pt.tmp`` beside ``ckpt.pt``): left behind only by a process killed while
    saving."""
    path = Path(path)
    return path.with_name(f".{path.name}.tmp")


def load_checkpoint(path: str | Path, map_location="cpu") -> dict:
    """Load a checkpoint with ``weights_only=True`` onto ``map_location``.

    Raises:
        CheckpointError: if the file is missing, truncated or corrupt, or has an
            unknown format version.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}")
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # zip, pickle and EOF errors all mean: unreadable file
        # torch's own message may advise weights_only=False, unsafe for a file of
        # unknown origin: report only the kind of failure.
        raise CheckpointError(
            f"{path} is not a readable checkpoint: it is truncated, corrupt, not a "
            f"PyTorch file, or holds objects other than tensors ({type(e).__name__})"
        ) from None
    version = ckpt.get("format_version") if isinstance(ckpt, dict) else None
    if version is None:
        raise CheckpointError(f"{path} is not a checkpoint of this project (no format_version)")
    if version != CHECKPOINT_FORMAT:
        raise CheckpointError(
            f"{path} has checkpoint format {version!r}; this code reads format "
            f"{CHECKPOINT_FORMAT}. Use the version of this project that wrote it."
        )
    return ckpt


def strip_compiled_prefix(state_dict: dict) -> dict:
    """Remove torch.compile's '_orig_mod.' prefix from state_dict keys, if present."""
    return {k.removeprefix(COMPILED_PREFIX): v for k, v in state_dict.items()}


def model_from_checkpoint(ckpt: dict, path: str | Path = "checkpoint") -> tuple[GPT, CharTokenizer]:
    """Rebuild the model and its tokenizer from a loaded checkpoint.

    The tokenizer comes from the checkpoint's own vocabulary and normalisation, never
    from a data folder.

    Raises:
        CheckpointError: if the vocabulary size and the embedding disagree, or the
            weights do not fit the stored config.
    """
    config = GPTConfig(**ckpt["model_config"])
    tokenizer = CharTokenizer(list(ckpt["vocab"]), ckpt.get("normalization", "none"))
    state = strip_compiled_prefix(ckpt["model"])
    rows = state["token_embedding.weight"].shape[0]
    if not tokenizer.vocab_size == config.vocab_size == rows:
        raise CheckpointError(
            f"{path}: vocabulary has {tokenizer.vocab_size} characters, model_config says "
            f"{config.vocab_size}, the embedding has {rows} rows; the file is inconsistent"
        )
    model = GPT(config)
    try:
        model.load_state_dict(state)
    except RuntimeError as e:
        raise CheckpointError(f"{path}: weights do not match the stored config: {e}") from None
    return model, tokenizer


def run_in_progress(out_dir: Path) -> bool | None:
    """Whether a training run holds ``out_dir`` now (its lock on ``.lock`` is taken):
    True or False, or None where that cannot be told (no lock file, or no advisory
    locks, as on Windows).

    Asks for a shared lock without waiting and gives it back at once, so a run that
    starts in that same instant may find the folder held (and says so).
    """
    lock_path = Path(out_dir) / LOCK_NAME
    try:
        import fcntl
    except ImportError:
        return None
    try:
        with open(lock_path, "rb") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                return True
            fcntl.flock(lock, fcntl.LOCK_UN)
            return False
    except OSError:
        return None
