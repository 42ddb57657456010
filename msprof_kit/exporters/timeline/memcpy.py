"""The args the C++ timeline adds to MEMCPY_ASYNC task events when the collection has memcpy_info
(application/timeline/ascend_hardware_assembler.cpp, GenerateMemcpyAsyncTrace), after the task's
other args: `size(B)` (the task's share of the copy, MEMCPY_INFO.size), `bandwidth(GB/s)` (size /
duration in ns, 0 for a task of no duration) and `operation` (ENUM_MEMCPY_OPERATION's name,
"other" above 7). A MEMCPY_ASYNC task without a MEMCPY_INFO row shows size 0, bandwidth 0 and
"other". The Python flavour, and a collection without memcpy_info, show none of them.

The events are the hardware layer's task template with five more slots (`MEMCPY_SLOTS`), empty in
the rows of other tasks, so the tasks keep their order."""
from __future__ import annotations

import json
from typing import Dict, Optional

import numpy as np

from ...arrays import last_seen
from ...native_impl import Slot, float_slot, int_slot, overlay, text_slot, text_table
from ...schema import ENUM_ROWS
from ..context import ExportContext
from .facts import Facts

LAST_OPERATION = 7
OTHER_CODE = 65535
OPERATIONS = dict(ENUM_ROWS["ENUM_MEMCPY_OPERATION"])
MEMCPY_SLOTS = ("size_key", "size", "bw_key", "bandwidth", "operation")  # in template order
# the texts of the operation slot: none, then each code's (0..7, then other)
_OP_CODES = list(range(LAST_OPERATION + 1)) + [OTHER_CODE]
_OP_TEXTS = text_table([""] + [',"operation":' + json.dumps(OPERATIONS[c]) for c in _OP_CODES])


class MemcpyArgs:
    """MEMCPY_INFO by globalTaskId (the last row of an id wins, as the reference's map keeps it)."""

    def __init__(self, gid: np.ndarray, size: np.ndarray, operation: np.ndarray) -> None:
        keep = last_seen(gid)
        order = np.argsort(gid[keep], kind="stable")
        self.gid = gid[keep][order]
        self.size = size[keep][order]
        self.operation = operation[keep][order]

    @classmethod
    def load(cls, ctx: ExportContext, facts: Facts) -> Optional["MemcpyArgs"]:
        """The args of this export: None in the Python flavour or without MEMCPY_INFO."""
        if facts.python_rules or not ctx.has("MEMCPY_INFO"):
            return None
        rows = ctx.conn.execute("SELECT globalTaskId, size, memcpyOperation FROM MEMCPY_INFO ORDER BY rowid").fetchall()
        arr = np.array(rows, dtype=np.int64).reshape(len(rows), 3)
        return cls(arr[:, 0], arr[:, 1], arr[:, 2])

    def slots(self, memcpy: np.ndarray, gid: np.ndarray, start: np.ndarray, end: np.ndarray) -> Dict[str, Slot]:
        """MEMCPY_SLOTS of some task events: the args where `memcpy`, nothing elsewhere."""
        gid = np.asarray(gid, dtype=np.int64)
        n = len(gid)
        size: np.ndarray = np.zeros(n, dtype=np.int64)
        operation: np.ndarray = np.full(n, OTHER_CODE, dtype=np.int64)
        if len(self.gid):
            pos = np.minimum(np.searchsorted(self.gid, gid), len(self.gid) - 1)
            found = self.gid[pos] == gid
            size[found] = self.size[pos[found]]
            operation[found] = self.operation[pos[found]]
        operation = np.where(operation <= LAST_OPERATION, operation, OTHER_CODE)
        dur = (np.asarray(end, dtype=np.int64) - np.asarray(start, dtype=np.int64)).astype(np.float64)
        bandwidth = np.divide(size.astype(np.float64), dur, out=np.zeros(n), where=dur > 0)
        op_code = np.where(memcpy, np.searchsorted(_OP_CODES, operation) + 1, 0)
        other = ~np.asarray(memcpy, dtype=bool)
        return {"size_key": text_slot(np.where(memcpy, 1, 0), text_table(["", ',"size(B)":'])),
                "size": overlay(int_slot(size), other, ""),
                "bw_key": text_slot(np.where(memcpy, 1, 0), text_table(["", ',"bandwidth(GB/s)":'])),
                "bandwidth": overlay(float_slot(bandwidth), other, ""),
                "operation": text_slot(op_code, _OP_TEXTS)}
