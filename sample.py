"""Generate text from a trained checkpoint.

    python sample.py --out-dir runs/shakespeare_char_cpu --prompt "ROMEO:" \\
        --max-new-tokens 500 --num-samples 3 --temperature 0.8 --top-k 40 --seed 1337
    python sample.py --prompt-file prompt.txt --top-p 0.9 --stop '\\n\\n'
    python sample.py --prompt 'int main(void)\\n{' --stop '\\n}'

--prompt and --stop read text the same way: \\n is a newline, \\t a tab, \\\\ a
backslash, \\u00e9 the character U+00E9 (any other backslash is kept as typed; see
data/escapes.py). --prompt-file is taken as the file has it.

The vocabulary comes from the checkpoint itself; the same seed gives the same text, and
sample i draws from its own generator (`model.sampling.sample_seed`), so it is the same
text whatever --num-samples.
One sample is printed as it is generated (--no-stream waits for the end); several
are generated together as one batch and printed when all are done.
"""

import argparse
import os
import sys
from pathlib import Path

import torch

from cli.checkpoint_args import add_checkpoint_arguments, resolve_checkpoint_path
from cli.console import run_command
from cli.flag_hints import explain_unknown_flags
from cli.stop_sequences import StopSequences
from data import CorpusError
from data.decoding import normalize_newlines
from data.escapes import ESCAPES_HELP, unescape_argument
from model.checkpoint import CheckpointError, load_checkpoint, model_from_checkpoint
from model.device import (
    DTYPE_NAMES,
    DeviceError,
    DtypeError,
    autocast_context,
    resolve_device,
    resolve_dtype,
)
from model.engine import generate_stream, read_in_chunks
from model.sampling import Sampling, SamplingArgumentError, check_max_new_tokens

SEPARATOR = "\n" + "-" * 40


def default_start_character(chars: list[str]) -> str:
    """The context used when there is no prompt: a newline if the vocabulary has one,
    else a space, else its first character."""
    for c in ("\n", " "):
        if c in chars:
            return c
    return chars[0]


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface of sample.py."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_checkpoint_arguments(p)
    source = p.add_mutually_exclusive_group()
    source.add_argument(
        "--prompt",
        default="",
        help="text to continue; empty starts from a newline (or a space, or the "
        f"first vocabulary character if the corpus has neither); {ESCAPES_HELP}",
    )
    source.add_argument("--prompt-file", help="read the prompt from this UTF-8 text file")
    p.add_argument("--max-new-tokens", type=int, default=500, help="characters per sample")
    p.add_argument("--num-samples", type=int, default=1, help="samples, generated as a batch")
    p.add_argument("--temperature", type=float, default=0.8, help="0 = greedy; >1 more random")
    p.add_argument("--top-k", type=int, default=None, help="sample among the k likeliest")
    p.add_argument(
        "--top-p",
        type=float,
        default=None,
        help="nucleus sampling: sample among the likeliest characters whose total "
        "probability reaches P, in (0, 1]",
    )
    p.add_argument(
        "--stop",
        action="append",
        default=[],
        metavar="STRING",
        help="end a sample when it generates STRING (which is not printed); repeatable; "
        + ESCAPES_HELP,
    )
    p.add_argument(
        "--stream",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="print characters as they are generated (default: on for one sample)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=1337,
        help="the same seed gives the same text; sample i is the same whatever --num-samples",
    )
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or mps")
    p.add_argument(
        "--dtype",
        choices=DTYPE_NAMES,
        default="auto",
        help="precision of the forward passes: auto (bfloat16 on a CUDA GPU that has it, "
        "float16 on one that has not, float32 on CPU and MPS), float32, bfloat16 or float16",
    )
    return p


def read_prompt_file(path: str) -> str:
    """The text of a UTF-8 prompt file (BOM dropped, newlines normalised, kept as is).

    Raises:
        ValueError: naming --prompt-file, if the file cannot be read or is not UTF-8.
    """
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise ValueError(f"--prompt-file {path}: cannot read it ({e.strerror})") from None
    try:
        return normalize_newlines(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as e:
        raise ValueError(
            f"--prompt-file {path} is not valid UTF-8: byte 0x{raw[e.start]:02x} "
            f"at byte offset {e.start}"
        ) from None


def flag_problems(error: SamplingArgumentError) -> list[str]:
    """The problems of a `SamplingArgumentError`, each named as the flag the user typed
    (top_p -> --top-p)."""
    return [
        f"--{argument.replace('_', '-')} {requirement}" for argument, requirement in error.problems
    ]


def problems_message(problems: list[str]) -> str:
    """One problem as it is; several as a list under one line, as train.py reports an
    invalid configuration."""
    if len(problems) == 1:
        return problems[0]
    return f"{len(problems)} bad arguments:\n  - " + "\n  - ".join(problems)


def check_arguments(
    args: argparse.Namespace,
) -> tuple[Sampling, bool, list[str], torch.device, torch.dtype]:
    """Validate every argument that needs no checkpoint; return (sampling settings,
    stream, stop strings, device, the dtype of the forward passes). Reads the prompt
    into ``args.prompt``: the escapes of --prompt (`data.escapes`), or the text of
    --prompt-file; and the escapes of --stop.

    Raises:
        ValueError: naming the flag of every bad value, all of them at once.
    """
    problems = []
    sampling = None
    try:
        sampling = Sampling(args.temperature, args.top_k, args.top_p, seed=args.seed)
    except SamplingArgumentError as e:
        problems += flag_problems(e)
    try:
        check_max_new_tokens(args.max_new_tokens)
    except SamplingArgumentError as e:
        problems += flag_problems(e)
    if args.num_samples < 1:
        problems.append(f"--num-samples must be >= 1, got {args.num_samples}")
    if args.stream and args.num_samples > 1:
        problems.append(
            "--stream prints one sample as it is generated: use --num-samples 1, "
            "or --no-stream to print the batch when it is done"
        )
    try:
        if args.prompt_file is not None:
            args.prompt = read_prompt_file(args.prompt_file)
        else:
            args.prompt = normalize_newlines(unescape_argument("--prompt", args.prompt))
    except ValueError as e:
        problems.append(str(e))
    stops = []
    for raw in args.stop:
        try:
            stop = normalize_newlines(unescape_argument("--stop", raw))
        except ValueError as e:
            problems.append(str(e))
            continue
        if not stop:
            problems.append("--stop needs a non-empty string")
        stops.append(stop)
    device = dtype = None
    try:
        device = resolve_device(args.device)
        dtype = resolve_dtype(args.dtype, device)
    except DeviceError as e:  # a DtypeError names --dtype itself
        problems.append(str(e) if isinstance(e, DtypeError) else f"--device: {e}")
    if problems:
        raise ValueError(problems_message(problems))
    stream = args.num_samples == 1 if args.stream is None else args.stream
    return sampling, stream, stops, device, dtype


def main(argv: list[str] | None = None) -> int:
    """Sample and print; returns the exit status (2 on bad input, 130 on Ctrl-C)."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130


def _main(argv: list[str] | None) -> int:
    args = explain_unknown_flags(build_parser()).parse_args(argv)
    try:
        sampling, stream, stop_strings, device, dtype = check_arguments(args)
        prompt = args.prompt
        path = resolve_checkpoint_path(args.out_dir, args.checkpoint)
        ckpt = load_checkpoint(path, map_location=device)
        model, tokenizer = model_from_checkpoint(ckpt, path)
        # The model's own normalisation (data.normalization), so that the prompt shown
        # is the text the model reads.
        prompt = tokenizer.normalize(prompt or default_start_character(tokenizer.chars))
        problems = []
        try:
            prompt_ids = torch.from_numpy(tokenizer.encode(prompt).astype("int64"))
        except CorpusError as e:
            problems.append(str(e))
        stop_ids = []
        for stop in stop_strings:
            try:
                stop_ids.append(tokenizer.encode(stop).tolist())
            except CorpusError as e:
                problems.append(f"--stop {stop!r} can never be generated: {e}")
        if problems:
            raise ValueError(problems_message(problems))
    except (ValueError, CheckpointError, CorpusError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    # Which weights speak, on stderr (stdout stays the samples alone, for pipes): the
    # default ckpt.pt is the latest step, best.pt the lowest validation loss.
    best = ckpt.get("best_val_loss")
    best_text = f", best val {best:.4f} nats/char" if isinstance(best, float) else ""
    print(f"sampling {path} (step {ckpt.get('iter_num', 0):,}{best_text})", file=sys.stderr)
    model.to(device).eval()
    idx = prompt_ids.to(device).unsqueeze(0).repeat(args.num_samples, 1)
    # Tokens come back to the host CHUNK at a time (model/engine.py): streamed text
    # appears a chunk at a time, and a stop sequence ends the sample within a chunk.
    chunks = read_in_chunks(generate_stream(model, idx, args.max_new_tokens, sampling))
    stops = StopSequences(stop_ids, args.num_samples)
    texts = [[prompt] for _ in range(args.num_samples)]  # the pieces of each sample

    def show(released: list[list[int]]) -> None:
        for row, ids in enumerate(released):
            if ids:
                texts[row].append(tokenizer.decode(ids))
                if stream:
                    sys.stdout.write(texts[row][-1])
                    sys.stdout.flush()

    try:
        if stream:
            sys.stdout.write(prompt)
            sys.stdout.flush()
        with autocast_context(device, dtype):  # the model runs as the chunks are drawn
            for chunk in chunks:
                for column in chunk.T.tolist():  # (B,) tokens of one step
                    show(stops.push(column))
                    if stops.all_finished:
                        break
                if stops.all_finished:
                    break  # leaving the iterator early skips the remaining model work
        show(stops.flush())
        if stream:
            sys.stdout.write("\n")
            sys.stdout.flush()
        else:
            samples = ("".join(pieces) for pieces in texts)
            print(("\n" + SEPARATOR + "\n").join(samples), flush=True)
    except BrokenPipeError:
        # The reader left (e.g. `| head`): stop quietly. Point stdout at /dev/null so
        # that Python's final flush of the buffered rest cannot raise again at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(run_command(main))
