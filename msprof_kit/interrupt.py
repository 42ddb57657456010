"""SIGTERM and SIGHUP handled as Ctrl-C is: the signal raises `Terminated` (a KeyboardInterrupt) in
the main thread, so every `finally` and `except BaseException` clean-up that Ctrl-C runs runs for
them too (a collector kills its program's process group, cleans the board, puts acl.json back).

`terminate_as_interrupt()` is a context manager; both collectors run inside it. A second
signal while the clean-up runs is noted, not raised, so the clean-up finishes; the previous
handlers come back on exit."""
from __future__ import annotations

import contextlib
import signal
import threading
from types import FrameType
from typing import Any, Dict, Iterator, List, Optional

__all__ = ["Terminated", "terminate_as_interrupt", "HANDLED"]

#: the signals turned into Terminated (SIGHUP is missing on some platforms)
HANDLED: List[signal.Signals] = [s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None))
                                 if s is not None]


class Terminated(KeyboardInterrupt):
    """The process was asked to stop by `signum`; exit status 128 + signum, as a shell reports it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        """The signal's name ('SIGTERM')."""
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """128 + the signal number, as a shell reports a command a signal ended."""
        return 128 + self.signum


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise Terminated once (later ones are ignored until the
    block ends). Outside the main thread, where handlers cannot be set, it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    state = {"raised": False}

    def handler(signum: int, frame: Optional[FrameType]) -> None:
        if state["raised"]:
            return  # the clean-up of the first one is running: let it finish
        state["raised"] = True
        raise Terminated(signum)

    previous: Dict[signal.Signals, Any] = {}
    try:
        for sig in HANDLED:
            previous[sig] = signal.signal(sig, handler)
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
