"""The Ascend Hardware layer: the device tasks, one thread per stream, named after their op (or task
type), with their arrow ends (and the Python flavour's arrow starts on host task records), then
the step-trace iterations."""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from ...arrays import in_sorted
from ...native_impl import float_slot, int_slot
from . import writer
from .arrows import flow_events
from .facts import SORT_CANN, SORT_HARDWARE, Facts
from .memcpy import MEMCPY_SLOTS, MemcpyArgs
from .steps import STEP_TID_BASE, Iteration, iteration_events
from .tasks import Tasks
from .writer import Template, TraceWriter, dur_us, process_meta, thread_meta


TASK_PARTS = ('{"name":', "name", ',"pid":', "pid", ',"tid":', "stream", ',"ts":"', "ts", '","dur":', "dur",
              ',"ph":"X","args":{"Model Id":', "model", ',"Task Type":', "task_type", ',"Physic Stream Id":',
              "stream", ',"Task Id":', "task", ',"Batch Id":', "batch", ',"Subtask Id":', "ctx",
              ',"connection_id":', "conn")
TASK_EVENT = Template(*TASK_PARTS, '}}')
# the same with a MEMCPY_ASYNC task's args after the others (memcpy.py), empty in other rows
MEMCPY_EVENT = Template(*TASK_PARTS, *[p for name in MEMCPY_SLOTS for p in ("", name)], '}}')


def write_hardware(out: TraceWriter, facts: Facts, tasks: Tasks, started: np.ndarray,
                   steps: Dict[int, List[Iteration]], show_tasks: bool = True, arrows: bool = True,
                   memcpy: Optional[MemcpyArgs] = None) -> List[str]:
    """The Ascend Hardware processes: metadata, the task X events with their arrow ends (and, in
    the Python flavour, the arrow starts on host task records), then the step-trace iterations.
    Returns the step-trace events with their metadata, for step_trace_{ts}.json. `memcpy`: the
    MEMCPY_ASYNC tasks' extra args (None: none)."""
    pairs = tasks.streams if show_tasks else tasks.streams[:0]
    device, stream = pairs >> 32, pairs & 0xFFFFFFFF
    devices = sorted(set(np.unique(device).tolist()) | set(steps))
    meta: List[str] = []
    for dev in devices:
        pid = facts.pid(SORT_HARDWARE, dev)
        meta += process_meta(pid, "Ascend Hardware", f"NPU {dev}", SORT_HARDWARE)
        for s in stream[device == dev].tolist():
            meta += thread_meta(pid, s, f"Stream {s}", s)
    out.add(meta)
    if len(tasks) and show_tasks:
        _write_tasks(out, facts, tasks, started, arrows, memcpy)
    step_texts: List[str] = []
    for dev in sorted(steps):
        pid = facts.pid(SORT_HARDWARE, dev)
        threads: List[str] = []
        for model in sorted({it[0] for it in steps[dev]}):
            threads += thread_meta(pid, STEP_TID_BASE + model, f"Step Trace(Model ID:{model})",
                                   STEP_TID_BASE + model)
        events = iteration_events(facts, pid, steps[dev], dev)
        out.add(threads + events)  # the process metadata is already out
        step_texts += process_meta(pid, "Ascend Hardware", f"NPU {dev}", SORT_HARDWARE) + threads + events
    return step_texts


def _write_tasks(out: TraceWriter, facts: Facts, tasks: Tasks, started: np.ndarray, arrows: bool = True,
                 memcpy: Optional[MemcpyArgs] = None) -> None:
    devices = np.unique(tasks.streams >> 32)
    pids = np.array([facts.pid(SORT_HARDWARE, d) for d in devices.tolist()], dtype=np.int64)
    cann_pid = facts.pid(SORT_CANN)
    for block in tasks.blocks():
        c = block.cols
        pid = pids[np.searchsorted(devices, c["device"])] if len(devices) else np.zeros(0, np.int64)
        ends = block.via_track | (block.via_api & in_sorted(c["conn"], started))
        if not arrows:
            ends = np.zeros(len(block), dtype=bool)
        host_starts = block.via_track & arrows
        ids = block.flow_ids(facts.python_rules)
        for lo in range(0, len(block), writer.CHUNK):
            s = slice(lo, min(lo + writer.CHUNK, len(block)))
            n = s.stop - s.start
            start = c["start"][s]
            template, extra = TASK_EVENT, {}
            if memcpy is not None and block.memcpy[s].any():
                template, extra = MEMCPY_EVENT, memcpy.slots(block.memcpy[s], c["gid"][s], start, c["end"][s])
            out.add_block(template.rows(
                n, name=block.name.take(s), pid=int_slot(pid[s]), stream=int_slot(c["stream"][s]),
                ts=facts.ts(start), dur=float_slot(dur_us(start, c["end"][s])), model=int_slot(c["model"][s]),
                task_type=block.task_type.take(s), task=int_slot(c["task"][s]), batch=int_slot(c["batch"][s]),
                ctx=int_slot(c["ctx"][s]), conn=int_slot(c["conn"][s]), **extra), n)
            e = np.flatnonzero(ends[s])
            if len(e):
                flow_events(out, facts, "f", pid[s][e], c["stream"][s][e], start[e], ids[s][e])
            t = np.flatnonzero(host_starts[s])
            if len(t):
                flow_events(out, facts, "s", np.full(len(t), cann_pid), c["thread"][s][t], c["track_ns"][s][t],
                            ids[s][t])
