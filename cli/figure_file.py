"""The file a command writes a figure to (plot_losses.py, explore_attention.py --png):
checked before any work, and named as it will be written.

    png = figure_path(args.png, out_dir / "losses.png")   # ValueError: a folder, .xyz
    error = save_figure(fig, png, dpi)                    # "" once written
"""

import contextlib
import os
from pathlib import Path


def figure_path(given: str | None, default: Path) -> Path:
    """Where a figure goes: ``given`` (--png), or ``default``. A name without a suffix
    gets ".png", as matplotlib's savefig adds it, so that "wrote ..." names the file
    written; the suffix chooses the format (.png, .pdf, .svg, ...).

    Raises:
        ValueError: for a folder, or a suffix matplotlib cannot write.
    """
    if given is None:
        return default
    png = Path(given)
    if png.is_dir():
        raise ValueError(f"--png {png} is a folder: give a file name such as {png / default.name}")
    if not png.suffix:
        return png.with_name(png.name + ".png")
    from matplotlib.backend_bases import FigureCanvasBase  # only once a suffix is given

    formats = FigureCanvasBase.get_supported_filetypes()
    if png.suffix[1:].lower() not in formats:
        raise ValueError(
            f"--png: cannot write {png.suffix} files; use a name ending in .png (or "
            + ", ".join(f".{f}" for f in sorted(formats) if f != "png")
            + ")"
        )
    return png


def save_figure(fig, png: Path, dpi: int) -> str:
    """Write matplotlib figure ``fig`` to ``png`` at ``dpi`` dots per inch, making its
    folder; return "" once written, or the error line a command prints before it exits
    with 2 (a folder it cannot make, a file it cannot write).

    The figure is drawn into a temporary file beside ``png`` and renamed into place, so
    an earlier figure of that name stays whole until the new one is (a failure or a
    kill while drawing used to leave it cut short)."""
    partial = png.with_name(f".{png.name}.partial")
    try:
        png.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(partial, dpi=dpi, format=png.suffix[1:].lower() or "png")
        os.replace(partial, png)
    except OSError as e:
        return f"error: --png: cannot write {png}: {e.strerror or e}"
    finally:
        with contextlib.suppress(OSError):  # e.g. under a file: nothing was written
            partial.unlink(missing_ok=True)
    return ""
