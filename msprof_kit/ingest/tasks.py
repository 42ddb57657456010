"""Ids the store's tables share: STRING_IDS (StringPool) and globalTaskId (global_ids, or GlobalIds
a window of rows at a time), numbered alike by the modern and the legacy JOB ingest."""
from __future__ import annotations

import itertools
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from ..arrays import Numbering, numbered_by_first_row
from ..store import CodedTexts, text_codes
from .columns import INVALID_CTX


LOOKUP_ROWS = 1 << 20  # strings looked up at a time (StringPool._looked_up)


class StringPool:
    """Strings to integer ids, first seen first numbered (the unified DB's STRING_IDS)."""

    def __init__(self, initial: Sequence[str] = ()) -> None:
        self.ids: Dict[str, int] = {}
        for s in initial:
            self.id(s)

    def id(self, s: str) -> int:
        got = self.ids.get(s)
        if got is None:
            got = self.ids[s] = len(self.ids)
        return got

    def ids_of(self, values: Union[np.ndarray, CodedTexts]) -> np.ndarray:
        """Ids of an array of strings, or of coded texts (the distinct texts looked up at once);
        new strings are numbered in the order of their first row."""
        if isinstance(values, np.ndarray) and values.dtype == object and len(values) \
                and pd.api.types.infer_dtype(values, skipna=False) == "string":
            return self._looked_up(values)
        codes, uniq = text_codes(values)
        if pd.api.types.infer_dtype(uniq, skipna=False) != "string":  # (values that may print alike)
            return np.array([self.id(str(u)) for u in uniq], dtype=np.int64)[codes]
        keys = uniq.tolist()
        got = np.fromiter(map(self.ids.get, keys, itertools.repeat(-1)), dtype=np.int64, count=len(keys))
        new = np.flatnonzero(got < 0)
        if len(new):
            fresh = np.arange(len(self.ids), len(self.ids) + len(new))
            self.ids.update(zip([keys[i] for i in new.tolist()], fresh.tolist()))
            got[new] = fresh
        return got[codes]

    def _looked_up(self, values: np.ndarray) -> np.ndarray:
        """ids_of strings in one pass of `setdefault` (no factorizing first: the op names and
        tensor texts of a dynamic-shape workload are nearly all distinct), LOOKUP_ROWS at a time.
        A new string takes its place among `values`, offset past the ids given, as a provisional
        id; where others were found or came again in between, the new ones are numbered again
        consecutively."""
        base, n = len(self.ids), len(values)
        got: np.ndarray = np.empty(n, dtype=np.int64)
        places = itertools.count(base)
        new_parts = []
        for lo in range(0, n, LOOKUP_ROWS):
            part = values[lo:lo + LOOKUP_ROWS].tolist()
            hi = lo + len(part)
            got[lo:hi] = np.fromiter(map(self.ids.setdefault, part, places), dtype=np.int64, count=len(part))
            new_parts.append(lo + np.flatnonzero(got[lo:hi] == np.arange(base + lo, base + hi)))  # first rows
            del part
        new = np.concatenate(new_parts)
        if len(new) and new[-1] != len(new) - 1:  # provisional ids with gaps
            late = got >= base
            got[late] = base + np.searchsorted(new, got[late] - base)
            self.ids.update(zip(values[new].tolist(), range(base, base + len(new))))
        return got

    def frame(self) -> pd.DataFrame:
        """STRING_IDS: (id, value), in id order. The texts as an object array (pandas converts a
        list of millions of str several times slower)."""
        n = len(self.ids)
        values: np.ndarray = np.empty(n, dtype=object)
        values[:] = list(self.ids)
        return pd.DataFrame({"id": np.fromiter(self.ids.values(), dtype=np.int64, count=n),
                             "value": pd.Series(values, dtype=object, copy=False)}, copy=False)


GID_KEYS: List[str] = ["device_id", "stream_id", "task_id", "ctx", "batch"]


def global_ids(first: pd.DataFrame, then: pd.DataFrame) -> Tuple[np.ndarray, np.ndarray]:
    """globalTaskIds of two frames of GID_KEYS columns (either may be empty): rows sharing (device,
    stream, task, context, batch) share an id, and `first`'s keys are numbered first, in row order
    (host compute tasks before their device executions, or a legacy job's ops before its tasks)."""
    frames = [f for f in (first, then) if not f.empty]
    keys = [np.concatenate([f[k].to_numpy(np.int64) for f in frames] or [np.zeros(0, np.int64)]) for k in GID_KEYS]
    gid = numbered_by_first_row(keys)
    n = 0 if first.empty else len(first)
    return gid[:n], gid[n:]


def gid_ctx(ctx: np.ndarray) -> np.ndarray:
    """A context as the global task id's key packs it: the invalid one 0, the others one more."""
    c = np.asarray(ctx).astype(np.int64)
    return np.where(c == INVALID_CTX, 0, c + 1)


class GlobalIds:
    """globalTaskIds, given a window of rows at a time: rows sharing (device, stream, task,
    context, batch) share an id, keys numbered in the order of their first rows (host compute
    tasks first, then device tasks in TASK order), as global_ids numbers them in one pass. The key
    columns are packed into one int64 with the widths their largest values need (`largest`); when
    they need more than 62 bits, the leading columns' packed value is numbered first."""

    def __init__(self, largest: Dict[str, int]) -> None:
        self.widths = [max(1, int(largest[k]).bit_length()) for k in GID_KEYS]
        stages, bits = 1, 0
        for w in self.widths:
            if bits and bits + w > 62:
                stages, bits = stages + 1, 31
            bits += w
        self.stages = [Numbering() for _ in range(stages)]

    def ids(self, device: np.ndarray, stream: np.ndarray, task: np.ndarray, ctx: np.ndarray,
            batch: np.ndarray) -> np.ndarray:
        code: Optional[np.ndarray] = None
        bits = stage = 0
        for v, w in zip((device, stream, task, gid_ctx(ctx), batch), self.widths):
            v = np.asarray(v).astype(np.int64)
            if code is None:
                code, bits = v, w
                continue
            if bits + w > 62:
                code, bits, stage = self.stages[stage].number(code), 31, stage + 1
            code = (code << w) | v
            bits += w
        assert code is not None
        return self.stages[stage].number(code)

    @property
    def count(self) -> int:
        return self.stages[-1].count
