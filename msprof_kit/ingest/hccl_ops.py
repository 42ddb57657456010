"""Communication ops and tasks into COMMUNICATION_OP, COMMUNICATION_TASK_INFO, KIT_HCCL_OP and
KIT_HCCL_TASK, by the reference's C++ rules (hccl_calculator.cpp, communication_info_processor.cpp,
db_assembler.cpp; formats_more.md §1.5):

* a host task (a task track under a level-5500 API) joins the device task matched with its track;
  one without a device task is dropped (the reference: "Hccl task can't match ascend task");
* its op is the node launch containing it (the reference assigns a thread's tasks to its ops by
  the launches' windows, `begin <= track time <= end`: the same launch);
* op names are `<raw name>_<last 3 characters of the group hash>_<k>_<iteration>`: `iteration`
  counts the tasks of one (stream, task, batch, context) so far, `k` counts, per (normal/AICPU,
  group), the ops met in (task track time, device start) order whose tasks start after the
  collection start (-1 before the first);
* bandwidth (GB/s = bytes/ns in KIT_HCCL_TASK; the unified table's is that × 1000 × 1000 × 1000,
  in bytes/s, as db_assembler.cpp scales it): size / duration, except that a run of
  RDMA_SEND_PAYLOAD tasks of one (op name, plane) shares its total size over the time from its first start to the end of the
  task `run + jump - 2` places later (jump 3 for send/receive ops, else 5);
* an op (name, group, device) spans its master tasks (first start, last end); tasks and ops that
  start before the collection start are left out, as are ops without a master task.

Where the reference's Python path differs (mscalculate/hccl/hccl_calculator.py
_merge_hccl_ops_and_tasks, update_op_name_by_group_name): it names ops the same way, but a task
whose track time falls before its op's launch is kept under that op (logged only; C++ skips it),
the walk of a thread stops with its last task (later launches write no HCCLOp row), and such an
op's rank size is the previous op's last task's. Its DB path is not the one `export db` follows:
the store keeps the C++ path's tables, which the golden unified DB is.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple, Union

import numpy as np
import pandas as pd

from .. import memory
from ..cxx_order import cxx_sort_order, unordered_map_order
from ..errors import Diagnostics
from ..schema import ENUM_ROWS
from ..store import CodedTexts
from .columns import frame_of
from ..arrays import isin
from .hccl import HcclHostData, TaskColumns
from .names import HashTable, hash_names, per_distinct
from .sink import TableSink
from .tasks import StringPool

NA = "N/A"
RDMA_SEND_PAYLOAD = 1
NA_ENUM, INVALID_ENUM = 65534, 65535
TASK_BLOCK = 1 << 16  # COMMUNICATION_TASK_INFO and KIT_HCCL_TASK rows made at a time
# free heap left in place once the ops are formed: above it, the pages freed by the host's windows
# and the ops' steps go back to the system, so the ops' and the tasks' rows (their texts, and the
# store's writer thread, whose memory lies beside the heap) do not come on top of the import's
# high-water mark. (Trimmed when
# write_hccl starts instead, the ops' steps scatter their arrays over the free heap and touch it
# all again: 706 -> 452 -> 711 MiB at 1.1M tasks.)
KEEP_FREE = 64 << 20
Intervals = Dict[int, Tuple[np.ndarray, np.ndarray]]  # device id -> (starts, ends) of its ops


def _enum(raw: np.ndarray, table: str, has: np.ndarray) -> np.ndarray:
    """The unified DB's enum id of raw HCCL codes: the code where the table names it, 65535
    (INVALID_TYPE) for an unknown code, 65534 (N/A) without a record."""
    known = np.array(sorted(i for i, _ in ENUM_ROWS[table] if i < NA_ENUM), dtype=np.int64)
    values: np.ndarray = raw.astype(np.int64)
    return np.where(has, np.where(np.isin(values, known), values, INVALID_ENUM), NA_ENUM)


def _group_count(key: np.ndarray, first_ns: np.ndarray, start: np.ndarray, start_ns: int) -> np.ndarray:
    """`k` of each task (the arrays in the reference's task order: `key` codes (aicpu, group), its
    op's first launch time and its device start): per key, how many times an eligible task
    (starting after the collection start) brought a later op start than the key's last, minus one."""
    eligible = start > start_ns
    first: np.ndarray = first_ns.astype(np.int64)
    seen = pd.Series(np.where(eligible, first, np.iinfo(np.int64).min))
    best = seen.groupby(key, sort=False).cummax()
    del seen
    before = best.groupby(key, sort=False).shift(1).fillna(np.iinfo(np.int64).min).to_numpy()
    del best
    new = eligible & (first > np.maximum(before, 0))
    return pd.Series(new.astype(np.int64)).groupby(key, sort=False).cumsum().to_numpy() - 1


def _bandwidth(frame: pd.DataFrame, jumps: np.ndarray) -> np.ndarray:
    """GB/s (bytes/ns, as the reference computes it) of each task (frame in device start order, with `name` (a
    code), `plane`, `size`, `start_ns`, `end_ns`, `rdma`, `has_info`); `jumps`: each name code's jump."""
    size = frame["size"].to_numpy().astype(np.float64)
    dur = (frame["end_ns"] - frame["start_ns"]).to_numpy().astype(np.float64)
    plain = np.where(dur > 0, size / np.where(dur > 0, dur, 1), 0.0)
    out = plain.copy()
    payload = (frame["rdma"].to_numpy() == RDMA_SEND_PAYLOAD) & (frame["has_info"].to_numpy() == 1)
    if not payload.any():
        return out
    group = frame.groupby(["name", "plane"], sort=False).ngroup().to_numpy()
    order = np.lexsort((np.arange(len(frame)), group))  # each (name, plane) in device start order
    g, p = group[order], payload[order]
    starts, ends, sizes = frame["start_ns"].to_numpy()[order], frame["end_ns"].to_numpy()[order], size[order]
    n = len(order)
    at = np.arange(n)
    new_group = np.r_[True, g[1:] != g[:-1]]
    group_end = np.r_[np.flatnonzero(new_group)[1:], n][np.cumsum(new_group) - 1]  # one past each task's group
    # runs of payloads within a group: their first task, length, and closing task
    first = p & (new_group | ~np.r_[False, p[:-1]])
    run_of = np.cumsum(first) - 1
    heads = np.flatnonzero(first)
    length = np.bincount(run_of[p], minlength=len(heads))
    jump = jumps[frame["name"].to_numpy()[order][heads]]
    close = heads + length + jump - 2
    closed = close < group_end[heads]  # else every payload of the run keeps size / duration
    total = np.bincount(run_of[p], weights=sizes[p], minlength=len(heads))
    transit = np.where(closed, ends[np.minimum(close, n - 1)] - starts[heads], 0).astype(np.float64)
    shared = np.where(transit != 0, total / np.where(transit != 0, transit, 1), 0.0)
    result = out[order]
    members = at[p]
    take = closed[run_of[members]]
    result[members[take]] = shared[run_of[members[take]]]
    out[order] = result
    return out


def write_hccl(host: HcclHostData, device: pd.DataFrame, hashes: HashTable, start_ns: int,
               strings: StringPool, put: TableSink, diag: Diagnostics) -> Intervals:
    """The four tables of the collection's communication; returns each device's op spans (for
    OVERLAP_ANALYSIS). Closes the host's task columns."""
    try:
        return _write_hccl(host, device, hashes, start_ns, strings, put, diag)
    finally:
        host.tasks.close()


def _write_hccl(host: HcclHostData, device: pd.DataFrame, hashes: HashTable, start_ns: int,
                strings: StringPool, put: TableSink, diag: Diagnostics) -> Intervals:
    tasks = host.tasks
    if host.orphan_infos:
        diag.warn(f"{host.info_where}: {host.orphan_infos} hccl_info records lie under no communication API "
                  f"(level 5500) of their thread; their op cannot be found and they are left out")
    if host.untracked:
        diag.warn(f"{host.untracked} communication tasks (level-5500 APIs with an hccl_info record) have no "
                  f"task_track record; without it they cannot be joined with their device tasks and are left out "
                  f"of COMMUNICATION_TASK_INFO")
    no_info = int((tasks["has_info"] == 0).sum())
    if no_info:
        diag.warn(f"{no_info} communication tasks have no hccl_info record; they are kept with N/A names and "
                  f"the group of their op")
    joined = Joined.of(tasks, device)
    lost = len(tasks) - int(isin(tasks["api"], device["api"].to_numpy()).sum())
    if lost:
        diag.warn(f"{lost} communication tasks (task tracks under a level-5500 API) have no device task; "
                  f"they are left out of COMMUNICATION_TASK_INFO")
    no_op = int((joined["node"] < 0).sum())
    if no_op:
        diag.warn(f"{no_op} communication tasks lie under no node launch; they are left out of the ops")
        joined = joined.where(joined["node"].to_numpy() >= 0)
    if not len(joined):
        return {}
    ops = host.ops
    op_at = _rows_of(ops["node"].to_numpy().astype(np.int64), joined["node"].to_numpy().astype(np.int64))
    has_info = joined["has_info"].to_numpy() == 1
    # texts are made per distinct value; the tasks hold codes into them (NameCodes)
    codes = _name_codes(ops["item"].to_numpy()[op_at], ops["has_op_info"].to_numpy()[op_at] == 1,
                        ops["group_name"].to_numpy()[op_at], has_info, joined["group_name"].to_numpy(), hashes)
    first_ns: np.ndarray = ops["begin_ns"].to_numpy().astype(np.int64)[op_at]
    del op_at
    host_ns = joined["host_ns"].to_numpy().astype(np.int64)
    start_arr = joined["start_ns"].to_numpy().astype(np.int64)
    iteration = _iteration(joined, first_ns, host_ns, start_arr)
    by_task = np.lexsort((start_arr, host_ns))
    k: np.ndarray = np.empty(len(joined), dtype=np.int64)
    k[by_task] = _group_count((codes.group * 2 + codes.aicpu[codes.raw])[by_task], first_ns[by_task],
                              start_arr[by_task], start_ns)
    del by_task, first_ns
    name_code, name_text = codes.names(k, iteration)
    end_arr = joined["end_ns"].to_numpy().astype(np.int64)
    bandwidth = _task_bandwidth(joined, has_info, name_code, name_text, start_arr, end_arr)
    device_id = joined["device_id_dev"].to_numpy().astype(np.int64)
    # ops: (name, group, device), the C++ key; spans over master tasks
    op_code, op_text = _op_keys(name_code, name_text, codes.group, codes.group_text, device_id)
    master_rows = joined["is_master"].to_numpy() == 1
    master = frame_of({"key": op_code[master_rows], "start": start_arr[master_rows], "end": end_arr[master_rows]}) \
        .groupby("key", sort=False).agg(start=("start", "min"), end=("end", "max"))
    del master_rows, end_arr
    by_start = np.argsort(start_arr, kind="stable")
    seen, first_at = np.unique(op_code[by_start], return_index=True)
    first_row = pd.Series(by_start[first_at], index=seen)  # each op's first task by device start
    del by_start, seen, first_at
    op_rows = master.join(first_row.rename("row"), how="inner")
    op_rows = op_rows[op_rows["start"] >= start_ns].sort_values(["start", "end"], kind="stable")
    no_master = len(first_row) - len(master)
    if no_master:
        diag.warn(f"{no_master} communication ops have no master task; they are left out of COMMUNICATION_OP")
    del first_row, master
    op_rows["opId"] = np.arange(len(op_rows), dtype=np.int64)
    reference = _reference_op_order(op_code, op_text, host_ns, start_arr, device_id)
    op_index = op_rows.index.to_numpy().astype(np.int64)
    op_rows["cppOrder"] = reference[op_index]
    del reference
    op_id_of: np.ndarray = np.full(len(op_text), -1, dtype=np.int64)
    op_id_of[op_index] = op_rows["opId"].to_numpy()
    task_op = op_id_of[op_code].astype(np.int32)
    del op_code, op_id_of
    memory.give_back(KEEP_FREE)
    tasks.hold = True  # the ops' rows and the tasks' blocks read the task columns again and again
    row = op_rows["row"].to_numpy()
    _write_ops(op_rows, ops.iloc[_rows_of(ops["node"].to_numpy().astype(np.int64), joined.at("node", row)
                                          .astype(np.int64))],
               joined, codes, name_code, name_text, k, host_ns, start_arr, hashes, strings, put)
    # the ops' per-task arrays are done with before the tasks' rows are made; what the rows need is
    # held narrow or gathered a block at a time
    keep = (start_arr >= start_ns) & (task_op >= 0)
    del k, host_ns, start_arr, device_id
    order = np.flatnonzero(keep)
    del keep
    order = order[np.argsort(joined.at("gid", order), kind="stable")]
    # the tasks' HCCL names as codes into their texts, made per distinct item id (N/A last)
    item_code, items = pd.factorize(joined["item_id"].fillna(0).to_numpy().astype(np.uint64))
    hccl_text = np.append(hash_names(np.asarray(items, dtype=np.uint64), hashes).astype(object), NA).astype(object)
    hccl_code = np.where(has_info, item_code, len(items)).astype(np.int32)
    del item_code
    name_code = name_code.astype(np.int32)
    group = codes.group
    group_text = codes.group_text
    iteration = iteration.astype(np.int32)
    # the texts' ids, column by column in the order of the rows' first use (STRING_IDS numbers them
    # so); each column's distinct codes looked up once, the rows' ids read per block
    id_of = {"name": _ids_by_first_row(strings, name_code, order, name_text),
             "taskType": _ids_by_first_row(strings, hccl_code, order, hccl_text),
             "groupName": _ids_by_first_row(strings, group, order, codes.group_name)}
    del codes
    # a block of rows at a time, one table after the other (the store writes a table's pages in one go)
    for table in ("COMMUNICATION_TASK_INFO", "KIT_HCCL_TASK"):
        for lo in range(0, len(order), TASK_BLOCK):
            rows = order[lo:lo + TASK_BLOCK]
            info = has_info[rows]

            def col(key: str, default: int = -1) -> np.ndarray:
                return np.where(info, _filled(joined.at(key, rows), default).astype(np.int64), default)

            def raw(key: str) -> np.ndarray:
                return joined.at(key, rows).astype(np.int64)
            notify = np.where(info, _filled(joined.at("notify_id", rows), 0).astype(np.uint64).view(np.int64), -1)
            plane = _plane(joined.at("plane_id", rows), info)
            size = _size(joined.at("data_size", rows), info)
            op_id = task_op[rows].astype(np.int64)
            if table == "COMMUNICATION_TASK_INFO":
                put(table, frame_of({
                    "name": id_of["name"][name_code[rows]], "globalTaskId": raw("gid"),
                    "taskType": id_of["taskType"][hccl_code[rows]], "planeId": plane,
                    "groupName": id_of["groupName"][group[rows]], "notifyId": notify,
                    "rdmaType": _enum(_filled(joined.at("rdma_type", rows), -1), "ENUM_HCCL_RDMA_TYPE", info),
                    "srcRank": col("local_rank", 0), "dstRank": col("remote_rank", 0),
                    "transportType": _enum(_filled(joined.at("transport_type", rows), 0), "ENUM_HCCL_TRANSPORT_TYPE",
                                           info),
                    "size": size, "dataType": _enum(_filled(joined.at("data_type", rows), 0),
                                                    "ENUM_HCCL_DATA_TYPE", info),
                    "linkType": _enum(_filled(joined.at("link_type", rows), 0), "ENUM_HCCL_LINK_TYPE", info),
                    "opId": op_id, "isMaster": raw("is_master"),
                    "bandwidth": bandwidth[rows] * 1000 * 1000 * 1000}), last=False)
                continue
            put(table, frame_of({
                "globalTaskId": raw("gid"), "opId": op_id, "deviceId": raw("device_id_dev"),
                "streamId": raw("stream_id"), "taskId": raw("task_id"), "contextId": raw("ctx"),
                "batchId": raw("batch"), "startNs": raw("start_ns"), "endNs": raw("end_ns"), "hostNs": raw("host_ns"),
                "threadId": raw("thread"), "modelId": raw("model_id"), "connectionId": raw("node"),
                "hcclName": hccl_text[hccl_code[rows]], "groupHash": group_text[group[rows]],
                "planeId": plane, "isMaster": raw("is_master"),
                "durationEstimated": np.where(info, _filled(joined.at("duration_estimated", rows), 0), 0.0),
                "localRank": col("local_rank"), "remoteRank": col("remote_rank"), "rankSize": col("rank_size"),
                "notifyId": notify, "stage": col("stage"), "role": col("role"), "workFlowMode": col("work_flow_mode"),
                "size": size, "reduceOp": col("op_type"), "dataType": col("data_type"),
                "linkType": col("link_type"), "transportType": col("transport_type"), "rdmaType": col("rdma_type"),
                "bandwidth": bandwidth[rows], "iteration": iteration[rows].astype(np.int64)}), last=False)
        put(table, None, last=True)
    spans_out: Intervals = {}
    op_device: np.ndarray = joined.at("device_id_dev", row).astype(np.int64)
    for dev in np.unique(op_device):
        mine = op_device == dev
        spans_out[int(dev)] = (op_rows["start"].to_numpy()[mine].astype(np.int64),
                               op_rows["end"].to_numpy()[mine].astype(np.int64))
    return spans_out


def _plane(values: np.ndarray, info: np.ndarray) -> np.ndarray:
    """planeId: the hccl_info's plane, -1 without a record."""
    return np.where(info, _filled(values, -1), -1).astype(np.int64)


def _size(values: np.ndarray, info: np.ndarray) -> np.ndarray:
    """size: the hccl_info's data size in bytes, 0 without a record."""
    return np.where(info, _filled(values, 0).astype(np.float64), 0).astype(np.int64)


def _iteration(joined: "Joined", first_ns: np.ndarray, host_ns: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Each task's iteration: how many tasks of its (stream, task, batch, context) come up to it
    (itself included), the tasks in op order (its launch's begin), then track time, then device
    start."""
    key: np.ndarray = np.zeros(len(joined), dtype=np.int64)
    for name in ("stream_id", "task_id", "batch", "ctx"):
        part = pd.factorize(joined[name].to_numpy().astype(np.int64))[0]
        key = pd.factorize(key * (int(part.max()) + 1 if len(part) else 1) + part)[0].astype(np.int64)
        del part
    by_op = np.lexsort((start, host_ns, first_ns))
    ordered = key[by_op]
    del key
    same = np.argsort(ordered, kind="stable")  # each key's tasks together, in op order
    ordered = ordered[same]
    heads = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    del ordered
    count = np.arange(1, len(same) + 1, dtype=np.int64) - np.repeat(heads, np.diff(np.r_[heads, len(same)]))
    out: np.ndarray = np.empty(len(same), dtype=np.int64)
    out[by_op[same]] = count
    return out


def _task_bandwidth(joined: "Joined", has_info: np.ndarray, name_code: np.ndarray, name_text: np.ndarray,
                    start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Each task's bandwidth (GB/s, _bandwidth over the tasks in device start order)."""
    rows = by_start = np.argsort(start, kind="stable")
    out: np.ndarray = np.empty(len(joined))
    out[by_start] = _bandwidth(frame_of({
        "name": name_code[by_start], "plane": _plane(joined.at("plane_id", rows), has_info[rows]),
        "size": _size(joined.at("data_size", rows), has_info[rows]), "start_ns": start[by_start],
        "end_ns": end[by_start], "rdma": _filled(joined.at("rdma_type", rows), -1).astype(np.int64),
        "has_info": has_info[by_start].astype(np.int64)}),
        per_distinct(name_text, lambda t: 3 if ("send" in str(t).lower() or "receive" in str(t).lower()) else 5,
                     np.int64))
    return out


def _ids_by_first_row(strings: StringPool, codes: np.ndarray, order: np.ndarray, texts: np.ndarray) -> np.ndarray:
    """The STRING_IDS id of each code's text (-1 for codes no row uses), numbering new texts in the
    order rows `order` first use them, as `strings.ids_of` over the whole column would."""
    out: np.ndarray = np.full(len(texts), -1, dtype=np.int64)
    used = pd.unique(codes[order])
    if len(used):
        out[used] = strings.ids_of(CodedTexts(used, texts))
    return out


def _write_ops(op_rows: pd.DataFrame, info: pd.DataFrame, joined: "Joined", codes: "NameCodes",
               name_code: np.ndarray, name_text: np.ndarray, k: np.ndarray, host_ns: np.ndarray, start: np.ndarray,
               hashes: HashTable, strings: StringPool, put: TableSink) -> None:
    """COMMUNICATION_OP and KIT_HCCL_OP: one row per op (opId order), its fields from its launch
    (`info`: the ops' hccl_op_info and node_basic_info, one row per op) and its first task by
    device start (`op_rows.row`)."""
    row = op_rows["row"].to_numpy()
    has = info["has_op_info"].to_numpy() == 1
    group_raw = np.where(has, info["group_name"].fillna(0).astype(np.uint64).astype(str).to_numpy(),
                         codes.group_text[codes.group[row]])
    group_text = hash_names(pd.Series(group_raw).replace(NA, "0").astype(np.uint64).to_numpy(), hashes)
    group_text = np.where(group_text == "", group_raw, group_text)
    alg = np.where(has, hash_names(info["alg_type"].fillna(0).to_numpy().astype(np.uint64), hashes, NA), NA)
    op_type = hash_names(info["nbi_op_type"].to_numpy().astype(np.uint64), hashes, NA)
    op_type = np.where(op_type == "", NA, op_type)
    flags = info["flags"].fillna(0).to_numpy().astype(np.int64)
    relay = np.where(has, flags & 1, -1)
    retry = np.where(has, (flags >> 1) & 1, -1)
    data_type = _enum(info["data_type"].fillna(0).to_numpy(), "ENUM_HCCL_DATA_TYPE", has)
    count = np.where(has, info["count"].fillna(0).to_numpy().astype(np.float64), float(2 ** 64 - 1))
    # the op's rank size: its last task's (by task track time)
    node = joined["node"].to_numpy().astype(np.int64)
    by_task = np.lexsort((start, host_ns))
    rank_of = frame_of({"node": node[by_task], "rank": joined["rank_size"].fillna(0).to_numpy()[by_task]}) \
        .groupby("node", sort=False)["rank"].last()
    rank = rank_of.reindex(node[row]).fillna(0).to_numpy().astype(np.int64)
    names = name_text[name_code[row]]
    device_id = joined["device_id_dev"].to_numpy().astype(np.int64)[row]
    conn = node[row]
    put("COMMUNICATION_OP", frame_of({
        "opName": strings.ids_of(names.astype(object)), "startNs": op_rows["start"].to_numpy().astype(np.int64),
        "endNs": op_rows["end"].to_numpy().astype(np.int64), "connectionId": conn,
        "groupName": strings.ids_of(group_text.astype(object)), "opId": op_rows["opId"].to_numpy(),
        "relay": relay, "retry": retry, "dataType": data_type, "algType": strings.ids_of(alg.astype(object)),
        "count": count, "opType": strings.ids_of(op_type.astype(object)), "deviceId": device_id, "rankSize": rank}))
    put("KIT_HCCL_OP", frame_of({
        "opId": op_rows["opId"].to_numpy(), "rawName": codes.raw_text[codes.raw[row]].astype(object),
        "opName": names.astype(object), "groupHash": group_raw.astype(object), "groupName": group_text.astype(object),
        "opType": op_type.astype(object), "algType": alg.astype(object), "deviceId": device_id,
        "threadId": info["thread"].to_numpy().astype(np.int64),
        "modelId": joined["model_id"].to_numpy().astype(np.int64)[row], "connectionId": conn,
        "launchBeginNs": info["begin_ns"].to_numpy().astype(np.int64),
        "launchEndNs": info["end_ns"].to_numpy().astype(np.int64),
        "startNs": op_rows["start"].to_numpy().astype(np.int64), "endNs": op_rows["end"].to_numpy().astype(np.int64),
        "relay": relay, "retry": retry, "dataType": np.where(has, info["data_type"].fillna(0).to_numpy(), -1)
        .astype(np.int64), "count": np.where(has, info["count"].fillna(0).to_numpy().astype(np.uint64).view(np.int64), -1),
        "rankSize": rank, "groupIndex": k[row], "cppOrder": op_rows["cppOrder"].to_numpy()}))


@dataclass
class Joined:
    """The host tasks joined with their device tasks on `api` (inner, in the order pandas' merge
    gives), a column gathered only when asked for: never the whole joined frame at once. The
    tasks' columns are a frame's or spilled ones (TaskColumns, read when asked for)."""
    tasks: Union[pd.DataFrame, TaskColumns]
    device: pd.DataFrame
    left: np.ndarray   # the tasks' row of each joined row
    right: np.ndarray  # the device tasks' row

    @classmethod
    def of(cls, tasks: Union[pd.DataFrame, TaskColumns], device: pd.DataFrame) -> "Joined":
        """The join, its order that of `tasks.merge(device, on="api", how="inner")`."""
        rows = frame_of({"api": np.asarray(tasks["api"]), "left": np.arange(len(tasks), dtype=np.int64)}).merge(
            frame_of({"api": device["api"].to_numpy(), "right": np.arange(len(device), dtype=np.int64)}),
            on="api", how="inner")
        # row numbers as int32 (a collection's tasks are far fewer than 2**31)
        return cls(tasks, device, rows["left"].to_numpy().astype(np.int32), rows["right"].to_numpy().astype(np.int32))

    def __len__(self) -> int:
        return len(self.left)

    def __getitem__(self, name: str) -> pd.Series:
        if name in self.tasks.columns:
            return pd.Series(np.asarray(self.tasks[name])[self.left], copy=False)
        return pd.Series(self.device[name].to_numpy()[self.right], copy=False)

    def at(self, name: str, rows: np.ndarray) -> np.ndarray:
        """A column at joined rows `rows`."""
        if name in self.tasks.columns:
            return np.asarray(self.tasks[name])[self.left[rows]]
        return self.device[name].to_numpy()[self.right[rows]]

    def where(self, keep: np.ndarray) -> "Joined":
        """The joined rows where `keep`."""
        return Joined(self.tasks, self.device, self.left[keep], self.right[keep])


def _filled(values: np.ndarray, default: int) -> np.ndarray:
    """`values` with NaN as `default` (pandas' fillna; integer columns as they are)."""
    if values.dtype.kind != "f":
        return values
    return np.where(np.isnan(values), default, values)


def _rows_of(keys: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """The row of `keys` (distinct) holding each wanted key (all present)."""
    order = np.argsort(keys, kind="stable")
    return order[np.clip(np.searchsorted(keys[order], wanted), 0, max(len(keys) - 1, 0))]


def _first_rows(codes: np.ndarray) -> np.ndarray:
    """The first row of each code of `codes` (0..m-1, numbered by first row, as pd.factorize gives them)."""
    return np.unique(codes, return_index=True)[1]


def _combine(*parts: np.ndarray) -> np.ndarray:
    """Codes (0.., by first row) of the distinct tuples of non-negative integer columns, one column at
    a time (the running code times the column's range never leaves int64)."""
    code: np.ndarray = np.zeros(len(parts[0]), dtype=np.int64)
    for part in parts:
        values = np.asarray(part, dtype=np.int64)
        span = int(values.max()) + 1 if len(values) else 1
        code = pd.factorize(code * span + values)[0].astype(np.int64)
    return code


@dataclass
class NameCodes:
    """The texts of the tasks' ops, made once per distinct value: each task's raw op name (`raw`,
    an int32 code into `raw_text`; `aicpu` per raw code) and group (`group`, a code into `group_text`, the
    raw hash in decimal or N/A, and into `group_name`, its resolved text)."""
    raw: np.ndarray
    raw_text: np.ndarray
    aicpu: np.ndarray
    group: np.ndarray
    group_text: np.ndarray
    group_name: np.ndarray

    def names(self, k: np.ndarray, iteration: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """(code of each task's op name `<raw>_<last 3 characters of the group>_<k>_<iteration>`, the
        distinct names)."""
        tail_code, tails = pd.factorize(np.array([str(t)[-3:] for t in self.group_text.tolist()], dtype=object))
        tail = tail_code[self.group] if len(self.group) else np.zeros(0, dtype=np.int64)
        combo = _combine(self.raw, tail, k + 1, iteration)
        first = _first_rows(combo)
        texts = [f"{r}_{t}_{kk}_{i}" for r, t, kk, i in zip(self.raw_text[self.raw[first]].tolist(),
                                                          np.asarray(tails, dtype=object)[tail[first]].tolist(),
                                                          k[first].tolist(), iteration[first].tolist())]
        canon, distinct = pd.factorize(np.array(texts, dtype=object))
        return canon[combo].astype(np.int64), np.asarray(distinct, dtype=object)


def _name_codes(items: np.ndarray, op_has: np.ndarray, op_group: np.ndarray, has_info: np.ndarray,
                task_group: np.ndarray, hashes: HashTable) -> NameCodes:
    """NameCodes of the tasks: `items` their ops' raw name hashes; a task's group is its hccl_info's
    (`has_info`, `task_group`), else its op's hccl_op_info's (`op_has`, `op_group`), else N/A."""
    item_code, item_u = pd.factorize(items)
    raw_u = hash_names(np.asarray(item_u).astype(np.uint64), hashes)
    raw_u = np.where(raw_u == "", pd.Series(item_u).astype(str).to_numpy(), raw_u)
    raw_canon, raw_text = pd.factorize(np.asarray(raw_u, dtype=object))
    raw_text = np.asarray(raw_text, dtype=object)
    value = np.where(has_info, pd.Series(task_group).fillna(0).astype(np.uint64).to_numpy(),
                     np.where(op_has, pd.Series(op_group).fillna(0).astype(np.uint64).to_numpy(), 0)).astype(np.uint64)
    na = ~has_info & ~op_has
    value_code, value_u = pd.factorize(value)
    group = _combine(value_code, na)
    first = _first_rows(group)
    group_text = np.array([NA if n else str(int(v)) for v, n in zip(value[first].tolist(), na[first].tolist())],
                          dtype=object)
    resolved = hash_names(np.array([0 if t == NA else int(t) for t in group_text.tolist()], dtype=np.uint64), hashes)
    group_name = np.where(resolved == "", group_text, resolved).astype(object)
    return NameCodes(raw=raw_canon[item_code].astype(np.int32), raw_text=raw_text,
                     aicpu=np.array(["AicpuKernel" in str(t) for t in raw_text.tolist()], dtype=bool),
                     group=group.astype(np.int32), group_text=group_text, group_name=group_name)


def _op_keys(name_code: np.ndarray, name_text: np.ndarray, group: np.ndarray, group_text: np.ndarray,
             device: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(code of each task's op, the ops' C++ keys `<op name>_<raw group hash>_<device>`)."""
    device_code, devices = pd.factorize(device)
    combo = _combine(name_code, group, device_code)
    first = _first_rows(combo)
    texts = [f"{n}_{g}_{d}" for n, g, d in zip(name_text[name_code[first]].tolist(),
                                                 group_text[group[first]].tolist(), device[first].tolist())]
    canon, distinct = pd.factorize(np.array(texts, dtype=object))
    return canon[combo].astype(np.int64), np.asarray(distinct, dtype=object)


def _reference_op_order(op_code: np.ndarray, op_text: np.ndarray, host_ns: np.ndarray, start_ns: np.ndarray,
                        devices: np.ndarray) -> np.ndarray:
    """Each op's place in the reference C++ path's op list (docs/exports.md, "Communication ops
    that start together"; -1 for none): per device (ascending), its tasks in the order of its HCCL
    task table (hccl_calculator.cpp sorts them by (host time, device start), then std::sort by device
    start alone, unstable), the ops' keys in the order their first task comes, put into an
    unordered_map and read back in its iteration order."""
    out: np.ndarray = np.full(len(op_text), -1, dtype=np.int64)
    placed = 0
    for device in np.unique(devices).tolist():
        mine = np.flatnonzero(devices == device)
        by_host = mine[np.lexsort((start_ns[mine], host_ns[mine]))]
        start_rank = np.unique(start_ns[by_host], return_inverse=True)[1].astype(np.int64)
        rows = by_host[cxx_sort_order(start_rank)]
        firsts = pd.unique(op_code[rows])
        walk = np.asarray(unordered_map_order([str(t) for t in op_text[firsts].tolist()]), dtype=np.int64)
        out[firsts[walk]] = placed + np.arange(len(walk), dtype=np.int64)
        placed += len(walk)
    return out
