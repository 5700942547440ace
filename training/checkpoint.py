"""Checkpoints: atomic writes, safe loads (weights_only=True), and everything a run needs.

A checkpoint is a plain dict of tensors, numbers, strings and lists, so
``torch.load(..., weights_only=True)`` can read it and a downloaded file cannot run code:

    format_version   int, CHECKPOINT_FORMAT
    model            the uncompiled model's state_dict
    model_config     GPTConfig fields (vocab_size included)
    vocab            list of the tokenizer's characters, in id order
    normalization    the corpus's Unicode normalisation (data.normalization), applied
                     to prompts too; absent in files written before it existed ("none")
    config           the resolved run config (nested dict)
    iter_num         optimizer steps completed
    best_val_loss    lowest validation loss so far (nats per character)
    optimizer        optimizer state_dict (absent in weights-only files)
    rng              python, numpy, torch (and cuda) RNG states and the batch sampler's
"""

import os
import random
from pathlib import Path

import numpy as np
import torch
import yaml

from data.tokenizer import CharTokenizer
from model import GPT, GPTConfig

CHECKPOINT_FORMAT = 1
COMPILED_PREFIX = "_orig_mod."


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
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "wb") as f:
            torch.save({"format_version": CHECKPOINT_FORMAT, **payload}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def add_checkpoint_arguments(parser) -> None:
    """Add --out-dir and --checkpoint, the two flags that name a checkpoint, to an
    argparse parser (sample.py and explore_attention.py share them); resolve them
    with `resolve_checkpoint_path`."""
    parser.add_argument("--out-dir", default="runs/shakespeare_char_cpu", help="run folder")
    parser.add_argument(
        "--checkpoint",
        default="ckpt.pt",
        help="file name in --out-dir (ckpt.pt: latest, best.pt: best validation), or a "
        "path with a folder in it",
    )


def resolve_checkpoint_path(out_dir: str | Path, checkpoint: str) -> Path:
    """A bare file name (ckpt.pt, best.pt) is looked up in out_dir; anything with a
    folder in it is a path of its own.

    Raises:
        CheckpointError: if the file is not there, saying how a run makes it.
    """
    given = Path(checkpoint)
    path = given if len(given.parts) > 1 or given.is_absolute() else Path(out_dir) / given
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}: {_missing_checkpoint_hint(path)}")
    return path


def _missing_checkpoint_hint(path: Path) -> str:
    """What to do about a checkpoint that is not there, judged from its folder."""
    folder = path.parent
    train = f"python train.py --config configs/shakespeare_char_cpu.yaml out_dir={folder}"
    if path.name == "best.pt" and (folder / "ckpt.pt").is_file():
        return "best.pt appears at the run's first evaluation; ckpt.pt is there"
    if not folder.is_dir():
        return f"there is no run folder {folder}; train one first: {train}"
    if (folder / "config.yaml").is_file():
        try:
            config = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))
            step = f"step {int(config['train']['eval_interval'])}"
        except (OSError, ValueError, TypeError, KeyError, yaml.YAMLError):
            step = "step train.eval_interval"
        return (
            f"the run in {folder} has not reached its first evaluation ({step}), where "
            f"it writes {path.name}; wait for it, or look at what the run printed"
        )
    return (
        f"{folder} holds no run; a training run writes {path.name} there at its first "
        f"evaluation (step train.eval_interval): {train}"
    )


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
