"""Checks of the synthetic collection writer (tests/synth), decoded with numpy only."""
from __future__ import annotations

import glob
import json
import os
import re
import sys
import time
from typing import Dict, List

import numpy as np
import pytest

from msprof_kit.parsers import records

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import synth  # noqa: E402

GOLDEN = "/work/shared/golden"


# --------------------------------------------------------------------------------------------
# helpers


def slice_files(data_dir: str, stem: str) -> List[str]:
    """The slices of one stream, in slice order."""
    paths = glob.glob(os.path.join(data_dir, f"{stem}.slice_*"))
    return sorted(paths, key=lambda p: int(p.rsplit("_", 1)[1]))


def read_stream(data_dir: str, stem: str, record: records.Record) -> np.ndarray:
    """Concatenate the slices of a stream and decode it (empty when absent)."""
    raw = b"".join(open(p, "rb").read() for p in slice_files(data_dir, stem))
    assert len(raw) % record.size == 0, f"{stem}: {len(raw)} bytes is not a multiple of {record.size}"
    return np.frombuffer(raw, dtype=record.dtype)


def field(record: records.Record, host: str, part: str, values: np.ndarray) -> np.ndarray:
    return records.bit_field(record, host, part, values.astype(np.int64))


def streams_of(prof: str) -> Dict[str, List[str]]:
    """{result dir: sorted file names relative to it} of a collection."""
    out: Dict[str, List[str]] = {}
    for root, _, files in os.walk(prof):
        rel = os.path.relpath(root, prof)
        top = rel.split(os.sep)[0]
        out.setdefault(top, []).extend(os.path.join(rel, f)[len(top) + 1:] for f in files)
    return {k: sorted(v) for k, v in out.items() if k != "."}


def host_tracks(prof: str) -> np.ndarray:
    data = os.path.join(prof, "host", "data")
    parts = [read_stream(data, f"{c}.compact.task_track", records.TASK_TRACK) for c in ("aging", "unaging")]
    tracks = np.empty(sum(len(p) for p in parts), dtype=records.TASK_TRACK.dtype)
    tracks[:len(parts[0])] = parts[0]
    tracks[len(parts[0]):] = parts[1]
    return tracks


def end_mono_ns(prof: str) -> int:
    return int(json.load(open(os.path.join(prof, "host", "end_info")))["clockMonotonicRaw"])


def device_ns(syscnt: np.ndarray, prof: str, device: int, tick_ns: int) -> np.ndarray:
    text = open(os.path.join(prof, f"device_{device}", f"dev_start.log.{device}")).read()
    cntvct = int(re.search(r"cntvct: (\d+)", text).group(1))  # type: ignore[union-attr]
    return synth.HOST_MONO0_NS + (syscnt.astype(np.int64) - cntvct) * tick_ns


CONTROL_HOST = ["end_info", "host_start.log", "info.json", "sample.json", "start_info"]


def control_device(d: int) -> List[str]:
    return sorted([f"dev_start.log.{d}", f"end_info.{d}", f"host_start.log.{d}", f"info.json.{d}",
                   "sample.json", f"start_info.{d}"])


# --------------------------------------------------------------------------------------------
# hashes


def test_hash_matches_collector() -> None:
    assert synth.double_hash("Add") == 247669290252505
    assert synth.double_hash("MatMul") == 7090398782807627396
    assert synth.double_hash("注意力_Cast_145") == 15452756059095220821  # signed bytes >= 0x80
    texts = ["", "a", "model/ffn,gate/ReduceSum_17", "注意力_Cast_145", "x" * 300]
    assert synth.hash_ids(texts).tolist() == [synth.double_hash(t) for t in texts]


def test_hash_matches_golden_dictionaries() -> None:
    paths = [p for p in glob.glob(f"{GOLDEN}/*/input/PROF_*/host/data/unaging.additional.hash_dic.slice_0")
             if "/min_910b/" not in p]  # min_910b uses hand-picked ids
    if not paths:
        pytest.skip("golden corpus not available")
    for path in paths:
        lines = open(path, encoding="utf-8").read().splitlines()
        ids = [int(line.split(":", 1)[0]) for line in lines]
        assert synth.hash_ids([line.split(":", 1)[1] for line in lines]).tolist() == ids, path


# --------------------------------------------------------------------------------------------
# 910B


def test_910b_collection(tmp_path) -> None:
    n = 60
    prof = synth.write_collection(str(tmp_path), chip="910B", n_tasks=n, model_fraction=0.3, seed=5)
    assert re.fullmatch(r"PROF_000001_20231125090304544_[A-R]{8}", os.path.basename(prof))
    files = streams_of(prof)
    assert files["host"] == sorted(CONTROL_HOST + [f"data/{s}.slice_0" for s in (
        "aging.api_event.data", "unaging.api_event.data",
        "aging.compact.node_basic_info", "unaging.compact.node_basic_info",
        "aging.compact.task_track", "unaging.compact.task_track",
        "aging.additional.tensor_info", "unaging.additional.tensor_info",
        "unaging.additional.graph_id_map", "unaging.additional.hash_dic", "unaging.additional.type_info_dic")])
    assert files["device_0"] == sorted(control_device(0) + ["data/ffts_profile.data.0.slice_0",
                                                            "data/stars_soc.data.0.slice_0"])

    info = json.load(open(os.path.join(prof, "device_0", "info.json.0")))
    assert info["platform_version"] == "5" and info["drvVersion"] == 467732
    dev = info["DeviceInfo"][0]
    assert (dev["hwts_frequency"], dev["aic_frequency"], dev["ai_core_num"], dev["aiv_num"]) == \
        ("50.000000", "1800", 24, 48)
    sample = json.load(open(os.path.join(prof, "device_0", "sample.json")))
    assert sample["ai_core_metrics"] == "PipeUtilizationExct"
    assert sample["ai_core_profiling_events"] == "0x416,0x417,0x9,0x302,0xc,0x303,0x54,0x55"
    assert sample["aiv_metrics"] == "PipeUtilization"
    assert json.load(open(os.path.join(prof, "host", "sample.json")))["devices"] == "64"
    assert json.load(open(os.path.join(prof, "host", "info.json")))["CPU"][0]["Frequency"] == "100.000000"

    data = os.path.join(prof, "device_0", "data")
    soc = read_stream(data, "stars_soc.data.0", records.STARS_LOG)
    pmu = read_stream(data, "ffts_profile.data.0", records.FFTS_PMU)
    assert len(soc) == 2 * n and len(pmu) == n
    func = field(records.STARS_LOG, "head", "func_type", soc["head"])
    assert func.tolist() == [0, 1] * n
    assert field(records.STARS_LOG, "head", "cnt", soc["head"]).tolist() == [k % 16 for k in range(2 * n)]
    assert np.all(soc["magic"] == records.DEVICE_MAGIC)
    assert np.all(np.diff(soc["syscnt"].astype(np.int64)) > 0)
    start, end = soc[0::2], soc[1::2]
    assert np.array_equal(start["stream_raw"], end["stream_raw"]) and np.array_equal(start["task_raw"], end["task_raw"])

    # Host task_track and device ACSQ agree task by task (same order: one thread, sequential).
    tracks = host_tracks(prof)
    tracks = tracks[np.argsort(tracks["timestamp"], kind="stable")]
    assert len(tracks) == n and np.all(tracks["type"] == 802) and np.all(tracks["data_len"] == 40)
    assert np.array_equal(tracks["stream_id"], start["stream_raw"])
    assert np.array_equal(tracks["task_id"], start["task_raw"])
    assert set(tracks["stream_id"].tolist()) == {synth.EAGER_STREAM, synth.MODEL_STREAM}
    for s in (synth.EAGER_STREAM, synth.MODEL_STREAM):
        ids = tracks["task_id"][tracks["stream_id"] == s]
        assert ids.tolist() == list(range(1, len(ids) + 1))
    sqe = field(records.STARS_LOG, "head", "sqe_type", start["head"])
    assert np.array_equal(sqe, np.where(tracks["task_type"] == 66, 2, 0))
    assert set(tracks["task_type"].tolist()) <= {0, 66}

    # Context PMU: one per task, same start/end, core type consistent, counters plausible.
    assert np.all(field(records.FFTS_PMU, "head", "func_type", pmu["head"]) == 40)
    assert np.array_equal(pmu["start_syscnt"], start["syscnt"]) and np.array_equal(pmu["end_syscnt"], end["syscnt"])
    assert np.array_equal(pmu["task_raw"], start["task_raw"])
    assert np.array_equal(pmu["word20"] >> 13, (tracks["task_type"] == 66).astype(np.uint16))
    assert np.all(pmu["total_cycle"] > 0) and np.all(pmu["pmu"] <= pmu["total_cycle"][:, None])
    assert np.all(pmu["pmu"][:, 7] <= pmu["pmu"][:, 6])  # icache misses <= requests

    # Times: device after the collection start, everything before end_info.
    ns = device_ns(soc["syscnt"], prof, 0, 20)
    assert ns.min() > synth.HOST_MONO0_NS and ns.max() < end_mono_ns(prof)
    assert tracks["timestamp"].min() * 10 > synth.HOST_MONO0_NS
    # each task runs after its task_track was stamped
    assert np.all(ns[0::2] > tracks["timestamp"].astype(np.int64) * 10)


def test_910b_metric_group_and_mix_ops(tmp_path) -> None:
    """metrics= names the group and its events in sample.json; mix_fraction= turns some ops into
    MIX_AIC / MIX_AIV ops: FFTS+ subtask logs, a context_id_info, and block num x MIX_RATIO block PMU
    records of the other core inside the task; every counter of the group's events is nonzero."""
    n = 40
    prof = synth.write_collection(str(tmp_path), chip="910B", n_tasks=n, metrics="MemoryAccess",
                                  mix_fraction=0.3, seed=3)
    sample = json.load(open(os.path.join(prof, "device_0", "sample.json")))
    assert sample["ai_core_metrics"] == sample["aiv_metrics"] == "MemoryAccess"
    assert sample["ai_core_profiling_events"] == sample["aiv_profiling_events"] == synth.GROUP_EVENTS["MemoryAccess"]

    tracks = host_tracks(prof)
    tracks = tracks[np.argsort(tracks["timestamp"], kind="stable")]
    mix = np.isin(tracks["task_type"], (synth.KERNEL_MIX_AIC, synth.KERNEL_MIX_AIV))
    assert mix.sum() == 12 and {108, 109} <= set(tracks["task_type"].tolist())
    assert np.all(field(records.TASK_TRACK, "sched", "ratio", tracks["sched"])[mix] == synth.MIX_RATIO)
    data = os.path.join(prof, "host", "data")
    ctx = [read_stream(data, f"{c}.additional.context_id_info", records.CONTEXT_ID_INFO) for c in ("aging", "unaging")]
    assert sum(len(c) for c in ctx) == mix.sum()

    dev = os.path.join(prof, "device_0", "data")
    soc = read_stream(dev, "stars_soc.data.0", records.STARS_LOG)
    func = field(records.STARS_LOG, "head", "func_type", soc["head"])
    assert np.array_equal(func[0::2], np.where(mix, 34, 0)) and np.array_equal(func[1::2], np.where(mix, 35, 1))
    pmu = read_stream(dev, "ffts_profile.data.0", records.FFTS_PMU)
    kind = field(records.FFTS_PMU, "head", "func_type", pmu["head"])
    assert field(records.FFTS_PMU, "head", "cnt", pmu["head"]).tolist() == [k % 16 for k in range(len(pmu))]
    assert np.all(np.diff(pmu["end_syscnt"].astype(np.int64)) >= 0)
    context, blocks = pmu[kind == 40], pmu[kind == 41]
    assert len(context) == n
    assert len(blocks) == int((tracks["num_blocks"][mix].astype(np.int64) * synth.MIX_RATIO).sum())
    for row in np.flatnonzero(mix):
        def of_task(recs: np.ndarray) -> np.ndarray:
            return recs[(recs["stream_raw"] == tracks["stream_id"][row]) & (recs["task_raw"] == tracks["task_id"][row])]
        mine, task = of_task(blocks), of_task(context)
        assert len(mine) == tracks["num_blocks"][row] * synth.MIX_RATIO and len(task) == 1
        assert np.all((mine["end_syscnt"] >= task["start_syscnt"][0]) & (mine["end_syscnt"] <= task["end_syscnt"][0]))
        # core type: the secondary core (AIV blocks for MIX_AIC)
        assert np.all((mine["word20"] & 1) == (tracks["task_type"][row] == synth.KERNEL_MIX_AIC))
    assert np.all(pmu["pmu"] > 0)
    col = synth.GROUP_EVENTS["MemoryAccess"].split(",")
    assert np.all(pmu["pmu"][:, col.index("0x206")] < pmu["pmu"][:, col.index("0x32")])


def test_host_call_shape(tmp_path) -> None:
    n = 80
    prof = synth.write_collection(str(tmp_path), n_tasks=n, model_fraction=0.25, seed=11)
    data = os.path.join(prof, "host", "data")
    aging = read_stream(data, "aging.api_event.data", records.API_EVENT)
    unaging = read_stream(data, "unaging.api_event.data", records.API_EVENT)
    for api in (aging, unaging):  # stored in end order (events: their time stamp)
        key = np.where(api["end"] == records.EVENT_FLAG, api["begin"], api["end"])
        assert np.all(np.diff(key.astype(np.int64)) >= 0)
        assert np.all(api["magic"] == records.HOST_MAGIC) and np.all(api["thread_id"] == synth.FIRST_THREAD_ID)

    def by_begin(a: np.ndarray) -> np.ndarray:
        return a[np.argsort(a["begin"], kind="stable")]

    kernel = by_begin(aging[(aging["level"] == 5000) & (aging["type"] == 1001)])
    eager_launch = by_begin(aging[(aging["level"] == 10000) & (aging["type"] == 5)])
    model_launch = by_begin(unaging)
    acl = aging[aging["level"] == 20000]
    aclnn = by_begin(acl[acl["type"] >> 16 == 5])
    aclmdl = by_begin(acl[acl["type"] == (2 << 16) | 1])
    events = aging[aging["level"] == 15000]
    assert len(kernel) == n and len(eager_launch) + len(model_launch) == n and len(aclnn) == len(eager_launch)
    assert np.all(unaging["level"] == 10000) and len(model_launch) > 0
    assert np.all(events["end"] == records.EVENT_FLAG) and np.all(events["item_id"] == synth.MODEL_ID)
    assert len(events) == 2 * len(aclmdl)
    ev_begin, ev_end = events[0::2], events[1::2]
    assert ev_begin["reserve"].tolist() == ev_end["reserve"].tolist() == list(range(1, len(aclmdl) + 1))

    # aclnn ⊃ launch (eager); aclmdlExecute ⊃ ModelExecute ⊃ launches (model)
    assert np.all((aclnn["begin"] < eager_launch["begin"]) & (eager_launch["end"] < aclnn["end"]))
    assert np.all((aclmdl["begin"] < ev_begin["begin"]) & (ev_end["begin"] < aclmdl["end"]))
    which = np.searchsorted(ev_begin["begin"], model_launch["begin"]) - 1
    assert np.all(which >= 0)
    assert np.all((ev_begin["begin"][which] < model_launch["begin"]) & (model_launch["end"] < ev_end["begin"][which]))

    # launch ⊃ KernelLaunch; node_basic_info / tensor_info 1 us after the launch begins,
    # task_track 10 ns (one tick) after KernelLaunch begins.
    launches = by_begin(np.concatenate([eager_launch, model_launch]))  # API_EVENT has no padding
    assert np.all((launches["begin"] < kernel["begin"]) & (kernel["end"] < launches["end"]))
    for cls, launch in (("aging", eager_launch), ("unaging", model_launch)):
        nbi = read_stream(data, f"{cls}.compact.node_basic_info", records.NODE_BASIC_INFO)
        tensor = read_stream(data, f"{cls}.additional.tensor_info", records.TENSOR_INFO)
        assert np.array_equal(nbi["timestamp"], launch["begin"] + 100)
        assert np.array_equal(nbi["op_name"], launch["item_id"])
        assert np.array_equal(tensor["timestamp"], nbi["timestamp"])
        assert np.array_equal(tensor["op_name"], nbi["op_name"])
        assert np.all(tensor["tensor_num"] == 2) and np.all(tensor["t0_type"] == 0) and np.all(tensor["t1_type"] == 1)
        assert np.all(tensor["t0_format"] == 2) and np.all(tensor["t0_dtype"] == 1)
        assert np.all(tensor["t0_shape"][:, :3] > 0) and np.all(tensor["t0_shape"][:, 3:] == 0)
        assert set(nbi["task_type"].tolist()) <= {0, 2}
    tracks = host_tracks(prof)
    tracks = tracks[np.argsort(tracks["timestamp"], kind="stable")]
    assert np.array_equal(tracks["timestamp"], kernel["begin"] + 1)

    # names resolve through the dictionaries
    hashes = {int(k): v for k, v in (line.split(":", 1) for line in
                                      open(os.path.join(data, "unaging.additional.hash_dic.slice_0"), encoding="utf-8")
                                      .read().splitlines())}
    types = dict(line.split(":", 1) for line in
                 open(os.path.join(data, "unaging.additional.type_info_dic.slice_0")).read().splitlines())
    assert all(int(h) in hashes for h in np.concatenate([launches["item_id"], tracks["kernel_name"]]))
    assert all(f"20000_{t}" in types for t in acl["type"].tolist())
    assert types["5000_802"] == "task_track" and types["10000_5"] == "launch" and types["5000_1001"] == "KernelLaunch"
    gim = read_stream(data, "unaging.additional.graph_id_map", records.GRAPH_ID_MAP)
    assert len(gim) == 1 and hashes[int(gim["model_name"][0])] == synth.MODEL_NAME and gim["model_id"][0] == 1


# --------------------------------------------------------------------------------------------
# 310P


def test_310p_collection(tmp_path) -> None:
    n = 50
    prof = synth.write_collection(str(tmp_path), chip="310P", n_tasks=n, seed=2, tensors=False)
    files = streams_of(prof)
    assert files["device_0"] == sorted(control_device(0) + ["data/aicore.data.0.slice_0", "data/hwts.data.0.slice_0"])
    assert not any("tensor_info" in f or "unaging.api_event" in f for f in files["host"])
    info = json.load(open(os.path.join(prof, "device_0", "info.json.0")))
    assert info["platform_version"] == "4"
    dev = info["DeviceInfo"][0]
    assert (dev["hwts_frequency"], dev["aic_frequency"], dev["ai_core_num"]) == ("100", "1000", 8)
    assert json.load(open(os.path.join(prof, "device_0", "sample.json")))["ai_core_metrics"] == "PipeUtilization"
    assert "cntvct: 100000777000\n" in open(os.path.join(prof, "device_0", "dev_start.log.0")).read()

    data = os.path.join(prof, "device_0", "data")
    hwts = read_stream(data, "hwts.data.0", records.HWTS_LOG)
    aic = read_stream(data, "aicore.data.0", records.AIC_PMU)
    assert len(hwts) == 2 * n and len(aic) == n
    assert field(records.HWTS_LOG, "tag", "log_type", hwts["tag"]).tolist() == [0, 1] * n
    assert field(records.HWTS_LOG, "tag", "cnt", hwts["tag"]).tolist() == [k % 16 for k in range(2 * n)]
    assert np.all(hwts["magic"] == records.DEVICE_MAGIC) and np.all(hwts["task_type"] == 0)
    assert np.all(np.diff(hwts["syscnt"].astype(np.int64)) > 0)
    ends = hwts[1::2]
    assert np.array_equal(aic["task_id"], ends["task_id"]) and np.array_equal(aic["stream_id"], ends["stream_id"])
    assert field(records.AIC_PMU, "tag", "cnt", aic["tag"]).tolist() == [k % 16 for k in range(n)]
    assert np.all(aic["total_cycle"] > 0) and np.all(aic["pmu"] <= aic["total_cycle"][:, None])

    tracks = host_tracks(prof)
    assert np.all(tracks["task_type"] == 0)  # every 310P op is an AI Core op
    assert np.array_equal(tracks["task_id"], hwts["task_id"][0::2])
    assert np.array_equal(tracks["stream_id"], hwts["stream_id"][0::2])
    ns = device_ns(hwts["syscnt"], prof, 0, 10)
    assert ns.min() > synth.HOST_MONO0_NS and ns.max() < end_mono_ns(prof)


# --------------------------------------------------------------------------------------------
# several devices, slices, wrap, determinism


def test_two_devices(tmp_path) -> None:
    n = 30
    prof = synth.write_collection(str(tmp_path), n_tasks=n, devices=2, seed=4)
    files = streams_of(prof)
    assert files["device_1"] == sorted(control_device(1) + ["data/ffts_profile.data.1.slice_0",
                                                            "data/stars_soc.data.1.slice_0"])
    assert "cntvct: 123456789000\n" in open(os.path.join(prof, "device_1", "dev_start.log.1")).read()
    assert "[Device1]" in open(os.path.join(prof, "device_1", "host_start.log.1")).read()
    tracks = host_tracks(prof)
    assert np.all(np.diff(tracks["timestamp"].astype(np.int64)) >= 0)  # threads interleaved in time
    for d in (0, 1):
        mine = tracks[tracks["device"] == d]
        assert len(mine) == n and np.all(mine["thread_id"] == synth.FIRST_THREAD_ID + d)
        soc = read_stream(os.path.join(prof, f"device_{d}", "data"), f"stars_soc.data.{d}", records.STARS_LOG)
        assert np.array_equal(soc["task_raw"][0::2], mine["task_id"])
        ns = device_ns(soc["syscnt"], prof, d, 20)
        assert ns.min() > synth.HOST_MONO0_NS and ns.max() < end_mono_ns(prof)


RECORD_OF = {"api_event": records.API_EVENT, "node_basic_info": records.NODE_BASIC_INFO,
             "task_track": records.TASK_TRACK, "tensor_info": records.TENSOR_INFO,
             "graph_id_map": records.GRAPH_ID_MAP, "stars_soc": records.STARS_LOG, "ffts_profile": records.FFTS_PMU}


def test_slices_cut_inside_records(tmp_path) -> None:
    whole = synth.write_collection(str(tmp_path / "a"), n_tasks=200, model_fraction=0.2, seed=9)
    cut = synth.write_collection(str(tmp_path / "b"), n_tasks=200, model_fraction=0.2, seed=9, slices=3)
    aligned = synth.write_collection(str(tmp_path / "c"), n_tasks=200, model_fraction=0.2, seed=9, slices=3,
                                     straddle=False)
    straddling = 0
    for rel in ("host/data", "device_0/data"):
        for path in glob.glob(os.path.join(whole, rel, "*.slice_0")):
            stem = os.path.basename(path)[:-len(".slice_0")]
            if "_dic" in stem:
                assert len(slice_files(os.path.join(cut, rel), stem)) == 1
                continue
            size = next(rec.size for key, rec in RECORD_OF.items() if key in stem)
            reference = open(path, "rb").read()
            for prof in (cut, aligned):
                parts = slice_files(os.path.join(prof, rel), stem)
                assert b"".join(open(p, "rb").read() for p in parts) == reference
                if len(reference) >= 3 * size:
                    assert len(parts) == 3
                sizes = [os.path.getsize(p) for p in parts]
                if prof is aligned:
                    assert all(s % size == 0 for s in sizes)
                else:
                    straddling += any(s % size for s in sizes)
    assert straddling >= 8


def test_same_seed_same_bytes(tmp_path) -> None:
    def digest(prof: str) -> Dict[str, bytes]:
        return {os.path.relpath(os.path.join(r, f), prof): open(os.path.join(r, f), "rb").read()
                for r, _, fs in os.walk(prof) for f in fs}
    a = digest(synth.write_collection(str(tmp_path / "a"), n_tasks=40, seed=1, model_fraction=0.5))
    b = digest(synth.write_collection(str(tmp_path / "b"), n_tasks=40, seed=1, model_fraction=0.5))
    c = digest(synth.write_collection(str(tmp_path / "c"), n_tasks=40, seed=2, model_fraction=0.5))
    assert a == b
    soc = "device_0/data/stars_soc.data.0.slice_0"
    assert a[soc] != c[soc] and len(a[soc]) == len(c[soc])
    # records merged from several threads or sorted, with padding: the padding is zeros, not the
    # memory's leftovers
    more = dict(n_tasks=60, seed=3, model_fraction=0.5, devices=2, mix_fraction=0.3, steps=True)
    assert digest(synth.write_collection(str(tmp_path / "d"), **more)) == \
        digest(synth.write_collection(str(tmp_path / "e"), **more))


def test_mix_ops_and_step_trace(tmp_path) -> None:
    """mix_fraction= without a metric group (the chip's own groups, every counter drawn nonzero)
    and steps=: the host side of MIX ops in op order, FFTS+ subtask logs on the device, and the
    MODEL_START / MODEL_END step-trace tags around each execution (the MIX ops' PMU records are
    covered by test_910b_metric_group_and_mix_ops)."""
    n = 40
    prof = synth.write_collection(str(tmp_path), n_tasks=n, model_fraction=0.75, mix_fraction=0.3, steps=True,
                                  seed=1)
    files = streams_of(prof)
    for stem in ("aging.additional.context_id_info", "unaging.additional.context_id_info"):
        assert f"data/{stem}.slice_0" in files["host"]
    assert "data/ts_track.data.0.slice_0" in files["device_0"]
    data = os.path.join(prof, "host", "data")
    types = dict(line.split(":", 1) for line in
                 open(os.path.join(data, "unaging.additional.type_info_dic.slice_0")).read().splitlines())
    assert (types["5000_108"], types["5000_109"], types["10000_4"]) == \
        ("KERNEL_MIX_AIC", "KERNEL_MIX_AIV", "context_id_info")

    # host, in op order: GE type 4 / 5 with mix ratio 2, runtime KERNEL_MIX_AIC / _AIV, one context 0
    nbi = np.concatenate([read_stream(data, f"{c}.compact.node_basic_info", records.NODE_BASIC_INFO)
                          for c in ("aging", "unaging")])
    nbi = nbi[np.argsort(nbi["timestamp"], kind="stable")]
    tracks = host_tracks(prof)
    tracks = tracks[np.argsort(tracks["timestamp"], kind="stable")]
    ge = nbi["task_type"]
    mix = np.isin(ge, (4, 5))
    assert set(ge.tolist()) == {0, 2, 4, 5} and mix.sum() == 12
    assert (ge[mix] == 4).sum() == (ge[mix] == 5).sum() == 6  # alternately, in op order
    assert np.array_equal(nbi["block_dim"] >> 16, np.where(mix, 2, 0))
    assert np.all((nbi["block_dim"][mix] & 0xFFFF) >= 4) and np.all((nbi["block_dim"][mix] & 0xFFFF) <= 24)
    assert np.array_equal(tracks["task_type"], np.select([ge == 4, ge == 5, ge == 0], [108, 109, 0], 66))
    assert np.array_equal(field(records.TASK_TRACK, "sched", "ratio", tracks["sched"]), np.where(mix, 2, 0))
    cids = np.concatenate([read_stream(data, f"{c}.additional.context_id_info", records.CONTEXT_ID_INFO)
                           for c in ("aging", "unaging")])
    assert sorted(cids["op_name"].tolist()) == sorted(nbi["op_name"][mix].tolist())
    assert np.all(cids["ctx_num"] == 1) and np.all(cids["ctx_ids"] == 0) and np.all(cids["data_len"] == 16)

    # device: FFTS+ subtask logs for MIX ops, ACSQ logs for the others; every PMU counter nonzero
    dev = os.path.join(prof, "device_0", "data")
    soc = read_stream(dev, "stars_soc.data.0", records.STARS_LOG)
    start, end = soc[0::2], soc[1::2]
    assert np.array_equal(start["word16"], np.select([ge == 4, ge == 5], [6, 7], 0))
    assert np.array_equal(start["word20"] >> 13, np.where(mix, 4, 0))
    assert np.array_equal(start["task_raw"], tracks["task_id"])
    assert np.all(read_stream(dev, "ffts_profile.data.0", records.FFTS_PMU)["pmu"] > 0)

    # step trace: MODEL_START / MODEL_END around each execution's tasks, ids taken on stream 3
    ts = read_stream(dev, "ts_track.data.0", records.TS_TRACK)
    assert np.all(ts["tag"] == 10) and np.all(ts["p24"] == synth.MODEL_ID) and np.all(ts["p32"] == 3)
    assert ts["p36"].tolist() == [0, 1] * (len(ts) // 2) and len(ts) == 6
    assert ts["p16"].tolist() == [1, 1, 2, 2, 3, 3]
    model = tracks["stream_id"] == synth.MODEL_STREAM
    assert model.sum() == 30
    for k in range(3):
        ops = np.flatnonzero(model)[10 * k:10 * k + 10]
        assert ts["syscnt"][2 * k] < start["syscnt"][ops[0]] and end["syscnt"][ops[-1]] < ts["syscnt"][2 * k + 1]
        assert tracks["task_id"][ops].tolist() == list(range(12 * k + 2, 12 * k + 12))
        assert (ts["p34"][2 * k], ts["p34"][2 * k + 1]) == (12 * k + 1, 12 * k + 12)
        outside = (start["syscnt"] > ts["syscnt"][2 * k]) & (end["syscnt"] < ts["syscnt"][2 * k + 1])
        assert np.array_equal(np.flatnonzero(outside), ops)  # no eager task inside an execution


def test_early_apis(tmp_path) -> None:
    """early_apis=3: the first three eager ops' host calls before the start (the last one's ACL API
    and KernelLaunch straddle it), their device tasks unmoved; a ModelLoad pair before them holding
    a StreamCreate, a ModelBindStream leaving it, and another thread's StreamCreate inside it. The
    rest of the collection is the same as without the option."""
    k, t0 = 3, synth.HOST_MONO0_NS // 10  # host ticks
    prof = synth.write_collection(str(tmp_path / "a"), n_tasks=20, model_fraction=0.5, seed=5, early_apis=k)
    plain = synth.write_collection(str(tmp_path / "b"), n_tasks=20, model_fraction=0.5, seed=5)
    data = os.path.join(prof, "host", "data")
    aging = read_stream(data, "aging.api_event.data", records.API_EVENT)
    unaging = read_stream(data, "unaging.api_event.data", records.API_EVENT)
    key = np.where(aging["end"] == records.EVENT_FLAG, aging["begin"], aging["end"])
    assert np.all(np.diff(key.astype(np.int64)) >= 0)
    kernel = np.sort(aging[(aging["level"] == 5000) & (aging["type"] == 1001)], order="begin")
    first = kernel["begin"][:k].astype(np.int64)
    assert np.array_equal(np.diff(first), [synth.OP_PERIOD_NS // 10] * (k - 1))
    assert np.all(kernel["end"][:k - 1] < t0) and kernel["begin"][k - 1] < t0 <= kernel["end"][k - 1]
    assert np.all(kernel["begin"][k:] > t0)
    load = unaging[(unaging["level"] == 15000) & (unaging["type"] == synth.TYPE_MODEL_LOAD)]
    assert len(load) == 2 and np.all(load["end"] == records.EVENT_FLAG) and np.all(load["item_id"] == synth.MODEL_ID)
    lo, hi = (int(v) for v in load["begin"])
    slot0 = first[0] - 800  # KernelLaunch begins 8 us into its slot
    assert hi == slot0 - synth.MODEL_LOAD_GAP_NS // 10 and hi - lo == synth.MODEL_LOAD_NS // 10
    rt = aging[(aging["level"] == 5000) & (aging["type"] != 1001)]
    tid = synth.FIRST_THREAD_ID
    create = rt[(rt["type"] == synth.TYPE_STREAM_CREATE) & (rt["thread_id"] == tid)]
    other = rt[rt["thread_id"] == tid + synth.OTHER_THREAD_OFFSET]
    bind = rt[rt["type"] == synth.TYPE_MODEL_BIND_STREAM]
    assert len(create) == len(other) == len(bind) == 1
    assert lo < create["begin"][0] < create["end"][0] < hi and lo < other["begin"][0] < other["end"][0] < hi
    assert lo < bind["begin"][0] < hi < bind["end"][0] < t0
    types = open(os.path.join(data, "unaging.additional.type_info_dic.slice_0")).read().splitlines()
    assert {"15000_2:ModelLoad", "5000_1010:StreamCreate", "5000_1011:ModelBindStream"} <= set(types)
    for rel in ["host/start_info", "host/host_start.log", "device_0/start_info.0"] + \
            [os.path.join("device_0", "data", n) for n in os.listdir(os.path.join(prof, "device_0", "data"))]:
        assert open(os.path.join(prof, rel), "rb").read() == open(os.path.join(plain, rel), "rb").read(), rel
    with pytest.raises(ValueError, match="eager"):
        synth.write_collection(str(tmp_path / "c"), n_tasks=20, model_fraction=0.5, seed=0, early_apis=3)


def test_mix_ops_need_910b() -> None:
    with pytest.raises(ValueError, match="910B"):
        synth.write_collection("/nonexistent", chip="310P", mix_fraction=0.2)
    with pytest.raises(ValueError, match="metric group"):
        synth.write_collection("/nonexistent", events="0x8,0x9")


def test_task_id_wrap(tmp_path) -> None:
    n = 70_000
    prof = synth.write_collection(str(tmp_path), n_tasks=n, seed=3, pmu=False, tensors=False, slices=2)
    tracks = host_tracks(prof)
    flips = tracks[tracks["task_type"] == 98]
    kernels = tracks[tracks["task_type"] != 98]
    kernels = kernels[np.argsort(kernels["timestamp"], kind="stable")]
    assert kernels["task_id"].tolist() == list(range(1, n + 1))  # (batch << 16) | (id & 0xFFFF)
    assert flips["task_id"].tolist() == [1 << 16] and flips["stream_id"].tolist() == [synth.EAGER_STREAM]
    first_of_batch = kernels[kernels["task_id"] == 1 << 16]
    assert flips["timestamp"][0] < first_of_batch["timestamp"][0]
    data = os.path.join(prof, "device_0", "data")
    soc = read_stream(data, "stars_soc.data.0", records.STARS_LOG)
    assert np.array_equal(soc["task_raw"][0::2], (kernels["task_id"] & 0xFFFF).astype(np.uint16))
    ts = read_stream(data, "ts_track.data.0", records.TS_TRACK)
    assert len(ts) == 1 and ts["tag"][0] == 14
    assert int(ts["p16"][0]) & 0xFFFF == synth.EAGER_STREAM and (int(ts["p16"][0]) >> 16) & 0xFFFF == 1
    batch_start = soc["syscnt"][0::2][65535]
    assert soc["syscnt"][0::2][65534] < ts["syscnt"][0] < batch_start


# --------------------------------------------------------------------------------------------
# damage helpers


def test_corrupt_magic_and_truncate(tmp_path) -> None:
    prof = synth.write_collection(str(tmp_path), n_tasks=10, seed=0)
    path = os.path.join(prof, "device_0", "data", "stars_soc.data.0.slice_0")
    size = os.path.getsize(path)
    assert synth.corrupt_magic(path, 5, records.STARS_LOG.size) == records.DEVICE_MAGIC
    soc = np.fromfile(path, dtype=records.STARS_LOG.dtype)
    assert soc["magic"][5] == 0x6BD4 and np.sum(soc["magic"] != records.DEVICE_MAGIC) == 1
    api = os.path.join(prof, "host", "data", "aging.api_event.data.slice_0")
    assert synth.corrupt_magic(api, 3, records.API_EVENT.size, offset_in_record=0, value=0x5A5B) == records.HOST_MAGIC
    assert np.fromfile(api, dtype=records.API_EVENT.dtype)["magic"][3] == 0x5A5B
    assert synth.truncate(path, 24) == size - 24 == os.path.getsize(path)
    with pytest.raises(ValueError):
        synth.corrupt_magic(path, 10_000, records.STARS_LOG.size)
    with pytest.raises(ValueError):
        synth.truncate(path, size)


# --------------------------------------------------------------------------------------------
# scale (loose: no timing assertion; `PYTHONPATH=tests python3 -m synth DIR 1000000` prints the time)


def test_100k_tasks(tmp_path) -> None:
    n = 100_000
    began = time.perf_counter()
    prof = synth.write_collection(str(tmp_path), n_tasks=n, model_fraction=0.1, seed=7)
    elapsed = time.perf_counter() - began
    data = os.path.join(prof, "device_0", "data")
    assert os.path.getsize(os.path.join(data, "stars_soc.data.0.slice_0")) == 2 * n * records.STARS_LOG.size
    assert os.path.getsize(os.path.join(data, "ffts_profile.data.0.slice_0")) == n * records.FFTS_PMU.size
    assert len(host_tracks(prof)) == n + 1  # + one FLIP_TASK on the eager stream
    hash_lines = open(os.path.join(prof, "host", "data", "unaging.additional.hash_dic.slice_0"),
                      encoding="utf-8").read().count("\n")
    assert hash_lines <= 2 * synth.NAME_POOL + 1 + 2 * len(synth.OP_TYPES)
    print(f"100k tasks written in {elapsed:.2f} s")
