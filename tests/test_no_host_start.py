"""Issue 23 item 4: a raw collection without host/host_start.log imports, with one warning, and
exports what the reference's Python path exports for it (tests/reference/no_host_start*/MANIFEST.txt).

The reference (analysis/common_func/info_conf_reader.py `_check_monotonic_and_cnt`) then uses its
default host frequency, 1e9 Hz: host time stamps are taken as CLOCK_MONOTONIC_RAW ns with no sync
point, placed on the wall clock by start_info; the device times keep their own sync files."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import synth
from conftest import COMPARE, HERE, needs_shared, run

pytestmark = needs_shared

REFERENCE = os.path.join(HERE, "reference")
NAME = "PROF_000001_20231125090304544_NOHOSTST"
ALL_KINDS = "op_summary,op_statistic,api_statistic,task_time,timeline"


def make(parent: str, chip: str, host_ns: bool = True, host_start: bool = False) -> str:
    """The inputs of tests/reference/no_host_start*/ (their MANIFEST.txt gives the same call)."""
    return synth.write_collection(parent, chip=chip, n_tasks=20, model_fraction=0.3, host_ns=host_ns,
                                  host_start=host_start, name=NAME)


def export(prof: str, capsys: pytest.CaptureFixture) -> str:
    """import, export timeline, export summary; returns the import's stderr."""
    code, _, err = run(["import", "-dir", prof], capsys)
    assert code == 0, err
    for what in ("timeline", "summary"):
        code, _, more = run(["export", what, "-dir", prof], capsys)
        assert code == 0, more
    return err


def compare(ours: str, golden: str, *kinds: str) -> str:
    argv = [sys.executable, COMPARE, ours, golden] + (["--kinds", ",".join(kinds)] if kinds else [])
    res = subprocess.run(argv, capture_output=True, text=True)
    return res.stdout


def test_import_warns_once_what_it_assumes(tmp_path, capsys):
    prof = make(str(tmp_path), "910B")
    assert not os.path.exists(os.path.join(prof, "host", "host_start.log"))
    code, _, err = run(["import", "-dir", prof], capsys)
    assert code == 0
    lines = [line for line in err.splitlines() if line.startswith(("Warning:", "Error:"))]
    assert lines == [
        f"Warning: {os.path.join(prof, 'host', 'host_start.log')}: missing; as the reference does, host timestamps "
        "are taken as CLOCK_MONOTONIC_RAW ns (its default host frequency, 1000 MHz, not CPU[0].Frequency 100 MHz; "
        "no sync point), placed on the wall clock by start_info (collectionTimeBegin - clockMonotonicRaw); if they "
        "are counter ticks, host API times and durations are scaled by 0.1 and not aligned with the device's"]
    assert "Traceback" not in err


def test_310p_equals_the_reference(tmp_path, capsys):
    prof = make(str(tmp_path), "310P")
    export(prof, capsys)
    report = compare(prof, os.path.join(REFERENCE, "no_host_start_310p", "python"), ALL_KINDS)
    assert report.splitlines()[-1] == "verdict: equal (5 kinds equal)", report


def test_910b_equals_the_reference_and_its_twin_with_host_start(tmp_path, capsys):
    """910B: msprof-kit writes the C++ flavour, whose reference refuses the input (MANIFEST.txt);
    the kinds both flavours print alike equal the Python reference, and every kind equals what
    msprof-kit exports from the same collection with host_start.log and counter ticks."""
    prof = make(str(tmp_path / "a"), "910B")
    export(prof, capsys)
    report = compare(prof, os.path.join(REFERENCE, "no_host_start", "python"), "op_statistic", "task_time")
    assert report.splitlines()[-1] == "verdict: equal (2 kinds equal)", report
    twin = make(str(tmp_path / "b"), "910B", host_ns=False, host_start=True)
    export(twin, capsys)
    report = compare(prof, os.path.join(twin, "mindstudio_profiler_output"), ALL_KINDS)
    assert report.splitlines()[-1] == "verdict: equal (5 kinds equal)", report


def test_counter_ticks_read_as_ns_as_the_reference_does(tmp_path, capsys):
    """Host time stamps in 100 MHz ticks without host_start.log: every export equals the
    reference's (API durations a tenth of the true ones, as its own). Every API then falls before
    the collection start, so the timeline has no CANN layer and no arrows, as the reference's
    (msprof_kit/store/before_start.py; docs/exports.md, "Host APIs before the collection start")."""
    prof = make(str(tmp_path), "310P", host_ns=False)
    export(prof, capsys)
    golden = os.path.join(REFERENCE, "no_host_start_310p_ticks", "python")
    report = compare(prof, golden, ALL_KINDS)
    assert report.splitlines()[-1] == "verdict: equal (5 kinds equal)", report
    out = os.path.join(prof, "mindstudio_profiler_output")
    ours = json.load(open(os.path.join(out, next(n for n in os.listdir(out) if n.startswith("msprof_")))))
    names = {e["args"]["name"] for e in ours if e.get("ph") == "M" and e["name"] == "process_name"}
    assert "CANN" not in names and not [e for e in ours if e.get("ph") in ("s", "f")]


def test_host_start_without_the_sync_keys_is_still_an_error(tmp_path, capsys):
    """A host_start.log that is there but lacks clock_monotonic_raw / cntvct is damaged, not absent."""
    prof = make(str(tmp_path), "910B", host_ns=False, host_start=True)
    with open(os.path.join(prof, "host", "host_start.log"), "w") as f:
        f.write("[Host]\nclock_realtime: 1\n")
    code, _, err = run(["import", "-dir", prof], capsys)
    assert code != 0
    assert "host_start.log lacks clock_monotonic_raw / cntvct" in err and "Traceback" not in err
