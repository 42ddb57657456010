"""From one collection's raw data to the store's tables: `build` reads the host (host.py) while
forked workers read the devices (device.py), then matches each device's tasks with the host's
(matching.py), adds their PMU metrics (pmu.py) and overlap (overlap.py), and hands every table to
the store's writer (a TableSink) as soon as it is final.

Each step is a function over column arrays / DataFrames; no per-record Python loop on a path
whose length grows with the number of tasks (loops run over threads, streams or distinct
strings). The rules follow the reference's C++ path (host_formats.md §2.7, device_formats.md
§3, §4 and §7, outputs.md §8), with deliberate improvements documented in docs/store.md:
a bad record costs that record, and device tasks pair with host tasks by time as well as ids.
"""
from __future__ import annotations

import functools
import os
import tempfile
from typing import Dict, List, Optional, Tuple, Union

import numpy as np
import pandas as pd

from .. import forked, memory, metrics
from ..store import CodedTexts
from ..errors import Diagnostics, MsprofKitError, NoData
from ..forked import Forked, can_fork
from ..layout import NPU_NAMES, Chip, Collection, ResultDir
from ..progress import label
from ..timebase import Clock
from . import limits
from .clocks import end_info_problem, host_clock_of, session_ns
from .columns import COMPUTE_HOST_TYPES, MIX_TYPES, NO_MODEL, frame_of, text_array
from .aicpu import AicpuTasks, write_aicpu
from .device import DeviceData, dev_type_names, device_tasks, has_pmu, load_device
from .freq import FreqChanges, freq_rows, nominal_mhz, read_freq
from .hccl import HcclDevice
from .hccl_ops import write_hccl
from .host import HostData, load_host
from .info import SAMPLE_KEYS, device_info_rows, rank_of
from .memory import write_memory
from .matching import Match, match_keys, write_compute_info
from .memory_ops import write_op_memory
from .msproftx import write_msproftx
from .memcpy import MemcpyTasks, write_memcpy
from .names import HashTable, where_text
from .overlap import Overlap
from .pmu import HwtsPmu, StarsPmu, metric_group, pmu_columns
from .sink import TableSink
from .tasks import GID_KEYS, GlobalIds, StringPool

InfoRows = List[Tuple[int, str, str]]  # KIT_INFO: (device id, -1 for the collection; key; value)


def _load_device_job(rd: ResultDir, coll: Collection, chip: Chip, scratch: str
                     ) -> Tuple[Optional[DeviceData], List[str]]:
    local = Diagnostics()
    os.nice(limits.DEVICE_NICE)  # (a forked worker: limits.DEVICE_NICE says why)
    return load_device(rd, coll, chip, local, scratch), local.warnings


def build(coll: Collection, diag: Diagnostics, put: TableSink, jobs: int = 1, scratch: str = "") -> InfoRows:
    """Parse and associate a whole collection, handing each store table to `put` as soon as it is
    final (and dropping it then; large tables come in parts). Returns the KIT_INFO rows. With
    jobs > 1 the devices' raw data is decoded in forked workers (one a device, at most `jobs`)
    while this process reads the host's. `scratch`: an empty folder for spilled columns (a
    temporary one by default)."""
    if not scratch:
        with tempfile.TemporaryDirectory(prefix="msprof_kit-") as folder:
            return build(coll, diag, put, jobs, folder)
    chip = coll.chip()
    info: InfoRows = []
    loaders: List[Forked] = []
    strings = StringPool(["release", "allocate"])
    pooled = len(coll.devices) > jobs  # one worker running a pool of `jobs`, else a worker a device
    if jobs > 1 and coll.devices and can_fork():
        loads = [functools.partial(_load_device_job, rd, coll, chip, scratch) for rd in coll.devices]
        loaders = [Forked(functools.partial(forked.each, loads, jobs, "device"), "devices", daemon=False)] \
            if pooled else [Forked(fn, f"device {rd.device_id}") for fn, rd in zip(loads, coll.devices)]
    try:
        host = load_host(coll.host, coll, diag, strings, put, jobs, scratch) if coll.host is not None else None
    except BaseException:
        for loader in loaders:
            loader.cancel()
        raise
    if coll.host is None:
        diag.warn(f"{coll.path}: no host/ directory; device tasks are kept without op names")
    devices: List[Tuple[ResultDir, DeviceData]] = []
    loaded = None
    with diag.progress.phase(f"{label(coll.path)}: device data", total=len(coll.devices), unit="devices") as phase:
        if loaders:
            try:
                results = []
                for loader in loaders:  # (a pool of workers reports all its devices at once)
                    results.append(loader.result())
                    phase.advance(len(coll.devices) if pooled else 1)
            finally:
                for loader in loaders:
                    loader.cancel()
            loaded = results[0] if pooled else results
        for i, rd in enumerate(coll.devices):
            if loaded is not None:
                dev, warnings = loaded[i]
                loaded[i] = None
                diag.extend(warnings)
            else:
                dev = load_device(rd, coll, chip, diag, scratch)
                phase.advance()
            memory.give_back()
            if dev is not None:
                devices.append((rd, dev))
    if not coll.devices:
        diag.warn(f"{coll.path}: no device_N/ directory; only host APIs and op descriptions are kept")
    if host is None and not devices:
        raise NoData("neither host nor device data could be read; expected host/data or device_N/data "
                     "with raw slices", path=coll.path)

    try:
        _tasks_and_tables(coll, chip, host, devices, strings, put, info, diag)
    finally:
        for _, dev in devices:
            dev.close()
        if host is not None and host.tasks is not None:
            host.tasks.close()
    return info


def _pmu_host_clock(rd: ResultDir, coll: Collection) -> Optional[Clock]:
    """Host time as the reference's Python PMU pass of a device reads it: host ticks through that
    device folder's host_start.log.N and its info.json's CPU frequency, placed by its start_info.N
    (mscalculate/aic/pmu_calculator.py:118-137 compares the GE task info's stamps with the start in
    those terms; without host/host_start.log that is not how the host's own clock reads them).
    None where that folder cannot convert host ticks (its warnings are the host clock's, and not
    repeated)."""
    try:
        return host_clock_of(rd, coll, Diagnostics())
    except MsprofKitError:
        return None


def _info_ns(clock: Optional[Clock], ticks: np.ndarray) -> np.ndarray:
    """KIT_TASK.infoNs: host ticks of node_basic_info stamps (-1: none) as local ns, -1 kept."""
    if clock is None:
        return np.full(len(ticks), -1, dtype=np.int64)
    return np.where(ticks >= 0, clock.to_ns(np.maximum(ticks, 0)), -1)


def _tasks_and_tables(coll: Collection, chip: Chip, host: Optional[HostData], devices: List[Tuple[ResultDir, DeviceData]],
                      strings: StringPool, put: TableSink, info: InfoRows, diag: Diagnostics) -> None:
    """COMPUTE_TASK_INFO, then the device tasks matched with the host's, a device after the other
    (by id) and a window of starts at a time, into TASK, KIT_TASK and KIT_TASK_PMU, then
    OVERLAP_ANALYSIS and the small tables."""
    pid = host.pid if host else 0
    host_tasks = host.tasks if host is not None else None
    largest = dict(host_tasks.largest) if host_tasks is not None else dict.fromkeys(GID_KEYS, 0)
    for _, dev in devices:
        largest["device_id"] = max(largest["device_id"], dev.device_id)
        largest["batch"] = max(largest["batch"], len(dev.flips.get("syscnt", ())))
    largest["stream_id"] = max(largest["stream_id"], 0xFFFF)
    largest["task_id"] = max(largest["task_id"], 0xFFFF)
    largest["ctx"] = max(largest["ctx"], 0x10000)
    gids = GlobalIds(largest)
    who = label(coll.path)
    freqs = {rd.device_id: read_freq(rd, diag) for rd, _ in devices}  # the real AI Core frequency (ingest/freq.py)
    with diag.progress.phase(f"{who}: op descriptions"):
        compute_ok = write_compute_info(host.tasks, host.tensor_table, gids, strings, put) if host is not None \
            else np.zeros(0, dtype=bool)
    memory.give_back()
    # host task types (codes into the host's type names) and device task types (past them) as one code
    texts = host_tasks.text_table() if host_tasks is not None else text_array(1, "")
    host_types = host_tasks.type_table() if host_tasks is not None else text_array(0, "")
    dev_names = dev_type_names()
    type_texts = np.concatenate([host_types, dev_names])
    is_mix_type = where_text(type_texts, lambda k: k in MIX_TYPES)
    is_mix_aic = where_text(type_texts, lambda k: k == "KERNEL_MIX_AIC")
    is_compute_type = where_text(type_texts, lambda k: k in COMPUTE_HOST_TYPES)
    stars = chip.family == "stars"
    with_pmu = [rd for rd, dev in devices if dev.tasks.rows and has_pmu(dev, stars)]
    rules = metrics.rules_for(chip.platform)
    columns = list(dict.fromkeys(c for rd in with_pmu for c in pmu_columns(rd, stars, rules)))
    # where the store keeps C++-rule metrics, an iteration export needs the Python rules' (KIT_TASK_PMU_PY)
    py_rules = metrics.iteration_rules(rules) if stars else None
    py_columns: List[str] = []
    if py_rules is not None:
        for rd in with_pmu:
            by_core = metrics.ffts_python_columns({core: metric_group(rd, core) for core in ("aic", "aiv")}, py_rules)
            listed = [f"{core}_{name}" for core, names in by_core.items() for name in names]
            info.append((rd.device_id, "pmu_iteration_columns", ",".join(listed)))
            py_columns += [c for c in listed if c not in py_columns]
    for rd in with_pmu:
        cores = ("aic", "aiv") if stars else ("aic",)
        if not any(metric_group(rd, core)[1] for core in cores):
            where = rd.files.get("sample.json")
            what = f"{where}: names no PMU metrics (ai_core_metrics and ai_core_profiling_events)" if where else \
                f"{rd.path}: no sample.json to name the PMU metrics (ai_core_metrics and ai_core_profiling_events)"
            diag.warn(f"{what}; the PMU metric columns of device {rd.device_id} (all but total_time and "
                      f"total_cycles) are dropped although its PMU records are there")
            continue
        for core in cores:
            group, events = metric_group(rd, core)
            why = metrics.problem(events, group, rules)
            if why is not None:
                where = rd.files.get("sample.json", rd.path)
                setting = "ai_core_metrics" if core == "aic" else "aiv_metrics"
                diag.warn(f"{where}: {setting}: {why}; the {core.upper()} metric columns of device {rd.device_id} "
                          f"(all but total_time and total_cycles) are left out")
    overlaps: List[Overlap] = []
    row = 0
    hccl = HcclDevice(host.hccl) if host is not None and host.hccl is not None else None
    aicpu, memcpy = AicpuTasks(type_texts), MemcpyTasks(type_texts)
    matching = diag.progress.phase(f"{who}: matching device tasks", total=sum(int(dev.tasks.rows) for _, dev in devices),
                                   unit="tasks")
    try:
        for rd, dev in sorted(devices, key=lambda d: d[1].device_id):
            runs = dev.tasks
            if not runs.rows:
                continue
            edges = runs.edges(limits.TASK_ROWS)
            runs.cut(edges)
            entries = host_tasks.entries.get(dev.device_id) if host_tasks is not None else None
            info_clock = _pmu_host_clock(rd, coll)
            if entries is not None:
                entries.cut(edges)
            match = Match(host_tasks.first.pop(dev.device_id, None) if host_tasks is not None else None)
            pmu: Optional[Union[StarsPmu, HwtsPmu]] = None
            if rd in with_pmu:
                pmu = StarsPmu(rd, dev, edges, rules, py_rules, freqs.get(dev.device_id)) if stars \
                    else HwtsPmu(rd, dev, rules)
            overlap = Overlap(runs.folder, dev.device_id)
            overlaps.append(overlap)
            for w in range(len(edges) + 1):
                # (a window without tasks, which ties can leave first, still passes on its entries
                # and PMU records)
                t = device_tasks(dev, runs.window(w))
                n = len(t)
                key = match_keys(t["stream_id"].to_numpy(), t["task_id"].to_numpy(), t["ctx"].to_numpy())
                matched, e = match.window(key, t["start_ns"].to_numpy(), entries.window(w) if entries is not None else None)
                dev_type = t["dev_type"].to_numpy()
                host_type = np.where(matched, e["type"], len(host_types) + dev_type)
                hbatch = np.where(matched, e["batch"], t["batch"].to_numpy())
                gid = gids.ids(np.full(n, dev.device_id), t["stream_id"].to_numpy(), t["task_id"].to_numpy(),
                               t["ctx"].to_numpy(), hbatch)
                rows = np.arange(row, row + n, dtype=np.int64)
                aicpu.take(dev.device_id, host_type, {
                    "stream_id": t["stream_id"].to_numpy(), "task_id": t["task_id"].to_numpy(),
                    "start_ns": t["start_ns"].to_numpy(), "end_ns": t["end_ns"].to_numpy(), "batch": hbatch, "gid": gid})
                memcpy.take(matched, host_type, {"thread_id": e["thread_id"], "ts_ns": e["ts_ns"], "batch": hbatch,
                                                 "task_id": t["task_id"].to_numpy(), "gid": gid})
                row += n
                conn = np.where(matched, e["conn"].astype(np.int64), -1) if hccl is None else hccl.take(
                    dev.device_id, matched, e["conn"], {"gid": gid, "start_ns": t["start_ns"].to_numpy(),
                                                        "end_ns": t["end_ns"].to_numpy(), "ctx": t["ctx"].to_numpy(),
                                                        "row": rows})
                put("TASK", frame_of({
                    "startNs": t["start_ns"].to_numpy(), "endNs": t["end_ns"].to_numpy(), "deviceId": dev.device_id,
                    "connectionId": conn, "globalTaskId": gid, "globalPid": pid,
                    "taskType": strings.ids_of(CodedTexts(host_type, type_texts)), "contextId": t["ctx"].to_numpy(),
                    "streamId": t["stream_id"].to_numpy(), "taskId": t["task_id"].to_numpy(),
                    "modelId": np.where(matched, e["model_id"], NO_MODEL)}), last=False)
                put("KIT_TASK", {
                    "taskRow": rows, "globalTaskId": gid, "batchId": hbatch,
                    "requestId": np.where(matched, e["request_id"].astype(np.int64), -1), "deviceTaskType": CodedTexts(dev_type, dev_names),
                    "kernelName": CodedTexts(np.where(matched, e["kernel"], 0), texts),
                    "threadId": np.where(matched, e["thread_id"].astype(np.int64), -1), "matched": matched.astype(np.int64),
                    "trackNs": np.where(matched, e["ts_ns"].astype(np.int64), -1),
                    "infoNs": _info_ns(info_clock, np.where(matched, e["info_ts"].astype(np.int64), -1))}, last=False)
                if pmu is not None:
                    got = pmu.step(w, {
                        "key": key, "stream_id": t["stream_id"].to_numpy(), "task_id": t["task_id"].to_numpy(),
                        "start": t["start"].to_numpy(), "end": t["end"].to_numpy(), "end_ns": t["end_ns"].to_numpy(),
                        "row": rows, "is_mix": is_mix_type[host_type], "main_aic": is_mix_aic[host_type],
                        "block": e["block"], "mix": e["mix"], "gid": gid}, int(edges[w]) if w < len(edges) else None)
                    if got is not None:
                        put("KIT_TASK_PMU", {"taskRow": got["taskRow"], "globalTaskId": got["globalTaskId"],
                                             **{c: got[c] if c in got else np.full(len(got["taskRow"]), np.nan)
                                                for c in columns}}, last=False)
                    python = pmu.python_part() if isinstance(pmu, StarsPmu) else None
                    if python is not None:
                        put("KIT_TASK_PMU_PY", {"taskRow": python["taskRow"], "globalTaskId": python["globalTaskId"],
                                                **{c: python[c] if c in python else np.full(len(python["taskRow"]), np.nan)
                                                   for c in py_columns}}, last=False)
                is_compute: np.ndarray = np.zeros(n, dtype=bool)
                known = gid < len(compute_ok)
                is_compute[known] = compute_ok[gid[known]]
                overlap.step(t["start_ns"].to_numpy(), t["end_ns"].to_numpy(), is_compute, ~is_compute_type[host_type])
                del t, e, key, matched, host_type, gid
                matching.advance(n)
            if pmu is not None:
                pmu.finish(diag)
            dev.close()
            memory.give_back()
        put("TASK", None, last=True)
        put("KIT_TASK", None, last=True)
        if with_pmu:
            put("KIT_TASK_PMU", None, last=True)
            if py_rules is not None:
                put("KIT_TASK_PMU_PY", None, last=True)
            if stars:  # only these chips carry TASK_PMU_INFO (and its strings) in the unified DB
                for name in columns:
                    strings.id(name)
            info.append((-1, "pmu_prefixed", "1" if stars else "0"))
        matching.close()
        spans = {}
        if hccl is not None and host is not None and host.hccl is not None:
            with diag.progress.phase(f"{who}: communication ops"):
                spans = write_hccl(host.hccl, hccl.frame(), host.hashes, session_ns(coll)[0], strings, put, diag)
        with diag.progress.phase(f"{who}: overlap analysis", total=len(overlaps), unit="devices") as phase:
            next_id = 0
            for overlap in overlaps:
                next_id = overlap.write(next_id, put, spans.get(overlap.device_id))
                phase.advance()
            put("OVERLAP_ANALYSIS", None, last=True)
    finally:
        matching.close()
        for overlap in overlaps:
            overlap.close()
    with diag.progress.phase(f"{who}: AI CPU and memcpy"):
        write_aicpu([(rd, dev.clock) for rd, dev in devices], aicpu, put, diag)
        write_memcpy(coll, memcpy, put, diag)
    _small_tables(coll, chip, devices, put, info, diag, freqs)
    if host is not None and not host.models.empty:
        put("KIT_MODEL", host.models.rename(columns={"model_id": "modelId"}))
    steps = []
    for rd, dev in devices:
        st = dev.step
        if st is not None and len(st["syscnt"]):
            steps.append(frame_of({"deviceId": dev.device_id, "timestampNs": dev.clock.to_ns(st["syscnt"]),
                                   "indexId": st["index_id"], "modelId": st["model_id"],
                                   "streamId": st["stream_id"], "taskId": st["task_id"], "tagId": st["tag_id"]}))
    if steps:
        put("KIT_STEP_TRACE", pd.concat(steps, ignore_index=True))
    if host is not None:
        with diag.progress.phase(f"{who}: operator memory"):
            write_op_memory(coll, host.hashes, pid, session_ns(coll)[0], strings, put, diag)
    if coll.host is not None:
        info += write_msproftx(coll.host, coll, host.hashes if host is not None else HashTable(), strings, put, diag)
    with diag.progress.phase(f"{who}: device memory"):
        write_memory(coll, coll.devices, strings, put, diag)
    put("STRING_IDS", strings.frame())


def _small_tables(coll: Collection, chip: Chip, devices: List[Tuple[ResultDir, DeviceData]], put: TableSink,
                  info: InfoRows, diag: Diagnostics, freqs: Dict[int, Optional[FreqChanges]]) -> None:
    start, end = session_ns(coll)
    put("SESSION_TIME_INFO", frame_of({"startTimeNs": [start], "endTimeNs": [end]}))
    info_dir = coll.host or (coll.devices[0] if coll.devices else None)
    host_name = str(info_dir.info.get("hostname", "")) if info_dir else ""
    host_uid = str(info_dir.info.get("hostUid", "0")) if info_dir else "0"
    put("HOST_INFO", frame_of({"hostUid": [host_uid or "0"], "hostName": [host_name]}))
    if coll.devices:
        put("NPU_INFO", frame_of({"id": [rd.device_id for rd in coll.devices],
                                  "name": [NPU_NAMES.get(chip.platform, "Unknown")] * len(coll.devices)}))
        put("RANK_DEVICE_MAP", frame_of({"rankId": [rank_of(rd, coll, diag) for rd in coll.devices],
                                         "deviceId": [rd.device_id for rd in coll.devices]}))
    else:
        put("NPU_INFO", frame_of({"id": [-1], "name": ["UNKNOWN"]}))
        put("RANK_DEVICE_MAP", frame_of({"rankId": [-1], "deviceId": [-1]}))
    for rd in coll.result_dirs():
        problem = end_info_problem(rd)
        if problem is not None and start:
            diag.warn(f"{problem}; the collection's end is taken from another end_info, or its start plus 30 "
                      "minutes (the reference's default), so the end of the session and of the AI Core frequency "
                      "line may be wrong")
    if chip.platform in (5, 7):
        clocks = {dev.device_id: dev.clock for _, dev in devices}
        rows = [freq_rows(rd.device_id, nominal_mhz(rd), freqs.get(rd.device_id), clocks.get(rd.device_id), (start, end),
                          str(rd.end_info.get("collectionTimeEnd", "") or "").isdigit()) for rd in coll.devices]
        if rows:
            put("AICORE_FREQ", pd.concat(rows, ignore_index=True))
    for rd in coll.result_dirs():
        device_info_rows(rd, info, SAMPLE_KEYS + ("ai_core_profiling_mode",))
    info.append((-1, "platform_version", str(chip.platform)))
    info.append((-1, "chip", chip.name))
    info.append((-1, "collection", coll.path))
