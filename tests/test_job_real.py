"""Legacy JOB collections from real samples (../shared/data/real, each with a SOURCE.md): the
MindInsight test JOBs and the MindSpore profiler unit-test data, with the outputs those projects
expect. The samples are read-only; every import works on a copy."""
from __future__ import annotations

import json
import os
import sqlite3
import tarfile
from typing import Dict, List, Optional, Sequence

import pandas as pd
import pytest

from realdata import REAL, writable_copy
from conftest import run, tree_hashes

from msprof_kit import store
from msprof_kit.parsers.job import decode_aicpu, decode_task_desc, task_op_names
from msprof_kit.parsers.host import parse_dictionary
from msprof_kit.ingest.streams import read_stream

LEGACY = os.path.join(REAL, "mindinsight-legacy-job")
MS = os.path.join(REAL, "mindspore-ut-profiler-data")
needs_real = pytest.mark.skipif(not (os.path.isdir(LEGACY) and os.path.isdir(MS)),
                                reason="../shared/data/real is not beside the repo")
pytestmark = needs_real


def imported(src: str, dest: str, capsys) -> str:
    job = writable_copy(src, dest)
    before = tree_hashes(job)
    code, _, err = run(["import", "-dir", job], capsys)
    assert code == 0, err
    after = tree_hashes(job)
    assert {k: v for k, v in after.items() if k in before} == before  # raw files untouched
    assert set(after) - set(before) == {os.path.join("sqlite", store.STORE_NAME)}  # nothing else written
    return job


def ops_in_store(job: str) -> pd.DataFrame:
    """COMPUTE_TASK_INFO with its keys and texts."""
    with sqlite3.connect(store.store_path(job)) as conn:
        strings = dict(conn.execute("SELECT id, value FROM STRING_IDS").fetchall())
        info = pd.read_sql("SELECT * FROM COMPUTE_TASK_INFO JOIN KIT_COMPUTE_TASK USING (globalTaskId)", conn)
    for col in ("name", "opType", "taskType", "inputFormats", "inputDataTypes", "inputShapes", "outputFormats",
                "outputDataTypes", "outputShapes"):
        info[col] = info[col].map(strings)
    return info


def read_table(job: str, table: str) -> pd.DataFrame:
    with sqlite3.connect(store.store_path(job)) as conn:
        return pd.read_sql(f"SELECT * FROM {table}", conn)


# --- Framework: binary GE reporter records -> MindSpore's task id / op name map ------------------------

FRAMEWORK = os.path.join(MS, "framework")


def _framework_file(kind: str) -> str:
    return os.path.join(FRAMEWORK, "data", f"Framework.{kind}.6.slice_0")


def test_binary_framework_gives_the_expected_task_op_names():
    with open(_framework_file("hash_dic"), encoding="utf-8") as f:
        hashes, issues = parse_dictionary(f.read(), _framework_file("hash_dic"), False)
    assert not issues
    buf, pieces = read_stream([_framework_file("task_desc_info")])
    cols, issues = decode_task_desc(buf, pieces, True, hashes)
    assert not issues
    with open(os.path.join(FRAMEWORK, "expected", "task_id_full_op_name.json"), encoding="utf-8") as f:
        expected = json.load(f)
    assert task_op_names(cols) == expected
    assert (cols["task_type"] == 0).all() and set(cols["block_dim"].tolist()) >= {1, 32}


def test_binary_framework_lands_in_the_store(tmp_path, capsys):
    job = imported(FRAMEWORK, str(tmp_path / "framework"), capsys)
    info = ops_in_store(job)
    with open(os.path.join(job, "expected", "task_id_full_op_name.json"), encoding="utf-8") as f:
        expected = json.load(f)
    assert {f"{s}_{t}": n for s, t, n in zip(info["streamId"], info["taskId"], info["name"])} == expected
    assert set(info["deviceId"]) == {6} and set(info["taskType"]) == {"AI_CORE"}
    # the first op (stream 1, task 4): the loss scale's Add on two int32 scalars (tensor_data_info)
    add = info[(info["streamId"] == 1) & (info["taskId"] == 4)].iloc[0]
    assert (add["opType"], add["inputDataTypes"], add["inputFormats"], add["inputShapes"], add["outputDataTypes"]) == \
        ("Add", "INT32;INT32", "DEFAULT;DEFAULT", '";"', "INT32")
    # step_info: the ops recording the FP (tag 2) and BP (tag 3) points
    points = read_table(job, "KIT_STEP_POINT")
    assert points["name"].iloc[0] == expected["1_4"] and points["tagId"].tolist() == [2, 3, 4, 3, 4]


# --- AI CPU (DATA_PREPROCESS) -> the expected text files ---------------------------------------------


def _short(name: str) -> str:
    return name.split("/")[-1].split("-")[0] if "/" in name else name


def mindspore_lines(cols: Dict, names: Optional[Dict[str, str]] = None) -> str:
    """MindSpore's output_data_preprocess_aicpu_<dev>.txt from decoded records (µs -> ms; 10 ns
    ticks -> µs); `names` maps '<stream>_<task>' to a full op name for the binary variant."""
    lines = ["serial_number node_type_name total_time(ms) dispatch_time(ms) execution_time(ms) run_start run_end"]
    total = 0.0
    for i in range(len(cols["name"])):
        name = cols["name"][i] or names[f"{cols['stream_id'][i]}_{cols['task_id'][i]}"].split("/")[-1]
        row = [i + 1, _short(name) if cols["name"][i] else name, cols["total_us"][i] / 1000,
               cols["dispatch_us"][i] / 1000,
               (float(cols["run_end_us"][i]) - float(cols["run_start_us"][i])) / 1000,
               cols["start_ticks"][i] / 100, cols["end_ticks"][i] / 100]
        lines.append(" ".join(str(x) for x in row))
        total += cols["total_us"][i] / 1000
    lines.append(f"AI CPU Total Time(ms): {total:.6f}")
    return "\n".join(lines) + "\n"


def simple_table(header: Sequence[str], rows: List[List[object]]) -> str:
    """The 'simple' plain-text table MindInsight wrote (columns of numbers right-aligned on their
    decimal point, other columns left-aligned, at least two spaces wider than their header)."""
    cells = [list(r) + [None] * (len(header) - len(r)) for r in rows]
    columns, aligns = [], []
    for head, col in zip(header, zip(*cells)):
        texts = ["" if c is None else str(c) for c in col]
        numeric = all(_is_number(c) for c in col if c is not None)
        if numeric:
            places = [len(t.split(".")[1]) if "." in t else 0 for t in texts]
            top = max(p for p, c in zip(places, col) if c is not None)
            texts = [t + " " * (top - p) if c is not None else t for t, p, c in zip(texts, places, col)]
        columns.append((max([len(head) + 2] + [len(t) for t in texts]), texts))
        aligns.append(str.rjust if numeric else str.ljust)
    lines = ["  ".join(a(h, w) for h, (w, _), a in zip(header, columns, aligns)),
             "  ".join("-" * w for w, _ in columns)]
    lines += ["  ".join(a(t[i], w) for (w, t), a in zip(columns, aligns)) for i in range(len(rows))]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _is_number(value: object) -> bool:
    try:
        float(value)  # type: ignore[arg-type]
        return True
    except (TypeError, ValueError):
        return False


def mindinsight_table(cols: Dict) -> str:
    rows: List[List[object]] = []
    total = 0.0
    for i in range(len(cols["name"])):
        rows.append([i + 1, _short(cols["name"][i]), cols["total_us"][i] / 1000, cols["dispatch_us"][i] / 1000,
                     str(cols["run_start_us"][i]), str(cols["run_end_us"][i])])
        total += cols["total_us"][i] / 1000
    rows.append(["AI CPU Total Time(ms):", f"{total:.6f}"])
    return simple_table(["serial_number", "node_type_name", "total_time(ms)", "dispatch_time(ms)", "run_start",
                         "run_end"], rows)


# The op names MindSpore's unit test hands its AI CPU parser for the binary sample
# (tests/ut/python/profiler/parser/test_aicpu_parser.py: op_task_dict).
DROPOUT = "Default/network-_VirtualDatasetCell/_backbone-WithLossCell/_backbone-AlexNet/dropout-Dropout/"
MS_OP_TASK = {"22_2": DROPOUT + "DropoutGenMask-op281", "22_4": DROPOUT + "DropoutGenMask-op280"}


@pytest.mark.parametrize("data, expect, render", [
    ("mindspore-ut-profiler-data/JOB_AICPU/data/DATA_PREPROCESS.AICPU.0.slice_0",
     "mindspore-ut-profiler-data/JOB_AICPU/expect/output_data_preprocess_aicpu_0.txt", "mindspore"),
    ("mindspore-ut-profiler-data/JOB_AICPU/data_txt/DATA_PREPROCESS.dev.AICPU.0.slice_0",
     "mindspore-ut-profiler-data/JOB_AICPU/expect_txt/output_data_preprocess_aicpu_0.txt", "mindspore"),
    ("mindinsight-legacy-job/JOB_AICPU/data/DATA_PREPROCESS.dev.AICPU.0.slice_0",
     "mindinsight-legacy-job/JOB_AICPU/expect/output_data_preprocess_aicpu_0.txt", "mindinsight"),
])
def test_aicpu_records_reproduce_the_expected_files(data, expect, render):
    buf, pieces = read_stream([os.path.join(REAL, data)])
    cols, issues = decode_aicpu(buf, pieces, True)
    assert not issues
    text = mindspore_lines(cols, MS_OP_TASK) if render == "mindspore" else mindinsight_table(cols)
    with open(os.path.join(REAL, expect), encoding="utf-8") as f:
        assert text == f.read()


def test_aicpu_records_land_in_the_store(tmp_path, capsys):
    job = imported(os.path.join(LEGACY, "JOB_AICPU"), str(tmp_path / "JOB_AICPU"), capsys)
    rows = read_table(job, "KIT_AICPU")
    assert rows["name"].tolist() == ["InitData", "GetNext", "Default/TruncatedNormal-op0"]
    assert rows["totalUs"].tolist() == [1567, 989, 1566] and rows["dispatchUs"].tolist() == [100, 87, 105]
    assert rows["startNs"].tolist() == [2298200409000, 2302769932000, 4098200409000]
    assert set(rows["runStartTicks"]) == {-1}  # this variant has no tick counts


# --- text Framework files: op names, block dims, task and stream ids ----------------------------------


def task_desc_lines(path: str) -> List[tuple]:
    """(op name, block dim, task id, stream id) of each line, read independently of the parser."""
    with open(path, encoding="utf-8") as f:
        return sorted((p[0], int(p[1]), int(p[2]), int(p[3])) for p in (line.split() for line in f) if p)


@pytest.mark.parametrize("folder, task_file", [
    ("JOB1", "Framework.host.vm.task_desc_info.0.slice_0"),
    ("JOB4", "data/Framework.host.vm.task_desc_info.0.slice_0"),
    ("container/0", "data/Framework.host.vm.task_desc_info.0.JOB2.slice_0"),
])
def test_text_framework_ops_land_in_the_store(folder, task_file, tmp_path, capsys):
    job = imported(os.path.join(LEGACY, folder), str(tmp_path / folder.replace("/", "_")), capsys)
    info = ops_in_store(job)
    stored = sorted(zip(info["name"], info["blockNum"], info["taskId"], info["streamId"]))
    assert stored == task_desc_lines(os.path.join(LEGACY, folder, task_file))
    assert len(stored) == 4
    # graph_desc_info describes the ops (MindSpore's 2020 number types: 40 FLOAT32, 39 FLOAT16)
    cast = info[info["name"] == "Default/Cast-op6"].iloc[0]
    assert (cast["opType"], cast["inputFormats"], cast["inputDataTypes"], cast["inputShapes"],
            cast["outputFormats"], cast["outputDataTypes"], cast["outputShapes"]) == \
        ("Cast", "DefaultFormat", "FLOAT32", '"32,3,224,224"', "DefaultFormat", "FLOAT16", '"32,3,224,224"')
    trans = info[info["name"] == "Default/TransData-op7"].iloc[0]
    assert (trans["outputFormats"], trans["outputShapes"]) == ("NC1HWC0", '"32,1,224,224,16"')
    # no HWTS log: ops without device tasks
    with sqlite3.connect(store.store_path(job)) as conn:
        assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name='TASK'").fetchone()
        rows = dict(conn.execute("SELECT name, value FROM KIT_INFO WHERE deviceId = -1").fetchall())
    assert rows["layout"] == "job" and rows["job_name"] == ("JOB2" if folder == "container/0" else folder)
    assert "chip" not in rows and "platform_version" not in rows


def test_job4_points_name_the_fp_and_bp_ops(tmp_path, capsys):
    job = imported(os.path.join(LEGACY, "JOB4"), str(tmp_path / "JOB4"), capsys)
    points = read_table(job, "KIT_STEP_POINT")
    assert dict(zip(points["tagId"], points["name"])) == {2: "Default/Cast-op6", 3: "Default/TransData-op7"}


def test_job1_training_trace_gives_twenty_iterations(tmp_path, capsys):
    job = writable_copy(os.path.join(LEGACY, "JOB1"), str(tmp_path / "JOB1"))
    code, _, err = run(["import", "-dir", job], capsys)
    assert code == 0, err
    # one warning for the slices without .done, one for what was assumed
    assert [line.split(": ", 2)[2][:20] for line in err.splitlines()] == \
        ["2 raw slices have no", "assumed a 100 MHz HW"]
    steps = read_table(job, "KIT_STEP_TRACE")
    assert len(steps) == 240 and steps["indexId"].max() == 20
    assert steps["timestampNs"].iloc[0] == 45_000_000_000 * 10  # 100 MHz counter, as assumed
    code, out, err = run(["query", "-dir", job], capsys)
    assert code == 0, err
    assert out.splitlines()[2].split()[4:6] == ["4294967295", "20"]  # no model id in a legacy trace


# --- the corrupted sample ------------------------------------------------------------------------------


def test_error_job_is_one_located_error(tmp_path, capsys):
    job = writable_copy(os.path.join(LEGACY, "ERROR_JOB"), str(tmp_path / "ERROR_JOB"))
    before = tree_hashes(job)
    code, out, err = run(["import", "-dir", job], capsys)
    assert code != 0 and out == ""
    lines = err.strip().splitlines()
    trace = os.path.join(job, "training_trace.46.dev.profiler_default_tag.10.slice_0")
    assert len(lines) == 1 and lines[0].startswith(f"Error: {trace}: offset 4800: iteration 21 ")
    assert "expected {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 255}" in lines[0] and "Traceback" not in err
    assert tree_hashes(job) == before and not os.path.exists(store.store_path(job))
    # export imports first: the same error
    code, _, err = run(["export", "summary", "-dir", job], capsys)
    assert code != 0 and err.strip().splitlines() == lines


# --- JOB3: MindInsight's 2020 Ascend 910 training capture (WideDeep, device 1) --------------------------
#
# tests/utils/resource/JOB3 of mindspore-ai/mindinsight (commits c52d0501 .. f8f5c7a9, 2020): a 4 MB HWTS
# log of 62,847 records on physical streams 513-574, and text task descriptions of 199 ops on logical
# streams 3-25. It is bundled as tests/data/real/mindinsight-JOB3.tar.xz (Apache-2.0; see SOURCE.md there);
# MSPROF_KIT_JOB3 may name an unpacked copy instead.

JOB3_ARCHIVE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "real", "mindinsight-JOB3.tar.xz")


def job3_copy(dest: str) -> str:
    """A writable JOB3 folder under dest, from MSPROF_KIT_JOB3 or the bundled archive."""
    if os.environ.get("MSPROF_KIT_JOB3"):
        return writable_copy(os.environ["MSPROF_KIT_JOB3"], os.path.join(dest, "JOB3"))
    with tarfile.open(JOB3_ARCHIVE) as tar:
        members = tar.getmembers()
        assert all(m.name == "JOB3" or m.name.startswith("JOB3/") for m in members)
        assert all(m.isfile() or m.isdir() for m in members)
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(dest, members=members, **safe)
    return os.path.join(dest, "JOB3")


# MindInsight's assertion on this capture (tests/st/func/profiler/test_op_analyser.py at f8f5c7a9,
# test_query_aicore_type_1): per op type, the sum over its ops of each op's mean duration (ms), the
# number of ops of the type, and that sum's share of the sum over all ops (%).
MINDINSIGHT_JOB3_TYPES = {
    "UnsortedSegmentSum": (44.607826, 2, 35.28), "GatherV2": (43.155441, 2, 34.13), "Slice": (20.376315, 16, 16.12),
    "Concat": (5.808454, 4, 4.59), "Split": (2.714277, 2, 2.15), "MatMul": (1.936681, 15, 1.53),
    "Mul": (1.902949, 32, 1.51), "StridedSliceGrad": (1.506834, 2, 1.19), "TransData": (1.115158, 30, 0.88),
    "ReluGrad": (0.854069, 5, 0.68), "Cast": (0.484685, 15, 0.38), "ReLU": (0.483282, 5, 0.38),
    "RealDiv": (0.422807, 15, 0.33), "StridedSlice": (0.345569, 2, 0.27), "Adam": (0.285936, 11, 0.23),
    "BiasAdd": (0.189663, 5, 0.15), "BiasAddGrad": (0.071681, 5, 0.06), "Tile": (0.044158, 4, 0.03),
    "ReduceSum": (0.030765, 5, 0.02), "ApplyFtrl": (0.025454, 2, 0.02), "AtomicAddrClean": (0.019369, 8, 0.02),
    "AddN": (0.012836, 1, 0.01), "Square": (0.009799, 1, 0.01), "SigmoidCrossEntropyWithLogitsGrad": (0.009582, 2, 0.01),
    "TensorAdd": (0.009218, 3, 0.01), "SigmoidCrossEntropyWithLogits": (0.004809, 1, 0.0),
    "ReduceMean": (0.004535, 1, 0.0), "Assign": (0.002477, 2, 0.0), "AssignAdd": (0.001688, 1, 0.0)}
# ... and test_query_aicore_detail_1: the mean duration (ms) of the two GatherV2 ops
GATHER = "Default/network-TrainStepWrap/network-VirtualDatasetCellTriple/_backbone-NetWithLossClass/network-WideDeepModel/"
MINDINSIGHT_JOB3_GATHER = {GATHER + "GatherV2-op55": 42.220212142857136, GATHER + "GatherV2-op33": 0.9352293333333332}


def test_job3_names_by_task_id_and_mindinsight_op_type_times(tmp_path, capsys):
    job = job3_copy(str(tmp_path))
    code, _, err = run(["import", "-dir", job], capsys)
    assert code == 0, err
    assert [line for line in err.splitlines() if "task id" in line] == [
        f"Warning: {job}: device 1: the HWTS log's stream ids (513-574) match none of the task descriptions' "
        "(3-25); 2817 tasks named by task id alone, assuming a task id is unique on the device (described once "
        "and run on one HWTS stream)"]
    with sqlite3.connect(store.store_path(job)) as conn:
        strings = dict(conn.execute("SELECT id, value FROM STRING_IDS").fetchall())
        t = pd.read_sql("SELECT t.startNs, t.endNs, t.streamId, k.streamId AS described, c.name, c.opType "
                        "FROM TASK t JOIN COMPUTE_TASK_INFO c USING (globalTaskId) "
                        "JOIN KIT_COMPUTE_TASK k USING (globalTaskId)", conn)
    assert len(t) == 2817 and t["name"].nunique() == 199
    # observed, not assumed: every named task's HWTS stream is its described stream + 516
    assert set(t["streamId"] - t["described"]) == {516}
    t["name"], t["opType"] = t["name"].map(strings), t["opType"].map(strings)
    per_op = t.assign(ms=(t["endNs"] - t["startNs"]) / 1e6).groupby(["opType", "name"])["ms"].mean()
    for name, ms in MINDINSIGHT_JOB3_GATHER.items():
        assert per_op.xs(name, level="name").iloc[0] == pytest.approx(ms, abs=1e-9)
    by_type = per_op.groupby(level="opType").agg(["sum", "size"])
    total = by_type["sum"].sum()
    ours = {k: (round(s, 6), int(n), round(s / total * 100, 2)) for k, s, n in
            zip(by_type.index, by_type["sum"], by_type["size"])}
    assert ours == MINDINSIGHT_JOB3_TYPES
