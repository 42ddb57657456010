"""The timeline's JSON writing: `TraceWriter` streams a JSON array of events to disk, `Template`
fills one event kind's text from column arrays a chunk at a time (`native_impl.format_rows`), and
the helpers make the texts and metadata events every layer writes."""
from __future__ import annotations

import json
import os
import queue
import shutil
import threading
from typing import BinaryIO, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from ...native_impl import Slot, format_rows, int_slot, json_table, text_slot, text_table

CHUNK = 100_000           # rows rendered and written at a time (read at call time: tests shrink it)
WRITE_AHEAD = 2           # rendered chunks that may wait for the disk
PART_COPY = 1 << 20       # bytes copied at a time when a part file is appended
KEEP_FREE = 64 << 20      # free heap the device layers keep after the tasks (the CANN layer and the DB run beside)


class TraceWriter:
    """A JSON array written as it is made: each `add` appends a chunk of serialized events.
    `part=True` writes the events without the enclosing brackets, for `append_part` of another
    writer.

    The chunks are encoded here and written to disk by a background thread (the write releases
    the GIL, so the disk works while the next chunk is rendered); at most WRITE_AHEAD chunks wait,
    which bounds the memory. A failed write is raised by the next `add` or by `close`; a file left
    unfinished by an error is removed."""

    def __init__(self, path: str, part: bool = False) -> None:
        self.path = path
        self.part = part
        self.count = 0
        self._f: BinaryIO = open(path, "wb")
        self._queue: "queue.Queue[Union[bytes, str, None]]" = queue.Queue(maxsize=WRITE_AHEAD)
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._drain, name="timeline-writer", daemon=True)
        self._thread.start()
        if not part:
            self._put(b"[")

    def _drain(self) -> None:
        """The writing thread: writes blocks until the None mark; after a failure it keeps taking
        blocks (so that `add` never waits forever) and the failure is raised in the caller."""
        while True:
            block = self._queue.get()
            if block is None:
                return
            if self._error is None:
                try:
                    if isinstance(block, str):  # a part file to copy in
                        self._copy_part(block)
                    else:
                        self._f.write(block)
                except BaseException as exc:  # handed to the rendering thread, which raises it
                    self._error = exc

    def _copy_part(self, path: str) -> None:
        """Copy a part file in: inside the kernel where it can (copy_file_range), else read and
        written a PART_COPY block at a time (from where the kernel copy stopped)."""
        with open(path, "rb") as part:
            if not self._kernel_copy(part):
                shutil.copyfileobj(part, self._f, PART_COPY)

    def _kernel_copy(self, part: BinaryIO) -> bool:
        """Copy the rest of `part` with copy_file_range; False when the kernel cannot copy between
        these files (old kernels, some file systems): the caller copies from where it stopped."""
        if not hasattr(os, "copy_file_range"):
            return False
        self._f.flush()
        try:
            while os.copy_file_range(part.fileno(), self._f.fileno(), PART_COPY * 64):
                continue
        except OSError:
            return False
        return True

    def append_part(self, path: str) -> None:
        """Append the events of a finished part file another TraceWriter wrote (copied by the
        writing thread)."""
        if not os.path.getsize(path):
            return
        if self.count:
            self._put(b",")
        self._put(path)
        self.count += 1

    def _put(self, block: Union[bytes, str]) -> None:
        if self._error is not None:
            raise self._error
        self._queue.put(block)

    def add(self, events: Sequence[str]) -> None:
        if not events:
            return
        text = ",".join(events)
        self._put((f",{text}" if self.count else text).encode("utf-8"))
        self.count += len(events)

    def add_block(self, block: bytes, count: int) -> None:
        """Append `count` serialized events, already joined by commas (a `Template.rows` block)."""
        if not count:
            return
        if self.count:
            self._put(b",")
        self._put(block)
        self.count += count

    def _stop(self) -> None:
        self._queue.put(None)
        self._thread.join()
        self._f.close()

    def close(self) -> None:
        try:
            if not self.part:
                self._put(b"]")
        finally:
            self._stop()
        if self._error is not None:
            raise self._error

    def __enter__(self) -> "TraceWriter":
        return self

    def __exit__(self, kind: Optional[type], exc: Optional[BaseException], tb: object) -> None:
        if kind is None:
            try:
                self.close()
            except BaseException:  # a block the writing thread could not write (a full disk)
                os.remove(self.path)
                raise
            return
        self._stop()
        os.remove(self.path)


class Template:
    """One event kind's text: literal pieces with named slots between them, e.g.
    Template('{"name":', "name", ',"pid":', "pid", '}'). A name may appear more than once."""

    def __init__(self, *parts: str) -> None:
        self.pieces = tuple(p.encode("utf-8") for p in parts[0::2])
        self.names = parts[1::2]

    def rows(self, n: int, **slots: Slot) -> bytes:
        """n events, comma-separated, from slots of n rows each."""
        return format_rows(self.pieces, [slots[name] for name in self.names], n, b",")


def coded_slot(keys: np.ndarray, literal_of: Callable[[int], str]) -> Slot:
    """A TEXT slot of integer keys: each distinct key's literal made once."""
    codes, uniq = dense_codes(np.asarray(keys, dtype=np.int64))
    return text_slot(codes, text_table(literal_of(k) for k in uniq.tolist()))


def json_text_slot(keys: np.ndarray, texts: np.ndarray) -> Slot:
    """A TEXT slot of integer keys into `texts` (an object array), each shown as its text's JSON
    string literal (`coded_slot` with json.dumps of str(text)): the literals of the distinct keys
    made at once, in C where it is in use."""
    codes, uniq = dense_codes(np.asarray(keys, dtype=np.int64))
    picked = texts[uniq]
    values = picked.tolist() if pd.api.types.infer_dtype(picked, skipna=False) in ("string", "empty") \
        else [str(t) for t in picked.tolist()]
    return text_slot(codes, json_table(values))


def dense_codes(keys: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(int32 code of each key, the distinct keys): for keys within a narrow range, by a table over
    the range (sorted keys, no hashing), else as pd.factorize gives them."""
    if len(keys):
        lo, hi = int(keys.min()), int(keys.max())
        if hi - lo < max(1 << 20, 2 * len(keys)):
            shifted: np.ndarray = keys - lo
            present: np.ndarray = np.zeros(hi - lo + 1, dtype=bool)
            present[shifted] = True
            code_of = np.cumsum(present, dtype=np.int32) - 1
            return code_of[shifted], np.flatnonzero(present) + lo
    codes, uniq = pd.factorize(keys)
    return codes.astype(np.int32), uniq


def isin_text(values: np.ndarray, texts: Sequence[str]) -> np.ndarray:
    """Which values (texts) are among `texts`, evaluated once per distinct value."""
    if len(values) == 0:
        return np.zeros(0, dtype=bool)
    codes, uniq = pd.factorize(np.asarray(values, dtype=object), use_na_sentinel=False)
    return np.array([u in texts for u in uniq], dtype=bool)[codes]


def us_text(ns: int) -> str:
    """Local ns as µs with 3 decimals, exact (as a FIXED slot of 3 decimals prints it)."""
    q, r = divmod(abs(int(ns)), 1000)
    return f"{'-' if ns < 0 else ''}{q}.{r:03d}"


def dur_us(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Durations in µs as floats (a negative span as 0), as the reference prints them."""
    return np.maximum(np.asarray(end, np.int64) - np.asarray(start, np.int64), 0) / 1000.0


def constant_slot(value: int, n: int) -> Slot:
    """An INT slot of n times the same value."""
    return int_slot(np.full(n, value, dtype=np.int64))


def meta_event(name: str, pid: int, tid: int, args: Dict[str, object]) -> str:
    """A metadata event (`ph` M): process_name, process_labels, process_sort_index (tid 0),
    thread_name, thread_sort_index."""
    return json.dumps({"name": name, "pid": pid, "tid": tid, "ph": "M", "args": args},
                      ensure_ascii=False, separators=(",", ":"))


def process_meta(pid: int, name: str, label: str, sort_index: int) -> List[str]:
    """A process's metadata events: its name, its label (CPU, NPU <n>) and its sort index."""
    return [meta_event("process_name", pid, 0, {"name": name}), meta_event("process_labels", pid, 0, {"labels": label}),
            meta_event("process_sort_index", pid, 0, {"sort_index": sort_index})]


def thread_meta(pid: int, tid: int, name: str, sort_index: int) -> List[str]:
    """A thread's metadata events: its name and its sort index."""
    return [meta_event("thread_name", pid, tid, {"name": name}),
            meta_event("thread_sort_index", pid, tid, {"sort_index": sort_index})]


def json_literals(texts: np.ndarray) -> np.ndarray:
    """Each (distinct) text as a JSON string literal."""
    return np.array([json.dumps(str(t), ensure_ascii=False) for t in texts.tolist()], dtype=object)
