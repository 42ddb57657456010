"""Issue 4 part 3: `msprof-kit show` on every exported real data set, on golden raw collections,
and its options (--top, --sort, -r, --format, no -dir, show | head).

The expected values are computed here from the files themselves with plain pandas, csv, json and
sqlite, not through msprof_kit.sources. Real data is copied to tmp_path first (it is read-only)."""
from __future__ import annotations

import csv
import glob
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections import defaultdict
from typing import Dict, Tuple

import pandas as pd
import pytest

from realdata import REAL, copy_real, needs_real
from conftest import GOLDEN, INTACT_CASES, copy_input, needs_shared, run, tree_hashes

from msprof_kit import cli, sources
from msprof_kit.errors import Diagnostics


PT_TEXT = "msinsight-testdata/test_data_pytorch/text"
PT_DB = "msinsight-testdata/test_data_pytorch/db"
TORCH_MLP = "oam-tools-experience/torch_npu_mlp_cann910/hdspace-32g-outer-17_59186_20260601142437309_ascend_pt"
MINDINSIGHT = "mindinsight-prof910a-timeline"

# every exported data set under shared/data/real: (the collection folder shown, the file its op
# rows come from, how to read that file). Sets that hold no exported summaries are listed in
# NOT_EXPORTED below, with the reason.
EXPORTED_SETS = [
    ("cann-learning-hub-as_strided/perf/round_001", "op_summary.csv", "csv"),
    (f"{MINDINSIGHT}/PROF_000001_20230818142704322_COJGGGCANRMICFBC", "device_0/timeline/task_time_0_2_*.json",
     "timeline"),
    (f"{MINDINSIGHT}/PROF_000001_20230818142704567_GQFAMHBKGODKJMLA", "device_1/timeline/task_time_1_0_*.json",
     "timeline"),
    ("msinsight-testdata/server_test_data/full_db", "msprof_0.db", "db"),
    ("msinsight-testdata/server_test_data/heatMap", "trace_view.json", "timeline"),
    ("msinsight-testdata/server_test_data/test_kernel_parse", "op_summary_1.csv", "csv"),
    ("msinsight-testdata/server_test_data/test_rank_0", "ASCEND_PROFILER_OUTPUT/kernel_details.csv", "csv"),
    ("msinsight-testdata/server_test_data/test_rank_1", "ASCEND_PROFILER_OUTPUT/kernel_details.csv", "csv"),
] + [
    (f"{PT_TEXT}/level{lv}/rank{r}_ascend_pt", "ASCEND_PROFILER_OUTPUT/kernel_details.csv", "csv")
    for lv in range(3) for r in range(2)
] + [
    (f"{PT_DB}/level{lv}/rank{r}_ascend_pt", f"ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_{r}.db", "db")
    for lv in range(3) for r in range(2)
] + [
    ("msprof-analyze-ut/test/resource", "test.csv", "csv"),
    ("msprof-analyze-ut/test/ut/advisor/advisor_backend/compute_advice", "kernel_details.csv", "csv"),
    ("msprof-analyze-ut/test/ut/advisor/compute_advice/data", "kernel_details.csv", "csv"),
    ("msprof-analyze-ut/test/ut/advisor/timeline_advice", "trace_view.json", "timeline"),
    ("oam-tools-experience/msprof_cli_matmul_910B3_cann852/20260624_matmul_basic_api_board",
     "mindstudio_profiler_output/op_summary_20260624165820.csv", "csv"),
    (TORCH_MLP, "PROF_000001_20260601142437347_00059186NEKMCJOO/mindstudio_profiler_output/"
                "op_summary_20260601142441.csv", "csv"),
]
NOT_EXPORTED = {
    "mindinsight-legacy-job": "raw legacy JOB data (read through the store once its import exists)",
    "mindspore-ut-profiler-data": "raw framework slices and MindSpore's own intermediate CSVs",
    "msprof-ut-config": "control files only",
}


# ------------------------------------------------------------------------------------------------
# The expected top operator, computed from the source file alone


def top_from_csv(path: str) -> Tuple[str, float]:
    frame = pd.read_csv(path, dtype=str, keep_default_na=False, index_col=False)
    name = "Op Name" if "Op Name" in frame.columns else "Name"
    dur = "Task Duration(us)" if "Task Duration(us)" in frame.columns else "Duration(us)"
    totals = pd.to_numeric(frame[dur].str.strip(), errors="coerce").groupby(frame[name]).sum()
    return str(totals.idxmax()), float(totals.max())


def top_from_db(path: str) -> Tuple[str, float]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT s.value, SUM(t.endNs - t.startNs) FROM TASK t JOIN COMPUTE_TASK_INFO c "
            "ON c.globalTaskId = t.globalTaskId JOIN STRING_IDS s ON s.id = c.name GROUP BY s.value").fetchall()
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'COMMUNICATION_OP'").fetchone():
            rows += conn.execute("SELECT s.value, SUM(o.endNs - o.startNs) FROM COMMUNICATION_OP o "
                                 "JOIN STRING_IDS s ON s.id = o.opName GROUP BY s.value").fetchall()
    finally:
        conn.close()
    totals: Dict[str, int] = defaultdict(int)
    for name, ns in rows:
        totals[name] += ns
    name = max(totals, key=lambda n: totals[n])
    return name, totals[name] / 1000


def top_from_timelines(paths) -> Tuple[str, float]:
    totals: Dict[str, float] = defaultdict(float)
    for path in paths:
        with open(path) as f:
            events = json.load(f)
        hardware = {e["pid"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"
                    and e["args"]["name"] == "Ascend Hardware"}
        for e in events:
            if e.get("ph") == "X" and e.get("pid") in hardware and e["name"] != e["args"].get("Task Type"):
                totals[e["name"]] += float(e["dur"])
    name = max(totals, key=lambda n: totals[n])
    return name, totals[name]


@needs_real
@pytest.mark.parametrize("rel, source, how", EXPORTED_SETS, ids=[s[0] for s in EXPORTED_SETS])
def test_show_prints_the_top_operator_of_every_exported_set(rel, source, how, tmp_path, capsys):
    folder = copy_real(rel, tmp_path)
    files = sorted(glob.glob(os.path.join(folder, source)))
    assert files, source
    name, total = {"csv": lambda: top_from_csv(files[0]), "db": lambda: top_from_db(files[0]),
                   "timeline": lambda: top_from_timelines(files)}[how]()
    before = tree_hashes(folder)
    code, out, err = run(["show", "-dir", folder], capsys)
    assert code == 0, err
    assert "Traceback" not in err
    first = out.split("Op summary:", 1)[1].split("\n\n")[0]  # the op summary table
    top_row = first.splitlines()[3]
    assert name in top_row and f"{total:.3f}" in top_row, (name, total, first)
    assert tree_hashes(folder) == before  # show writes nothing into exported data


@needs_real
def test_every_real_data_set_is_surveyed(tmp_path):
    """Each data set is either among the exported sets shown above or listed as holding none."""
    covered = {rel.split("/")[0] for rel, _, _ in EXPORTED_SETS}
    for name in sorted(os.listdir(REAL)):
        if os.path.isdir(os.path.join(REAL, name)):
            assert name in covered or name in NOT_EXPORTED, name
    for name in NOT_EXPORTED:  # and those really hold nothing show can read
        folder = copy_real(name, tmp_path)
        assert [f for f in sources.discover(folder) if not f.raw] == []


@needs_real
def test_a_pytorch_run_is_one_collection_with_both_exports(tmp_path, capsys):
    """The PyTorch profiler's ASCEND_PROFILER_OUTPUT and the msprof export inside its PROF_xxx are
    one collection: shown once, from the msprof export."""
    folder = copy_real(TORCH_MLP, tmp_path)
    found = sources.discover(str(tmp_path))
    assert [f.path for f in found] == [folder]
    code, out, _ = run(["show", "-dir", str(tmp_path)], capsys)
    assert code == 0 and out.count("Collection:") == 1 and out.count("Op summary:") == 1


@needs_real
def test_a_folder_of_several_collections_shows_each(tmp_path, capsys):
    folder = copy_real(f"{PT_TEXT}/level1", tmp_path)
    code, out, _ = run(["show", "-dir", folder, "-r", "api_statistic", "--format", "json"], capsys)
    assert code == 0
    docs = json.loads(out)
    assert [os.path.basename(d["collection"]) for d in docs] == ["rank0_ascend_pt", "rank1_ascend_pt"]
    for d in docs:
        api = pd.read_csv(os.path.join(d["collection"], "ASCEND_PROFILER_OUTPUT", "api_statistic.csv"))
        assert len(d["api_statistic"]) == min(20, len(api))
        assert d["api_statistic"][0]["Time(us)"] == pytest.approx(api["Time(us)"].max(), abs=1e-3)


# ------------------------------------------------------------------------------------------------
# Golden raw collections: the totals equal the reference's exports of the same collection


def read_reference_csv(path: str) -> pd.DataFrame:
    """A reference CSV; the C++ writer does not quote, so a name holding a comma spans several
    fields: those are joined back into the name column."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    at = header.index("Op Name") if "Op Name" in header else 0
    fixed = []
    for row in body:
        extra = len(row) - len(header)
        if extra > 0:
            row = row[:at] + [",".join(row[at:at + extra + 1])] + row[at + extra + 1:]
        fixed.append(row)
    return pd.DataFrame(fixed, columns=header)


def number(series: pd.Series) -> pd.Series:
    return pd.to_numeric(series.str.strip(), errors="coerce")


@needs_shared
@pytest.mark.parametrize("case", INTACT_CASES)
def test_show_on_a_raw_collection_matches_its_exports(case, tmp_path, capsys):
    prof = copy_input(case, str(tmp_path))
    code, out, err = run(["show", "-dir", prof, "--top", "0", "--format", "json"], capsys)
    assert code == 0, err
    shown = json.loads(out)
    flavour = "python" if case.startswith("310p") else "cpp"
    ref = os.path.join(GOLDEN, case, flavour)

    ops = read_reference_csv(os.path.join(ref, "op_summary.csv"))
    want = number(ops["Task Duration(us)"]).groupby(ops["Op Name"]).agg(["sum", "count"])
    got = pd.DataFrame(shown["op_summary"]).groupby("Op Name")[["Total Time(us)", "Count"]].sum()
    assert sorted(got.index) == sorted(want.index)
    assert (got["Count"].reindex(want.index) == want["count"]).all()
    assert (got["Total Time(us)"].reindex(want.index) - want["sum"]).abs().max() < 2e-3

    stat_ref = read_reference_csv(os.path.join(ref, "op_statistic.csv"))
    want = number(stat_ref["Total Time(us)"]).groupby([stat_ref["OP Type"], stat_ref["Core Type"]]).sum()
    got = pd.DataFrame(shown["op_statistic"]).groupby(["OP Type", "Core Type"])["Total Time(us)"].sum()
    assert sorted(got.index) == sorted(want.index)
    assert (got.reindex(want.index) - want).abs().max() < 2e-3

    api_ref = read_reference_csv(os.path.join(ref, "api_statistic.csv"))
    want = number(api_ref["Time(us)"]).groupby([api_ref["Level"], api_ref["API Name"]]).sum()
    got = pd.DataFrame(shown["api_statistic"]).groupby(["Level", "API Name"])["Time(us)"].sum()
    assert sorted(got.index) == sorted(want.index)
    assert (got.reindex(want.index) - want).abs().max() < 2e-3

    # the terminal table leads with the operator of the largest total
    code, out, _ = run(["show", "-dir", prof, "-r", "op_summary", "--top", "1"], capsys)
    per_op = number(ops["Task Duration(us)"]).groupby(
        [ops["Device_id"], ops["Op Name"]] if ops["Device_id"].nunique() > 1 else ops["Op Name"]).sum()
    top = per_op.idxmax()
    assert code == 0 and (top if isinstance(top, str) else top[1]) in out and f"{per_op.max():.3f}" in out


@needs_shared
def test_a_store_without_its_raw_data_is_shown(tmp_path, capsys):
    """A folder holding only a store (as a legacy JOB import writes it: the same schema) is read
    from the store."""
    prof = copy_input("910b_mixed", str(tmp_path / "raw"))
    assert cli.main(["import", "-dir", prof]) == 0
    only = tmp_path / "only_store"
    os.makedirs(only / "sqlite")
    shutil.copy(os.path.join(prof, "sqlite", "msprof_kit.db"), only / "sqlite")
    capsys.readouterr()
    code, out_raw, _ = run(["show", "-dir", prof], capsys)
    code2, out_store, _ = run(["show", "-dir", str(only)], capsys)
    assert code == code2 == 0
    assert out_raw.split("\n", 1)[1] == out_store.split("\n", 1)[1]  # all but the Collection line
    assert "AI Core frequency" in out_store


# ------------------------------------------------------------------------------------------------
# Options


@pytest.fixture
def mlp(tmp_path):
    if not os.path.isdir(REAL):
        pytest.skip("../shared/data/real is not beside the repo")
    return copy_real(TORCH_MLP, tmp_path)


@pytest.fixture
def level1(tmp_path):
    if not os.path.isdir(REAL):
        pytest.skip("../shared/data/real is not beside the repo")
    return copy_real(f"{PT_TEXT}/level1/rank0_ascend_pt", tmp_path)


def test_show_has_help(tmp_path):
    res = subprocess.run([sys.executable, "-m", "msprof_kit", "show", "--help"], capture_output=True, text=True,
                         cwd=tmp_path)  # the installed package, not the source tree of the cwd
    assert res.returncode == 0 and "--sort COLUMN" in res.stdout and "op_summary" in res.stdout


def test_top_limits_every_table(level1, capsys):
    code, out, _ = run(["show", "-dir", level1, "--top", "3", "--format", "json"], capsys)
    doc = json.loads(out)
    assert code == 0 and [len(doc[r]) for r in ("op_summary", "op_statistic", "api_statistic")] == [3, 3, 3]
    code, out, _ = run(["show", "-dir", level1, "--top", "3", "-r", "op_statistic"], capsys)
    assert "top 3 of 33 op types" in out and len(out.strip().splitlines()) == 3 + 2 + 2 + 1
    code, out, _ = run(["show", "-dir", level1, "--top", "0", "-r", "op_statistic", "--format", "json"], capsys)
    assert len(json.loads(out)["op_statistic"]) == 33


def test_sort_by_a_column_any_case(level1, capsys):
    code, out, _ = run(["show", "-dir", level1, "-r", "op_statistic", "--sort", "count", "--top", "0",
                        "--format", "json"], capsys)
    counts = [r["Count"] for r in json.loads(out)["op_statistic"]]
    assert code == 0 and counts == sorted(counts, reverse=True) and counts[0] == 57
    code, out, _ = run(["show", "-dir", level1, "-r", "op_statistic", "--sort", "OP TYPE", "--top", "0",
                        "--format", "json"], capsys)
    types = [r["OP Type"] for r in json.loads(out)["op_statistic"]]
    assert types == sorted(types)
    code, out, _ = run(["show", "-dir", level1, "-r", "api_statistic", "--sort", "max", "--top", "1"], capsys)
    api = pd.read_csv(os.path.join(level1, "ASCEND_PROFILER_OUTPUT", "api_statistic.csv"))
    assert "by Max(us), largest first" in out and api.loc[api["Max(us)"].idxmax(), "API Name"] in out


def test_a_bad_sort_column_lists_the_choices(level1, capsys):
    code, out, err = run(["show", "-dir", level1, "-r", "op_statistic", "--sort", "bogus"], capsys)
    assert code == 1 and out == ""
    assert err.startswith("Error: --sort 'bogus' names no column") and "Traceback" not in err
    assert "op_statistic: OP Type, Core Type, Count, Total Time(us)" in err
    code, _, err = run(["show", "-dir", level1, "-r", "op_statistic", "--sort", "m"], capsys)
    assert code == 1 and "--sort 'm'" in err  # the start of several columns (Min, Max) names none


def test_report_choice(level1, capsys):
    code, out, _ = run(["show", "-dir", level1, "-r", "api_statistic"], capsys)
    assert code == 0 and "API statistic:" in out and "Op summary:" not in out and "Op statistic:" not in out
    code, out, _ = run(["show", "-dir", level1, "-r", "freq,op_statistic"], capsys)
    assert out.index("Op statistic:") < out.index("AI Core frequency:") and "API statistic" not in out
    code, out, err = run(["show", "-dir", level1, "-r", "bogus"], capsys)
    assert code == 1 and out == "" and err == \
        "Error: unknown report 'bogus'; choose from op_summary, op_statistic, api_statistic, freq, communication, memory\n"


@needs_real
def test_a_report_without_data_names_what_was_looked_for(tmp_path, capsys):
    folder = copy_real("msinsight-testdata/server_test_data/test_kernel_parse", tmp_path)
    code, out, err = run(["show", "-dir", folder, "-r", "api_statistic"], capsys)
    assert code == 4 and out == ""
    assert err.startswith(f"Error: {folder}: no api_statistic data") and "CANN_API" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run(["show", "-dir", str(empty)], capsys)
    assert code == 4 and f"{empty}: no profiling data here or below; looked for" in err  # no data, as plot
    assert "mindstudio_profiler_output" in err and "ASCEND_PROFILER_OUTPUT" in err


def test_csv_and_json_parse_back(level1, capsys):
    ref = pd.read_csv(os.path.join(level1, "ASCEND_PROFILER_OUTPUT", "op_statistic.csv"))
    code, out, _ = run(["show", "-dir", level1, "-r", "op_statistic", "--top", "0", "--format", "csv"], capsys)
    back = pd.read_csv(io.StringIO(out))
    assert code == 0 and list(back.columns) == list(ref.columns)
    pd.testing.assert_frame_equal(back.sort_values(["OP Type", "Core Type"]).reset_index(drop=True),
                                  ref.sort_values(["OP Type", "Core Type"]).reset_index(drop=True),
                                  check_exact=False, atol=1e-3)
    code, out, _ = run(["show", "-dir", level1, "--format", "json", "--top", "0"], capsys)
    doc = json.loads(out)
    assert set(doc) == {"collection", "sources", "op_summary", "op_statistic", "api_statistic", "freq"}
    assert sum(r["Count"] for r in doc["op_summary"]) == 191
    assert {r["API Name"] for r in doc["api_statistic"]} == set(
        pd.read_csv(os.path.join(level1, "ASCEND_PROFILER_OUTPUT", "api_statistic.csv"))["API Name"])
    code, out, _ = run(["show", "-dir", level1, "--format", "csv", "--top", "2"], capsys)
    sections = [s for s in out.split("\n\n") if s.strip()]
    assert [s.splitlines()[0] for s in sections] == ["# op_summary", "# op_statistic", "# api_statistic", "# freq"]
    assert len(pd.read_csv(io.StringIO(sections[2].split("\n", 1)[1]))) == 2


@needs_real
def test_without_dir_the_newest_collection_is_shown(tmp_path, capsys, monkeypatch):
    older = copy_real("oam-tools-experience/msprof_cli_matmul_910B3_cann852/20260624_matmul_basic_api_board",
                      tmp_path)
    newer = copy_real("cann-learning-hub-as_strided/perf/round_001", tmp_path)
    os.utime(older, (1_700_000_000, 1_700_000_000))
    os.utime(newer, (1_700_000_100, 1_700_000_100))
    monkeypatch.chdir(tmp_path)
    code, out, err = run(["show", "-r", "op_summary"], capsys)
    assert code == 0 and err == f"Showing {newer} (the newest collection under {tmp_path})\n"
    assert "aclnnInplaceCopy_SliceAiCore_Slice" in out and "mmad_custom" not in out
    os.utime(older, (1_700_000_200, 1_700_000_200))
    code, out, err = run(["show", "-r", "op_summary"], capsys)
    assert code == 0 and f"Showing {older} " in err and "mmad_custom" in out


def test_show_piped_into_head_ends_quietly(tmp_path):
    """`show | head -1`: the output is far larger than a pipe's buffer, so show's writes fail once
    head has gone; that must end quietly with exit 0."""
    folder = tmp_path / "big"
    folder.mkdir()
    with open(folder / "op_summary.csv", "w") as f:
        f.write("Device_id,Op Name,OP Type,Task Type,Task Duration(us)\n")
        for i in range(30000):
            f.write(f"0,op_{i:05d},Add,AI_CORE,{i % 97 + 1}.5\n")
    res = subprocess.run(["bash", "-c", f"set -o pipefail; '{sys.executable}' -m msprof_kit show "
                                        f"-dir '{folder}' --top 0 | head -1"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert res.stdout == f"Collection: {folder}\n"
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""


class ClosedPipe:
    """A stdout whose reader has gone: every write fails as a closed pipe does."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        return self.fd


def test_a_closed_stdout_is_no_error(tmp_path, capsys, monkeypatch):
    (tmp_path / "op_summary.csv").write_text("Op Name,OP Type,Task Type,Task Duration(us)\nAdd_1,Add,AI_CORE,2.0\n")
    fd = os.open(tmp_path / "out.txt", os.O_WRONLY | os.O_CREAT)
    try:
        monkeypatch.setattr(sys, "stdout", ClosedPipe(fd))
        assert cli.main(["show", "-dir", str(tmp_path)]) == 0
    finally:
        os.close(fd)
    assert capsys.readouterr().err == ""


# ------------------------------------------------------------------------------------------------
# Header generations and CSV quirks


def test_header_variants_read_alike(tmp_path):
    new = ("Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,Task Start Time(us),"
           "Task Duration(us),Task Wait Time(us),Block Num,Mix Block Num,aic_mac_ratio\n"
           "0,4294967295,1,2,MatMul_1,MatMul,dynamic,AI_CORE,1717575960208100.250\t,35.200,0,24,0,0.5\n")
    old = ("Step Id,Model ID,Task ID,Stream ID,Name,Type,Accelerator Core,Start Time(us),Duration(us),"
           "Wait Time(us),Block Dim,Mix Block Dim,aic_mac_ratio\n"
           '1,4294967295,1,2,MatMul_1,MatMul,AI_CORE,"1717575960208100.250\t",35.2,0,24,0,0.5\n')
    frames = []
    for i, text in enumerate((new, old)):
        path = tmp_path / f"v{i}.csv"
        path.write_text(text)
        assert sources.csv_kind(str(path)) == "op_summary"
        frames.append(sources.read_csvs([str(path)], "op_summary"))
    for frame in frames:
        row = frame.iloc[0]
        assert row["Op Name"] == "MatMul_1" and row["OP Type"] == "MatMul" and row["Task Type"] == "AI_CORE"
        assert row["Task Duration(us)"] == 35.2 and row["Block Num"] == 24 and row["aic_mac_ratio"] == 0.5
        assert row["Task Start Time(us)"] == pytest.approx(1717575960208100.25)
    assert frames[0]["Device_id"][0] == "0" and frames[1]["Device_id"][0] == "N/A"


def test_names_with_commas_from_the_unquoting_writer(tmp_path):
    """The reference's C++ writer does not quote: `a,b` spans two fields; trailing empty fields
    (seen in kernel_details) are dropped."""
    path = tmp_path / "op_summary_20240101000000.csv"
    path.write_text("Device_id,Op Name,OP Type,Task Type,Task Duration(us)\n"
                    "0,model/ffn,gate/ReduceSum_17,ReduceSum,AI_VECTOR_CORE,18.240\n"
                    "0,Add_1,Add,AI_CORE,2.0,\n")
    frame = sources.read_csvs([str(path)], "op_summary")
    assert frame["Op Name"].tolist() == ["model/ffn,gate/ReduceSum_17", "Add_1"]
    assert frame["Task Duration(us)"].tolist() == [18.24, 2.0]


def test_sliced_and_stamped_exports(tmp_path):
    """The newest export's slices are read together; an older export beside it is not."""
    out = tmp_path / "PROF_1" / "mindstudio_profiler_output"
    out.mkdir(parents=True)
    head = "Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\n"
    (out / "op_statistic_20240101000000.csv").write_text(head + "0,Old,AI_CORE,1,1,1,1,1,100\n")
    (out / "op_statistic_slice_0_20240202000000.csv").write_text(head + "0,A,AI_CORE,1,3,3,3,3,75\n")
    (out / "op_statistic_slice_1_20240202000000.csv").write_text(head + "0,B,AI_CORE,1,1,1,1,1,25\n")
    [found] = sources.discover(str(tmp_path))
    t = sources.load(found, Diagnostics(), ["op_statistic"])
    assert t.op_statistic["OP Type"].tolist() == ["A", "B"]


def test_show_on_a_raw_job_collection_prints_its_top_operator(tmp_path, capsys):
    """A legacy JOB collection is imported first; the top operator is the one with the largest
    total of its executions in the synthetic writer's plan."""
    from synth_job import plan_job, write_job

    job = write_job(str(tmp_path), n_tasks=40, iterations=2)
    plan = plan_job(40, iterations=2)
    dur = plan.tick_ns(plan.task_end) - plan.tick_ns(plan.task_start)
    totals = pd.Series(dur).groupby([plan.op_name[k] for k in plan.task_op]).sum()
    code = cli.main(["show", "-dir", job, "-r", "op_summary", "--format", "json"])
    out = capsys.readouterr().out
    assert code == 0
    rows = json.loads(out)
    rows = rows["op_summary"] if isinstance(rows, dict) else rows[0]["op_summary"]
    assert rows[0]["Op Name"] == totals.idxmax()
    assert abs(float(rows[0]["Total Time(us)"]) - totals.max() / 1000) < 1e-6


def test_tables_import_nothing_themselves(tmp_path):
    """The sources read stores and exported files; a raw collection's store is made by the caller's
    EnsureStores (the CLI gives importer.imported_paths). Without one, its store is read as it is,
    and a collection that has none is the StoreError that says so; nothing is written."""
    from synth_job import write_job

    from msprof_kit import store
    from msprof_kit.errors import StoreError
    from msprof_kit.importer import imported_paths

    job = write_job(str(tmp_path), n_tasks=20, iterations=1)
    [found] = sources.discover(job)
    with pytest.raises(StoreError, match=r"no store here; run 'msprof-kit import' first"):
        sources.load(found, Diagnostics(), ["op_summary"])
    assert not os.path.exists(store.store_path(job))
    made = sources.load(found, Diagnostics(), ["op_summary"], ensure=imported_paths)
    assert os.path.isfile(store.store_path(job)) and made.sources["op_summary"] == store.store_path(job)
    [found] = sources.discover(job)
    as_is = sources.load(found, Diagnostics(), ["op_summary"])
    assert as_is.op_rows.equals(made.op_rows)
