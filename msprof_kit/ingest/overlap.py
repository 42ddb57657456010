"""OVERLAP_ANALYSIS of a device: the union of its compute tasks' intervals and the gaps in it,
given its tasks a window of starts at a time."""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from ..intervals import interval_gaps, subtract_intervals, union_intervals
from ..spill import Runs
from . import limits
from .columns import frame_of
from .sink import TableSink


class Overlap:
    """OVERLAP_ANALYSIS of one device, given its tasks a window of starts at a time: the union of
    its compute tasks' intervals (type 0) and the gaps in it (type 3) inside the span of its other
    tasks and the union. The union's intervals are spilled as they close (the last one stays open
    from a window to the next); `write` writes the rows once every window has been given."""

    def __init__(self, folder: str, device_id: int) -> None:
        self.device_id = device_id
        self.runs = Runs(folder, f"overlap{device_id}", "start")
        self.open: Optional[Tuple[int, int]] = None
        self.lo: Optional[int] = None
        self.hi: Optional[int] = None

    def step(self, start: np.ndarray, end: np.ndarray, compute: np.ndarray, other: np.ndarray) -> None:
        cs, ce = start[compute], end[compute]
        if self.open is not None:
            cs, ce = np.concatenate([[self.open[0]], cs]), np.concatenate([[self.open[1]], ce])
        us, ue = union_intervals(cs, ce)
        starts = np.concatenate([start[other], us])
        if len(starts):
            ends = np.concatenate([end[other], ue])
            lo, hi = int(starts.min()), int(ends.max())
            self.lo = lo if self.lo is None else min(self.lo, lo)
            self.hi = hi if self.hi is None else max(self.hi, hi)
        if len(us):
            self.runs.add({"start": us[:-1], "end": ue[:-1]})
            self.open = (int(us[-1]), int(ue[-1]))

    def write(self, first_id: int, put: TableSink, comm: Optional[Tuple[np.ndarray, np.ndarray]] = None) -> int:
        """Write the rows (ids from `first_id`); returns the next id. `comm`: the device's
        communication op spans, which add the COMMUNICATION (1) and COMM_NOT_OVERLAP_COMP (2) rows
        and take their time out of the gaps (3)."""
        if self.open is not None:
            self.runs.add({"start": np.array([self.open[0]], np.int64), "end": np.array([self.open[1]], np.int64)})
            self.open = None
        n = self.runs.rows
        next_id = first_id

        def part(s: np.ndarray, e: np.ndarray, kind: int) -> None:
            nonlocal next_id
            if len(s):
                put("OVERLAP_ANALYSIS", frame_of({"id": np.arange(next_id, next_id + len(s), dtype=np.int64),
                                                  "deviceId": self.device_id, "startNs": s, "endNs": e, "type": kind}),
                    last=False)
                next_id += len(s)

        def read(lo: int) -> Tuple[np.ndarray, np.ndarray]:
            if not n:
                return np.zeros(0, np.int64), np.zeros(0, np.int64)
            hi = min(n, lo + limits.TASK_ROWS)
            return self.runs.read("start", lo, hi), self.runs.read("end", lo, hi)
        if comm is not None and len(comm[0]):
            s, e = read(0) if n <= limits.TASK_ROWS else (self.runs.read("start", 0, n), self.runs.read("end", 0, n))
            valid = e > s
            part(s[valid], e[valid], 0)
            cs, ce = union_intervals(comm[0].astype(np.int64), comm[1].astype(np.int64))
            keep = ce > cs
            part(cs[keep], ce[keep], 1)
            ds, de = subtract_intervals(cs, ce, s, e)
            part(ds, de, 2)
            if self.lo is not None and self.hi is not None:
                lo_, hi_ = min(self.lo, int(cs.min())), max(self.hi, int(ce.max()))
                us, ue = union_intervals(np.concatenate([s, cs]), np.concatenate([e, ce]))
                gs, ge = interval_gaps(lo_, hi_, us, ue)
                part(gs, ge, 3)
            self.runs.close()
            return next_id
        for lo in range(0, n, limits.TASK_ROWS):
            s, e = read(lo)
            valid = e > s
            part(s[valid], e[valid], 0)
        if self.lo is not None and self.hi is not None and self.hi > self.lo:
            prev = self.lo
            for lo in range(0, max(n, 1), limits.TASK_ROWS):
                s, e = read(lo)
                gs = np.maximum(np.concatenate([[prev], e]), self.lo)
                ge = np.minimum(np.concatenate([s, [self.hi]]), self.hi)
                last_chunk = lo + limits.TASK_ROWS >= n
                if not last_chunk:
                    gs, ge = gs[:-1], ge[:-1]
                    prev = int(e[-1])
                keep = ge > gs
                part(gs[keep], ge[keep], 3)
        self.runs.close()
        return next_id

    def close(self) -> None:
        self.runs.close()
