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

from typing import Dict, List, Sequence

import pandas as pd

from .. import schema
from ..errors import BadOption, Diagnostics, NoData
from . import analyze
from .context import open_context

ENUM_COLUMNS = {"rdmaType": "ENUM_HCCL_RDMA_TYPE", "transportType": "ENUM_HCCL_TRANSPORT_TYPE",
                "linkType": "ENUM_HCCL_LINK_TYPE"}
STRING_COLUMNS = ("name", "taskType", "groupName")


def check_rules(text: str) -> List[str]:
    """The rules of a --rule value (comma-separated), or BadOption naming the unknown ones."""
    rules = [r.strip() for r in text.split(",") if r.strip()]
    unknown = [r for r in rules if r not in analyze.RULES]
    if not rules or unknown:
        raise BadOption(f"--rule {text!r}: expected communication and/or communication_matrix, "
                        f"comma-separated{f' (unknown: {unknown})' if unknown else ''}")
    return list(dict.fromkeys(rules))


def analyze_collection(collection_path: str, rules: Sequence[str], diag: Diagnostics) -> List[str]:
    """Write the `rules`' JSON files of one imported collection; returns their paths."""
    ctx = open_context(collection_path)
    try:
        if not ctx.has("COMMUNICATION_TASK_INFO") or not ctx.has("KIT_HCCL_TASK"):
            raise NoData("the collection holds no communication (HCCL) tasks to analyze", path=collection_path)
        info = ctx.frame("SELECT * FROM COMMUNICATION_TASK_INFO ORDER BY rowid")
        extra = ctx.frame("SELECT deviceId, groupHash FROM KIT_HCCL_TASK ORDER BY rowid")
        if info.empty or len(extra) != len(info):
            raise NoData("the collection holds no communication (HCCL) tasks to analyze", path=collection_path)
        ids = sorted({int(v) for c in STRING_COLUMNS for v in info[c].unique()})
        texts: Dict[int, str] = {}
        for lo in range(0, len(ids), 500):
            chunk = ids[lo:lo + 500]
            texts.update(ctx.conn.execute(f"SELECT id, value FROM STRING_IDS WHERE id IN "
                                          f"({','.join('?' * len(chunk))})", chunk).fetchall())
        for column in STRING_COLUMNS:
            info[column] = info[column].map(texts)
        for column, table in ENUM_COLUMNS.items():
            names = dict(schema.ENUM_ROWS[table])
            info[column] = info[column].map({v: names.get(int(v), str(v)) for v in info[column].unique().tolist()})
        # each group name's raw hash: its last task's (names and hashes are few: one pair per group)
        pairs = pd.DataFrame({"name": info["groupName"].astype(str).to_numpy(),
                              "raw": extra["groupHash"].to_numpy()}).drop_duplicates("name", keep="last")
        group_ids: Dict[str, object] = {name: str(raw) for name, raw in
                                        zip(pairs["name"].tolist(), pairs["raw"].tolist())}
        devices = extra["deviceId"].to_numpy()
        first = int(devices[0])
        if (devices != first).any():
            others = sorted({int(d) for d in devices} - {first})
            diag.warn(f"{collection_path}: communication on devices {[first] + others}; the analysis covers "
                      f"device {first} only")
        info = info[devices == first]
        task = ctx.ints("TASK", ["globalTaskId", "startNs", "endNs", "deviceId"])
        mine = task["deviceId"] == first
        tasks = pd.DataFrame({k: task[k][mine] for k in ("globalTaskId", "startNs", "endNs")})
        start = ctx.conn.execute("SELECT startTimeNs FROM SESSION_TIME_INFO").fetchone()
        start_ns = int(start[0]) if start and start[0] else None
        events = analyze.hccl_events(info, tasks, group_ids=group_ids, start_ns=start_ns)
        results = analyze.analyze(events, rules)
        return analyze.write_analyze(ctx.output_root or collection_path, results)
    finally:
        ctx.conn.close()

