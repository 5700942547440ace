"""Train a character-level GPT.

    python train.py --config configs/shakespeare_char_cpu.yaml [section.key=value ...]
    torchrun --standalone --nproc_per_node=2 train.py --config ...   (data-parallel)

Examples of overrides: data.path=my.txt train.max_iters=500 model.dropout=0.1
device=cpu out_dir=runs/mine train.resume=true. Loss curves: tensorboard --logdir runs
"""

import argparse
import sys

from cli.console import run_command
from cli.flag_hints import explain_unknown_flags, spelling_hint
from data import CorpusError
from model.checkpoint import CheckpointError
from training import ConfigError, load_config, train
from training.config import all_keys, config_reference
from training.distributed import NonFiniteLossError
from training.report import plain_warnings, steps


def flag_hint(parser: argparse.ArgumentParser, unknown: list[str], argv: list[str]) -> str:
    """For settings given as flags, nanoGPT's ``--max_iters=100`` or litgpt's ``--dtype
    float16``: the override to write instead, e.g. "train.max_iters=100"; for
    train.py's own flags in another spelling (``--help_config``), that flag
    (`cli.flag_hints.spelling_hint`); "" when the first unknown argument of the command
    line ``argv`` names neither."""
    flag = next((a for a in unknown if a.startswith("--")), None)
    if flag is None:
        return ""
    own = spelling_hint(parser, unknown, argv)
    if own:
        return own
    name, _, value = flag[2:].partition("=")
    name = name.replace("-", "_")  # the other commands spell --out-dir, --max-new-tokens
    if not value:  # --dtype float16: the value is the next argument, if any
        after = argv[argv.index(flag) + 1 :]
        value = after[0] if after and not after[0].startswith("-") else "VALUE"
    keys = [k for k in all_keys() if k == name or k.rsplit(".", 1)[-1] == name]
    if not keys:
        return ""
    return (
        f"train.py takes settings as section.key=value, not as flags: "
        f"{' or '.join(f'{k}={value}' for k in keys)} (every key: python train.py --help-config)"
    )


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, train, and return the exit status (0 on success,
    2 on bad input, 130 when interrupted)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", help="YAML recipe, e.g. configs/shakespeare_char_cpu.yaml")
    parser.add_argument("overrides", nargs="*", metavar="section.key=value")
    parser.add_argument(
        "--help-config",
        action="store_true",
        help="print every config key with its default and meaning, and exit",
    )
    argv = sys.argv[1:] if argv is None else argv
    args = explain_unknown_flags(parser, flag_hint, argv).parse_args(argv)
    if args.help_config:
        print(config_reference())
        return 0
    plain_warnings()
    try:
        cfg = load_config(args.config, args.overrides)
        result = train(cfg)
    except (ConfigError, CorpusError, CheckpointError, NonFiniteLossError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before the first step was done, or a second Ctrl-C
        print("\nstopped by Ctrl-C without saving", file=sys.stderr)
        return 130
    if result.interrupted:  # the shell's convention: 128 + signal number
        return 128 + (result.signal or 2)
    if result.rank == 0:
        whole = result.full_val_loss
        whole = "" if whole is None else f"; whole validation split {whole:.4f} nats/char"
        skipped = result.skipped_steps  # loss scaling (train.dtype float16)
        skipped = f"; loss scaling skipped {steps(skipped)}" if skipped else ""
        print(
            f"best val loss {result.best_val_loss:.4f} nats/char{whole}{skipped}; "
            f"checkpoint in {result.out_dir}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(run_command(main))
