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

from typing import Dict, List, Tuple

import numpy as np
import pandas as pd

from ..cxx_order import cxx_sort_order, unordered_map_order
from ..errors import Diagnostics
from ..schema import ENUM_ROWS
from .columns import frame_of
from .hccl import HcclHostData
from .names import HashTable, hash_names, per_distinct
from .sink import TableSink
from .tasks import StringPool

NA = "N/A"
RDMA_SEND_PAYLOAD = 1
NA_ENUM, INVALID_ENUM = 65534, 65535
Intervals = Dict[int, Tuple[np.ndarray, np.ndarray]]  # device id -> (starts, ends) of its ops


def _enum(raw: np.ndarray, table: str, has: np.ndarray) -> np.ndarray:
    """The unified DB's enum id of raw HCCL codes: the code where the table names it, 65535
    (INVALID_TYPE) for an unknown code, 65534 (N/A) without a record."""
    known = np.array(sorted(i for i, _ in ENUM_ROWS[table] if i < NA_ENUM), dtype=np.int64)
    values: np.ndarray = raw.astype(np.int64)
    return np.where(has, np.where(np.isin(values, known), values, INVALID_ENUM), NA_ENUM)


def _group_count(frame: pd.DataFrame, start_ns: int) -> np.ndarray:
    """`k` of each task (frame in the reference's task order, with `aicpu`, `group`, `first_ns`
    and `start_ns`): per (aicpu, group), how many times an eligible task (starting after the
    collection start) brought a later op start than the group's last, minus one."""
    keys = [frame["aicpu"], frame["group"]]
    eligible = frame["start_ns"].to_numpy() > start_ns
    first = frame["first_ns"].to_numpy().astype(np.int64)
    seen = pd.Series(np.where(eligible, first, np.iinfo(np.int64).min), index=frame.index)
    best = seen.groupby(keys, sort=False).cummax()
    before = best.groupby(keys, sort=False).shift(1).fillna(np.iinfo(np.int64).min).to_numpy()
    new = eligible & (first > np.maximum(before, 0))
    return pd.Series(new.astype(np.int64), index=frame.index).groupby(keys, sort=False).cumsum().to_numpy() - 1


def _bandwidth(frame: pd.DataFrame) -> np.ndarray:
    """GB/s (bytes/ns, as the reference computes it) of each task (frame in device start order, with `name`, `plane`, `size`, `start_ns`,
    `end_ns`, `rdma`, `has_info`)."""
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
    name_text = frame["name"].to_numpy()[order][heads]
    jump = per_distinct(name_text, lambda t: 3 if ("send" in str(t).lower() or "receive" in str(t).lower()) else 5,
                        np.int64)
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
    OVERLAP_ANALYSIS)."""
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
    joined = tasks.merge(device, on="api", how="inner")
    lost = len(tasks) - int(tasks["api"].isin(device["api"]).sum())
    if lost:
        diag.warn(f"{lost} communication tasks (task tracks under a level-5500 API) have no device task; "
                  f"they are left out of COMMUNICATION_TASK_INFO")
    no_op = int((joined["node"] < 0).sum())
    if no_op:
        diag.warn(f"{no_op} communication tasks lie under no node launch; they are left out of the ops")
        joined = joined[joined["node"] >= 0]
    if joined.empty:
        return {}
    ops = host.ops.set_index("node")
    op_of = ops.loc[joined["node"].to_numpy()]
    raw_name = hash_names(op_of["item"].to_numpy().astype(np.uint64), hashes)
    raw_name = np.where(raw_name == "", op_of["item"].astype(str).to_numpy(), raw_name)
    op_group = np.where(op_of["has_op_info"].to_numpy() == 1, op_of["group_name"].fillna(0).astype(np.uint64)
                        .astype(str).to_numpy(), NA)
    has_info = joined["has_info"].to_numpy() == 1
    task_group = np.where(has_info, joined["group_name"].fillna(0).astype(np.uint64).astype(str).to_numpy(), op_group)
    frame = frame_of({
        "i": np.arange(len(joined)), "node": joined["node"].to_numpy(), "host_ns": joined["host_ns"].to_numpy(),
        "start_ns": joined["start_ns"].to_numpy().astype(np.int64), "end_ns": joined["end_ns"].to_numpy().astype(np.int64),
        "first_ns": op_of["begin_ns"].to_numpy().astype(np.int64), "raw": raw_name, "group": task_group,
        "aicpu": per_distinct(raw_name, lambda s: "AicpuKernel" in str(s), bool),
        **{f"key_{c}": joined[c].to_numpy().astype(np.int64) for c in ("stream_id", "task_id", "batch", "ctx")}})
    # iteration: per (stream, task, batch, context), in op order then task order
    by_op = frame.sort_values(["first_ns", "host_ns", "start_ns"], kind="stable")
    iteration: np.ndarray = np.empty(len(frame), dtype=np.int64)
    iteration[by_op["i"].to_numpy()] = by_op.groupby(["key_stream_id", "key_task_id", "key_batch", "key_ctx"], sort=False).cumcount().to_numpy() + 1
    by_task = frame.sort_values(["host_ns", "start_ns"], kind="stable")
    k: np.ndarray = np.empty(len(frame), dtype=np.int64)
    k[by_task["i"].to_numpy()] = _group_count(by_task, start_ns)
    tail = per_distinct(task_group, lambda s: str(s)[-3:])
    name = pd.Series(raw_name).str.cat([pd.Series(tail), pd.Series(k.astype(str)), pd.Series(iteration.astype(str))],
                                       sep="_").to_numpy()
    frame["name"] = name
    hccl_name = np.where(has_info, hash_names(joined["item_id"].fillna(0).to_numpy().astype(np.uint64), hashes), NA)
    rdma = joined["rdma_type"].fillna(-1).to_numpy().astype(np.int64)
    size = np.where(has_info, joined["data_size"].fillna(0).to_numpy().astype(np.float64), 0).astype(np.int64)
    plane = np.where(has_info, joined["plane_id"].fillna(-1).to_numpy(), -1).astype(np.int64)
    frame["plane"], frame["size"], frame["rdma"], frame["has_info"] = plane, size, rdma, has_info.astype(np.int64)
    by_start = frame.sort_values("start_ns", kind="stable")
    bandwidth = np.empty(len(frame))
    bandwidth[by_start["i"].to_numpy()] = _bandwidth(by_start.reset_index(drop=True))
    device_id = joined["device_id_dev"].to_numpy().astype(np.int64)
    is_master = joined["is_master"].to_numpy().astype(np.int64)
    # ops: (name, group, device), the C++ key; spans over master tasks
    op_key = pd.Series(name).str.cat([pd.Series(task_group), pd.Series(device_id.astype(str))], sep="_").to_numpy()
    kept = frame["start_ns"].to_numpy() >= start_ns
    spans = frame_of({"key": op_key, "start": frame["start_ns"].to_numpy(), "end": frame["end_ns"].to_numpy()})
    master = spans[is_master == 1].groupby("key", sort=False).agg(start=("start", "min"), end=("end", "max"))
    first_row = pd.Series(np.arange(len(frame)), index=op_key)
    first_row = first_row.iloc[np.argsort(frame["start_ns"].to_numpy(), kind="stable")]
    first_row = first_row[~first_row.index.duplicated()]  # each op's first task by device start
    op_rows = master.join(first_row.rename("row"), how="inner")
    op_rows = op_rows[op_rows["start"] >= start_ns].sort_values(["start", "end"], kind="stable")
    no_master = len(first_row) - len(master)
    if no_master:
        diag.warn(f"{no_master} communication ops have no master task; they are left out of COMMUNICATION_OP")
    op_rows["opId"] = np.arange(len(op_rows), dtype=np.int64)
    reference = _reference_op_order(op_key, frame["host_ns"].to_numpy().astype(np.int64),
                                    frame["start_ns"].to_numpy().astype(np.int64), device_id)
    op_rows["cppOrder"] = pd.Series(reference).reindex(op_rows.index).fillna(-1).to_numpy().astype(np.int64)
    op_id_of = pd.Series(op_rows["opId"].to_numpy(), index=op_rows.index)
    task_op = op_id_of.reindex(op_key).fillna(-1).astype(np.int64).to_numpy()
    keep = kept & (task_op >= 0)
    _write_ops(op_rows, frame, op_of, joined, hashes, strings, put)
    gid = joined["gid"].to_numpy().astype(np.int64)
    order = np.flatnonzero(keep)
    order = order[np.argsort(gid[order], kind="stable")]
    group_text = hash_names(pd.Series(task_group).replace(NA, "0").astype(np.uint64).to_numpy(), hashes)
    group_text = np.where(group_text == "", task_group, group_text)

    def col(key: str, default: int = -1) -> np.ndarray:
        return np.where(has_info, joined[key].fillna(default).to_numpy().astype(np.int64), default)[order]
    notify = np.where(has_info, joined["notify_id"].fillna(0).to_numpy().astype(np.uint64).view(np.int64), -1)
    put("COMMUNICATION_TASK_INFO", frame_of({
        "name": strings.ids_of(name[order].astype(object)), "globalTaskId": gid[order],
        "taskType": strings.ids_of(hccl_name[order].astype(object)), "planeId": plane[order],
        "groupName": strings.ids_of(group_text[order].astype(object)), "notifyId": notify[order],
        "rdmaType": _enum(rdma, "ENUM_HCCL_RDMA_TYPE", has_info)[order], "srcRank": col("local_rank", 0),
        "dstRank": col("remote_rank", 0),
        "transportType": _enum(joined["transport_type"].fillna(0).to_numpy(), "ENUM_HCCL_TRANSPORT_TYPE", has_info)[order],
        "size": size[order], "dataType": _enum(joined["data_type"].fillna(0).to_numpy(), "ENUM_HCCL_DATA_TYPE", has_info)[order],
        "linkType": _enum(joined["link_type"].fillna(0).to_numpy(), "ENUM_HCCL_LINK_TYPE", has_info)[order],
        "opId": task_op[order], "isMaster": is_master[order], "bandwidth": bandwidth[order] * 1000 * 1000 * 1000}))
    put("KIT_HCCL_TASK", frame_of({
        "globalTaskId": gid[order], "opId": task_op[order], "deviceId": device_id[order],
        "streamId": joined["stream_id"].to_numpy().astype(np.int64)[order],
        "taskId": joined["task_id"].to_numpy().astype(np.int64)[order],
        "contextId": joined["ctx"].to_numpy().astype(np.int64)[order],
        "batchId": joined["batch"].to_numpy().astype(np.int64)[order],
        "startNs": frame["start_ns"].to_numpy()[order], "endNs": frame["end_ns"].to_numpy()[order],
        "hostNs": frame["host_ns"].to_numpy().astype(np.int64)[order],
        "threadId": joined["thread"].to_numpy().astype(np.int64)[order],
        "modelId": joined["model_id"].to_numpy().astype(np.int64)[order],
        "connectionId": joined["node"].to_numpy().astype(np.int64)[order],
        "hcclName": hccl_name[order].astype(object), "groupHash": task_group[order].astype(object),
        "planeId": plane[order], "isMaster": is_master[order],
        "durationEstimated": np.where(has_info, joined["duration_estimated"].fillna(0).to_numpy(), 0.0)[order],
        "localRank": col("local_rank"), "remoteRank": col("remote_rank"), "rankSize": col("rank_size"),
        "notifyId": notify[order], "stage": col("stage"), "role": col("role"), "workFlowMode": col("work_flow_mode"),
        "size": size[order], "reduceOp": col("op_type"), "dataType": col("data_type"), "linkType": col("link_type"),
        "transportType": col("transport_type"), "rdmaType": col("rdma_type"), "bandwidth": bandwidth[order],
        "iteration": iteration[order]}))
    spans_out: Intervals = {}
    op_device = device_id[op_rows["row"].to_numpy()]
    for dev in np.unique(op_device):
        mine = op_device == dev
        spans_out[int(dev)] = (op_rows["start"].to_numpy()[mine].astype(np.int64),
                               op_rows["end"].to_numpy()[mine].astype(np.int64))
    return spans_out


def _write_ops(op_rows: pd.DataFrame, frame: pd.DataFrame, op_of: pd.DataFrame, joined: pd.DataFrame,
               hashes: HashTable, strings: StringPool, put: TableSink) -> None:
    """COMMUNICATION_OP and KIT_HCCL_OP: one row per op (opId order), its fields from its launch
    (hccl_op_info, node_basic_info) and its first task by device start."""
    row = op_rows["row"].to_numpy()
    info = op_of.iloc[row]
    has = info["has_op_info"].to_numpy() == 1
    group_raw = np.where(has, info["group_name"].fillna(0).astype(np.uint64).astype(str).to_numpy(),
                         frame["group"].to_numpy()[row])
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
    last = frame.assign(rank=joined["rank_size"].fillna(0).to_numpy()).sort_values(["host_ns", "start_ns"],
                                                                                    kind="stable")
    rank_of = last.groupby("node", sort=False)["rank"].last()
    rank = rank_of.reindex(frame["node"].to_numpy()[row]).fillna(0).to_numpy().astype(np.int64)
    names = frame["name"].to_numpy()[row]
    device_id = joined["device_id_dev"].to_numpy().astype(np.int64)[row]
    conn = frame["node"].to_numpy()[row].astype(np.int64)
    put("COMMUNICATION_OP", frame_of({
        "opName": strings.ids_of(names.astype(object)), "startNs": op_rows["start"].to_numpy().astype(np.int64),
        "endNs": op_rows["end"].to_numpy().astype(np.int64), "connectionId": conn,
        "groupName": strings.ids_of(group_text.astype(object)), "opId": op_rows["opId"].to_numpy(),
        "relay": relay, "retry": retry, "dataType": data_type, "algType": strings.ids_of(alg.astype(object)),
        "count": count, "opType": strings.ids_of(op_type.astype(object)), "deviceId": device_id, "rankSize": rank}))
    put("KIT_HCCL_OP", frame_of({
        "opId": op_rows["opId"].to_numpy(), "rawName": frame["raw"].to_numpy()[row].astype(object),
        "opName": names.astype(object), "groupHash": group_raw.astype(object), "groupName": group_text.astype(object),
        "opType": op_type.astype(object), "algType": alg.astype(object), "deviceId": device_id,
        "threadId": info["thread"].to_numpy().astype(np.int64),
        "modelId": joined["model_id"].to_numpy().astype(np.int64)[row], "connectionId": conn,
        "launchBeginNs": info["begin_ns"].to_numpy().astype(np.int64),
        "launchEndNs": info["end_ns"].to_numpy().astype(np.int64),
        "startNs": op_rows["start"].to_numpy().astype(np.int64), "endNs": op_rows["end"].to_numpy().astype(np.int64),
        "relay": relay, "retry": retry, "dataType": np.where(has, info["data_type"].fillna(0).to_numpy(), -1)
        .astype(np.int64), "count": np.where(has, info["count"].fillna(0).to_numpy().astype(np.uint64).view(np.int64), -1),
        "rankSize": rank, "groupIndex": _k_of(names), "cppOrder": op_rows["cppOrder"].to_numpy()}))


def _k_of(names: np.ndarray) -> np.ndarray:
    """The `k` of op names `<raw>_<tail>_<k>_<iteration>`."""
    parts: List[str] = [str(s).rsplit("_", 2)[-2] if str(s).count("_") >= 2 else "-1" for s in names.tolist()]
    return np.array([int(p) if p.lstrip("-").isdigit() else -1 for p in parts], dtype=np.int64)


def _reference_op_order(keys: np.ndarray, host_ns: np.ndarray, start_ns: np.ndarray,
                        devices: np.ndarray) -> Dict[str, int]:
    """Each op key's place in the reference C++ path's op list (docs/exports.md, "Communication ops
    that start together"): per device (ascending), its tasks in the order of its HCCL task table
    (hccl_calculator.cpp sorts them by (host time, device start), then std::sort by device start
    alone, unstable), the ops' keys in the order their first task comes, put into an unordered_map
    and read back in its iteration order."""
    out: Dict[str, int] = {}
    for device in np.unique(devices).tolist():
        mine = np.flatnonzero(devices == device)
        by_host = mine[np.lexsort((start_ns[mine], host_ns[mine]))]
        start_rank = np.unique(start_ns[by_host], return_inverse=True)[1].astype(np.int64)
        rows = by_host[cxx_sort_order(start_rank)]
        firsts = [str(k) for k in pd.unique(keys[rows]).tolist()]
        for node in unordered_map_order(firsts):
            out[firsts[node]] = len(out)
    return out
