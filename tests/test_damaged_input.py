"""Damaged input (issue 21, items 4-6): crashes become one located line, silently wrong numbers and
silently lost data get a named warning. Each case damages a copy of a golden input; raw files
stay byte-for-byte unchanged."""
from __future__ import annotations

import glob
import json
import os
import sqlite3
from typing import Callable, Tuple

import numpy as np
import pytest

from conftest import INTACT_CASES, copy_input, needs_shared, run, tree_hashes

from msprof_kit.parsers import records

pytestmark = needs_shared


def _import(case: str, tmp_path, capsys, damage: Callable[[str], None]) -> Tuple[str, int, str]:
    """Import a damaged copy of `case`: (the PROF folder, exit code, stderr); asserts there is no
    traceback and that the raw files are unchanged by the import."""
    prof = copy_input(case, str(tmp_path))
    damage(prof)
    before = tree_hashes(prof)
    code, _, err = run(["import", "-dir", prof], capsys)
    assert "Traceback" not in err
    after = tree_hashes(prof)
    assert {k: v for k, v in after.items() if k in before} == before
    return prof, code, err


def _one_error(err: str, path: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {path}: "), err
    return lines[0]


def _warnings(err: str) -> list:
    return [line for line in err.splitlines() if line.startswith("Warning: ")]


def _rows(prof: str, sql: str) -> list:
    with sqlite3.connect(os.path.join(prof, "sqlite", "msprof_kit.db")) as c:
        return c.execute(sql).fetchall()


def _count(prof: str, table: str) -> int:
    """Rows of a store table, 0 when the store has no such table (nothing was put into it)."""
    if not _rows(prof, f"SELECT 1 FROM sqlite_master WHERE name='{table}'"):
        return 0
    return _rows(prof, f"SELECT COUNT(*) FROM {table}")[0][0]


def _one(prof: str, pattern: str) -> str:
    paths = sorted(glob.glob(os.path.join(prof, pattern)))
    assert paths, pattern
    return paths[0]


def _empty(prof: str, pattern: str) -> list:
    paths = sorted(glob.glob(os.path.join(prof, pattern)))
    assert paths, pattern
    for p in paths:
        open(p, "wb").close()
    return paths


def _edit_json(path: str, edit: Callable[[dict], None]) -> None:
    with open(path) as f:
        value = json.load(f)
    edit(value)
    with open(path, "w") as f:
        json.dump(value, f)


def _replace(path: str, old: str, new: str) -> None:
    with open(path) as f:
        text = f.read()
    assert old in text
    with open(path, "w") as f:
        f.write(text.replace(old, new))


# --- item 4: crashes ---------------------------------------------------------------------------

@pytest.mark.parametrize("fill", ["empty", "garbage"])
def test_empty_or_all_invalid_tensor_info(tmp_path, capsys, fill):
    def damage(prof):
        for p in glob.glob(os.path.join(prof, "host", "data", "*tensor_info*")):
            size = os.path.getsize(p)
            with open(p, "wb") as f:
                f.write(b"" if fill == "empty" else b"\xff" * size)
    prof, code, err = _import("910b_mixed", tmp_path, capsys, damage)
    assert code == 0, err
    assert "tensor_info" in err
    if fill == "empty":
        assert "tensor_info.slice_0: empty" in err and "shapes" in err
    # the ops are still there, without tensor texts
    assert _rows(prof, "SELECT COUNT(*) FROM COMPUTE_TASK_INFO")[0][0] > 0


def test_host_without_api_event_records(tmp_path, capsys):
    prof, code, err = _import("min_910b", tmp_path, capsys,
                              lambda prof: [os.remove(p) for p in glob.glob(os.path.join(prof, "host", "data",
                                                                                              "*api_event*"))])
    assert code == 0, err
    data = os.path.join(prof, "host", "data")
    assert f"Warning: {data}: no api_event records" in err
    assert _count(prof, "CANN_API") == 0 and _count(prof, "TASK") > 0


@pytest.mark.parametrize("where, edit, fragment", [
    ("host/start_info", lambda p: _edit_json(p, lambda v: v.update(collectionTimeBegin=str(2 ** 63))),
     "collectionTimeBegin 9223372036854775808 is out of range"),
    ("host/start_info", lambda p: _edit_json(p, lambda v: v.update(clockMonotonicRaw=str(2 ** 64))),
     "clockMonotonicRaw 18446744073709551616 is out of range"),
    ("host/host_start.log", lambda p: _replace(p, "cntvct: 100000000000", f"cntvct: {2 ** 64}"),
     "cntvct 18446744073709551616 is out of range"),
    ("host/info.json", lambda p: open(p, "w").write("[" * 200000 + "]" * 200000),
     "JSON nested too deeply"),
])
def test_control_numbers_out_of_range_are_one_line(tmp_path, capsys, where, edit, fragment):
    prof, code, err = _import("min_910b", tmp_path, capsys, lambda prof: edit(os.path.join(prof, where)))
    assert code == 3
    line = _one_error(err, os.path.join(prof, where))
    assert fragment in line and "expected" in line


@pytest.mark.parametrize("where, edit, fragment", [
    ("device_0/dev_start.log.0", lambda p: _replace(p, "cntvct: 50000000000", f"cntvct: {2 ** 64}"),
     "cntvct 18446744073709551616 is out of range"),
    ("device_0/info.json.0",
     lambda p: _edit_json(p, lambda v: v["DeviceInfo"][0].update(hwts_frequency="1e-300")),
     "hwts_frequency is '1e-300'"),
    ("device_0/sample.json", lambda p: open(p, "w").write("[" * 200000 + "]" * 200000),
     "JSON nested too deeply"),
])
def test_a_device_control_number_out_of_range_skips_that_device(tmp_path, capsys, where, edit, fragment):
    prof, code, err = _import("min_910b", tmp_path, capsys, lambda prof: edit(os.path.join(prof, where)))
    if where.endswith("sample.json"):  # a control file that is not JSON stops the import (as before)
        _one_error(err, os.path.join(prof, where))
        assert fragment in err and code == 3
        return
    assert code == 0, err
    assert f"Warning: {os.path.join(prof, where)}: " in err and fragment in err and "device 0 is skipped" in err
    assert _count(prof, "TASK") == 0 and _count(prof, "CANN_API") > 0


# --- item 5: silently wrong numbers --------------------------------------------------------------

def _api_times(prof: str) -> list:
    return _rows(prof, "SELECT startNs, endNs FROM CANN_API ORDER BY connectionId")


@pytest.mark.parametrize("value", [-1, 0, "abc", None, "1e-300", "-100.0"])
def test_unusable_host_frequency_warns_and_reads_ticks_as_ns(tmp_path, capsys, value):
    """The reference's rule (host_formats.md §3.1): an empty, invalid or zero CPU Frequency means
    "the default", host timestamps already in ns. msprof-kit follows it but says so, since a
    counter read as ns makes every host time wrong."""
    info = os.path.join("host", "info.json")
    prof, code, err = _import("min_910b", tmp_path, capsys,
                              lambda prof: _edit_json(os.path.join(prof, info),
                                                      lambda v: v["CPU"][0].update(Frequency=value)))
    assert code == 0, err
    assert f"Warning: {os.path.join(prof, info)}: CPU[0].Frequency is {json.dumps(value)}; expected" in err
    assert "read as ns" in err
    ticks = _api_times(prof)
    assert ticks and all(e >= s for s, e in ticks)


def test_empty_host_frequency_is_ns_without_warning(tmp_path, capsys):
    info = os.path.join("host", "info.json")
    prof, code, err = _import("min_910b", tmp_path, capsys,
                              lambda prof: _edit_json(os.path.join(prof, info),
                                                      lambda v: v["CPU"][0].update(Frequency="")))
    assert code == 0 and "Frequency" not in err, err


def test_api_record_ending_before_its_begin_is_dropped_with_a_warning(tmp_path, capsys):
    def damage(prof):
        path = _one(prof, "host/data/unaging.api_event.data.slice_0")
        arr = np.fromfile(path, dtype=records.API_EVENT.dtype)
        i = int(np.flatnonzero(arr["end"] != np.uint64(records.EVENT_FLAG))[3])
        arr["end"][i] = arr["begin"][i] - 1000
        arr.tofile(path)
        damage.offset = i * records.API_EVENT.size
    good = copy_input("min_910b", str(tmp_path / "good"))
    assert run(["import", "-dir", good], capsys)[0] == 0
    prof, code, err = _import("min_910b", tmp_path / "bad", capsys, damage)
    assert code == 0, err
    path = _one(prof, "host/data/unaging.api_event.data.slice_0")
    assert f"Warning: {path}: offset {damage.offset}: api_event record ends before it begins" in err
    times = _api_times(prof)
    assert all(e >= s for s, e in times)
    assert len(times) == len(_api_times(good)) - 1


# --- item 6: lost data ---------------------------------------------------------------------------

def test_device_without_its_stars_soc_slice(tmp_path, capsys):
    prof, code, err = _import("min_910b", tmp_path, capsys,
                              lambda prof: os.remove(_one(prof, "device_0/data/stars_soc.data.0.slice_0")))
    assert code == 0, err
    data = os.path.join(prof, "device_0", "data")
    assert f"Warning: {data}: no stars_soc.data.0.slice_N" in err and "lost" in err


@pytest.mark.parametrize("case, pattern, what", [
    ("910b_mixed", "host/data/*node_basic_info*", "op types"),
    ("310p_hwts", "device_0/data/aicore.data.0.slice_0", "PMU"),
    ("910b_mixed", "device_0/data/ffts_profile.data.0.slice_*", "PMU"),
])
def test_empty_data_files_are_named(tmp_path, capsys, case, pattern, what):
    names = []
    prof, code, err = _import(case, tmp_path, capsys, lambda prof: names.extend(_empty(prof, pattern)))
    assert code == 0, err
    warned = [w for w in _warnings(err) if os.path.basename(names[0]) in w]
    assert warned and "empty" in warned[0] and what in warned[0] and "lost" in warned[0], err


def test_empty_hash_dic(tmp_path, capsys):
    names = []
    prof, code, err = _import("910b_mixed", tmp_path, capsys,
                              lambda prof: names.extend(_empty(prof, "host/data/*hash_dic*")))
    assert code == 0, err
    assert f"Warning: {names[0]}: no entries" in err and "op names" in err


def test_hash_ids_that_resolve_to_nothing(tmp_path, capsys):
    def damage(prof):
        path = _one(prof, "host/data/unaging.additional.hash_dic.slice_0")
        with open(path) as f:
            lines = f.read().splitlines(keepends=True)
        with open(path, "w") as f:
            f.writelines(l for l in lines if not l.endswith(":Add\n") and ":aclnnAdd" not in l)
    prof, code, err = _import("min_910b", tmp_path, capsys, damage)
    assert code == 0, err
    warned = [w for w in _warnings(err) if "hash_dic" in w and "resolve to no entry" in w]
    assert len(warned) == 1 and "10000000000000000001" in warned[0] and "blank" in warned[0], err


def test_missing_sample_json_with_pmu_records(tmp_path, capsys):
    prof, code, err = _import("910b_mixed", tmp_path, capsys,
                              lambda prof: os.remove(os.path.join(prof, "device_0", "sample.json")))
    assert code == 0, err
    warned = [w for w in _warnings(err) if "sample.json" in w]
    assert len(warned) == 1 and "PMU" in warned[0] and "dropped" in warned[0], err


@pytest.mark.parametrize("missing", [0, 1])
def test_a_gap_in_the_slice_numbers(tmp_path, capsys, missing):
    def damage(prof):
        data = os.path.join(prof, "device_0", "data")
        if missing == 1:  # slices 0 and 2
            os.rename(os.path.join(data, "stars_soc.data.0.slice_1"), os.path.join(data, "stars_soc.data.0.slice_2"))
        else:
            os.remove(os.path.join(data, "stars_soc.data.0.slice_0"))
    prof, code, err = _import("910b_mixed", tmp_path, capsys, damage)
    assert code == 0, err
    slice_ = os.path.join(prof, "device_0", "data", f"stars_soc.data.0.slice_{missing}")
    assert f"Warning: {slice_}: missing" in err and "lost" in err


@pytest.mark.parametrize("case", INTACT_CASES)
def test_intact_inputs_give_no_warning(tmp_path, capsys, case):
    prof = copy_input(case, str(tmp_path))
    code, _, err = run(["import", "-dir", prof], capsys)
    assert code == 0 and not _warnings(err), err


def test_a_frequency_with_many_digits_far_from_the_sync_point(tmp_path, capsys):
    """A host counter of 100.000001 MHz read 10^11 ticks from its sync point: ticks * 10^9 / num
    would overflow int64 (and wrapped silently); the times stay within a few µs of a 100 MHz
    reading (they differ by 1 ppm: ~10 µs over 1000 s)."""
    def damage(freq):
        def edit(prof):
            _edit_json(os.path.join(prof, "host", "info.json"), lambda v: v["CPU"][0].update(Frequency=freq))
            _replace(os.path.join(prof, "host", "host_start.log"), "cntvct: 100000000000", "cntvct: 0")
        return edit
    round_, _, err = _import("min_910b", tmp_path / "round", capsys, damage("100.000000"))
    exact, code, err = _import("min_910b", tmp_path / "exact", capsys, damage("100.000001"))
    assert code == 0, err
    a, b = np.array(_api_times(round_)), np.array(_api_times(exact))
    assert a.shape == b.shape and np.abs(a - b).max() < 20_000


@pytest.mark.parametrize("mhz, tolerance", [("100", 0), ("38.4", 0), ("100.000001", 0), ("0.001", 0),
                                            ("99999.999999", 512)])  # the last beyond exact int64 steps
def test_clock_conversion_on_every_path(mhz, tolerance):
    """Clock.to_ns against exact rational arithmetic, rounded half up: exact while the steps fit int64."""
    from fractions import Fraction
    from msprof_kit.timebase import Clock
    f = Fraction(mhz)
    base = 10 ** 9
    ticks = np.array([base, base + 1, base + 7, base + 10 ** 6 + 3, 10 ** 11 + 5, 10 ** 12 - 1, 3 * 10 ** 12 + 17])
    got = Clock(base, 5, f).to_ns(ticks).tolist()
    want = [5 + int(Fraction((t - base) * 1000) / f + Fraction(1, 2)) for t in ticks.tolist()]
    assert all(abs(g - w) <= tolerance for g, w in zip(got, want)), (got, want)


# --- found by the mutation test (tests/test_mutation.py) -----------------------------------------

@pytest.mark.parametrize("key, value", [("ai_core_num", 2 ** 63), ("aiv_num", -1), ("aic_frequency", "abc")])
def test_unusable_device_counts_and_frequencies_warn(tmp_path, capsys, key, value):
    """A DeviceInfo core count or AI Core frequency that is no usable number (an OverflowError
    traceback for 2^63 before) is taken as unknown, with a warning naming it."""
    def damage(prof: str) -> None:
        def edit(info: dict) -> None:
            info["DeviceInfo"][0][key] = value
        _edit_json(_one(prof, "device_0/info.json*"), edit)

    prof, code, err = _import("910b_steps", tmp_path, capsys, damage)
    assert code == 0, err
    assert any(f"DeviceInfo[0].{key} is {json.dumps(value)}; expected" in w and "taken as unknown" in w
               for w in _warnings(err)), err


def test_a_record_written_twice_in_a_row_is_dropped_with_a_warning(tmp_path, capsys):
    """A whole api_event record repeated right after itself (a duplicated write) is one API."""
    rec = records.API_EVENT.size

    def damage(prof: str) -> None:
        path = _one(prof, "host/data/*api_event.data.slice_0")
        with open(path, "rb") as f:
            data = f.read()
        with open(path, "wb") as f:
            f.write(data[:3 * rec] + data[2 * rec:3 * rec] + data[3 * rec:])

    clean = copy_input("min_910b", str(tmp_path / "clean"))
    assert run(["import", "-dir", clean], capsys)[0] == 0
    prof, code, err = _import("min_910b", tmp_path, capsys, damage)
    assert code == 0, err
    assert any(f"offset {3 * rec}: api_event record repeating one of the 4 before it byte for byte" in w
               for w in _warnings(err)), err
    assert _count(prof, "CANN_API") == _count(clean, "CANN_API")


def test_a_missing_end_info_is_named(tmp_path, capsys):
    """Without a device's end_info the session's end comes from elsewhere: said in a warning."""
    prof, code, err = _import("910b_mixed", tmp_path, capsys,
                              lambda prof: os.remove(_one(prof, "device_0/end_info*")))
    assert code == 0, err
    assert any("device_0: no end_info; the collection's end is taken from another end_info" in w
               for w in _warnings(err)), err


def test_an_unusable_collection_end_is_named(tmp_path, capsys):
    def damage(prof: str) -> None:
        _edit_json(_one(prof, "device_0/end_info*"), lambda info: info.update(collectionTimeEnd=-2 ** 63 - 1))

    prof, code, err = _import("910b_steps", tmp_path, capsys, damage)
    assert code == 0, err
    assert any("collectionTimeEnd is -9223372036854775809, not µs since the Unix epoch" in w
               for w in _warnings(err)), err


def test_types_missing_from_a_cut_type_info_dic_are_counted(tmp_path, capsys):
    """A type_info_dic cut short: the API and task types it lost are shown as numbers, and said."""
    def damage(prof: str) -> None:
        path = _one(prof, "host/data/unaging.additional.type_info_dic.slice_0")
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) * 2 // 3)

    prof, code, err = _import("310p_hwts", tmp_path, capsys, damage)
    assert code == 0, err
    assert any("type_info_dic.slice_0:" in w and "API or task types have no entry" in w for w in _warnings(err))


def test_a_compact_record_with_no_time_is_dropped_with_a_warning(tmp_path, capsys):
    """Zeroed header fields of a tensor_info record (its time among them): the record is dropped,
    located, instead of joining the op at time 0."""
    def damage(prof: str) -> None:
        path = _one(prof, "host/data/aging.additional.tensor_info.slice_0")
        with open(path, "r+b") as f:
            f.seek(8)
            f.write(bytes(64))

    prof, code, err = _import("910b_steps", tmp_path, capsys, damage)
    assert code == 0, err
    assert any("tensor_info.slice_0: offset 0: tensor_info record without magic" in w for w in _warnings(err)), err


def test_an_api_record_with_thread_0_is_dropped_with_a_warning(tmp_path, capsys):
    """Thread 0 is the kernel's idle task, never a reporting thread: a zeroed thread id is damage."""
    rec = records.API_EVENT.size

    def damage(prof: str) -> None:
        path = _one(prof, "host/data/unaging.api_event.data.slice_0")
        with open(path, "r+b") as f:
            f.seek(50 * rec + 8)  # thread_id of record 50
            f.write(bytes(4))

    prof, code, err = _import("310p_hwts", tmp_path, capsys, damage)
    assert code == 0, err
    assert any(f"api_event.data.slice_0: offset {50 * rec}: api_event record without magic" in w
               and "a thread id" in w for w in _warnings(err)), err


def test_one_empty_slice_among_others_is_named(tmp_path, capsys):
    names = []

    def damage(prof: str) -> None:
        path = _one(prof, "device_0/data/ffts_profile.data.0.slice_1")
        open(path, "wb").close()
        names.append(path)

    prof, code, err = _import("910b_mixed", tmp_path, capsys, damage)
    assert code == 0, err
    assert any(w.startswith(f"Warning: {names[0]}: empty while other slices of the stream hold data")
               for w in _warnings(err)), err
