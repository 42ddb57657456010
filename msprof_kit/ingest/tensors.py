"""The host's tensor_info records grouped into ops, with the texts of their tensors (shapes, data
types and formats), a window of time stamps at a time (docs/benchmarks.md).

The records are spilled by time stamp with their tensor bytes; each window's records are grouped
into ops and each op's six texts rendered at once (native/tensor_texts.c, or its Python twin).
The texts are interned a column at a time by their hash (`InternedTexts`), so what the worker
hands the main process is small: a code per op and column, and each column's distinct texts."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple, Union, cast

import numpy as np
import pandas as pd

from ..errors import Diagnostics
from ..layout import ResultDir
from .. import native_impl
from ..native_impl import TextTable, _native, fnv_hashes, text_table
from ..parsers import host as host_parsers
from ..parsers.records import TENSOR_INFO
from ..spill import Runs
from ..store import CodedTexts
from . import limits
from .columns import DataFiles
from .names import group_paths
from .streams import RecordStream

NA = "N/A"  # an op without tensor_info reads N/A in every column (row 0)
COMPARE_TEXTS = 1 << 16  # texts compared byte by byte at a time when checking their hashes


class InternedTexts:
    """Distinct texts, each with a code (in the order first added), told apart by their 64-bit
    hash and checked byte by byte; after a collision (two texts, one hash) by the texts themselves."""

    def __init__(self) -> None:
        self.known: np.ndarray = np.zeros(0, dtype=np.uint64)  # hashes, sorted
        self.code_of: np.ndarray = np.zeros(0, dtype=np.int64)  # the code of each of `known`
        self.blob = bytearray()
        self.ends: List[int] = [0]  # text c is blob[ends[c]:ends[c + 1]]
        self.exact: Optional[Dict[bytes, int]] = None  # after a collision: text -> code

    def __len__(self) -> int:
        return len(self.ends) - 1

    def add(self, blob: bytes, start: np.ndarray, end: np.ndarray, hashes: np.ndarray) -> np.ndarray:
        """The codes of texts blob[start[i]:end[i]] (with their hashes), new texts added."""
        if self.exact is None:
            state = (self.known, self.code_of, len(self.blob), len(self.ends))
            codes, copied = self._by_hash(blob, start, end, hashes)
            check = np.flatnonzero(~copied)  # the texts just copied are their codes' texts
            if self._same(blob, start[check], end[check], codes[check]):
                return codes
            self.known, self.code_of, size, count = state  # a collision: undo, and go by the texts
            del self.blob[size:], self.ends[count:]
            offsets = self.offsets()
            self.exact = {bytes(self.blob[a:b]): c for c, (a, b) in enumerate(zip(offsets[:-1].tolist(),
                                                                                   offsets[1:].tolist()))}
        return self._by_text(blob, start, end)

    def _by_hash(self, blob: bytes, start: np.ndarray, end: np.ndarray, hashes: np.ndarray
                 ) -> Tuple[np.ndarray, np.ndarray]:
        """(the code of each text by its hash, new hashes' texts added; which texts were copied).
        The hashes are told apart by pandas' hash table (in the order of their first row), and the
        new ones merged into the sorted `known` (no sort of all the texts seen so far)."""
        rows, uniq = pd.factorize(hashes, use_na_sentinel=False)
        uniq = np.asarray(uniq, dtype=np.uint64)
        first = np.flatnonzero(np.diff(np.maximum.accumulate(rows), prepend=-1) > 0)  # each hash's first row
        pos = cast(np.ndarray, np.searchsorted(self.known, uniq))  # (numpy's stubs read it as a scalar)
        found: np.ndarray = pos < len(self.known)
        found[found] = self.known[pos[found]] == uniq[found]
        codes: np.ndarray = np.empty(len(uniq), dtype=np.int64)
        codes[found] = self.code_of[pos[found]]
        new = np.flatnonzero(~found)  # (new texts numbered in the order of their first row)
        if len(new):
            codes[new] = np.arange(len(self), len(self) + len(new))
            fresh = first[new]
            self._append(blob, start[fresh], end[fresh])
            order = np.argsort(uniq[new])
            added, added_codes = uniq[new][order], codes[new][order]
            at = np.searchsorted(self.known, added)
            self.known, self.code_of = np.insert(self.known, at, added), np.insert(self.code_of, at, added_codes)
        copied: np.ndarray = np.zeros(len(hashes), dtype=bool)
        copied[first[new]] = True
        return codes[rows], copied

    def _append(self, blob: bytes, start: np.ndarray, end: np.ndarray) -> None:
        lengths = end - start
        self.blob += gather_spans(blob, start, lengths)
        self.ends += (self.ends[-1] + np.cumsum(lengths)).tolist()

    def _same(self, blob: bytes, start: np.ndarray, end: np.ndarray, codes: np.ndarray) -> bool:
        """Whether each text reads the same as the text of its code."""
        offsets = self.offsets()
        lengths = end - start
        if not np.array_equal(lengths, offsets[codes + 1] - offsets[codes]):
            return False
        return spans_equal(blob, start, self.blob, offsets[codes], lengths)

    def _by_text(self, blob: bytes, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        # only after a 64-bit hash collision: a loop over the texts, in Python
        assert self.exact is not None
        codes: np.ndarray = np.empty(len(start), dtype=np.int64)
        for i, (a, b) in enumerate(zip(start.tolist(), end.tolist())):
            text = blob[a:b]
            code = self.exact.get(text)
            if code is None:
                code = self.exact[text] = len(self)
                self.blob += text
                self.ends.append(len(self.blob))
            codes[i] = code
        return codes

    def offsets(self) -> np.ndarray:
        """int64 offsets of the texts in `blob`, one more than the texts."""
        return np.array(self.ends, dtype=np.int64)

    def table(self) -> TextTable:
        """The texts, by code."""
        return TextTable(bytes(self.blob), self.offsets())


def gather_spans(blob: Union[bytes, bytearray], start: np.ndarray, lengths: np.ndarray) -> bytes:
    """blob[start[i]:start[i] + lengths[i]] of every i, one after the other: the C function
    (native/_native.c) when the C implementation is in use, else `py_gather_spans`."""
    args = (np.ascontiguousarray(start, dtype=np.int64), np.ascontiguousarray(lengths, dtype=np.int64))
    if native_impl.c_chosen():
        return _native.gather_spans(blob, *args)
    return py_gather_spans(blob, *args)


def py_gather_spans(blob: Union[bytes, bytearray], start: np.ndarray, lengths: np.ndarray) -> bytes:
    """The pure-Python twin of `_native.gather_spans`."""
    if len(start) and (start.min() < 0 or lengths.min() < 0 or (start + lengths).max() > len(blob)):
        raise ValueError("gather_spans: a span is not within its bytes")
    return np.frombuffer(blob, dtype=np.uint8)[_spans(start, lengths)].tobytes()


def spans_equal(a: Union[bytes, bytearray], a_start: np.ndarray, b: Union[bytes, bytearray], b_start: np.ndarray,
                lengths: np.ndarray) -> bool:
    """Whether a[a_start[i]:][:lengths[i]] reads as b[b_start[i]:][:lengths[i]] for every i: the
    C function (native/_native.c) when the C implementation is in use, else `py_spans_equal`."""
    args = (np.ascontiguousarray(a_start, dtype=np.int64), np.ascontiguousarray(b_start, dtype=np.int64),
            np.ascontiguousarray(lengths, dtype=np.int64))
    if native_impl.c_chosen():
        return _native.spans_equal(a, args[0], b, args[1], args[2])
    return py_spans_equal(a, args[0], b, args[1], args[2])


def py_spans_equal(a: Union[bytes, bytearray], a_start: np.ndarray, b: Union[bytes, bytearray],
                   b_start: np.ndarray, lengths: np.ndarray) -> bool:
    """The pure-Python twin of `_native.spans_equal` (COMPARE_TEXTS spans at a time)."""
    for blob, start in ((a, a_start), (b, b_start)):
        if len(start) and (start.min() < 0 or lengths.min() < 0 or (start + lengths).max() > len(blob)):
            raise ValueError("spans_equal: a span is not within its bytes")
    mine, theirs = np.frombuffer(a, dtype=np.uint8), np.frombuffer(b, dtype=np.uint8)
    for lo in range(0, len(lengths), COMPARE_TEXTS):
        n = lengths[lo:lo + COMPARE_TEXTS]
        if not np.array_equal(mine[_spans(a_start[lo:lo + COMPARE_TEXTS], n)],
                              theirs[_spans(b_start[lo:lo + COMPARE_TEXTS], n)]):
            return False
    return True


def _spans(start: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions start[i] .. start[i] + lengths[i] - 1 of every i, one after the other."""
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    shift = start - (np.cumsum(lengths) - lengths)  # each span's start minus its place in the output
    return np.arange(total, dtype=np.int64) + np.repeat(shift, lengths)


@dataclass
class TensorTable:
    """The tensor texts of ops, a row each: row r's column c (input shapes, dtypes, formats,
    output shapes, dtypes, formats) is text codes[r, c] of texts[c]. Row 0 is an op without
    tensor_info: N/A throughout."""
    codes: np.ndarray  # (rows, 6) int32
    texts: List[TextTable]  # each column's distinct texts

    @classmethod
    def empty(cls) -> "TensorTable":
        """The table of row 0 alone."""
        return cls(np.zeros((1, host_parsers.TENSOR_COLUMNS), dtype=np.int32),
                   [text_table([NA])] * host_parsers.TENSOR_COLUMNS)

    def __len__(self) -> int:
        return len(self.codes)

    def column(self, col: int, rows: np.ndarray) -> CodedTexts:
        """Column `col` of `rows`, as codes into the column's texts."""
        texts: np.ndarray = np.empty(self.texts[col].size, dtype=object)
        texts[:] = self.texts[col].texts()
        return CodedTexts(self.codes[rows, col], texts)

    def rows(self, rows: np.ndarray) -> List[Tuple[str, ...]]:
        """The texts of `rows` (for tests and tools; the import reads `column`)."""
        cols = [np.asarray(self.column(c, rows).texts)[self.codes[rows, c]] for c in range(len(self.texts))]
        return [tuple(r) for r in zip(*cols)]


def tensor_job(rd: ResultDir, files: DataFiles, scratch: str) -> Tuple[Runs, TensorTable, List[str]]:
    """tensor_texts in a forked worker: (ops, text table, warnings)."""
    local = Diagnostics()
    tensors, table = tensor_texts(files, local, scratch)
    return tensors, table, local.warnings


def tensor_texts(files: DataFiles, diag: Diagnostics, scratch: str) -> Tuple[Runs, TensorTable]:
    """(one row per op: thread_id, timestamp, text = its row of the table, pos = stream position
    of its first record, spilled by timestamp under the prefix "tensor"; the texts of the rows).

    Records with the same (op_name, timestamp, thread_id) are one op's; its tensors may span
    several records. The records are spilled by timestamp with their tensor bytes, and grouped a
    window of timestamps at a time (an op's records share one). Empty shapes and descriptions read
    `N/A`, as the reference prints them."""
    out = Runs(scratch, "tensor", "timestamp")
    columns = [InternedTexts() for _ in range(host_parsers.TENSOR_COLUMNS)]
    na = text_table([NA])
    for col in columns:  # code 0: N/A
        col.add(na.blob, na.offsets[:1], na.offsets[1:], fnv_hashes(na.blob, na.offsets))
    codes: List[np.ndarray] = [np.zeros((1, host_parsers.TENSOR_COLUMNS), dtype=np.int32)]  # row 0: an op without tensor_info
    rows, seen = 1, 0
    try:
        for _, paths in group_paths(files, "tensor_info"):
            recs = Runs(scratch, "tensor_records", "timestamp", limits.SAMPLE_EVERY)
            try:
                count, parts = _tensor_stream(paths, recs, out, columns, rows, seen, diag)
            finally:
                recs.close()
            codes += parts
            rows += sum(len(p) for p in parts)
            seen += count
    except BaseException:
        out.close()
        raise
    return out, TensorTable(np.concatenate(codes), [c.table() for c in columns])


def _tensor_stream(paths: List[str], recs: Runs, out: Runs, columns: List[InternedTexts], rows: int, seen: int,
                   diag: Diagnostics) -> Tuple[int, List[np.ndarray]]:
    """One tensor_info stream's ops into `out` (text rows from `rows`, positions from `seen`), its
    records spilled to `recs`; returns (its records, the text codes of its ops' rows)."""
    stream = RecordStream(TENSOR_INFO, paths, *host_parsers.HOST_VALID)
    count = 0
    for arr, _ in stream.chunks():
        n = len(arr)
        recs.add({"op_name": arr["op_name"].astype(np.int64), "timestamp": arr["timestamp"].astype(np.int64),
                  "thread_id": arr["thread_id"].astype(np.int64), "payload": host_parsers.tensor_payload(arr),
                  "seq": np.arange(count, count + n, dtype=np.int64)})
        count += n
    diag.extend(stream.issues)
    edges = recs.edges(limits.SPILL_ROWS)
    recs.cut(edges)
    parts: List[np.ndarray] = []
    for w in range(len(edges) + 1):
        c = recs.window(w)
        if c is None:
            continue
        order = np.argsort(c["seq"], kind="stable")  # stream order (the payload stays as read: its
        payload = c.pop("payload")                   # records are taken through `order`)
        c = {k: v[order] for k, v in c.items()}
        _, members, starts = host_parsers.group_ops(c["op_name"], c["timestamp"], c["thread_id"])
        texts, hashes = host_parsers.render_ops(payload, order[members], starts)
        del payload
        m = len(starts) - 1
        offsets = texts.offsets
        codes: np.ndarray = np.empty((m, len(columns)), dtype=np.int32)
        for j, col in enumerate(columns):
            at = np.arange(j, len(offsets) - 1, len(columns))
            codes[:, j] = col.add(texts.blob, offsets[at], offsets[at + 1], hashes[at])
        first = members[starts[:-1]]  # each op's first record (ops are numbered by it)
        out.add({"thread_id": c["thread_id"][first], "timestamp": c["timestamp"][first],
                 "text": np.arange(rows, rows + m, dtype=np.int64), "pos": seen + c["seq"][first]})
        parts.append(codes)
        rows += m
        del c, texts, hashes
    return count, parts
