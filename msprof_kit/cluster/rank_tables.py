"""Phase 1 of `msprof-kit cluster`, one rank: import the rank's PROF when its store is not current,
then reduce it to the few numbers and dicts the cluster join needs (RankTables: small, picklable,
no per-task arrays).

What msprof-analyze's text mode reads of a rank, and where it comes from here:

* the step breakdown (analysis/msprof_step_trace_time_adapter.py): the sums of the "dur" of the
  timeline's Overlap Analysis events Computing / Communication / Communication(Not Overlapped) /
  Free, and of the events named ``hcom_receive*`` (Bubble). Here: OVERLAP_ANALYSIS rows and the
  COMMUNICATION_OP ops named hcom_receive*, each duration in µs as the timeline prints it
  ((end - start) / 1000, a negative span as 0), summed one after the other in the timeline's order
  (as Python 3.11's sum() does: plain left-to-right additions);
* the rank's analyze/communication.json and communication_matrix.json: here computed in memory by
  the per-rank analyze (exporters.analyze_store.stored_hccl, exporters.analyze), then passed once
  through JSON as msprof-analyze reads them, and reshaped by its msprof adapters
  (communication_group/msprof_communication_time_adapter.py, msprof_communication_matrix_adapter.py):
  ops split into p2p (names starting hcom_send, hcom_receive, hcom_batchsendrecv, any case) and
  collective, "Total ..." dropped; the matrix ops folded per (op type, group, link) into
  ``<type>-top1/middle/bottom1/bottom2/bottom3/total@<group>``. Folding here, per rank, keeps the
  tables small: a rank's matrix holds at most 6 entries per (type, group, link).
"""
from __future__ import annotations

import json
import sqlite3
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple

import numpy as np

from .. import importer
from ..errors import Diagnostics, MsprofKitError, NoData, UnreadableFile
from ..exporters import analyze
from ..exporters.analyze_store import stored_hccl
from ..exporters.context import ExportContext, open_context
from .ranks import RankInfo, read_rank

JsonDict = Dict[str, Any]

OVERLAP_NAMES = ("Computing", "Communication", "Communication(Not Overlapped)", "Free")  # OVERLAP_ANALYSIS.type
RECEIVE_PREFIX = "hcom_receive"
P2P_PREFIXES = ("hcom_send", "hcom_receive", "hcom_batchsendrecv")
P2P, COLLECTIVE = "p2p", "collective"
TOTAL_PREFIX = "total"
# msprof-analyze's op type pattern (msprof_communication_matrix_adapter.py), alternatives in its order
HCCL_TYPE = re.compile(r"send|reduce|invalid|broadcast|allreduce|receive|allgather|reducescatter|scatter|alltoall"
                       r"|alltoallv|alltoallvc|batchsendrecv")
STATS = ("top1", "middle", "bottom1", "bottom2", "bottom3", "total")


@dataclass
class RankTables:
    """What the cluster join needs of one rank. `overlap`: µs summed per Overlap Analysis kind
    (OVERLAP_NAMES); `bubble`: µs of the hcom_receive ops; `communication`: {"p2p": {op key: its
    communication.json entry}, "collective": {...}}; `matrix`: {"p2p": {"<type>-<stat>@<group>":
    {"src-dst" (local ranks): link dict}}, "collective": {...}}; `groups`: {"p2p": [group hash],
    "collective": [...]} in first-seen order; `warnings` of the import and the analysis; `own_matrix`:
    the rank's communication_matrix.json as the per-rank analyze writes it (every op, local ranks),
    from which cluster_analysis.db picks its own per-op samples (cluster/database.py)."""
    path: str
    rank: int
    device: int
    host_uid: str
    host_name: str
    overlap: Dict[str, float] = field(default_factory=dict)
    bubble: float = 0.0
    communication: JsonDict = field(default_factory=dict)
    matrix: JsonDict = field(default_factory=dict)
    groups: Dict[str, List[str]] = field(default_factory=dict)
    warnings: List[str] = field(default_factory=list)
    own_matrix: JsonDict = field(default_factory=dict)


def _sequential_sum(values: np.ndarray) -> float:
    """Left-to-right float sum (Python 3.11's sum(), not numpy's pairwise one)."""
    return float(np.cumsum(values)[-1]) if len(values) else 0.0


def _dur_us(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    return np.maximum(end - start, 0) / 1000.0


def step_sums(ctx: ExportContext) -> Tuple[Dict[str, float], float]:
    """The Overlap Analysis sums (µs, per OVERLAP_NAMES) and the hcom_receive µs (Bubble) of a store."""
    sums = {name: 0.0 for name in OVERLAP_NAMES}
    if ctx.has("OVERLAP_ANALYSIS"):
        ov = ctx.ints("OVERLAP_ANALYSIS", ("id", "startNs", "endNs", "type"))
        order = np.argsort(ov["id"], kind="stable")
        dur = _dur_us(ov["startNs"][order], ov["endNs"][order])
        kind = ov["type"][order]
        for code, name in enumerate(OVERLAP_NAMES):
            sums[name] = _sequential_sum(dur[kind == code])
    bubble = 0.0
    if ctx.has("COMMUNICATION_OP"):
        rows = ctx.conn.execute(
            "SELECT op.startNs, op.endNs FROM COMMUNICATION_OP op JOIN STRING_IDS s ON s.id = op.opName "
            "WHERE s.value LIKE 'hcom_receive%' ORDER BY op.startNs, op.opId").fetchall()
        if rows:
            ends = np.array(rows, dtype=np.int64)
            bubble = _sequential_sum(_dur_us(ends[:, 0], ends[:, 1]))
    return sums, bubble


def rank_analyze(ctx: ExportContext, diag: Diagnostics) -> Tuple[JsonDict, JsonDict]:
    """The rank's communication.json and communication_matrix.json as the per-rank analyze writes
    them (first device with communication only, as `analyze` does), read back through JSON; two
    empty dicts when the store holds no communication task."""
    stored = stored_hccl(ctx)
    if stored is None:
        return {}, {}
    first, *others = stored.device_list()
    if others:
        diag.warn(f"{ctx.collection_path}: communication on devices {[first] + others}; the cluster analysis "
                  f"uses device {first} only")
    results = analyze.analyze(stored.events(first), analyze.RULES)
    text = json.dumps(results)  # numbers and keys exactly as msprof-analyze reads them from the files
    loaded = json.loads(text)
    return loaded["communication"], loaded["communication_matrix"]


def _is_p2p(op: str) -> bool:
    return op.lower().startswith(P2P_PREFIXES)


def split_communication(comm: JsonDict) -> JsonDict:
    """communication.json split into p2p and collective ops, its "Total" entry dropped."""
    out: JsonDict = {P2P: {}, COLLECTIVE: {}}
    for op, info in comm.items():
        if _is_p2p(op):
            out[P2P][op] = info
        elif not op.lower().startswith(TOTAL_PREFIX):
            out[COLLECTIVE][op] = info
    return out


def _ratio(dividend: float, divisor: float) -> float:
    return 0 if abs(divisor) < 1e-15 else round(dividend / divisor, 4)


def _fold(ops: JsonDict, diag: Diagnostics) -> JsonDict:
    """One kind's matrix ops folded per (op type, group, link) into top1 / middle / bottom1..3 /
    total entries (the links sorted by bandwidth, highest first, stable)."""
    links: Dict[Tuple[str, str, str], List[JsonDict]] = defaultdict(list)
    for op, per_link in ops.items():
        found = HCCL_TYPE.search(op.lower())
        if found:
            op_type = found.group()
        else:
            op_type = op.split("__")[0]
            diag.warn(f"unknown communication op type: {op_type}")
        for link, data in per_link.items():
            data["Op Name"] = op.split("@")[0]
            links[(op_type, op.split("@")[-1], link)].append(data)
    out: Dict[str, JsonDict] = defaultdict(dict)
    for (op_type, group, link), data in links.items():
        data.sort(key=lambda x: x["Bandwidth(GB/s)"], reverse=True)
        size = sum(x.get("Transit Size(MB)", 0) for x in data)
        time = sum(x.get("Transit Time(ms)", 0) for x in data)
        name = {stat: f"{op_type}-{stat}@{group}" for stat in STATS}
        out[name["top1"]][link] = data[0]
        out[name["middle"]][link] = data[len(data) // 2]
        out[name["bottom1"]][link] = data[-1]
        out[name["total"]][link] = {"Transport Type": data[0].get("Transport Type", ""), "Transit Size(MB)": size,
                                    "Transit Time(ms)": time, "Bandwidth(GB/s)": _ratio(size, time)}
        if len(data) >= 2:
            out[name["bottom2"]][link] = data[-2]
        if len(data) >= 3:
            out[name["bottom3"]][link] = data[-3]
    return dict(out)


def fold_matrix(matrix: JsonDict, diag: Diagnostics) -> JsonDict:
    """communication_matrix.json as msprof-analyze's msprof adapter gives it: p2p and collective
    ops, each folded by _fold; "Total" entries dropped."""
    split = split_communication(matrix)
    return {P2P: _fold(split[P2P], diag), COLLECTIVE: _fold(split[COLLECTIVE], diag)}


def rank_groups(communication: JsonDict, matrix: JsonDict) -> Dict[str, List[str]]:
    """The group hashes (the op keys' part after the last '@') of each kind, in first-seen order:
    communication first, then the matrix, as msprof-analyze adds a rank to its groups."""
    groups: Dict[str, Dict[str, None]] = {P2P: {}, COLLECTIVE: {}}
    for source in (communication, matrix):
        for kind in (COLLECTIVE, P2P):
            for op in source.get(kind, {}):
                if not op.startswith("Total"):
                    groups[kind][op.split("@")[-1]] = None
    return {kind: list(names) for kind, names in groups.items()}


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def rank_tables(prof_path: str) -> RankTables:
    """Import the rank at `prof_path` if its store is not current (reusing a current one), and
    return its RankTables. Any failure is one MsprofKitError whose message is one line."""
    diag = Diagnostics()
    try:
        info: RankInfo = read_rank(prof_path)
        importer.ensure_imported(prof_path, diag)
        ctx = open_context(prof_path)
        try:
            overlap, bubble = step_sums(ctx)
            comm, matrix = rank_analyze(ctx, diag)
            has_overlap = ctx.has("OVERLAP_ANALYSIS") and \
                ctx.conn.execute("SELECT 1 FROM OVERLAP_ANALYSIS LIMIT 1").fetchone() is not None
        finally:
            ctx.conn.close()
        if not has_overlap and not comm:
            why = f" ({_one_line(Exception(diag.warnings[0]))})" if diag.warnings else ""
            raise NoData(f"no device task and no communication op to analyse{why}", path=prof_path)
        communication = split_communication(comm)
        folded = fold_matrix(matrix, diag)
    except MsprofKitError as exc:
        if "\n" in str(exc):
            raise MsprofKitError(_one_line(exc), path=None) from exc
        raise
    except (OSError, sqlite3.Error, ValueError, KeyError, TypeError, IndexError, RuntimeError) as exc:
        raise UnreadableFile(f"cannot analyse this rank ({type(exc).__name__}: {_one_line(exc)})",
                             path=prof_path) from exc
    return RankTables(info.path, info.rank, info.device, info.host_uid, info.host_name, overlap, bubble,
                      communication, folded, rank_groups(communication, folded), list(diag.warnings), matrix)
