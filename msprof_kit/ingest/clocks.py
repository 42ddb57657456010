"""Times from the control files (start_info, end_info): the collection's start and end."""
from __future__ import annotations

from typing import Sequence, Tuple

from ..layout import ResultDir

# control-file times (ns) and counters must stay below this (146 years of ns), so that a sum of two
# still fits the int64 ns of the store
NS_LIMIT = 1 << 62


def control_times(rds: Sequence[ResultDir]) -> Tuple[int, int]:
    """(start, end) in local ns: the first collectionTimeBegin of their start_info and the first
    collectionTimeEnd of their end_info (µs there); 0 where none has one."""
    start = end = 0
    for rd in rds:
        b = str(rd.start_info.get("collectionTimeBegin", "") or "")
        e = str(rd.end_info.get("collectionTimeEnd", "") or "")
        if b.isdigit() and not start and int(b) < NS_LIMIT // 1000:
            start = int(b) * 1000
        if e.isdigit() and not end and int(e) < NS_LIMIT // 1000:
            end = int(e) * 1000
    return start, end
