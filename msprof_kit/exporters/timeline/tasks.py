"""The device tasks the timeline shows (`Tasks`), TASK_BLOCK at a time, with their event texts and
arrow roles, and what the layers need of all of them (streams, threads, connection ids, flows)."""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple

import numpy as np
import pandas as pd

from ...arrays import SortedKeys, distinct, first_seen, in_marked_groups, isin
from ...native_impl import Slot
from ..context import ExportContext, RowReader, Scope
from .apis import ACL_EVENT_APIS, LEVEL_ACL
from .facts import Facts
from .writer import CHUNK, json_text_slot

INVALID_CTX = 4294967295
NO_MODEL = 4294967295     # model id of eager (single-operator) tasks
MEMCPY_ASYNC = "MEMCPY_ASYNC"
DEVICE_NAMED = ("FFTS_PLUS", "UNKNOWN")  # host task types for which the device's task type name is shown


TASK_COLUMNS = ("startNs", "endNs", "deviceId", "streamId", "taskId", "contextId", "modelId", "connectionId",
                "globalTaskId", "taskType")
TASK_COLS = ("start", "end", "device", "stream", "task", "ctx", "model", "conn")
TASK_BLOCK = 2 * CHUNK   # shown tasks turned into events at a time (a whole number of chunks)
TASK_CACHE = 10 * CHUNK  # up to this many shown tasks, the blocks made for the summary pass are kept


@dataclass
class TaskBlock:
    """Some of the device tasks shown (one X event each), with their texts and arrow roles."""

    cols: Dict[str, np.ndarray]   # as stored (narrow integers): start, end, device, stream, task, ctx, batch,
    #                               model, conn, thread, track_ns, gid (globalTaskId)
    name: Slot                    # event names (codes into JSON literals)
    task_type: Slot               # args "Task Type" (codes into JSON literals)
    is_op: np.ndarray             # shown as an op (computing, for an iteration export's overlap)
    via_track: np.ndarray         # the arrow starts at the host task record (Python flavour)
    via_api: np.ndarray           # the arrow starts at the CANN API with the task's connection id
    memcpy: np.ndarray            # MEMCPY_ASYNC tasks

    def __len__(self) -> int:
        return len(self.is_op)

    def col(self, name: str) -> np.ndarray:
        return self.cols[name].astype(np.int64, copy=False)

    def flow_ids(self, python_rules: bool) -> np.ndarray:
        """C++: connection id << 32; Python: (connection id << 32) + context id."""
        conn = self.col("conn") << 32
        return conn + (self.col("ctx") & 0xFFFFFFFF) if python_rules else conn


@dataclass
class TaskTexts:
    """Task texts as codes: STRING_IDS ids below len(strings), KIT_TASK's device task type names
    after them, and -1 for none (an empty text)."""
    labels: np.ndarray   # texts of the codes, then "" (code -1)

    def isin(self, codes: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        return np.isin(self.labels, texts)[codes]

    def slot(self, codes: np.ndarray) -> Slot:
        """A TEXT slot of each code's text as a JSON string literal."""
        return json_text_slot(np.where(codes >= 0, codes, len(self.labels) - 1), self.labels)


class TaskSource:
    """TASK with KIT_TASK's columns and COMPUTE_TASK_INFO's op names, read by row range from the
    store (whole for a store without column mirrors)."""

    def __init__(self, ctx: ExportContext, facts: Facts) -> None:
        self.task = ctx.reader("TASK", TASK_COLUMNS)
        n = len(self.task)
        kit = ctx.stored("KIT_TASK")
        self.kit = kit if len(kit) == n and n and "deviceTaskType" in kit and "batchId" in kit else None
        self.width = len(facts.strings)
        dev_labels = self.kit.labels("deviceTaskType") if self.kit is not None else None
        self.texts = TaskTexts(np.concatenate([facts.strings, dev_labels if dev_labels is not None else [],
                                               [""]]).astype(object))
        self.op_keys: Optional[SortedKeys] = None
        self.ops: Optional[RowReader] = None
        if ctx.has("COMPUTE_TASK_INFO") and n:
            self.op_keys = SortedKeys(ctx.columns("COMPUTE_TASK_INFO", ("globalTaskId",))["globalTaskId"])
            self.ops = ctx.reader("COMPUTE_TASK_INFO", ("name", "taskType"))

    def __len__(self) -> int:
        return len(self.task)

    def on(self, ctx: ExportContext) -> "TaskSource":
        """The same source read through another context's connection (a forked child's)."""
        other = copy.copy(self)
        other.task = self.task.on(ctx)
        other.kit = self.kit.on(ctx.conn) if self.kit is not None else None
        other.ops = self.ops.on(ctx) if self.ops is not None else None
        return other

    def kit_span(self, name: str, lo: int, hi: int, default: int) -> np.ndarray:
        if self.kit is None or name not in self.kit:
            return np.full(hi - lo, default, dtype=np.int64)
        return self.kit.read(name, lo, hi)

    def dev_type(self, lo: int, hi: int) -> np.ndarray:
        """Device task type codes of rows lo:hi (the host's type where KIT_TASK is missing)."""
        if self.kit is None:
            return self.task.span("taskType", lo, hi).astype(np.int64)
        return self.kit.read("deviceTaskType", lo, hi).astype(np.int64) + self.width

    def read(self, lo: int, hi: int, idx: np.ndarray) -> Tuple[Dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
        """Rows lo + idx: (columns as stored, globalTaskId, host task type code, device task type code)."""
        cols = {name: self.task.span(column, lo, hi)[idx] for name, column in zip(TASK_COLS, TASK_COLUMNS)}
        cols["batch"] = self.kit_span("batchId", lo, hi, 0)[idx]
        cols["thread"] = self.kit_span("threadId", lo, hi, -1)[idx]
        cols["track_ns"] = self.kit_span("trackNs", lo, hi, -1)[idx]
        return (cols, self.task.span("globalTaskId", lo, hi)[idx], self.task.span("taskType", lo, hi)[idx].astype(np.int64),
                self.dev_type(lo, hi)[idx])

    def op_info(self, gid: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(op name, GE task type, found) of each task, from COMPUTE_TASK_INFO by globalTaskId:
        STRING_IDS ids, -1 where the task has no row."""
        name: np.ndarray = np.full(len(gid), -1, dtype=np.int64)
        ge_type: np.ndarray = np.full(len(gid), -1, dtype=np.int64)
        if self.op_keys is None or self.ops is None or not len(gid):
            return name, ge_type, name >= 0
        pos = self.op_keys.find(gid)
        found = pos >= 0
        name[found] = self.ops.read("name", pos[found])
        ge_type[found] = self.ops.read("taskType", pos[found])
        return name, ge_type, found


class Tasks:
    """The device tasks the timeline shows, TASK_BLOCK at a time (`blocks`), and what the layers
    need of all of them: UNKNOWN device tasks and tasks shown through their FFTS+ subtasks are left
    out; in an iteration export, only the tasks of the iterations' time, those of other models as
    device-only tasks (named by their device type, model 4294967295)."""

    def __init__(self, ctx: ExportContext, facts: Facts) -> None:
        self.facts = facts
        self.source = TaskSource(ctx, facts)
        self.acl_event_conns = _acl_event_conns(ctx, facts)
        self.shown = self._shown()
        self.count = int(self.shown.sum())
        # the TASK row where each block of shown tasks starts (and the end)
        firsts = np.flatnonzero(self.shown)[::TASK_BLOCK]
        self.bounds = np.append(firsts, len(self.source)).tolist() if self.count else [0]
        self._kept: Optional[List[TaskBlock]] = None
        # what the layers need of every shown task
        threads: Set[int] = set()
        streams: List[np.ndarray] = []
        conns: List[np.ndarray] = []
        memcpy: List[np.ndarray] = []
        flows: List[np.ndarray] = []
        overlap: List[np.ndarray] = []
        kept: List[TaskBlock] = []
        for block in self.blocks():
            if self.count <= TASK_CACHE:
                kept.append(block)
            c = block.cols
            streams.append(distinct((block.col("device") << 32) | block.col("stream")))
            threads |= set(np.unique(c["thread"][block.via_track]).tolist())
            conns.append(distinct(c["conn"][block.via_api]).astype(np.int64))
            memcpy.append(distinct(c["conn"][block.memcpy & (c["conn"] >= 0)]).astype(np.int64))
            if facts.python_rules:  # (in the C++ rules the flows are the connection ids')
                flows.append(pd.unique(block.flow_ids(True)[block.via_api]))
            if facts.scoped:
                overlap.append(np.column_stack([block.col("device"), block.col("start"), block.col("end"),
                                                block.is_op]))
        self._kept = kept if self.count <= TASK_CACHE else None
        self.streams = distinct(np.concatenate(streams)) if streams else np.zeros(0, np.int64)  # device << 32 | stream
        self.threads = threads
        self.api_conns = distinct(np.concatenate(conns)) if conns else np.zeros(0, np.int64)
        self.memcpy_conns = distinct(np.concatenate(memcpy)) if memcpy else np.zeros(0, np.int64)
        # by connection id, each connection's flows in the order they were first seen
        self._flows = first_seen_by_conn(np.concatenate(flows)) if flows else None
        self.overlap_input = np.concatenate(overlap) if overlap else np.zeros((0, 4), np.int64)

    def __len__(self) -> int:
        return self.count

    @property
    def flows(self) -> np.ndarray:
        """The flow ids of the arrows that start on an API, by connection id (see TaskBlock.flow_ids)."""
        return self._flows if self._flows is not None else self.api_conns << 32

    def on(self, ctx: ExportContext) -> "Tasks":
        """These tasks read through another context's connection (a forked child's)."""
        other = copy.copy(self)
        other.source = self.source.on(ctx)
        return other

    def _shown(self) -> np.ndarray:
        """Which TASK rows are shown."""
        src, facts = self.source, self.facts
        n = len(src)
        if not n:
            return np.zeros(0, dtype=bool)
        keep = ~src.texts.isin(src.dev_type(0, n), ("UNKNOWN",))
        cols = {name: src.task.read(column) for name, column in zip(TASK_COLS[2:6], TASK_COLUMNS[2:6])}
        cols["batch"] = src.kit_span("batchId", 0, n, 0)
        keep &= ~_hidden_parents(cols)
        if facts.scoped:
            keep &= _in_scope(cols["device"], src.task.read("startNs"), src.task.read("endNs"), facts.scope)
        return keep

    def blocks(self) -> Iterator[TaskBlock]:
        """The shown tasks, TASK_BLOCK at a time (the last block may be shorter)."""
        if self._kept is not None:
            yield from self._kept
            return
        for lo, hi in zip(self.bounds, self.bounds[1:]):
            yield self._block(lo, hi)

    def _block(self, lo: int, hi: int) -> TaskBlock:
        """The shown tasks among TASK rows lo:hi."""
        facts, texts = self.facts, self.source.texts
        cols, gid, host_type, dev_type = self.source.read(lo, hi, np.flatnonzero(self.shown[lo:hi]))
        op_name, ge_type, has_op = self.source.op_info(gid.astype(np.int64))
        device_only: np.ndarray = np.zeros(len(gid), dtype=bool)
        cols["gid"] = gid
        del gid
        if facts.scoped:
            device_only = cols["model"] != facts.scope.model_id
            cols["model"] = np.where(device_only, NO_MODEL, cols["model"].astype(np.int64))
        is_op = has_op & ~device_only
        memcpy = texts.isin(host_type, (MEMCPY_ASYNC,))
        plain = np.where(texts.isin(host_type, DEVICE_NAMED) | device_only, dev_type, host_type)  # a task no op
        generic = plain if facts.python_rules else np.where(memcpy, dev_type, plain)
        del dev_type, host_type
        name = texts.slot(np.where(is_op, op_name, plain))
        task_type = texts.slot(np.where(is_op & ~texts.isin(ge_type, ("N/A",)), ge_type, generic))
        del op_name, ge_type, plain, generic

        # arrow ends: ops, memory copies and ACL event tasks with a host call
        conn = cols["conn"]
        ends = (has_op | memcpy | isin(conn, self.acl_event_conns)) & (conn >= 0)
        via_track: np.ndarray = np.zeros(len(conn), dtype=bool)
        if facts.python_rules:
            via_track = ends & has_op & (cols["track_ns"] >= 0) & (cols["thread"] >= 0)
        return TaskBlock(cols=cols, name=name, task_type=task_type, is_op=is_op, via_track=via_track,
                         via_api=ends & ~via_track, memcpy=memcpy)


def first_seen_by_conn(flows: np.ndarray) -> np.ndarray:
    """The distinct flow ids (connection id << 32, plus a context id in the Python rules), by
    connection id, those of one connection in the order they were first seen (found by sorting:
    a hash table of ten million ids would take several times their size)."""
    flows = np.asarray(flows, dtype=np.int64)
    values = flows[first_seen(flows)]
    return values[np.argsort(values >> 32, kind="stable")]


def _hidden_parents(cols: Dict[str, np.ndarray]) -> np.ndarray:
    """Tasks shown through their FFTS+ subtasks: rows without a context id whose (device, stream,
    task, batch) also has rows with one."""
    sub = cols["ctx"] != INVALID_CTX
    if not sub.any():
        return np.zeros(len(sub), dtype=bool)
    return ~sub & in_marked_groups([cols["device"], cols["stream"], cols["task"], cols["batch"]], sub)


def in_timeline(start: np.ndarray, end: np.ndarray, window: Optional[Tuple[int, int]]) -> np.ndarray:
    """Events kept by a device layer's timeline window [lo, hi): those that start inside it or span
    its start (all of them without a window)."""
    if window is None:
        return np.ones(len(start), dtype=bool)
    lo, hi = window
    return ((start >= lo) & (start < hi)) | ((start < lo) & (end > lo))


def _in_scope(device: np.ndarray, start: np.ndarray, end: np.ndarray, scope: Scope) -> np.ndarray:
    """An iteration export's device tasks: start and end inside the device's iterations
    (`scope.windows`, closed), and kept by the device's timeline window."""
    out: np.ndarray = np.zeros(len(device), dtype=bool)
    for dev, (lo, hi) in scope.windows.items():
        m = device == dev
        out[m] = (start[m] >= lo) & (end[m] <= hi) & in_timeline(start[m], end[m], scope.timeline_window(dev))
    return out


def _acl_event_conns(ctx: ExportContext, facts: Facts) -> np.ndarray:
    """Connection ids of the ACL event record / wait calls."""
    ids = facts.ids_of(ACL_EVENT_APIS)
    if not ctx.has("CANN_API") or not ids:
        return np.zeros(0, np.int64)
    api = ctx.ints("CANN_API", ("type", "name", "connectionId"))
    return distinct(api["connectionId"][(api["type"] == LEVEL_ACL) & np.isin(api["name"], ids)])
