"""cluster_analysis.db (msprof_kit/cluster/database.py) against msprof-analyze's own, golden
910b_hccl_8ranks/msprof_analyze/db_all/cluster_analysis.db, made from the text outputs of the same
run (text_all/), the ranks' PROF folders (hosts) and their analyze/communication_matrix.json
(reference_rank<R>/): table by table the same DDL, columns, storage classes, row count, and rows
matched by their key with numbers within 1e-6 relative or 1 µs (ClusterStepTraceTime: msprof-analyze
computes the db one from TASK intervals, the text one from the timeline; they differ by < 1 µs)."""
from __future__ import annotations

import glob
import os
import sqlite3
from typing import Dict, List

import numpy as np
import pandas as pd
import pytest

from conftest import GOLDEN, needs_shared

from msprof_kit.cluster.database import (COLUMNS, TABLES, cluster_tables, communication_bandwidth,
                                         communication_time, write_cluster_db)
from msprof_kit.cluster.result import ClusterResult, load_text_outputs
from msprof_kit.errors import NoData, UnreadableFile

CASE = os.path.join(GOLDEN, "910b_hccl_8ranks")
TEXT = os.path.join(CASE, "msprof_analyze", "text_all")
DB = os.path.join(CASE, "msprof_analyze", "db_all", "cluster_analysis.db")
KEYS: Dict[str, List[str]] = {
    "CommunicationGroupMapping": ["type", "group_name"],
    "ClusterCommunicationTime": ["step", "rank_id", "hccl_op_name", "group_name"],
    "ClusterCommunicationBandwidth": ["step", "rank_id", "hccl_op_name", "group_name", "band_type", "package_size"],
    "ClusterCommunicationMatrix": ["step", "hccl_op_name", "group_name", "src_rank", "dst_rank"],
    "HostInfo": ["hostUid"],
    "RankDeviceMap": ["rankId"],
    "ClusterStepTraceTime": ["index"],
}
STEP_TRACE_SLACK = 1.0  # µs


def golden_result(with_rank_matrix: bool = True) -> ClusterResult:
    cluster = glob.glob(os.path.join(CASE, "input", "CLUSTER_*"))[0]
    matrices = {r: os.path.join(CASE, f"reference_rank{r}", "communication_matrix.json") for r in range(8)}
    return load_text_outputs(TEXT, cluster, matrices if with_rank_matrix else None)


def read(path: str, table: str) -> pd.DataFrame:
    with sqlite3.connect(path) as conn:
        return pd.read_sql(f'SELECT * FROM "{table}"', conn)


def storage(path: str, table: str) -> Dict[str, set]:
    with sqlite3.connect(path) as conn:
        return {c: {t for (t,) in conn.execute(f'SELECT DISTINCT typeof("{c}") FROM "{table}"')}
                for c in COLUMNS[table]}


def assert_rows_equal(ours: pd.DataFrame, theirs: pd.DataFrame, table: str) -> None:
    keys = KEYS[table]
    assert list(ours.columns) == list(theirs.columns), table
    assert len(ours) == len(theirs), table
    assert not ours.duplicated(keys).any() and not theirs.duplicated(keys).any(), table
    joined = theirs.merge(ours, on=keys, how="outer", suffixes=("_ref", "_ours"), indicator=True)
    unmatched = joined[joined["_merge"] != "both"]
    assert unmatched.empty, f"{table}: rows on one side only:\n{unmatched[keys + ['_merge']]}"
    for column in ours.columns:
        if column in keys:
            continue
        ref, got = joined[column + "_ref"], joined[column + "_ours"]
        if ref.dtype.kind in "if" or got.dtype.kind in "if":
            a, b = ref.to_numpy(np.float64), got.to_numpy(np.float64)
            slack = STEP_TRACE_SLACK if table == "ClusterStepTraceTime" else 0.0
            close = np.isclose(a, b, rtol=1e-6, atol=slack) | (np.isnan(a) & np.isnan(b))
            assert close.all(), f"{table}.{column}: {joined.loc[~close, keys + [column + '_ref', column + '_ours']]}"
        else:
            same = (ref.fillna("<NULL>").astype(str) == got.fillna("<NULL>").astype(str))
            assert same.all(), f"{table}.{column}: {joined.loc[~same, keys + [column + '_ref', column + '_ours']]}"


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> str:
    if not os.path.isdir(CASE):
        pytest.skip("../shared/golden is not beside the repo")
    return write_cluster_db(golden_result(), str(tmp_path_factory.mktemp("cluster")))


@needs_shared
@pytest.mark.parametrize("table", [name for name, _, _ in TABLES])
def test_table_equals_msprof_analyze(written: str, table: str):
    with sqlite3.connect(written) as ours, sqlite3.connect(DB) as theirs:
        sql = "SELECT sql FROM sqlite_master WHERE name = ?"
        assert ours.execute(sql, (table,)).fetchone() == theirs.execute(sql, (table,)).fetchone()
    assert storage(written, table) == storage(DB, table)
    got, ref = read(written, table), read(DB, table)
    if table == "RankDeviceMap":  # absolute input paths: compare the PROF folder names
        got["profilePath"] = got["profilePath"].map(os.path.basename)
        ref["profilePath"] = ref["profilePath"].map(os.path.basename)
    assert_rows_equal(got, ref, table)


@needs_shared
def test_same_tables_and_nothing_else(written: str):
    with sqlite3.connect(written) as ours, sqlite3.connect(DB) as theirs:
        names = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
        assert ours.execute(names).fetchall() == theirs.execute(names).fetchall()


@needs_shared
def test_matrix_from_the_text_alone_keeps_the_samples_it_can(tmp_path):
    """Without the ranks' own matrices the text's lowest, highest and total samples become db's top1,
    bottom1 and total (the text labels them the other way round); db's middle and bottom2/3 are other
    samples than the text keeps and are left out. Where two ops of a link tie on bandwidth the text
    keeps the later as its lowest and msprof-analyze's db the earlier: two rows name another op."""
    got = cluster_tables(golden_result(with_rank_matrix=False))["ClusterCommunicationMatrix"]
    ref = read(DB, "ClusterCommunicationMatrix")
    kept = ref[~ref["hccl_op_name"].str.contains("middle|bottom2|bottom3")].reset_index(drop=True)
    got = got.astype({"transit_size": float, "transit_time": float, "bandwidth": float}).reset_index(drop=True)
    keys = KEYS["ClusterCommunicationMatrix"]
    joined = kept.merge(got, on=keys, suffixes=("_ref", "_ours"))
    other = joined[joined["op_name_ref"].fillna("") != joined["op_name_ours"].fillna("")]
    assert sorted(zip(other["src_rank"], other["op_name_ref"], other["op_name_ours"])) == [
        (0.0, "hcom_allReduce__483_2_1", "hcom_allReduce__483_7_1"),  # both 28.3969 GB/s on 0-1
        (3.0, "hcom_allReduce__483_0_1", "hcom_allReduce__483_5_1")]  # both 28.5738 GB/s on 3-4
    assert_rows_equal(got.drop(columns="op_name"), kept.drop(columns="op_name"), "ClusterCommunicationMatrix")


@needs_shared
def test_hand_checked_rows():
    result = golden_result()
    time = communication_time(result).set_index(["rank_id", "hccl_op_name", "group_name"])
    total = time.loc[(1, "Total Op Info", "7415574198778220483")]
    # rank 1's all-reduces: wait 11.6034 ms, transit 1.3302 ms -> 11.6034 / 12.9336; sync 8.12138 / 9.45158
    assert total["wait_time"] == pytest.approx(11.6034)
    assert total["wait_time_ratio"] == round(11.6034 / (11.6034 + 1.3302), 4) == 0.8972
    assert total["synchronization_time_ratio"] == round(8.12138 / (8.12138 + 1.3302), 4) == 0.8593
    per_op = time.loc[(1, "hcom_allReduce__483_0_1", "7415574198778220483")]
    assert per_op["start_timestamp"] == pytest.approx(1700902984100588.2, abs=0.1)  # µs, as the JSON has it
    assert per_op["wait_time_ratio"] == 0.0
    band = communication_bandwidth(result)
    rank2 = band[(band["rank_id"] == 2) & (band["hccl_op_name"] == "Total Op Info") & (band["band_type"] == "RDMA")]
    # two all-gathers (1.835008 + 3.670016 MB) and the send (0.131072 MB), each counted once
    assert rank2["transit_size"].tolist() == pytest.approx([5.636096] * 3)
    assert rank2["package_size"].tolist() == pytest.approx([0.131072, 0.262144, 0.524288])
    assert rank2["count"].tolist() == [1, 7, 7]


def test_missing_text_output_is_one_line(tmp_path):
    with pytest.raises(NoData) as err:
        load_text_outputs(str(tmp_path))
    assert str(err.value) == f"{tmp_path}: none of cluster_step_trace_time.csv, cluster_communication.json, " \
                             "cluster_communication_matrix.json, communication_group.json here"
    (tmp_path / "cluster_communication.json").write_text("{}")
    with pytest.raises(NoData) as err:
        load_text_outputs(str(tmp_path))
    assert str(err.value) == f"{tmp_path}/cluster_step_trace_time.csv: missing; expected msprof-analyze's " \
                             "cluster outputs here"


def test_bad_json_is_one_line(tmp_path):
    (tmp_path / "cluster_step_trace_time.csv").write_text(
        "Step,Type,Index,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
        "Communication(Not Overlapped and Exclude Receive),Preparing\n,rank,0,1,2,3,4,5,6,7,8,0\n")
    (tmp_path / "cluster_communication.json").write_text("{not json")
    with pytest.raises(UnreadableFile) as err:
        load_text_outputs(str(tmp_path))
    assert str(err.value).startswith(f"{tmp_path}/cluster_communication.json: not JSON: ")
    assert "\n" not in str(err.value)


def test_unreadable_rank_is_listed_and_the_rest_go_on(tmp_path):
    good = tmp_path / "CLUSTER" / "PROF_1" / "device_3"
    good.mkdir(parents=True)
    (good / "info.json.3").write_text('{"rank_id": 5, "hostUid": "77", "hostname": "n1"}')
    bad = tmp_path / "CLUSTER" / "PROF_2" / "device_0"
    bad.mkdir(parents=True)
    (bad / "info.json.0").write_text("{oops")
    from msprof_kit.cluster.result import read_hosts
    hosts, failed = read_hosts(str(tmp_path / "CLUSTER"))
    assert hosts[["rankId", "deviceId", "hostUid", "hostName"]].values.tolist() == [[5, 3, "77", "n1"]]
    assert list(failed) == [str(tmp_path / "CLUSTER" / "PROF_2")]
    assert failed[str(tmp_path / "CLUSTER" / "PROF_2")].startswith(f"{bad}/info.json.0: cannot read the rank's info.json (")


@needs_shared
def test_hosts_of_text_outputs_from_the_db_beside_them(tmp_path):
    """Without the PROF folders the hosts come from a cluster_analysis.db in the same folder
    (RankDeviceMap + HostInfo), here msprof-analyze's own: those of the PROF folders themselves."""
    import shutil
    for name in os.listdir(TEXT):
        shutil.copy(os.path.join(TEXT, name), tmp_path / name)
    assert load_text_outputs(str(tmp_path)).hosts.empty
    shutil.copy(DB, tmp_path / "cluster_analysis.db")
    hosts = load_text_outputs(str(tmp_path)).hosts
    from_profs = golden_result().hosts
    assert hosts["rankId"].tolist() == from_profs["rankId"].tolist() == list(range(8))
    columns = ["deviceId", "hostUid", "hostName"]
    assert hosts[columns].values.tolist() == from_profs[columns].values.tolist()
    assert [os.path.basename(p) for p in hosts["profilePath"]] == \
        [os.path.basename(p) for p in from_profs["profilePath"]]


@needs_shared
@pytest.mark.parametrize("damage, says", [
    ("garbage", "not a readable cluster_analysis.db (file is not a database)"),
    ("rank", "RankDeviceMap row 2: rankId and deviceId must be integers"),
])
def test_a_bad_db_beside_the_text_outputs_is_one_line(tmp_path, damage, says):
    import shutil
    for name in os.listdir(TEXT):
        shutil.copy(os.path.join(TEXT, name), tmp_path / name)
    db = tmp_path / "cluster_analysis.db"
    if damage == "garbage":
        db.write_bytes(b"not sqlite at all" * 100)
    else:
        shutil.copy(DB, db)
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE RankDeviceMap SET rankId = 1.5 WHERE rankId = 1")
        conn.close()
    before = db.read_bytes()
    with pytest.raises(UnreadableFile) as err:
        load_text_outputs(str(tmp_path))
    assert str(err.value) == f"{db}: {says}"
    assert db.read_bytes() == before
