"""Work done in a forked child process, so that two cores share an export.

A forked child starts at once (it shares the parent's loaded modules and data, copy-on-write) and
runs one function; the parent collects its return value, or its exception, with `result()`.
Fork only where the parent runs no other thread that the child could need: the child runs just
the function. Where fork does not exist, `Forked` runs the function at once, in this process.
"""
from __future__ import annotations

import multiprocessing
import pickle
import sys
from multiprocessing.connection import Connection
from typing import Any, Callable, Optional

from .errors import MsprofKitError


class WorkerDied(MsprofKitError):
    exit_code = 1


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


class Forked:
    """`fn()` running in a forked child. Use `result()` once; `cancel()` stops it unasked."""

    def __init__(self, fn: Callable[[], Any], name: str) -> None:
        self.name = name
        self._proc: Optional[Any] = None
        if not can_fork():
            self._value = fn()
            return
        for stream in (sys.stdout, sys.stderr):  # else the child would print the buffered text again
            if stream is not None:
                stream.flush()
        ctx = multiprocessing.get_context("fork")
        self._recv, send = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(target=_run, args=(fn, send), name=name, daemon=True)
        self._proc.start()
        send.close()

    def result(self) -> Any:
        """The child's return value; its exception is raised here."""
        if self._proc is None:
            return self._value
        try:
            ok, value = self._recv.recv()
        except EOFError:
            ok, value = False, None
        finally:
            self._recv.close()
            self._proc.join()
            code, self._proc = self._proc.exitcode, None
            self._value = None
        if ok:
            return value
        if value is None:
            raise WorkerDied(f"the {self.name} worker process ended without a result (exit code {code})")
        raise value

    def cancel(self) -> Optional[int]:
        """Stop the child; returns its process id (None when it had already ended)."""
        if self._proc is None:
            return None
        pid = self._proc.pid
        self._proc.terminate()
        self._proc.join()
        self._recv.close()
        self._proc = None
        return pid


def _run(fn: Callable[[], Any], send: Connection) -> None:
    try:
        outcome = (True, fn())
    except BaseException as exc:  # handed to the parent, which raises it
        outcome = (False, exc)
    try:
        send.send(outcome)
    except (pickle.PicklingError, TypeError, AttributeError):
        send.send((False, WorkerDied(f"{type(outcome[1]).__name__}: {outcome[1]}")))
    finally:
        send.close()
