"""What a long command is doing, on stderr: the phases of an import or an export and how far each is.

A `Progress` is handed down with the command's `Diagnostics` (`diag.progress`); the work opens a
`phase` where it starts something long and `advance`s it once a block of records is done (a window of
host APIs, a device, a window of matched tasks, an exported file or block), never once a record.
Three reporters:

- `Progress` itself says nothing (not a terminal, `--quiet`, and the default in the library);
- `BarProgress` draws one live tqdm bar on a terminal;
- `LineProgress` writes a line when a phase starts, at most one every `every` seconds while it runs,
  and one when it ends (`--progress` when stderr is not a terminal: logs, CI).

Only the process that made a reporter reports: a forked worker that inherits it says nothing, so
bars of workers never garble the parent's (the parent reports their results as they come in).
"""
from __future__ import annotations

import os
import time
from typing import IO, Any, Optional


DEFAULT_COLUMNS, DEFAULT_ROWS = 80, 24  # a bar's room on a terminal that does not say its own


def _columns(stream: IO[str]) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):  # not a file, or not a terminal
        return 0


class Phase:
    """One step of the work; `advance(n)` when n more units (records, files, blocks) are done."""

    def advance(self, n: int = 1) -> None:
        """Nothing to report."""

    def close(self) -> None:
        """Nothing to report."""

    def __enter__(self) -> "Phase":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Progress:
    """The silent reporter: phases are opened and advanced, nothing is written."""

    def phase(self, name: str, total: Optional[int] = None, unit: str = "") -> Phase:
        """A phase called `name`, of `total` units (None: unknown) counted in `unit`s."""
        return Phase()


class _Owned(Progress):
    """A reporter writing to `stream` from the process that made it, and from no other."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.pid = os.getpid()

    def mine(self) -> bool:
        return os.getpid() == self.pid


class _BarPhase(Phase):
    def __init__(self, owner: "BarProgress", name: str, total: Optional[int], unit: str) -> None:
        from tqdm import tqdm

        class Bar(tqdm):
            monitor_interval = 0  # no monitor thread: the work forks, and a fork copies no thread

        self.owner = owner
        sized = _columns(owner.stream) > 0  # a terminal that says its width (a bare pty says 0)
        self.bar = Bar(total=total, desc=name, unit=f" {unit}" if unit else "it", unit_scale=(total or 0) >= 1000,
                       file=owner.stream, leave=False, dynamic_ncols=sized, ncols=None if sized else DEFAULT_COLUMNS,
                       nrows=None if sized else DEFAULT_ROWS,
                       mininterval=0.2, bar_format=None if total is not None else
                       ("{desc}: {n_fmt}{unit} [{elapsed}]" if unit else "{desc} [{elapsed}]"))

    def advance(self, n: int = 1) -> None:
        if self.owner.mine():
            self.bar.update(n)

    def close(self) -> None:
        if self.owner.mine():
            self.bar.close()


class BarProgress(_Owned):
    """A live tqdm bar on a terminal, one phase at a time; a finished phase's bar is removed."""

    def phase(self, name: str, total: Optional[int] = None, unit: str = "") -> Phase:
        """A phase drawn as a bar (silent in another process than the one that made the reporter)."""
        return _BarPhase(self, name, total, unit) if self.mine() else Phase()


class _LinePhase(Phase):
    def __init__(self, owner: "LineProgress", name: str, total: Optional[int], unit: str) -> None:
        self.owner, self.name, self.total, self.unit = owner, name, total, unit
        self.done = 0
        self.start = self.last = time.monotonic()
        self.closed = False
        self._say("started")

    def _count(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.done}/{self.total}{unit}" if self.total is not None else f"{self.done}{unit}"

    def _took(self) -> str:
        took = f"{time.monotonic() - self.start:.1f} s"
        return f"{self._count()}, {took}" if self.total is not None or self.done else took

    def _say(self, what: str) -> None:
        if self.owner.mine():
            self.owner.stream.write(f"msprof-kit: {self.name}: {what}\n")
            self.owner.stream.flush()

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if now - self.last >= self.owner.every:
            self.last = now
            self._say(self._count())

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._say(f"done, {self._took()}")


class LineProgress(_Owned):
    """A line per phase start and end, and one at most every `every` seconds in between."""

    def __init__(self, stream: IO[str], every: float = 5.0) -> None:
        super().__init__(stream)
        self.every = every

    def phase(self, name: str, total: Optional[int] = None, unit: str = "") -> Phase:
        """A phase written as lines (silent in another process than the one that made the reporter)."""
        return _LinePhase(self, name, total, unit) if self.mine() else Phase()


def reporter(stream: Optional[IO[str]], asked: bool, quiet: bool) -> Progress:
    """The reporter for a command writing to `stream` (stderr): a bar on a terminal, lines when
    `asked` (--progress) elsewhere, nothing with `quiet` or when neither."""
    if quiet or stream is None:
        return Progress()
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty():
        return BarProgress(stream)
    return LineProgress(stream) if asked else Progress()


def label(path: str, width: int = 24) -> str:
    """A collection's folder name short enough to lead a bar: PROF_..._20231125090304544_ABCDEFGH
    keeps its start and its distinctive end."""
    name = os.path.basename(os.path.normpath(path)) or path
    return name if len(name) <= width else f"{name[:5]}..{name[-(width - 7):]}"
