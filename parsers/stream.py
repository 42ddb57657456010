"""Record streams: decoding the bytes of one data kind's slices into structured arrays and issues.

A stream is the concatenation of the slices of one data kind (`x.slice_0`, `x.slice_1`, ...),
decoded as one byte string because records may straddle slice boundaries. Everything here is
pure: bytes in, arrays out (`decode_stream`, `split_lines`, `RecordChunks` over a function that
hands it the stream's bytes). Reading the slice files is the ingest's (msprof_kit/ingest/streams.py).
Nothing here logs or prints: problems come back as `Issue` values for the caller to report.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from .records import Record


#: how far back a record is compared with the records before it (Repeats)
REPEAT_LAGS = 4
#: records that may rightly repeat byte for byte: an op's tensors, context ids or graph ids split
#: over several records of one time (ten inputs of one shape fill two equal tensor_info records)
MAY_REPEAT = frozenset({"tensor_info", "context_id_info", "graph_id_map", "fusion_op_info"})


@dataclass(frozen=True)
class Piece:
    """One slice file's place in a stream: its name and where its bytes start."""

    path: str
    start: int
    size: int


@dataclass(frozen=True)
class Issue:
    """Something wrong in the data, located by file and byte offset within that file."""

    path: str
    offset: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}: offset {self.offset}: {self.message}"


def locate(pieces: Sequence[Piece], offset: int) -> Tuple[str, int]:
    """Map a stream offset to (file, offset within that file)."""
    for piece in pieces:
        if piece.start <= offset < piece.start + piece.size:
            return piece.path, offset - piece.start
    last = pieces[-1] if pieces else Piece("<empty>", 0, 0)
    return last.path, offset - last.start


#: a validity check: a structured array of records in, a boolean mask of the valid ones out
Validity = Callable[[np.ndarray], np.ndarray]
#: column arrays by name, all of one length
Columns = Dict[str, np.ndarray]

LINE_CAP = 1 << 20  # bytes: a longer line of a text file keeps only its first LINE_CAP bytes (docs/store.md)
NAME_CAP = 4096     # characters: a longer name or text taken from a collection is cut to this (docs/store.md)


@dataclass
class TextLines:
    """The lines of a text stream (slices joined end to end, split at `sep`), each at most `cap`
    bytes: `lines` holds (stream offset, bytes without the separator), the last line even when it
    has no separator; `cut` maps the stream offset of each longer line to its full length (only
    its first `cap` bytes are kept); `pieces` place the files in the stream."""

    lines: List[Tuple[int, bytes]]
    pieces: List[Piece]
    cut: Dict[int, int] = field(default_factory=dict)
    cap: int = LINE_CAP

    def cut_issues(self, kept: bool) -> List[Issue]:
        """One issue per over-long line: its first `cap` bytes kept, or the line ignored."""
        fate = f"only its first {self.cap} bytes are read" if kept else "ignored"
        out = []
        for off, length in sorted(self.cut.items()):
            path, at = locate(self.pieces, off)
            out.append(Issue(path, at, f"a line of {length} bytes is longer than the {self.cap}-byte line cap; "
                                       f"{fate}"))
        return out


def split_lines(buf: Union[bytes, np.ndarray], pieces: Sequence[Piece], sep: bytes = b"\n",
                cap: int = LINE_CAP) -> TextLines:
    """TextLines of a text stream in memory (bytes or a uint8 array): the lines the ingest's
    read_lines gives for the same bytes read from files."""
    data = buf.tobytes() if isinstance(buf, np.ndarray) else bytes(buf)
    parts = data.split(sep)
    if parts[-1] == b"":
        parts.pop()  # the stream ends with a separator, or is empty
    offsets = itertools.accumulate((len(p) + 1 for p in parts), initial=0)
    lines = list(zip(offsets, parts))
    cut = {off: len(part) for off, part in lines if len(part) > cap}
    if cut:
        lines = [(off, part[:cap]) for off, part in lines]
    return TextLines(lines, list(pieces), cut, cap)


def cap_names(values: List[str], offsets: Sequence[int], pieces: Sequence[Piece], what: str,
              cap: int = NAME_CAP) -> Tuple[List[str], List[Issue]]:
    """`values` with each text longer than `cap` characters cut to its first `cap`, and one issue
    per file that had any (the offset of its first, and how many). `offsets` are stream offsets
    of the values' lines; `what` names the texts ('op names')."""
    long = [i for i, v in enumerate(values) if len(v) > cap]
    if not long:
        return values, []
    out = list(values)
    per_file: Dict[str, Tuple[int, int]] = {}
    for i in long:
        out[i] = values[i][:cap]
        path, at = locate(pieces, offsets[i])
        first, count = per_file.get(path, (at, 0))
        per_file[path] = (first, count + 1)
    return out, [Issue(path, at, f"{n} {what[:-1] if n == 1 else what} longer than the {cap}-character name cap; "
                                 f"cut to {cap} characters") for path, (at, n) in per_file.items()]


def decode_stream(record: Record, buf: np.ndarray, pieces: Sequence[Piece],
                  valid: Optional[Validity] = None,
                  expected: str = "") -> Tuple[np.ndarray, np.ndarray, List[Issue]]:
    """Decode a stream of `record`s.

    Returns (records that pass `valid`, their byte offsets in the stream, issues).
    `valid` maps a structured array to a boolean mask; records failing it are dropped
    one by one, each reported with its file and offset. `expected` describes what a
    valid record looks like, for the issue text.
    """
    stream = RecordChunks(record, pieces, len(buf), lambda start, length: buf[start:start + length], valid, expected)
    chunks = list(stream.chunks())  # the whole buffer is one chunk, or none when it holds no record
    arr, offsets = chunks[0] if chunks else (np.zeros(0, dtype=record.dtype), np.zeros(0, dtype=np.int64))
    return arr, offsets, stream.issues


#: the bytes [start, start + length) of a stream: RecordChunks' source of bytes
ReadBytes = Callable[[int, int], np.ndarray]


class RecordChunks:
    """The records of a stream, validated a chunk at a time: whole records at the stream's
    alignment (`lead` bytes skipped), with their byte offsets, and the issues (`issues`, complete
    once `chunks()` has been iterated to its end). The stream's `size` bytes, placed in files by
    `pieces`, come from `read` (a slice of a buffer in memory, or the ingest's file reader).

    The alignment: the reference always drops `size % record size` leading bytes (a collection
    aged from its start). A collection cut at its end instead (an interrupted write) keeps its
    records aligned at offset 0. Where a validity check exists, the alignment that keeps more
    valid records wins; on a tie, the reference's.
    """

    def __init__(self, record: Record, pieces: Sequence[Piece], size: int, read: ReadBytes,
                 valid: Optional[Validity] = None, expected: str = "", chunk_bytes: Optional[int] = None) -> None:
        self.record, self.valid, self.expected = record, valid, expected
        self.pieces: List[Piece] = list(pieces)
        self.size = size
        self.read = read
        self.per_chunk = max(1, (size if chunk_bytes is None else chunk_bytes) // record.size)
        self.issues: List[Issue] = []
        self.lead = self._alignment()
        self.count = (self.size - self.lead) // record.size
        tail = self.size - self.lead - self.count * record.size
        if self.lead:
            path, off = locate(self.pieces, 0)
            self.issues.append(Issue(path, off, f"{self.lead} leading bytes do not make a whole {record.size}-byte "
                                                f"{record.name} record; skipped"))
        if tail:
            path, off = locate(self.pieces, self.lead + self.count * record.size)
            self.issues.append(Issue(path, off, f"truncated {record.name} record: {tail} of {record.size} bytes; "
                                                f"dropped"))

    def _records(self, lead: int) -> Iterator[Tuple[int, np.ndarray]]:
        """(first record's index, the records) of whole chunks at alignment `lead`."""
        count = (self.size - lead) // self.record.size
        for first in range(0, count, self.per_chunk):
            n = min(self.per_chunk, count - first)
            buf = self.read(lead + first * self.record.size, n * self.record.size)
            yield first, buf.view(self.record.dtype)

    def _alignment(self) -> int:
        """Bytes to skip at the start (see the class), valid records counted chunk by chunk."""
        rest = self.size % self.record.size
        if rest == 0:
            return 0
        if self.valid is None:
            return rest
        scores = [sum(int(np.count_nonzero(self.valid(arr))) for _, arr in self._records(lead)) for lead in (rest, 0)]
        return rest if scores[0] >= scores[1] else 0

    def chunks(self) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
        """(valid records, their byte offsets in the stream) a chunk at a time, in stream order.
        Each chunk is a new array (a view of what `read` gave where nothing is dropped). Records
        failing `valid` are dropped one by one: the first 20 each reported with their file and
        offset, the rest counted in one more issue."""
        name = self.record.name
        bad_total = 0
        repeats = Repeats(self.record) if name not in MAY_REPEAT else None
        for first, arr in self._records(self.lead):
            offsets = self.lead + (first + np.arange(len(arr), dtype=np.int64)) * self.record.size
            if self.valid is not None:
                mask = self.valid(arr)
                bad = np.flatnonzero(~mask)
                for i in bad[:max(0, 20 - bad_total)]:
                    path, off = locate(self.pieces, int(offsets[i]))
                    self.issues.append(Issue(path, off, f"{name} record {self.expected}; dropped"))
                bad_total += len(bad)
                if len(bad):
                    arr, offsets = arr[mask], offsets[mask]
            if repeats is not None:
                arr, offsets = repeats.drop(arr, offsets)
            yield arr, offsets
        if bad_total > 20:
            self.issues.append(Issue(self.pieces[0].path if self.pieces else "", 0,
                                     f"{bad_total - 20} more {name} records fail the same check; dropped"))
        if repeats is not None and repeats.count:
            path, off = locate(self.pieces, repeats.first)
            more = f" (and {repeats.count - 1} more)" if repeats.count > 1 else ""
            self.issues.append(Issue(path, off, f"{name} record repeating one of the {REPEAT_LAGS} before it byte for "
                                                f"byte (no event is recorded twice: a duplicated write){more}; dropped"))


class Repeats:
    """Records equal, byte for byte, to one of the REPEAT_LAGS records just before them in a
    stream (across chunks): a write done twice, of one record or of a short run of them. `drop`
    keeps the first copy; `count` and `first` (the first dropped record's stream offset) say what
    was dropped. No two real records of a stream are equal: each carries its own time."""

    def __init__(self, record: Record) -> None:
        self.kind: np.dtype = np.dtype((np.void, record.size))
        #: a 64-bit field (a time, a cycle count) compared first: only records equal there are
        #: compared whole
        fields = record.dtype.fields
        self.key = next((name for name, (dt, *_) in fields.items() if dt == np.dtype("<u8")), None) if fields else None
        self.last: Optional[np.ndarray] = None
        self.count = 0
        self.first = -1

    def drop(self, arr: np.ndarray, offsets: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """The records of a chunk (and their offsets) less those repeating one before them, in
        this chunk or at the end of the chunk before."""
        if len(arr) == 0:
            return arr, offsets
        raw = np.ascontiguousarray(arr).view(self.kind).ravel()
        n = len(raw)
        key = raw.view(arr.dtype)[self.key] if self.key is not None else raw
        same: np.ndarray = np.zeros(n, dtype=bool)
        for lag in range(1, REPEAT_LAGS + 1):
            if lag < n:
                hit = np.flatnonzero(key[lag:] == key[:-lag]) + lag
                if len(hit) and self.key is not None:  # equal keys: the whole records decide
                    hit = hit[raw[hit] == raw[hit - lag]]
                same[hit] = True
            if self.last is not None:  # the first records against the end of the chunk before
                for i in range(min(lag, n)):
                    j = len(self.last) - (lag - i)
                    if j >= 0 and raw[i] == self.last[j]:
                        same[i] = True
        self.last = (raw[-REPEAT_LAGS:] if n >= REPEAT_LAGS or self.last is None
                     else np.concatenate([self.last, raw])[-REPEAT_LAGS:]).copy()
        if not same.any():
            return arr, offsets
        if self.first < 0:
            self.first = int(offsets[int(np.argmax(same))])
        self.count += int(np.count_nonzero(same))
        return arr[~same], offsets[~same]
