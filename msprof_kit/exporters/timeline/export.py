"""`export timeline`'s entry point: msprof_{ts}.json (the CANN layer here, the device layers in a
forked child's part file) and step_trace_{ts}.json."""
from __future__ import annotations

import os
from typing import Dict, List, Optional

import numpy as np

from ... import memory
from ...forked import Forked
from ...progress import Phase, label
from ..context import ExportContext
from . import apis
from .apis import ApiBlocks
from .arrows import Arrows
from .cann import write_cann
from .communication import Communication, write_communication
from .facts import Facts, load_facts
from .freq import write_freq
from .hardware import write_hardware
from .msproftx import tx_events, write_msprof_tx_file, write_msproftx
from .memcpy import MemcpyArgs
from .memory import write_npu_mem
from .overlap import graph_overlap, write_overlap
from .steps import Iteration, graph_step_texts, timeline_steps
from .tasks import Tasks
from .writer import KEEP_FREE, TraceWriter

FORK_KEEP_FREE = 64 << 20  # free heap kept when the device layers' process is forked


def write_timeline(ctx: ExportContext) -> None:
    """Write mindstudio_profiler_output/msprof_{ts}.json and, when the collection has step-trace
    iterations, step_trace_{ts}.json. Nothing is written for a store with nothing to show.

    Two processes share the work: a forked child writes the device layers (Ascend Hardware, AI
    Core Freq, Overlap Analysis) to a part file while this one writes the CANN layer into the
    trace; the part is then appended."""
    facts = load_facts(ctx)
    tasks = Tasks(ctx, facts)
    steps = timeline_steps(ctx)
    comm = Communication(ctx, facts)
    if not len(tasks) and not steps and not len(comm) and \
            not any(ctx.has(t) for t in ("CANN_API", "OVERLAP_ANALYSIS", "AICORE_FREQ", "KIT_MSTX", "NPU_MEM")):
        return
    if ctx.ts_origin == "start":
        facts.origin = ts_origin_ns(ctx, steps)
    # -reports layers: cann, ascend (tasks), communication, step_trace, freq, overlap_analyse; arrows
    # need both ends (the C++ flavour's also end at communication ops)
    cann, ascend = ctx.layer_on("cann"), ctx.layer_on("ascend")
    to_ops = ctx.layer_on("communication") and not facts.python_rules
    blocks = None
    if cann and ctx.has("CANN_API"):
        # an iteration export: the APIs that start in the API window or span its start; of the
        # APIs before the collection start, those the flavour keeps (the Python rule in an
        # iteration export, which the reference's Python path writes on every chip)
        blocks = ApiBlocks(ctx, facts.scope.api_window() if facts.scoped else None,
                           ctx.api_rule(facts.flavour))
    arrows = Arrows.of(tasks, comm.op_conns() if to_ops else None) if cann and (ascend or to_ops) else None
    if facts.python_rules and (blocks is None or not blocks.threads()):
        # the Python path draws host-to-device arrows only when the timeline shows some API
        # (viewer/association/host_connect_device.py:306-307)
        arrows = None
    started = arrows.started(blocks) if arrows is not None and blocks is not None else np.zeros(0, np.int64)
    path = ctx.path_for("msprof", "json")
    part_path = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.devices")
    memory.give_back(FORK_KEEP_FREE)
    who = label(ctx.collection_path)
    with ctx.progress.phase(f"{who}: timeline device layers") if ctx.jobs < 2 else Phase():
        with_arrows = arrows is not None or (cann and not facts.python_rules)
        device_part = Forked(lambda: _write_device_layers(ctx, part_path, facts, tasks, comm, started, steps,
                                                          arrows=with_arrows),
                             "timeline", inline=ctx.jobs < 2)
    try:
        tx = tx_events(ctx, facts) if ctx.layer_on("msproftx") else []
        with TraceWriter(path) as out:
            if cann:
                write_cann(ctx, out, facts, tasks, blocks, arrows)
            with ctx.progress.phase(f"{who}: timeline device layers") if ctx.jobs >= 2 else Phase():
                step_texts = device_part.result()
                out.append_part(part_path)
            write_msproftx(ctx, out, facts, tx)
    finally:
        device_part.cancel()
        if os.path.exists(part_path):
            os.remove(part_path)
    write_msprof_tx_file(ctx, tx)
    if facts.scoped:
        step_texts = graph_step_texts(ctx, facts)
    if step_texts:
        with TraceWriter(ctx.path_for("step_trace", "json")) as st:
            st.add(step_texts)


def ts_origin_ns(ctx: ExportContext, steps: Optional[Dict[int, List[Iteration]]] = None) -> int:
    """The origin of `ts_origin="start"` times, ns since the epoch: the collection's start
    (SESSION_TIME_INFO, from start_info), or its earliest time where something was recorded
    before it (Perfetto drops events of negative time)."""
    found = []
    if ctx.has("SESSION_TIME_INFO"):
        row = ctx.conn.execute("SELECT MIN(startTimeNs) FROM SESSION_TIME_INFO").fetchone()
        if row and row[0] is not None:
            found.append(int(row[0]))
    for table, column in (("TASK", "startNs"), ("CANN_API", "startNs"), ("OVERLAP_ANALYSIS", "startNs")):
        if ctx.has(table):
            found += [int(c[column].min()) for _, _, c in ctx.blocks(table, (column,), apis.API_BLOCK)
                      if len(c[column])]
    if ctx.has("AICORE_FREQ"):
        row = ctx.conn.execute("SELECT MIN(timestampNs) FROM AICORE_FREQ").fetchone()
        if row and row[0] is not None:
            found.append(int(row[0]))
    kit = ctx.stored("KIT_TASK") if ctx.has("KIT_COLUMNS") else None
    if kit is not None and "trackNs" in kit and len(kit):  # host task records (Python-flavour arrow starts)
        track = kit.read("trackNs")
        track = track[track >= 0]
        if len(track):
            found.append(int(track.min()))
    found += [start for its in (steps or {}).values() for _, _, start, _ in its]
    return min(found) if found else 0


def _write_device_layers(ctx: ExportContext, path: str, facts: Facts, tasks: Tasks, comm: Communication,
                         started: np.ndarray, steps: Dict[int, List[Iteration]], arrows: bool) -> List[str]:
    """The Ascend Hardware (tasks and iterations), Communication, AI Core Freq and Overlap Analysis
    layers, as a part file (events without the enclosing brackets). Returns the step-trace events.
    The Communication layer comes after Ascend Hardware: an arrow of an HCCL node launch ends at
    its op (the last end of its id) rather than at the op's memory-copy tasks."""
    ascend = ctx.layer_on("ascend")
    overlap_rows = graph_overlap(tasks, facts, comm.master_spans) if facts.scoped else None
    ctx = ctx.reopened()  # a forked child never uses its parent's sqlite connection
    tasks = tasks.on(ctx)
    comm = comm.on(ctx)
    try:
        with TraceWriter(path, part=True) as out:
            step_texts: List[str] = []
            if ascend or ctx.layer_on("step_trace"):
                step_texts = write_hardware(out, facts, tasks, started,
                                            steps if ctx.layer_on("step_trace") else {},
                                            show_tasks=ascend, arrows=arrows and ascend,
                                            memcpy=MemcpyArgs.load(ctx, facts))
            memory.give_back(KEEP_FREE)  # the tasks' free heap, before the other layers' blocks
            if ctx.layer_on("communication"):
                write_communication(out, facts, comm, arrows=arrows)
            if ctx.layer_on("freq"):
                write_freq(ctx, out, facts)
            if ctx.layer_on("overlap_analyse"):
                write_overlap(ctx, out, facts, overlap_rows)
            if ctx.layer_on("npu_mem"):
                write_npu_mem(ctx, out, facts)
    finally:
        ctx.conn.close()
    return step_texts
