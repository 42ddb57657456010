"""The operators holding the most memory: GE's allocations paired with their releases
(operator_memory), largest first, for `show`'s memory table.

From a store: KIT_OPERATOR_MEMORY (ingest/memory_ops.py). From exported files: the newest
operator_memory CSV of the collection's summary folders; that file has no release time, so it is
the allocation time plus the duration, and an allocation never released (duration and release
totals 0.0, as the reference writes it) has none. The exported file repeats the rows once per
device folder (Device_id); the rows of the first are kept."""
from __future__ import annotations

import glob
import os
import sqlite3
from typing import List, Optional

import numpy as np
import pandas as pd

from .. import store
from ..errors import MsprofKitError
from ..exporters.context import open_context
from .discovery import export_folders

DEVICE, NAME, SIZE = "Device", "Op Name", "Size(KB)"
ALLOCATED, RELEASED, HELD = "Allocation Time(us)", "Release Time(us)", "Duration(us)"
TOP_COLUMNS = (DEVICE, NAME, SIZE, ALLOCATED, RELEASED, HELD)


def top_operators(path: str, limit: int = 10) -> Optional[pd.DataFrame]:
    """The `limit` allocations of ops holding the most memory in the collection at `path` (its
    store if it has one, else its exported operator_memory CSV), largest first, ties by allocation
    time: TOP_COLUMNS (Device: the device id; sizes in KB; times in local µs; Release Time and
    Duration NaN for an allocation never released). None when the collection has no operator memory."""
    frame = _from_store(path)
    if frame is None:
        frame = _from_csv(path)
    if frame is None or frame.empty:
        return None
    return largest(frame, limit)


def _from_store(path: str) -> Optional[pd.DataFrame]:
    if not os.path.isfile(store.store_path(path)):
        return None
    try:
        ctx = open_context(path)
    except MsprofKitError:
        return None  # a store that cannot be read: the exported files may still tell
    try:
        return stored_allocations(ctx.conn)
    finally:
        ctx.conn.close()


def stored_allocations(conn: sqlite3.Connection) -> Optional[pd.DataFrame]:
    """Every allocation of a store's KIT_OPERATOR_MEMORY as TOP_COLUMNS (unsorted; None when the
    store has no such table)."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='KIT_OPERATOR_MEMORY'").fetchone() is None:
        return None
    f = pd.read_sql_query("SELECT deviceId, name, size, allocationNs, releaseNs, durationNs FROM KIT_OPERATOR_MEMORY",
                          conn)
    released = f["releaseNs"].to_numpy() > 0
    return pd.DataFrame({
        DEVICE: f["deviceId"].astype(np.int64), NAME: f["name"].astype(str), SIZE: f["size"] / 1024,
        ALLOCATED: f["allocationNs"] / 1000, RELEASED: np.where(released, f["releaseNs"] / 1000, np.nan),
        HELD: np.where(released, f["durationNs"] / 1000, np.nan)})


def largest(frame: pd.DataFrame, limit: int) -> pd.DataFrame:
    """The `limit` largest allocations of a TOP_COLUMNS frame, ties by allocation time."""
    frame = frame.sort_values([SIZE, ALLOCATED], ascending=[False, True], kind="stable")
    return frame.head(limit).reset_index(drop=True)[list(TOP_COLUMNS)]


def _newest_csv(path: str) -> Optional[str]:
    for folder in export_folders(path)[0]:
        found: List[str] = sorted(glob.glob(os.path.join(glob.escape(folder), "operator_memory_*.csv")))
        if found:
            return found[-1]
    return None


def _from_csv(path: str) -> Optional[pd.DataFrame]:
    where = _newest_csv(path)
    if where is None:
        return None
    try:
        f = pd.read_csv(where, dtype=str, keep_default_na=False, index_col=False)
    except (OSError, ValueError, pd.errors.ParserError):
        return None
    need = {"Name", SIZE, ALLOCATED, HELD, "Release Total Allocated(KB)", "Release Total Reserved(KB)", "Device"}
    if f.empty or not need <= set(f.columns):
        return None
    if "Device_id" in f.columns:  # one copy per device folder: keep the first folder's
        f = f[f["Device_id"] == f["Device_id"].iloc[0]]

    def number(name: str) -> np.ndarray:
        return np.asarray(pd.to_numeric(f[name].str.strip(), errors="coerce"), dtype=np.float64)
    held = number(HELD)
    released = ~((held == 0) & (number("Release Total Allocated(KB)") == 0)
                 & (number("Release Total Reserved(KB)") == 0))
    start = number(ALLOCATED)
    device = np.asarray(pd.to_numeric(f["Device"].str.rpartition(":")[2], errors="coerce"), dtype=np.float64)
    return pd.DataFrame({DEVICE: device, NAME: f["Name"].to_numpy(), SIZE: number(SIZE),
                         ALLOCATED: start, RELEASED: np.where(released, start + held, np.nan),
                         HELD: np.where(released, held, np.nan)})
