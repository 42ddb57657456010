"""PROF/analyze/communication.json and communication_matrix.json: the reference's
`msprof.py analyze --rule communication,communication_matrix`, computed from the store's tables.

Input contract (decoded frames, strings and enums already resolved to text)
----------------------------------------------------------------------------
`hccl_events(task_info, task, ...)` takes the unified-db tables of **one device**:

* ``task_info`` -- COMMUNICATION_TASK_INFO, one row per HCCL task. Columns read:
  ``name`` (the op name, e.g. ``hcom_allReduce__483_0_1``, STRING_IDS text), ``globalTaskId``,
  ``taskType`` (the task name: ``Notify_Wait``, ``Notify_Record``, ``Memcpy``, ``Reduce_Inline``,
  ``RDMASend``; STRING_IDS text), ``planeId``, ``groupName`` (STRING_IDS text), ``rdmaType``
  (ENUM_HCCL_RDMA_TYPE text: ``RDMA_SEND_PAYLOAD`` ...), ``srcRank`` and ``dstRank`` (ints; 0xFFFFFFFF,
  or -1, means "none"), ``transportType`` (ENUM_HCCL_TRANSPORT_TYPE text: ``SDMA``, ``RDMA``, ``LOCAL``
  ...), ``size`` (bytes), ``linkType`` (ENUM_HCCL_LINK_TYPE text: ``ON_CHIP``, ``HCCS``, ``PCIE``,
  ``SIO``, ``HCCS_SW`` ...), ``isMaster`` (0/1). Other columns (notifyId, dataType, opId,
  bandwidth) are ignored.
* ``task`` -- TASK: ``globalTaskId``, ``startNs``, ``endNs`` (ns since the Unix epoch, local time).

COMMUNICATION_OP is not needed: the reference's analyze reads only its per-task table
(hccl_single_device.db HCCLTaskSingleDevice), whose op name and group are the task's ``name`` and
``groupName`` here. What the unified tables lack is the group's **raw hash id**: the reference keys
every op as ``<op name>@<group hash>`` (``hcom_allReduce__483_0_1@7415574198778220483``), the decimal
u64 with which hccl_info names the group, while COMMUNICATION_*.groupName holds the resolved text
(``hccl_world_group``). Pass ``group_ids`` (resolved name -> raw id, i.e. the collection's hash
dictionary inverted); a group without an entry keys by its text, which is the raw id whenever the
hash dictionary did not resolve it.

The reference also keeps only tasks whose start is at or after the collection start
(start_info collectionTimeBegin, = SESSION_TIME_INFO.startTimeNs): pass it as ``start_ns``. Its
"first iteration only" filter is on a field both reference paths leave 0 (HCCLTaskSingleDevice
.iteration), so it keeps everything and is not modelled.

Rules (reference: analyzer/communication_analyzer.py, communication_matrix_analyzer.py,
msparser/cluster/communication_parser.py, communication_matrix_parser.py, meta_parser.py)
--------------------------------------------------------------------------------------------
* Tasks are ordered by start (then globalTaskId); an op's position is that of its first task; the
  walk visits an op's planes in the order of their first task, each plane's tasks in start order.
* The walk: a run of ``RDMA_SEND_PAYLOAD`` tasks starting at task s (``cnt`` payloads from s on)
  closes at task ``s + cnt + jump - 2``; jump is 3 when the op name contains "send" or "receive"
  (case-insensitive), else 5. The closed window [s, close] is one RDMA transit: size = the payloads'
  bytes, time = end(close) - start(s); the walk resumes after it, so the window's other tasks
  (notify records and waits) count for nothing. A run whose close falls past the plane's last task
  is skipped (its payloads only). Every other task is visited on its own.
* SDMA transit: a visited ``Memcpy`` / ``Reduce_Inline`` with transport SDMA and link != ON_CHIP
  (communication.json); the matrix takes every SDMA Memcpy / Reduce_Inline, ON_CHIP ones included
  (shown as LOCAL).
* Communication Time Info uses the master plane only (the plane of the op's first isMaster task):
  Transit = SDMA transits + RDMA windows, Wait = visited ``Notify_Wait`` durations, Synchronization =
  those before the first transit, Elapse = last end - first start, Idle = Elapse - Transit - Wait,
  ratios Wait / (Wait + Transit) and Sync / (Sync + Transit) rounded to 4 places (0 when both are 0).
  Start Timestamp(us) is the earliest isMaster task's start, whatever its plane.
* Communication Bandwidth Info uses every plane: an SDMA transit counts for its link (HCCS_SW as
  HCCS; HCCS, PCIE, SIO as themselves; any other link as SDMA), an RDMA window for its first
  payload's transport; SDMA then also adds HCCS + PCIE + SIO. Bandwidth(GB/s) = MB / ms rounded to
  4 places, Large Packet Ratio = share of transfers above 0.5 MB (RDMA) or 32 MB (HCCS, PCIE,
  SIO), Size Distribution = {size MB: [count, ms]}; SDMA keeps only its own distribution and no ratio.
* The matrix walk skips tasks whose srcRank is none (0xFFFFFFFF) or whose dstRank is missing; a
  link is "src-dst" with dst = src when dstRank is 0xFFFFFFFF; its Transport Type is the last
  transfer's (ON_CHIP -> LOCAL, HCCS_SW -> HCCS; RDMA windows: the payload's transport).
* "Total HCCL Operators" sums every op (Start Timestamp 0); its ratios, bandwidths and large
  packet ratios are recomputed from the sums; its SDMA Size Distribution stays empty.
* Numbers keep the reference's types: a sum with no term is the integer 0, a ratio or bandwidth
  with a zero denominator stays 0; sums accumulate in walk order (the same floats as the reference).

Known reference faults not copied: on a PROF with several devices the reference merges every
device's ops under rank -1 (and its matrix concatenates their tasks); here one call is one device.
"""
from __future__ import annotations

import contextlib
import gc
import json
import os
import secrets
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from ..errors import BadOption, BadRecords, NoData, OutputError

ANALYZE_DIR = "analyze"
RULES = ("communication", "communication_matrix")
TOTAL = "Total HCCL Operators"

NONE_RANK = 0xFFFFFFFF
PAYLOAD = "RDMA_SEND_PAYLOAD"
NOTIFY_WAIT = "Notify_Wait"
SDMA_TRANSIT_TASKS = ("Memcpy", "Reduce_Inline")
JUMP_NO_BARRIER = 3   # send / receive: [payloads, notify, wait]
JUMP_WITH_BARRIER = 5  # others: [payloads, notify, wait, notify, wait]
TRANSPORTS = ("RDMA", "HCCS", "PCIE", "SDMA", "SIO")  # communication.json order
RDMA, HCCS, PCIE, SDMA, SIO = range(len(TRANSPORTS))
LINK_AS_TRANSPORT = {"HCCS_SW": "HCCS", "HCCS": "HCCS", "PCIE": "PCIE", "SIO": "SIO"}  # others -> SDMA
LARGE_PACKET_MB = {"RDMA": 0.5, "HCCS": 32.0, "PCIE": 32.0, "SIO": 32.0}  # others: 0
MATRIX_TRANSPORT_IDS = {"HCCS": 0, "HCCS_SW": 0, "PCIE": 1, "RDMA": 2, "LOCAL": 3, "SIO": 4}
MATRIX_TRANSPORT_NAMES = {0: "HCCS", 1: "PCIE", 2: "RDMA", 3: "LOCAL", 4: "SIO"}
NS_PER_MS = 1_000_000
BYTES_PER_MB = 1_000_000

TIME_KEYS = ("Start Timestamp(us)", "Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)",
             "Synchronization Time(ms)", "Idle Time(ms)", "Wait Time Ratio", "Synchronization Time Ratio")
SUMMED_TIME_KEYS = TIME_KEYS[1:6]

Number = Union[int, float]
JsonDict = Dict[str, Any]

TASK_INFO_COLUMNS = ("name", "globalTaskId", "taskType", "planeId", "groupName", "rdmaType", "srcRank",
                     "dstRank", "transportType", "size", "linkType", "isMaster")
TASK_COLUMNS = ("globalTaskId", "startNs", "endNs")


class NoMasterTask(BadRecords):
    """An HCCL op without any isMaster task: the reference stops the whole analysis on it."""


class UnknownTransport(BadRecords):
    """An RDMA transit whose transport is none of RDMA/HCCS/PCIE/SDMA/SIO (the reference crashes on it)."""


def hccl_events(task_info: pd.DataFrame, task: pd.DataFrame, *, group_ids: Optional[Mapping[str, object]] = None,
                start_ns: Optional[int] = None) -> pd.DataFrame:
    """One row per HCCL task of one device, in the reference's walk order (see the module docstring).

    Columns: ``op`` (the output key ``<op name>@<group id>``), ``opCode`` (0.. in op order),
    ``opName``, ``planeId``, ``isMaster`` (bool), ``startNs``, ``endNs`` (ns), ``task`` (task name),
    ``transport``, ``link``, ``rdmaType``, ``size`` (bytes), ``srcRank``, ``dstRank`` (int64, -1 for a
    missing value), ``globalTaskId``. Tasks without a TASK row, or starting before ``start_ns``, are left out.
    Raises NoData when nothing is left."""
    missing = [c for c in TASK_INFO_COLUMNS if c not in task_info.columns]
    missing += [c for c in TASK_COLUMNS if c not in task.columns]
    if missing:
        raise NoData(f"communication analysis needs the columns {missing}")
    ev = task_info.loc[:, list(TASK_INFO_COLUMNS)].merge(task.loc[:, list(TASK_COLUMNS)], on="globalTaskId",
                                                         how="inner")
    if start_ns is not None:
        ev = ev[ev["startNs"].to_numpy(np.int64) >= int(start_ns)]
    if ev.empty:
        raise NoData("no HCCL task to analyze (COMMUNICATION_TASK_INFO joined to TASK is empty)")
    ev = ev.sort_values(["startNs", "globalTaskId"], kind="stable").reset_index(drop=True)
    # texts per distinct value: the op key `<name>@<group>` of each distinct (name, group)
    name_code, names = _text_codes(ev["name"])
    group_code, groups = _text_codes(ev["groupName"])
    if group_ids:
        groups = groups.map({g: str(group_ids.get(g, g)) for g in groups.unique().tolist()})
    pair = pd.factorize(name_code.astype(np.int64) * max(len(groups), 1) + group_code)[0]
    first = np.unique(pair, return_index=True)[1]
    keys = (names.iloc[name_code[first]].reset_index(drop=True) + "@"
            + groups.iloc[group_code[first]].reset_index(drop=True))
    key_code, key_text = pd.factorize(keys)
    op_code = key_code[pair]
    op = np.asarray(key_text, dtype=object)[op_code]
    name_text = names.to_numpy(dtype=object)[name_code]
    plane = ev["planeId"].to_numpy(np.int64)
    lane = pd.DataFrame({"o": op_code, "p": plane}).groupby(["o", "p"], sort=False).ngroup().to_numpy()
    walk = np.lexsort((lane, op_code))  # op-major; planes by first task; tasks by start (stable)
    out = pd.DataFrame({
        "op": op[walk],
        "opCode": op_code[walk],
        "opName": name_text[walk],
        "lane": lane[walk],
        "planeId": plane[walk],
        "isMaster": ev["isMaster"].to_numpy(np.int64)[walk] == 1,
        "startNs": ev["startNs"].to_numpy(np.int64)[walk],
        "endNs": ev["endNs"].to_numpy(np.int64)[walk],
        "seq": walk,  # position in start order: "first" means smallest seq
        "task": _texts(ev["taskType"])[walk],
        "transport": _texts(ev["transportType"])[walk],
        "link": _texts(ev["linkType"])[walk],
        "rdmaType": _texts(ev["rdmaType"])[walk],
        "size": pd.to_numeric(ev["size"], errors="coerce").fillna(0).to_numpy(np.int64)[walk],
        "srcRank": pd.to_numeric(ev["srcRank"], errors="coerce").fillna(-1).to_numpy(np.int64)[walk],
        "dstRank": pd.to_numeric(ev["dstRank"], errors="coerce").fillna(-1).to_numpy(np.int64)[walk],
        "srcKnown": ev["srcRank"].notna().to_numpy()[walk],
        "dstKnown": ev["dstRank"].notna().to_numpy()[walk],
        "globalTaskId": ev["globalTaskId"].to_numpy(np.int64)[walk],
    })
    return out


def _text_codes(column: pd.Series) -> Tuple[np.ndarray, pd.Series]:
    """(code of each row, its distinct values as text, `astype(str)`), the texts made once per
    distinct value."""
    codes, uniq = pd.factorize(column.to_numpy(dtype=object), use_na_sentinel=False)
    return codes, pd.Series(uniq, dtype=object).astype(str)


def _texts(column: pd.Series) -> np.ndarray:
    """`column.astype(str)` as an object array, converting each distinct value once."""
    codes, texts = _text_codes(column)
    return texts.to_numpy(dtype=object)[codes]


@dataclass(frozen=True)
class Windows:
    """RDMA windows of one walk: ``start`` rows, ``close`` rows (valid only where ``closed``), ``payloads``
    (payload count from the start), and ``inside``: rows the walk jumps over (after a window's start)."""

    start: np.ndarray
    close: np.ndarray
    closed: np.ndarray
    payloads: np.ndarray
    inside: np.ndarray


def _walk(lane: np.ndarray, payload: np.ndarray, candidate: np.ndarray, jump: np.ndarray) -> Windows:
    """The reference's index walk over each lane (rows contiguous per lane), vectorised.

    ``candidate`` rows may open a window (payloads the walk does not skip for another reason);
    ``jump`` is per row. A window opened at s spans ``cnt`` = payloads from s on, closes at
    s + cnt + jump - 2 if that row is in the lane, and the walk goes on after the close (or after the
    payloads when it does not close). Lanes whose windows would swallow the next run's start are
    walked window by window; the others need no loop."""
    n = len(lane)
    idx = np.arange(n)
    new_lane: np.ndarray = np.ones(n, dtype=bool)
    new_lane[1:] = lane[1:] != lane[:-1]
    lane_first = np.maximum.accumulate(np.where(new_lane, idx, 0))
    lane_end: np.ndarray = np.empty(n, dtype=np.int64)  # exclusive
    firsts = np.flatnonzero(new_lane)
    lane_end[:] = np.repeat(np.append(firsts[1:], n), np.diff(np.append(firsts, n)))
    # payloads from each row on, within its lane: distance to the next non-payload (or lane end)
    stop = np.where(~payload, idx, lane_end)  # first row that ends a run, seen from each row
    stop_from = np.minimum.accumulate(stop[::-1])[::-1]  # lanes are contiguous: capped below
    run = np.minimum(stop_from, lane_end) - idx
    cand = np.flatnonzero(candidate)
    prev_cand: np.ndarray = np.zeros(n, dtype=bool)
    prev_cand[1:] = candidate[:-1] & ~new_lane[1:]
    starts = np.flatnonzero(candidate & ~prev_cand)

    def window_end(s: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        close = s + run[s] + jump[s] - 2
        closed = close < lane_end[s]
        return close, closed, np.where(closed, close + 1, s + run[s])

    close, closed, end = window_end(starts)
    # a start is reached by the walk unless the previous window of its lane runs past it
    overrun: np.ndarray = np.zeros(len(starts), dtype=bool)
    overrun[1:] = (end[:-1] > starts[1:]) & (lane[starts[:-1]] == lane[starts[1:]])
    if overrun.any():
        bad_lanes = np.unique(lane[starts[overrun]])
        keep = ~np.isin(lane[starts], bad_lanes)
        walked = [starts[keep]]
        for bad in bad_lanes.tolist():
            rows = cand[lane[cand] == bad]
            cur = int(lane_first[rows[0]])
            while True:
                k = int(np.searchsorted(rows, cur))
                if k == len(rows):
                    break
                s = rows[k:k + 1]
                walked.append(s)
                cur = int(window_end(s)[2][0])
        starts = np.sort(np.concatenate(walked))
        close, closed, end = window_end(starts)
    depth: np.ndarray = np.zeros(n + 1, dtype=np.int64)
    np.add.at(depth, starts + 1, 1)
    np.add.at(depth, end, -1)
    inside = np.cumsum(depth[:n]) > 0
    return Windows(starts, close, closed, run[starts], inside)


def _jump(ev: pd.DataFrame) -> np.ndarray:
    """Per row: 3 when its op's name holds "send" or "receive" (any case), else 5."""
    code = ev["opCode"].to_numpy()
    first = np.flatnonzero(np.r_[True, code[1:] != code[:-1]])  # rows are op-major
    low = pd.Series(ev["opName"].to_numpy()[first]).str.lower()
    p2p = (low.str.contains("send", regex=False) | low.str.contains("receive", regex=False)).to_numpy(bool)
    per_op = np.full(int(code.max()) + 1 if len(code) else 0, JUMP_WITH_BARRIER)
    per_op[code[first]] = np.where(p2p, JUMP_NO_BARRIER, JUMP_WITH_BARRIER)
    return per_op[code]


def _window_bytes(ev: pd.DataFrame, w: Windows) -> np.ndarray:
    csum = np.concatenate([[0], np.cumsum(ev["size"].to_numpy(np.int64))])
    return csum[w.start + w.payloads] - csum[w.start]


def _factorize_rows(*columns: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(code of each row's tuple of `columns` values, numbered by first row as pd.factorize numbers
    them; the first row of each code): one column at a time, without building the tuples."""
    code: np.ndarray = np.zeros(len(columns[0]), dtype=np.int64)
    for column in columns:
        values = pd.factorize(np.asarray(column))[0].astype(np.int64)
        code = pd.factorize(code * (int(values.max()) + 1 if len(values) else 1) + values)[0].astype(np.int64)
    return code, np.unique(code, return_index=True)[1]


def _sum(codes: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Per-code sums accumulated in row order (bincount adds sequentially, as the reference's += does)."""
    return np.bincount(codes, weights=values, minlength=n) if len(codes) else np.zeros(n)


def _count(codes: np.ndarray, n: int, weights: Optional[np.ndarray] = None) -> np.ndarray:
    if not len(codes):
        return np.zeros(n, dtype=np.int64)
    if weights is None:
        return np.bincount(codes, minlength=n)
    return np.bincount(codes, weights=weights, minlength=n).astype(np.int64)


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """Build the (acyclic) result dicts without the cyclic collector rescanning them: a third of the
    time for 100k ops. The collector's previous state is restored."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _value(total: float, count: int) -> Number:
    """A reference accumulator: the integer 0 it starts from when nothing was added."""
    return float(total) if count else 0


def _ratio(part: Number, other: Number, default: Number) -> Number:
    den = part + other
    return round(part / den, 4) if den != 0 else default


def _bandwidth(size_mb: Number, time_ms: Number, default: Number) -> Number:
    return round((size_mb / 1000) / (time_ms / 1000), 4) if time_ms != 0 else default


def _large_packet_ratio(transport: str, dist: Mapping[str, List[Number]], default: Number) -> Number:
    packets = sum(int(v[0]) for v in dist.values())
    if not packets:
        return default
    large = sum(int(v[0]) for k, v in dist.items() if float(k) > LARGE_PACKET_MB.get(transport, 0))
    return round(large / packets, 4)


def _transport_info(transport: str, size: Number, time: Number, dist: Dict[str, List[Number]]) -> JsonDict:
    ratio = 0 if transport == "SDMA" else _large_packet_ratio(transport, dist, 0)
    return {"Transit Size(MB)": size, "Transit Time(ms)": time, "Bandwidth(GB/s)": _bandwidth(size, time, 0),
            "Large Packet Ratio": ratio, "Size Distribution": dist}


def communication(ev: pd.DataFrame) -> JsonDict:
    """communication.json as the reference writes it: {op: {"Communication Time Info": ...,
    "Communication Bandwidth Info": {RDMA, HCCS, PCIE, SDMA, SIO}}, ..., "Total HCCL Operators": ...}.
    ``ev`` comes from `hccl_events`. Raises NoMasterTask or UnknownTransport as the reference fails."""
    ops = pd.unique(ev["op"])
    n_ops = len(ops)
    code = ev["opCode"].to_numpy()
    lane = ev["lane"].to_numpy()
    start, end = ev["startNs"].to_numpy(np.int64), ev["endNs"].to_numpy(np.int64)
    dur_ms = (end - start) / NS_PER_MS
    task = ev["task"].to_numpy()
    payload = (ev["rdmaType"] == PAYLOAD).to_numpy()
    w = _walk(lane, payload, payload, _jump(ev))
    visited = ~w.inside
    opens: np.ndarray = np.zeros(len(ev), dtype=bool)
    opens[w.start] = True  # the walk looks at a window's first task for SDMA, not for waits
    sdma = visited & np.isin(task, SDMA_TRANSIT_TASKS) & (ev["transport"] == "SDMA").to_numpy() \
        & (ev["link"] != "ON_CHIP").to_numpy()
    wait = visited & ~opens & (task == NOTIFY_WAIT)
    ws, wc = w.start[w.closed], w.close[w.closed]
    rdma_ms = (end[wc] - start[ws]) / NS_PER_MS
    rdma_mb = _window_bytes(ev, w)[w.closed] / BYTES_PER_MB

    # master plane: the plane of the op's first isMaster task (in start order)
    master = ev["isMaster"].to_numpy()
    seq = ev["seq"].to_numpy()
    m_rows = np.flatnonzero(master)
    if len(np.unique(code[m_rows])) != n_ops:
        lacking = sorted(set(ops) - set(ops[np.unique(code[m_rows])]))
        raise NoMasterTask(f"{len(lacking)} HCCL op(s) without a master task, e.g. {lacking[0]}")
    first_master = m_rows[np.lexsort((seq[m_rows], code[m_rows]))]
    first_master = first_master[np.r_[True, code[first_master][1:] != code[first_master][:-1]]]
    master_lane: np.ndarray = np.empty(n_ops, dtype=np.int64)
    master_lane[code[first_master]] = lane[first_master]
    start_us = pd.Series(start[m_rows]).groupby(code[m_rows]).min().to_numpy()
    on_master = lane == master_lane[code]
    m_start = pd.Series(np.where(on_master, start, np.iinfo(np.int64).max)).groupby(code).min().to_numpy()
    m_end = pd.Series(np.where(on_master, end, np.iinfo(np.int64).min)).groupby(code).max().to_numpy()

    # transit terms in walk order: SDMA rows and closed RDMA windows (at their first row)
    transit = np.zeros(len(ev))
    transit[sdma] = dur_ms[sdma]
    transit[ws] = rdma_ms
    is_transit = sdma.copy()
    is_transit[ws] = True
    t_rows = np.flatnonzero(is_transit & on_master)
    transit_ms = _sum(code[t_rows], transit[t_rows], n_ops)
    transit_n = _count(code[t_rows], n_ops)
    first_transit = np.full(n_ops, len(ev))
    np.minimum.at(first_transit, code[t_rows], t_rows)
    w_rows = np.flatnonzero(wait & on_master)
    wait_ms, wait_n = _sum(code[w_rows], dur_ms[w_rows], n_ops), _count(code[w_rows], n_ops)
    s_rows = w_rows[w_rows < first_transit[code[w_rows]]]
    sync_ms, sync_n = _sum(code[s_rows], dur_ms[s_rows], n_ops), _count(code[s_rows], n_ops)

    # bandwidth records in walk order, every plane
    rec_rows = np.concatenate([np.flatnonzero(sdma), ws])
    rec_kind = np.concatenate([pd.Series(ev["link"].to_numpy()[sdma]).map(LINK_AS_TRANSPORT).fillna("SDMA")
                               .to_numpy(dtype=object), ev["transport"].to_numpy()[ws]])
    rec_mb = np.concatenate([ev["size"].to_numpy(np.int64)[sdma] / BYTES_PER_MB, rdma_mb])
    rec_ms = np.concatenate([dur_ms[sdma], rdma_ms])
    order = np.argsort(rec_rows, kind="stable")
    rec_rows, rec_kind, rec_mb, rec_ms = rec_rows[order], rec_kind[order], rec_mb[order], rec_ms[order]
    unknown = sorted(set(rec_kind.tolist()) - set(TRANSPORTS))
    if unknown:
        raise UnknownTransport(f"RDMA transit over transport {unknown[0]!r} (op {ev['op'].iloc[rec_rows[0]]})")
    rec_op = code[rec_rows]
    kind_code = np.array([TRANSPORTS.index(k) for k in rec_kind], dtype=np.int64)
    n_kinds = len(TRANSPORTS)
    per_kind = rec_op * n_kinds + kind_code
    n_slots = n_ops * n_kinds
    large = rec_mb > np.array([LARGE_PACKET_MB.get(k, 0.0) for k in TRANSPORTS])[kind_code]
    kind_n = _count(per_kind, n_slots).reshape(n_ops, n_kinds).tolist()
    kind_mb = _sum(per_kind, rec_mb, n_slots).reshape(n_ops, n_kinds).tolist()
    kind_ms = _sum(per_kind, rec_ms, n_slots).reshape(n_ops, n_kinds).tolist()
    kind_large = _count(per_kind[large], n_slots).reshape(n_ops, n_kinds).tolist()
    # size distributions: {slot: {MB: [count, ms]}}, sizes in order of first transfer
    dist_code, dist_first = _factorize_rows(per_kind, rec_mb)
    dist_slot, dist_mb = per_kind[dist_first].astype(np.int64), rec_mb[dist_first].astype(np.float64)
    dist_n, dist_ms = _count(dist_code, len(dist_first)), _sum(dist_code, rec_ms, len(dist_first))
    dists: Dict[int, Dict[str, List[Number]]] = {}
    for slot, mb, cnt, ms in zip(dist_slot.tolist(), dist_mb.tolist(), dist_n.tolist(), dist_ms.tolist()):
        dists.setdefault(slot, {})[repr(mb)] = [cnt, ms]

    with _no_gc():
        return _communication_dicts(ops.tolist(), transit_ms, transit_n, wait_ms, wait_n, sync_ms, sync_n,
                                    m_end - m_start, start_us, kind_n, kind_mb, kind_ms, kind_large, dists,
                                    (dist_slot % n_kinds, dist_mb, dist_n, dist_ms))


def _communication_dicts(ops: List[str], transit_ms: np.ndarray, transit_n: np.ndarray, wait_ms: np.ndarray,
                         wait_n: np.ndarray, sync_ms: np.ndarray, sync_n: np.ndarray, span_ns: np.ndarray,
                         start_ns: np.ndarray, kind_n: List[List[int]], kind_mb: List[List[float]],
                         kind_ms: List[List[float]], kind_large: List[List[int]],
                         dists: Dict[int, Dict[str, List[Number]]],
                         total_dists: Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]) -> JsonDict:
    """The per-op entries and the totals, from the per-op sums (Python numbers, the reference's types)."""
    n_kinds = len(TRANSPORTS)
    result: JsonDict = {}
    rows = zip(ops, transit_ms.tolist(), transit_n.tolist(), wait_ms.tolist(), wait_n.tolist(),
               sync_ms.tolist(), sync_n.tolist(), span_ns.tolist(), start_ns.tolist(), kind_n, kind_mb, kind_ms,
               kind_large)
    for i, (name, t_ms, t_n, w_ms, w_n, s_ms, s_n, span, first_us, k_n, k_mb, k_ms, k_large) in enumerate(rows):
        transit_v, wait_v, sync_v = _value(t_ms, t_n), _value(w_ms, w_n), _value(s_ms, s_n)
        elapse = span / NS_PER_MS
        time_info = {
            "Start Timestamp(us)": first_us / 1000,
            "Elapse Time(ms)": elapse,
            "Transit Time(ms)": transit_v,
            "Wait Time(ms)": wait_v,
            "Synchronization Time(ms)": sync_v,
            "Idle Time(ms)": elapse - transit_v - wait_v,
            "Wait Time Ratio": _ratio(wait_v, transit_v, 0),
            "Synchronization Time Ratio": _ratio(sync_v, transit_v, 0),
        }
        size = [_value(mb, n) for mb, n in zip(k_mb, k_n)]
        time = [_value(ms, n) for ms, n in zip(k_ms, k_n)]
        # SDMA also carries what went over HCCS, PCIE and SIO
        size[SDMA] = size[SDMA] + (size[HCCS] + size[PCIE] + size[SIO])
        time[SDMA] = time[SDMA] + (time[HCCS] + time[PCIE] + time[SIO])
        bw: JsonDict = {}
        for j, kind in enumerate(TRANSPORTS):
            if time[j] == 0 and not k_n[j] and j != SDMA:
                bw[kind] = _empty_transport()
                continue
            bw[kind] = {"Transit Size(MB)": size[j], "Transit Time(ms)": time[j],
                        "Bandwidth(GB/s)": _bandwidth(size[j], time[j], 0),
                        "Large Packet Ratio": round(k_large[j] / k_n[j], 4) if k_n[j] and j != SDMA else 0,
                        "Size Distribution": dists.get(i * n_kinds + j, {})}
        result[name] = {"Communication Time Info": time_info, "Communication Bandwidth Info": bw}
    result[TOTAL] = _communication_total(result, *total_dists)
    return result


def _empty_transport() -> JsonDict:
    return {"Transit Size(MB)": 0, "Transit Time(ms)": 0, "Bandwidth(GB/s)": 0, "Large Packet Ratio": 0,
            "Size Distribution": {}}


def _communication_total(per_op: Mapping[str, JsonDict], dist_kind: np.ndarray, dist_mb: np.ndarray,
                         dist_n: np.ndarray, dist_ms: np.ndarray) -> JsonDict:
    """The totals entry: per-op values summed in op order (Python sums, the reference's order); the
    size distributions merged per transport, SDMA's left out; ratios and bandwidths from the sums."""
    infos = list(per_op.values())
    times = [info["Communication Time Info"] for info in infos]
    sums: Dict[str, Number] = {k: 0 for k in TIME_KEYS}
    for key in SUMMED_TIME_KEYS:
        sums[key] = sum((t[key] for t in times), 0)
    sums["Wait Time Ratio"] = _ratio(sums["Wait Time(ms)"], sums["Transit Time(ms)"], 0)
    sums["Synchronization Time Ratio"] = _ratio(sums["Synchronization Time(ms)"], sums["Transit Time(ms)"], 0)
    # per-op distribution entries are op-major, so a sequential merge adds them in op order
    keep = dist_kind != SDMA
    kept_kind, kept_mb = dist_kind[keep], dist_mb[keep]
    merged_code, merged_first = _factorize_rows(kept_kind, kept_mb)
    m_n = _count(merged_code, len(merged_first), weights=dist_n[keep])
    m_ms = _sum(merged_code, dist_ms[keep], len(merged_first))
    dist: List[Dict[str, List[Number]]] = [{} for _ in TRANSPORTS]
    merged = zip(kept_kind[merged_first].tolist(), kept_mb[merged_first].tolist())
    for (kind, mb), cnt, ms in zip(merged, m_n.tolist(), m_ms.tolist()):
        dist[kind][repr(float(mb))] = [cnt, ms]
    bw: JsonDict = {}
    for j, kind in enumerate(TRANSPORTS):
        parts = [info["Communication Bandwidth Info"][kind] for info in infos]
        size = sum((p["Transit Size(MB)"] for p in parts), 0)
        time = sum((p["Transit Time(ms)"] for p in parts), 0)
        bw[kind] = _transport_info(kind, size, time, dist[j])
    return {"Communication Time Info": sums, "Communication Bandwidth Info": bw}


def communication_matrix(ev: pd.DataFrame) -> JsonDict:
    """communication_matrix.json as the reference writes it: {op: {"src-dst": {"Transport Type",
    "Transit Size(MB)", "Transit Time(ms)", "Bandwidth(GB/s)"}}, ..., "Total HCCL Operators": ...}.
    ``ev`` comes from `hccl_events`."""
    ops = pd.unique(ev["op"])
    code = ev["opCode"].to_numpy()
    start, end = ev["startNs"].to_numpy(np.int64), ev["endNs"].to_numpy(np.int64)
    src, dst = ev["srcRank"].to_numpy(np.int64), ev["dstRank"].to_numpy(np.int64)
    valid = ev["srcKnown"].to_numpy() & ((src & NONE_RANK) != NONE_RANK) & ev["dstKnown"].to_numpy()
    payload = (ev["rdmaType"] == PAYLOAD).to_numpy()
    w = _walk(ev["lane"].to_numpy(), payload, payload & valid, _jump(ev))
    sdma = valid & ~w.inside & np.isin(ev["task"].to_numpy(), SDMA_TRANSIT_TASKS) \
        & (ev["transport"] == "SDMA").to_numpy()
    ws, wc = w.start[w.closed], w.close[w.closed]
    link = ev["link"].to_numpy()
    sdma_type = np.where(link[sdma] == "ON_CHIP", "LOCAL", np.where(link[sdma] == "HCCS_SW", "HCCS", link[sdma]))
    rows = np.concatenate([np.flatnonzero(sdma), ws])
    kinds = np.concatenate([sdma_type.astype(object), ev["transport"].to_numpy()[ws].astype(object)])
    mb = np.concatenate([ev["size"].to_numpy(np.int64)[sdma], _window_bytes(ev, w)[w.closed]]) / BYTES_PER_MB
    ms = np.concatenate([(end[sdma] - start[sdma]) / NS_PER_MS, (end[wc] - start[ws]) / NS_PER_MS])
    order = np.argsort(rows, kind="stable")
    rows, kinds, mb, ms = rows[order], kinds[order], mb[order], ms[order]
    dst_shown = np.where((dst[rows] & NONE_RANK) == NONE_RANK, src[rows], dst[rows])
    link_code, link_first = _factorize_rows(code[rows], src[rows], dst_shown)
    uniq = list(zip(code[rows][link_first].tolist(), src[rows][link_first].tolist(), dst_shown[link_first].tolist()))
    n_links = len(uniq)
    size_sum, time_sum = _sum(link_code, mb, n_links), _sum(link_code, ms, n_links)
    last_kind = pd.Series(kinds).groupby(link_code).last().reindex(range(n_links)).to_numpy() if n_links else []
    with _no_gc():
        return _matrix_dicts(ops.tolist(), uniq, list(last_kind), size_sum.tolist(), time_sum.tolist())


def _matrix_dicts(names: List[str], links: List[Tuple[int, int, int]], kinds: List[str], sizes: List[float],
                  times: List[float]) -> JsonDict:
    result: JsonDict = {name: {} for name in names}
    total: Dict[str, List[Any]] = {}
    for (op_i, s, d), kind, size, time in zip(links, kinds, sizes, times):
        result[names[op_i]][f"{s}-{d}"] = _matrix_link(MATRIX_TRANSPORT_IDS.get(kind, -1), size, time)
    for name in names:  # the totals add per op, in op order
        for key, info in result[name].items():
            slot = total.setdefault(key, [None, 0, 0])
            slot[0] = info["Transport Type"]
            slot[1] += info["Transit Size(MB)"]
            slot[2] += info["Transit Time(ms)"]
    result[TOTAL] = {key: {"Transport Type": t, "Transit Size(MB)": s, "Transit Time(ms)": ms_,
                           "Bandwidth(GB/s)": _divide(s, ms_)} for key, (t, s, ms_) in total.items()}
    return result


def _divide(a: Number, b: Number) -> Number:
    return round(a / b, 4) if b != 0 else 0


def _matrix_link(transport_id: int, size: float, time: float) -> JsonDict:
    return {"Transport Type": MATRIX_TRANSPORT_NAMES.get(transport_id), "Transit Size(MB)": size,
            "Transit Time(ms)": time, "Bandwidth(GB/s)": _divide(size, time)}


def analyze(ev: pd.DataFrame, rules: Sequence[str] = RULES) -> Dict[str, JsonDict]:
    """The outputs of `rules` (names from RULES), keyed by rule."""
    unknown = [r for r in rules if r not in RULES]
    if unknown:
        raise BadOption(f"unknown analyze rule(s) {unknown}: expected communication and/or communication_matrix")
    makers = {"communication": communication, "communication_matrix": communication_matrix}
    return {rule: makers[rule](ev) for rule in rules}


def write_analyze(prof_dir: str, results: Mapping[str, JsonDict]) -> List[str]:
    """Write PROF/analyze/<rule>.json for each result, formatted as the reference (json.dump defaults,
    no trailing newline). All files are written to temporary names first and renamed at the end;
    on failure none of them is left behind (nor the analyze folder, if this call created it).
    Returns the written paths."""
    out_dir = os.path.join(prof_dir, ANALYZE_DIR)
    created = not os.path.isdir(out_dir)
    temps: List[Tuple[str, str]] = []
    try:
        os.makedirs(out_dir, exist_ok=True)
        for rule, data in results.items():
            final = os.path.join(out_dir, f"{rule}.json")
            tmp = os.path.join(out_dir, f".{rule}.json.{os.getpid()}.{secrets.token_hex(4)}.tmp")
            # O_EXCL: a fresh file; mode 0o666 less the umask, as the other exporters' open() gives
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            temps.append((tmp, final))
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(json.dumps(data))  # json.dump's defaults; dumps uses the C encoder
        for tmp, final in temps:
            os.replace(tmp, final)
    except (OSError, TypeError, ValueError) as exc:
        with contextlib.suppress(OSError):
            for tmp, _ in temps:
                if os.path.exists(tmp):
                    os.unlink(tmp)
            if created and os.path.isdir(out_dir) and not os.listdir(out_dir):
                os.rmdir(out_dir)
        cause = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise OutputError(f"cannot write the analyze results ({cause})", path=out_dir, cause=cause) from exc
    return [final for _, final in temps]
