"""`ClusterResult`, the contract between the join (phase 2) and the writers (phase 3), and
`load_text_outputs`, which builds one from msprof-analyze's text outputs (the four files of
`msprof-analyze cluster -m all` in text mode) so that the writers can be run and tested from them.

The fields hold exactly what the four files hold (docs/cluster.md):

* `step_trace`: the rows of cluster_step_trace_time.csv, its columns and their order (µs);
* `communication`: cluster_communication.json, `{rank set: {step: {"<op>@<group>": {rank: ...}}}}`;
* `matrix`: cluster_communication_matrix.json, the same nesting with `{"src-dst": link}` leaves;
* `groups`: communication_group.json (`collective`, `p2p`, `comm_group_parallel_info`);
* `hosts`: one row per rank: rankId, deviceId, hostUid, hostName, profilePath (the PROF folder);
* `failed`: PROF folder -> the one-line error of a rank that could not be read;
* `rank_matrix` (optional): global rank -> that rank's own analyze/communication_matrix.json, from
  which cluster_analysis.db picks its matrix samples (the text file keeps other samples).
"""
from __future__ import annotations

import contextlib
import os
import re
import sqlite3
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

import pandas as pd

from ..errors import Diagnostics, NoCollection, NoData, UnreadableFile
from ..files import read_json_object
from ..store.paths import file_uri
from .ranks import find_ranks

JsonDict = Dict[str, Any]

STEP_TRACE_CSV = "cluster_step_trace_time.csv"
COMMUNICATION_JSON = "cluster_communication.json"
MATRIX_JSON = "cluster_communication_matrix.json"
GROUP_JSON = "communication_group.json"
TEXT_FILES = (STEP_TRACE_CSV, COMMUNICATION_JSON, MATRIX_JSON, GROUP_JSON)
DB_NAME = "cluster_analysis.db"  # written beside them by `msprof-kit cluster` (database.py)
STEP_TRACE_COLUMNS = ("Step", "Type", "Index", "Computing", "Communication(Not Overlapped)", "Overlapped",
                      "Communication", "Free", "Stage", "Bubble",
                      "Communication(Not Overlapped and Exclude Receive)", "Preparing")
HOST_COLUMNS = ("rankId", "deviceId", "hostUid", "hostName", "profilePath")
DEVICE_INFO = re.compile(r"^info\.json\.(\d{1,2})$")


def empty_hosts() -> pd.DataFrame:
    """A hosts frame without rows, with HOST_COLUMNS."""
    return pd.DataFrame({"rankId": pd.Series(dtype="int64"), "deviceId": pd.Series(dtype="int64"),
                         "hostUid": pd.Series(dtype=str), "hostName": pd.Series(dtype=str),
                         "profilePath": pd.Series(dtype=str)})


@dataclass
class ClusterResult:
    """Everything the phase-3 writers need, shaped as msprof-analyze's text outputs (module docstring)."""

    step_trace: pd.DataFrame
    communication: JsonDict
    matrix: JsonDict
    groups: JsonDict
    hosts: pd.DataFrame = field(default_factory=empty_hosts)
    failed: Dict[str, str] = field(default_factory=dict)
    # global rank -> that rank's analyze/communication_matrix.json (per op, local ranks), when known:
    # cluster_analysis.db's per-op matrix samples are chosen from it (docs/cluster.md)
    rank_matrix: Dict[int, JsonDict] = field(default_factory=dict)


def _read_json(path: str) -> JsonDict:
    try:
        return read_json_object(path)
    except FileNotFoundError:
        raise NoData("missing; expected msprof-analyze's cluster outputs here", path=path) from None


def read_step_trace(path: str) -> pd.DataFrame:
    """cluster_step_trace_time.csv as written (Step and Type as text, Index as int where it is one)."""
    try:
        frame = pd.read_csv(path, dtype={"Step": str, "Type": str, "Index": str}, keep_default_na=False)
    except FileNotFoundError:
        raise NoData("missing; expected msprof-analyze's cluster outputs here", path=path) from None
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise UnreadableFile(f"not a readable CSV: {str(e).splitlines()[0] if str(e) else e!r}", path=path) from None
    missing = [c for c in STEP_TRACE_COLUMNS if c not in frame.columns]
    if missing:
        raise UnreadableFile(f"not a cluster step trace: no column {', '.join(missing)}", path=path)
    for column in STEP_TRACE_COLUMNS[3:]:
        values = pd.to_numeric(frame[column], errors="coerce")
        if values.isna().any():
            row = int(values.isna().to_numpy().argmax())
            raise UnreadableFile(f"row {row + 2}: column {column} is not a number: {frame[column].iloc[row]!r}",
                                 path=path)
        frame[column] = values.astype("float64")
    return frame


def read_db_hosts(path: str) -> pd.DataFrame:
    """`hosts` from cluster_analysis.db's RankDeviceMap (with HostInfo's host names); empty when
    there is no such file or it has no RankDeviceMap (a job without hosts writes none)."""
    if not os.path.isfile(path):
        return empty_hosts()
    try:
        with contextlib.closing(sqlite3.connect(file_uri(path) + "?mode=ro", uri=True)) as conn:
            tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "RankDeviceMap" not in tables:
                return empty_hosts()
            names = "(SELECT hostName FROM HostInfo h WHERE h.hostUid = m.hostUid)" if "HostInfo" in tables else "''"
            rows = conn.execute(f"SELECT rankId, deviceId, hostUid, {names}, profilePath FROM RankDeviceMap m "
                                "ORDER BY rankId, deviceId").fetchall()
    except sqlite3.Error as e:
        raise UnreadableFile(f"not a readable cluster_analysis.db ({e})", path=path) from None
    if not rows:
        return empty_hosts()
    hosts = pd.DataFrame(rows, columns=list(HOST_COLUMNS))
    numbers = hosts[["rankId", "deviceId"]].apply(pd.to_numeric, errors="coerce")
    bad = (numbers.isna() | (numbers != numbers.round())).any(axis=1)
    if bad.any():
        raise UnreadableFile(f"RankDeviceMap row {int(bad.to_numpy().argmax()) + 1}: rankId and deviceId must be "
                             "integers", path=path)
    hosts = hosts.astype({"rankId": "int64", "deviceId": "int64"})
    hosts[["hostUid", "hostName", "profilePath"]] = hosts[["hostUid", "hostName", "profilePath"]].fillna("").astype(str)
    return hosts


def read_hosts(cluster_dir: str) -> Tuple[pd.DataFrame, Dict[str, str]]:
    """`hosts` and `failed` of the rank PROFs below `cluster_dir`, found as the cluster command
    finds them (ranks.find_ranks: msprof-analyze's rules); a PROF that cannot be read is listed in
    `failed` with its one-line error and the others go on."""
    failed: Dict[str, str] = {}
    try:
        ranks = find_ranks(cluster_dir, Diagnostics(), failed)
    except NoCollection:
        ranks = []
    rows = [{"rankId": r.rank, "deviceId": r.device, "hostUid": r.host_uid, "hostName": r.host_name,
             "profilePath": os.path.abspath(r.path)} for r in ranks]
    hosts = pd.DataFrame(rows, columns=list(HOST_COLUMNS)) if rows else empty_hosts()
    return hosts.sort_values(["rankId", "deviceId"], kind="stable").reset_index(drop=True), failed


def load_text_outputs(folder: str, cluster_dir: Optional[str] = None,
                      rank_matrices: Optional[Mapping[int, str]] = None) -> ClusterResult:
    """A ClusterResult from the four text outputs of `msprof-analyze cluster -m all` in `folder`.

    cluster_dir: `hosts` (and `failed`) from the PROF folders below it; without it `hosts` from
    the RankDeviceMap and HostInfo of a cluster_analysis.db in `folder` (as `msprof-kit cluster`
    writes it), else empty. A PROF's analyze/communication_matrix.json, when it has one, goes into
    `rank_matrix`.
    rank_matrices: global rank -> a communication_matrix.json of that rank, for `rank_matrix`."""
    if not any(os.path.exists(os.path.join(folder, name)) for name in TEXT_FILES):
        raise NoData(f"none of {', '.join(TEXT_FILES)} here", path=folder)
    step_trace = read_step_trace(os.path.join(folder, STEP_TRACE_CSV))
    communication = _read_json(os.path.join(folder, COMMUNICATION_JSON))
    matrix = _read_json(os.path.join(folder, MATRIX_JSON))
    groups = _read_json(os.path.join(folder, GROUP_JSON))
    if cluster_dir is not None:
        hosts, failed = read_hosts(cluster_dir)
    else:
        hosts, failed = read_db_hosts(os.path.join(folder, DB_NAME)), {}
    rank_matrix: Dict[int, JsonDict] = {}
    for rank, prof in zip(hosts["rankId"].tolist(), hosts["profilePath"].tolist()):
        own = os.path.join(str(prof), "analyze", "communication_matrix.json")
        if os.path.isfile(own):
            rank_matrix[int(rank)] = _read_json(own)
    for rank, path in (rank_matrices or {}).items():
        rank_matrix[int(rank)] = _read_json(path)
    return ClusterResult(step_trace, communication, matrix, groups, hosts, failed, rank_matrix)
