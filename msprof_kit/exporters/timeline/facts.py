"""What every timeline layer needs (`Facts`): the flavour's rules, STRING_IDS, the process ids and
the scope, read once from the store."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...native_impl import Slot, fixed_slot
from ...store import string_table
from ..context import ExportContext, Scope
from ..training import TrainingTrace, training_trace
from .writer import isin_text, us_text

HOST_DEVICE = 31          # the device id part of a host process id
HOST_DIR = 64             # KIT_INFO's device id of the host result dir
SORT_CANN, SORT_HARDWARE, SORT_FREQ = 7, 14, 15
SORT_OVERLAP = {"cpp": 31, "python": 20}


@dataclass
class Facts:
    """What every layer needs: the flavour's rules, string ids, process ids, the scope."""

    python_rules: bool          # the reference's Python exporters (non-910B chips, iteration exports)
    python_host: bool           # host data as its Python parser keeps it (non-910B chips)
    strings: np.ndarray         # STRING_IDS: id -> text
    host_pid: int
    device_pids: Dict[int, int] = field(default_factory=dict)
    scope: Scope = field(default_factory=Scope)
    origin: int = 0             # ns subtracted from every time written (0: µs since the epoch)
    training: TrainingTrace = field(default_factory=TrainingTrace)  # FP/BP/all-reduce points per iteration

    def ts(self, ns: np.ndarray) -> Slot:
        """A time slot: ns as µs since the origin, 3 decimals."""
        return fixed_slot(np.asarray(ns, dtype=np.int64) - self.origin, 3)

    def us_text(self, ns: int) -> str:
        return us_text(int(ns) - self.origin)

    def pid(self, sort_index: int, device: int = HOST_DEVICE) -> int:
        real = self.host_pid if device == HOST_DEVICE else self.device_pids.get(device, self.host_pid)
        return (real << 10) | (sort_index << 5) | device

    @property
    def scoped(self) -> bool:
        """An iteration (graph) export."""
        return not self.scope.all_export

    @property
    def flavour(self) -> str:
        return "python" if self.python_rules else "cpp"

    def timeline_window(self, device: int) -> Optional[Tuple[int, int]]:
        """[lo, hi) of a device layer in an iteration export; None in an all-export."""
        return self.scope.timeline_window(device) if self.scoped else None

    def text(self, ids: np.ndarray) -> np.ndarray:
        return self.strings[np.asarray(ids, dtype=np.int64)]

    def ids_of(self, texts: Sequence[str]) -> List[int]:
        return [int(i) for i in np.flatnonzero(isin_text(self.strings, texts))]


def load_facts(ctx: ExportContext) -> Facts:
    """The facts of an export: its flavour's rules, STRING_IDS (id -> text), the host and device pids."""
    strings: np.ndarray = np.zeros(0, dtype=object)
    if ctx.has("STRING_IDS"):
        strings = string_table(ctx.conn, "")
    pids = {dev: int(v["pid"]) for dev, v in ctx.device_info.items() if str(v.get("pid", "")).isdigit()}
    host_pid = pids.pop(HOST_DIR, None)
    if host_pid is None:
        host_pid = _host_pid_from_tables(ctx)
    return Facts(python_rules=ctx.flavour == "python" or not ctx.scope.all_export,
                 python_host=ctx.flavour == "python", strings=strings, host_pid=host_pid, device_pids=pids,
                 scope=ctx.scope, training=training_trace(ctx))


def _host_pid_from_tables(ctx: ExportContext) -> int:
    """The host process id where KIT_INFO lacks it (stores written before it was kept)."""
    for table, sql in (("CANN_API", "SELECT globalTid >> 32 FROM CANN_API LIMIT 1"),
                       ("TASK", "SELECT globalPid FROM TASK LIMIT 1")):
        if ctx.has(table):
            row = ctx.conn.execute(sql).fetchone()
            if row and row[0] is not None:
                return int(row[0])
    return 0
