"""Columns spilled to scratch files in sorted runs, and read back a window of keys at a time
(docs/benchmarks.md, issue 6).

The import of a large collection cannot hold every record at once. A stream is read a chunk at
a time; each chunk's rows are sorted by one key column and appended to one file per column (a
run). Given the edges of the windows (ascending keys), each run is cut where the edges fall, and
a window's rows are read from every run: the windows, one after the other, hold every row once,
window w those with edges[w - 1] <= key < edges[w].
"""
from __future__ import annotations

import io
import os
import threading
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from .arrays import ascending
from .errors import OutputError

Columns = Dict[str, np.ndarray]


def scratch_error(exc: OSError, path: str) -> OutputError:
    """A scratch file that cannot be written (a full disk): a write error of the store, not a raw
    file that cannot be read."""
    cause = exc.strerror or str(exc)
    return OutputError(f"cannot write a scratch file of the store ({cause}); nothing of the import is kept",
                       path=path, cause=cause)


class Runs:
    """Rows spilled a run after another to `folder`, one file a column (`prefix`.name), each run
    sorted by column `key` (stably). The first run fixes the columns, their types and their
    shapes past the first axis. With `sample_every`, one key in that many is kept in memory
    (`sample`) to place windows' edges. A pickled copy (a forked worker's runs handed to its
    parent) reopens the files for reading when it first reads them.

    With `background`, a run is written by a thread while the caller goes on (the write system
    calls let go of the GIL): at most one run is in flight, and `add` returns before it is
    written, so the caller must not change the arrays it hands to `add` afterwards. Reading (and
    pickling) waits for the write; a failed write is raised there, or by the next `add`."""

    def __init__(self, folder: str, prefix: str, key: str, sample_every: int = 0, background: bool = False) -> None:
        self.folder, self.prefix, self.key, self.sample_every = folder, prefix, key, sample_every
        self.background = background
        self._writing: Optional[threading.Thread] = None  # the run in flight (background)
        self._failed: Optional[BaseException] = None  # what the run in flight raised
        self.files: Dict[str, io.BufferedIOBase] = {}  # open scratch files, by column
        self.dtypes: Dict[str, np.dtype] = {}
        self.shapes: Dict[str, Tuple[int, ...]] = {}
        self.bounds: List[int] = [0]  # row where each run starts, and the end
        self.sample: List[np.ndarray] = []
        self.cuts: List[np.ndarray] = []

    @property
    def rows(self) -> int:
        """Rows spilled so far, all runs together."""
        return self.bounds[-1]

    def _path(self, name: str) -> str:
        return os.path.join(self.folder, f"{self.prefix}.{name}")

    def __getstate__(self) -> Dict[str, Any]:
        self._wait()
        for f in self.files.values():
            f.flush()
        state = dict(self.__dict__)
        state["files"] = {}
        state["_writing"] = None
        return state

    def _wait(self) -> None:
        """Wait for the run in flight; raise what its write raised."""
        if self._writing is not None:
            self._writing.join()
            self._writing = None
        failed, self._failed = self._failed, None
        if failed is not None:
            raise failed

    def _write(self, parts: List[Tuple[str, np.ndarray]]) -> None:
        """Write each column's part to its file (the background thread, or the caller)."""
        for name, values in parts:
            try:
                self.files[name].write(values.data.cast("B"))
            except OSError as exc:
                self._failed = scratch_error(exc, self._path(name))
                return
            except BaseException as exc:  # (handed to the caller: a thread's exception would be lost)
                self._failed = exc
                return

    def add(self, cols: Columns) -> None:
        """Spill `cols` (equal-length columns, `key` among them) as one more run, sorted by `key`."""
        n = len(cols[self.key])
        if n == 0:
            return
        self._wait()
        order = None if ascending(cols[self.key]) else np.argsort(cols[self.key], kind="stable")
        parts = []
        for name, column in cols.items():
            values = np.ascontiguousarray(column if order is None else column[order])
            if name not in self.dtypes:
                if self.bounds[-1]:
                    raise ValueError(f"scratch run of {self.prefix} brings a new column {name}")
                path = self._path(name)
                try:
                    self.files[name] = open(path, "w+b")
                except OSError as exc:
                    raise scratch_error(exc, path) from exc
                self.dtypes[name] = values.dtype
                self.shapes[name] = values.shape[1:]
            parts.append((name, np.ascontiguousarray(values.astype(self.dtypes[name], copy=False))))
            if name == self.key and self.sample_every:
                self.sample.append(values[::self.sample_every].copy())
        self.bounds.append(self.bounds[-1] + n)
        if self.background:
            self._writing = threading.Thread(target=self._write, args=(parts,), name=f"spill {self.prefix}",
                                             daemon=True)
            self._writing.start()
        else:
            self._write(parts)
            self._wait()

    def read(self, name: str, lo: int, hi: int) -> np.ndarray:
        """Rows [lo, hi) of column `name`, counted across all runs."""
        self._wait()
        f = self.files.get(name)
        if f is None:
            f = self.files[name] = open(self._path(name), "rb")
        dtype, shape = self.dtypes[name], self.shapes[name]
        size = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
        f.seek(lo * size)
        out = np.empty((hi - lo,) + shape, dtype=dtype)
        if hi > lo and f.readinto(out.data.cast("B")) != (hi - lo) * size:
            raise OSError(f"{self._path(name)}: scratch file shorter than written")
        return out

    def edges(self, rows: int) -> np.ndarray:
        """Keys at which windows start (after the first): about `rows` rows apart, distinct
        (from the sample: `sample_every` must be set)."""
        if not self.sample:
            return np.zeros(0, dtype=np.int64)
        sample = np.sort(np.concatenate(self.sample))
        step = max(1, rows // self.sample_every)
        return np.unique(sample[step::step])

    def cut(self, edges: np.ndarray) -> None:
        """Place the windows' edges (ascending keys) in every run."""
        self.cuts = []
        for lo, hi in zip(self.bounds, self.bounds[1:]):
            keys = self.read(self.key, lo, hi)
            self.cuts.append(np.concatenate([[lo], lo + np.searchsorted(keys, edges), [hi]]))
            del keys

    def window(self, w: int) -> Optional[Columns]:
        """The rows of window w (after `cut`), run after run; None when there are none."""
        parts = [(int(c[w]), int(c[w + 1])) for c in self.cuts if c[w + 1] > c[w]]
        if not parts:
            return None
        return {name: np.concatenate([self.read(name, lo, hi) for lo, hi in parts]) for name in self.dtypes}

    def close(self) -> None:
        """Close the files and remove them."""
        if self._writing is not None:  # (a failed write no longer matters)
            self._writing.join()
            self._writing, self._failed = None, None
        for f in self.files.values():
            f.close()
        self.files.clear()
        for name in self.dtypes:
            try:
                os.remove(self._path(name))
            except FileNotFoundError:
                pass


class Flat:
    """One column spilled to a scratch file (`folder`/`name`) as it is given, part after part, and
    read back by row range: an array too large to hold, kept in the order it was made."""

    def __init__(self, folder: str, name: str, dtype: np.dtype) -> None:
        self.path = os.path.join(folder, name)
        self.dtype = np.dtype(dtype)
        self.rows = 0
        try:
            self.file: Optional[io.BufferedIOBase] = open(self.path, "w+b")
        except OSError as exc:
            raise scratch_error(exc, self.path) from exc

    def add(self, values: np.ndarray) -> None:
        """Append `values` (cast to the column's type)."""
        assert self.file is not None, "Flat.add after close"
        try:
            self.file.write(np.ascontiguousarray(values, dtype=self.dtype).data.cast("B"))
        except OSError as exc:
            raise scratch_error(exc, self.path) from exc
        self.rows += len(values)

    def read(self, lo: int, hi: int) -> np.ndarray:
        """Rows [lo, hi)."""
        assert self.file is not None, "Flat.read after close"
        out: np.ndarray = np.empty(max(0, hi - lo), dtype=self.dtype)
        if hi > lo:
            self.file.flush()
            self.file.seek(lo * self.dtype.itemsize)
            if self.file.readinto(out.data.cast("B")) != len(out) * self.dtype.itemsize:
                raise OSError(f"{self.path}: scratch file shorter than written")
            self.file.seek(0, io.SEEK_END)
        return out

    def close(self) -> None:
        """Close the file and remove it."""
        if self.file is not None:
            self.file.close()
            self.file = None
            try:
                os.remove(self.path)
            except FileNotFoundError:
                pass
