"""Work done in forked child processes, so that several cores share an import or an export.

A forked child starts at once (it shares the parent's loaded modules and data, copy-on-write) and
runs one function; the parent collects its return value, or its exception, with `result()`.
Fork only where the parent runs no other thread that the child could need: the child runs just
the function. Where fork does not exist, `Forked` runs the function at once, in this process.

A large result (arrays of millions of rows) does not go through the pipe: the child pickles it
with its array buffers out of band (pickle protocol 5) and writes those into an anonymous shared
file made before the fork (memfd); the parent maps the file and unpickles the arrays over the
mapping, without a copy. Where memfd does not exist, everything goes through the pipe.

A child holds no pipe end but its own write end: it closes the read ends it inherits (its own
and those of the workers started before it), so that a write into a pipe nobody reads fails
instead of blocking for ever. On Linux a child also ends when its parent dies (PR_SET_PDEATHSIG),
so that a killed command leaves no worker behind, holding its memory.
"""
from __future__ import annotations

import ctypes
import mmap
import multiprocessing
import os
import pickle
import signal
import sys
import weakref
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .errors import MsprofKitError


class WorkerDied(MsprofKitError):
    """A worker process ended without handing back a result (killed, or its result could not be sent)."""

    exit_code = 1


class Stopped(KeyboardInterrupt):
    """Raised in a child that its parent stops (`cancel`, SIGTERM), so that the child removes
    what it began as an interrupted command does."""


PR_SET_PDEATHSIG = 1  # prctl option (linux/prctl.h): the signal a process gets when its parent dies
STOP_WAIT = 5.0  # seconds a cancelled child is given to end on SIGTERM before SIGKILL
_started: "weakref.WeakSet[Forked]" = weakref.WeakSet()  # children of this process not yet collected


def can_fork() -> bool:
    """Whether this platform can fork worker processes."""
    return "fork" in multiprocessing.get_all_start_methods()


class Forked:
    """`fn()` running in a forked child. Use `result()` once; `cancel()` stops it unasked. A child
    that is not `daemon` may fork workers of its own (the pool of `each` uses that). `inline` (or
    a system without fork) runs `fn` here and now instead (`-j 1`)."""

    def __init__(self, fn: Callable[[], Any], name: str, daemon: bool = True, inline: bool = False) -> None:
        self.name = name
        self._proc: Optional[Any] = None
        self.pid: Optional[int] = None  # the child's process id (None: run here)
        if inline or not can_fork():
            self._value = fn()
            return
        for stream in (sys.stdout, sys.stderr):  # else the child would print the buffered text again
            if stream is not None:
                stream.flush()
        ctx = multiprocessing.get_context("fork")
        self._recv, send = ctx.Pipe(duplex=False)
        self._shared = _shared_file()
        self._proc = ctx.Process(target=_run, args=(fn, send, self._shared, os.getpid()), name=name,
                                 daemon=daemon)
        _started.add(self)
        self._proc.start()
        self.pid = self._proc.pid
        send.close()

    @property
    def handle(self) -> Optional[Connection]:
        """What `multiprocessing.connection.wait` watches for the result (None: already there)."""
        return self._recv if self._proc is not None else None

    def result(self) -> Any:
        """The child's return value; its exception is raised here. Interrupted while waiting
        (Ctrl-C), it stops the child instead of waiting for it."""
        if self._proc is None:
            return self._value
        try:
            ok, value = _load(self._recv.recv(), self._shared)
        except EOFError:
            ok, value = False, None
        except BaseException:
            self.cancel()
            raise
        self._close()
        self._proc.join()
        code, self._proc = self._proc.exitcode, None
        self._value = None
        if ok:
            return value
        if value is None:
            raise WorkerDied(f"the {self.name} worker process ended without a result (exit code {code})")
        raise value

    def cancel(self) -> Optional[int]:
        """Stop the child (SIGTERM, then SIGKILL after STOP_WAIT seconds); returns its process id
        (None when it had already ended or been collected)."""
        if self._proc is None:
            return None
        pid = self._proc.pid
        self._close()
        self._proc.terminate()
        self._proc.join(STOP_WAIT)
        if self._proc.exitcode is None:
            self._proc.kill()
            self._proc.join()
        self._proc = None
        return pid

    def _close(self) -> None:
        _started.discard(self)
        self._recv.close()
        if self._shared is not None:
            os.close(self._shared)
            self._shared = None


def default_jobs() -> int:
    """The `--jobs` default: the cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def each(fns: Sequence[Callable[[], Any]], jobs: int, name: str, daemon: bool = True,
         finished: Optional[Callable[[int], None]] = None) -> List[Any]:
    """`fn()` of each, in forked children, at most `jobs` at a time; the results in order. With one
    job, one function or no fork, they run here, one after another. `finished(i)` is called here
    when the i-th has given its result (to report progress from the parent).

    When some fail, no more are started, the ones after the first failure (in order) are stopped,
    the ones before it are waited for, and the first failure in order is raised: the same error
    as a run one after another would give. Children that fork workers of their own need
    daemon=False."""
    if jobs <= 1 or len(fns) <= 1 or not can_fork():
        results_here = []
        for i, fn in enumerate(fns):
            results_here.append(fn())
            if finished is not None:
                finished(i)
        return results_here
    results: List[Any] = [None] * len(fns)
    failed: Dict[int, BaseException] = {}
    running: Dict[int, Forked] = {}
    started = 0
    try:
        while running or (started < len(fns) and not failed):
            while started < len(fns) and len(running) < jobs and not failed:
                running[started] = Forked(fns[started], f"{name} {started + 1}", daemon=daemon)
                started += 1
            if failed:  # stop what comes after the first failure
                first = min(failed)
                for i in [i for i in running if i > first]:
                    running.pop(i).cancel()
                if not running:
                    break
            handles = {id(f.handle): i for i, f in running.items() if f.handle is not None}
            watched = [f.handle for f in running.values() if f.handle is not None]
            done = [handles[id(h)] for h in wait(watched)] if watched else list(running)
            for i in done:
                job = running.pop(i)
                try:
                    results[i] = job.result()
                except BaseException as exc:  # raised below, once the earlier jobs are in
                    failed[i] = exc
                    continue
                if finished is not None:
                    finished(i)
    finally:
        for job in running.values():
            job.cancel()
    if failed:
        raise failed[min(failed)]
    return results


def _shared_file() -> Optional[int]:
    """A new anonymous shared file for a child's array buffers (None where memfd is missing)."""
    if not hasattr(os, "memfd_create"):
        return None
    try:
        return os.memfd_create("msprof-kit result", os.MFD_CLOEXEC)
    except OSError:
        return None


def _dump(outcome: Tuple[bool, Any], shared: Optional[int]) -> Tuple[Any, ...]:
    """What the child sends: ("pipe", outcome), or ("shared", pickle, buffer sizes) with the
    buffers written one after another into the shared file."""
    if shared is None:
        return ("pipe", outcome)
    buffers: List[pickle.PickleBuffer] = []
    head = pickle.dumps(outcome, protocol=5, buffer_callback=buffers.append)
    sizes = []
    with os.fdopen(os.dup(shared), "wb") as out:
        for buf in buffers:
            raw = buf.raw()
            out.write(raw)
            sizes.append(raw.nbytes)
    return ("shared", head, sizes)


def _load(message: Tuple[Any, ...], shared: Optional[int]) -> Tuple[bool, Any]:
    if message[0] == "pipe":
        return message[1]
    _, head, sizes = message
    assert shared is not None  # a child sends "shared" only when it was given the file
    # the arrays keep the mapping alive; only empty buffers (or none): nothing to map
    whole = memoryview(mmap.mmap(shared, sum(sizes))) if sum(sizes) else memoryview(b"")
    views = []
    offset = 0
    for size in sizes:
        views.append(whole[offset:offset + size])
        offset += size
    return pickle.loads(head, buffers=views)


def _die_with_parent(parent: int) -> None:
    """In a child: be killed when the parent dies (Linux), and end now if it already has."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)  # the C library the interpreter runs on
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:  # died before the prctl: nobody wants the result
        os._exit(1)


def _forget_inherited(keep: Optional[int]) -> None:
    """In a child: close the read ends and shared files (but `keep`, its own shared file) of the
    workers of the parent, its own included, inherited through fork. The child writes into its
    own pipe only."""
    for job in list(_started):
        job._recv.close()
        if job._shared is not None and job._shared != keep:
            os.close(job._shared)
            job._shared = None
    _started.clear()


def _stopped(signum: int, frame: Any) -> None:
    raise Stopped(f"stopped by signal {signum}")


def _run(fn: Callable[[], Any], send: Connection, shared: Optional[int], parent: int) -> None:
    _die_with_parent(parent)
    _forget_inherited(keep=shared)
    signal.signal(signal.SIGTERM, _stopped)
    try:
        outcome = (True, fn())
    except BaseException as exc:  # handed to the parent, which raises it
        outcome = (False, exc)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the work is over: a stop now just ends the child,
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # and Ctrl-C is the parent's to handle
    try:
        send.send(_dump(outcome, shared))
    except (pickle.PicklingError, TypeError, AttributeError):
        send.send(("pipe", (False, WorkerDied(f"{type(outcome[1]).__name__}: {outcome[1]}"))))
    except BrokenPipeError:  # the parent stopped waiting (interrupted): nobody reads the result
        os._exit(1)
    finally:
        send.close()
