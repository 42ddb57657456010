"""A KIT_COLUMNS column of a table written in parts (`TableWriter.put(..., last=False)`): its
parts appended to a scratch file, and put into the column's BLOB when the table ends."""
from __future__ import annotations

import itertools
import os
import sqlite3
from typing import Dict, Iterator, List, Optional, Tuple, cast

import numpy as np
import pandas as pd

from .. import native_impl
from ..errors import StoreError
from ..spill import scratch_error
from .columns import CodedTexts, ColumnValues, column_array, narrowest_type


class SpilledColumn:
    """One KIT_COLUMNS column of a table written in parts: the parts' values appended to a scratch
    file, put into its BLOB when the table ends. A text column keeps its distinct texts in the
    order of their first row over all parts (as `text_codes` gives them of the whole column) and
    spills int32 codes; a mirrored integer column spills each part in the narrowest type that
    holds it, and is narrowed as a whole at the end."""

    COPY_ROWS = 1 << 20  # values moved from the scratch file into the BLOB at a time

    def __init__(self, path: str, mirror: bool) -> None:
        self.path, self.mirror = path, mirror
        self.file = open(path, "w+b")
        self.parts: List[Tuple[np.dtype, int]] = []  # each part's type and row count in the file
        self.dtype: Optional[np.dtype] = None
        self.labels: Optional[Dict[str, int]] = None  # the labels in order, each with its key (`_label_ids`)
        self._keys: np.ndarray = np.zeros(0, dtype=np.int64)  # the labels' keys, ascending
        self._looked = 0  # texts looked up in `labels` so far
        self._texts: Optional[np.ndarray] = None  # the texts table of the last CodedTexts part,
        self._label_of: np.ndarray = np.zeros(0, dtype=np.int64)  # and the label id of its codes (-1: not seen)
        self.n = 0
        self.lo: Optional[int] = None
        self.hi: Optional[int] = None

    def _label_ids(self, labels: np.ndarray) -> np.ndarray:
        """The ids of texts among the labels of all parts (a label by its str), those not seen yet
        numbered in the order they come.

        One pass of `setdefault` over the texts: a new label gets a key of its own (the count of
        texts looked up before it, so keys rise with the labels' order), and a label's id is the
        rank of its key among all keys given (`_keys`, ascending)."""
        if self.labels is None:
            self.labels = {}
        texts = labels.tolist() if pd.api.types.infer_dtype(labels, skipna=False) == "string" else map(str, labels)
        got: np.ndarray = np.fromiter(map(self.labels.setdefault, texts, itertools.count(self._looked)),
                                      dtype=np.int64, count=len(labels))
        # a text not seen before took its own place as key, so the fresh keys are those equal to their
        # place: ascending and distinct, with no sort
        fresh = got[got == np.arange(self._looked, self._looked + len(got))]
        if len(fresh):
            self._keys = np.concatenate([self._keys, fresh])
        self._looked += len(got)
        return cast(np.ndarray, np.searchsorted(self._keys, got))  # (numpy's stubs read it as a scalar)

    def _coded(self, values: CodedTexts) -> np.ndarray:
        """A part's CodedTexts as int32 ids among the labels of all parts. The id of each code of
        its texts table is kept while the parts bring the same table, so that only codes not seen
        yet are looked up by text (the same ids as `text_codes` and `_label_ids` give)."""
        if values.texts is not self._texts:
            self._texts = values.texts
            self._label_of = np.full(len(values.texts), -1, dtype=np.int64)
        rows, used = pd.factorize(values.codes, use_na_sentinel=False)
        label = self._label_of[used]
        new = np.flatnonzero(label < 0)
        if len(new):
            label[new] = self._label_ids(np.asarray(values.texts, dtype=object)[used[new]])
            self._label_of[used[new]] = label[new]
        return label.astype("<i4")[rows]

    def add(self, values: ColumnValues) -> None:
        """Append a part's values (rows in order)."""
        if self.mirror:
            arr = np.asarray(values).astype("<i8", copy=False)
            if len(arr):
                lo, hi = int(arr.min()), int(arr.max())
                self.lo = lo if self.lo is None else min(self.lo, lo)
                self.hi = hi if self.hi is None else max(self.hi, hi)
                arr = arr.astype(narrowest_type(lo, hi))
        else:
            if isinstance(values, CodedTexts):
                arr = self._coded(values)
            else:
                arr, labels = column_array(values)
                if labels is not None:  # the part's codes renumbered into the labels of all parts
                    arr = self._label_ids(labels).astype("<i4")[arr]
            if self.dtype is None:
                self.dtype = arr.dtype
            elif arr.dtype != self.dtype:
                raise StoreError(f"internal: column {os.path.basename(self.path)} is {arr.dtype} in one part, "
                                 f"{self.dtype} in another")
        try:
            self.file.write(memoryview(np.ascontiguousarray(arr)))
        except OSError as exc:  # a full disk
            raise scratch_error(exc, self.path) from exc
        self.parts.append((arr.dtype, len(arr)))
        self.n += len(arr)

    def stored_dtype(self) -> np.dtype:
        """The type of the column's BLOB."""
        if self.mirror:  # as `narrowest` of the whole column
            return narrowest_type(self.lo, self.hi) if self.lo is not None and self.hi is not None \
                else np.dtype("<i8")
        return self.dtype if self.dtype is not None else np.dtype("<i4")

    def _pieces(self, out: np.dtype) -> Iterator[np.ndarray]:
        """The column's values in the stored type, part after part, a piece of a part at a time."""
        self.file.seek(0)
        for src, n in self.parts:
            for lo in range(0, n, self.COPY_ROWS):
                data = self.file.read(min(self.COPY_ROWS, n - lo) * src.itemsize)
                yield np.ascontiguousarray(np.frombuffer(data, dtype=src).astype(out, copy=False))

    def write(self, conn: sqlite3.Connection, table: str, name: str) -> None:
        """The KIT_COLUMNS row of the column, its BLOB filled from the scratch file a piece at a time."""
        out = self.stored_dtype()
        labels = native_impl.json_list(list(self.labels)) if self.labels is not None else None
        rowid = conn.execute("INSERT INTO KIT_COLUMNS VALUES (?, ?, ?, zeroblob(?), ?)",
                             (table, name, out.str, self.n * out.itemsize, labels)).lastrowid
        if not self.n:
            return
        pieces = self._pieces(out)
        if hasattr(conn, "blobopen"):
            with conn.blobopen("KIT_COLUMNS", "data", rowid) as blob:
                for piece in pieces:
                    blob.write(piece.data)
        else:  # Python < 3.11 has no incremental BLOB I/O: the column is written whole
            whole = b"".join(piece.tobytes() for piece in pieces)
            conn.execute("UPDATE KIT_COLUMNS SET data = ? WHERE rowid = ?", (whole, rowid))

    def close(self) -> None:
        """Close and remove the scratch file."""
        self.file.close()
        os.remove(self.path)
