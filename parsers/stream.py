"""Record streams: reading the slice files of one data kind, and decoding their bytes into
structured arrays and issues.

A stream is the concatenation of the slices of one data kind (`x.slice_0`, `x.slice_1`, ...),
decoded as one byte string because records may straddle slice boundaries. Decoding is pure
(`decode_stream`, `split_lines`: bytes in, arrays out), but this module also reads files:
`read_stream` reads a stream whole, `RecordStream` a chunk of whole records at a time, `read_lines`
a text stream by lines of bounded length (that reading is to move to the import, issue 24). Only
regular files are opened (`open_regular`): a FIFO would block, /dev/zero never ends. Nothing here
logs or prints: problems come back as `Issue` values for the caller to report.
"""
from __future__ import annotations

import errno
import io
import itertools
import os
import stat
from dataclasses import dataclass, field
from typing import BinaryIO, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, TypeVar, Union, cast

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
#: what a chunk converter of read_chunks gives: one dict of columns, or a tuple of them
ChunkColumns = TypeVar("ChunkColumns", bound=Union[Columns, Tuple[Columns, ...]])

LINE_CAP = 1 << 20  # bytes: a longer line of a text file keeps only its first LINE_CAP bytes (docs/store.md)
NAME_CAP = 4096     # characters: a longer name or text taken from a collection is cut to this (docs/store.md)


class NotRegularFile(OSError):
    """A path that names something other than a regular file (after symlinks): `what` it is."""

    def __init__(self, path: str, what: str) -> None:
        super().__init__(errno.EINVAL, f"{what}, not a regular file", path)
        self.what = what


def file_kind(mode: int) -> str:
    """What a stat mode names, as an article and a noun ('a FIFO', 'a directory')."""
    for test, what in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return "not a file"


def open_regular(path: str) -> io.BufferedReader:
    """`path` opened for reading when it is a regular file (symlinks followed); else NotRegularFile.
    The open does not block (O_NONBLOCK: a FIFO without a writer would), and the check is made on
    what was opened (fstat), so a file swapped after a listing cannot slip through."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(path, file_kind(mode))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def regular_size(f: BinaryIO) -> int:
    """Size in bytes of an open file."""
    return os.fstat(f.fileno()).st_size


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


def read_lines(paths: Sequence[str], sep: bytes = b"\n", cap: int = LINE_CAP) -> TextLines:
    """The lines of the text stream made of `paths`, read a block of `cap` bytes at a time: memory
    is the lines kept plus one block, however long a line is."""
    lines: List[Tuple[int, bytes]] = []
    cut: Dict[int, int] = {}
    pieces: List[Piece] = []
    head: List[bytes] = []  # the line being read: its kept parts (at most `cap` bytes in all)
    head_at = head_len = 0  # its stream offset and full length so far
    start = 0
    for path in paths:
        size = 0
        with open_regular(path) as f:
            while True:
                block = f.read(cap)
                if not block:
                    break
                parts = block.split(sep)
                head_len += len(parts[0])
                kept = sum(len(h) for h in head)
                if kept < cap:
                    head.append(parts[0][:cap - kept])
                if len(parts) > 1:
                    lines.append((head_at, b"".join(head)))
                    if head_len > cap:
                        cut[head_at] = head_len
                    at = start + size + len(parts[0]) + 1
                    middle = parts[1:-1]  # whole lines within the block: shorter than cap
                    offsets = itertools.accumulate((len(m) + 1 for m in middle), initial=at)
                    lines.extend(zip(offsets, middle))
                    head_at = at + sum(len(m) + 1 for m in middle)
                    head, head_len = [parts[-1]], len(parts[-1])
                size += len(block)
        pieces.append(Piece(path, start, size))
        start += size
    if head_len:
        lines.append((head_at, b"".join(head)))
        if head_len > cap:
            cut[head_at] = head_len
    return TextLines(lines, pieces, cut, cap)


def split_lines(buf: Union[bytes, np.ndarray], pieces: Sequence[Piece], sep: bytes = b"\n",
                cap: int = LINE_CAP) -> TextLines:
    """TextLines of a text stream already in memory (bytes or a uint8 array): the lines read_lines
    gives for the same bytes."""
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
    stream = RecordStream(record, (), valid, expected, buffer=buf, pieces=pieces)
    chunks = list(stream.chunks())  # the whole buffer is one chunk, or none when it holds no record
    arr, offsets = chunks[0] if chunks else (np.zeros(0, dtype=record.dtype), np.zeros(0, dtype=np.int64))
    return arr, offsets, stream.issues


def read_stream(paths: Sequence[str]) -> Tuple[np.ndarray, List[Piece]]:
    """Read slice files into one byte array, with each file's place in it: each file is read
    straight into its place in an array sized from the files' sizes (one copy of the stream)."""
    sizes = [os.path.getsize(path) for path in paths]
    buf = np.empty(sum(sizes), dtype=np.uint8)
    pieces: List[Piece] = []
    start = 0
    for path, size in zip(paths, sizes):
        with open_regular(path) as f:
            got = f.readinto(buf.data[start:start + size]) if size else 0
            rest = f.read()  # a slice still being written: whatever came after the size was taken
        if rest or got != size:
            return _read_stream_again(paths)
        pieces.append(Piece(path, start, size))
        start += size
    return buf, pieces


def _read_stream_again(paths: Sequence[str]) -> Tuple[np.ndarray, List[Piece]]:
    """read_stream for files that changed size while being read: each read whole, then joined."""
    pieces: List[Piece] = []
    chunks: List[np.ndarray] = []
    start = 0
    for path in paths:
        with open_regular(path) as f:
            data = np.fromfile(f, dtype=np.uint8)
        pieces.append(Piece(path, start, len(data)))
        chunks.append(data)
        start += len(data)
    if not chunks:
        return np.zeros(0, dtype=np.uint8), pieces
    return (chunks[0] if len(chunks) == 1 else np.concatenate(chunks)), pieces


CHUNK_BYTES = 32 << 20  # bytes of a stream read at a time by RecordStream


class RecordStream:
    """The records of a stream of slice files, read and validated a chunk at a time: whole
    records at the stream's alignment (`lead` bytes skipped), with their byte offsets, and the
    issues (`issues`, complete once `chunks()` has been iterated to its end).

    The alignment: the reference always drops `size % record size` leading bytes (a collection
    aged from its start). A collection cut at its end instead (an interrupted write) keeps its
    records aligned at offset 0. Where a validity check exists, the alignment that keeps more
    valid records wins; on a tie, the reference's.

    File sizes are taken when the stream is opened; bytes appended to a slice afterwards are not
    read. `buffer` (with its `pieces`) decodes bytes already in memory instead (decode_stream).
    """

    def __init__(self, record: Record, paths: Sequence[str], valid: Optional[Validity] = None,
                 expected: str = "", chunk_bytes: Optional[int] = None, buffer: Optional[np.ndarray] = None,
                 pieces: Sequence[Piece] = ()) -> None:
        self.record, self.valid, self.expected = record, valid, expected
        self.buffer = buffer
        self.pieces: List[Piece] = list(pieces)
        if buffer is None:
            start = 0
            for path in paths:
                size = os.path.getsize(path)
                self.pieces.append(Piece(path, start, size))
                start += size
            self.size = start
        else:
            self.size = len(buffer)
        chunk = len(buffer) if buffer is not None else CHUNK_BYTES if chunk_bytes is None else chunk_bytes
        self.per_chunk = max(1, chunk // record.size)
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

    def read(self, start: int, length: int) -> np.ndarray:
        """Bytes [start, start + length) of the stream, across slice files (a view of `buffer`
        when the stream is in memory)."""
        if self.buffer is not None:
            return self.buffer[start:start + length]
        out = np.empty(length, dtype=np.uint8)
        at = 0
        for piece in self.pieces:
            lo = max(start, piece.start)
            hi = min(start + length, piece.start + piece.size)
            if hi <= lo:
                continue
            with open_regular(piece.path) as f:
                f.seek(lo - piece.start)
                got = f.readinto(out.data[at:at + hi - lo])
            if got != hi - lo:
                raise OSError(f"{piece.path} became shorter while being read ({piece.size} bytes expected)")
            at += hi - lo
        return out

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
        Each chunk is a new array (a view of `buffer` where nothing is dropped). Records failing
        `valid` are dropped one by one: the first 20 each reported with their file and offset,
        the rest counted in one more issue."""
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


def read_chunks(stream: RecordStream, convert: Callable[[np.ndarray, np.ndarray], ChunkColumns]) -> ChunkColumns:
    """convert(records, offsets) of each chunk of `stream`, joined end to end (convert of no
    records where the stream has none). `convert` gives a dict of column arrays, or a tuple of
    such dicts, with at most one row per record: each column is allocated once for as many rows
    as the stream has records (pages never written cost no memory) and filled chunk by chunk, so
    the chunks' own columns are freed as they come instead of being held for a final join."""
    out: Optional[List[Filling]] = None
    several = False
    for arr, offsets in stream.chunks():
        part = convert(arr, offsets)
        several = isinstance(part, tuple)
        leaves: List[Columns] = list(part) if isinstance(part, tuple) else [part]
        if out is None:
            out = [Filling(leaf, stream.count) for leaf in leaves]
        for filling, leaf in zip(out, leaves):
            filling.add(leaf)
        del part, leaves
    if out is None:
        return convert(np.zeros(0, dtype=stream.record.dtype), np.zeros(0, dtype=np.int64))
    done = [filling.columns() for filling in out]
    return cast(ChunkColumns, tuple(done) if several else done[0])  # the shape `convert` gave


class Filling:
    """Columns of up to `rows` rows, filled a part at a time."""

    def __init__(self, first: Columns, rows: int) -> None:
        self.cols = {k: np.empty((rows,) + v.shape[1:], dtype=v.dtype) for k, v in first.items()}
        self.n = 0

    def add(self, part: Columns) -> None:
        """Append the rows of `part` (the same columns as the first part)."""
        m = len(next(iter(part.values()))) if part else 0
        for k, v in part.items():
            self.cols[k][self.n:self.n + m] = v
        self.n += m

    def columns(self) -> Columns:
        """The columns of the rows added so far."""
        return {k: v[:self.n] for k, v in self.cols.items()}
