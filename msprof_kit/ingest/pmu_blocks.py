"""FFTS PMU records attached to the device tasks they lie in, and the block PMU records summed per
task and core where they are read (the device's worker, ingest/device.py): pmu.StarsPmu then reads
one row per (task, core) instead of every block record (about 4.5 a task on a 910B MIX
workload)."""
from __future__ import annotations

from typing import Optional, Sequence, cast

import numpy as np

from ..arrays import ascending, last_seen
from ..timebase import Clock
from ..parsers import device as device_parsers
from ..spill import Runs
from . import limits
from .columns import INVALID_CTX, Columns
from .matching import match_keys

# a block sum's columns: the task's match key and start (syscnt) that attach it to its task again,
# the core type of the blocks summed, their cycles and counters, and end_ns (the task's start_ns:
# the window of its task)
BLOCK_SUM_COLUMNS = ("key", "start", "core_type", "total_cycle", "pmu", "end_ns")


def context_records(ctx: Columns) -> Columns:
    """The columns pmu.StarsPmu reads of FFTS context PMU records (ffts_columns'), made where
    they are read: each record's match key, whether the AI Core ran it (is_aic: ffts type 0 or 5,
    or an FFTS+ subtask of type 0 or 6), its offset, total_cycle, pmu, end_syscnt and end_ns."""
    ffts = ctx["ffts_type"]
    plus = ffts == device_parsers.FFTS_PLUS
    return {"key": match_keys(ctx["stream_id"], ctx["task_id"], np.where(plus, ctx["subtask_id"], INVALID_CTX)),
            "is_aic": (ffts == 0) | (plus & np.isin(ctx["subtask_type"], (0, 6))) | (ffts == 5),
            **{k: ctx[k] for k in ("offset", "total_cycle", "pmu", "end_syscnt", "end_ns")}}


class KeyedTasks:
    """The carried tasks and a window's (carry first, each in task order), with their order by key
    then start (stable), shared by the records attached to them and by the next carry."""

    def __init__(self, carry: Optional[Columns], tasks: Optional[Columns], names: Sequence[str]) -> None:
        parts = [c for c in (carry, tasks) if c is not None]
        self.cols = {k: np.concatenate([p[k] for p in parts]) for k in names}
        # (the carry's tasks begun before the window's: by start already, but for ties)
        self.by_start = ascending(self.cols["start"])
        self.order = np.argsort(self.cols["key"], kind="stable") if self.by_start \
            else np.lexsort((self.cols["start"], self.cols["key"]))
        self.key, self.start = self.cols["key"][self.order], self.cols["start"][self.order]

    def attach(self, key: np.ndarray, t: np.ndarray) -> np.ndarray:
        """For records of keys `key` at times `t`, the task (its `row`) of the same key whose
        [start, end] holds t: the latest begun at or before t (of those begun at one time, the
        last); -1 when there is none or it ended before t.

        Each record's key found among the tasks by key, then its task by a binary search on
        start within its key's tasks, all records at once (a step for each halving of the most
        tasks a key has)."""
        key = np.asarray(key, dtype=np.int64)
        t = np.asarray(t, dtype=np.int64)
        out: np.ndarray = np.full(len(t), -1, dtype=np.int64)
        # (numpy's stubs read an array of unknown dtype as a scalar)
        lo = cast(np.ndarray, np.searchsorted(self.key, key, side="left"))
        hi = cast(np.ndarray, np.searchsorted(self.key, key, side="right"))
        first = lo.copy()
        live = np.flatnonzero(lo < hi)
        while len(live):  # the first of a key's tasks begun after t, in [lo, hi)
            mid = (lo[live] + hi[live]) >> 1
            after = self.start[mid] > t[live]
            hi[live[after]] = mid[after]
            lo[live[~after]] = mid[~after] + 1
            live = live[lo[live] < hi[live]]
        rec = np.flatnonzero(lo > first)
        task = self.order[lo[rec] - 1]
        ok = t[rec] <= self.cols["end"][task]
        out[rec[ok]] = self.cols["row"][task[ok]]
        return out

    def latest(self) -> Columns:
        """Each key's latest begun task (the last in task order), in task order."""
        if self.by_start:
            last: np.ndarray = np.zeros(len(self.key), dtype=bool)
            ends = np.flatnonzero(np.concatenate([self.key[1:] != self.key[:-1], [True]])) if len(self.key) \
                else np.zeros(0, np.int64)
            last[self.order[ends]] = True
        else:
            last = last_seen(self.cols["key"])
        return {k: v[last] for k, v in self.cols.items()}


def attach(carry: Optional[Columns], tasks: Columns, key: np.ndarray, t: np.ndarray) -> np.ndarray:
    """KeyedTasks.attach of the carry's and the window's tasks (key, start, end, row)."""
    if not len(t):
        return np.full(0, -1, dtype=np.int64)
    return KeyedTasks(carry, tasks, ("key", "start", "end", "row")).attach(key, t)


def ending_after(carry: Columns, edge: Optional[int]) -> Columns:
    """The carried tasks (each key's latest) that end at or after `edge` (end_ns), the next
    window's first: the others can hold none of that window's records or the later ones, and with
    no earlier task of their key carried, those records of their key attach nowhere all the same."""
    if edge is None:
        return carry
    alive = carry["end_ns"] >= edge
    return carry if alive.all() else {k: v[alive] for k, v in carry.items()}


def block_sums(tasks: Runs, blk: Runs, clock: Clock, scratch: str, prefix: str) -> Runs:
    """The block PMU records `blk` (spilled by end_ns) attached to the device tasks `tasks`
    (TASK_COLUMNS and start_ns, spilled by start_ns) as pmu.StarsPmu attaches them, and summed
    per task and core type (0 AIC, 1 AIV; the blocks of other types count nowhere): runs of
    BLOCK_SUM_COLUMNS spilled by the task's start_ns. A window of tasks and records at a time,
    each key's latest task carried to the next."""
    out = Runs(scratch, prefix, "end_ns")
    edges = tasks.edges(limits.TASK_ROWS)
    tasks.cut(edges)
    blk.cut(edges)
    carry: Optional[Columns] = None
    for w in range(len(edges) + 1):
        cols = tasks.window(w)
        if cols is not None:
            order = np.lexsort((cols["tie"], cols["task_id"], cols["stream_id"], cols["start"]))
            win = {"key": match_keys(cols["stream_id"][order], cols["task_id"][order], cols["ctx"][order]),
                   "start": cols["start"][order].astype(np.int64), "end": cols["end"][order].astype(np.int64),
                   "start_ns": cols["start_ns"][order].astype(np.int64)}
            win["end_ns"] = clock.to_ns(win["end"])
            del cols, order
            both: Optional[Columns] = win if carry is None else {k: np.concatenate([carry[k], v]) for k, v in win.items()}
        else:
            both = None if carry is None else dict(carry)
        if both is None:
            continue
        both["row"] = np.arange(len(both["key"]), dtype=np.int64)  # (a task's index in `both`)
        keyed = KeyedTasks(None, both, tuple(both))
        b = blk.window(w)
        if b is not None:
            bctx = np.where(b["ffts_type"] == device_parsers.FFTS_PLUS, b["subtask_id"], INVALID_CTX)
            row = keyed.attach(match_keys(b["stream_id"], b["task_id"], bctx), b["end_syscnt"])
            keep = np.flatnonzero((row >= 0) & (b["core_type"] <= 1))
            code = row[keep] * 2 + b["core_type"][keep].astype(np.int64)
            order = np.argsort(code, kind="stable")
            keep, code = keep[order], code[order]
            if len(code):
                starts = np.flatnonzero(np.concatenate([[True], code[1:] != code[:-1]]))
                task = code[starts] >> 1
                out.add({"key": both["key"][task], "start": both["start"][task],
                         "core_type": (code[starts] & 1).astype(np.uint8),
                         "total_cycle": np.add.reduceat(b["total_cycle"][keep].astype(np.int64), starts),
                         "pmu": np.add.reduceat(b["pmu"][keep].astype(np.int64), starts, axis=0),
                         "end_ns": both["start_ns"][task]})
        del b
        carry = keyed.latest()
        del carry["row"]
        carry = ending_after(carry, int(edges[w]) if w < len(edges) else None)
    return out
