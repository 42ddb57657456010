"""The import reads raw slices a chunk at a time: the store must not depend on the chunk size."""
from __future__ import annotations

import json
import os
import sqlite3

import numpy as np
import pytest

import synth
from msprof_kit import spill, store
from msprof_kit.ingest import api_windows, limits, pairing, streams

from conftest import DEGRADED_CASES, INTACT_CASES, copy_input, needs_shared, run


def _tables(prof: str) -> dict:
    """Every table of the store, rows in rowid order (the collection's own path left out)."""
    conn = sqlite3.connect(store.store_path(prof))
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        out = {n: conn.execute(f'SELECT * FROM "{n}" ORDER BY rowid').fetchall() for n in names}
    finally:
        conn.close()
    return {n: [tuple(str(v).replace(prof, "PROF") for v in row) for row in rows] for n, rows in out.items()}


@needs_shared
@pytest.mark.parametrize("case", INTACT_CASES + DEGRADED_CASES)
def test_chunks_of_a_few_records_import_the_same_store(case, tmp_path, capsys, monkeypatch):
    """With chunks of 700 bytes (2 to 17 records, bad records and tensor groups crossing chunk
    edges) every table, warnings included, is the one-chunk import's."""
    whole = copy_input(case, str(tmp_path / "whole"))
    assert run(["import", "-dir", whole], capsys)[0] == 0
    monkeypatch.setattr(streams, "CHUNK_BYTES", 700)
    small = copy_input(case, str(tmp_path / "small"))
    assert run(["import", "-dir", small], capsys)[0] == 0
    want, got = _tables(whole), _tables(small)
    assert want.get("TASK") or want.get("CANN_API") or want.get("KIT_WARNINGS")
    assert got == want


def _windows_of(monkeypatch, rows: int) -> None:
    """APIs sorted (and host tracks associated), device records paired, tensor records grouped and device tasks matched (with
    their PMU and overlap) `rows` at a time, their windows' edges placed from every key."""
    monkeypatch.setattr(api_windows, "WINDOW_ROWS", rows)
    monkeypatch.setattr(api_windows, "SAMPLE_EVERY", 1)
    monkeypatch.setattr(pairing, "WINDOW_ROWS", rows)
    monkeypatch.setattr(limits, "SAMPLE_EVERY", 1)
    monkeypatch.setattr(limits, "TASK_ROWS", rows)
    monkeypatch.setattr(limits, "WINDOW_TRACKS", rows)
    monkeypatch.setattr(limits, "SPILL_ROWS", rows)


@needs_shared
@pytest.mark.parametrize("case", INTACT_CASES + DEGRADED_CASES)
def test_windows_of_a_few_apis_import_the_same_store(case, tmp_path, capsys, monkeypatch):
    """APIs and device records in windows of 3 (and chunks of 700 bytes, so that event pairs, the
    latest ends of the call tree and device tasks cross both): every table, and every warning, is
    the one-window import's."""
    whole = copy_input(case, str(tmp_path / "whole"))
    code, _, warned = run(["import", "-dir", whole], capsys)
    assert code == 0
    monkeypatch.setattr(streams, "CHUNK_BYTES", 700)
    _windows_of(monkeypatch, 3)
    small = copy_input(case, str(tmp_path / "small"))
    code, _, small_warned = run(["import", "-dir", small], capsys)
    assert code == 0
    assert _tables(small) == _tables(whole)
    assert small_warned.replace(small, "PROF") == warned.replace(whole, "PROF")
    assert os.listdir(os.path.join(small, "sqlite")) == ["msprof_kit.db"]  # no scratch left


@pytest.mark.parametrize("rows", [1, 7, 500])
def test_windows_import_the_same_store_of_a_synthetic_collection(rows, tmp_path, capsys, monkeypatch):
    """600 tasks on two devices, a third of them in models (model, node and runtime APIs, and
    events): windows of 1, 7 and 500 APIs give the one-window store. (The carried latest ends of
    the call tree are checked against a loop in test_ingest_steps.)"""
    whole = synth.write_collection(str(tmp_path / "a"), n_tasks=600, devices=2, model_fraction=0.3, seed=21)
    assert run(["import", "-dir", whole], capsys)[0] == 0
    _windows_of(monkeypatch, rows)
    small = synth.write_collection(str(tmp_path / "b"), n_tasks=600, devices=2, model_fraction=0.3, seed=21)
    assert run(["import", "-dir", small], capsys)[0] == 0
    want = _tables(whole)
    assert len(want["CANN_API"]) > 1200
    assert _tables(small) == want


@needs_shared
def test_a_scratch_file_that_cannot_be_written_is_one_error_line(tmp_path, capsys, monkeypatch):
    """A full disk while the APIs are spilled: exit 10, one line naming the scratch file, and
    neither a store nor scratch files left; the raw data untouched."""
    prof = copy_input("910b_mixed", str(tmp_path))
    before = {p: open(p, "rb").read() for p in _raw_files(prof)}

    def full(path, mode="r", *args, **kwargs):
        if "w" in mode:
            raise OSError(28, "No space left on device", path)
        return open(path, mode, *args, **kwargs)
    monkeypatch.setattr(spill, "open", full, raising=False)
    code, _, err = run(["import", "-dir", prof], capsys)
    assert code == 10
    lines = [line for line in err.splitlines() if line.startswith("Error")]
    assert len(lines) == 1 and "cannot write a scratch file of the store (No space left on device)" in lines[0]
    assert "/sqlite/.scratch-" in lines[0] and "Traceback" not in err
    assert os.listdir(os.path.join(prof, "sqlite")) == []
    assert {p: open(p, "rb").read() for p in _raw_files(prof)} == before


def _raw_files(prof: str) -> list:
    return sorted(os.path.join(b, f) for b, _, files in os.walk(prof) for f in files if "sqlite" not in b)


@pytest.mark.parametrize("chip", ["910B", "310P"])
def test_pmu_parts_of_devices_with_different_metric_groups(chip, tmp_path, capsys, monkeypatch):
    """Two devices sampling different AI Core metric groups: KIT_TASK_PMU written by windows of 7
    tasks is the one-part table; device 1's rows are NaN in the columns only device 0's group has."""
    def collection(where: str) -> str:
        prof = synth.write_collection(str(tmp_path / where), chip=chip, n_tasks=60, devices=2, seed=8)
        sample = os.path.join(prof, "device_1", "sample.json")
        with open(sample) as f:
            settings = json.load(f)
        settings["ai_core_metrics"] = "Memory"
        with open(sample, "w") as f:
            json.dump(settings, f)
        return prof
    whole = collection("a")
    assert run(["import", "-dir", whole], capsys)[0] == 0
    monkeypatch.setattr(limits, "TASK_ROWS", 7)
    monkeypatch.setattr(limits, "SAMPLE_EVERY", 1)
    small = collection("b")
    assert run(["import", "-dir", small], capsys)[0] == 0
    assert _tables(small) == _tables(whole)
    with sqlite3.connect(store.store_path(small)) as conn:
        pmu = store.read_columns(conn, "KIT_TASK_PMU")
        device = np.array([r[0] for r in conn.execute("SELECT deviceId FROM TASK ORDER BY rowid")])
    on_1 = device[pmu["taskRow"].to_numpy()] == 1
    assert len(pmu) == 120 and on_1.sum() == 60
    prefix = "aic_" if chip == "910B" else ""
    only_0 = [c for c in pmu.columns if c.startswith(prefix) and pmu.loc[on_1, c].isna().all()]
    shared = [c for c in pmu.columns if c.startswith(prefix) and c not in only_0]
    assert only_0 and shared and pmu.loc[~on_1, only_0].notna().all().all()
    assert pmu.loc[:, shared].notna().all().all()


@needs_shared
@pytest.mark.filterwarnings("error::RuntimeWarning")  # a stand-in array's type leaking into a later window's
@pytest.mark.parametrize("case", ["910b_mixed", "910b_two_devices", "degraded_b"])
def test_windows_that_begin_empty_import_the_same_store(case, tmp_path, capsys, monkeypatch):
    """Every windowed stage given a first window that holds nothing (as equal keys can leave it):
    what that window would carry over (host entries, PMU records, open starts) is not lost."""
    whole = copy_input(case, str(tmp_path / "whole"))
    code, _, warned = run(["import", "-dir", whole], capsys)
    assert code == 0
    _windows_of(monkeypatch, 3)
    edges = spill.Runs.edges
    firsts = []

    def empty_first(self, rows):
        got = edges(self, rows)
        if not self.sample:
            return got
        first = int(np.min(np.concatenate(self.sample)))
        firsts.append(self.prefix)
        return np.unique(np.concatenate([[first], got])).astype(np.int64)
    monkeypatch.setattr(spill.Runs, "edges", empty_first)
    small = copy_input(case, str(tmp_path / "small"))
    code, _, small_warned = run(["import", "-dir", small], capsys)
    assert code == 0
    assert any(p.endswith(".task") for p in firsts) and "api" in firsts  # (the device workers' are not seen here)
    assert _tables(small) == _tables(whole)
    assert small_warned.replace(small, "PROF") == warned.replace(whole, "PROF")


def test_the_second_api_window_is_numbered_before_the_first_is_associated(tmp_path, capsys, monkeypatch):
    """The first association step waits for the tensor worker: the second window's APIs are
    numbered meanwhile (one window ahead, at the start only), and the store is the same."""
    from msprof_kit.ingest import association, host
    whole = synth.write_collection(str(tmp_path / "a"), n_tasks=300, devices=1, model_fraction=0.3, seed=5)
    assert run(["import", "-dir", whole], capsys)[0] == 0
    calls = []
    real_window, real_step = host._api_window, association.Association.step

    def window(*args, **kwargs):
        calls.append("api")
        return real_window(*args, **kwargs)

    def step(self, *args, **kwargs):
        calls.append("assoc")
        return real_step(self, *args, **kwargs)
    monkeypatch.setattr(host, "_api_window", window)
    monkeypatch.setattr(association.Association, "step", step)
    _windows_of(monkeypatch, 200)
    small = synth.write_collection(str(tmp_path / "b"), n_tasks=300, devices=1, model_fraction=0.3, seed=5)
    assert run(["import", "-dir", small], capsys)[0] == 0
    assert len(calls) >= 6 and calls[:4] == ["api", "api", "assoc", "assoc"]
    assert calls[4:] == ["api", "assoc"] * ((len(calls) - 4) // 2)
    assert _tables(small) == _tables(whole)
