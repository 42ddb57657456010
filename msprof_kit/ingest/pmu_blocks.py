"""FFTS PMU records attached to the device tasks they lie in, and the block PMU records summed per
task and core where they are read (the device's worker, ingest/device.py): pmu.StarsPmu then reads
one row per (task, core) instead of every block record (about 4.5 a task on a 910B MIX
workload)."""
from __future__ import annotations

from typing import Callable, List, Optional, Sequence, cast

import numpy as np

from ..arrays import ascending, last_seen
from ..timebase import Clock
from ..parsers import device as device_parsers
from ..parsers.stream import RecordChunks
from ..spill import Flat, Runs
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

    def position(self, key: np.ndarray, t: np.ndarray) -> np.ndarray:
        """For records of keys `key` at times `t`, the place in the tasks' order (by key, then
        start) of the latest task of the same key begun at or before t (of those begun at one
        time, the last), whether or not it still ran at t; -1 when there is none.

        Each record's key found among the tasks by key, then its task by a binary search on
        start within its key's tasks, all records at once (a step for each halving of the most
        tasks a key has)."""
        key = np.asarray(key, dtype=np.int64)
        t = np.asarray(t, dtype=np.int64)
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
        out: np.ndarray = np.where(lo > first, lo - 1, -1)
        return out

    def attach(self, key: np.ndarray, t: np.ndarray) -> np.ndarray:
        """For records of keys `key` at times `t`, the task (its `row`) of the same key whose
        [start, end] holds t: the latest begun at or before t (of those begun at one time, the
        last); -1 when there is none or it ended before t (`position`, then the task's end)."""
        t = np.asarray(t, dtype=np.int64)
        out: np.ndarray = np.full(len(t), -1, dtype=np.int64)
        at = self.position(key, t)
        rec = np.flatnonzero(at >= 0)
        task = self.order[at[rec]]
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


# a group's columns (BlockGroups): the block PMU records of one read chunk with one match key and
# core type, their first and last end_syscnt (tmin, tmax), their first and last end_ns (end_ns, the
# runs' key, and end_ns_max), the sums of their cycles and counters, their count and where their
# stream offsets begin in the offsets spill
GROUP_COLUMNS = ("key", "core_type", "tmin", "tmax", "end_ns", "end_ns_max", "total_cycle", "pmu", "count", "first")
# a block record read again (BlockGroups.records)
RECORD_COLUMNS = ("key", "core_type", "end_syscnt", "end_ns", "total_cycle", "pmu")
GAP_BYTES = 1 << 20   # records read again: a gap of more bytes between two of them starts a new read
SPAN_BYTES = 32 << 20  # ... and so does entering a new span of this many bytes of the stream


def _spans(lo: np.ndarray, hi: np.ndarray, gap: int, span: int) -> np.ndarray:
    """Ranges [lo, hi) sorted by lo cut into reads: the index of each read's first range. A read
    starts where a range begins more than `gap` past the reach of the ranges before it, or in
    another `span` than the range before."""
    if not len(lo):
        return np.zeros(0, dtype=np.int64)
    reach = np.maximum.accumulate(hi)
    new = np.concatenate([[True], (lo[1:] - reach[:-1] > gap) | (lo[1:] // span != lo[:-1] // span)])
    return np.flatnonzero(new)


def _gather(read: Callable[[int, int], np.ndarray], at: np.ndarray, size: int, gap: int, span: int) -> np.ndarray:
    """The items at `at` (any order; positions in units of `size` of what `read(lo, hi)` gives as
    an array of items for [lo, hi)), in the order of `at`: a read for each run of nearby items
    (_spans), so memory is the items wanted and one read."""
    order = np.argsort(at, kind="stable")
    pos = at[order]
    starts = _spans(pos, pos + size, gap, span)
    bounds = np.concatenate([starts, [len(pos)]])
    parts: List[np.ndarray] = []
    for a, b in zip(bounds[:-1], bounds[1:]):  # a read per span of items, not per item
        lo = int(pos[a])
        got = read(lo, int(pos[b - 1]) + size)
        parts.append(got[(pos[a:b] - lo) // size])
        del got
    if not parts:
        return read(0, 0)
    out = np.concatenate(parts)
    del parts
    back = np.empty_like(order)
    back[order] = np.arange(len(order))
    return out[back]


def _ranges(first: np.ndarray, count: np.ndarray) -> np.ndarray:
    """The indices [first, first + count) of each range, range after range."""
    total = int(count.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    base: np.ndarray = np.repeat(first.astype(np.int64) - (np.cumsum(count) - count), count)
    return base + np.arange(total, dtype=np.int64)


class BlockGroups:
    """The FFTS block PMU records of a stream read a chunk at a time (`add`), spilled as groups:
    per chunk, the records of one match key and core type (0 AIC, 1 AIV: the blocks of other types
    count nowhere and are dropped) summed, with their stream offsets in a flat spill (`offsets`, in
    group order) so that a group can be taken apart again (`records`: the records read again from
    `stream`). The blocks of one task's run are read together: a group is about one task's
    blocks (37 records a group on a 910B MIX workload)."""

    def __init__(self, scratch: str, prefix: str, stream: RecordChunks, clock: Clock) -> None:
        self.stream, self.clock = stream, clock
        self.runs = Runs(scratch, f"{prefix}.group", "end_ns")
        self.offsets = Flat(scratch, f"{prefix}.offset", np.dtype(np.int64))
        # groups summed whole into a task, counting nowhere, taken apart, of two windows (taken apart)
        self.whole = self.nowhere = self.apart = self.straddling = 0

    def add(self, blk: Columns) -> None:
        """Group and spill a chunk's block records (ffts_columns' block columns). The records of a
        group mostly come in one run (a task's blocks are read together): summed a run at a time in
        stream order, then the runs of each group, so only the offsets are put in group order."""
        cols = blk
        if (blk["core_type"] > 1).any():
            keep = np.flatnonzero(blk["core_type"] <= 1)
            cols = {k: blk[k][keep] for k in ("stream_id", "task_id", "subtask_id", "ffts_type", "core_type",
                                              "end_syscnt", "total_cycle", "pmu", "offset")}
        n = len(cols["core_type"])
        if not n:
            return
        ctx = np.where(cols["ffts_type"] == device_parsers.FFTS_PLUS, cols["subtask_id"], INVALID_CTX)
        code = match_keys(cols["stream_id"], cols["task_id"], ctx) * 2 + cols["core_type"].astype(np.int64)
        del ctx
        run = np.flatnonzero(np.concatenate([[True], code[1:] != code[:-1]]))  # runs of one group in stream order
        size = np.diff(np.concatenate([run, [n]]))
        by = np.argsort(code[run], kind="stable")  # the runs by group, each group's in stream order
        code = code[run][by]
        start = np.flatnonzero(np.concatenate([[True], code[1:] != code[:-1]]))  # each group's first run (of `by`)
        end: np.ndarray = cols["end_syscnt"].astype(np.int64, copy=False)
        ns = self.clock.to_ns(end)

        def per_group(ufunc: np.ufunc, values: np.ndarray) -> np.ndarray:
            return cast(np.ndarray, ufunc.reduceat(ufunc.reduceat(values, run, axis=0)[by], start, axis=0))
        count = np.add.reduceat(size[by], start)
        self.runs.add({"key": code[start] >> 1, "core_type": (code[start] & 1).astype(np.uint8),
                       "tmin": per_group(np.minimum, end), "tmax": per_group(np.maximum, end),
                       "end_ns": per_group(np.minimum, ns), "end_ns_max": per_group(np.maximum, ns),
                       "total_cycle": per_group(np.add, cols["total_cycle"].astype(np.int64, copy=False)),
                       "pmu": per_group(np.add, cols["pmu"].astype(np.int64, copy=False)),
                       "count": count, "first": self.offsets.rows + np.cumsum(count) - count})
        self.offsets.add(cols["offset"][_ranges(run[by], size[by])])

    def records(self, first: np.ndarray, count: np.ndarray) -> Columns:
        """The records of the groups (`first`, `count`) read again from the stream, in stream
        order (RECORD_COLUMNS): their offsets from the offsets spill, then the records from the
        stream's bytes, a read of nearby records at a time, decoded as they were."""
        at = _gather(self.offsets.read, _ranges(first, count), 1, GAP_BYTES // 8, SPAN_BYTES // 8)
        at.sort()
        size = self.stream.record.size

        def read(lo: int, hi: int) -> np.ndarray:
            return self.stream.read(lo, hi - lo).view(self.stream.record.dtype)
        arr = _gather(read, at, size, GAP_BYTES, SPAN_BYTES)
        blk = device_parsers.ffts_columns(arr, at)[1]
        if len(blk["offset"]) != len(at):
            raise OSError(f"{self.stream.pieces[0].path if self.stream.pieces else 'ffts_profile'}: block PMU records "
                          f"changed while being read")
        ctx = np.where(blk["ffts_type"] == device_parsers.FFTS_PLUS, blk["subtask_id"], INVALID_CTX)
        return {"key": match_keys(blk["stream_id"], blk["task_id"], ctx), "core_type": blk["core_type"],
                "end_syscnt": blk["end_syscnt"], "end_ns": self.clock.to_ns(blk["end_syscnt"]),
                "total_cycle": blk["total_cycle"], "pmu": blk["pmu"]}

    def close(self) -> None:
        """Remove the spills."""
        self.runs.close()
        self.offsets.close()


def _window_of(edges: np.ndarray, ns: np.ndarray) -> np.ndarray:
    """The window (Runs.window's w) of each end_ns."""
    return cast(np.ndarray, np.searchsorted(edges, ns, side="right"))  # (numpy's stubs: a scalar)


def block_sums(tasks: Runs, groups: BlockGroups, clock: Clock, scratch: str, prefix: str) -> Runs:
    """The block PMU records of `groups` attached to the device tasks `tasks` (TASK_COLUMNS and
    start_ns, spilled by start_ns) as pmu.StarsPmu attaches them, and summed per task and core
    type (0 AIC, 1 AIV; the blocks of other types count nowhere): runs of BLOCK_SUM_COLUMNS spilled
    by the task's start_ns. A window of tasks and groups at a time, each key's latest task carried
    to the next.

    A group's records attach as its first and last do when both find the same task (the latest of
    the key begun at or before them): no task of the key begins between them, so each attaches to
    that task if it still ran then. The group sums into it when the task ends at or after the
    last record, counts nowhere when there is no task or it ended before the first. Otherwise
    (a task begins or ends among them), or when its records lie in two windows, the group is taken
    apart: its records read again and attached one by one."""
    out = Runs(scratch, prefix, "end_ns")
    edges = tasks.edges(limits.TASK_ROWS)
    tasks.cut(edges)
    runs = groups.runs
    runs.cut(edges)
    # the groups whose records lie in two windows or more, taken apart up front: their records by end_ns
    apart = Runs(scratch, f"{prefix}.apart", "end_ns")
    try:
        for lo, hi in zip(runs.bounds[:-1], runs.bounds[1:]):  # (a run, one chunk's groups, at a time)
            two = np.flatnonzero(_window_of(edges, runs.read("end_ns", lo, hi))
                                 != _window_of(edges, runs.read("end_ns_max", lo, hi)))
            if len(two):
                groups.straddling += len(two)
                apart.add(groups.records(runs.read("first", lo, hi)[two], runs.read("count", lo, hi)[two]))
        apart.cut(edges)
        _sum_windows(tasks, groups, apart, edges, clock, out)
    finally:
        apart.close()
    return out


def _sum_windows(tasks: Runs, groups: BlockGroups, apart: Runs, edges: np.ndarray, clock: Clock, out: Runs) -> None:
    """block_sums' windows: each window's groups (those of one window) and records of groups taken
    apart summed into `out`."""
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
        codes: List[np.ndarray] = []
        cycles: List[np.ndarray] = []
        pmus: List[np.ndarray] = []

        def attach_records(rec: Optional[Columns]) -> None:
            if rec is None or not len(rec["key"]):
                return
            row = keyed.attach(rec["key"], rec["end_syscnt"])
            keep = np.flatnonzero((row >= 0) & (rec["core_type"] <= 1))
            codes.append(row[keep] * 2 + rec["core_type"][keep].astype(np.int64))
            cycles.append(rec["total_cycle"][keep].astype(np.int64))
            pmus.append(rec["pmu"][keep].astype(np.int64))

        g = groups.runs.window(w)
        if g is not None:
            one = np.flatnonzero(_window_of(edges, g["end_ns_max"]) == w)  # (the others were taken apart)
            g = {k: v[one] for k, v in g.items()}
            at, at_last = keyed.position(g["key"], g["tmin"]), keyed.position(g["key"], g["tmax"])
            found = (at >= 0) & (at == at_last)
            task: np.ndarray = np.zeros(len(at), dtype=np.int64)
            task[found] = keyed.order[at[found]]
            end = np.where(found, both["end"][task] if len(both["end"]) else 0, 0)
            whole = found & (end >= g["tmax"])
            nowhere = ((at < 0) & (at_last < 0)) | (found & (end < g["tmin"]))
            codes.append(both["row"][task[whole]] * 2 + g["core_type"][whole].astype(np.int64))
            cycles.append(g["total_cycle"][whole])
            pmus.append(g["pmu"][whole])
            split = np.flatnonzero(~whole & ~nowhere)
            groups.whole += int(np.count_nonzero(whole))
            groups.nowhere += int(np.count_nonzero(nowhere))
            groups.apart += len(split)
            if len(split):
                attach_records(groups.records(g["first"][split], g["count"][split]))
            del g
        attach_records(apart.window(w))
        if codes:
            code = np.concatenate(codes)
            order = np.argsort(code, kind="stable")
            code = code[order]
            if len(code):
                starts = np.flatnonzero(np.concatenate([[True], code[1:] != code[:-1]]))
                task = code[starts] >> 1
                out.add({"key": both["key"][task], "start": both["start"][task],
                         "core_type": (code[starts] & 1).astype(np.uint8),
                         "total_cycle": np.add.reduceat(np.concatenate(cycles)[order], starts),
                         "pmu": np.add.reduceat(np.concatenate(pmus)[order], starts, axis=0),
                         "end_ns": both["start_ns"][task]})
        del codes, cycles, pmus
        carry = keyed.latest()
        del carry["row"]
        carry = ending_after(carry, int(edges[w]) if w < len(edges) else None)
