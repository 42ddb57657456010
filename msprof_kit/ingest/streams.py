"""Reading the slice files of one data kind (a stream): whole into memory (`read_stream`), a chunk
of whole records at a time (`RecordStream`, `read_chunks`), or as text lines of bounded length
(`read_lines`); and the host and device kinds read chunk by chunk (`read_api_event`,
`compact_stream`, `read_aic_pmu`). The decoding is parsers/'s; this module only hands it bytes.
Only regular files are opened (files.open_regular): a FIFO would block, /dev/zero never ends."""
from __future__ import annotations

import itertools
import os
from typing import Callable, Dict, List, Optional, Sequence, Tuple, TypeVar, Union, cast

import numpy as np

from ..files import open_regular
from ..parsers import device, host, records
from ..parsers.stream import LINE_CAP, Columns, Issue, Piece, RecordChunks, TextLines, Validity

CHUNK_BYTES = 32 << 20  # bytes of a stream read at a time by RecordStream

#: what a chunk converter of read_chunks gives: one dict of columns, or a tuple of them
ChunkColumns = TypeVar("ChunkColumns", bound=Union[Columns, Tuple[Columns, ...]])


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


def read_lines(paths: Sequence[str], sep: bytes = b"\n", cap: int = LINE_CAP) -> TextLines:
    """The lines of the text stream made of `paths` (what parsers.stream.split_lines gives for the
    same bytes), read a block of `cap` bytes at a time: memory is the lines kept plus one block,
    however long a line is."""
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


class RecordStream(RecordChunks):
    """The records of the slice files `paths` (one stream), read and validated a chunk of
    CHUNK_BYTES (or `chunk_bytes`) at a time: parsers.stream.RecordChunks over the files' bytes.
    File sizes are taken when the stream is opened; bytes appended to a slice afterwards are not
    read."""

    def __init__(self, record: records.Record, paths: Sequence[str], valid: Optional[Validity] = None,
                 expected: str = "", chunk_bytes: Optional[int] = None) -> None:
        pieces: List[Piece] = []
        start = 0
        for path in paths:
            size = os.path.getsize(path)
            pieces.append(Piece(path, start, size))
            start += size
        super().__init__(record, pieces, start, self._read_files, valid, expected,
                         CHUNK_BYTES if chunk_bytes is None else chunk_bytes)

    def _read_files(self, start: int, length: int) -> np.ndarray:
        """Bytes [start, start + length) of the stream, across slice files."""
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


def read_chunks(stream: RecordChunks, convert: Callable[[np.ndarray, np.ndarray], ChunkColumns]) -> ChunkColumns:
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


def read_api_event(paths: Sequence[str], fields: Optional[Sequence[str]] = None) -> Tuple[Columns, List[Issue]]:
    """parsers.host.decode_api_event of the files `paths` (one stream), read a chunk at a time;
    of the record's own fields only `fields` when given (`is_event` always)."""
    stream = RecordStream(records.API_EVENT, paths, *host.HOST_VALID)
    return read_chunks(stream, lambda arr, offsets: host.api_columns(arr, offsets, fields)), stream.issues


def compact_stream(kind: str, paths: Sequence[str]) -> RecordStream:
    """The records of one compact or additional kind's stream (`kind`: the file tag), to be read a
    chunk at a time (each chunk's columns: parsers.host.compact_columns)."""
    return RecordStream(host.record_of(kind), paths, *host.HOST_VALID)


def read_aic_pmu(paths: Sequence[str]) -> Tuple[Columns, List[Issue]]:
    """AI Core / AI Vector Core task PMU of HWTS chips (128-byte records, no timestamp) of the
    files `paths` (one stream), read a chunk at a time (columns: parsers.device.aic_pmu_columns)."""
    stream = RecordStream(records.AIC_PMU, paths)
    return read_chunks(stream, device.aic_pmu_columns), stream.issues
