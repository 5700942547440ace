"""SIGTERM and SIGHUP as an exception, so that cleanup code runs.

Their default action (``kill``, ``docker stop``, a scheduler's pre-emption, a closed
terminal) ends the process at once, with no Python cleanup: a half-written cache
entry, export folder or new run folder would be left behind. Within `signals_raise`
they raise `Terminated` (a SystemExit with status 128 + the signal number, the
shell's convention) instead, so that ``finally`` blocks run and the process then
exits with that status. The corpus cache (`data.staging`), the trainer
(`training.loop`, `training.distributed`) and the export (`hf_export.folder`) use it.
"""

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator

# Signals whose default action ends the process without unwinding Python's stack.
TERMINATING_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)


class Terminated(SystemExit):
    """Raised by SIGTERM or SIGHUP within `signals_raise` (or by a handler of the
    caller's), so that whatever the code holds is cleaned up; exits with status
    128 + signum.

    Attributes:
        signum: the signal received.
    """

    def __init__(self, signum: int):
        super().__init__(128 + signum)
        self.signum = signum


def _terminated_raiser(cleanup: str):
    def raise_terminated(signum, frame) -> None:
        name = signal.Signals(signum).name
        print(f"\n{name}: stopping; {cleanup}", file=sys.stderr, flush=True)
        raise Terminated(signum)

    return raise_terminated


@contextlib.contextmanager
def signals_raise(cleanup: str) -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise `Terminated` where they would end
    the process (their handler is the default one, in the main thread: a handler of
    the caller's, or an ignored signal, is left as it is), so that the block's own
    cleanup (``finally``) runs. ``cleanup``: what the line printed at the signal says
    is being done (``SIGTERM: stopping; <cleanup>``)."""
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for signum in TERMINATING_SIGNALS:
            if signal.getsignal(signum) == signal.SIG_DFL:
                previous[signum] = signal.signal(signum, _terminated_raiser(cleanup))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
