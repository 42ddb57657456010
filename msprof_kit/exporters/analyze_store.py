"""`msprof-kit analyze --rule communication,communication_matrix`: the communication analysis
(analyze.py) over a collection's store, written to PROF/analyze/<rule>.json as the reference's
`msprof.py analyze` writes them.

The store gives analyze.py its input: COMMUNICATION_TASK_INFO with its strings and enums as text,
TASK's times, the raw group hash of each group name (KIT_HCCL_TASK.groupHash, which the output
keys use) and the collection start (SESSION_TIME_INFO). One device at a time: a collection with
communication on several devices is analysed for the first, with a warning (the reference merges
them all under one rank, a fault not copied).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np
import pandas as pd

from .. import schema, store
from ..errors import BadOption, Diagnostics, NoData
from . import analyze
from .context import ExportContext, open_context

ENUM_COLUMNS = {"rdmaType": "ENUM_HCCL_RDMA_TYPE", "transportType": "ENUM_HCCL_TRANSPORT_TYPE",
                "linkType": "ENUM_HCCL_LINK_TYPE"}
STRING_COLUMNS = ("name", "taskType", "groupName")
MISSING = -(1 << 62)  # a NULL rank as read (ranks are 32-bit)


def check_rules(text: str) -> List[str]:
    """The rules of a --rule value (comma-separated), or BadOption naming the unknown ones."""
    rules = [r.strip() for r in text.split(",") if r.strip()]
    unknown = [r for r in rules if r not in analyze.RULES]
    if not rules or unknown:
        raise BadOption(f"--rule {text!r}: expected communication and/or communication_matrix, "
                        f"comma-separated{f' (unknown: {unknown})' if unknown else ''}")
    return list(dict.fromkeys(rules))


@dataclass
class StoredHccl:
    """The communication rules' input as a store holds it, for every device: COMMUNICATION_TASK_INFO
    with its strings and enums as text, each row's device, the raw group hash of each group name,
    TASK's times and the collection start."""
    info: pd.DataFrame
    devices: np.ndarray
    group_ids: Dict[str, object]
    task: Dict[str, np.ndarray]
    start_ns: Optional[int]

    def device_list(self) -> List[int]:
        """The devices with communication, in the order their first task is stored."""
        return [int(d) for d in pd.unique(self.devices).tolist()]

    def events(self, device: int) -> pd.DataFrame:
        """analyze.hccl_events of one device (NoData when nothing is left of it)."""
        mine = self.task["deviceId"] == device
        tasks = pd.DataFrame({k: self.task[k][mine] for k in ("globalTaskId", "startNs", "endNs")})
        return analyze.hccl_events(self.info[self.devices == device], tasks, group_ids=self.group_ids,
                                   start_ns=self.start_ns)


def stored_hccl(ctx: ExportContext) -> Optional[StoredHccl]:
    """The store's communication tasks decoded for the rules, or None when it holds none. Only the
    columns the rules use are read, as integers a block of rows at a time; texts and enum names are
    looked up once per distinct value."""
    if not ctx.has("COMMUNICATION_TASK_INFO") or not ctx.has("KIT_HCCL_TASK"):
        return None
    nullable = ("srcRank", "dstRank")
    exprs = [c for c in analyze.TASK_INFO_COLUMNS if c not in nullable and c != "size"]
    exprs += ["COALESCE(size, 0)", *(f"COALESCE({c}, {MISSING})" for c in nullable)]
    cols = store.int_columns(ctx.conn, "COMMUNICATION_TASK_INFO", exprs)
    extra = store.int_columns(ctx.conn, "KIT_HCCL_TASK", ["deviceId"])
    n = len(cols["rowid"])
    if not n or len(extra["rowid"]) != n:
        return None
    info: Dict[str, np.ndarray] = {c: cols[c] for c in analyze.TASK_INFO_COLUMNS if c in exprs}
    info["size"] = cols["COALESCE(size, 0)"]
    for column in nullable:
        values = cols[f"COALESCE({column}, {MISSING})"]
        missing = values == MISSING
        info[column] = np.where(missing, np.nan, values) if missing.any() else values
    for column in STRING_COLUMNS:
        info[column] = store.texts_of(ctx.conn, info[column])
    for column, table in ENUM_COLUMNS.items():
        names = dict(schema.ENUM_ROWS[table])
        uniq, inverse = np.unique(info[column], return_inverse=True)
        info[column] = np.array([names.get(int(v), str(v)) for v in uniq.tolist()], dtype=object)[inverse.reshape(-1)]
    frame = pd.DataFrame(info, copy=False)
    # each group name's raw hash: its last task's (names and hashes are few: one pair per group)
    group_code, group_names = pd.factorize(frame["groupName"].astype(str).to_numpy(object))
    last: np.ndarray = np.zeros(len(group_names), dtype=np.int64)
    np.maximum.at(last, group_code, np.arange(n, dtype=np.int64))
    group_ids: Dict[str, object] = {}
    for name, at in zip(group_names.tolist(), last.tolist()):
        row = ctx.conn.execute("SELECT groupHash FROM KIT_HCCL_TASK WHERE rowid = ?",
                               (int(extra["rowid"][at]),)).fetchone()
        group_ids[name] = str(row[0] if row else None)
    start = ctx.conn.execute("SELECT startTimeNs FROM SESSION_TIME_INFO").fetchone() \
        if ctx.has("SESSION_TIME_INFO") else None
    return StoredHccl(frame, extra["deviceId"], group_ids,
                      ctx.ints("TASK", ["globalTaskId", "startNs", "endNs", "deviceId"]),
                      int(start[0]) if start and start[0] else None)


def analyze_collection(collection_path: str, rules: Sequence[str], diag: Diagnostics) -> List[str]:
    """Write the `rules`' JSON files of one imported collection; returns their paths."""
    ctx = open_context(collection_path)
    try:
        stored = stored_hccl(ctx)
        if stored is None:
            raise NoData("the collection holds no communication (HCCL) tasks to analyze", path=collection_path)
        first, *others = stored.device_list()
        if others:
            diag.warn(f"{collection_path}: communication on devices {[first] + others}; the analysis covers "
                      f"device {first} only")
        results = analyze.analyze(stored.events(first), rules)
        return analyze.write_analyze(ctx.output_root or collection_path, results)
    finally:
        ctx.conn.close()

