"""How every command treats its console: text the console's encoding lacks is printed as
escapes, and a reader that leaves early ends the command quietly.

    if __name__ == "__main__":
        sys.exit(run_command(main))

- A console whose encoding cannot carry a character (``PYTHONIOENCODING=ascii``, a
  Windows code page with the output redirected to a file) gets it as a Python escape,
  ``\\ub85c`` for 로, instead of a UnicodeEncodeError after the work is done. Paths,
  prompts and samples may hold any character; what the command writes to files is
  UTF-8 whatever the console.
- A reader that closes the pipe early (``python train.py ... | head -2``) makes the
  next write raise BrokenPipeError. Lines the command prints after that are of no use
  to anyone: the command ends as it would have (exit status 0 when the pipe closed
  before it was done), and Python's own last flush at exit finds stdout pointed at
  the null device rather than failing with a second traceback (the recipe of the
  Python documentation, "Note on SIGPIPE").

train.py, sample.py, evaluate.py, plot_losses.py, export.py and explore_attention.py
all run their ``main`` through `run_command`, so the six behave alike.
"""

import os
import sys
from collections.abc import Callable

ExitStatus = int | str | None  # what sys.exit accepts


def escape_what_the_console_cannot_encode() -> None:
    """stdout and stderr write a character their encoding lacks as an escape
    (``backslashreplace``) from now on; streams that cannot be reconfigured (a
    test's capture) are left as they are."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


def discard_stdout() -> None:
    """Point stdout's file descriptor at the null device: the reader has gone, and
    whatever is still buffered, flushed at exit, must not raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no file descriptor (a test's capture)
        pass


def run_command(main: Callable[[list[str] | None], ExitStatus], argv=None) -> ExitStatus:
    """Run a command's ``main(argv)`` with the console rules of the module docstring.

    Args:
        main: the entry point's main; returns an exit status (or raises SystemExit,
            as argparse does for --help and bad flags).
        argv: its arguments (None: sys.argv[1:]).

    Returns:
        main's exit status; 0 if the reader closed stdout before main was done.
    """
    escape_what_the_console_cannot_encode()
    status: ExitStatus = 0
    try:
        try:
            status = main(argv)
        except SystemExit as e:  # argparse's --help, whose text may meet a closed pipe
            status = e.code
        if sys.stdout is not None:  # what is buffered meets a closed pipe here, not at exit
            sys.stdout.flush()
    except BrokenPipeError:
        discard_stdout()
    return status
