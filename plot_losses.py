"""Plot a run's training and validation loss from its TensorBoard event files.

    python plot_losses.py --out-dir runs/shakespeare_char_cpu
    python plot_losses.py --out-dir runs/mine \
        --reference docs/reference_curves/shakespeare_char_cpu.csv

Writes a PNG with two panels, loss against iterations and loss against seconds since
the run started, read with TensorBoard's event reader: no TensorBoard server needed.
--reference draws a recipe's measured validation curve beside the run's (dashed grey).
"""

import argparse
import sys
from pathlib import Path

from cli.console import run_command
from cli.figure_file import figure_path, save_figure
from cli.flag_hints import explain_unknown_flags
from viz.loss_plot import LOSS_TAGS, loss_figure, read_reference_curve
from viz.run_events import VAL_LOSS, read_scalar_curves


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface of plot_losses.py."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out-dir", default="runs/shakespeare_char_cpu", help="run folder")
    p.add_argument("--png", default=None, help="output file (default: OUT_DIR/losses.png)")
    p.add_argument("--dpi", type=int, default=100, help="PNG resolution, dots per inch")
    p.add_argument(
        "--reference",
        default=None,
        help="overlay a recipe's measured validation curve, a CSV such as "
        "docs/reference_curves/shakespeare_char_cpu.csv",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """Write the plot; returns the exit status (2 when there is nothing to plot)."""
    args = explain_unknown_flags(build_parser()).parse_args(argv)
    out_dir = Path(args.out_dir)
    try:
        if args.dpi <= 0:
            raise ValueError(f"--dpi must be > 0, got {args.dpi}")
        png = figure_path(args.png, out_dir / "losses.png")
        curves = read_scalar_curves(out_dir, list(LOSS_TAGS))
        reference = read_reference_curve(args.reference) if args.reference else None
        fig = loss_figure(curves, title=str(out_dir), reference=reference)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if error := save_figure(fig, png, args.dpi):
        print(error, file=sys.stderr)
        return 2
    if VAL_LOSS in curves:
        val = curves[VAL_LOSS]
        print(
            f"validation loss {val.values[-1]:.4f} nats/char at step {val.steps[-1]} "
            f"({val.seconds[-1]:.0f} s); lowest {val.values.min():.4f}"
        )
    print(f"wrote {png}")
    return 0


if __name__ == "__main__":
    sys.exit(run_command(main))
