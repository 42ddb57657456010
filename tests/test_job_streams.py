"""Legacy JOBs whose HWTS log numbers streams differently from the task descriptions (2020-era
runtimes wrote physical stream ids, 519 and up, into the HWTS log and logical ones, 3 and up, into
the Framework task descriptions): names by task id alone when that id is unambiguous, never a
guess (msprof_kit/ingest/job_links.py `link_by_task_id`; docs/store.md, "JOB collections")."""
from __future__ import annotations

import csv
import glob
import io
import os
import sqlite3
from typing import Dict, List

import numpy as np
import pandas as pd
import pytest

import synth_job
from conftest import run

from msprof_kit import store
from msprof_kit.ingest.job_links import link_by_task_id

OFFSET = 516  # logical streams 3, 4 -> physical 519, 520


def read(job: str, table: str) -> pd.DataFrame:
    with sqlite3.connect(store.store_path(job)) as conn:
        return pd.read_sql(f"SELECT * FROM {table}", conn)


def task_names(job: str) -> List[str]:
    """The op name of each TASK row in start order (N/A when it has none)."""
    strings = dict(read(job, "STRING_IDS").itertuples(index=False, name=None))
    info = read(job, "COMPUTE_TASK_INFO")
    names = dict(zip(info["globalTaskId"], info["name"].map(strings)))
    task = read(job, "TASK").sort_values("startNs", kind="stable")
    return [names.get(g, "N/A") for g in task["globalTaskId"]]


def kit_task(job: str) -> Dict[str, np.ndarray]:
    return store.read_columns(sqlite3.connect(store.store_path(job)), "KIT_TASK")


def kit_info(job: str) -> Dict[tuple, str]:
    return {(d, n): v for d, n, v in read(job, "KIT_INFO").itertuples(index=False, name=None)}


def exported_layer_names(job: str) -> List[str]:
    """Layer Name of every row of the exported op_summary files, in start order."""
    rows = []
    for path in glob.glob(os.path.join(job, "summary", "op_summary_*.csv")):
        with open(path, encoding="utf-8") as f:
            rows += [(float(r["Time(us)"]), r["Layer Name"]) for r in csv.DictReader(f)]
    return [name for _, name in rows]


def shown_ops(job: str, capsys) -> Dict[str, int]:
    """`show -r op_summary` as csv: Op Name -> Count."""
    code, out, err = run(["show", "-dir", job, "-r", "op_summary", "--top", "0", "--format", "csv", "-q"], capsys)
    assert code == 0, err
    return {r["Op Name"]: int(float(r["Count"])) for r in csv.DictReader(io.StringIO(out))}


def warnings_about_task_ids(err: str) -> List[str]:
    return [line for line in err.splitlines() if "task id" in line]


# --- the synthetic captures --------------------------------------------------------------------------


def test_offset_streams_name_every_task_by_its_unique_task_id(tmp_path, capsys):
    job = synth_job.write_job(str(tmp_path), n_tasks=50, iterations=2, task_ids="unique", hwts_stream_offset=OFFSET)
    plan = synth_job.plan_job(50, iterations=2, task_ids="unique", hwts_stream_offset=OFFSET)
    code, _, err = run(["import", "-dir", job], capsys)
    assert code == 0, err
    assert warnings_about_task_ids(err) == [
        f"Warning: {job}: device 0: the HWTS log's stream ids (519-520) match none of the task descriptions' (3-4); "
        "50 tasks named by task id alone, assuming a task id is unique on the device (described once and run on "
        "one HWTS stream)"]
    # TASK keeps the HWTS log's stream ids; each task carries its op's globalTaskId
    task = read(job, "TASK").sort_values("startNs", kind="stable")
    assert task["streamId"].tolist() == (plan.op_stream[plan.task_op] + OFFSET).tolist()
    expected = [plan.op_name[k] for k in plan.task_op]
    assert task_names(job) == expected
    assert set(kit_task(job)["matched"].tolist()) == {1}
    assert set(task["modelId"]) == {plan.op_model}
    rows = kit_info(job)
    assert rows[(0, "names_by_task_id")] == "50" and rows[(0, "names_ambiguous")] == "0"
    # what the user reads: the exported op_summary files and `show`
    code, _, err = run(["export", "summary", "-dir", job, "-q"], capsys)
    assert code == 0, err
    assert sorted(exported_layer_names(job)) == sorted(expected)
    assert shown_ops(job, capsys) == {plan.op_name[k]: 2 for k in range(len(plan.op_name))}


def test_a_task_id_on_two_logical_streams_is_never_guessed(tmp_path, capsys):
    job = synth_job.write_job(str(tmp_path), n_tasks=40, iterations=2, task_ids="some_shared",
                              hwts_stream_offset=OFFSET)
    plan = synth_job.plan_job(40, iterations=2, task_ids="some_shared", hwts_stream_offset=OFFSET)
    shared = np.isin(np.arange(len(plan.op_name)) % 4, [0, 1])  # ops 4j and 4j+1 share a task id
    assert len(set(plan.op_full_task[shared].tolist())) == shared.sum() // 2
    code, _, err = run(["import", "-dir", job], capsys)
    assert code == 0, err
    ran_shared = shared[plan.task_op]
    n_left, n_named = int(ran_shared.sum()), int((~ran_shared).sum())
    assert (n_left, n_named) == (20, 20)
    assert warnings_about_task_ids(err) == [
        f"Warning: {job}: device 0: the HWTS log's stream ids (519-520) match none of the task descriptions' (3-4); "
        f"{n_named} tasks named by task id alone, assuming a task id is unique on the device (described once and "
        "run on one HWTS stream)",
        f"Warning: {job}: device 0: {n_left} tasks left N/A: their task id is ambiguous ({n_left} described for "
        "several ops or streams); no name is guessed"]
    expected = ["N/A" if s else plan.op_name[k] for k, s in zip(plan.task_op, ran_shared)]
    assert task_names(job) == expected
    matched = kit_task(job)["matched"][np.argsort(read(job, "TASK")["startNs"].to_numpy(), kind="stable")]
    assert matched.tolist() == (~ran_shared).astype(int).tolist()
    rows = kit_info(job)
    assert rows[(0, "names_by_task_id")] == str(n_named) and rows[(0, "names_ambiguous")] == str(n_left)
    code, _, err = run(["export", "summary", "-dir", job, "-q"], capsys)
    assert code == 0, err
    assert sorted(exported_layer_names(job)) == sorted(expected)
    # show's op summary (msprof's op_summary rule) lists the named ops only
    assert shown_ops(job, capsys) == {plan.op_name[k]: 2 for k in np.flatnonzero(~shared)}


def test_task_ids_numbered_per_stream_name_nothing(tmp_path, capsys):
    """Every task id is on both logical streams: no task gets a name."""
    job = synth_job.write_job(str(tmp_path), n_tasks=20, iterations=2, hwts_stream_offset=OFFSET)
    code, _, err = run(["import", "-dir", job], capsys)
    assert code == 0, err
    lines = warnings_about_task_ids(err)
    assert len(lines) == 2 and "; 0 tasks named by task id alone" in lines[0]
    assert lines[1].endswith("device 0: 20 tasks left N/A: their task id is ambiguous (20 described for several ops "
                             "or streams); no name is guessed")
    assert set(task_names(job)) == {"N/A"}


@pytest.mark.parametrize("task_ids", ["per_stream", "unique"])
def test_matching_streams_are_unchanged_and_quiet(tmp_path, capsys, task_ids):
    job = synth_job.write_job(str(tmp_path), n_tasks=30, iterations=2, task_ids=task_ids)
    plan = synth_job.plan_job(30, iterations=2, task_ids=task_ids)
    code, _, err = run(["import", "-dir", job], capsys)
    assert code == 0, err
    assert warnings_about_task_ids(err) == []
    task = read(job, "TASK").sort_values("startNs", kind="stable")
    assert task["streamId"].tolist() == plan.op_stream[plan.task_op].tolist()
    assert task_names(job) == [plan.op_name[k] for k in plan.task_op]
    keys = read(job, "KIT_COMPUTE_TASK")
    gid = dict(zip(zip(keys["streamId"], keys["taskId"]), keys["globalTaskId"]))
    assert task["globalTaskId"].tolist() == [gid[(s, t)] for s, t in zip(task["streamId"], task["taskId"])]
    assert not {n for _, n in kit_info(job)} & {"names_by_task_id", "names_ambiguous"}


# --- the rule, on small frames -----------------------------------------------------------------------


def frames(ops: List[tuple], tasks: List[tuple]):
    """ops: (device, stream, task id); tasks: (device, HWTS stream, task id); batch 0."""
    o = pd.DataFrame(ops, columns=["device_id", "stream_id", "task_id"]).assign(batch=0)
    t = pd.DataFrame(tasks, columns=["device_id", "stream_id", "task_id"]).assign(batch=0)
    exact = t.merge(o.assign(hit=True), on=["device_id", "stream_id", "task_id", "batch"], how="left")["hit"]
    return o, t, exact.eq(True).to_numpy()


def test_a_task_id_run_on_two_hwts_streams_is_ambiguous():
    o, t, exact = frames([(0, 3, 10), (0, 3, 11)], [(0, 519, 10), (0, 519, 11), (0, 530, 11)])
    via, report = link_by_task_id(o, t, exact)
    assert via.tolist() == [0, -1, -1]
    assert report[["resolved", "described", "run", "mixed"]].values.tolist() == [[1, 0, 2, 0]]


def test_an_hwts_stream_naming_ops_of_two_streams_gets_no_names():
    """Stream 519's unique ids point at ops of streams 3 and 7: one physical stream cannot be two
    logical ones, so none of its tasks is named; stream 521's are."""
    o, t, exact = frames([(0, 3, 10), (0, 7, 20), (0, 9, 30)], [(0, 519, 10), (0, 519, 20), (0, 521, 30)])
    via, report = link_by_task_id(o, t, exact)
    assert via.tolist() == [-1, -1, 2]
    assert report[["resolved", "described", "run", "mixed"]].values.tolist() == [[1, 0, 0, 2]]


def test_only_devices_without_any_exact_match_fall_back():
    """Device 0 matches (stream, task) for one task: its other task stays unnamed, with no report;
    device 1 matches none and is named by task id."""
    o, t, exact = frames([(0, 3, 10), (0, 4, 11), (1, 3, 10)], [(0, 3, 10), (0, 519, 11), (1, 519, 10)])
    assert exact.tolist() == [True, False, False]
    via, report = link_by_task_id(o, t, exact)
    assert via.tolist() == [-1, -1, 2]
    assert report["device_id"].tolist() == [1] and report["resolved"].tolist() == [1]
    assert (report["hwts_streams"].tolist(), report["desc_streams"].tolist()) == (["519"], ["3"])


def test_task_ids_are_keys_with_their_batch():
    """The same 16-bit id in two batches (a wrap) is two keys: each is unique."""
    o = pd.DataFrame({"device_id": [0, 0], "stream_id": [3, 4], "task_id": [5, 5], "batch": [0, 1]})
    t = pd.DataFrame({"device_id": [0, 0], "stream_id": [520, 519], "task_id": [5, 5], "batch": [1, 0]})
    via, report = link_by_task_id(o, t, np.zeros(2, dtype=bool))
    assert via.tolist() == [1, 0] and report["resolved"].tolist() == [2]


def test_no_task_id_in_common_links_nothing_and_reports_zeros():
    o, t, exact = frames([(0, 3, 10)], [(0, 519, 99), (0, 520, 98)])
    via, report = link_by_task_id(o, t, exact)
    assert via.tolist() == [-1, -1]
    assert report[["device_id", "resolved", "described", "run", "mixed"]].values.tolist() == [[0, 0, 0, 0, 0]]
