"""HostToDevice flow arrows: which APIs start one (`Arrows`), the flow ids of a connection, and
the flow start/end events."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from ...arrays import distinct, in_sorted
from ...native_impl import int_slot
from .apis import LEVEL_NODE, ApiBlocks
from .facts import Facts
from .tasks import Tasks
from .writer import Template, TraceWriter


FLOW_EVENTS = {ph: Template('{"name":"HostToDevice', "id", '","pid":', "pid", ',"tid":', "tid",
                            f',"ph":"{ph}","cat":"HostToDevice","id":"', "id", '","ts":"', "ts", tail)
               for ph, tail in (("s", '"}'), ("f", '","bp":"e"}'))}


def flow_events(out: TraceWriter, facts: Facts, ph: str, pid: np.ndarray, tid: np.ndarray, ns: np.ndarray,
                ids: np.ndarray) -> None:
    """HostToDevice flow starts (`s`) or ends (`f`, bound to the slice that encloses them)."""
    n = len(ns)
    out.add_block(FLOW_EVENTS[ph].rows(n, id=int_slot(ids), pid=int_slot(pid), tid=int_slot(tid), ts=facts.ts(ns)), n)


@dataclass
class Arrows:
    """Which APIs start arrows: node-level APIs (and the calls behind memory copies and ACL
    events) whose connection id a shown task has."""
    task_conns: np.ndarray   # ascending
    special: np.ndarray      # ascending

    @classmethod
    def of(cls, tasks: Tasks, op_conns: Optional[np.ndarray] = None) -> "Arrows":
        """The arrows of the shown tasks, and (`op_conns`) of the node launches of communication ops."""
        conns = tasks.api_conns if op_conns is None or not len(op_conns) else \
            distinct(np.concatenate([tasks.api_conns, op_conns])).astype(np.int64)
        return cls(conns, distinct(np.concatenate([tasks.memcpy_conns, tasks.acl_event_conns])).astype(np.int64))

    def starts(self, conn: np.ndarray, level: np.ndarray) -> np.ndarray:
        return in_sorted(conn, self.task_conns) & ((level == LEVEL_NODE) | in_sorted(conn, self.special))

    def started(self, blocks: ApiBlocks) -> np.ndarray:
        """The connection ids (ascending, distinct) of the APIs in scope that start an arrow."""
        parts = [c["connectionId"][self.starts(c["connectionId"], c["type"])]
                 for _, _, c in blocks.each(("connectionId", "type"))]
        return distinct(np.concatenate(parts)) if parts else np.zeros(0, np.int64)


def flows_of(conn: np.ndarray, flow: np.ndarray, flow_conn: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Each connection id joined with its flow ids (`flow` grouped by connection id, `flow_conn`):
    (position in `conn`, flow id) pairs, in `conn` order, a connection's flows in `flow` order."""
    # search only the flows in the range of these connection ids (a chunk's: the search stays in cache)
    lo = int(np.searchsorted(flow_conn, conn.min(), "left"))
    near = flow_conn[lo:int(np.searchsorted(flow_conn, conn.max(), "right"))]
    first = np.searchsorted(near, conn, "left")
    count = np.searchsorted(near, conn, "right") - first
    first += lo
    total = int(count.sum())
    within = np.arange(total) - np.repeat(np.cumsum(count) - count, count)
    return np.repeat(np.arange(len(conn)), count), flow[np.repeat(first, count) + within]
