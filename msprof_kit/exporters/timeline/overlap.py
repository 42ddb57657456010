"""The Overlap Analysis layer: when each device computed and when it was idle (OVERLAP_ANALYSIS, or
recomputed from an iteration export's tasks)."""
from __future__ import annotations

import json
from typing import Iterator, List, Optional, Tuple

import numpy as np

from ...arrays import ascending
from ...intervals import interval_gaps, subtract_intervals, union_intervals
from ...native_impl import float_slot, int_slot, text_slot, text_table
from ..context import ExportContext
from . import apis, writer
from .facts import SORT_OVERLAP, Facts
from .tasks import Tasks, in_timeline
from .writer import Template, TraceWriter, dur_us, process_meta, thread_meta

OVERLAP_THREADS = ("Computing", "Communication", "Communication(Not Overlapped)", "Free")  # tid = OVERLAP type


OVERLAP_EVENT = Template('{"name":', "name", ',"pid":', "pid", ',"tid":', "tid", ',"ts":"', "ts", '","dur":', "dur",
                         ',"ph":"X","args":{}}')


def graph_overlap(tasks: Tasks, facts: Facts, comm_spans: Optional[np.ndarray] = None) -> np.ndarray:
    """An iteration export's overlap rows (device, start, end, type), recomputed from the exported
    tasks and communication ops as the reference does: Computing = the merged spans of the model's
    ops, Communication = the merged spans of the ops' master tasks (`comm_spans`: device, start,
    end), Communication(Not Overlapped) = Communication minus Computing, Free = the gaps between
    them from the first task's start to the last task's end; then cut to the timeline window."""
    device, start, end, is_op = tasks.overlap_input.T
    if comm_spans is None:
        comm_spans = np.zeros((0, 3), np.int64)
    parts = []
    for dev in np.unique(np.concatenate([device, comm_spans[:, 0]])).tolist():
        mine = device == dev
        comp = mine & (is_op != 0)
        cs, ce = union_intervals(start[comp], end[comp])
        theirs = comm_spans[comm_spans[:, 0] == dev]
        ms, me = union_intervals(theirs[:, 1], theirs[:, 2])
        span_s, span_e = np.concatenate([start[mine], ms]), np.concatenate([end[mine], me])
        lo, hi = int(span_s.min()), int(span_e.max())
        ns, ne = subtract_intervals(ms, me, cs, ce)
        us, ue = union_intervals(np.concatenate([cs, ms]), np.concatenate([ce, me]))
        fs, fe = interval_gaps(int(lo), int(hi), us, ue)
        rows = np.column_stack([np.full(len(cs) + len(ms) + len(ns) + len(fs), dev),
                                np.concatenate([cs, ms, ns, fs]), np.concatenate([ce, me, ne, fe]),
                                np.repeat([0, 1, 2, 3], [len(cs), len(ms), len(ns), len(fs)])]).astype(np.int64)
        rows = rows[in_timeline(rows[:, 1], rows[:, 2], facts.timeline_window(dev))]
        parts.append(rows[np.lexsort((rows[:, 3], rows[:, 1]))])
    return np.concatenate(parts) if parts else np.zeros((0, 4), np.int64)


OVERLAP_COLUMNS = ("deviceId", "startNs", "endNs", "type")


def _overlap_chunks(ctx: ExportContext) -> Tuple[List[int], Iterator[np.ndarray]]:
    """The devices of OVERLAP_ANALYSIS and its rows by id, CHUNK at a time as (device, start, end,
    type) rows: read API_BLOCK rows at a time from a store that keeps them in id order, else whole
    and sorted."""
    mirror = ctx.stored("OVERLAP_ANALYSIS") if ctx.has("KIT_COLUMNS") else None
    if mirror is not None and all(c in mirror for c in ("id",) + OVERLAP_COLUMNS) and ascending(mirror.read("id")):
        devices = np.unique(mirror.read("deviceId")).tolist()

        def by_blocks() -> Iterator[np.ndarray]:
            for _, _, cols in ctx.blocks("OVERLAP_ANALYSIS", OVERLAP_COLUMNS, apis.API_BLOCK):
                table = np.column_stack([cols[c] for c in OVERLAP_COLUMNS])
                yield from (table[lo:lo + writer.CHUNK] for lo in range(0, len(table), writer.CHUNK))
        return devices, by_blocks()
    ov = ctx.ints("OVERLAP_ANALYSIS", ("id",) + OVERLAP_COLUMNS)
    order = np.argsort(ov["id"], kind="stable")
    table = np.column_stack([ov[c][order] for c in OVERLAP_COLUMNS])
    chunk = writer.CHUNK
    return np.unique(table[:, 0]).tolist(), (table[lo:lo + chunk] for lo in range(0, len(table), chunk))


def write_overlap(ctx: ExportContext, out: TraceWriter, facts: Facts, graph_rows: Optional[np.ndarray]) -> None:
    """One Overlap Analysis process per device: the OVERLAP_ANALYSIS intervals (or an iteration
    export's `graph_rows`) as X events on the thread of their type."""
    if graph_rows is not None:
        devices = np.unique(graph_rows[:, 0]).tolist()
        chunks: Iterator[np.ndarray] = iter([graph_rows] if len(graph_rows) else [])
    elif ctx.has("OVERLAP_ANALYSIS"):
        devices, chunks = _overlap_chunks(ctx)
    else:
        return
    sort_index = SORT_OVERLAP[facts.flavour]
    pid_of = {dev: facts.pid(sort_index, dev) for dev in devices}
    meta: List[str] = []
    for dev, pid in pid_of.items():
        meta += process_meta(pid, "Overlap Analysis", f"NPU {dev}", sort_index)
        for tid, name in enumerate(OVERLAP_THREADS):
            meta += thread_meta(pid, tid, name, tid)
    out.add(meta)
    names = text_table(json.dumps(n) for n in OVERLAP_THREADS)
    ids = np.array(sorted(pid_of), dtype=np.int64)
    pids = np.array([pid_of[d] for d in ids.tolist()], dtype=np.int64)
    for rows in chunks:
        rows = rows[(rows[:, 3] >= 0) & (rows[:, 3] < len(OVERLAP_THREADS))]
        n = len(rows)
        if not n:
            continue
        kind = rows[:, 3]
        out.add_block(OVERLAP_EVENT.rows(
            n, name=text_slot(kind, names), pid=int_slot(pids[np.searchsorted(ids, rows[:, 0])]), tid=int_slot(kind),
            ts=facts.ts(rows[:, 1]), dur=float_slot(dur_us(rows[:, 1], rows[:, 2]))), n)
