"""bench/cluster.py's compare_outputs (its --compare and --compare-dirs): the rules of
tests/test_cluster_core.py on two folders of msprof-analyze text outputs, checked on golden
910b_hccl_8ranks/msprof_analyze/text_all and on copies with planted differences."""
from __future__ import annotations

import csv
import json
import os
import shutil
from types import ModuleType

import pytest

from conftest import GOLDEN, bench_module, needs_shared

TEXT_ALL = os.path.join(GOLDEN, "910b_hccl_8ranks", "msprof_analyze", "text_all")
ALL = "(0, 1, 2, 3, 4, 5, 6, 7)"


def bench() -> ModuleType:
    return bench_module("cluster")


@needs_shared
def test_golden_equals_itself():
    assert bench().compare_outputs(TEXT_ALL, TEXT_ALL) == {
        "cluster_step_trace_time.csv": [], "cluster_communication.json": [], "cluster_communication_matrix.json": [],
        "communication_group.json": []}


@needs_shared
def test_planted_differences(tmp_path, capsys):
    ours = str(tmp_path / "ours")
    shutil.copytree(TEXT_ALL, ours)
    path = os.path.join(ours, "cluster_step_trace_time.csv")
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header = rows[0]
    computing, free = header.index("Computing"), header.index("Free")
    for row in rows[1:]:
        if row[2] == "3":
            row[computing] = repr(float(row[computing]) + 0.9)  # within 1 µs
            row[free] = repr(float(row[free]) + 1.5)           # not
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows[:-1] if rows[-1][2] != "3" else rows[:1] + rows[2:])
    dropped = (rows[-1] if rows[-1][2] != "3" else rows[1])[2]
    path = os.path.join(ours, "cluster_communication.json")
    with open(path) as f:
        comm = json.load(f)
    ops = comm[ALL]["step"]
    op = next(k for k in ops if k.startswith("hcom_allReduce__483_1_1"))
    info = ops[op]["2"]["Communication Time Info"]
    info["Wait Time(ms)"] *= 1 + 5e-7   # within 1e-6 relative
    info["Transit Time(ms)"] *= 1 + 5e-6  # not
    del ops[op]["5"]["Communication Bandwidth Info"]
    with open(path, "w") as f:
        json.dump(comm, f)
    found = bench().compare_outputs(ours, TEXT_ALL)
    assert found["cluster_step_trace_time.csv"] == [f"Index ['{dropped}'] in one only",
                                                    f"Index 3 Free: {rows_value(rows, '3', free)!r} != "
                                                    f"{rows_value(original_rows(), '3', free)!r}"]
    assert sorted(found["cluster_communication.json"]) == [
        f"/{ALL}/step/{op}/2/Communication Time Info/Transit Time(ms): {info['Transit Time(ms)']!r} != "
        f"{original_transit(op)!r}",
        f"/{ALL}/step/{op}/5: keys ['Communication Bandwidth Info'] in one only"]
    assert found["cluster_communication_matrix.json"] == found["communication_group.json"] == []
    assert not bench().print_comparison(ours, TEXT_ALL)
    out = capsys.readouterr().out
    assert "cluster_step_trace_time.csv: 2 differences" in out and "communication_group.json: equal" in out
    os.remove(os.path.join(ours, "communication_group.json"))
    assert bench().compare_outputs(ours, TEXT_ALL)["communication_group.json"] == ["missing in ours"]


def original_rows() -> list:
    with open(os.path.join(TEXT_ALL, "cluster_step_trace_time.csv"), newline="") as f:
        return list(csv.reader(f))


def rows_value(rows: list, index: str, column: int) -> str:
    return next(row[column] for row in rows[1:] if row[2] == index)


def original_transit(op: str) -> float:
    with open(os.path.join(TEXT_ALL, "cluster_communication.json")) as f:
        return json.load(f)[ALL]["step"][op]["2"]["Communication Time Info"]["Transit Time(ms)"]


def test_numbers():
    differences = bench().json_differences
    assert differences({"a": [1.0, float("nan"), "x"]}, {"a": [1.0 + 1e-7, float("nan"), "x"]}) == []
    assert differences({"a": True}, {"a": 1}) == ["/a: True != 1"]
    assert differences({"a": [1, 2]}, {"a": [1]}) == ["/a: [1, 2] != [1]"]
    assert differences({"a": 0.0}, {"a": 1e-9}) == ["/a: 0.0 != 1e-09"]


@pytest.mark.parametrize("argv", [["--compare-dirs", TEXT_ALL, TEXT_ALL]])
@needs_shared
def test_compare_dirs_exit_status(argv, monkeypatch, capsys):
    module = bench()
    monkeypatch.setattr("sys.argv", ["cluster.py"] + argv)
    with pytest.raises(SystemExit) as done:
        module.main()
    assert done.value.code == 0 and capsys.readouterr().out.count(": equal") == 4
