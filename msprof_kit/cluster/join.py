"""Phase 2 of `msprof-kit cluster`: the ranks' small tables joined by communication group, as
msprof-analyze's text mode joins them (communication_group/base_communication_group.py,
analysis/base_analysis.py, communication_analysis.py, comm_matrix_analysis.py,
step_trace_time_analysis.py, msprof_step_trace_time_adapter.py).

Rules, each from msprof-analyze:

* Groups: a rank belongs to the group named by the part after the last '@' of each of its ops
  (communication first, then the matrix), collective and p2p groups kept apart. A group's rank set
  is a Python set filled in rank order; its list and tuple forms are that set's iteration order.
* The rank-set key of an op is str(tuple(rank set of its group, of its kind)): a p2p group and a
  collective group with the same ranks share one key. Under it, one level "step".
* cluster_communication.json: per key, per op (in the order ranks, kinds p2p then collective, and
  ops are met), per rank its communication.json entry as is; then "Total Op Info@<group>" per
  group (in first-seen order) and rank (in first-seen order): the five times summed (from 0.0,
  Start Timestamp and the ratios left out), Wait / Synchronization ratios recomputed (÷ by itself
  + Transit; 4 places; 0 below 1e-15), per transport Transit Time and Size summed (from 0), Size
  Distribution [count, ms] summed per size, and Bandwidth recomputed; no Large Packet Ratio.
* cluster_communication_matrix.json: per key, per folded op (rank_tables.fold_matrix), the links of
  every rank summed per link key (Transit Time and Size; Transport Type and Op Name of the last
  rank), then mapped from local to global ranks: a rank R whose op has a link "l-l" says that
  local rank l of the op's group is R (first seen wins); a link whose end has no mapping is
  dropped with a warning; Bandwidth = Size / Time (4 places). Then "Total Op Info@<group>" sums
  the "-total" ops' links (Op Name "").
* cluster_step_trace_time.csv: one "rank" row per rank (Step empty, Index = rank) in the ranks'
  order. Overlapped = Communication - Not Overlapped; Exclude Receive = Not Overlapped - Bubble;
  Stage = Free + Computing + Not Overlapped - Bubble; Preparing 0. No "stage" rows: msprof-analyze
  makes them only for p2p groups whose pg_name starts with "pp", and pg_name only comes from a
  profiler_metadata.json, which msprof collections do not have.
* communication_group.json: "collective" and "p2p" (the rank sets as lists), and
  "comm_group_parallel_info" (collective groups, then p2p: type, sorted rank_set, group_name,
  group_id "", pg_name "").
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

import pandas as pd

from ..errors import Diagnostics
from .rank_tables import COLLECTIVE, OVERLAP_NAMES, P2P, RankTables
from .result import HOST_COLUMNS, ClusterResult

JsonDict = Dict[str, Any]
STEP = "step"
TOTAL_OP_INFO = "Total Op Info"
TIME_INFO = "Communication Time Info"
BANDWIDTH_INFO = "Communication Bandwidth Info"
RATIOS = ("Wait Time Ratio", "Synchronization Time Ratio")
START = "Start Timestamp(us)"
STEP_TRACE_COLUMNS = ["Step", "Type", "Index", "Computing", "Communication(Not Overlapped)", "Overlapped",
                      "Communication", "Free", "Stage", "Bubble", "Communication(Not Overlapped and Exclude Receive)",
                      "Preparing"]
EPS = 1e-15


def _ratio(dividend: float, divisor: float) -> float:
    return 0 if abs(divisor) < EPS else round(dividend / divisor, 4)


@dataclass
class _Op:
    rank: int
    kind: str
    name: str
    info: Any

    @property
    def group(self) -> str:
        return self.name.split("@")[-1]


def _group_sets(tables: List[RankTables]) -> Dict[str, Dict[str, Set[int]]]:
    sets: Dict[str, Dict[str, Set[int]]] = {COLLECTIVE: {}, P2P: {}}
    for t in tables:
        for kind in (COLLECTIVE, P2P):
            for group in t.groups.get(kind, []):
                sets[kind].setdefault(group, set()).add(t.rank)
    return sets


def _by_rank_set(ops: Iterable[_Op], sets: Dict[str, Dict[str, Set[int]]]) -> Dict[Tuple[int, ...], JsonDict]:
    """split_op_by_group: {rank tuple: {"step": {op: {rank (text): info}}}}, first one kept."""
    out: Dict[Tuple[int, ...], JsonDict] = {}
    keys: Dict[Tuple[str, str], Tuple[int, ...]] = {}  # (kind, group) -> its rank tuple, made once
    for op in ops:
        kind = P2P if op.kind == P2P else COLLECTIVE
        key = keys.get((kind, op.group))
        if key is None:
            key = keys[(kind, op.group)] = tuple(sets[kind].get(op.group, set()))
        out.setdefault(key, {}).setdefault(STEP, {}).setdefault(op.name, {}).setdefault(str(op.rank), op.info)
    return out


def _ops(tables: List[RankTables], attr: str) -> List[_Op]:
    return [_Op(t.rank, kind, name, info) for t in tables for kind, ops in getattr(t, attr).items()
            if kind in (P2P, COLLECTIVE) for name, info in ops.items() if not name.startswith("Total")]


# ---- cluster_communication.json ----------------------------------------------------------------

def _add_time(info: JsonDict, total: Dict[str, float]) -> None:
    for key, value in info.items():
        if key not in RATIOS and key != START:
            total[key] = total.get(key, 0.0) + value


def _add_bandwidth(info: JsonDict, total: JsonDict) -> None:
    for transport, part in info.items():
        if transport not in total:
            total[transport] = {"Transit Time(ms)": 0, "Transit Size(MB)": 0, "Size Distribution": {}}
        mine = total[transport]
        for key, value in part.items():
            if key in ("Transit Time(ms)", "Transit Size(MB)"):
                mine[key] += value
            elif key == "Size Distribution":
                for size, (count, ms) in value.items():
                    pair = mine[key].setdefault(size, [0, 0])
                    pair[0] += count
                    pair[1] += ms


def _communication_totals(ops: JsonDict) -> None:
    """Add "Total Op Info@<group>" to one step's ops (compute_total_info)."""
    totals: Dict[str, Dict[str, JsonDict]] = {}
    for name, per_rank in ops.items():
        group = name.split("@")[-1]
        for rank, info in per_rank.items():
            mine = totals.setdefault(group, {}).setdefault(rank, {TIME_INFO: {}, BANDWIDTH_INFO: {}})
            for part, content in info.items():
                if part == TIME_INFO:
                    _add_time(content, mine[TIME_INFO])
                elif part == BANDWIDTH_INFO:
                    _add_bandwidth(content, mine[BANDWIDTH_INFO])
    for group, per_rank in totals.items():
        for mine in per_rank.values():
            times = mine[TIME_INFO]
            transit = times.get("Transit Time(ms)", 0)
            times["Wait Time Ratio"] = _ratio(times.get("Wait Time(ms)", 0), times.get("Wait Time(ms)", 0) + transit)
            times["Synchronization Time Ratio"] = _ratio(times.get("Synchronization Time(ms)", 0),
                                                         times.get("Synchronization Time(ms)", 0) + transit)
            for band in mine[BANDWIDTH_INFO].values():
                band["Bandwidth(GB/s)"] = _ratio(band.get("Transit Size(MB)", 0), band.get("Transit Time(ms)", 0))
        ops[f"{TOTAL_OP_INFO}@{group}"] = per_rank


def join_communication(tables: List[RankTables], sets: Dict[str, Dict[str, Set[int]]]) -> JsonDict:
    """cluster_communication.json of the ranks."""
    struct = _by_rank_set(_ops(tables, "communication"), sets)
    for steps in struct.values():
        for ops in steps.values():
            _communication_totals(ops)
    return {str(key): steps for key, steps in struct.items()}


# ---- cluster_communication_matrix.json ---------------------------------------------------------

def _empty_link() -> JsonDict:
    return {"Transport Type": "", "Transit Time(ms)": 0, "Transit Size(MB)": 0, "Op Name": ""}


def _combine_link(total: JsonDict, link: JsonDict) -> None:
    total["Transport Type"] = link.get("Transport Type")
    total["Op Name"] = link.get("Op Name", "")
    total["Transit Time(ms)"] += link.get("Transit Time(ms)", 0)
    total["Transit Size(MB)"] += link.get("Transit Size(MB)", 0)


def _local_to_global(ops: JsonDict, diag: Diagnostics) -> Dict[str, Dict[str, str]]:
    """Each group's local rank -> global rank, from the links "l-l" each rank reports."""
    mapping: Dict[str, Dict[str, str]] = {}
    for name, per_rank in ops.items():
        group = name.split("@")[-1]
        for rank, links in per_rank.items():
            for link in links:
                if "-" not in link:
                    diag.warn(f"{name} has an invalid link key {link}")
                    break
                src, dst = link.split("-")[0], link.split("-")[1]
                if src != dst:
                    continue
                known = mapping.setdefault(group, {})
                if src not in known:
                    known[src] = rank
                elif known[src] != rank:
                    diag.warn(f"in communication group {group}, global ranks {rank} and {known[src]} have the same "
                              f"local rank {src}")
    return mapping


def _merge_links(ops: JsonDict, diag: Diagnostics) -> None:
    """merge_same_links: each op's links summed over ranks, keyed by global ranks."""
    mapping = _local_to_global(ops, diag)
    for name in list(ops):
        group = name.split("@")[-1]
        summed: Dict[str, JsonDict] = defaultdict(_empty_link)
        for links in ops[name].values():
            for link, data in links.items():
                if "-" not in link:
                    diag.warn(f"{name} has an invalid link key {link}")
                    break
                _combine_link(summed[link], data)
        ranks = mapping.get(group, {})
        merged: JsonDict = {}
        for link, data in summed.items():
            src, dst = link.split("-")[0], link.split("-")[1]
            missing = [f"{end} local rank {r}" for end, r in (("src", src), ("dst", dst)) if r not in ranks]
            if missing:
                diag.warn(f"the {missing[0]} of the operator {name} cannot be mapped to a global rank; link left out")
                continue
            data["Bandwidth(GB/s)"] = _ratio(data.get("Transit Size(MB)", 0), data.get("Transit Time(ms)", 0))
            merged[f"{ranks[src]}-{ranks[dst]}"] = data
        ops[name] = merged


def _adds_to_total(name: str) -> bool:
    """check_add_op: an op counts in the total unless it names a statistic other than "total"."""
    return not any(stat in name for stat in ("middle", "top", "bottom"))


def _matrix_totals(ops: JsonDict) -> None:
    totals: Dict[str, Dict[str, JsonDict]] = {}
    for name, links in ops.items():
        if _adds_to_total(name):
            group = totals.setdefault(name.split("@")[-1], {})
            for link, data in links.items():
                _combine_link(group.setdefault(link, _empty_link()), data)
    for group_name, links in totals.items():
        for data in links.values():
            data["Bandwidth(GB/s)"] = _ratio(data.get("Transit Size(MB)", 0), data.get("Transit Time(ms)", 0))
        ops[f"{TOTAL_OP_INFO}@{group_name}"] = links


def join_matrix(tables: List[RankTables], sets: Dict[str, Dict[str, Set[int]]], diag: Diagnostics) -> JsonDict:
    """cluster_communication_matrix.json of the ranks."""
    struct = _by_rank_set(_ops(tables, "matrix"), sets)
    for steps in struct.values():
        for ops in steps.values():
            _merge_links(ops, diag)
            _matrix_totals(ops)
    return {str(key): steps for key, steps in struct.items()}


# ---- cluster_step_trace_time.csv, communication_group.json, hosts ------------------------------

def step_trace_rows(tables: List[RankTables]) -> pd.DataFrame:
    """One "rank" row per rank, µs (msprof_step_trace_time_adapter's arithmetic, in its order)."""
    rows = []
    for t in tables:
        compute, comm, not_overlapped, free = (float(t.overlap.get(n, 0.0)) for n in OVERLAP_NAMES)
        bubble = float(t.bubble)
        stage = free + compute + not_overlapped - bubble
        rows.append(["", "rank", t.rank, compute, not_overlapped, comm - not_overlapped, comm, free, stage, bubble,
                     not_overlapped - bubble, 0.0])
    return pd.DataFrame(rows, columns=STEP_TRACE_COLUMNS).astype({"Index": "int64"})


def group_json(sets: Dict[str, Dict[str, Set[int]]]) -> JsonDict:
    """communication_group.json."""
    info = [{"type": kind, "rank_set": sorted(ranks), "group_name": name, "group_id": "", "pg_name": ""}
            for kind in (COLLECTIVE, P2P) for name, ranks in sets[kind].items()]
    return {COLLECTIVE: [list(s) for s in sets[COLLECTIVE].values()], P2P: [list(s) for s in sets[P2P].values()],
            "comm_group_parallel_info": info}


def hosts_frame(tables: List[RankTables]) -> pd.DataFrame:
    """rankId, deviceId, hostUid, hostName, profilePath of each rank."""
    return pd.DataFrame([[t.rank, t.device, t.host_uid, t.host_name, t.path] for t in tables], columns=list(HOST_COLUMNS))


def join(tables: List[RankTables], failed: Optional[Dict[str, str]] = None,
         diag: Optional[Diagnostics] = None) -> ClusterResult:
    """Join the ranks' tables (in msprof-analyze's rank order: ranks.find_ranks) into the cluster
    outputs. `failed`: the ranks left out (PROF path -> one-line error), kept in the result; the
    join's own warnings (links that cannot be mapped to global ranks ...) go to `diag`."""
    diag = diag if diag is not None else Diagnostics()
    sets = _group_sets(tables)
    return ClusterResult(step_trace=step_trace_rows(tables), communication=join_communication(tables, sets),
                         matrix=join_matrix(tables, sets, diag), groups=group_json(sets), hosts=hosts_frame(tables),
                         failed=dict(failed or {}), rank_matrix={t.rank: t.own_matrix for t in tables})
