"""The AI Core Freq layer: a counter of each device's AI Core frequency (MHz)."""
from __future__ import annotations

import sqlite3
from typing import Tuple

import numpy as np

from ..context import ExportContext
from .facts import HOST_DEVICE, SORT_FREQ, Facts
from .writer import TraceWriter, process_meta

FREQ_DIES = (-1, 0, 1)
FREQ_CHIPS = ("4", "5", "7")  # platform versions whose reference timeline shows AI Core Freq


def _ints(conn: sqlite3.Connection, sql: str, width: int) -> np.ndarray:
    """All rows of a small all-integer query as one (n, width) int64 array."""
    rows = conn.execute(sql).fetchall()
    return np.array(rows, dtype=np.int64).reshape(len(rows), width)


def _freq_points(ctx: ExportContext) -> np.ndarray:
    """(device, ts ns, MHz, die) rows of the AI Core frequency: AICORE_FREQ, else each device's
    fixed frequency at the collection start and end, on the chips whose timeline shows it."""
    if ctx.has("AICORE_FREQ"):
        rows = _ints(ctx.conn, "SELECT deviceId, timestampNs, freq, dieId FROM AICORE_FREQ", width=4)
        return rows[np.isin(rows[:, 3], FREQ_DIES)]
    points = []
    if ctx.info.get("platform_version") in FREQ_CHIPS and ctx.has("SESSION_TIME_INFO"):
        start, end = ctx.conn.execute("SELECT startTimeNs, endTimeNs FROM SESSION_TIME_INFO").fetchone()
        for dev, info in sorted(ctx.device_info.items()):
            mhz = str(info.get("aic_frequency", "")).split(".")[0]
            if dev < HOST_DEVICE and mhz.isdigit() and start:
                points += [(dev, int(start), int(mhz), -1), (dev, int(end or start), int(mhz), -1)]
    return np.array(points, dtype=np.int64).reshape(-1, 4)


def _clip_freq(points: np.ndarray, window: Tuple[int, int]) -> np.ndarray:
    """The points of one track (time-sorted) in an iteration export: the value in force at the
    timeline window's start and end, and the changes between."""
    ts, mhz = points[:, 1], points[:, 2]
    lo, hi = max(window[0], int(ts[0])), window[1]  # a window from 0 opens at the first point
    first, last = (mhz[max(int(np.searchsorted(ts, t, side="right")) - 1, 0)] for t in (lo, hi))
    inside = points[(ts > lo) & (ts < hi)]
    edges = np.array([[0, lo, first, 0], [0, hi, last, 0]], dtype=np.int64)
    edges[:, [0, 3]] = points[0, [0, 3]]
    return np.concatenate([edges[:1], inside, edges[1:]])


def write_freq(ctx: ExportContext, out: TraceWriter, facts: Facts) -> None:
    """One AI Core Freq process per device: counter events `AI Core Freq` (or `... Die <n>`)."""
    points = _freq_points(ctx)
    points = points[np.lexsort((points[:, 1], points[:, 3], points[:, 0]))]  # by device, die, time
    for dev in np.unique(points[:, 0]).tolist():
        pid = facts.pid(SORT_FREQ, dev)
        events = process_meta(pid, "AI Core Freq", f"NPU {dev}", SORT_FREQ)
        for die in np.unique(points[points[:, 0] == dev, 3]).tolist():
            track = points[(points[:, 0] == dev) & (points[:, 3] == die)]
            window = facts.timeline_window(dev)
            if facts.scoped:
                if window is None:
                    continue
                track = _clip_freq(track, window)
            name = "AI Core Freq" if die == -1 else f"AI Core Freq Die {die}"
            events += [f'{{"name":"{name}","pid":{pid},"tid":0,"ts":"{facts.us_text(ts)}","ph":"C",'
                       f'"args":{{"MHz":{mhz}}}}}' for ts, mhz in zip(track[:, 1].tolist(), track[:, 2].tolist())]
        out.add(events)
