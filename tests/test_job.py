"""Legacy JOB collections from the synthetic writer (tests/synth_job.py): record tables, the
store's contents against what was written, and damaged input."""
from __future__ import annotations

import os
import sqlite3
import struct
from typing import Dict, List

import numpy as np
import pandas as pd
import pytest

import synth
import synth_job
from conftest import run, tree_hashes

from msprof_kit import store
from msprof_kit.errors import Diagnostics, NotACollection
from msprof_kit.layout import find_collections
from msprof_kit.parsers import records
from msprof_kit.parsers.job import ACL_API, REGISTRY, decode_hwts, store_step_tags
from msprof_kit.ingest.streams import read_stream

INVALID = 4294967295


def read(job: str, table: str) -> pd.DataFrame:
    with sqlite3.connect(store.store_path(job)) as conn:
        return pd.read_sql(f"SELECT * FROM {table}", conn)


def strings(job: str) -> Dict[int, str]:
    return dict(read(job, "STRING_IDS").itertuples(index=False, name=None))


def kit_info(job: str) -> Dict[tuple, str]:
    return {(d, n): v for d, n, v in read(job, "KIT_INFO").itertuples(index=False, name=None)}


def raw_unchanged(job: str, before: Dict[str, str]) -> bool:
    after = tree_hashes(job)
    return {k: v for k, v in after.items() if k in before} == before and set(before) <= set(after)


# --- record tables --------------------------------------------------------------------------------


def test_record_tables_are_little_endian_and_sized():
    for spec in REGISTRY.values():
        assert spec.fmt[0] == "<", spec.name
        assert struct.calcsize(spec.fmt) == spec.size == spec.dtype.itemsize, spec.name
    # the AclModule layout of host_formats.md §1.6, field for field
    assert ACL_API.fmt == "<HHIQQII64s32x" and struct.calcsize("<HHIQQII64s4Q") == ACL_API.size


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_packed_records_decode_to_the_same_values(name):
    spec = REGISTRY[name]
    rng = np.random.default_rng(len(name))
    values = {}
    for field in spec.names:
        dt = spec.dtype.fields[field][0]
        if dt.kind == "S":
            values[field] = bytes(rng.integers(1, 255, dt.itemsize, dtype=np.uint8))
        elif dt.subdtype is not None:
            base, shape = dt.subdtype
            values[field] = rng.integers(0, min(np.iinfo(base).max, 2 ** 62), shape, dtype=np.int64).astype(base)
        else:
            values[field] = int(rng.integers(0, min(np.iinfo(dt).max, 2 ** 62)))
    raw = records.pack(spec, **values)
    back = np.frombuffer(raw, dtype=spec.dtype)[0]
    for field, value in values.items():
        assert np.array_equal(back[field], value), field


def test_training_trace_tags_in_the_store_numbering():
    legacy = np.array([0, 1, 2, 3, 17, 254, 255, 256, 9999])
    assert store_step_tags(legacy).tolist() == [0, 2, 3, 10003, 10017, 10254, 4, 0, 0]


# --- the round trip -------------------------------------------------------------------------------


@pytest.fixture()
def soc_job(tmp_path):
    return synth_job.write_job(str(tmp_path), n_tasks=50, iterations=2, seed=7)


def _tasks_and_ops(job: str):
    s = strings(job)
    task = read(job, "TASK").sort_values("startNs", kind="stable").reset_index(drop=True)
    info = read(job, "COMPUTE_TASK_INFO").merge(read(job, "KIT_COMPUTE_TASK"), on="globalTaskId")
    for col in ("name", "taskType", "opType", "inputShapes", "inputDataTypes", "inputFormats", "outputShapes",
                "outputDataTypes", "outputFormats", "opState"):
        info[col] = info[col].map(s)
    task["taskTypeName"] = task["taskType"].map(s)
    return task, info


def test_round_trip_tasks_ops_apis(soc_job, capsys):
    plan = synth_job.plan_job(50, iterations=2, seed=7)
    before = tree_hashes(soc_job)
    code, out, err = run(["import", "-dir", soc_job], capsys)
    assert code == 0, err
    assert "Traceback" not in err and ".done" not in err
    task, info = _tasks_and_ops(soc_job)

    # TASK: every execution, its times (100 MHz counter, no sync files: ticks x 10 ns), ids, type
    ops = plan.task_op
    assert len(task) == len(ops)
    assert task["startNs"].tolist() == plan.tick_ns(plan.task_start).tolist()
    assert task["endNs"].tolist() == plan.tick_ns(plan.task_end).tolist()
    assert task["streamId"].tolist() == plan.op_stream[ops].tolist()
    assert task["taskId"].tolist() == (plan.op_full_task[ops] & 0xFFFF).tolist()
    assert task["taskTypeName"].tolist() == np.where(plan.op_ge_type[ops] == 1, "AI_CPU", "AI_CORE").tolist()
    assert set(task["deviceId"]) == {0} and set(task["connectionId"]) == {-1} and set(task["contextId"]) == {INVALID}
    assert set(task["globalPid"]) == {synth_job.PID} and set(task["modelId"]) == {plan.op_model}

    # COMPUTE_TASK_INFO: one row per op, with the texts written (hashed names resolved)
    assert len(info) == len(plan.op_name)
    info = info.sort_values(["streamId", "taskId"]).reset_index(drop=True)
    order = np.lexsort((plan.op_full_task, plan.op_stream))
    assert info["name"].tolist() == [plan.op_name[k] for k in order]
    assert info["opType"].tolist() == [plan.op_type[k] for k in order]
    assert info["blockNum"].tolist() == plan.op_block[order].tolist()
    assert info["taskType"].tolist() == ["AI_CPU" if plan.op_ge_type[k] else "AI_CORE" for k in order]
    assert info["opState"].tolist() == ["static"] * len(order)
    texts = [plan.expected_texts(k) for k in order]
    assert list(zip(info["inputShapes"], info["inputDataTypes"], info["inputFormats"], info["outputShapes"],
                    info["outputDataTypes"], info["outputFormats"])) == texts

    # linking: each execution carries its op's globalTaskId
    gid = dict(zip(zip(info["streamId"], info["taskId"]), info["globalTaskId"]))
    assert task["globalTaskId"].tolist() == [gid[(s, t)] for s, t in zip(task["streamId"], task["taskId"])]
    kit = store.read_columns(sqlite3.connect(store.store_path(soc_job)), "KIT_TASK")
    assert kit["matched"].tolist() == [1] * len(task) and set(kit["batchId"]) == {0}

    # CANN_API: the AclModule calls, at the acl level
    api = read(soc_job, "CANN_API").sort_values("connectionId")
    s = strings(soc_job)
    order = np.argsort(plan.api_start, kind="stable")
    assert api["startNs"].tolist() == plan.api_start[order].tolist()
    assert api["endNs"].tolist() == plan.api_end[order].tolist()
    assert api["name"].map(s).tolist() == [plan.api_name[i] for i in order]
    assert set(api["type"]) == {20000} and set(api["globalTid"]) == {(synth_job.PID << 32) | synth_job.TID}
    modes = store.read_columns(sqlite3.connect(store.store_path(soc_job)), "KIT_API")
    assert modes["mode"].tolist() == [plan.api_sub[i].upper() for i in order]

    # the step trace, in the store's tag numbering, and the FP / BP ops of step_info
    steps = read(soc_job, "KIT_STEP_TRACE")
    assert steps["timestampNs"].tolist() == plan.tick_ns(plan.step_syscnt).tolist()
    assert steps["tagId"].tolist() == store_step_tags(plan.step_tag).tolist()
    assert steps["indexId"].tolist() == np.repeat([1, 2], 6).tolist()
    points = read(soc_job, "KIT_STEP_POINT")
    fp = plan.task_op[0]
    assert dict(zip(points["tagId"], points["name"]))[2] == plan.op_name[fp]

    # AI CPU records, named after their ops
    aicpu = read(soc_job, "KIT_AICPU")
    cpu = ops[plan.op_ge_type[ops] == 1]
    assert aicpu["name"].tolist() == [plan.op_name[k] for k in cpu]
    assert aicpu["startNs"].tolist() == plan.tick_ns(plan.task_start[plan.op_ge_type[ops] == 1]).tolist()

    info_rows = kit_info(soc_job)
    assert info_rows[(-1, "layout")] == "job" and info_rows[(-1, "job_name")] == "JOB000001SYNTH"
    assert info_rows[(0, "hwts_frequency")] == "100" and (0, "hwts_frequency_assumed") not in info_rows
    assert info_rows[(-1, "time_base")] == "monotonic"
    assert (-1, "chip") not in info_rows and (-1, "platform_version") not in info_rows
    assert raw_unchanged(soc_job, before)


def test_text_framework_flat_layout_and_one_assumption_warning(tmp_path, capsys):
    job = synth_job.write_job(str(tmp_path), n_tasks=30, iterations=3, framework="text", layout="flat", seed=2)
    plan = synth_job.plan_job(30, iterations=3, seed=2)
    code, _, err = run(["import", "-dir", job], capsys)
    assert code == 0, err
    assumed = [line for line in err.splitlines() if "assumed" in line]
    assert len(assumed) == 1
    assert "100 MHz HWTS clock on device 0 (no info.json)" in assumed[0] and "monotonic" in assumed[0]
    task, info = _tasks_and_ops(job)
    info = info.sort_values(["streamId", "taskId"]).reset_index(drop=True)
    order = np.lexsort((plan.op_full_task, plan.op_stream))
    assert info["name"].tolist() == [plan.op_name[k] for k in order]
    assert info["opType"].tolist() == [plan.op_type[k] for k in order]
    assert info["blockNum"].tolist() == plan.op_block[order].tolist()
    assert set(info["taskType"]) == {"N/A"}  # the text files carry no GE task type
    texts = [plan.expected_texts(k) for k in order]
    assert list(zip(info["inputShapes"], info["inputDataTypes"], info["inputFormats"], info["outputShapes"],
                    info["outputDataTypes"], info["outputFormats"])) == texts
    # the device's own type names the tasks; no model id is known
    assert task["taskTypeName"].tolist() == np.where(plan.op_ge_type[plan.task_op] == 1, "AI_CPU", "AI_CORE").tolist()
    assert set(task["modelId"]) == {INVALID}
    points = read(job, "KIT_STEP_POINT")
    assert sorted(points["tagId"]) == [2, 3]
    rows = kit_info(job)
    assert rows[(0, "hwts_frequency_assumed")] == "100" and "assumptions" in {n for _, n in rows}


def test_device_clock_follows_info_json(tmp_path, capsys):
    job = synth_job.write_job(str(tmp_path), n_tasks=8, iterations=1, hwts_mhz=50, platform_version="1")
    plan = synth_job.plan_job(8, iterations=1, hwts_mhz=50)
    assert run(["import", "-dir", job], capsys)[0] == 0
    task = read(job, "TASK").sort_values("startNs")
    assert task["startNs"].tolist() == (plan.task_start * 20).tolist()  # 50 MHz: 20 ns a tick
    rows = kit_info(job)
    assert rows[(-1, "platform_version")] == "1" and rows[(-1, "chip")] == "Ascend910A"


def test_task_id_wrap_gives_batches_and_keeps_links(tmp_path, capsys):
    job = synth_job.write_job(str(tmp_path), n_tasks=24, iterations=1, first_task_id=65530)
    plan = synth_job.plan_job(24, iterations=1, first_task_id=65530)
    assert run(["import", "-dir", job], capsys)[0] == 0
    conn = sqlite3.connect(store.store_path(job))
    kit = store.read_columns(conn, "KIT_TASK")
    task = read(job, "TASK")
    expected = plan.op_full_task[plan.task_op] >> 16
    order = np.argsort(task["startNs"].to_numpy(), kind="stable")
    assert kit["batchId"].to_numpy()[order].tolist() == expected.tolist() and expected.max() == 1
    assert kit["matched"].tolist() == [1] * len(task)
    keys = read(job, "KIT_COMPUTE_TASK")
    assert sorted(keys["batchId"].tolist()) == sorted((plan.op_full_task >> 16).tolist())


def test_query_and_soc_exports_read_the_job_store(soc_job, capsys):
    assert run(["import", "-dir", soc_job], capsys)[0] == 0
    code, out, err = run(["query", "-dir", soc_job], capsys)
    assert code == 0, err
    row = out.splitlines()[2].split()
    assert row[1:6] == ["0", "JOB000001SYNTH", "N/A", "0", "2"]  # device 0, model 0, 2 iterations
    code, out, err = run(["export", "summary", "-dir", soc_job], capsys)
    assert code == 0, err
    written = sorted(os.listdir(os.path.join(soc_job, "summary")))
    assert "op_statistic_0_0_1_1.csv" in written and "acl_statistic_0_0_2.csv" in written


def test_collection_kind_and_control_files(soc_job):
    diag = Diagnostics()
    (coll,) = find_collections(soc_job, diag)
    assert coll.kind == "job" and coll.job is not None and coll.job.name == "JOB000001SYNTH"
    assert [rd.device_id for rd in coll.devices] == [0]
    assert coll.devices[0].device_info()["hwts_frequency"] == "100"
    kinds = {f.kind for f in coll.job.files}
    assert kinds == {"hwts", "training_trace", "acl", "aicpu", "task_desc", "tensor_data", "step_info", "hash_dic"}
    assert all(f.done for f in coll.job.files)
    # a folder holding the JOB finds it one level down
    assert [c.path for c in find_collections(os.path.dirname(soc_job), diag)] == [soc_job]


# --- damaged input --------------------------------------------------------------------------------


def _hwts_slices(job: str) -> List[str]:
    data = os.path.join(job, "data")
    return sorted(os.path.join(data, n) for n in os.listdir(data) if n.startswith("hwts.") and not n.endswith(".done"))


def test_truncated_hwts_log_marked_done_is_one_located_error(soc_job, capsys):
    last = _hwts_slices(soc_job)[-1]
    size = os.path.getsize(last)
    with open(last, "r+b") as f:
        f.truncate(size - 10)
    before = tree_hashes(soc_job)
    code, out, err = run(["import", "-dir", soc_job], capsys)
    assert code != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    total = sum(os.path.getsize(p) for p in _hwts_slices(soc_job))
    first = os.path.getsize(_hwts_slices(soc_job)[0])
    offset = (total // 64) * 64 - first  # the partial record's start, within the last slice
    assert lines[0] == (f"Error: {last}: offset {offset}: truncated hwts_log record: {total % 64} of 64 bytes; "
                        f"expected whole 64-byte records (the slice has its .done marker, so it should be complete)")
    assert not os.path.exists(store.store_path(soc_job))
    assert raw_unchanged(soc_job, before)


def test_truncated_hwts_log_without_done_keeps_the_whole_records(soc_job, capsys):
    last = _hwts_slices(soc_job)[-1]
    os.remove(last + ".done")
    with open(last, "r+b") as f:
        f.truncate(os.path.getsize(last) - 10)  # cuts the last end record
    code, _, err = run(["import", "-dir", soc_job], capsys)
    assert code == 0, err
    assert "1 raw slices have no .done marker" in err and "truncated hwts_log record" in err
    assert "start record has no end record; task dropped" in err
    assert len(read(soc_job, "TASK")) == 49


def test_bad_magic_costs_one_acl_call(soc_job, capsys):
    path = os.path.join(soc_job, "data", "AclModule.acl_rts.0.slice_0")
    with open(path, "r+b") as f:
        f.write(b"\0\0")
    code, _, err = run(["import", "-dir", soc_job], capsys)
    assert code == 0, err
    assert f"{path}: offset 0: acl_api record without magic 0x5A5A; dropped" in err
    assert len(read(soc_job, "CANN_API")) == 3


def test_a_record_written_twice_counts_once(soc_job, capsys):
    """A whole acl_api record repeated in place (a duplicated write) is one call, with a warning."""
    path = os.path.join(soc_job, "data", "AclModule.acl_rts.0.slice_0")
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:128] + data[:128] + data[128:])
    code, _, err = run(["import", "-dir", soc_job], capsys)
    assert code == 0, err
    assert f"{path}: offset 128: acl_api record repeating an earlier one byte for byte" in err
    assert len(read(soc_job, "CANN_API")) == 4


def test_an_empty_data_file_is_named(soc_job, capsys):
    """An AclModule slice of 0 bytes: the calls it should hold are missing, and a warning says so."""
    path = os.path.join(soc_job, "data", "AclModule.acl_model.0.slice_0")
    open(path, "wb").close()
    code, _, err = run(["import", "-dir", soc_job], capsys)
    assert code == 0, err
    assert f"{path}: 0 bytes; the records it should hold are missing" in err


def test_an_empty_text_file_and_an_unusable_frequency_are_named(soc_job, capsys):
    path = os.path.join(soc_job, "data", "Framework.task_desc_info.0.slice_0")
    open(path, "wb").close()
    info = os.path.join(soc_job, "info.json.0")
    with open(info, encoding="utf-8") as f:
        text = f.read()
    with open(info, "w", encoding="utf-8") as f:
        f.write(text.replace('"aic_frequency": "1000"', '"aic_frequency": "1e38"'))
    code, _, err = run(["import", "-dir", soc_job], capsys)
    assert code == 0, err
    assert f"{path}: 0 bytes; the records it should hold are missing" in err
    assert f'{info}: DeviceInfo[0].aic_frequency is "1e38"; expected the frequency in MHz' in err


def test_decoders_split_the_stream_where_records_straddle_slices(soc_job):
    buf, pieces = read_stream(_hwts_slices(soc_job))
    assert pieces[0].size % 64 != 0  # the writer cuts inside a record
    cols, issues = decode_hwts(buf, pieces, True)
    assert not issues and cols["is_start"].sum() == 50 and (~cols["is_start"]).sum() == 50


def test_result_dirs_of_a_prof_collection_are_no_job(tmp_path):
    prof = synth.write_collection(str(tmp_path), chip="310P", n_tasks=4)  # device_0/data/hwts.data.0.slice_*
    for sub in ("device_0", os.path.join("device_0", "data"), "host"):
        with pytest.raises(NotACollection):
            find_collections(os.path.join(prof, sub), Diagnostics())
    assert [c.kind for c in find_collections(prof, Diagnostics())] == ["prof"]


def test_not_a_collection_without_legacy_files(tmp_path, capsys):
    folder = tmp_path / "JOBEMPTY"
    (folder / "data").mkdir(parents=True)
    code, _, err = run(["import", "-dir", str(folder)], capsys)
    assert code == 4 and "no legacy raw data here" in err and "Traceback" not in err
