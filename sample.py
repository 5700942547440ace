"""Generate text from a trained checkpoint.

    python sample.py --out-dir runs/shakespeare_char_cpu --prompt "ROMEO:" \\
        --max-new-tokens 500 --num-samples 3 --temperature 0.8 --top-k 40 --seed 1337

The vocabulary comes from the checkpoint itself; the same seed gives the same text.
"""

import argparse
import sys
from pathlib import Path

import torch

from data import CorpusError
from data.corpus import normalize_newlines
from training import CheckpointError, load_checkpoint, model_from_checkpoint
from training.config import ConfigError
from training.device import resolve_device

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
    p.add_argument("--out-dir", default="runs/shakespeare_char_cpu", help="run folder")
    p.add_argument(
        "--checkpoint",
        default="ckpt.pt",
        help="file in --out-dir (ckpt.pt: latest, best.pt: best validation) or a path",
    )
    p.add_argument(
        "--prompt",
        default="",
        help="text to continue; empty starts from a newline (or a space, or the "
        "first vocabulary character if the corpus has neither)",
    )
    p.add_argument("--max-new-tokens", type=int, default=500, help="characters per sample")
    p.add_argument("--num-samples", type=int, default=1, help="samples, generated as a batch")
    p.add_argument("--temperature", type=float, default=0.8, help="0 = greedy; >1 more random")
    p.add_argument("--top-k", type=int, default=None, help="sample among the k likeliest")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or mps")
    return p


def main(argv: list[str] | None = None) -> int:
    """Sample and print; returns the exit status (2 on bad input)."""
    args = build_parser().parse_args(argv)
    # A console that cannot show a character prints a replacement, not a traceback.
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="replace")
    try:
        if args.num_samples < 1:
            raise ValueError(f"--num-samples must be >= 1, got {args.num_samples}")
        if args.max_new_tokens < 0:
            raise ValueError(f"--max-new-tokens must be >= 0, got {args.max_new_tokens}")
        if args.temperature < 0:
            raise ValueError(f"--temperature must be >= 0 (0 = greedy), got {args.temperature}")
        if args.top_k is not None and args.top_k <= 0:
            raise ValueError(f"--top-k must be a positive integer, got {args.top_k}")
        device = resolve_device(args.device)
        path = Path(args.checkpoint)
        if not path.is_file():
            path = Path(args.out_dir) / args.checkpoint
        ckpt = load_checkpoint(path, map_location=device)
        model, tokenizer = model_from_checkpoint(ckpt, path)
        prompt = normalize_newlines(args.prompt) or default_start_character(tokenizer.chars)
        prompt_ids = torch.from_numpy(tokenizer.encode(prompt).astype("int64"))
    except (ValueError, ConfigError, CheckpointError, CorpusError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    model.to(device).eval()
    generator = torch.Generator(device=device).manual_seed(args.seed)
    idx = prompt_ids.to(device).unsqueeze(0).repeat(args.num_samples, 1)
    out = model.generate(
        idx, args.max_new_tokens, args.temperature, args.top_k, generator=generator
    )
    try:
        for i, row in enumerate(out.tolist()):
            if i:
                print(SEPARATOR)
            print(tokenizer.decode(row), flush=True)
    except BrokenPipeError:  # e.g. `| head`: the reader left, nothing to report
        sys.stdout = None
    return 0


if __name__ == "__main__":
    sys.exit(main())
