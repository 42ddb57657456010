"""The SoC flavour (legacy JOB collections): file names, headers and values, from a store whose
contents are known exactly."""
from __future__ import annotations

import csv
import json
import os
from typing import Dict, List

import numpy as np
import pandas as pd
import pytest

from msprof_kit import schema, store
from msprof_kit.exporters import soc
from msprof_kit.exporters.context import open_context

INVALID = 4294967295
STRINGS = ["AI_CORE", "AI_CPU", "conv1", "Conv2D", "relu1", "Relu", "aclmdlExecute", "aclrtMalloc", "N/A"]
SID = {s: i for i, s in enumerate(STRINGS)}


def job_store(folder: str, steps: bool = True) -> str:
    """A JOB-layout store: device 0, model 7 ('resnet 50'), two iterations of two ops each (conv1 on
    AI_CORE, relu1 on AI_CPU), and three ACL calls on one thread."""
    # iteration 1: 1000..5000 ns, iteration 2: 5000..9000 ns (times in local ns)
    start = np.array([1000, 2500, 5000, 6500])
    end = np.array([2000, 3000, 6200, 7000])
    tasks = pd.DataFrame({
        "startNs": start, "endNs": end, "deviceId": 0, "connectionId": -1, "globalTaskId": [0, 1, 0, 1],
        "globalPid": 99, "taskType": [SID["AI_CORE"], SID["AI_CPU"]] * 2, "contextId": INVALID,
        "streamId": 3, "taskId": [10, 11, 10, 11], "modelId": 7})
    info = pd.DataFrame({c: SID["N/A"] for c, _ in schema.UNIFIED["COMPUTE_TASK_INFO"]}, index=[0, 1])
    info["globalTaskId"] = [0, 1]
    info["name"] = [SID["conv1"], SID["relu1"]]
    info["opType"] = [SID["Conv2D"], SID["Relu"]]
    info["blockNum"] = [2, 1]
    info["mixBlockNum"] = 0
    api = pd.DataFrame({"startNs": [900, 1200, 5100], "endNs": [4900, 1300, 8900], "type": 20000,
                        "globalTid": (1234 << 32) | 55, "connectionId": [1, 2, 3],
                        "name": [SID["aclmdlExecute"], SID["aclrtMalloc"], SID["aclmdlExecute"]]})
    path = store.store_path(folder)
    with store.TableWriter(path) as out:
        out.put("TASK", tasks)
        out.put("COMPUTE_TASK_INFO", info)
        out.put("CANN_API", api)
        out.put("KIT_API", {"connectionId": np.array([1, 2, 3]),
                            "mode": np.array(["ACL_MODEL", "ACL_RTS", "ACL_MODEL"], dtype=object),
                            "itemId": np.array(["0", "0", "0"], dtype=object)})
        if steps:
            out.put("KIT_STEP_TRACE", pd.DataFrame({
                "deviceId": 0, "timestampNs": [1000, 5000, 9000], "indexId": [1, 2, 2], "modelId": 7,
                "streamId": 3, "taskId": 0, "tagId": [0, 4, 1]}))
        out.put("KIT_MODEL", pd.DataFrame({"modelId": [7], "name": ["resnet 50"]}))
        out.put("STRING_IDS", pd.DataFrame({"id": range(len(STRINGS)), "value": STRINGS}))
        out.put_rows("KIT_INFO", schema.EXTENSIONS["KIT_INFO"], [(-1, "layout", "job"), (0, "aic_frequency", "1000")])
    return folder


def read_csv(path: str) -> List[Dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def export(folder: str, kind: str, fmt: str = "csv") -> List[str]:
    ctx = open_context(folder)
    try:
        if kind == "timeline":
            soc.write_timeline(ctx)
        else:
            soc.write_summary(ctx, fmt)
    finally:
        ctx.conn.close()
    return sorted(os.path.relpath(p, folder) for p in ctx.written)


def test_summary_file_names_follow_the_soc_tool(tmp_path):
    folder = job_store(str(tmp_path / "JOB1"))
    assert export(folder, "summary") == sorted(
        [f"summary/op_summary_0.resnet_50.7.{i}.2.{i}.NA.1000.csv" for i in (1, 2)]
        + [f"summary/op_statistic_0_7_{i}_{i}.csv" for i in (1, 2)]
        + [f"summary/acl_statistic_0_7_{i}.csv" for i in (1, 2)])


def test_op_summary_rows_are_the_batch_layers_with_na_where_there_is_no_data(tmp_path):
    folder = job_store(str(tmp_path / "JOB1"))
    export(folder, "summary")
    path = os.path.join(folder, "summary", "op_summary_0.resnet_50.7.2.2.2.NA.1000.csv")
    with open(path, encoding="utf-8") as f:
        assert f.readline().rstrip("\n").split(",") == list(soc.OP_SUMMARY_HEADER)
    rows = read_csv(path)
    assert [(r["Layer Id"], r["Layer Name"], r["Layer Type"], r["Time(us)"], r["Time Ratio"]) for r in rows] == [
        ("1", "conv1", "Conv2D", "1.200", "70.59"), ("2", "relu1", "Relu", "0.500", "29.41")]
    for r in rows:
        assert {r[h] for h in soc.OP_SUMMARY_HEADER[6:]} == {"N/A"} and r["Ori Layer Name"] == "N/A"


def test_op_statistic_and_acl_statistic_values(tmp_path):
    folder = job_store(str(tmp_path / "JOB1"))
    export(folder, "summary")
    ops = read_csv(os.path.join(folder, "summary", "op_statistic_0_7_1_1.csv"))
    assert list(ops[0]) == list(soc.OP_STATISTIC_HEADER)
    assert [(r["Task ID"], r["Stream ID"], r["OP Name"], r["Task Type"], r["Total Time Ratio(%)"], r["Total Time(us)"],
             r["Count"], r["Avg(us)"], r["Max(us)"], r["Min(us)"]) for r in ops] == [
        ("10", "3", "conv1", "AI_CORE", "66.67", "1.000", "1", "1.000", "1.000", "1.000"),
        ("11", "3", "relu1", "AI_CPU", "33.33", "0.500", "1", "0.500", "0.500", "0.500")]
    acl = read_csv(os.path.join(folder, "summary", "acl_statistic_0_7_1.csv"))
    assert list(acl[0]) == list(soc.ACL_STATISTIC_HEADER)
    assert [(r["Process ID"], r["Thread ID"], r["Type"], r["Name"], r["Total Time Ratio(%)"], r["Total Time(us)"],
             r["Count"]) for r in acl] == [("1234", "55", "ACL_MODEL", "aclmdlExecute", "97.56", "4.000", "1"),
                                           ("1234", "55", "ACL_RTS", "aclrtMalloc", "2.44", "0.100", "1")]


def test_without_a_step_trace_each_model_is_one_batch(tmp_path):
    folder = job_store(str(tmp_path / "JOB1"), steps=False)
    names = export(folder, "summary")
    assert "summary/op_statistic_0_7_1_1.csv" in names and len(names) == 3
    rows = read_csv(os.path.join(folder, "summary", "op_statistic_0_7_1_1.csv"))
    assert {(r["OP Name"], r["Count"], r["Total Time(us)"]) for r in rows} == {("conv1", "2", "2.200"),
                                                                             ("relu1", "2", "1.000")}


def test_json_format_writes_the_same_rows(tmp_path):
    folder = job_store(str(tmp_path / "JOB1"))
    export(folder, "summary", fmt="json")
    with open(os.path.join(folder, "summary", "op_statistic_0_7_1_1.json"), encoding="utf-8") as f:
        rows = json.load(f)
    assert rows[0]["OP Name"] == "conv1" and rows[0]["Total Time(us)"] == "1.000"


def test_timelines_hold_the_batch_tasks_and_acl_calls(tmp_path):
    folder = job_store(str(tmp_path / "JOB1"))
    assert export(folder, "timeline") == sorted(
        [f"timeline/task_time_0.resnet_50.7.{i}.json" for i in (1, 2)]
        + [f"timeline/acl_0.resnet_50.7.{i}.json" for i in (1, 2)])
    with open(os.path.join(folder, "timeline", "task_time_0.resnet_50.7.2.json"), encoding="utf-8") as f:
        events = [e for e in json.load(f) if e["ph"] == "X"]
    assert [(e["name"], e["tid"], e["ts"], e["dur"], e["args"]) for e in events] == [
        ("conv1", 3, 5.0, 1.2, {"Task Type": "AI_CORE", "Stream Id": 3, "Task Id": 10}),
        ("relu1", 3, 6.5, 0.5, {"Task Type": "AI_CPU", "Stream Id": 3, "Task Id": 11})]
    with open(os.path.join(folder, "timeline", "acl_0.resnet_50.7.1.json"), encoding="utf-8") as f:
        calls = [e for e in json.load(f) if e["ph"] == "X"]
    # the SoC tool's acl timeline gives durations in ms
    assert [(e["name"], e["ts"], e["dur"], e["args"]) for e in calls] == [
        ("aclmdlExecute", 0.9, 0.004, {"Mode": "ACL_MODEL", "Process_Id": 1234, "Thread_Id": 55}),
        ("aclrtMalloc", 1.2, 0.0001, {"Mode": "ACL_RTS", "Process_Id": 1234, "Thread_Id": 55})]


@pytest.mark.parametrize("model, iteration, expected", [(7, 2, ["summary/op_statistic_0_7_2_2.csv"])])
def test_an_iteration_export_keeps_that_batch(tmp_path, model, iteration, expected):
    from msprof_kit.exporters.scope import resolve
    folder = job_store(str(tmp_path / "JOB1"))
    ctx = open_context(folder)
    try:
        ctx.scope = resolve(ctx, model, iteration)
        soc.write_summary(ctx)
    finally:
        ctx.conn.close()
    assert [p for p in sorted(os.path.relpath(p, folder) for p in ctx.written) if "op_statistic" in p] == expected


# ------------------------------------------------------------------------------------------------
# End to end: a synthetic JOB collection (tests/synth_job.py), imported and exported by the CLI

SOC_NAMES = {
    "timeline": [r"task_time_(\d+)\.(\w+)\.(\d+)\.(\d+)\.json", r"acl_(\d+)\.(\w+)\.(\d+)\.(\d+)\.json"],
    "summary": [r"op_summary_(\d+)\.(\w+)\.(\d+)\.(\d+)\.(\d+)\.(\d+)\.NA\.(\w+)\.csv",
                r"op_statistic_(\d+)_(\d+)_(\d+)_(\d+)\.csv", r"acl_statistic_(\d+)_(\d+)_(\d+)\.csv"],
}


def test_a_synthetic_job_exports_every_soc_file_with_its_documented_name_and_header(tmp_path, capsys):
    import re

    from synth_job import plan_job, write_job

    from msprof_kit import cli

    job = write_job(str(tmp_path), n_tasks=30, iterations=3, model_id=5)
    plan = plan_job(30, iterations=3, model_id=5)
    for what in ("summary", "timeline"):
        assert cli.main(["export", what, "-dir", job]) == 0
    err = capsys.readouterr().err
    assert "no summary data" not in err and "no timeline data" not in err
    assert not os.path.exists(os.path.join(job, "mindstudio_profiler_output"))
    for folder, patterns in SOC_NAMES.items():
        names = sorted(os.listdir(os.path.join(job, folder)))
        for pattern in patterns:  # one file per batch, for each documented kind
            matched = [n for n in names if re.fullmatch(pattern, n)]
            assert len(matched) == 3, (pattern, names)
        assert len(names) == 3 * len(patterns)
    headers = {"op_summary": soc.OP_SUMMARY_HEADER, "op_statistic": soc.OP_STATISTIC_HEADER,
               "acl_statistic": soc.ACL_STATISTIC_HEADER}
    total_us = 0.0
    for name in os.listdir(os.path.join(job, "summary")):
        kind = "_".join(name.split("_")[:2])
        with open(os.path.join(job, "summary", name), encoding="utf-8") as f:
            assert f.readline().rstrip("\n").split(",") == list(headers[kind]), name
        if kind == "op_summary":
            rows = read_csv(os.path.join(job, "summary", name))
            total_us += sum(float(r["Time(us)"]) for r in rows)
            assert all(r["Layer Name"] != "N/A" and r["Layer Type"] != "N/A" for r in rows)
    # every device task lands in exactly one batch, with its exact duration
    durations = plan.tick_ns(plan.task_end) - plan.tick_ns(plan.task_start)
    assert round(total_us, 3) == round(durations.sum() / 1000, 3)
    events = []
    for name in os.listdir(os.path.join(job, "timeline")):
        if name.startswith("task_time_"):
            with open(os.path.join(job, "timeline", name), encoding="utf-8") as f:
                events += [e for e in json.load(f) if e["ph"] == "X"]
    assert len(events) == len(plan.task_start)
    assert {e["args"]["Task Type"] for e in events} <= {"AI_CORE", "AI_CPU"}
