"""`cluster_analysis.db`: the tables `msprof-analyze cluster -m all` writes in db mode, made from a
ClusterResult.

Seven tables, with msprof-analyze's names, columns, declared types and units (`TABLES`):

* CommunicationGroupMapping: one row per (type, group): its rank set as "(0,1,...)";
* ClusterCommunicationTime: per rank and op the Communication Time Info (ms; start in µs), ratios
  0, then per (step, rank, group) a "Total Op Info" row with the sums and the ratios (4 decimals);
* ClusterCommunicationBandwidth: per rank, op and transport with traffic, one row per packet size of
  its Size Distribution (count, total duration in ms), then per (group, step, rank, transport,
  packet size) a "Total Op Info" row (size and time summed once per op, bandwidth to 4 decimals);
* ClusterCommunicationMatrix: per (op type, group, link) the samples top1 (lowest bandwidth),
  bottom1..3 (highest, second and third highest), middle, and the total, in global ranks
  (REAL, as msprof-analyze stores them), then per (group, link) a "Total Op Info" row;
* ClusterStepTraceTime: the rows of cluster_step_trace_time.csv (µs), dp/pp/tp_index 0;
* HostInfo, RankDeviceMap: the hosts and each rank's device and PROF folder.

docs/cluster.md says where each value comes from and where it can differ from msprof-analyze's.
"""
from __future__ import annotations

import os
import sqlite3
from typing import Any, Dict, List, Optional, Sequence, Tuple, cast

import numpy as np
import pandas as pd

from ..errors import OutputError
from .result import DB_NAME, ClusterResult, JsonDict
TOTAL = "Total Op Info"
TRANSPORTS = ("RDMA", "HCCS", "PCIE", "SDMA", "SIO")
P2P_PREFIXES = ("hcom_send", "hcom_receive", "hcom_batchsendrecv")
SAMPLES = ("top1", "bottom1", "bottom2", "bottom3", "middle")

# (table, [(column, declared type)], pandas-written): the tables written by pandas' to_sql have its
# quoted DDL, the others msprof-analyze's own (its tables config) -- the DDL is kept as it writes it.
TABLES: List[Tuple[str, List[Tuple[str, str]], bool]] = [
    ("CommunicationGroupMapping",
     [("type", "TEXT"), ("rank_set", "TEXT"), ("group_name", "TEXT"), ("group_id", "TEXT"), ("pg_name", "TEXT")], True),
    ("ClusterCommunicationTime",
     [("step", "TEXT"), ("rank_id", "INTEGER"), ("hccl_op_name", "TEXT"), ("group_name", "TEXT"),
      ("start_timestamp", "REAL"), ("elapsed_time", "REAL"), ("transit_time", "REAL"), ("wait_time", "REAL"),
      ("synchronization_time", "REAL"), ("idle_time", "REAL"), ("synchronization_time_ratio", "REAL"),
      ("wait_time_ratio", "REAL")], True),
    ("ClusterCommunicationBandwidth",
     [("step", "TEXT"), ("rank_id", "INTEGER"), ("hccl_op_name", "TEXT"), ("group_name", "TEXT"),
      ("band_type", "TEXT"), ("transit_size", "REAL"), ("transit_time", "REAL"), ("bandwidth", "REAL"),
      ("large_packet_ratio", "INTEGER"), ("package_size", "REAL"), ("count", "INTEGER"),
      ("total_duration", "REAL")], True),
    ("ClusterCommunicationMatrix",
     [("step", "TEXT"), ("hccl_op_name", "TEXT"), ("group_name", "TEXT"), ("src_rank", "REAL"),
      ("dst_rank", "REAL"), ("transport_type", "TEXT"), ("op_name", "TEXT"), ("transit_size", "REAL"),
      ("transit_time", "REAL"), ("bandwidth", "REAL")], True),
    ("HostInfo", [("hostUid", "TEXT"), ("hostName", "TEXT")], False),
    ("RankDeviceMap", [("rankId", "INTEGER"), ("deviceId", "INTEGER"), ("hostUid", "TEXT"), ("profilePath", "TEXT")],
     False),
    ("ClusterStepTraceTime",
     [("step", "TEXT"), ("type", "TEXT"), ("index", "TEXT"), ("computing", "NUMERIC"),
      ("communication_not_overlapped", "NUMERIC"), ("overlapped", "NUMERIC"), ("communication", "NUMERIC"),
      ("free", "NUMERIC"), ("stage", "NUMERIC"), ("bubble", "NUMERIC"),
      ("communication_not_overlapped_and_exclude_receive", "NUMERIC"), ("preparing", "NUMERIC"),
      ("dp_index", "INTEGER"), ("pp_index", "INTEGER"), ("tp_index", "INTEGER")], False),
]
COLUMNS: Dict[str, List[str]] = {name: [c for c, _ in cols] for name, cols, _ in TABLES}
# cluster_step_trace_time.csv's columns, in ClusterStepTraceTime's order (its first three are texts)
STEP_TRACE_SOURCE = ("Step", "Type", "Index", "Computing", "Communication(Not Overlapped)", "Overlapped",
                     "Communication", "Free", "Stage", "Bubble", "Communication(Not Overlapped and Exclude Receive)",
                     "Preparing")
TIME_INFO = (("start_timestamp", "Start Timestamp(us)"), ("elapsed_time", "Elapse Time(ms)"),
             ("transit_time", "Transit Time(ms)"), ("wait_time", "Wait Time(ms)"),
             ("synchronization_time", "Synchronization Time(ms)"), ("idle_time", "Idle Time(ms)"))


def create_sql(table: str) -> str:
    """The CREATE TABLE statement of `table`, as msprof-analyze's writer issues it."""
    for name, cols, by_pandas in TABLES:
        if name == table:
            if by_pandas:
                body = ",\n  ".join(f'"{c}" {t}' for c, t in cols)
                return f'CREATE TABLE IF NOT EXISTS "{name}" (\n{body}\n)'
            return f"CREATE TABLE {name}(" + ",".join((f'"{c}"' if c == "index" else c) + f" {t}" for c, t in cols) + ")"
    raise KeyError(table)


def _ops(communication: JsonDict) -> List[Tuple[str, str, str, str, JsonDict]]:
    """(step, op name, group, rank, info) of every per-op entry of a cluster_communication.json
    (the Total Op Info entries left out)."""
    out = []
    for steps in communication.values():
        for step, ops in steps.items():
            for key, ranks in ops.items():
                op, _, group = key.rpartition("@")
                if op == TOTAL or not isinstance(ranks, dict):
                    continue
                for rank, info in ranks.items():
                    out.append((str(step), op, group, rank, info))
    return out


def group_mapping(result: ClusterResult) -> pd.DataFrame:
    """CommunicationGroupMapping from communication_group.json, ordered by (type, group_name)."""
    rows = []
    for item in result.groups.get("comm_group_parallel_info", []):
        ranks = sorted(int(r) for r in item.get("rank_set", []))
        rows.append((str(item.get("type", "")), "(" + ",".join(str(r) for r in ranks) + ")",
                     str(item.get("group_name", "")), str(item.get("group_id", "")), str(item.get("pg_name", ""))))
    frame = pd.DataFrame(rows, columns=COLUMNS["CommunicationGroupMapping"]).drop_duplicates()
    return frame.sort_values(["type", "group_name"], kind="stable").reset_index(drop=True)


def communication_time(result: ClusterResult) -> pd.DataFrame:
    """ClusterCommunicationTime: the per-op rows (ratios 0), then the per (step, rank, group) totals."""
    rows = []
    for step, op, group, rank, info in _ops(result.communication):
        time = info.get("Communication Time Info", {})
        rows.append([step, int(rank), op, group] + [float(time.get(key, 0) or 0) for _, key in TIME_INFO])
    names = ["step", "rank_id", "hccl_op_name", "group_name"] + [c for c, _ in TIME_INFO]
    per_op = pd.DataFrame(rows, columns=names)
    per_op = per_op.sort_values("rank_id", kind="stable")
    per_op["synchronization_time_ratio"] = 0.0
    per_op["wait_time_ratio"] = 0.0
    summed = per_op.groupby(["step", "rank_id", "group_name"])[
        ["elapsed_time", "transit_time", "wait_time", "synchronization_time", "idle_time"]].sum().reset_index()
    summed["hccl_op_name"] = TOTAL
    summed["start_timestamp"] = 0.0
    transit = summed["transit_time"].to_numpy(np.float64)
    for ratio, part in (("synchronization_time_ratio", "synchronization_time"), ("wait_time_ratio", "wait_time")):
        value = summed[part].to_numpy(np.float64)
        whole = value + transit
        summed[ratio] = np.round(np.divide(value, whole, out=np.zeros_like(value), where=whole != 0), 4)
    return pd.concat([per_op, summed], ignore_index=True)[COLUMNS["ClusterCommunicationTime"]]


def communication_bandwidth(result: ClusterResult) -> pd.DataFrame:
    """ClusterCommunicationBandwidth: per rank, op and transport with traffic, a row per packet
    size (one with packet size 0 when it has no Size Distribution), then the totals."""
    rows: List[List[Any]] = []
    for step, op, group, rank, info in _ops(result.communication):
        for transport, band in info.get("Communication Bandwidth Info", {}).items():
            size = float(band.get("Transit Size(MB)", 0) or 0)
            time = float(band.get("Transit Time(ms)", 0) or 0)
            bandwidth = float(band.get("Bandwidth(GB/s)", 0) or 0)
            large = band.get("Large Packet Ratio", 0) or 0
            if size + time + bandwidth + float(large) == 0:  # no traffic: the reference keeps no row
                continue
            head = [step, int(rank), op, group, transport, size, time, bandwidth, large]
            dist = band.get("Size Distribution") or {}
            if not dist:
                rows.append(head + [0.0, 0, 0.0])
            for package, (count, duration) in dist.items():
                rows.append(head + [float(package), int(count), float(duration)])
    per_op = pd.DataFrame(rows, columns=COLUMNS["ClusterCommunicationBandwidth"])
    per_op = per_op.sort_values("rank_id", kind="stable").reset_index(drop=True)
    keys = ["group_name", "step", "rank_id", "band_type"]
    once = per_op.drop_duplicates(keys + ["hccl_op_name"])  # an op's size and time count once
    sums = once.groupby(keys)[["transit_size", "transit_time"]].sum().reset_index()
    total = per_op.groupby(keys + ["package_size"])[["count", "total_duration"]].sum().reset_index()
    total = total.merge(sums, on=keys, how="left")
    size = total["transit_size"].to_numpy(np.float64)
    time = total["transit_time"].to_numpy(np.float64)
    total["bandwidth"] = np.round(np.divide(size, time, out=np.zeros_like(size), where=time != 0), 4)
    total["large_packet_ratio"] = 0
    total["hccl_op_name"] = TOTAL
    return pd.concat([per_op, total[COLUMNS["ClusterCommunicationBandwidth"]]], ignore_index=True)


def _op_type(op: str) -> str:
    return op.split("__")[0]


def _rank_links(rank_matrix: Dict[int, JsonDict]) -> pd.DataFrame:
    """Every (rank, op, link) of the ranks' own communication_matrix.json files, local ranks."""
    rows = []
    for rank in sorted(rank_matrix):
        for key, links in rank_matrix[rank].items():
            if "@" not in key or not isinstance(links, dict):
                continue  # "Total HCCL Operators"
            op, _, group = key.rpartition("@")
            for link, value in links.items():
                src, _, dst = str(link).partition("-")
                rows.append((rank, op, group, src, dst, str(value.get("Transport Type", "")),
                             float(value.get("Transit Size(MB)", 0) or 0), float(value.get("Transit Time(ms)", 0) or 0),
                             float(value.get("Bandwidth(GB/s)", 0) or 0)))
    return pd.DataFrame(rows, columns=["rank", "op_name", "group_name", "src", "dst", "transport_type",
                                       "transit_size", "transit_time", "bandwidth"])


def _samples(links: pd.DataFrame) -> pd.DataFrame:
    """Per rank and (op type, group, link): the samples msprof-analyze keeps (by bandwidth, lowest
    first: top1 the lowest, bottom1..3 the highest three, middle the one at n // 2) and the total."""
    keys = ["rank", "group_name", "hccl_op_name", "src", "dst"]
    ordered = links.sort_values(keys + ["bandwidth"], kind="stable").reset_index(drop=True)
    grouped = ordered.groupby(keys, sort=False)
    position = grouped.cumcount().to_numpy()
    size = grouped["bandwidth"].transform("size").to_numpy()
    picks = {"top1": position == 0, "bottom1": position == size - 1,
             "bottom2": (size > 1) & (position == size - 2), "bottom3": (size > 2) & (position == size - 3),
             "middle": position == size // 2}
    parts = []
    for order, (sample, mask) in enumerate(picks.items()):
        part = ordered[mask].copy()
        part["sample"] = sample
        part["sample_order"] = order
        parts.append(part)
    example = pd.concat(parts).sort_values(keys + ["sample_order"], kind="stable")
    example["hccl_op_name"] = example["hccl_op_name"] + "-" + example["sample"]
    total = ordered.groupby(keys, sort=False).agg(transport_type=("transport_type", "first"),
                                                 transit_size=("transit_size", "sum"),
                                                 transit_time=("transit_time", "sum")).reset_index()
    total["op_name"] = None
    total["hccl_op_name"] = total["hccl_op_name"] + "-total"
    columns = keys + ["transport_type", "op_name", "transit_size", "transit_time"]
    return pd.concat([example[columns], total[columns]], ignore_index=True)


def _global_ranks(links: pd.DataFrame) -> Dict[Tuple[str, str], int]:
    """(group, local rank) -> global rank: the rank whose own file has the local link src-src."""
    same = (links["src"] == links["dst"]).to_numpy(bool)
    local = links.loc[same].drop_duplicates(["group_name", "src"])
    return {(g, s): int(r) for g, s, r in zip(local["group_name"], local["src"], local["rank"])}


def _matrix_from_ranks(result: ClusterResult) -> pd.DataFrame:
    links = _rank_links(result.rank_matrix)
    links["hccl_op_name"] = links["op_name"].map(_op_type)
    sampled = _samples(links)
    sampled["step"] = "step"
    merged = sampled.groupby(["step", "hccl_op_name", "group_name", "src", "dst"], sort=False).agg(
        transport_type=("transport_type", "first"), op_name=("op_name", "first"),
        transit_size=("transit_size", "sum"), transit_time=("transit_time", "sum")).reset_index()
    to_global = _global_ranks(links)
    src = [to_global.get(k) for k in zip(merged["group_name"], merged["src"])]
    dst = [to_global.get(k) for k in zip(merged["group_name"], merged["dst"])]
    merged["src_rank"] = pd.array(src, dtype="Float64").to_numpy(np.float64, na_value=np.nan)
    merged["dst_rank"] = pd.array(dst, dtype="Float64").to_numpy(np.float64, na_value=np.nan)
    merged = merged[merged["src_rank"].notna() & merged["dst_rank"].notna()].reset_index(drop=True)
    size = merged["transit_size"].to_numpy(np.float64)
    time = merged["transit_time"].to_numpy(np.float64)
    merged["bandwidth"] = np.divide(size, time, out=np.zeros_like(size), where=time != 0)
    return merged


def _matrix_from_text(result: ClusterResult) -> pd.DataFrame:
    """The matrix rows the text file can give without the ranks' own files: its lowest (text
    bottom1 = db top1), highest (text top1 = db bottom1) and total samples; db's middle and
    bottom2/3 are other samples than the text's and are left out (docs/cluster.md)."""
    rename = {"bottom1": "top1", "top1": "bottom1", "total": "total"}
    rows = []
    for steps in result.matrix.values():
        for step, ops in steps.items():
            types: Dict[Tuple[str, str], str] = {}
            for key, links in ops.items():  # the op type's name as db spells it, from an op name
                base, _, group = key.rpartition("@")
                for value in links.values():
                    if value.get("Op Name"):
                        types[(base.rpartition("-")[0], group)] = _op_type(str(value["Op Name"]))
            for key, links in ops.items():
                base, _, group = key.rpartition("@")
                kind, _, sample = base.rpartition("-")
                if base == TOTAL or sample not in rename:
                    continue
                name = types.get((kind, group), kind) + "-" + rename[sample]
                for link, value in links.items():
                    src, _, dst = str(link).partition("-")
                    rows.append((str(step), name, group, float(src), float(dst), str(value.get("Transport Type", "")),
                                 (value.get("Op Name") or None) if sample != "total" else None,
                                 float(value.get("Transit Size(MB)", 0) or 0),
                                 float(value.get("Transit Time(ms)", 0) or 0)))
    merged = pd.DataFrame(rows, columns=["step", "hccl_op_name", "group_name", "src_rank", "dst_rank",
                                         "transport_type", "op_name", "transit_size", "transit_time"])
    size = merged["transit_size"].to_numpy(np.float64)
    time = merged["transit_time"].to_numpy(np.float64)
    merged["bandwidth"] = np.divide(size, time, out=np.zeros_like(size), where=time != 0)
    return merged


def communication_matrix(result: ClusterResult) -> pd.DataFrame:
    """ClusterCommunicationMatrix: the samples of every (op type, group, link) in global ranks,
    then per (group, link) the "Total Op Info" row summing the op types' totals."""
    merged = _matrix_from_ranks(result) if result.rank_matrix else _matrix_from_text(result)
    totals = merged[merged["hccl_op_name"].str.endswith("-total")]
    total = totals.groupby(["group_name", "step", "src_rank", "dst_rank"], sort=False).agg(
        transport_type=("transport_type", "first"), op_name=("op_name", "first"),
        transit_size=("transit_size", "sum"), transit_time=("transit_time", "sum")).reset_index()
    total["hccl_op_name"] = TOTAL
    with np.errstate(divide="ignore", invalid="ignore"):  # as msprof-analyze: x / 0 is inf (NaN for 0 / 0)
        total["bandwidth"] = total["transit_size"].to_numpy(np.float64) / total["transit_time"].to_numpy(np.float64)
    columns = COLUMNS["ClusterCommunicationMatrix"]
    # a list of labels selects a frame (pandas-stubs type the concatenation as a Series)
    return cast(pd.DataFrame, pd.concat([merged.loc[:, columns], total.loc[:, columns]], ignore_index=True))


def step_trace_time(result: ClusterResult) -> pd.DataFrame:
    """ClusterStepTraceTime: cluster_step_trace_time.csv's rows, Step empty -> NULL, dp/pp/tp 0."""
    frame = result.step_trace
    out = pd.DataFrame({name: frame[source] for name, source in zip(COLUMNS["ClusterStepTraceTime"],
                                                                     STEP_TRACE_SOURCE)})
    out["step"] = [None if (v is None or v == "" or (isinstance(v, float) and np.isnan(v))) else str(v)
                   for v in out["step"]]
    out["type"] = out["type"].astype(str)
    out["index"] = out["index"].astype(str)
    for column in ("dp_index", "pp_index", "tp_index"):
        out[column] = 0
    return out


def host_tables(result: ClusterResult) -> Tuple[pd.DataFrame, pd.DataFrame]:
    """HostInfo (one row per hostUid, in rank order) and RankDeviceMap (by rank, then device)."""
    hosts = result.hosts.sort_values(["rankId", "deviceId"], kind="stable")
    info = hosts[["hostUid", "hostName"]].astype(str).drop_duplicates("hostUid").reset_index(drop=True)
    ranks = hosts[["rankId", "deviceId", "hostUid", "profilePath"]].reset_index(drop=True)
    return info, ranks


def cluster_tables(result: ClusterResult) -> Dict[str, pd.DataFrame]:
    """Every table of cluster_analysis.db, by name, in the order they are written (tables without
    data are left out: no hosts, no HostInfo / RankDeviceMap; no communication, no communication tables)."""
    tables: Dict[str, pd.DataFrame] = {}
    if result.groups.get("comm_group_parallel_info"):
        tables["CommunicationGroupMapping"] = group_mapping(result)
    if result.communication:
        tables["ClusterCommunicationTime"] = communication_time(result)
        tables["ClusterCommunicationBandwidth"] = communication_bandwidth(result)
    if result.matrix or result.rank_matrix:
        tables["ClusterCommunicationMatrix"] = communication_matrix(result)
    if not result.hosts.empty:
        tables["HostInfo"], tables["RankDeviceMap"] = host_tables(result)
    if not result.step_trace.empty:
        tables["ClusterStepTraceTime"] = step_trace_time(result)
    return tables


def _cell(value: object) -> Optional[object]:
    """A value as sqlite3 takes it: numpy scalars as Python numbers, NaN and None as NULL."""
    if value is None:
        return None
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if np.isnan(value) else float(value)
    return value


def _insert(conn: sqlite3.Connection, name: str, frame: pd.DataFrame) -> None:
    columns: Sequence[str] = COLUMNS[name]
    marks = ",".join("?" * len(columns))
    quoted = ",".join(f'"{c}"' for c in columns)
    rows = [tuple(_cell(v) for v in row) for row in frame[list(columns)].itertuples(index=False, name=None)]
    conn.executemany(f'INSERT INTO "{name}" ({quoted}) VALUES ({marks})', rows)


def write_cluster_db(result: ClusterResult, out_dir: str) -> str:
    """Write `out_dir`/cluster_analysis.db (replacing one there) from `result`; returns its path.
    Written to a temporary name in one transaction, then renamed."""
    tables = cluster_tables(result)
    path = os.path.join(out_dir, DB_NAME)
    partial = path + ".partial"
    try:
        os.makedirs(out_dir, exist_ok=True)
        if os.path.exists(partial):
            os.remove(partial)
        conn = sqlite3.connect(partial)
        try:
            with conn:
                for name, frame in tables.items():
                    conn.execute(create_sql(name))
                    _insert(conn, name, frame)
        finally:
            conn.close()
        os.replace(partial, path)
    except (OSError, sqlite3.Error) as e:
        raise OutputError(f"cannot write {DB_NAME}: {e}", path=out_dir) from None
    return path
