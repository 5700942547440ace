"""Score a trained checkpoint on a whole split: nats and bits per character.

    python evaluate.py --out-dir runs/shakespeare_char_cpu               # validation split
    python evaluate.py --out-dir runs/linux --split test                 # held-out test split
    python evaluate.py --out-dir runs/korean --data-path other.txt       # another corpus
    python evaluate.py --out-dir runs/letters --parent-text              # the parent's text
    python evaluate.py --diagnose runs/korean          # what went wrong, and what to change

The corpus is prepared as the run prepared it (the checkpoint holds the run's data
settings; the cache makes this immediate), split as it was, and every character of
the chosen split after its first is scored, in non-overlapping windows of block_size,
with the run's evaluation batch size: in the run's precision (``--dtype``: auto on the
run's device is the run's own auto) the number is the training run's own whole-split
figure (val/full_loss), and for ``--split test`` the one character-level papers report
(e.g. enwik8 test bits per character). ``--data-path`` scores another
corpus, split with the run's fractions; its characters must all be in the model's
vocabulary. ``--parent-text`` scores a fine-tuned run (train.init_from) on its
parent's validation split, prepared as the parent prepared it, and the parent too
where its checkpoint is still there: what the new text cost the old skill.
"""

import argparse
import dataclasses
import functools
import math
import sys
from pathlib import Path

from tqdm import tqdm

from cli.checkpoint_args import add_checkpoint_arguments, resolve_checkpoint_path
from cli.console import run_command
from cli.flag_hints import explain_unknown_flags
from data import CorpusError, prepare_corpus
from data.batches import EvaluationWindows
from data.settings import DataConfig
from model.checkpoint import CheckpointError, load_checkpoint, model_from_checkpoint
from model.device import DTYPE_NAMES, DeviceError, autocast_context, resolve_device, resolve_dtype
from model.scoring import (
    EVAL_BATCH_SIZE,
    TRAIN_BATCH_SIZE,
    mean_windows_loss,
    nats_to_bits,
    rows_per_forward,
)

SPLIT_NAMES = {"val": "validation", "test": "test"}


@dataclasses.dataclass
class SplitScore:
    """What `score_split` measured.

    Attributes:
        loss: mean cross-entropy, nats per character.
        characters: the split's length (every character after the first is scored).
        split: "val" or "test".
        corpus: the corpus's log line (`data.Corpus.origin`).
        iter_num: the checkpoint's training step.
        dtype: what the forward passes computed in (float32, bfloat16, float16).
        run_dtype: what the checkpoint's run trained in (its resolved train.dtype;
            None for a checkpoint written before that key).
        parent: with ``parent_text``, the checkpoint's ``parent`` record
            (`training.init_from`); None otherwise.
    """

    loss: float
    characters: int
    split: str
    corpus: str
    iter_num: int
    dtype: str = "float32"
    run_dtype: str | None = None
    parent: dict | None = None

    @property
    def bits_per_character(self) -> float:
        """The loss in bits per character (nats / ln 2)."""
        return nats_to_bits(self.loss)


def stored_data_config(checkpoint_config: dict) -> DataConfig:
    """The run's `data:` section from a checkpoint's stored config, with defaults for
    keys it predates (and without keys this version no longer has)."""
    known = {f.name for f in dataclasses.fields(DataConfig)}
    stored = checkpoint_config.get("data", {})
    return DataConfig(**{k: v for k, v in stored.items() if k in known})


def score_split(
    out_dir: str,
    checkpoint: str = "ckpt.pt",
    split: str = "val",
    device_name: str = "auto",
    data_path: str | None = None,
    batch_size: int | None = None,
    progress: bool = False,
    dtype_name: str = "auto",
    parent_text: bool = False,
) -> SplitScore:
    """Load a checkpoint, prepare its corpus (or ``data_path``) as the run did, and
    score every character of ``split`` after its first.

    Args:
        out_dir, checkpoint: which checkpoint (see `cli.checkpoint_args`).
        split: "val" or "test".
        device_name: auto, cpu, cuda or mps.
        data_path: another corpus (file, folder or glob) instead of the run's.
        batch_size: windows per forward pass (default: the run's train.eval_batch_size).
        progress: show a tqdm bar (and the preparation's, for a large corpus).
        dtype_name: the precision of the forward passes (`model.device.resolve_dtype`):
            auto, float32, bfloat16 or float16; the run's train.dtype gives the run's
            own number.
        parent_text: score the validation split of the corpus of the run's parent
            (train.init_from; the checkpoint's ``parent`` record) instead of its own.

    Raises:
        CheckpointError, CorpusError, DeviceError: with the problem and the fix (a
            DtypeError, a DeviceError, for a dtype the device cannot compute in).
    """
    device = resolve_device(device_name)
    dtype = resolve_dtype(dtype_name, device)
    path = resolve_checkpoint_path(out_dir, checkpoint)
    ckpt = load_checkpoint(path, map_location=device)
    model, tokenizer = model_from_checkpoint(ckpt, path)
    data_cfg = stored_data_config(ckpt["config"])
    if parent_text:
        if "parent" not in ckpt:
            raise CorpusError(
                f"{path} did not start from another run (train.init_from), so it has no "
                "parent's text: leave out --parent-text"
            )
        data_cfg = stored_data_config({"data": ckpt["parent"]["data"]})
    if data_path is not None:
        data_cfg.path = data_path
    try:
        corpus = prepare_corpus(**dataclasses.asdict(data_cfg), progress=progress)
    except CorpusError as e:
        if data_path is None:
            raise
        # The path came from --data-path, not from a config: name the flag the user typed.
        raise CorpusError(str(e).replace("data.path", "--data-path")) from None
    id_map = None  # the corpus's token ids as the model's, when the vocabularies differ
    if corpus.tokenizer.chars != tokenizer.chars:
        try:
            id_map = corpus.tokenizer.ids_in(tokenizer)
        except CorpusError as e:
            raise CorpusError(f"{data_cfg.path}: {e}") from None
    ids = corpus.val_ids if split == "val" else corpus.test_ids
    if split == "test" and len(ids) == 0:
        from training.run_folder import training_command  # on this error path only

        folder = path.parent  # the checkpoint's run, trained again with a test split
        retrain = training_command(folder, "data.test_fraction=0.05", f"out_dir={folder}_test")
        raise CorpusError(
            f"the run in {folder} has no test split (data.test_fraction is 0): use "
            f"--split val, or train it again holding one out (5%, say): {retrain}"
        )
    T = model.config.block_size
    if len(ids) < T + 1:
        raise CorpusError(
            f"the {SPLIT_NAMES[split]} split of {data_cfg.path} has {len(ids)} characters, "
            f"fewer than block_size + 1 = {T + 1}: score a longer text"
        )
    model.to(device)
    autocast = functools.partial(autocast_context, device, dtype)
    # Windows per forward pass as training's Evaluator chose them: the same windows in
    # the same forward passes give the run's own number to the last digit.
    train = ckpt["config"].get("train", {})
    if batch_size is None:
        batch_size = train.get("eval_batch_size", EVAL_BATCH_SIZE)
    vocab = model.config.vocab_size  # the model's sizes the logits, not the scored corpus's
    rows = rows_per_forward(batch_size, train.get("batch_size", TRAIN_BATCH_SIZE), T, vocab)
    windows = EvaluationWindows(ids, T, id_map=id_map)  # every character after the first
    with tqdm(total=len(windows), unit="window", disable=not progress) as bar:
        batches = windows.batches(rows)
        loss = mean_windows_loss(model, batches, device, autocast, bar.update)
    dtype_name = str(dtype).removeprefix("torch.")
    run_dtype = train.get("dtype")
    parent = ckpt["parent"] if parent_text else None
    return SplitScore(
        loss, len(ids), split, corpus.origin, int(ckpt["iter_num"]), dtype_name, run_dtype, parent
    )


def dtype_note(score: SplitScore, requested: str) -> str:
    """A line for a score computed in another dtype than the checkpoint's run trained
    in (a bfloat16 CPU run scored with --dtype auto, float32 there): its last digits are
    not the run's own (val/full_loss), and ``--dtype`` as the run gives them; "" else."""
    if score.run_dtype is None or score.run_dtype == score.dtype:
        return ""
    return (
        f"note: the run trained in {score.run_dtype} and this score is in {score.dtype} "
        f"(--dtype {requested}): --dtype {score.run_dtype} computes as the run did"
    )


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface of evaluate.py."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_checkpoint_arguments(p)
    p.add_argument("--split", choices=sorted(SPLIT_NAMES), default="val", help="which split")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or mps")
    p.add_argument(
        "--dtype",
        choices=DTYPE_NAMES,
        default="auto",
        help="precision of the forward passes: auto (bfloat16 on a CUDA GPU that has it, "
        "float16 on one that has not, float32 on CPU and MPS), float32, bfloat16 or "
        "float16; the run's train.dtype gives its own number to the last digit",
    )
    p.add_argument(
        "--data-path",
        help="score another corpus (a file, folder or glob), split with the run's fractions",
    )
    p.add_argument(
        "--parent-text",
        action="store_true",
        help="for a run started from another (train.init_from): score its parent's "
        "validation split, and the parent on it where its checkpoint is still there",
    )
    p.add_argument(
        "--diagnose",
        metavar="RUN",
        help="instead of scoring: read the run folder RUN's curves and say what went "
        "wrong, one verdict a line with the setting to change (training/diagnose.py), and "
        "which heads formed",
    )
    p.add_argument(
        "--batch-size",
        type=int,
        help="windows per forward pass (default: the run's train.eval_batch_size, which "
        "gives exactly the training run's number)",
    )
    return p


def print_diagnosis(run_dir: str) -> int:
    """--diagnose: print the heads that formed and the verdicts of the run in
    ``run_dir``; returns the exit status (2 if it is not a run folder)."""
    from training.diagnose import diagnose, read_run  # this mode only

    try:
        record = read_run(run_dir)
    except (FileNotFoundError, CheckpointError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for line in record.formed_heads():
        print(line)
    verdicts = diagnose(record)
    for line in verdicts:
        print(line)
    if not verdicts:
        print(f"{run_dir}: no verdict: none of the rules of training/diagnose.py holds")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Score and print; returns the exit status (2 on bad input, 130 on Ctrl-C)."""
    args = explain_unknown_flags(build_parser()).parse_args(argv)
    if args.diagnose is not None:
        return print_diagnosis(args.diagnose)
    if args.batch_size is not None and args.batch_size < 1:
        print(f"error: --batch-size must be >= 1, got {args.batch_size}", file=sys.stderr)
        return 2
    if args.parent_text and (args.data_path is not None or args.split != "val"):
        print(
            "error: --parent-text scores the parent's validation split: leave out "
            "--data-path and --split",
            file=sys.stderr,
        )
        return 2
    try:
        score = score_split(
            args.out_dir,
            args.checkpoint,
            args.split,
            args.device,
            args.data_path,
            args.batch_size,
            progress=sys.stderr.isatty(),
            dtype_name=args.dtype,
            parent_text=args.parent_text,
        )
        before = parent_score(score, args) if args.parent_text else None
    except (CheckpointError, CorpusError, DeviceError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    print(score.corpus)
    whose = "the parent's " if args.parent_text else ""
    print(
        f"{args.checkpoint} at step {score.iter_num}, {whose}{SPLIT_NAMES[score.split]} split, "
        f"{score.characters:,} characters: {score.loss:.4f} nats/char, "
        f"{score.bits_per_character:.4f} bits/char (perplexity {math.exp(score.loss):.3f})"
    )
    note = dtype_note(score, args.dtype)
    if note:
        print(note)
    if args.parent_text:
        print(parent_line(score, before))
    return 0


def parent_score(score: SplitScore, args) -> SplitScore | None:
    """The parent's own score on its validation split (``score.parent``'s checkpoint,
    same device, dtype and batch size), or None where that file is gone."""
    path = Path(score.parent["path"])
    if not path.is_file():
        return None
    return score_split(
        str(path.parent),
        str(path),
        "val",
        args.device,
        None,
        args.batch_size,
        progress=sys.stderr.isatty(),
        dtype_name=args.dtype,
    )


def parent_line(score: SplitScore, before: SplitScore | None) -> str:
    """What the fine-tuning cost on the parent's text: the parent's loss there (scored
    now, or as recorded where its checkpoint is gone) against the child's, in nats per
    character."""
    record = score.parent
    if before is None:
        return (
            f"the parent's checkpoint is no longer at {record['path']}; its best validation "
            f"loss at step {record['step']:,} was {record['best_val_loss']:.4f} nats/char "
            "(a periodic evaluation's)"
        )
    change = score.loss - before.loss
    return (
        f"the parent ({record['path']}, step {before.iter_num:,}) on the same text: "
        f"{before.loss:.4f} nats/char; this run {score.loss:.4f} ({change:+.4f} nats/char, "
        f"{change / math.log(2):+.4f} bits/char)"
    )


if __name__ == "__main__":
    sys.exit(run_command(main))
