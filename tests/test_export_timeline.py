"""`export timeline`: every golden case equals the reference timeline per compare_exports.py (the
flavour a CANN install uses for the chip; at least as many events as the better flavour for the
damaged inputs), the iteration export too; the JSON is well formed for a trace viewer (complete
events nest per thread, every arrow has both ends, chunked writing changes nothing) and loads in
Perfetto's trace processor where its binary can be had."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from collections import Counter, defaultdict
from typing import Dict, List, Tuple

import numpy as np
import pytest

from conftest import COMPARE, DEGRADED_CASES, GOLDEN, INTACT_CASES, copy_input, needs_shared

from msprof_kit import cli, store
from msprof_kit.exporters import timeline

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
    monkeypatch.setattr(timeline, "CHUNK", 7)
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
    monkeypatch.setattr(timeline, "CHUNK", 3)
    whole = export(case, str(tmp_path / "whole"), *extra)
    monkeypatch.setattr(timeline, "API_BLOCK", 6)
    monkeypatch.setattr(timeline, "TASK_BLOCK", 6)
    monkeypatch.setattr(timeline, "TASK_CACHE", 0)  # each block made again for the writing
    monkeypatch.setattr(store, "RUN_GAP", 2)
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
        texts = timeline.ApiTexts.load(ctx)
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


@pytest.mark.parametrize("layer", ["_write_overlap", "_write_cann"])  # in the forked worker, in the parent
def test_a_failed_export_leaves_no_partial_file(tmp_path, monkeypatch, layer):
    prof = copy_input("min_910b", str(tmp_path))
    assert cli.main(["import", "-dir", prof]) == 0
    before = sorted(os.listdir(prof))

    def broken(*args, **kwargs):
        raise RuntimeError(f"{layer} failed")

    monkeypatch.setattr(timeline, layer, broken)
    with pytest.raises(RuntimeError, match=layer):
        cli.main(["export", "timeline", "-dir", prof])
    out_dir = os.path.join(prof, "mindstudio_profiler_output")
    assert trace_files(prof) == [] and os.listdir(out_dir) == []  # no part file either
    # the unified DB being written alongside was stopped and its unfinished file removed
    assert sorted(os.listdir(prof)) == sorted(before + ["mindstudio_profiler_output"])


# ------------------------------------------------------------------------------------------------
# Perfetto

_NO_TRACE_PROCESSOR: List[str] = []  # why the trace processor could not start, once known


def trace_processor(path: str):
    """Perfetto's trace processor on a file; skips when the package or its binary is missing
    (the package downloads the binary on first use; PERFETTO_TP_BIN names a local one)."""
    tp = pytest.importorskip("perfetto.trace_processor", reason="perfetto is not installed (pip install perfetto)")
    from perfetto.common.exceptions import PerfettoException
    if _NO_TRACE_PROCESSOR:
        pytest.skip(_NO_TRACE_PROCESSOR[0])
    config = tp.TraceProcessorConfig(bin_path=os.environ.get("PERFETTO_TP_BIN") or None)
    try:
        return tp.TraceProcessor(trace=path, config=config)
    except (OSError, subprocess.CalledProcessError, PerfettoException) as exc:
        _NO_TRACE_PROCESSOR.append(f"Perfetto's trace_processor binary is not available here ({exc})")
        pytest.skip(_NO_TRACE_PROCESSOR[0])


@pytest.mark.parametrize("case", ["910b_mixed", "310p_hwts", "910b_two_devices", "910b_steps"])
def test_perfetto_loads_every_complete_event(case, exported):
    path = trace_files(exported[case])[0]
    events = load(exported[case])
    n_slices = sum(1 for e in events if e["ph"] == "X")
    n_flows = sum(1 for e in events if e["ph"] == "f")
    tp = trace_processor(path)
    try:
        def count(sql: str) -> int:
            return int(tp.query(sql).as_pandas_dataframe().iloc[0, 0])

        assert count("SELECT COUNT(*) FROM slice") == n_slices
        assert count("SELECT COUNT(*) FROM flow") == n_flows
        assert count("SELECT COUNT(*) FROM stats WHERE severity IN ('error', 'data_loss') AND value > 0") == 0
    finally:
        tp.close()


@pytest.mark.parametrize("keys", [[], [5], [3, -2, 3, 7, -2], [0, 2 ** 40, 5, 0], list(range(-50, 50)) * 3])
def test_dense_codes_map_each_key_to_its_distinct_value(keys):
    from msprof_kit.exporters.timeline import _dense_codes
    arr = np.array(keys, dtype=np.int64)
    codes, uniq = _dense_codes(arr)
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
    assert timeline._first_seen_by_conn(flows).tolist() == want.tolist()
    assert timeline._first_seen_by_conn(flows[:1]).tolist() == flows[:1].tolist()
