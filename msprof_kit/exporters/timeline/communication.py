"""The Communication layer: per device one process with, for each communication group, a thread
of its ops (`Group <name> Communication`) followed by a thread per plane of its tasks (`Plane k`);
the ops end the HostToDevice arrows of their node launch. Read from COMMUNICATION_TASK_INFO
(joined to TASK by globalTaskId) and COMMUNICATION_OP, a block of tasks at a time."""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from ... import store
from ...arrays import SortedKeys
from ...native_impl import Slot, float_slot, int_slot, text_slot, text_table
from ...schema import ENUM_ROWS
from ..context import ExportContext, RowReader
from ..summary.communication import renumbered
from . import writer
from .arrows import flow_events
from .facts import Facts
from .tasks import in_timeline
from .writer import Template, TraceWriter, coded_slot, dur_us, json_text_slot, process_meta, thread_meta

SORT_COMMUNICATION = {"cpp": 16, "python": 17}
INVALID_PLANES = (-1, 0xFFFFFFFF)   # tasks of no plane (level 0 collections) get no event
RDMA_SEND_PAYLOAD = 1               # ENUM_HCCL_RDMA_TYPE
NO_GROUP = "N/A"
PAYLOAD_EXPR = f"rdmaType IS {RDMA_SEND_PAYLOAD}"  # 1 for an RDMA payload task, else 0 (NULL included)
COMM_BLOCK = writer.CHUNK           # HCCL tasks turned into events at a time

INFO_COLUMNS = ("globalTaskId", "taskType", "planeId", "groupName", "notifyId", "rdmaType", "srcRank", "dstRank",
                "transportType", "size", "dataType", "linkType", "opId", "isMaster")
TASK_COLUMNS = ("startNs", "endNs", "deviceId", "streamId", "taskId", "contextId", "modelId")
OP_COLUMNS = ("opName", "startNs", "endNs", "connectionId", "groupName", "opId", "relay", "retry", "dataType",
              "algType", "count", "deviceId", "rankSize")

TASK_EVENT = Template('{"name":', "name", ',"pid":', "pid", ',"tid":', "tid", ',"ts":"', "ts", '","dur":', "dur",
                      ',"ph":"X","args":{"notify_id":"', "notify", '","duration estimated(us)":', "estimated",
                      ',"stream id":', "stream", ',"task id":', "task", ',"context id":', "ctx",
                      ',"task type":', "name", ',"src rank":', "src", ',"dst rank":', "dst",
                      ',"transport type":', "transport", ',"size(Byte)":', "size", ',"data type":', "data_type",
                      ',"link type":', "link", ',"bandwidth(GB/s)":', "bandwidth", ',"model id":', "model", '}}')
OP_ARGS = ("rank_size", ',"connection_id":', "conn", ',"model id":', "model",
           ',"data_type":', "data_type", ',"alg_type":', "alg", ',"count":', "count")
OP_EVENTS = {
    "cpp": Template('{"name":', "name", ',"pid":', "pid", ',"tid":', "tid", ',"ts":"', "ts", '","dur":', "dur",
                    ',"ph":"X","args":{"rank_size":', *OP_ARGS, ',"relay":', "relay", ',"retry":', "retry", '}}'),
    "python": Template('{"name":', "name", ',"pid":', "pid", ',"tid":', "tid", ',"ts":"', "ts", '","dur":', "dur",
                       ',"ph":"X","args":{"rank_size":', *OP_ARGS, '}}')}
YES_NO = text_table(['"no"', '"yes"'])


def enum_slot(codes: np.ndarray, table: str) -> Slot:
    """A TEXT slot of an ENUM_HCCL_* table's names (an unknown value as an empty text)."""
    rows = ENUM_ROWS[table]
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    order = np.argsort(ids)
    ids = ids[order]
    codes = np.asarray(codes, dtype=np.int64)
    pos = np.minimum(np.searchsorted(ids, codes), len(ids) - 1)
    hit = ids[pos] == codes
    names = [json.dumps(rows[i][1]) for i in order.tolist()] + ['""']
    return text_slot(np.where(hit, pos, len(ids)).astype(np.int32), text_table(names))


@dataclass
class Lanes:
    """The threads of the Communication processes: each (device, group)'s first tid (its ops'
    thread; plane k's tasks are on first + k + 1), groups in the order their first task started."""
    keys: np.ndarray     # device << 32 | group string id, ascending
    first: np.ndarray    # the group thread's tid, by key
    meta: List[str]

    def tid(self, device: np.ndarray, group: np.ndarray) -> np.ndarray:
        """The group thread of each (device, group); -1 for a group without tasks there."""
        key = (np.asarray(device, np.int64) << 32) | np.asarray(group, np.int64)
        if not len(self.keys):
            return np.full(len(key), -1, np.int64)
        pos = np.minimum(np.searchsorted(self.keys, key), len(self.keys) - 1)
        return np.where(self.keys[pos] == key, self.first[pos], -1)


class InfoColumns:
    """Integer columns of COMMUNICATION_TASK_INFO, COMM_BLOCK rows at a time: from a column-wise
    mirror where the store keeps one, else from sqlite by rowid (never all columns at once)."""

    def __init__(self, ctx: ExportContext) -> None:
        self.ctx = ctx
        self.present = ctx.has("COMMUNICATION_TASK_INFO")
        mirror = ctx.stored("COMMUNICATION_TASK_INFO") if self.present and ctx.has("KIT_COLUMNS") else None
        self.mirror: Optional[RowReader] = None
        if mirror is not None and all(c in mirror for c in INFO_COLUMNS):
            self.mirror = RowReader(len(mirror), mirror=mirror)
        self.n = len(self.mirror) if self.mirror is not None else int(ctx.conn.execute(
            "SELECT COUNT(*) FROM COMMUNICATION_TASK_INFO").fetchone()[0]) if self.present else 0

    def __len__(self) -> int:
        return self.n

    def on(self, ctx: ExportContext) -> "InfoColumns":
        """The same columns read through another context's connection (a forked child's)."""
        other = copy.copy(self)
        other.ctx = ctx
        other.mirror = self.mirror.on(ctx) if self.mirror is not None else None
        return other

    def blocks(self, names: Sequence[str]) -> Iterator[Tuple[int, int, Dict[str, np.ndarray]]]:
        """(first row, end row, these columns as int64) a block at a time."""
        if self.mirror is not None:
            for lo in range(0, self.n, COMM_BLOCK):
                hi = min(self.n, lo + COMM_BLOCK)
                yield lo, hi, {c: np.arange(lo + 1, hi + 1) if c == "rowid" else
                               self.mirror.span(c, lo, hi).astype(np.int64) for c in names}
            return
        names = [c for c in names if c != "rowid"]
        last, lo = -1 << 62, 0
        sql = f"SELECT rowid, {', '.join(names)} FROM COMMUNICATION_TASK_INFO WHERE rowid > ? ORDER BY rowid LIMIT ?"
        while lo < self.n:
            table = store.fetch_ints(self.ctx.conn.execute(sql, (last, COMM_BLOCK)), len(names) + 1)
            if not len(table):
                return
            last = int(table[-1, 0])
            block = {c: table[:, j + 1] for j, c in enumerate(names)}
            block["rowid"] = table[:, 0]
            yield lo, lo + len(table), block
            lo += len(table)

    def whole(self, names: Sequence[str]) -> Dict[str, np.ndarray]:
        """These columns of every row, as int64."""
        parts = [block for _, _, block in self.blocks(names)]
        return {c: np.concatenate([p[c] for p in parts]) if parts else np.zeros(0, np.int64) for c in names}


class Communication:
    """The HCCL tasks and ops the timeline shows (in an iteration export, the ops of the model's
    iterations and their tasks), read from the store."""

    def __init__(self, ctx: ExportContext, facts: Facts) -> None:
        self.facts = facts
        self.info = InfoColumns(ctx)
        n = len(self.info)
        whole = self.info.whole(("rowid", "globalTaskId", "planeId", "groupName", "opId", "isMaster"))
        self.task = ctx.reader("TASK", TASK_COLUMNS)
        self.task_rows = SortedKeys(ctx.columns("TASK", ("globalTaskId",))["globalTaskId"]).find(
            whole["globalTaskId"]) if n else np.zeros(0, np.int64)
        self.payload, self.estimated = _task_floats(ctx, whole["rowid"])
        self.ops = _read_ops(ctx)
        start = self._task_column("startNs", slice(0, n))
        device = self._task_column("deviceId", slice(0, n))
        op_id = whole["opId"]
        self.ops["modelId"] = _op_models(self.ops["opId"].to_numpy(np.int64), op_id,
                                         self._task_column("modelId", slice(0, n)))
        # which tasks and ops are shown
        shown = self.task_rows >= 0
        if facts.scoped:
            self.ops = self._scoped_ops(self.ops)
            shown &= np.isin(op_id, self.ops["opId"].to_numpy(np.int64))
        self.shown = shown
        plane = whole["planeId"]
        self.lanes = self._lanes(device[shown], whole["groupName"][shown],
                                 np.where(np.isin(plane, INVALID_PLANES), 0, plane)[shown], start[shown])
        # tasks of no plane have no event (their group still has a thread)
        self.shown &= ~np.isin(plane, INVALID_PLANES)
        self.master_spans: np.ndarray = np.zeros((0, 3), np.int64)  # (an iteration export's overlap)
        if facts.scoped:
            master = self.shown & (whole["isMaster"] == 1)
            self.master_spans = _op_spans(op_id[master], start[master],
                                          self._task_column("endNs", slice(0, n))[master], device[master])

    def __len__(self) -> int:
        return int(self.shown.sum()) + len(self.ops)

    def on(self, ctx: ExportContext) -> "Communication":
        """The same tasks read through another context's connection (a forked child's)."""
        other = copy.copy(self)
        other.info = self.info.on(ctx)
        other.task = self.task.on(ctx)
        return other

    def _task_column(self, name: str, rows: slice) -> np.ndarray:
        """A TASK column of COMMUNICATION_TASK_INFO rows `rows` (0 where the task has no TASK row)."""
        at = self.task_rows[rows]
        out: np.ndarray = np.zeros(len(at), np.int64)
        found = at >= 0
        if found.any():
            out[found] = self.task.read(name, at[found])
        return out

    def _scoped_ops(self, ops: pd.DataFrame) -> pd.DataFrame:
        """An iteration export's ops: the model's ops inside its iterations (and the device's
        timeline window), numbered again per group in the order they start (the reference
        recomputes the names over the exported ops: `<raw>_<group>_<k>_<n>`)."""
        scope = self.facts.scope
        keep: np.ndarray = np.zeros(len(ops), dtype=bool)
        device, start, end = (ops[c].to_numpy(np.int64) for c in ("deviceId", "startNs", "endNs"))
        for dev, (lo, hi) in scope.windows.items():
            m = device == dev
            keep[m] = (start[m] >= lo) & (end[m] <= hi) & in_timeline(start[m], end[m], scope.timeline_window(dev))
        keep &= ops["modelId"].to_numpy(np.int64) == scope.model_id
        ops = ops[keep].sort_values("startNs", kind="stable").copy()
        names: np.ndarray = self.facts.text(ops["opName"].to_numpy(np.int64)).astype(str)
        ops["name"] = renumbered(names, ops["deviceId"].to_numpy(), ops["groupName"].to_numpy()).tolist()
        return ops

    def _lanes(self, device: np.ndarray, group: np.ndarray, plane: np.ndarray, start: np.ndarray) -> Lanes:
        """Thread ids and metadata: by device, the groups in the order of their first task, each a
        thread then one per plane at group tid + plane + 1; the tids go on across devices."""
        facts = self.facts
        if not len(device):
            return Lanes(np.zeros(0, np.int64), np.zeros(0, np.int64), [])
        frame = pd.DataFrame({"device": device, "group": group, "plane": plane, "start": start})
        first = frame.groupby(["device", "group"], sort=True)["start"].min().reset_index()
        first = first.sort_values(["device", "start", "group"], kind="stable")
        planes = frame.groupby(["device", "group"])["plane"].unique()
        sort_index = SORT_COMMUNICATION[facts.flavour]
        meta: List[str] = []
        keys, tids = [], []
        tid = 0
        for dev, rows in first.groupby("device", sort=True):  # (devices and groups are few)
            pid = facts.pid(sort_index, int(dev))
            meta += process_meta(pid, "Communication", f"NPU {int(dev)}", sort_index)
            for grp in rows["group"].tolist():
                name = str(facts.text(np.array([grp]))[0])
                meta += thread_meta(pid, tid, f"Group {name} Communication" if name != NO_GROUP else "Communication",
                                    tid)
                mine = sorted(int(p) for p in planes[(dev, grp)])
                for p in mine:
                    meta += thread_meta(pid, tid + p + 1, f"Plane {p}", tid + p + 1)
                keys.append((int(dev) << 32) | int(grp))
                tids.append(tid)
                tid += mine[-1] + 2
        order = np.argsort(np.array(keys, dtype=np.int64))
        return Lanes(np.array(keys, dtype=np.int64)[order], np.array(tids, dtype=np.int64)[order], meta)

    def blocks(self) -> Iterator[Tuple[np.ndarray, Dict[str, np.ndarray]]]:
        """(rows, columns) of the shown tasks, COMM_BLOCK rows of COMMUNICATION_TASK_INFO at a time."""
        for lo, hi, block in self.info.blocks(INFO_COLUMNS):
            rows = np.flatnonzero(self.shown[lo:hi])
            if not len(rows):
                continue
            cols = {c: v[rows] for c, v in block.items()}
            part = slice(lo, hi)
            cols.update({c: self._task_column(c, part)[rows] for c in TASK_COLUMNS})
            yield rows + lo, cols

    def op_conns(self) -> np.ndarray:
        """The connection ids of the shown ops (their node launches start an arrow), ascending."""
        return np.unique(self.ops["connectionId"].to_numpy(np.int64)) if len(self.ops) else np.zeros(0, np.int64)


def _task_floats(ctx: ExportContext, rowid: np.ndarray) -> Tuple[Tuple[np.ndarray, np.ndarray], Optional[np.ndarray]]:
    """((rows, GB/s) of the RDMA payload tasks, whose bandwidth is the ingest's, over their whole
    transfer), and the estimated duration (µs) of each COMMUNICATION_TASK_INFO row (`rowid`: its
    sqlite rowids, ascending) from KIT_HCCL_TASK, one row per task in the same order (None where
    the store lacks it)."""
    n = len(rowid)
    estimated = None
    payload: Tuple[np.ndarray, np.ndarray] = (np.zeros(0, np.int64), np.zeros(0, np.float64))
    if not ctx.has("KIT_HCCL_TASK"):
        return payload, estimated
    kit = store.int_columns(ctx.conn, "KIT_HCCL_TASK", (PAYLOAD_EXPR,))
    if len(kit["rowid"]) != n:
        return payload, estimated
    estimated = store.real_values(ctx.conn, "KIT_HCCL_TASK", "durationEstimated")
    # KIT_HCCL_TASK keeps the GB/s as computed (COMMUNICATION_TASK_INFO's bytes/s, scaled back, can
    # be off in the last digit); its rows are COMMUNICATION_TASK_INFO's (`rowid`, all of them), in order
    found = np.flatnonzero(kit[PAYLOAD_EXPR] == 1)
    if len(found):
        payload = (found.astype(np.int64), store.real_values(ctx.conn, "KIT_HCCL_TASK", "bandwidth",
                                                             f"rdmaType = {RDMA_SEND_PAYLOAD}"))
    return payload, estimated


def _read_ops(ctx: ExportContext) -> pd.DataFrame:
    if not ctx.has("COMMUNICATION_OP"):
        return pd.DataFrame({c: np.zeros(0, np.int64) for c in OP_COLUMNS})
    return ctx.frame(f"SELECT {', '.join(OP_COLUMNS)} FROM COMMUNICATION_OP ORDER BY rowid")


def _op_models(ops: np.ndarray, task_op: np.ndarray, task_model: np.ndarray) -> np.ndarray:
    """The model id of each op: its first task's (4294967295 for an op without tasks)."""
    out: np.ndarray = np.full(len(ops), 0xFFFFFFFF, np.int64)
    if not len(task_op) or not len(ops):
        return out
    uniq, first = np.unique(task_op, return_index=True)
    pos = np.minimum(np.searchsorted(uniq, ops), len(uniq) - 1)
    hit = uniq[pos] == ops
    out[hit] = task_model[first[pos[hit]]]
    return out


def _op_spans(op: np.ndarray, start: np.ndarray, end: np.ndarray, device: np.ndarray) -> np.ndarray:
    """(device, first start, last end) of each op's tasks."""
    if not len(op):
        return np.zeros((0, 3), np.int64)
    frame = pd.DataFrame({"op": op, "device": device, "start": start, "end": end})
    spans = frame.groupby("op").agg(device=("device", "first"), start=("start", "min"), end=("end", "max"))
    return spans[["device", "start", "end"]].to_numpy(np.int64)


def _pids(facts: Facts, sort_index: int, device: np.ndarray) -> np.ndarray:
    """The process id of each row's device (looked up once per distinct device)."""
    devices, which = np.unique(device, return_inverse=True)
    return np.array([facts.pid(sort_index, int(d)) for d in devices.tolist()], np.int64)[which.reshape(-1)]


def write_communication(out: TraceWriter, facts: Facts, comm: Communication, arrows: bool = True) -> None:
    """The Communication processes: metadata, a block of task X events at a time, then the op X
    events with (`arrows`) the ends of their node launches' arrows."""
    if not comm.lanes.meta:
        return
    out.add(comm.lanes.meta)
    sort_index = SORT_COMMUNICATION[facts.flavour]
    for rows, c in comm.blocks():
        _write_tasks(out, facts, comm, rows, c, sort_index)
    _write_ops(out, facts, comm, sort_index, arrows)


def _write_tasks(out: TraceWriter, facts: Facts, comm: Communication, rows: np.ndarray, c: Dict[str, np.ndarray],
                 sort_index: int) -> None:
    group_tid = comm.lanes.tid(c["deviceId"], c["groupName"])
    keep = group_tid >= 0
    if not keep.all():
        rows, group_tid = rows[keep], group_tid[keep]
        c = {k: v[keep] for k, v in c.items()}
    n = len(rows)
    if not n:
        return
    tid = group_tid + c["planeId"] + 1
    pid = _pids(facts, sort_index, c["deviceId"])
    start, end = c["startNs"], c["endNs"]
    duration = end - start
    size = c["size"]
    # bandwidth (GB/s): size / duration, an RDMA payload's over its whole transfer (as stored); the
    # Python flavour divides the sizes and times in GB and s
    if facts.python_rules:
        own = np.where(np.abs(duration) > 0, (size * 1e-9) / np.where(duration == 0, 1, duration * 1e-9), 0.0)
    else:
        own = np.where(duration > 0, size / np.where(duration > 0, duration, 1), 0.0)
    bandwidth = own
    at, value = comm.payload
    if len(at):
        pos = np.minimum(np.searchsorted(at, rows), len(at) - 1)
        hit = at[pos] == rows
        bandwidth = np.where(hit, value[pos], own)
    estimated = comm.estimated[rows] if comm.estimated is not None else np.zeros(n)
    for lo in range(0, n, writer.CHUNK):
        s = slice(lo, min(n, lo + writer.CHUNK))
        k = s.stop - s.start
        out.add_block(TASK_EVENT.rows(
            k, name=json_text_slot(c["taskType"][s], facts.strings),
            pid=int_slot(pid[s]), tid=int_slot(tid[s]), ts=facts.ts(start[s]),
            dur=float_slot(dur_us(start[s], end[s])),
            notify=coded_slot(c["notifyId"][s], lambda v: str(v & 0xFFFFFFFFFFFFFFFF)),
            estimated=_estimated_slot(estimated[s], facts.python_rules), stream=int_slot(c["streamId"][s]),
            task=int_slot(c["taskId"][s]), ctx=int_slot(c["contextId"][s]), src=int_slot(c["srcRank"][s]),
            dst=int_slot(c["dstRank"][s]), transport=enum_slot(c["transportType"][s], "ENUM_HCCL_TRANSPORT_TYPE"),
            size=int_slot(size[s]), data_type=enum_slot(c["dataType"][s], "ENUM_HCCL_DATA_TYPE"),
            link=enum_slot(c["linkType"][s], "ENUM_HCCL_LINK_TYPE"), bandwidth=float_slot(bandwidth[s]),
            model=int_slot(c["modelId"][s])), k)


def _estimated_slot(values: np.ndarray, python_rules: bool) -> Slot:
    """The estimated durations: floats; the Python flavour reads them back from a NUMERIC column,
    so a whole number prints as an integer."""
    if not python_rules:
        return float_slot(values)
    uniq, codes = np.unique(values, return_inverse=True)
    texts = [str(int(v)) if float(v).is_integer() else repr(float(v)) for v in uniq.tolist()]
    return text_slot(codes.astype(np.int32), text_table(texts))


def _write_ops(out: TraceWriter, facts: Facts, comm: Communication, sort_index: int, arrows: bool) -> None:
    """The op X events on their group's thread, each with the end of its node launch's arrow (C++:
    id connection id << 32; Python: (connection id << 32) - 1, its context id being -1)."""
    ops = comm.ops
    if not len(ops):
        return
    device = ops["deviceId"].to_numpy(np.int64)
    tid = comm.lanes.tid(device, ops["groupName"].to_numpy(np.int64))
    keep = tid >= 0
    ops, device, tid = ops[keep], device[keep], tid[keep]
    n = len(ops)
    if not n:
        return
    pid = _pids(facts, sort_index, device)
    start, end = ops["startNs"].to_numpy(np.int64), ops["endNs"].to_numpy(np.int64)
    conn = ops["connectionId"].to_numpy(np.int64)
    if "name" in ops:
        names = ops["name"].tolist()
        name = text_slot(np.arange(n, dtype=np.int32), text_table(json.dumps(t, ensure_ascii=False) for t in names))
    else:
        name = json_text_slot(ops["opName"].to_numpy(np.int64), facts.strings)
    slots = dict(name=name, pid=int_slot(pid), tid=int_slot(tid), ts=facts.ts(start),
                 dur=float_slot(dur_us(start, end)), rank_size=int_slot(ops["rankSize"].to_numpy(np.int64)), conn=int_slot(conn),
                 model=int_slot(ops["modelId"].to_numpy(np.int64)),
                 data_type=enum_slot(ops["dataType"].to_numpy(np.int64), "ENUM_HCCL_DATA_TYPE"),
                 alg=json_text_slot(ops["algType"].to_numpy(np.int64), facts.strings),
                 count=int_slot(ops["count"].to_numpy(np.int64)),
                 relay=text_slot((ops["relay"].to_numpy(np.int64) == 1).astype(np.int32), YES_NO),
                 retry=text_slot((ops["retry"].to_numpy(np.int64) == 1).astype(np.int32), YES_NO))
    out.add_block(OP_EVENTS[facts.flavour].rows(n, **slots), n)
    if not arrows:
        return
    ids = (conn << 32) - 1 if facts.python_rules else conn << 32
    flow_events(out, facts, "f", pid, tid, start, ids)
