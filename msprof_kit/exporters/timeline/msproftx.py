"""The msproftx layer: the host's msproftx / mstx markers and ranges (KIT_MSTX) as one process named
after the profiled program (info.json `pid_name`, label CPU, sort index 6), a thread per reporting
thread; also written alone as msprof_tx_{ts}.json, as the reference's timeline export does.

Legacy msproftx events carry Category (as text), Payload_type, Payload_value, Message_type and
event_type; mstx events event_type and domain, and start a flow (`MsTx`, ph s) toward the device
side of the range (not read, so the flow has no end). The C++ flavour (csrc/application/timeline/
msprof_tx_assembler.cpp) keeps the events that start at or after the collection start and names a
flow by its connection id (4000000001 + mark id); the Python one (viewer/msproftx_viewer.py) keeps
every event and names a flow by its mark id."""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np
import pandas as pd

from ...native_impl import Slot, float_slot, int_slot
from ..context import ExportContext
from ..summary.msprof_tx import event_type_texts, load_tx
from ..summary.tasks import session_start
from .facts import HOST_DIR, Facts
from .writer import Template, TraceWriter, coded_slot, dur_us, json_text_slot, process_meta, thread_meta

SORT_MSPROFTX = 6
DEFAULT_NAME = "MsprofTx"  # the process name when info.json has no pid_name

_HEAD = ('{"name":', "name", ',"pid":', "pid", ',"tid":', "tid", ',"ts":"', "ts", '","dur":', "dur")
TX_EVENT = Template(*_HEAD, ',"ph":"X","args":{"Category":"', "category", '","Payload_type":', "ptype", ',"Payload_value":',
                    "pvalue", ',"Message_type":', "mtype", ',"event_type":', "etype", "}}")
MSTX_EVENT = Template(*_HEAD, ',"ph":"X","args":{"event_type":', "etype", ',"domain":', "domain", "}}")
FLOW_CPP = Template('{"name":"MsTx_', "id", '","pid":', "pid", ',"tid":', "tid", ',"ph":"s","cat":"MsTx","id":"', "id",
                    '","ts":"', "ts", '"}')
FLOW_PYTHON = Template('{"name":"MsTx_', "id", '","ph":"s","id":"', "id", '","ts":"', "ts", '","cat":"MsTx","pid":',
                       "pid", ',"tid":', "tid", ',"bp":"e"}')


def _texts(values: np.ndarray) -> Slot:
    """A TEXT slot of each value's JSON string literal (one literal per distinct value)."""
    codes, uniq = pd.factorize(np.asarray(values, dtype=object), use_na_sentinel=False)
    return json_text_slot(codes, np.asarray(uniq, dtype=object))


def tx_events(ctx: ExportContext, facts: Facts) -> List[str]:
    """The layer's events (metadata, X events, flow starts) as JSON texts, in the C++ order (legacy
    events, then mstx ones with their flows, then the metadata); empty without msproftx events."""
    tx = load_tx(ctx)
    if tx is None:
        return []
    if not facts.python_rules:
        start = session_start(ctx)
        if start is not None:
            tx = tx[tx["startNs"].to_numpy() >= start]
    if not len(tx):
        return []
    pid = facts.pid(SORT_MSPROFTX)
    tid = tx["globalTid"].to_numpy(np.int64) & 0xFFFFFFFF
    mstx = tx["isMstx"].to_numpy() == 1
    blocks: List[str] = []
    for part, template in ((~mstx, TX_EVENT), (mstx, MSTX_EVENT)):
        rows = tx[part]
        n = len(rows)
        if not n:
            continue
        start_ns, end_ns = rows["startNs"].to_numpy(np.int64), rows["endNs"].to_numpy(np.int64)
        slots: Dict[str, Slot] = {"name": _texts(rows["messageText"].to_numpy()), "pid": int_slot(np.full(n, pid, np.int64)),
                 "tid": int_slot(tid[part]), "ts": facts.ts(start_ns), "dur": float_slot(dur_us(start_ns, end_ns)),
                 "etype": _texts(event_type_texts(rows["eventType"].to_numpy()))}
        if template is TX_EVENT:
            payload = rows["payloadValue"].to_numpy(np.int64)
            slots.update(category=int_slot(rows["category"].to_numpy(np.int64)),
                         ptype=int_slot(rows["payloadType"].to_numpy(np.int64)),
                         pvalue=coded_slot(payload, lambda k: str(int(np.int64(k).view(np.uint64)))),
                         mtype=int_slot(rows["messageType"].to_numpy(np.int64)))
        else:
            slots["domain"] = _texts(rows["domainText"].to_numpy())
        blocks.append(template.rows(n, **slots).decode("utf-8"))
        if template is MSTX_EVENT:
            ids = rows["markId" if facts.python_rules else "connectionId"].to_numpy(np.int64)
            flow = FLOW_PYTHON if facts.python_rules else FLOW_CPP
            blocks.append(flow.rows(n, id=int_slot(ids), pid=int_slot(np.full(n, pid, np.int64)),
                                    tid=int_slot(tid[part]), ts=facts.ts(start_ns)).decode("utf-8"))
    name = ctx.device_info.get(HOST_DIR, {}).get("pid_name", "") or DEFAULT_NAME
    meta = process_meta(pid, name, "CPU", SORT_MSPROFTX)
    for thread in np.unique(tid).tolist():
        meta += thread_meta(pid, int(thread), f"Thread {thread}", int(thread))
    return blocks + meta


def write_msproftx(ctx: ExportContext, out: TraceWriter, facts: Facts, events: Optional[List[str]] = None) -> None:
    """Add the layer to a trace (its events made here unless given)."""
    out.add(tx_events(ctx, facts) if events is None else events)


def write_msprof_tx_file(ctx: ExportContext, events: List[str]) -> None:
    """msprof_tx_{ts}.json: the layer's events alone (nothing without any)."""
    if not events:
        return
    with TraceWriter(ctx.path_for("msprof_tx", "json")) as out:
        out.add(events)
