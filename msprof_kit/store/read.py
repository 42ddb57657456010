"""Reading a store: opening it, the warnings its import reported, its identity, and the
iterations of its step trace."""
from __future__ import annotations

import os
import sqlite3
import zlib
from typing import Dict, List, NamedTuple, Optional, Tuple

import numpy as np

from ..errors import Diagnostics, StoreError
from .paths import NO_STORE, file_uri, store_path, store_problem


def open_store(collection_path: str) -> sqlite3.Connection:
    """The store of a collection, read-only; a StoreError when it is missing or cannot be used."""
    path = store_path(collection_path)
    problem = store_problem(collection_path)
    if problem == NO_STORE:
        raise StoreError("no store here; run 'msprof-kit import' first", path=path)
    if problem is not None:
        raise StoreError(f"{problem}; import the collection again (msprof-kit import -dir {collection_path})",
                         path=path)
    return sqlite3.connect(file_uri(path) + "?mode=ro", uri=True)


def import_warnings(collection_path: str) -> Tuple[int, List[str]]:
    """How many warnings the import of a collection reported (KIT_WARNINGS), and the first ones
    (up to 3)."""
    conn = open_store(collection_path)
    try:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name='KIT_WARNINGS'").fetchone():
            return 0, []
        n = conn.execute("SELECT COUNT(*) FROM KIT_WARNINGS").fetchone()[0]
        return n, [r[0] for r in conn.execute("SELECT message FROM KIT_WARNINGS ORDER BY rowid LIMIT 3")]
    finally:
        conn.close()


def repeat_warnings(collection_path: str, diag: Diagnostics) -> None:
    """One warning summing up those the import of a collection reported (docs/store.md)."""
    n, first = import_warnings(collection_path)
    if n == 1:
        diag.warn(f"the import of {collection_path} reported 1 warning: {first[0]}")
    elif n > 1:
        diag.warn(f"the import of {collection_path} reported {n} warnings: {first[0]}, ... "
                  f"(msprof-kit import -dir {collection_path} shows them all)")


def iterations(steps: List[Tuple[int, int, int]]) -> List[Tuple[int, int, int, int]]:
    """(model, index, start, end) from step-trace (model, timestamp, tag) records (KIT_STEP_TRACE):
    per model in time order, MODEL_START (tag 0) opens iteration 1, 2, ...; MODEL_END (1) closes it;
    ITER_END (4) closes it and opens the next. An iteration still open at the end is discarded."""
    if not steps:
        return []
    model, stamp, tag = (np.array(col, dtype=np.int64) for col in zip(*steps))
    return iteration_spans(model, stamp, tag).iterations


class IterationSpans(NamedTuple):
    """The iterations of step-trace records and where they lie among them: `order` sorts the
    records by model, then time (ties in their given order); iteration k opens at the record
    `order[start_at[k]]` and closes at `order[end_at[k]]`."""

    iterations: List[Tuple[int, int, int, int]]  # (model, index, start, end), by model, then time
    order: np.ndarray
    start_at: np.ndarray
    end_at: np.ndarray


def iteration_spans(model: np.ndarray, stamp: np.ndarray, tag: np.ndarray) -> IterationSpans:
    """`iterations` of step-trace records given as columns, with the positions of each iteration's
    opening and closing record in the records' (model, time) order: a record strictly between
    them belongs to the iteration."""
    order = np.lexsort((stamp, model))
    tags = tag[order]
    bounds = np.flatnonzero((tags == 0) | (tags == 1) | (tags == 4))
    out: List[Tuple[int, int, int, int]] = []
    start_at: List[int] = []
    end_at: List[int] = []
    index: Dict[int, int] = {}  # per model: the number of its next iteration
    opened: Dict[int, Optional[int]] = {}  # per model: the position of its open iteration's start
    models, stamps = model[order], stamp[order]
    for pos, m, t, g in zip(bounds.tolist(), models[bounds].tolist(), stamps[bounds].tolist(), tags[bounds].tolist()):
        index.setdefault(m, 1)
        began = opened.setdefault(m, None)
        if g == 0 and began is None:
            opened[m] = pos
        elif g in (1, 4) and began is not None:
            out.append((m, index[m], int(stamps[began]), t))
            start_at.append(began)
            end_at.append(pos)
            index[m] += 1
            opened[m] = pos if g == 4 else None
    return IterationSpans(out, order, np.array(start_at, dtype=np.int64), np.array(end_at, dtype=np.int64))


def store_identity(collection_path: str) -> int:
    """A number that changes whenever the store is written again: a CRC-32 (31 bits, to fit
    sqlite's signed user_version) of the store file's device, inode, size and modification time
    in ns. An import replaces the store by a rename, so every import gives a new identity."""
    st = os.stat(store_path(collection_path))
    return zlib.crc32(f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}".encode()) & 0x7FFFFFFF


