"""From a checkpoint to a transformers folder: choose the architecture, rename the
weights, check that the transformers model gives our logits, write the folder.

The weights come from the checkpoint's state_dict, its model_config and its vocabulary
(loaded with ``weights_only=True``), never from a live model's modules; our model is
built once, only to check the exported one against it.
"""

from dataclasses import dataclass
from pathlib import Path

import torch

from hf_export.architectures import choose_architecture
from hf_export.errors import ExportError
from hf_export.folder import check_target, write_atomically
from hf_export.tokenizer import transformers_tokenizer, unknown_stand_in
from model.checkpoint import load_checkpoint, model_from_checkpoint, strip_compiled_prefix

# The exported model must give our logits to this much (float32 sums in another
# order differ by about 1e-6).
CHECK_TOLERANCE = 1e-4
CHECK_LENGTH = 64  # characters of the check's random text (at most block_size)
INSTALL_HINT = "pip install transformers==5.24.0 (it brings tokenizers and safetensors)"


@dataclass
class ExportResult:
    """What `export_checkpoint` wrote.

    Attributes:
        folder: the export folder.
        class_name: the transformers class it loads as.
        files: the files written, by name.
        max_logit_difference: the largest |exported - ours| logit of the check.
        notes: lines for the user: how long a text it generates as ours does
            (`Architecture.length_note`) and which characters its tokenizer reads.
    """

    folder: Path
    class_name: str
    files: list[str]
    max_logit_difference: float
    notes: list[str]


def require_transformers():
    """Import transformers (and the tokenizers and safetensors it depends on).

    Raises:
        ExportError: if one is not installed, naming what to install.
    """
    try:
        import safetensors  # noqa: F401
        import tokenizers  # noqa: F401
        import transformers
    except ImportError as e:
        missing = getattr(e, "name", None) or "transformers"
        raise ExportError(
            f"export needs {missing}, which is not installed: {INSTALL_HINT}"
        ) from None
    return transformers


def export_checkpoint(checkpoint: Path, target: Path, overwrite: bool = False) -> ExportResult:
    """Write ``target``: config.json, model.safetensors, generation_config.json,
    tokenizer.json and tokenizer_config.json, loadable with
    ``AutoModelForCausalLM.from_pretrained`` and ``AutoTokenizer.from_pretrained``.

    Args:
        checkpoint: a checkpoint file (ckpt.pt or best.pt).
        target: the folder to write (made, or replaced: see `hf_export.folder`).
        overwrite: replace an earlier export in ``target``.

    Raises:
        ExportError: transformers missing, no architecture computing this model's
            function, or a target that may not be written; each names the fix.
        model.checkpoint.CheckpointError: an unreadable or inconsistent checkpoint.
        RuntimeError: if the exported model's logits differ from ours (a bug).
    """
    transformers = require_transformers()
    transformers.utils.logging.disable_progress_bar()  # one line per export, not bars
    check_target(Path(target), overwrite)  # before the slow work
    ckpt = load_checkpoint(checkpoint)
    model_config = ckpt["model_config"]
    architecture = choose_architecture(model_config, checkpoint)
    ours, tokenizer = model_from_checkpoint(ckpt, checkpoint)  # checks vocab vs weights

    config_class = getattr(transformers, architecture.config_class)
    config = config_class(**architecture.config(model_config))
    exported = getattr(transformers, architecture.class_name)(config).eval()
    weights = architecture.weights(model_config, strip_compiled_prefix(ckpt["model"]))
    loaded = exported.load_state_dict(weights, strict=False)
    # A tied head is the embedding itself: no tensor of its own to load.
    tied = {"lm_head.weight"} if config.tie_word_embeddings else set()
    if set(loaded.missing_keys) - tied or loaded.unexpected_keys:
        raise RuntimeError(
            f"export to {architecture.class_name}: missing {loaded.missing_keys}, "
            f"unexpected {loaded.unexpected_keys} (a bug in hf_export.architectures)"
        )
    difference = _max_logit_difference(ours.eval(), exported, model_config)
    if difference > CHECK_TOLERANCE:
        raise RuntimeError(
            f"the exported {architecture.class_name} gives logits {difference:.2e} away from "
            "this model's (a bug in hf_export.architectures); nothing was written"
        )
    hf_tokenizer = transformers_tokenizer(
        tokenizer.chars, tokenizer.normalization, model_config["block_size"]
    )

    def write(folder: Path) -> None:
        exported.save_pretrained(folder)
        hf_tokenizer.save_pretrained(folder)

    target = Path(target)
    write_atomically(target, overwrite, write)
    files = sorted(p.name for p in target.iterdir())
    notes = [architecture.length_note(model_config["block_size"]), vocabulary_note(tokenizer.chars)]
    return ExportResult(target, architecture.class_name, files, difference, notes)


def vocabulary_note(chars: list[str]) -> str:
    """What the exported tokenizer does with a character outside the vocabulary: reads it
    as a space (`hf_export.tokenizer.unknown_stand_in`), or, in a vocabulary without
    one, refuses it. Either way, how to find such characters in a text."""
    find = "find them with set(text) - set(tokenizer.get_vocab())"
    if unknown_stand_in(chars) is None:
        return (
            f"the tokenizer reads the {len(chars)} characters of the vocabulary; it refuses "
            'others ("Missing [UNK] token"): the vocabulary has no space to read them as; ' + find
        )
    return (
        f"the tokenizer reads the {len(chars)} characters of the vocabulary; any other "
        f"character reads as a space (sample.py refuses it instead): {find}"
    )


@torch.no_grad()
def _max_logit_difference(ours, exported, model_config: dict) -> float:
    """max |logits| difference on a (1, T) random sequence of the vocabulary,
    T = min(block_size, CHECK_LENGTH)."""
    generator = torch.Generator().manual_seed(0)
    T = min(model_config["block_size"], CHECK_LENGTH)
    ids = torch.randint(model_config["vocab_size"], (1, T), generator=generator)
    ours_logits, _ = ours(ids)
    theirs = exported(input_ids=ids).logits
    return (ours_logits - theirs).abs().max().item()
