"""msprof-kit cluster, phases 0-2 and the text outputs (msprof_kit/cluster/ranks.py, rank_tables.py,
join.py, text_outputs.py) on golden/910b_hccl_8ranks: from the raw ranks (a fresh copy, imported
here) to the four files msprof-analyze 26.2.0 wrote in text mode (msprof_analyze/text_all/).
Compared as issue 28 asks (CSV rows matched by rank, µs within 1 µs; JSON with the same keys at
every level, numbers within 1e-6 relative), byte for byte when the ranks come in msprof-analyze's
order, and against numbers checked by hand; then a damaged rank, and the rank-finding rules."""
from __future__ import annotations

import csv
import json
import os
import pickle
import shutil
import stat
from typing import Any, Dict, List

import pytest

from conftest import GOLDEN, bench_module, needs_shared

from msprof_kit.cluster.join import ClusterResult, join
from msprof_kit.cluster.rank_tables import RankTables, rank_tables
from msprof_kit.cluster.ranks import find_ranks, read_rank
from msprof_kit.cluster.result import load_text_outputs
from msprof_kit.cluster.text_outputs import TEXT_FILES, write_text_outputs
from msprof_kit.errors import Diagnostics, MsprofKitError, NoCollection

CASE = os.path.join(GOLDEN, "910b_hccl_8ranks")
TEXT_ALL = os.path.join(CASE, "msprof_analyze", "text_all")
GOLDEN_ORDER = [1, 5, 0, 3, 6, 4, 7, 2]  # msprof-analyze's walk order when it ran (cluster_step_trace_time.csv)
RANK_OF = {"CNBRIEOF": 0, "QMICLFRO": 1, "LOPHHPMO": 2, "RNODQCKG": 3, "CAHHAERC": 4, "IDBQOHND": 5, "KBFJHQQJ": 6,
           "AHBRRNPN": 7}
WORLD, SECOND = "7415574198778220483", "3269652295830915134"  # hccl_world_group, the all-gather/send group
ALL = "(0, 1, 2, 3, 4, 5, 6, 7)"


def _copy_cluster(dest: str) -> str:
    src = os.path.join(CASE, "input")
    shutil.copytree(src, dest, dirs_exist_ok=True)
    for root, dirs, files in os.walk(dest):
        for name in dirs + files:
            p = os.path.join(root, name)
            os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR)
    (cluster,) = [os.path.join(dest, n) for n in os.listdir(dest) if n.startswith("CLUSTER_")]
    return cluster


def _prof(cluster: str, rank: int) -> str:
    (name,) = [n for n in os.listdir(cluster) if RANK_OF.get(n.rsplit("_", 1)[-1]) == rank]
    return os.path.join(cluster, name)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if not os.path.isdir(CASE):
        pytest.skip("../shared/golden is not beside the repo")
    cluster = _copy_cluster(str(tmp_path_factory.mktemp("cluster")))
    diag = Diagnostics()
    ranks = find_ranks(cluster, diag)
    tables = [rank_tables(r.path) for r in ranks]  # sequentially: no engine here
    result = join(tables, {}, diag)
    out = str(tmp_path_factory.mktemp("out"))
    written = write_text_outputs(result, out)
    return {"cluster": cluster, "ranks": ranks, "tables": tables, "result": result, "out": out, "written": written,
            "diag": diag}


def _same(ours: Any, theirs: Any) -> List[str]:
    """Differences between two JSON values: keys at every level, numbers within 1e-6 relative (the
    rules bench/cluster.py's --compare applies)."""
    return list(bench_module("cluster").json_differences(ours, theirs))


def _load(folder: str, name: str) -> Any:
    with open(os.path.join(folder, name), encoding="utf-8") as f:
        return json.load(f)


def _csv_rows(folder: str) -> Dict[int, Dict[str, str]]:
    with open(os.path.join(folder, "cluster_step_trace_time.csv"), newline="", encoding="utf-8") as f:
        return {int(row["Index"]): row for row in csv.DictReader(f)}


@needs_shared
def test_four_files_written(run):
    assert sorted(os.path.basename(p) for p in run["written"]) == sorted(TEXT_FILES)
    assert not [n for n in os.listdir(run["out"]) if n.startswith(".")]  # no temporary file left


@needs_shared
def test_step_trace_equal_by_rank(run):
    ours, theirs = _csv_rows(run["out"]), _csv_rows(TEXT_ALL)
    assert sorted(ours) == sorted(theirs) == list(range(8))
    with open(os.path.join(TEXT_ALL, "cluster_step_trace_time.csv"), newline="") as f:
        header = next(csv.reader(f))
    with open(os.path.join(run["out"], "cluster_step_trace_time.csv"), newline="") as f:
        assert next(csv.reader(f)) == header
    for rank, row in theirs.items():
        mine = ours[rank]
        assert mine["Step"] == row["Step"] == "" and mine["Type"] == row["Type"] == "rank"
        for column in header[3:]:
            assert abs(float(mine[column]) - float(row[column])) <= 1.0, (rank, column)


@needs_shared
@pytest.mark.parametrize("name", ["cluster_communication.json", "cluster_communication_matrix.json",
                                  "communication_group.json"])
def test_json_equal(run, name):
    assert _same(_load(run["out"], name), _load(TEXT_ALL, name)) == []


@needs_shared
def test_byte_identical_in_its_rank_order(run):
    """With the ranks in the order msprof-analyze met them, the files are the very bytes it wrote."""
    if [r.rank for r in run["ranks"]] != GOLDEN_ORDER:
        pytest.skip("this file system lists the PROF folders in another order than msprof-analyze's run")
    for name in TEXT_FILES:
        with open(os.path.join(run["out"], name), "rb") as ours, open(os.path.join(TEXT_ALL, name), "rb") as theirs:
            assert ours.read() == theirs.read(), name


@needs_shared
def test_hand_checked_numbers(run):
    rows = _csv_rows(run["out"])
    # rank 1's Bubble is its one hcom_receive op of the reference's own timeline (dur in µs)
    with open(os.path.join(CASE, "reference_rank1", "msprof.json"), encoding="utf-8") as f:
        receive = [e for e in json.load(f) if str(e.get("name", "")).startswith("hcom_receive")]
    assert len(receive) == 1 and float(rows[1]["Bubble"]) == pytest.approx(float(receive[0]["dur"]), abs=1e-9)
    assert float(rows[0]["Bubble"]) == 0.0  # rank 0 sends
    for row in rows.values():
        compute, comm, not_over, free, bubble = (float(row[c]) for c in (
            "Computing", "Communication", "Communication(Not Overlapped)", "Free", "Bubble"))
        assert float(row["Overlapped"]) == pytest.approx(comm - not_over)
        assert float(row["Stage"]) == pytest.approx(free + compute + not_over - bubble)
        assert float(row["Communication(Not Overlapped and Exclude Receive)"]) == pytest.approx(not_over - bubble)
    # the planted slow rank 2 computes the most and waits the least
    assert max(rows, key=lambda r: float(rows[r]["Computing"])) == 2
    assert min(rows, key=lambda r: float(rows[r]["Communication(Not Overlapped)"])) == 2
    comm = run["result"].communication[ALL]["step"]
    # rank 3's total over the world group: the sum of its ten all-reduces' elapse times
    mine = [v["3"]["Communication Time Info"]["Elapse Time(ms)"] for k, v in comm.items()
            if k.startswith("hcom_allReduce") and k.endswith(WORLD)]
    assert len(mine) == 10
    assert comm[f"Total Op Info@{WORLD}"]["3"]["Communication Time Info"]["Elapse Time(ms)"] == pytest.approx(sum(mine))
    # the planted slow link 6 -> 7 has the lowest HCCS bandwidth of the world group
    links = run["result"].matrix[ALL]["step"][f"Total Op Info@{WORLD}"]
    hccs = {k: v["Bandwidth(GB/s)"] for k, v in links.items() if v["Transport Type"] == "HCCS"}
    assert min(hccs, key=hccs.get) == "6-7"
    assert run["result"].groups["comm_group_parallel_info"][0] == {
        "type": "collective", "rank_set": list(range(8)), "group_name": WORLD, "group_id": "", "pg_name": ""}


@needs_shared
def test_rank_tables_small_and_picklable(run):
    for t in run["tables"]:
        blob = pickle.dumps(t)
        assert len(blob) < 64_000
        back = pickle.loads(blob)
        assert isinstance(back, RankTables) and back.rank == t.rank and back.overlap == t.overlap
    hosts = run["result"].hosts
    assert list(hosts.columns) == ["rankId", "deviceId", "hostUid", "hostName", "profilePath"]
    assert sorted(hosts["rankId"]) == list(range(8)) and (hosts["deviceId"] == hosts["rankId"]).all()
    assert set(hosts["hostName"]) == {"node00"}


@needs_shared
def test_reused_store_same_tables(run):
    """A second pass reuses the stores (no import) and gives the same tables."""
    prof = run["ranks"][0].path
    again = rank_tables(prof)
    assert again == run["tables"][0]


@needs_shared
def test_read_back(run):
    ours = load_text_outputs(run["out"])
    theirs = load_text_outputs(TEXT_ALL)
    assert isinstance(ours, ClusterResult)
    for part in ("communication", "matrix", "groups"):
        assert _same(getattr(ours, part), getattr(theirs, part)) == []
        assert getattr(ours, part) == json.loads(json.dumps(getattr(run["result"], part)))
    assert list(ours.step_trace.columns) == list(run["result"].step_trace.columns)
    assert ours.step_trace["Index"].astype(int).tolist() == run["result"].step_trace["Index"].tolist()
    assert ours.step_trace["Computing"].tolist() == run["result"].step_trace["Computing"].tolist()
    assert (theirs.step_trace["Step"] == "").all()


def test_read_back_nothing(tmp_path):
    with pytest.raises(MsprofKitError, match="none of cluster_step_trace_time.csv"):
        load_text_outputs(str(tmp_path))


@needs_shared
def test_damaged_rank(tmp_path):
    """A rank without its device info.json, and one whose device data is gone: each is one line of
    error; the join of the others works and says which ranks it lacks."""
    cluster = _copy_cluster(str(tmp_path / "in"))
    no_info, no_data = _prof(cluster, 2), _prof(cluster, 5)
    os.remove(os.path.join(no_info, "device_2", "info.json.2"))
    shutil.rmtree(os.path.join(no_data, "device_5", "data"))
    os.mkdir(os.path.join(no_data, "device_5", "data"))
    failed: Dict[str, str] = {}
    diag = Diagnostics()
    ranks = find_ranks(cluster, diag, failed)
    assert sorted(r.rank for r in ranks) == [0, 1, 3, 4, 5, 6, 7]
    assert list(failed) == [no_info] and "\n" not in failed[no_info] and no_info in failed[no_info]
    with pytest.raises(MsprofKitError) as info:
        rank_tables(no_info)
    assert "\n" not in str(info.value) and "info.json" in str(info.value)
    tables = []
    for r in ranks:
        try:
            tables.append(rank_tables(r.path))
        except MsprofKitError as exc:
            failed[r.path] = str(exc)
    assert sorted(failed) == sorted([no_info, no_data])
    assert "\n" not in failed[no_data] and failed[no_data].startswith(no_data)
    result = join(tables, failed, diag)
    assert result.failed == failed
    assert sorted(result.step_trace["Index"]) == [0, 1, 3, 4, 6, 7]
    assert result.groups["collective"] == [[0, 1, 3, 4, 6, 7], [0, 1, 3, 4, 6, 7]]
    out = str(tmp_path / "out")
    assert len(write_text_outputs(result, out)) == 4
    comm = _load(out, "cluster_communication.json")
    assert list(comm) == ["(0, 1, 3, 4, 6, 7)"]
    # rank 4 sends to rank 5, which is missing: 5 is not in any rank set
    assert "5" not in comm["(0, 1, 3, 4, 6, 7)"]["step"][f"Total Op Info@{SECOND}"]


def _fake_prof(root: str, name: str, rank: int, device: int, host_uid: str = "42") -> str:
    prof = os.path.join(root, name)
    os.makedirs(os.path.join(prof, f"device_{device}"))
    os.makedirs(os.path.join(prof, "host"))
    with open(os.path.join(prof, f"device_{device}", f"info.json.{device}"), "w") as f:
        json.dump({"rank_id": rank, "hostUid": host_uid, "hostname": "node"}, f)
    return prof


def test_two_profs_one_rank_newest_wins(tmp_path):
    old = _fake_prof(str(tmp_path), "PROF_000001_20231125090304544_AAAA", 0, 0)
    new = _fake_prof(str(tmp_path / "deeper"), "PROF_000001_20231125100000000_BBBB", 0, 0)
    other = _fake_prof(str(tmp_path), "PROF_000001_20231125090304544_CCCC", 1, 1)
    diag = Diagnostics()
    ranks = find_ranks(str(tmp_path), diag)
    assert {r.rank: r.path for r in ranks} == {0: new, 1: other}
    assert len(diag.warnings) == 1 and "newest" in diag.warnings[0] and old in diag.warnings[0]


def test_no_rank_ids_numbered_by_host_and_device(tmp_path):
    _fake_prof(str(tmp_path), "PROF_000001_20231125090304544_AAAA", -1, 3, host_uid="2")
    _fake_prof(str(tmp_path), "PROF_000001_20231125090304544_BBBB", -1, 1, host_uid="2")
    _fake_prof(str(tmp_path), "PROF_000001_20231125090304544_CCCC", -1, 7, host_uid="1")
    ranks = find_ranks(str(tmp_path), Diagnostics())
    assert [(r.rank, r.host_uid, r.device) for r in ranks] == [(0, "1", 7), (1, "2", 1), (2, "2", 3)]
    assert read_rank(ranks[0].path).rank == -1


def test_depth_limit_and_no_rank(tmp_path):
    deep = str(tmp_path / os.path.join(*["d"] * 11))
    _fake_prof(deep, "PROF_000001_20231125090304544_AAAA", 0, 0)
    os.makedirs(tmp_path / "PROF_000001_20231125090304544_EMPTY" / "host")
    failed: Dict[str, str] = {}
    with pytest.raises(NoCollection):
        find_ranks(str(tmp_path), Diagnostics(), failed)
    assert list(failed) == [str(tmp_path / "PROF_000001_20231125090304544_EMPTY")]
    assert "info.json" in failed[str(tmp_path / "PROF_000001_20231125090304544_EMPTY")]


@needs_shared
def test_database_from_raw_equals_msprof_analyze(run, tmp_path):
    """The join's result (with each rank's own matrix, from our per-rank analyze) gives every table
    of msprof-analyze's db mode, ClusterCommunicationMatrix's per-op samples included."""
    from test_cluster_db import DB, TABLES, assert_rows_equal, read

    from msprof_kit.cluster.database import write_cluster_db
    assert sorted(run["result"].rank_matrix) == list(range(8))
    written = write_cluster_db(run["result"], str(tmp_path))
    for table, _, _ in TABLES:
        got, ref = read(written, table), read(DB, table)
        if table == "RankDeviceMap":  # absolute input paths: compare the PROF folder names
            got["profilePath"] = got["profilePath"].map(os.path.basename)
            ref["profilePath"] = ref["profilePath"].map(os.path.basename)
        assert_rows_equal(got, ref, table)
