"""The NPU MEM layer: per device, counter tracks of the Device's and the APP's memory in KB
(`Device/DDR`, `Device/HBM`, `Device/Memory`, `APP/...`) from NPU_MEM, streamed a block of samples
at a time (timeline/npu_mem_assembler.cpp: each sample's DDR, HBM, then Memory counter, in the
stored order; the C++ flavour's process sort index 17, the Python flavour's 20)."""
from __future__ import annotations

import numpy as np

from ...native_impl import float_slot, int_slot, text_slot, text_table
from ..context import ExportContext
from ..summary.memory import KB, event_codes, event_ids, row_blocks
from .facts import Facts
from .writer import Template, TraceWriter, process_meta

SORT_NPU_MEM = {"cpp": 17, "python": 20}
SAMPLE_ROWS = 50_000   # samples (3 events each) rendered at a time: about writer.CHUNK events
COUNTERS = text_table(f"{who}/{what}" for who in ("APP", "Device") for what in ("DDR", "HBM", "Memory"))
COUNTER = Template('{"name":"', "name", '","pid":', "pid", ',"tid":0,"ts":"', "ts", '","ph":"C","args":{"KB":',
                   "kb", "}}")


def write_npu_mem(ctx: ExportContext, out: TraceWriter, facts: Facts) -> None:
    """The NPU MEM process of each device with samples: its metadata, then the counter events."""
    if not ctx.has("NPU_MEM"):
        return
    sort = SORT_NPU_MEM[facts.flavour]
    devices = [int(r[0]) for r in ctx.conn.execute("SELECT DISTINCT deviceId FROM NPU_MEM ORDER BY deviceId")]
    for dev in devices:
        out.add(process_meta(facts.pid(sort, dev), "NPU MEM", f"NPU {dev}", sort))
    ids = event_ids(ctx.conn)
    sql = "SELECT deviceId, type, ddr, hbm, timestampNs FROM NPU_MEM ORDER BY rowid"
    for rows in row_blocks(ctx.conn, sql, 5, SAMPLE_ROWS):
        event = event_codes(rows[:, 1], ids)
        rows, event = rows[event < 2], event[event < 2]
        n = len(rows)
        if not n:
            continue
        ddr, hbm = rows[:, 2], rows[:, 3]
        kb = np.stack([ddr, hbm, ddr + hbm], axis=1).astype(np.float64).ravel() / KB
        names = (event[:, None] * 3 + np.arange(3)[None, :]).ravel()
        pids = np.array([facts.pid(sort, int(d)) for d in np.unique(rows[:, 0]).tolist()], dtype=np.int64)
        pid = pids[np.searchsorted(np.unique(rows[:, 0]), rows[:, 0])]
        out.add_block(COUNTER.rows(3 * n, name=text_slot(names, COUNTERS), pid=int_slot(np.repeat(pid, 3)),
                                   ts=facts.ts(np.repeat(rows[:, 4], 3)), kb=float_slot(kb)), 3 * n)
