"""Ids the store's tables share: STRING_IDS (StringPool) and globalTaskId (global_ids), numbered
alike by the modern and the legacy JOB ingest."""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from ..arrays import numbered_by_first_row
from ..store import CodedTexts, text_codes


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
        """Ids of an array of strings, or of coded texts (vectorized over distinct values); new
        strings are numbered in the order of their first row."""
        codes, uniq = text_codes(values)
        return np.array([self.id(str(u)) for u in uniq], dtype=np.int64)[codes]

    def frame(self) -> pd.DataFrame:
        """STRING_IDS: (id, value), in id order."""
        return pd.DataFrame({"id": list(self.ids.values()), "value": list(self.ids.keys())}, copy=False)


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
