"""Latency statistics and throughput (spec/collectors.md §5.6), the results of a run, and the
summary text printed after it."""
from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np

from ..emulator import ANNOUNCEMENT
from .plan import DUMP, DUMP_DIR, PROFILER

SUMMARY_HEADER = "-----------------Performance Summary------------------"
SUMMARY_FOOTER = "-" * 54


# --- statistics (§5.6) --------------------------------------------------------------------------
@dataclass(frozen=True)
class LatencyStats:
    """min, max, mean, median and the 99th percentile (numpy's linear interpolation) of a list of
    times in ms, and how many there were. An empty list gives zeros."""

    min: float
    max: float
    mean: float
    median: float
    p99: float
    count: int

    def as_json(self) -> Dict[str, Union[float, int]]:
        """The summary-file form, under ais_bench's key names."""
        return {"min": self.min, "max": self.max, "mean": self.mean, "median": self.median,
                "percentile(99%)": self.p99, "count": self.count}


def latency_stats(values: Sequence[float]) -> LatencyStats:
    """LatencyStats of `values` (ms)."""
    if len(values) == 0:
        return LatencyStats(0.0, 0.0, 0.0, 0.0, 0.0, 0)
    a = np.asarray(values, dtype=np.float64)
    return LatencyStats(float(a.min()), float(a.max()), float(a.mean()), float(np.median(a)),
                        float(np.percentile(a, 99)), int(a.size))


def throughput(batch: Union[int, float], mean_ms: float) -> float:
    """Inferences per second: 1000 * batch / mean NPU compute time (ms); 0 when the mean is 0."""
    return 0.0 if mean_ms == 0 else 1000.0 * batch / mean_ms


# --- results ------------------------------------------------------------------------------------
@dataclass
class DeviceResult:
    """One device's run. The lists are ms per measured inference (warm-up runs excluded);
    h2d / d2h stay empty when nothing was copied (the emulator has no device memory).
    `filesinfo` maps the sample index to its input and output files."""

    device: int
    batch: Union[int, float]
    npu_compute_time_list: List[float] = field(default_factory=list)
    h2d_latency_list: List[float] = field(default_factory=list)
    d2h_latency_list: List[float] = field(default_factory=list)
    filesinfo: Dict[int, Dict[str, List[str]]] = field(default_factory=dict)
    out_dir: Optional[str] = None
    summary_path: Optional[str] = None

    @property
    def npu_compute_time(self) -> LatencyStats:
        """Statistics of the measured inferences' NPU compute times (ms)."""
        return latency_stats(self.npu_compute_time_list)

    @property
    def h2d_latency(self) -> LatencyStats:
        """Statistics of the host-to-device input copies (ms)."""
        return latency_stats(self.h2d_latency_list)

    @property
    def d2h_latency(self) -> LatencyStats:
        """Statistics of the device-to-host output copies (ms)."""
        return latency_stats(self.d2h_latency_list)

    @property
    def throughput(self) -> float:
        """Inferences per second: 1000 * batch / the mean NPU compute time (ms)."""
        return throughput(self.batch, self.npu_compute_time.mean)

    def summary_json(self, args: Sequence[str], emulated: bool) -> Dict[str, Any]:
        """The `*_summary.json` content: ais_bench's keys (§5.6), plus `device`, `batchsize` and
        `emulated`, which are msprof-kit's."""
        return {
            "filesinfo": {str(k): v for k, v in self.filesinfo.items()},
            "args": list(args),
            "NPU_compute_time": self.npu_compute_time.as_json(),
            "H2D_latency": self.h2d_latency.as_json(),
            "D2H_latency": self.d2h_latency.as_json(),
            "throughput": self.throughput,
            "npu_compute_time_list": list(self.npu_compute_time_list),
            "pid": os.getpid(),
            "device": self.device,
            "batchsize": self.batch,
            "emulated": emulated,
        }


@dataclass
class InferResult:
    """What `infer` did.

    `mode`: PLAIN, ACL_JSON, PROFILER or DUMP. `profiler_via`: "msprof" or "acl.json" for PROFILER
    (`why_not_msprof` says why acl.json). `devices`: one DeviceResult per device of this process
    (empty when msprof ran the inference: its summary files are in `summary_files`). `run_dir`: the
    dated (or named) result folder. `acl_json`: the file given to acl.init. `prof_dirs`: the new
    PROF_xxx directories. `msprof_command`: the argv msprof was started with. `args`: the options
    as the command line spells them."""

    mode: str
    emulated: bool
    devices: List[DeviceResult] = field(default_factory=list)
    output: Optional[str] = None
    run_dir: Optional[str] = None
    summary_files: List[str] = field(default_factory=list)
    acl_json: Optional[str] = None
    prof_dirs: List[str] = field(default_factory=list)
    profiler_via: Optional[str] = None
    why_not_msprof: str = ""
    msprof_command: Optional[List[str]] = None
    returncode: int = 0
    display_all: bool = False
    args: List[str] = field(default_factory=list)


def _stat_line(name: str, s: LatencyStats) -> str:
    return (f"[INFO] {name} (ms): min = {s.min}, max = {s.max}, mean = {s.mean}, median = {s.median}, "
            f"percentile(99%) = {s.p99}")


def _batch_text(batch: Union[int, float]) -> str:
    return str(int(batch)) if float(batch).is_integer() else str(batch)


def render_summary(result: InferResult) -> str:
    """The text to print after a run: ais_bench's performance summary per device (H2D and D2H only
    with display_all), then where things were written. Starts with an EMULATED line when the
    emulator ran the model."""
    lines: List[str] = []
    if result.emulated:
        lines.append(f"[WARNING] {ANNOUNCEMENT}; the times below are the emulator's sleeps, not a model's")
    if result.msprof_command is not None:
        lines.append(f"[INFO] msprof ran the inference: {shlex.join(result.msprof_command)}")
        lines.append(f"[INFO] msprof exit status: {result.returncode}")
    for dev in result.devices:
        if len(result.devices) > 1:
            lines.append(f"[INFO] device {dev.device}")
        lines.append(f"[INFO] {SUMMARY_HEADER}")
        if result.display_all:
            lines.append(_stat_line("H2D_latency", dev.h2d_latency))
        npu = dev.npu_compute_time
        lines.append(_stat_line("NPU_compute_time", npu))
        if result.display_all:
            lines.append(_stat_line("D2H_latency", dev.d2h_latency))
        lines.append(f"[INFO] throughput 1000*batchsize.mean({_batch_text(dev.batch)})/"
                     f"NPU_compute_time.mean({npu.mean}): {dev.throughput}")
        lines.append(f"[INFO] {SUMMARY_FOOTER}")
    if result.run_dir is not None:
        lines.append(f"[INFO] results: {result.run_dir}")
    for path in result.summary_files:
        lines.append(f"[INFO] summary: {path}")
    if result.mode == PROFILER and result.profiler_via == "acl.json" and result.emulated:
        # the emulator's PROF_xxx holds control files and empty data/ folders, no records: nothing
        # for `import` to parse, so no command is suggested (docs/collectors.md)
        lines.append(f"[INFO] profiling through {result.acl_json} ({result.why_not_msprof}); the emulator's "
                     "PROF_xxx is synthetic and holds no profiling records, so there is nothing to import")
    elif result.mode == PROFILER and result.profiler_via == "acl.json":
        lines.append(f"[INFO] profiling through {result.acl_json} ({result.why_not_msprof}); the raw data is "
                     "not parsed: `msprof-kit import -dir <PROF dir>` parses it")
    for path in result.prof_dirs:
        lines.append(f"[INFO] profiling data: {path}")
    if result.mode == DUMP and result.output is not None:
        lines.append(f"[INFO] dump data: {os.path.join(result.output, DUMP_DIR)} (through {result.acl_json})")
    return "\n".join(lines) + "\n"
