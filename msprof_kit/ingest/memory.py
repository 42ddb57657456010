"""Device memory samples into the store (formats_more.md §2.1-§2.2): `npu_mem.data` / `npu_mem.app`
into NPU_MEM, `npu_module_mem.data` into NPU_MODULE_MEM, read a chunk of records at a time
(streams.RecordStream) and handed to the store's writer as table parts, so a stream of any length
costs one chunk of memory.

Times, as the reference computes them:
  * npu_mem: µs since the device start, placed by the Python parser's float arithmetic
    (common_func/info_conf_reader.py:441): ts·1000 + dev_start.log's clock_monotonic_raw + the
    host/device monotonic delta (s, as a float) ·1e9 + start_info's local offset (µs, as a float)
    ·1000, truncated to int ns. The C++ path reads those ns back, so both print them (a float64
    near 1.7e18 has 256-ns steps: `...000999.936` for the sample at 1 ms).
  * npu_module_mem: host counter ticks through the device dir's host_start.log.N and info.json's
    CPU frequency (viewer/npu_mem/npu_module_mem_viewer.py:70, npu_module_mem_processor.cpp:113).

Rows are kept in file order (the reference sorts neither); as the C++ path
(data_processor.h FilterDataByStartTime) samples before the collection start are dropped."""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np

from ..errors import Diagnostics, MsprofKitError
from ..layout import Collection, ResultDir, data_files
from ..parsers import memory
from .clocks import control_times, host_clock_of
from .columns import frame_of
from .sink import TableSink
from .streams import RecordStream
from .tasks import StringPool

SAMPLE_CHUNK_BYTES = 8 << 20   # a chunk of 256k npu_mem samples: decoded, timed and handed to the writer
NPU_MEM_KINDS = ("npu_mem.data", "npu_mem.app")   # the order the reference's tables hold them in
NPU_MODULE_MEM_KIND = "npu_module_mem.data"


class _Counts:
    """What a stream's samples lost or did, counted over its chunks."""

    def __init__(self) -> None:
        self.early = 0       # before the collection start: dropped
        self.backwards = 0   # earlier than the sample before them: kept
        self.rows = 0
        self.last: Optional[int] = None

    def step(self, ns: np.ndarray, start: int) -> np.ndarray:
        """Count a chunk's samples (ns, in file order); the mask of those kept."""
        if len(ns):
            prev: np.ndarray = np.empty(len(ns), dtype=np.int64)
            prev[0] = ns[0] if self.last is None else self.last
            prev[1:] = ns[:-1]
            self.backwards += int(np.count_nonzero(ns < prev))
            self.last = int(ns[-1])
        keep = ns >= start if start else np.ones(len(ns), dtype=bool)
        self.early += len(ns) - int(np.count_nonzero(keep))
        self.rows += int(np.count_nonzero(keep))
        return keep

    def report(self, what: str, where: str, diag: Diagnostics) -> None:
        if self.early:
            diag.warn(f"{where}: {self.early} {what} samples before the collection start (start_info); dropped, as "
                      f"the reference's C++ path does")
        if self.backwards:
            diag.warn(f"{where}: {self.backwards} {what} samples earlier than the sample before them (time going "
                      f"backwards); kept in file order, as the reference keeps them")


def npu_mem_ns(timestamp_us: np.ndarray, rd: ResultDir, coll: Collection) -> np.ndarray:
    """Local ns of npu_mem timestamps (µs since the device start), with the Python parser's float
    arithmetic (see the module docstring); the device's dev_start.log.N and host_start.log.N must
    give clock_monotonic_raw (`_npu_mem_missing`)."""
    start_log = int(rd.dev_start["clock_monotonic_raw"])
    host_mon_s = float(rd.host_start["clock_monotonic_raw"]) / 1e9
    delta_s = host_mon_s - start_log / 1e9
    info = rd.start_info if rd.start_info.get("collectionTimeBegin") not in (None, "") else next(
        (o.start_info for o in coll.result_dirs() if o.start_info.get("collectionTimeBegin") not in (None, "")), {})
    offset_us = float(str(info.get("collectionTimeBegin", 0))) - float(str(info.get("clockMonotonicRaw", 0))) / 1000
    whole: np.ndarray = timestamp_us.astype(np.int64) * 1000 + start_log
    total = whole.astype(np.float64) + delta_s * 1e9
    total += offset_us * 1000
    return np.trunc(total).astype(np.int64)


def _npu_mem_missing(rd: ResultDir) -> Optional[str]:
    """Why a device's npu_mem times cannot be placed, or None."""
    if "clock_monotonic_raw" not in rd.dev_start:
        return "no dev_start.log.N with clock_monotonic_raw (the device start the samples count from)"
    if "clock_monotonic_raw" not in rd.host_start:
        return "no host_start.log.N with clock_monotonic_raw"
    return None


def _streams(rd: ResultDir) -> Dict[str, List[str]]:
    """The device's memory slice files by kind (listing warnings are the device loader's)."""
    files = data_files(rd, Diagnostics())
    return {kind: files[(kind, "")] for kind in (*NPU_MEM_KINDS, NPU_MODULE_MEM_KIND) if (kind, "") in files}


def write_memory(coll: Collection, devices: Sequence[ResultDir], strings: StringPool, put: TableSink,
                 diag: Diagnostics, chunk_bytes: Optional[int] = None) -> None:
    """NPU_MEM (all devices, then closed), then NPU_MODULE_MEM, a chunk of records at a time. The
    strings 'app' and 'device' (NPU_MEM.type) enter STRING_IDS with the first sample, as the
    reference's C++ writer adds both. `chunk_bytes`: bytes of records read at a time
    (SAMPLE_CHUNK_BYTES by default)."""
    chunk_bytes = SAMPLE_CHUNK_BYTES if chunk_bytes is None else chunk_bytes
    start = control_times(coll.result_dirs())[0]
    found = [(rd, _streams(rd)) for rd in sorted(devices, key=lambda r: r.device_id)]
    mem_rows = 0
    for rd, streams in found:
        kinds = [k for k in NPU_MEM_KINDS if k in streams]
        missing = _npu_mem_missing(rd) if kinds else None
        if missing is not None:
            diag.warn(f"{rd.path}: {missing}; its npu_mem samples are not read")
            continue
        version = str(rd.info.get("version", "1.0"))
        for kind in kinds:
            stream = RecordStream(memory.NPU_MEM, streams[kind], *memory.NPU_MEM_VALID, chunk_bytes=chunk_bytes)
            counts = _Counts()
            for arr, _ in stream.chunks():
                cols = memory.npu_mem_columns(arr, version)
                ns = npu_mem_ns(cols["timestamp"], rd, coll)
                keep = counts.step(ns, start)
                if not keep.any():
                    continue
                app, device = strings.id("app"), strings.id("device")
                put("NPU_MEM", frame_of({
                    "type": np.where(cols["event"][keep] == memory.EVENT_APP, app, device),
                    "ddr": cols["ddr"][keep], "hbm": cols["hbm"][keep], "timestampNs": ns[keep],
                    "deviceId": np.full(int(np.count_nonzero(keep)), rd.device_id, dtype=np.int64)}), last=False)
                del cols, ns, keep
            diag.extend(stream.issues)
            counts.report(kind, streams[kind][0], diag)
            mem_rows += counts.rows
    if mem_rows:
        put("NPU_MEM", None, last=True)
    module_rows = 0
    for rd, streams in found:
        if NPU_MODULE_MEM_KIND not in streams:
            continue
        try:
            clock = host_clock_of(rd, coll, Diagnostics())
        except MsprofKitError as exc:
            diag.warn(f"{rd.path}: {exc}; its npu_module_mem samples are not read")
            continue
        paths = streams[NPU_MODULE_MEM_KIND]
        stream = RecordStream(memory.NPU_MODULE_MEM, paths, *memory.NPU_MODULE_MEM_VALID, chunk_bytes=chunk_bytes)
        counts = _Counts()
        reversed_sizes = 0
        for arr, _ in stream.chunks():
            cols = memory.npu_module_mem_columns(arr)
            ns = clock.to_ns(cols["syscnt"])
            keep = counts.step(ns, start)
            reversed_sizes += int(np.count_nonzero(cols["total_size"][keep] < 0))
            if keep.any():
                put("NPU_MODULE_MEM", frame_of({
                    "moduleId": cols["module_id"][keep], "timestampNs": ns[keep],
                    "totalReserved": cols["total_size"][keep],
                    "deviceId": np.full(int(np.count_nonzero(keep)), rd.device_id, dtype=np.int64)}), last=False)
        diag.extend(stream.issues)
        counts.report(NPU_MODULE_MEM_KIND, paths[0], diag)
        if reversed_sizes:
            diag.warn(f"{paths[0]}: {reversed_sizes} npu_module_mem samples with a total size beyond 2^63 - 1 bytes "
                      f"(a negative size written unsigned); kept as -1, as the reference does")
        module_rows += counts.rows
    if module_rows:
        put("NPU_MODULE_MEM", None, last=True)
