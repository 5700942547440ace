"""Export a trained run as a Hugging Face transformers folder.

    python export.py --out-dir runs/shakespeare_char_cpu_gpt2 --to exported/shakespeare
    python export.py --checkpoint downloads/model.pt --to exported/mine --overwrite

The folder holds config.json, model.safetensors and a character-level tokenizer.json;
``AutoModelForCausalLM.from_pretrained(folder)`` and ``AutoTokenizer.from_pretrained
(folder)`` load it with no code from this project. The GPT-2 block exports as
GPT2LMHeadModel, the modern block (RoPE, RMSNorm, QK-norm, ReLU²) as Qwen3ForCausalLM,
without QK-norm as LlamaForCausalLM; other blocks are refused, naming what differs
(hf_export.architectures says why each computes the same function). Needs the
transformers package (requirements.txt, test section); it is imported only here.
"""

import argparse
import sys
import time

from cli.checkpoint_args import add_checkpoint_arguments, resolve_checkpoint_path
from cli.console import run_command
from cli.flag_hints import explain_unknown_flags
from hf_export import ExportError
from model.checkpoint import CheckpointError


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface of export.py."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_checkpoint_arguments(p)
    p.add_argument("--to", required=True, metavar="DIR", help="folder to write")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an earlier export in DIR (a folder holding other files is refused)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """Export and print what was written; returns the exit status (2 on bad input)."""
    args = explain_unknown_flags(build_parser()).parse_args(argv)
    start = time.perf_counter()
    try:
        from hf_export.exporter import export_checkpoint

        path = resolve_checkpoint_path(args.out_dir, args.checkpoint)
        result = export_checkpoint(path, args.to, overwrite=args.overwrite)
    except (ExportError, CheckpointError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(
        f"exported {path} as {result.class_name} to {result.folder} "
        f"({', '.join(result.files)}) in {time.perf_counter() - start:.1f} s; "
        f"logits within {result.max_logit_difference:.1e} of this model's"
    )
    for note in result.notes:
        print(note)
    return 0


if __name__ == "__main__":
    sys.exit(run_command(main))
