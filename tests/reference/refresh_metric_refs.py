"""Re-run the reference msprof analysis on the metric-group cases (tests/metric_cases.py) and store
what tests/test_metric_groups.py compares, with a MANIFEST.txt per case.

Needs the reference checked out and built as ../shared/spec/reference_build.md describes, with its
runner: `runref.sh python|cpp PROF OUTDIR` (default /work/ref/runref.sh; REFERENCE_RUNNER overrides).
Usage: .venv/bin/python tests/reference/refresh_metric_refs.py [CASE ...]
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import metric_cases  # noqa: E402

RUNNER = os.environ.get("REFERENCE_RUNNER", "/work/ref/runref.sh")
COMMIT = "Ascend/msprof 9ba1ac7be913 (analysis/, the C++ path built from analysis/csrc)"
CSV = ("op_summary.csv", "op_statistic.csv")


def keep(case: metric_cases.Case, flavour: str) -> tuple:
    """The files stored of a flavour's run: the CSVs always; the timeline and the unified DB of the
    flavour the case is compared with (the DB is written by the C++ flavour only). Of the cases
    where msprof-kit differs on purpose, what shows the difference: the CSVs, and the unusable
    case's timeline (what the C++ flavour lost)."""
    if flavour != case.flavour:
        return CSV
    if case is metric_cases.UNUSABLE:
        return CSV + ("msprof.json",)
    if case is metric_cases.CUSTOM_SPLIT:
        return CSV
    return CSV + ("msprof.json", "msprof.db")


def refresh(name: str, case: metric_cases.Case, work: str) -> None:
    prof = metric_cases.generate(case, os.path.join(work, name, "input"))
    lines = [f"case {name}: metric group {case.group!r} on {case.chip}; compared with the {case.flavour} "
             f"flavour", "", f"input: {case.command()}",
             f"reference: {COMMIT}",
             f"run: {os.path.basename(RUNNER)} <flavour> PROF OUT, i.e. on a fresh copy of PROF: msprof.py import, "
             "export timeline, export summary (and export db on the C++ path), each with -dir PROF", ""]
    for flavour in ("cpp", "python"):
        out = os.path.join(work, name, flavour)
        res = subprocess.run(["nice", RUNNER, flavour, prof, out], capture_output=True, text=True)
        dest = metric_cases.stored(name, flavour)
        shutil.rmtree(dest, ignore_errors=True)
        os.makedirs(dest)
        stored = []
        for file in keep(case, flavour):
            src = os.path.join(out, file)
            if os.path.isfile(src):
                shutil.copy(src, os.path.join(dest, file))
                stored.append(f"{file} ({os.path.getsize(src)} bytes)")
        written = sorted(f for f in os.listdir(out) if f not in ("console.log", "warnings.txt")) \
            if os.path.isdir(out) else []
        errors: Counter = Counter()
        if os.path.isfile(os.path.join(out, "warnings.txt")):
            with open(os.path.join(out, "warnings.txt"), encoding="utf-8") as f:
                # "<count> <date> <time> [ERROR] [pid] [tid] [file:line] text": counted without the ids
                for line in f:
                    if "[ERROR]" in line:
                        text = re.sub(r"^(\[\d+\] )+", "", line.split("[ERROR] ", 1)[1].strip())
                        errors[text] += int(line.split()[0])
        lines += [f"{flavour}: {' '.join(res.stdout.split())}",
                  f"  wrote: {', '.join(written) or 'nothing'}",
                  f"  stored: {', '.join(stored) or 'nothing'}"]
        lines += [f"  ERROR ({n}x): {e}" for e, n in sorted(errors.items())]
    with open(os.path.join(metric_cases.REFERENCE, name, "MANIFEST.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def main(argv: list) -> None:
    cases = dict(metric_cases.CASES, **metric_cases.DIFFERENCES)
    names = argv or list(cases)
    with tempfile.TemporaryDirectory() as work:
        for name in names:
            refresh(name, cases[name], work)
            print(name, "done")


if __name__ == "__main__":
    main(sys.argv[1:])
