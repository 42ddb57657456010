"""Device start and end records paired a window of times at a time (docs/benchmarks.md, issue 6).

A device's task logs hold a start and an end record per task. Within a key (stream and task id,
and for FFTS+ subtasks also the subtask and thread id), in time order, a start pairs with the
end right after it; a start followed by another start lost its end, an end with no start right
before it lost its start. Equal times put starts first, then stream order.

The records are spilled in runs sorted by time (`spill.Runs`) and paired a window of times at a
time. A key's last record, when it is a start, is carried into the next window: its end can only
come later. The windows, one after the other, pair exactly what pairing all records at once does
(parsers.device.pair_start_end; both take parsers.device.pairing_order).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ..parsers.device import pairing_order
from ..spill import Runs

Columns = Dict[str, np.ndarray]
WINDOW_ROWS = 1 << 20  # records paired at a time (more when many share one time)


@dataclass
class Orphans:
    """Records of one side left without a partner: how many, and the first in stream order (its
    byte offset in the stream, stream id and task id)."""
    count: int = 0
    offset: int = -1
    stream_id: int = 0
    task_id: int = 0

    def add(self, cols: Columns, rows: np.ndarray) -> None:
        """Count the records `rows` of `cols` (a window of records) as orphans."""
        if not len(rows):
            return
        self.count += len(rows)
        first = rows[np.argmin(cols["offset"][rows])]
        if self.offset < 0 or cols["offset"][first] < self.offset:
            self.offset = int(cols["offset"][first])
            self.stream_id, self.task_id = int(cols["stream_id"][first]), int(cols["task_id"][first])


class Pairing:
    """The start and end records in `runs` (sorted by `time`; with columns `keys`, `is_start` and
    `offset`, the stream position) paired a window at a time by `windows()`. Once that has been
    iterated to its end, `lost_end` and `lost_start` hold the starts without an end and the ends
    without a start."""

    def __init__(self, runs: Runs, keys: Sequence[str], time: str = "syscnt") -> None:
        self.runs, self.keys, self.time = runs, list(keys), time
        self.lost_end, self.lost_start = Orphans(), Orphans()

    def windows(self) -> Iterator[Tuple[Columns, np.ndarray, np.ndarray]]:
        """(records, start rows, end rows) of each window: the window's records and the starts
        carried from earlier windows."""
        runs, keys = self.runs, self.keys
        edges = runs.edges(WINDOW_ROWS)
        runs.cut(edges)
        carry: Optional[Columns] = None
        for w in range(len(edges) + 1):
            cols = runs.window(w)
            if cols is None:
                continue
            if carry is not None:
                cols = {k: np.concatenate([carry[k], v]) for k, v in cols.items()}
            is_start = cols["is_start"]
            n = len(is_start)
            order, same_key, pair = pairing_order([cols[k] for k in keys], cols[self.time], is_start,
                                                  [cols["offset"]])
            starts, ends = order[:-1][pair], order[1:][pair]
            last: np.ndarray = np.ones(n, dtype=bool)  # the last record of its key
            last[:-1] = ~same_key
            carried = order[last & is_start[order]]
            used: np.ndarray = np.zeros(n, dtype=bool)
            used[starts] = used[ends] = used[carried] = True
            self.lost_end.add(cols, np.flatnonzero(~used & is_start))
            self.lost_start.add(cols, np.flatnonzero(~used & ~is_start))
            carry = {k: v[carried] for k, v in cols.items()}
            yield cols, starts, ends
            del cols, order, pair, last, used
        if carry is not None:
            self.lost_end.add(carry, np.arange(len(carry["offset"])))

    def warnings(self, what: str, locate: Callable[[int], Tuple[str, int]]) -> List[str]:
        """What the orphans say: `locate(offset)` gives (path, offset in it)."""
        out = []
        for lost, text in ((self.lost_end, "start record has no end record; task dropped"),
                           (self.lost_start, "end record has no start record; dropped")):
            if lost.count:
                path, off = locate(lost.offset)
                more = f" (and {lost.count - 1} more)" if lost.count > 1 else ""
                out.append(f"{path}: offset {off}: {what} {text} (stream {lost.stream_id}, "
                           f"task {lost.task_id}){more}")
        return out
