"""Re-run the reference msprof analysis on the iteration-export metric-group cases
(tests/iteration_metric_cases.py), both flavours, and store what tests/test_iteration_metrics.py
compares (the C++ install's summaries), with a MANIFEST.txt per case.

Needs the reference checked out and built as ../shared/spec/reference_build.md describes, with its
runner: `runref.sh python|cpp PROF OUTDIR [export args]` (default /work/ref/runref.sh;
REFERENCE_RUNNER overrides).
Usage: .venv/bin/python tests/reference/refresh_iter_metric_refs.py [CASE ...]
"""
from __future__ import annotations

import csv
import filecmp
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from typing import List

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import iteration_metric_cases  # noqa: E402
from refcases import tree_digest  # noqa: E402

RUNNER = os.environ.get("REFERENCE_RUNNER", "/work/ref/runref.sh")
COMMIT = "Ascend/msprof 9ba1ac7be913 (analysis/)"


#: what each case shows, beyond its stored files (reference paths under analysis/)
SAME = ("The Python rules give this group the C++ rules' columns and values (cube_fops and the like up to "
        "the last bit, as ratio x cycles x weight), so the iteration export prints what a whole export would "
        "for these tasks, but for the *_time columns and the MIX ops' other core (tests/reference/mixed_iteration).")
NOTES = {
    "iter_metrics_Memory": (
        "The Python rules differ from the C++ ones (which the whole export prints) in two ways: the pair "
        "l2_read_bw / l2_write_bw is dropped when both are listed (mscalculate/aic/aic_utils.py:93-101, applied "
        "by mscalculate/stars/ffts_pmu_calculator.py:646-651 and msmodel/stars/ffts_pmu_model.py:55-59), and "
        "l1_write_bw weighs 256 x 8 (common_func/constant.py:235-236) where the C++ calculator weighs 128 x 8 "
        "(csrc/domain/services/association/calculator/metric/metric_calculator_group/memory_calculator.h:61): "
        "aic_l1_write_bw is twice the whole export's value of the same task."),
    "iter_metrics_MemoryL0": (
        "The Python rules weigh l0b_read_bw 256 x 8 and l0c_read_bw_cube / l0c_write_bw_cube 256 x 8 "
        "(common_func/constant.py:263-264, 279-284) where the C++ calculator weighs 256 x 16 and 256 x 32 "
        "(csrc/.../metric_calculator_group/memory_l0_calculator.h:60-62): those columns are a half and a "
        "quarter of the whole export's values of the same task."),
    "iter_metrics_MemoryAccess": (
        "op_summary has no PMU column at all, for either core (it ends at Context ID; no memory_bound, no "
        "cube_utilization): the Python FFTS PMU pass names its MetricSummary columns after the group's metrics "
        "with only '(ms)' and '(GB/s)' taken off (msmodel/stars/ffts_pmu_model.py:72-78); this group's names "
        "end in '(KB)' (common_func/platform/ai_core_metrics_manager.py:59-60), so the CREATE TABLE fails "
        "(the 'near \"(\"' ERROR, common_func/db_manager.py:213), the inserts find no table, and the op "
        "summary is built without metrics (mscalculate/data_analysis/parse_aicore_op_summary_calculator.py:167 warns)."),
    iteration_metric_cases.BRANCHES: (
        "Where the two rule sets take different branches, in a group whose rules otherwise agree. Task 16 "
        "(0 cycles): the iteration export prints the raw counters as its ratios (aic_mac_ratio 15266.0) and "
        "the icache miss rate of the raw counters, misses / requests (0.378), because the Python path applies a "
        "formula only when the task has cycles and keeps the counter otherwise "
        "(mscalculate/calculate_ai_core_data.py:314-329); the whole export (cpp/op_summary.csv, the C++ "
        "rules) prints 0 for all of them. Task 19 (no icache requests): the Python path keeps misses / cycles "
        "as the miss rate when the requests are 0 (calculate_ai_core_data.py:161-171), 0.005; the whole "
        "export prints 0.0."),
}


def csv_rows(path: str) -> int:
    with open(path, newline="", encoding="utf-8") as f:
        return max(0, sum(1 for _ in csv.reader(f)) - 1)


def errors_of(out: str) -> List[str]:
    """The run's ERROR log lines, counted, without dates and process ids."""
    errors: Counter = Counter()
    path = os.path.join(out, "warnings.txt")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if "[ERROR]" in line:
                    text = re.sub(r"^(\[\d+\] )+", "", line.split("[ERROR] ", 1)[1].strip())
                    errors[text] += int(line.split()[0])
    return [f"  ERROR ({n}x): {e}" for e, n in sorted(errors.items())]


def pmu_header(path: str) -> List[str]:
    with open(path, newline="", encoding="utf-8") as f:
        head = next(csv.reader(f))
    return head[head.index("Context ID") + 1:]


def refresh(name: str, work: str) -> None:
    branches = name == iteration_metric_cases.BRANCHES
    where = os.path.join(work, name, "input")
    prof = iteration_metric_cases.generate_branches(where) if branches else iteration_metric_cases.generate(name, where)
    files = [os.path.join(r, f) for r, _, fs in os.walk(prof) for f in fs]
    group = "PipeUtilization" if branches else iteration_metric_cases.CASES[name][0]
    lines = [f"case {name}: metric group {group!r} (both cores) on 910B; the C++ install's iteration export "
             f"(model 1, iteration 2), which runs the reference's Python path"
             + ("; and its whole export" if branches else ""), "",
             "input (not stored; tests/test_iteration_metrics.py writes it again):",
             "  generator: tests/synth, from the repository root:",
             f"    python3 -c \"import sys; sys.path.insert(0, 'tests'); import synth; "
             f"print({iteration_metric_cases.command(name)})\""
             if not branches else f"    {iteration_metric_cases.command_branches()}",
             f"  -> OUT/{os.path.basename(prof)}, {len(files)} files, {sum(os.path.getsize(f) for f in files)} bytes",
             f"  input sha256: {tree_digest(prof)}",
             "    (sha256 over the files sorted by path relative to the PROF directory: path bytes, a NUL byte, "
             "the contents)", "",
             f"reference: {COMMIT}, run through {os.path.basename(RUNNER)} (each run on its own fresh copy of the "
             "input):",
             "  cpp flavour:    analysis/lib64/msprof_analysis.so built from analysis/csrc with cmake (what a 910B "
             "CANN install ships)",
             "  python flavour: the same analysis/ without the library", "",
             "commands (FLAVOUR = cpp | python):",
             f"  {os.path.basename(RUNNER)} FLAVOUR PROF OUT {' '.join(iteration_metric_cases.ITERATION)}",
             f"    = import -dir PROF; export timeline -dir PROF {' '.join(iteration_metric_cases.ITERATION)}; "
             f"export summary -dir PROF {' '.join(iteration_metric_cases.ITERATION)}"]
    if branches:
        lines += [f"  {os.path.basename(RUNNER)} cpp PROF OUT (the whole export: import, export timeline, export "
                  "summary, export db)"]
    lines.append("")
    outs = {}
    for flavour in ("cpp", "python"):
        out = outs[flavour] = os.path.join(work, name, flavour)
        res = subprocess.run(["nice", RUNNER, flavour, prof, out, *iteration_metric_cases.ITERATION],
                             capture_output=True, text=True)
        lines.append(f"{flavour}: {' '.join(res.stdout.split())}")
        lines += errors_of(out)
    if branches:
        out = os.path.join(work, name, "whole")
        res = subprocess.run(["nice", RUNNER, "cpp", prof, out], capture_output=True, text=True)
        lines.append(f"cpp, whole export: {' '.join(res.stdout.split())}")
        lines += errors_of(out)
        whole = os.path.join(iteration_metric_cases.REFERENCE, name, "cpp")
        shutil.rmtree(whole, ignore_errors=True)
        os.makedirs(whole)
        shutil.copy(os.path.join(out, "op_summary.csv"), whole)
    dest = iteration_metric_cases.stored(name)
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    stored, same, other = [], [], []
    for kind in iteration_metric_cases.KINDS:
        src = os.path.join(outs["cpp"], f"{kind}.csv")
        if not os.path.isfile(src):
            continue
        shutil.copy(src, os.path.join(dest, f"{kind}.csv"))
        stored.append(f"{kind}.csv ({csv_rows(src)} rows)")
        twin = os.path.join(outs["python"], f"{kind}.csv")
        (same if os.path.isfile(twin) and filecmp.cmp(src, twin, shallow=False) else other).append(f"{kind}.csv")
    lines += ["", f"stored ({iteration_metric_cases.FOLDER}/, from the cpp run): {', '.join(stored)}",
              "  left out: msprof.json, step_trace.json, README.txt, console.log"]
    if branches:
        whole = os.path.join(iteration_metric_cases.REFERENCE, name, "cpp", "op_summary.csv")
        lines.append(f"  and cpp/op_summary.csv ({csv_rows(whole)} rows), from the whole export")
    lines += [
              f"  the python run's {', '.join(same) or 'none'}: byte-identical"
              + (f"; {', '.join(other)} differ" if other else ""), "",
              "PMU columns of op_summary (after Context ID): "
              + (", ".join(pmu_header(os.path.join(dest, "op_summary.csv"))) or "none"), "",
              "what the case shows: " + NOTES.get(name, SAME)]
    with open(os.path.join(iteration_metric_cases.REFERENCE, name, "MANIFEST.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def main(argv: list) -> None:
    names = argv or [*iteration_metric_cases.CASES, iteration_metric_cases.BRANCHES]
    with tempfile.TemporaryDirectory() as work:
        for name in names:
            refresh(name, work)
            print(name, "done")


if __name__ == "__main__":
    main(sys.argv[1:])
