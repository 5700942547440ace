"""Graceful stop: Ctrl-C or SIGTERM asks the training loop to save and exit."""

import signal
import threading


class StopRequest:
    """Context manager that turns the first Ctrl-C (SIGINT) or SIGTERM into a flag,
    ``requested``, which the training loop checks between iterations so it can save
    a consistent checkpoint. A second Ctrl-C raises KeyboardInterrupt at once.

    Outside the main thread (where Python cannot install signal handlers) it does
    nothing and ``requested`` stays False.
    """

    def __init__(self):
        self.requested = False
        self._previous = {}

    def __enter__(self) -> "StopRequest":
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
