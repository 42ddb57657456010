"""Issue 7, part 2: `compare` reports exactly the differences built into two synthetic collections,
zero deltas for a collection against itself (raw, and raw against its own export), the SoC guide's
case (Mish replaced by LeakyRelu), the real data pairs, and draws its chart."""
from __future__ import annotations

import dataclasses
import os
import shutil
from typing import Dict, Optional, Tuple

import numpy as np
import pytest

import synth_job
from msprof_kit import compare
from msprof_kit.errors import BadOption, Diagnostics
from msprof_kit.importer import imported_paths

from realdata import copy_real, needs_real
from conftest import copy_input, needs_shared, run, tree_hashes

OAM = "oam-tools-experience"
MATMUL_BOARD = "msprof_cli_matmul_910B3_cann852/20260624_matmul_basic_api_board"
TORCH_MLP = "torch_npu_mlp_cann910"
PT_LEVEL1 = "msinsight-testdata/test_data_pytorch/text/level1"
PT_DB_LEVEL1 = "msinsight-testdata/test_data_pytorch/db/level1"
ORIGINAL_PLAN = synth_job.plan_job


# ------------------------------------------------------------------------------------------------
# Synthetic JOB pairs: the plan synth_job writes, changed in known ways


def changed_plan(factors: Optional[Dict[str, float]] = None, drop_op: Optional[int] = None,
                 rename: Optional[Tuple[str, str]] = None, execute_extra_ns: int = 0):
    """A stand-in for synth_job.plan_job that writes the same JOB except: the tasks of each op
    type in `factors` last that many times as long; the executions of op `drop_op` are gone (its
    description stays: an op that never ran); op type `rename[0]` is called `rename[1]` (type and
    names); every aclmdlExecute ends `execute_extra_ns` later."""
    def plan(*args, **kwargs):
        p = ORIGINAL_PLAN(*args, **kwargs)
        names, op_types = list(p.op_name), list(p.op_type)
        if rename:
            old, new = rename
            names = [n.replace(f"/{old}-", f"/{new}-") for n in names]
            op_types = [new if t == old else t for t in op_types]
        types = np.array(op_types, dtype=object)[p.task_op]
        end = p.task_end.copy()
        for op_type, factor in (factors or {}).items():
            sel = types == op_type
            end[sel] = p.task_start[sel] + np.round((p.task_end[sel] - p.task_start[sel]) * factor).astype(np.int64)
        keep = p.task_op != drop_op if drop_op is not None else np.ones(len(p.task_op), dtype=bool)
        api_end = p.api_end.copy()
        api_end[np.array(p.api_name) == "aclmdlExecute"] += execute_extra_ns
        return dataclasses.replace(p, task_op=p.task_op[keep], task_iteration=p.task_iteration[keep],
                                   task_start=p.task_start[keep], task_end=end[keep], op_name=names,
                                   op_type=op_types, api_end=api_end)
    return plan


def write_pair(tmp_path, monkeypatch, a_change: dict, b_change: dict) -> Tuple[str, str]:
    paths = []
    for tag, change in (("A", a_change), ("B", b_change)):
        monkeypatch.setattr(synth_job, "plan_job", changed_plan(**change))
        paths.append(synth_job.write_job(str(tmp_path / tag), 40))
    monkeypatch.setattr(synth_job, "plan_job", ORIGINAL_PLAN)
    return paths[0], paths[1]


# The plan: 20 ops (op k has type OP_TYPES[k % 7]) run in 2 iterations; every 5th op is an AI CPU op.
# Op 3 is `Default/network-Net/layer0/Cast-op3`; MatMul ops are 1, 8, 15.
SLOWER_MATMUL_NO_CAST3 = dict(factors={"MatMul": 2.0}, drop_op=3, execute_extra_ns=50_000)


@pytest.fixture()
def known_pair(tmp_path, monkeypatch):
    return write_pair(tmp_path, monkeypatch, {}, SLOWER_MATMUL_NO_CAST3)


def side(path: str) -> compare.Side:
    """One side as `msprof-kit compare` reads it: a raw collection is imported first."""
    return compare.load_side(path, Diagnostics(), imported_paths)


def data_rows(text: str) -> Dict[str, str]:
    """The lines of the first table of compare's text, by their first cell."""
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("-----"))
    rows = {}
    for line in lines[head + 1:]:
        if not line.strip():
            break
        rows[line.split("  ")[0]] = line
    return rows


def test_known_differences_by_type(known_pair):
    a, b = known_pair
    result = compare.compare_sides(side(a), side(b), "type")
    rows = result.rows.set_index("OP Type")
    # MatMul: the same 6 tasks, each exactly twice as long
    assert rows.loc["MatMul", compare.COUNT_A] == rows.loc["MatMul", compare.COUNT_B] == 6
    assert rows.loc["MatMul", compare.RATIO] == pytest.approx(2.0, abs=1e-12)
    assert rows.loc["MatMul", compare.DELTA] == pytest.approx(rows.loc["MatMul", compare.TOTAL_A], abs=1e-9)
    # Cast: op 3's two executions are gone, the other Cast tasks unchanged
    assert (rows.loc["Cast", compare.COUNT_A], rows.loc["Cast", compare.COUNT_B]) == (6, 4)
    assert rows.loc["Cast", compare.DELTA] == pytest.approx(-2 * rows.loc["Cast", compare.AVG_A], abs=1e-9)
    assert rows.loc["Cast", compare.AVG_B] == pytest.approx(rows.loc["Cast", compare.AVG_A], abs=1e-9)
    # every other type: no change at all
    others = rows.drop(index=["MatMul", "Cast"])
    assert len(others) == 5 and (others[compare.DELTA] == 0).all() and (others[compare.RATIO] == 1).all()
    assert set(result.rows[compare.MATCH]) == {compare.SAME_TYPE}
    # largest |Delta| first
    assert result.rows["OP Type"].tolist()[:2] == ["MatMul", "Cast"]
    e2e = result.e2e.set_index(compare.METRIC)
    assert e2e.loc["operators: total device time", compare.DELTA] == pytest.approx(
        rows.loc["MatMul", compare.DELTA] + rows.loc["Cast", compare.DELTA], abs=1e-9)
    assert e2e.loc["aclmdlExecute (acl): total", compare.DELTA] == pytest.approx(100.0)   # 2 calls, 50 µs later each
    assert e2e.loc["aclmdlExecute (acl): per call", compare.DELTA] == pytest.approx(50.0)


def test_known_differences_in_the_text(known_pair):
    a, b = known_pair
    text = compare.compare(a, b, "type", 0, False, None, Diagnostics(), imported_paths)
    assert "A has 7 op types, B 7: 7 in both, 0 only in A, 0 only in B." in text
    rows = data_rows(text)
    assert list(rows)[:2] == ["MatMul", "Cast"]
    assert "+720.600" in rows["MatMul"] and "2.000" in rows["MatMul"]
    assert "-240.600" in rows["Cast"] and "0.667" in rows["Cast"]
    assert all("+0.000" in rows[t] and "1.000" in rows[t] for t in ("Add", "Conv2D", "GetNext", "Relu", "TransData"))
    assert "aclmdlExecute (acl): total" in text and "+100.000" in text


def test_known_differences_by_name(known_pair):
    a, b = known_pair
    result = compare.compare_sides(side(a), side(b), "name")
    rows = result.rows.set_index("Op Name")
    removed = "Default/network-Net/layer0/Cast-op3"
    assert rows.loc[removed, compare.MATCH] == compare.ONLY_A
    assert rows.loc[removed, compare.DELTA] == -rows.loc[removed, compare.TOTAL_A]
    assert np.isnan(rows.loc[removed, compare.TOTAL_B]) and np.isnan(rows.loc[removed, compare.RATIO])
    matmuls = [n for n in rows.index if "/MatMul-" in n]
    assert len(matmuls) == 3 and (rows.loc[matmuls, compare.RATIO] == 2.0).all()
    rest = rows.drop(index=matmuls + [removed])
    assert len(rest) == 16 and (rest[compare.DELTA] == 0).all() and set(rest[compare.MATCH]) == {compare.SAME_NAME}
    text = compare.render(result, 5)
    assert "A has 20 operators, B 19: 19 in both (19 same name), 1 only in A, 0 only in B." in text
    assert "top 5 of 20 rows by |Delta|" in text
    assert list(data_rows(text))[0] == removed   # -240.6 µs: the largest change, then the MatMuls (+240.2)


def test_a_collection_against_itself(tmp_path):
    a = synth_job.write_job(str(tmp_path / "job"), 40)
    for by in compare.BY:
        result = compare.compare_sides(side(a), side(a), by)
        assert (result.rows[compare.DELTA] == 0).all() and (result.rows[compare.RATIO] == 1).all()
        assert not result.rows[compare.MATCH].isin([compare.ONLY_A, compare.ONLY_B]).any()
        deltas = result.e2e[compare.DELTA].dropna()
        assert (deltas == 0).all() and len(deltas) == len(result.e2e)


@needs_shared
def test_golden_raw_against_itself_and_its_export(tmp_path, capsys):
    """The golden 910b_mixed: raw against itself, and raw (the store) against its exported CSVs
    alone: every delta is zero, nothing is one-sided."""
    prof = copy_input("910b_mixed", str(tmp_path / "in"))
    assert run(["export", "summary", "-dir", prof], capsys)[0] == 0
    exported = str(tmp_path / "exported")
    shutil.copytree(os.path.join(prof, "mindstudio_profiler_output"),
                    os.path.join(exported, "mindstudio_profiler_output"))
    for other in (prof, exported):
        for by in compare.BY:
            text = compare.compare(prof, other, by, 0, False, None, Diagnostics(), imported_paths)
            result = compare.compare_sides(side(prof), side(other), by)
            assert (result.rows[compare.DELTA] == 0).all(), text
            assert set(result.rows[compare.MATCH]) == {compare.SAME_TYPE if by == "type" else compare.SAME_NAME}
            n = 15 if by == "type" else 116
            assert f"A has {n} {'op types' if by == 'type' else 'operators'}, B {n}: {n} in both" in text
            e2e = result.e2e.set_index(compare.METRIC)
            assert (e2e[compare.DELTA] == 0).all()
            assert e2e.loc["aclmdlExecute (acl): total", "A(us)"] == pytest.approx(5409.74)


def test_the_soc_guide_case(tmp_path, monkeypatch):
    """Mish replaced by LeakyRelu, which is faster, and the Conv ops shorter: the rows say Mish is
    only in A, LeakyRelu only in B, Conv2D got shorter, and the execute time dropped."""
    a, b = write_pair(tmp_path, monkeypatch, dict(rename=("Relu", "Mish")),
                      dict(rename=("Relu", "LeakyRelu"), factors={"LeakyRelu": 0.5, "Conv2D": 0.6},
                           execute_extra_ns=-1_000_000))
    text = compare.compare(a, b, "type", 0, False, None, Diagnostics(), imported_paths)
    rows = data_rows(text)
    assert rows["Mish"].rstrip().endswith(compare.ONLY_A) and rows["LeakyRelu"].rstrip().endswith(compare.ONLY_B)
    assert "0.600" in rows["Conv2D"]
    assert "A has 7 op types, B 7: 6 in both, 1 only in A, 1 only in B." in text
    result = compare.compare_sides(side(a), side(b), "type")
    e2e = result.e2e.set_index(compare.METRIC)
    assert e2e.loc["aclmdlExecute (acl): total", compare.DELTA] == pytest.approx(-2000.0)
    # by name, an op whose type changed is one removed and one added (issue 22 item 6: ops of
    # different types are never paired, whatever their names share)
    by_name = compare.compare_sides(side(a), side(b), "name")
    rows = by_name.rows.set_index("Op Name")
    mish = [n for n in rows.index if "/Mish-" in n]
    leaky = [n for n in rows.index if "/LeakyRelu-" in n]
    assert len(mish) == 3 and len(leaky) == 3   # ops 4, 11, 18
    assert set(rows.loc[mish, compare.MATCH]) == {compare.ONLY_A}
    assert set(rows.loc[leaky, compare.MATCH]) == {compare.ONLY_B}
    assert not any("→" in str(t) for t in by_name.rows["OP Type"])


def test_ops_of_different_types_are_never_paired():
    """Issue 22 item 6: `.../Mul_131` and `.../FlashAttentionScore_131` were paired as "type
    changed" (119 of 147 matches on a synthetic pair); now they are one removed and one added."""
    import pandas as pd
    a_types = ["Mul", "Add", "MatMul"] * 49
    b_types = ["FlashAttentionScore", "Add", "MatMul"] * 49
    a = pd.DataFrame({"key": [f"model/layer{i // 3}/{t}_{i}" for i, t in enumerate(a_types)], "OP Type": a_types,
                      "Task Type": "AI_CORE", "First Start(us)": np.arange(147.0)})
    b = pd.DataFrame({"key": [f"model/layer{i // 3}/{t}_{i}" for i, t in enumerate(b_types)], "OP Type": b_types,
                      "Task Type": "AI_CORE", "First Start(us)": np.arange(147.0) + 0.5})
    pairs = compare.match(a, b, "name")
    both = pairs[(pairs["ia"] >= 0) & (pairs["ib"] >= 0)]
    assert len(both) == 98 and set(both["how"]) == {compare.SAME_NAME}
    assert (a["OP Type"].to_numpy()[both["ia"]] == b["OP Type"].to_numpy()[both["ib"]]).all()
    assert (pairs["how"] == compare.ONLY_A).sum() == 49 and (pairs["how"] == compare.ONLY_B).sum() == 49
    assert set(a["OP Type"].to_numpy()[pairs.loc[pairs["how"] == compare.ONLY_A, "ia"]]) == {"Mul"}


def test_renumbered_ops_are_matched_in_order():
    import pandas as pd
    a = pd.DataFrame({"key": ["net/Conv2D_12", "net/Conv2D_13", "net/Add_1"], "OP Type": ["Conv2D", "Conv2D", "Add"],
                      "Task Type": ["AI_CORE"] * 3, "First Start(us)": [1.0, 2.0, 3.0]})
    b = pd.DataFrame({"key": ["net/Conv2D_14", "net/Conv2D_15", "net/Add_1", "net/Mul_2"],
                      "OP Type": ["Conv2D", "Conv2D", "Add", "Mul"], "Task Type": ["AI_CORE"] * 4,
                      "First Start(us)": [1.5, 2.5, 3.5, 4.0]})
    pairs = compare.match(a, b, "name")
    got = {(a["key"].get(i, "-"), b["key"].get(j, "-"), how) for i, j, how in pairs.itertuples(index=False)}
    assert got == {("net/Add_1", "net/Add_1", compare.SAME_NAME),
                   ("net/Conv2D_12", "net/Conv2D_14", compare.RENUMBERED),
                   ("net/Conv2D_13", "net/Conv2D_15", compare.RENUMBERED), ("-", "net/Mul_2", compare.ONLY_B)}


def test_plot_writes_its_png(known_pair, tmp_path):
    pytest.importorskip("matplotlib")
    a, b = known_pair
    out = str(tmp_path / "charts")
    text = compare.compare(a, b, "name", 10, True, out, Diagnostics(), imported_paths)
    target = os.path.join(out, "compare_by_name.png")
    assert text.endswith(f"Wrote {target}\n")
    from test_plot import check_png
    check_png(target, "compare")


def test_errors(tmp_path):
    a = synth_job.write_job(str(tmp_path / "one" / "x"), 20, job_name="JOB000001AAAAAA")
    synth_job.write_job(str(tmp_path / "one" / "y"), 20, job_name="JOB000002BBBBBB")
    with pytest.raises(BadOption, match=r"holds 2 collections .*; give -dir one collection"):
        compare.compare(str(tmp_path / "one"), a, "type", 5, False, None, Diagnostics(), imported_paths)
    with pytest.raises(BadOption, match=r"--by 'kind': choose from type, name"):
        compare.compare(a, a, "kind", 5, False, None, Diagnostics(), imported_paths)
    with pytest.raises(BadOption, match=r"--top -2"):
        compare.compare(a, a, "type", -2, False, None, Diagnostics(), imported_paths)


# ------------------------------------------------------------------------------------------------
# Real data


@needs_real
def test_real_oam_runs(tmp_path):
    """The two oam-tools runs (a custom matmul kernel on a board; a torch_npu MLP): different
    programs, so every row is one-sided; nothing is written into the data."""
    pytest.importorskip("matplotlib")
    root = copy_real(OAM, str(tmp_path))
    before = tree_hashes(root)
    text = compare.compare(os.path.join(root, MATMUL_BOARD), os.path.join(root, TORCH_MLP), "type", 10, True,
                           str(tmp_path / "out"), Diagnostics(), imported_paths)
    rows = data_rows(text)
    assert list(rows) == ["MatMulV2", "Gelu", "_Z11mmad_customILj256ELj64ELj256ELj128ELj128ELj64ELj256EEvPhS0_S0_"]
    assert "+136.500" in rows["MatMulV2"] and rows["MatMulV2"].rstrip().endswith(compare.ONLY_B)
    assert "-7.840" in rows[list(rows)[2]] and rows[list(rows)[2]].rstrip().endswith(compare.ONLY_A)
    assert "A has 1 op types, B 2: 0 in both, 0 only in A" not in text
    assert "A has 1 op types, B 2: 0 in both, 1 only in A, 2 only in B." in text
    assert "operators: total device time" in text and "+166.480" in text
    assert tree_hashes(root) == before


@needs_real
def test_real_ranks(tmp_path):
    """Two ranks of the same PyTorch job (kernel_details CSVs): every operator on both sides, the
    row deltas adding up to the total's, the profiler step in the end-to-end part."""
    root = copy_real(PT_LEVEL1, str(tmp_path))
    a, b = os.path.join(root, "rank0_ascend_pt"), os.path.join(root, "rank1_ascend_pt")
    result = compare.compare_sides(side(a), side(b), "name")
    assert len(result.rows) == 82 and set(result.rows[compare.MATCH]) == {compare.SAME_NAME}
    e2e = result.e2e.set_index(compare.METRIC)
    total = e2e.loc["operators: total device time", compare.DELTA]
    assert result.rows[compare.DELTA].sum() == pytest.approx(total, abs=1e-6)
    assert e2e.loc["iterations: total", "A(us)"] == pytest.approx(155985.80, abs=0.01)   # ProfilerStep#50
    # the largest change is the first all-reduce (communication waits differ between ranks)
    assert result.rows["Op Name"].iloc[0] == "hcom_allReduce__586_0_1"
    text = compare.compare(a, b, "type", 5, False, None, Diagnostics(), imported_paths)
    assert "top 5 of " in text and "End to end" in text


@needs_real
def test_real_text_export_against_db_export(tmp_path):
    """Rank 0 of the same job profiled twice, exported once as CSVs (kernel_details) and once as a
    database: the same 34 op types with the same task counts, only the times differ a little."""
    text_root = copy_real(PT_LEVEL1, str(tmp_path / "text"))
    db_root = copy_real(PT_DB_LEVEL1, str(tmp_path / "db"))
    result = compare.compare_sides(side(os.path.join(text_root, "rank0_ascend_pt")),
                                   side(os.path.join(db_root, "rank0_ascend_pt")), "type")
    assert len(result.rows) == 34 and set(result.rows[compare.MATCH]) == {compare.SAME_TYPE}
    assert (result.rows[compare.COUNT_A] == result.rows[compare.COUNT_B]).all()
    assert result.rows[compare.RATIO].between(0.9, 1.4).all()
    # the all-reduce is typed HCCL in kernel_details and COMMUNICATION in the database
    assert result.row("hcom_allReduce_")["Core Type"] == "HCCL → COMMUNICATION"


def test_types_missing_falls_back_to_names(tmp_path):
    """A timeline-only side carries no OP Type: compare by type says so and matches by name."""
    a = synth_job.write_job(str(tmp_path / "job"), 20)
    timeline = tmp_path / "tl" / "timeline"
    timeline.mkdir(parents=True)
    events = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "Ascend Hardware"}},
              {"name": "Default/network-Net/layer0/Conv2D-op0", "ph": "X", "pid": 1, "tid": 3, "ts": 10.0,
               "dur": 240.0, "args": {"Task Type": "AI_CORE", "Stream Id": 3}}]
    import json
    (timeline / "task_time_0_1_1.json").write_text(json.dumps(events))
    result = compare.compare_sides(side(a), side(str(tmp_path / "tl")), "type")
    assert result.by == "name" and any("compared by name" in n for n in result.notes)
    row = result.row("Default/network-Net/layer0/Conv2D-op0")
    assert row[compare.MATCH] == compare.SAME_NAME and row[compare.COUNT_B] == 1


@needs_shared
def test_the_cli_compares_two_collections(tmp_path, capsys):
    from msprof_kit import cli

    a = copy_input("910b_steps", str(tmp_path / "a"))
    b = copy_input("910b_mixed", str(tmp_path / "b"))
    assert cli.main(["compare", "-dir", a, "-dir", b, "--top", "3", "--plot", "--out", str(tmp_path / "png")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Comparing operators by OP Type") and "End to end" in out
    assert os.listdir(tmp_path / "png") == ["compare_by_type.png"]


def test_the_cli_needs_exactly_two_dirs(tmp_path, capsys):
    from msprof_kit import cli

    assert cli.main(["compare", "-dir", str(tmp_path)]) == 1
    assert capsys.readouterr().err == "Error: compare needs -dir twice: -dir A -dir B\n"
