"""AI Core / AI Vector Core PMU metrics from raw counters (device_formats.md §4.3-§4.4).

`metric_columns(events, group)` gives the column list of a metric group; `compute(...)` the
values, vectorized over tasks. Times are returned in ns (the unified DB's unit), ratios
as fractions, cycles as counts. Values are not rounded.
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import numpy as np

EVENT_NAMES: Dict[int, str] = {
    0x8: "vec_ratio", 0xa: "mac_ratio", 0x9: "scalar_ratio", 0xb: "mte1_ratio", 0xc: "mte2_ratio",
    0xd: "mte3_ratio", 0xf: "l2_read_bw", 0x10: "l2_write_bw", 0x12: "main_mem_read_bw",
    0x13: "main_mem_write_bw", 0x15: "ub_read_bw", 0x16: "ub_write_bw", 0x1b: "l0a_read_bw",
    0x1c: "l0a_write_bw", 0x21: "l0b_read_bw", 0x22: "l0b_write_bw", 0x27: "l0c_read_bw",
    0x29: "l0c_write_bw", 0x28: "l0c_read_bw_cube", 0x2a: "l0c_write_bw_cube", 0x31: "l1_read_bw",
    0x32: "l1_write_bw", 0x37: "ub_read_bw_scalar", 0x38: "ub_write_bw_scalar", 0x3a: "scalar_ld_ratio",
    0x3b: "scalar_st_ratio", 0x3d: "ub_read_bw_mte", 0x3e: "ub_write_bw_mte", 0x43: "ub_read_bw_vector",
    0x44: "ub_write_bw_vector", 0x49: "mac_fp16_ratio", 0x4a: "mac_int8_ratio", 0x4b: "vec_fp32_ratio",
    0x4c: "vec_fp16_128lane_ratio", 0x4d: "vec_fp16_64lane_ratio", 0x4e: "vec_int32_ratio",
    0x4f: "vec_misc_ratio", 0x54: "icache_req_ratio", 0x55: "icache_miss_rate",
    0x57: "scalar_waitflag_ratio", 0x58: "cube_waitflag_ratio", 0x59: "vector_waitflag_ratio",
    0x5a: "mte1_waitflag_ratio", 0x5b: "mte2_waitflag_ratio", 0x5c: "mte3_waitflag_ratio",
    0x64: "vec_bankgroup_cflt_ratio", 0x65: "vec_bank_cflt_ratio", 0x66: "vec_resc_cflt_ratio",
    0x6b: "mte1_iq_full_ratio", 0x6c: "mte2_iq_full_ratio", 0x6d: "mte3_iq_full_ratio",
    0x6e: "cube_iq_full_ratio", 0x6f: "vec_iq_full_ratio", 0x12c: "vec_exe_ratio",
    0x302: "mte1_ratio_extra", 0x303: "fixpipe_ratio", 0x416: "mac_fp_ratio", 0x417: "mac_int_ratio",
    0x500: "write_cache_hit", 0x502: "write_cache_miss_allocate", 0x504: "r0_read_cache_hit",
    0x506: "r0_read_cache_miss_allocate", 0x508: "r1_read_cache_hit", 0x50a: "r1_read_cache_miss_allocate",
}

PIPE_GROUPS = {"PipeUtilization", "PipeUtilizationExct", "PipelineExecuteUtilization", "ScalarRatio"}
PIPE_VALID = {"mac_exe_ratio", "vec_exe_ratio", "vec_ratio", "mte2_ratio", "scalar_exe_ratio", "mac_ratio_extra",
              "mte1_ratio_extra", "mte1_exe_ratio", "fixpipe_exe_ratio", "mte2_exe_ratio", "mte3_exe_ratio",
              "scalar_ratio", "fixpipe_ratio", "mte1_ratio", "mte3_ratio", "mac_ratio"}
# bandwidth factor P*S per metric (C++ calculators)
BANDWIDTH: Dict[str, int] = {
    "ub_read_bw": 256 * 4, "ub_write_bw": 256 * 4, "l1_read_bw": 256 * 16, "l1_write_bw": 128 * 8,
    "l2_read_bw": 256 * 8, "l2_write_bw": 256 * 8, "main_mem_read_bw": 8 * 8, "main_mem_write_bw": 8 * 8,
    "l0a_read_bw": 256 * 16, "l0a_write_bw": 256 * 16, "l0b_read_bw": 256 * 16, "l0b_write_bw": 256 * 8,
    "l0c_read_bw": 256 * 8, "l0c_write_bw": 256 * 8, "l0c_read_bw_cube": 256 * 32, "l0c_write_bw_cube": 256 * 32,
    "ub_read_bw_vector": 128 * 2, "ub_write_bw_vector": 128 * 2, "ub_read_bw_scalar": 128,
    "ub_write_bw_scalar": 128, "ub_read_bw_mte": 128, "ub_write_bw_mte": 128,
}
RAW_COUNT_GROUPS = {"L2Cache"}
MAC_SPLIT = ("mac_fp_ratio", "mac_int_ratio")


def parse_events(text: object) -> List[int]:
    """sample.json event list '0x8,0xa,...' → ints (unparsable entries are skipped)."""
    out: List[int] = []
    for part in str(text or "").split(","):
        part = part.strip()
        if part:
            try:
                out.append(int(part, 16))
            except ValueError:
                continue
    return out


def _plan(events: Sequence[int], group: str) -> List[Tuple[str, Tuple[int, ...]]]:
    """(metric name, counter indexes it reads) in column order, before the time columns."""
    plan: List[Tuple[str, Tuple[int, ...]]] = []
    names = [EVENT_NAMES.get(e, f"r{e:x}") for e in events]
    mac_idx = tuple(i for i, n in enumerate(names) if n in MAC_SPLIT)
    for i, name in enumerate(names):
        if name in MAC_SPLIT:
            if i == mac_idx[0]:
                plan.append(("mac_ratio_extra", mac_idx))
            continue
        if name == "icache_req_ratio":
            continue
        if name == "icache_miss_rate":
            req = tuple(j for j, n in enumerate(names) if n == "icache_req_ratio")
            plan.append((name, (i,) + req))
            continue
        plan.append((name, (i,)))
    return plan


def metric_columns(events: Sequence[int], group: str) -> List[str]:
    """Column names of a group as the unified DB lists them (after total_time, total_cycles)."""
    cols: List[str] = []
    pipe = group in PIPE_GROUPS
    for name, _ in _plan(events, group):
        if pipe and name in PIPE_VALID:
            base = name[: -len("_ratio_extra")] if name.endswith("_ratio_extra") else name[: -len("_ratio")]
            cols.append(f"{base}_time")
        cols.append(name[: -len("_extra")] if name.endswith("_extra") else name)
    return ["total_time", "total_cycles"] + cols


def compute(events: Sequence[int], group: str, cycles: np.ndarray, counters: np.ndarray,
            blocks: np.ndarray, cores: int, freq_hz: np.ndarray) -> Dict[str, np.ndarray]:
    """Metric values per task (columns of `metric_columns`), times in ns.

    cycles: total_cycle per task; counters: (n, 8) raw counters in event order; blocks: block
    count used for the time (block_num, or mix_block_num for the secondary core of a MIX op);
    cores: AI Core (or vector core) count; freq_hz: AI Core frequency per task.
    """
    cyc = cycles.astype(np.float64)
    n = len(cyc)
    b = blocks.astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ceil = (b + cores - 1) // cores if cores else np.zeros(n, np.int64)
        total_us = np.where((b > 0) & (cores > 0) & (freq_hz > 0),
                            cyc * 1e6 / freq_hz / np.where(b > 0, b, 1) * ceil, 0.0)
    out: Dict[str, np.ndarray] = {"total_time": total_us * 1000.0, "total_cycles": cycles.astype(np.int64)}
    pipe = group in PIPE_GROUPS
    safe = np.where(cyc > 0, cyc, 1.0)
    for name, idx in _plan(events, group):
        raw = [counters[:, i].astype(np.float64) for i in idx if i < counters.shape[1]]
        if name == "icache_miss_rate":
            miss = raw[0]
            req = raw[1] if len(raw) > 1 else np.zeros(n)
            value = np.where((cyc > 0) & (miss > 0) & (req > 0), (miss / safe) / np.where(req > 0, req / safe, 1.0), 0.0)
        elif group in RAW_COUNT_GROUPS:
            value = raw[0]
        elif name in BANDWIDTH:
            freq = freq_hz.astype(np.float64)
            value = np.where((cyc > 0) & (freq > 0), raw[0] * BANDWIDTH[name] / (cyc / np.where(freq > 0, freq, 1))
                             / 2 ** 33, 0.0)
        else:
            value = np.where(cyc > 0, sum(r / safe for r in raw), 0.0)
        label = name[: -len("_extra")] if name.endswith("_extra") else name
        if pipe and name in PIPE_VALID:
            base = name[: -len("_ratio_extra")] if name.endswith("_ratio_extra") else name[: -len("_ratio")]
            out[f"{base}_time"] = total_us * value * 1000.0
        out[label] = value
    return out
