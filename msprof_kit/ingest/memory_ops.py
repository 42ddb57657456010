"""Operator memory from the host (formats_more.md §2.3-§2.4): GE's task memory reports
(`additional.task_memory_info`: one allocation, size > 0, or release, size < 0, of an op's block)
and the static graphs' memory plans (`additional.static_op_mem`).

Tables written (docs/store.md):
- NPU_OP_MEM, as the reference's C++ path writes it: one row per record at or after the
  collection start (the C++ processor drops earlier ones), in time order, the op named through
  hash_dic (its decimal hash when the dictionary lacks it), type 'allocate' / 'release', size as a
  magnitude, component 'GE';
- KIT_MEMORY_RECORD: every record (memory_record.csv: the Python exporter does not drop early ones);
- KIT_OPERATOR_MEMORY: each allocation with the release that frees it (operator_memory.csv, the
  Python calculator's pairing: the next release of the same (op hash, address, device); a second
  allocation before it replaces the first; an allocation never released keeps 0 as its release);
- KIT_STATIC_OP_MEM: the static graphs' plans (static_op_mem.csv).

The records are few per op (an output and a workspace allocation, their releases), so a stream is
read a chunk at a time but kept whole, only the columns needed, to be ordered and paired at once.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np
import pandas as pd

from ..errors import Diagnostics, MsprofKitError
from ..layout import Collection, data_files
from ..parsers import host as host_parsers
from ..timebase import Clock
from .clocks import host_clock_of
from .columns import Columns, DataFiles, frame_of
from .names import HashTable, group_paths, per_distinct
from .sink import TableSink
from .streams import compact_stream
from .tasks import StringPool

COMPONENT = "GE"  # NPU_OP_MEM.component, memory_record's Component
ALLOCATE, RELEASE = "allocate", "release"  # NPU_OP_MEM.type texts
NODE_END_MAX, NODE_END_SHOWN = 4294967294, 4294967295  # static_op_mem's "to the end" node index, as shown
MEMORY_FIELDS = ("timestamp", "thread_id", "addr", "size", "node_id", "total_allocate", "total_reserve", "device_id")


def _read(files: DataFiles, kind: str, fields: Tuple[str, ...], diag: Diagnostics) -> Optional[Columns]:
    """The `fields` of every record of a host additional kind, unaging files first (each stream's
    bad records reported once it is read); None without records."""
    parts: List[Columns] = []
    for _, paths in group_paths(files, kind):
        stream = compact_stream(kind, paths)
        for arr, offsets in stream.chunks():
            cols = host_parsers.compact_columns(kind, arr, offsets)
            parts.append({k: cols[k] for k in fields})
        diag.extend(stream.issues)
    parts = [p for p in parts if len(p["timestamp"])]
    if not parts:
        return None
    return {k: np.concatenate([p[k] for p in parts]) for k in fields}


def _launched_ops(files: DataFiles) -> Optional[np.ndarray]:
    """The distinct op name hashes of the host's node_basic_info records (the ops it launched),
    a chunk at a time; None without any. (Their bad records were told when the host was read.)"""
    seen: List[np.ndarray] = []
    for _, paths in group_paths(files, "node_basic_info"):
        for arr, _ in compact_stream("node_basic_info", paths).chunks():
            seen.append(np.unique(arr["op_name"]))
    return np.unique(np.concatenate(seen)) if seen else None


def _names(hashes: HashTable, ids: np.ndarray) -> np.ndarray:
    """hash_dic texts of hash ids, None where the dictionary lacks one."""
    return hashes.lookup(ids)


def write_op_memory(coll: Collection, hashes: HashTable, pid: int, start_ns: int, strings: StringPool,
                    put: TableSink, diag: Diagnostics) -> None:
    """Read the host's task_memory_info and static_op_mem records and put NPU_OP_MEM,
    KIT_MEMORY_RECORD, KIT_OPERATOR_MEMORY and KIT_STATIC_OP_MEM (nothing without records).
    `start_ns`: the collection start in local ns (0: unknown, nothing dropped from NPU_OP_MEM).
    Warns of releases that free no allocation, of records whose op hash_dic does not name, and of
    records whose op no node_basic_info record launches (an op the host does not know)."""
    rd = coll.host
    if rd is None:
        return
    quiet = Diagnostics()  # the listing's and the clock's problems were told when the host was read
    files = data_files(rd, quiet)
    where = f"{rd.data_dir}/*.task_memory_info.slice_N"
    mem = _read(files, "task_memory_info", MEMORY_FIELDS, diag)
    static = _read(files, "static_op_mem", ("timestamp", "op_mem_size", "op_name", "life_start", "life_end",
                                            "dyn_op_name", "graph_id"), diag)
    if mem is None and static is None:
        return
    if static is not None:
        _write_static(static, hashes, put)
    if mem is None:
        return
    try:
        clock = host_clock_of(rd, coll, quiet)
    except MsprofKitError as exc:
        diag.warn(f"{where}: the host clock cannot be read ({exc}); operator memory records are not kept")
        return
    _write_records(mem, clock, hashes, pid, start_ns, strings, put, where, diag)
    launched = _launched_ops(files)
    if launched is not None:  # (without node_basic_info there is nothing to check the ops against)
        stray = ~np.isin(mem["node_id"], launched)
        if stray.any():
            diag.warn(f"{where}: {int(stray.sum())} operator memory record(s) belong to an op that no "
                      f"node_basic_info record launches (e.g. hash id {int(mem['node_id'][stray][0])}); kept, "
                      f"as the reference keeps them")


def _or_decimal(texts: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """`texts`, with each id's decimal text where it is None."""
    lost = np.flatnonzero(np.equal(texts, None))
    texts[lost] = np.asarray(ids)[lost].astype(str).astype(object)
    return texts


def _write_static(static: Columns, hashes: HashTable, put: TableSink) -> None:
    """KIT_STATIC_OP_MEM: the op's name (hash_dic, else its decimal hash; 'TOTAL' for hash 0), the
    model's (the dynamic root op's name, '0' for none), graph id, node indexes, size in bytes."""
    op = static["op_name"]
    name = hashes.texts_or_ids(op)
    name[np.asarray(op) == 0] = "TOTAL"
    model = _or_decimal(hashes.lookup(static["dyn_op_name"]), static["dyn_op_name"])
    end = static["life_end"].astype(np.uint64)
    put("KIT_STATIC_OP_MEM", frame_of({
        "opName": name, "modelName": model, "graphId": static["graph_id"].astype(np.int64),
        "nodeIndexStart": static["life_start"].astype(np.int64),
        "nodeIndexEnd": np.where(end == NODE_END_MAX, NODE_END_SHOWN, end).astype(np.int64),
        "size": static["op_mem_size"].astype(np.int64)}))


def _write_records(mem: Columns, clock: Clock, hashes: HashTable, pid: int, start_ns: int,
                   strings: StringPool, put: TableSink, where: str, diag: Diagnostics) -> None:
    """KIT_MEMORY_RECORD, NPU_OP_MEM and (through _write_pairs) KIT_OPERATOR_MEMORY of the task
    memory records `mem` (MEMORY_FIELDS, host ticks), ordered by time first."""
    order = np.argsort(mem["timestamp"], kind="stable")  # the stream's order, by time across its files
    mem = {k: v[order] for k, v in mem.items()}
    ticks: np.ndarray = mem["timestamp"].astype(np.int64)
    ns = clock.to_ns(ticks)
    size: np.ndarray = mem["size"].astype(np.int64)
    device: np.ndarray = mem["device_id"].astype(np.int64)
    names = _names(hashes, mem["node_id"])
    known = ~pd.isnull(names)
    unknown = int((~known).sum())
    if unknown:
        first = int(mem["node_id"][~known][0])
        diag.warn(f"{where}: {unknown} operator memory record(s) name an op that hash_dic lacks (e.g. hash id "
                  f"{first}); kept, named by the hash id in NPU_OP_MEM and left unnamed in operator_memory, "
                  f"as the reference does")
    dec = per_distinct(mem["node_id"], lambda u: str(int(u)), object)
    db_name = np.where(known, names, dec)
    put("KIT_MEMORY_RECORD", frame_of({"timestampNs": ns, "totalAllocate": mem["total_allocate"].astype(np.int64),
                                       "totalReserve": mem["total_reserve"].astype(np.int64), "deviceId": device}))
    keep = ns >= start_ns if start_ns else np.ones(len(ns), dtype=bool)
    kinds = np.array([strings.id(RELEASE), strings.id(ALLOCATE)], dtype=np.int64)
    put("NPU_OP_MEM", frame_of({
        "operatorName": strings.ids_of(db_name[keep].astype(object)) if keep.any() else np.zeros(0, np.int64),
        "addr": mem["addr"][keep].astype(np.uint64).view(np.int64), "type": kinds[(size[keep] >= 0).astype(np.int64)],
        "size": np.abs(size[keep]), "timestampNs": ns[keep],
        "globalTid": (np.int64(pid) << 32) | mem["thread_id"][keep].astype(np.int64),
        "totalAllocate": mem["total_allocate"][keep].astype(np.int64),
        "totalReserve": mem["total_reserve"][keep].astype(np.int64), "component": strings.id(COMPONENT),
        "deviceId": np.where((device[keep] >= 0) & (device[keep] <= 0xFFFF), device[keep], 0xFFFF)}))
    _write_pairs(mem, ticks, ns, size, np.where(known, names, ""), clock, put, where, diag)


def _key_codes(*columns: np.ndarray) -> np.ndarray:
    """One code per distinct tuple of the columns' values (a column's codes combined with the next's
    and renumbered at each step, so the products stay below the number of rows squared)."""
    code, _ = pd.factorize(columns[0])
    for column in columns[1:]:
        values, distinct_values = pd.factorize(column)
        if len(distinct_values) > 1:
            code, _ = pd.factorize(code.astype(np.int64) * len(distinct_values) + values)
    return np.asarray(code, dtype=np.int64)


def _write_pairs(mem: Columns, ticks: np.ndarray, ns: np.ndarray, size: np.ndarray, names: np.ndarray, clock: Clock,
                 put: TableSink, where: str, diag: Diagnostics) -> None:
    """KIT_OPERATOR_MEMORY by the Python calculator's rule, without a loop: records are grouped by
    (op hash, address, device) in time order; a release frees the allocation just before it in its
    group (if the one before is a release, or nothing, it frees nothing: an allocation is freed
    once); an allocation followed by another is replaced; the last allocation of a group, if no
    release follows, is never released. Rows: pairs in release order, then the allocations never
    released in the order the calculator's dict keeps them (where their group's last run of
    allocations began)."""
    live = np.flatnonzero(size != 0)  # size 0: neither
    group = _key_codes(mem["node_id"][live], mem["addr"][live], mem["device_id"][live])
    order = np.lexsort((live, group))  # by group, then time (positions are in time order)
    rec, grp = live[order], group[order]
    alloc = size[rec] > 0
    same_prev: np.ndarray = np.zeros(len(rec), dtype=bool)
    same_prev[1:] = grp[1:] == grp[:-1]
    prev_alloc: np.ndarray = np.zeros(len(rec), dtype=bool)
    prev_alloc[1:] = alloc[:-1]
    paired = ~alloc & same_prev & prev_alloc
    orphan_frees = int((~alloc & ~paired).sum())
    if orphan_frees:
        diag.warn(f"{where}: {orphan_frees} release record(s) free no allocation of the same op, address and "
                  f"device; kept in memory_record and NPU_OP_MEM, left out of operator_memory, as the reference does")
    rel = rec[paired]
    al = rec[np.flatnonzero(paired) - 1]
    by_release = np.argsort(rel, kind="stable")
    rel, al = rel[by_release], al[by_release]
    last: np.ndarray = np.ones(len(rec), dtype=bool)
    last[:-1] = grp[:-1] != grp[1:]
    pending = alloc & last  # allocations no release follows
    # where the calculator's dict placed a pending allocation: the first of its group's last run of allocations
    run_start = alloc & ~(same_prev & prev_alloc)
    start_pos = rec[np.maximum.accumulate(np.where(run_start, np.arange(len(rec)), 0))] if len(rec) else rec
    never = rec[pending]
    never = never[np.argsort(start_pos[pending], kind="stable")]
    n_pairs, n_never = len(rel), len(never)
    first = np.concatenate([al, never])
    release = np.concatenate([rel, np.full(n_never, -1, dtype=np.int64)])
    got = release >= 0
    rel_at = np.where(got, release, 0)
    zero: np.ndarray = np.zeros(n_pairs + n_never, dtype=np.int64)
    put("KIT_OPERATOR_MEMORY", frame_of({
        "name": names[first].astype(object) if len(first) else np.zeros(0, dtype=object),
        "size": size[first], "allocationNs": ns[first],
        "releaseNs": np.where(got, ns[rel_at], zero),
        "durationNs": np.where(got, clock.duration_ns(ticks[rel_at] - ticks[first]), zero),
        "allocationTotalAllocate": mem["total_allocate"][first].astype(np.int64),
        "allocationTotalReserve": mem["total_reserve"][first].astype(np.int64),
        "releaseTotalAllocate": np.where(got, mem["total_allocate"][rel_at].astype(np.int64), zero),
        "releaseTotalReserve": np.where(got, mem["total_reserve"][rel_at].astype(np.int64), zero),
        "deviceId": mem["device_id"][first].astype(np.int64)}))
