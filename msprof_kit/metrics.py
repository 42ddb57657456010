"""AI Core / AI Vector Core PMU metrics from raw counters (device_formats.md §4.3-§4.5).

A metric group (sample.json `ai_core_metrics` / `aiv_metrics`) names a fixed list of columns;
the counters are read by event id from the group's event list (`ai_core_profiling_events` /
`aiv_profiling_events`: counter i of a record holds event i). Two rule sets, as the reference's
two code paths compute them:

* `Rules("cpp")` (910B, whose CANN install parses the device data in C++): one table per group,
  `CPP_GROUPS`, in the column order of its header; the group's events must all be in the list,
  else the group is not computed (`problem` says why).
* `Rules("python")` (the other chips): the group's metric list (`PY_GROUPS`) with a pipe time before
  each ratio of a pipe group and the fops after ArithmeticUtilization's ratios, less the columns the
  Python path drops (icache requests, the two fp16 lane ratios, L2 read/write and the MTE pair when
  both halves are there); values from the events as named by `EVENT_NAMES`, with the Python path's
  bandwidth factors `PY_BANDWIDTH`.

A `Custom:` group (`ai_core_metrics` "Custom:0x8,0x9,...") has one column per event, `r<hex>`,
holding the raw counter, on every chip (the reference parses such collections in Python only);
its total_time is the Python path's, rounded to 0.01 µs.

`metric_columns` gives a group's column names (store names, without the aic_/aiv_ prefix), `compute`
their values, vectorized over tasks. Times are in ns (the unified DB's unit), ratios fractions,
bandwidths GB/s, data sizes KB, cycles and raw counters counts. Values are not rounded otherwise.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np

from .arrays import py_round_units

#: Event id → metric name (the Python path's event2metric table, device_formats.md §4.3).
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

BW_SCALE = 2.0 ** 33   # bandwidths: bytes per second / 2^33
PMU_SLOTS = 8          # counters per PMU record

# How a column derives from its counters r (summed when it reads several), cyc (total cycles),
# the group's weight w, f (aic_frequency, Hz) and T (the task's total time):
RATIO = "ratio"    # r / cyc (0 when cyc is 0)
TIME = "time"      # T · r / cyc
MISS = "miss"      # (r[0] / cyc) / (r[1] / cyc), 0 when any of them is 0
BW = "bw"          # r · w / (cyc / f) / 2^33 (0 when cyc or f is 0)
COUNT = "count"    # r, the raw counter
FOPS = "fops"      # Σ r[i] · w[i] (0 when cyc is 0)
DATA = "data"      # w · (r[0] − r[1] − …), no cycles involved
DATA_SUM = "data_sum"  # w · Σ r

# PipeUtilization's column for events 0x8..0xd, pairs (time, ratio) in header order
_PIPE = (("vec", 0x8), ("mac", 0xa), ("scalar", 0x9), ("mte1", 0xb), ("mte2", 0xc), ("mte3", 0xd))
_PIPE_EXCT = (("mac", (0x416, 0x417)), ("scalar", (0x9,)), ("mte1", (0x302,)), ("mte2", (0xc,)),
              ("fixpipe", (0x303,)))


@dataclass(frozen=True)
class Column:
    """One metric column of a group (C++ rules)."""

    name: str                       #: store name, without the aic_/aiv_ prefix
    kind: str                       #: RATIO, TIME, MISS, BW, COUNT, FOPS, DATA or DATA_SUM
    events: Tuple[int, ...]         #: the counters it reads
    weights: Tuple[float, ...] = (1.0,)  #: BW: the factor; FOPS: one per event; DATA*: the factor


def _bw(name: str, event: int, factor: float) -> Column:
    return Column(name, BW, (event,), (factor,))


def _fops_vector(v3: bool) -> Column:
    lanes = (128.0, 64.0, 64.0, 16.0, 16.0) if v3 else (128.0, 64.0, 64.0, 64.0, 32.0)
    return Column("vector_fops", FOPS, (0x4c, 0x4d, 0x4b, 0x4e, 0x4f), lanes)


@functools.lru_cache(maxsize=None)
def _cpp_groups(v3: bool) -> Dict[str, Tuple[Column, ...]]:
    """The C++ path's metric calculators: per group its columns in header order (device_formats.md
    §4.4, C++ column of the bandwidth table; the fops lane weights of chips V3 differ)."""
    miss = Column("icache_miss_rate", MISS, (0x55, 0x54))
    return {
        "PipeUtilization": tuple(c for base, e in _PIPE for c in (Column(f"{base}_time", TIME, (e,)),
                                                                   Column(f"{base}_ratio", RATIO, (e,)))) + (miss,),
        "PipeUtilizationExct": tuple(c for base, e in _PIPE_EXCT for c in (Column(f"{base}_time", TIME, e),
                                                                           Column(f"{base}_ratio", RATIO, e)))
        + (miss,),
        "ArithmeticUtilization": (
            Column("mac_fp16_ratio", RATIO, (0x49,)), Column("mac_int8_ratio", RATIO, (0x4a,)),
            Column("vec_fp32_ratio", RATIO, (0x4b,)), Column("vec_fp16_ratio", RATIO, (0x4c, 0x4d)),
            Column("vec_int32_ratio", RATIO, (0x4e,)), Column("vec_misc_ratio", RATIO, (0x4f,)),
            Column("cube_fops", FOPS, (0x49, 0x4a), (8192.0, 16384.0)), _fops_vector(v3)),
        "Memory": (
            _bw("ub_read_bw", 0x15, 256 * 4), _bw("ub_write_bw", 0x16, 256 * 4),
            _bw("l1_read_bw", 0x31, 256 * 16), _bw("l1_write_bw", 0x32, 128 * 8),
            _bw("main_mem_read_bw", 0x12, 8 * 8), _bw("main_mem_write_bw", 0x13, 8 * 8),
            _bw("l2_read_bw", 0xf, 256 * 8), _bw("l2_write_bw", 0x10, 256 * 8)),
        "MemoryL0": (
            _bw("l0a_read_bw", 0x1b, 256 * 16), _bw("l0a_write_bw", 0x1c, 256 * 16),
            _bw("l0b_read_bw", 0x21, 256 * 16), _bw("l0b_write_bw", 0x22, 256 * 8),
            _bw("l0c_read_bw", 0x27, 256 * 8), _bw("l0c_write_bw", 0x29, 256 * 8),
            _bw("l0c_read_bw_cube", 0x28, 256 * 32), _bw("l0c_write_bw_cube", 0x2a, 256 * 32)),
        "ResourceConflictRatio": (
            Column("vec_bankgroup_cflt_ratio", RATIO, (0x64,)), Column("vec_bank_cflt_ratio", RATIO, (0x65,)),
            Column("vec_resc_cflt_ratio", RATIO, (0x66,))),
        "MemoryUB": (
            _bw("ub_read_bw_vector", 0x43, 128 * 2), _bw("ub_write_bw_vector", 0x44, 128 * 2),
            _bw("ub_read_bw_scalar", 0x37, 128), _bw("ub_write_bw_scalar", 0x38, 128)),
        "L2Cache": tuple(Column(EVENT_NAMES[e], COUNT, (e,)) for e in (0x500, 0x502, 0x504, 0x506, 0x508, 0x50a)),
        "MemoryAccess": (
            Column("read_main_memory_datas", DATA_SUM, (0x50d, 0x50e), (0.125,)),
            Column("write_main_memory_datas", DATA_SUM, (0x50c,), (0.125,)),
            Column("GM_to_L1_datas", DATA, (0x32, 0x206), (0.25,)),
            Column("L0C_to_L1_datas", DATA_SUM, (0x206,), (0.125,)),
            Column("L0C_to_GM_datas", DATA, (0x20c, 0x206), (0.125,)),
            Column("GM_to_UB_datas", DATA_SUM, (0x3e,), (0.125,)),
            Column("UB_to_GM_datas", DATA_SUM, (0x3d,), (0.125,))),
    }


#: The Python path's metric list per group (before pipe times, fops and the dropped columns).
PY_GROUPS: Dict[str, Tuple[str, ...]] = {
    "PipeUtilization": ("vec_ratio", "mac_ratio", "scalar_ratio", "mte1_ratio", "mte2_ratio", "mte3_ratio",
                        "icache_miss_rate"),
    "PipeUtilizationExct": ("mac_ratio_extra", "scalar_ratio", "mte1_ratio_extra", "mte2_ratio", "fixpipe_ratio",
                            "icache_miss_rate"),
    "ArithmeticUtilization": ("mac_fp16_ratio", "mac_int8_ratio", "vec_fp32_ratio", "vec_fp16_ratio",
                              "vec_int32_ratio", "vec_misc_ratio"),
    "Memory": ("ub_read_bw", "ub_write_bw", "l1_read_bw", "l1_write_bw", "l2_read_bw", "l2_write_bw",
               "main_mem_read_bw", "main_mem_write_bw"),
    "MemoryL0": ("l0a_read_bw", "l0a_write_bw", "l0b_read_bw", "l0b_write_bw", "l0c_read_bw", "l0c_write_bw",
                 "l0c_read_bw_cube", "l0c_write_bw_cube"),
    "ResourceConflictRatio": ("vec_bankgroup_cflt_ratio", "vec_bank_cflt_ratio", "vec_resc_cflt_ratio"),
    "MemoryUB": ("ub_read_bw_mte", "ub_write_bw_mte", "ub_read_bw_vector", "ub_write_bw_vector",
                 "ub_read_bw_scalar", "ub_write_bw_scalar"),
    "L2Cache": ("write_cache_hit", "write_cache_miss_allocate", "r0_read_cache_hit", "r0_read_cache_miss_allocate",
                "r1_read_cache_hit", "r1_read_cache_miss_allocate"),
}
#: Groups whose ratios get a pipe time (`<base>_time` = total time × ratio), and the ratios that do.
PIPE_GROUPS = {"PipeUtilization", "PipeUtilizationExct", "PipelineExecuteUtilization", "ScalarRatio"}
PIPE_VALID = {"mac_exe_ratio", "vec_exe_ratio", "vec_ratio", "mte2_ratio", "scalar_exe_ratio", "mac_ratio_extra",
              "mte1_ratio_extra", "mte1_exe_ratio", "fixpipe_exe_ratio", "mte2_exe_ratio", "mte3_exe_ratio",
              "scalar_ratio", "fixpipe_ratio", "mte1_ratio", "mte3_ratio", "mac_ratio"}
#: The Python path's bandwidth factors P·S (device_formats.md §4.4, Python column).
PY_BANDWIDTH: Dict[str, float] = {
    "ub_read_bw": 256 * 4, "ub_write_bw": 256 * 4, "l1_read_bw": 256 * 16, "l1_write_bw": 256 * 8,
    "l2_read_bw": 256 * 8, "l2_write_bw": 256 * 8, "main_mem_read_bw": 8 * 8, "main_mem_write_bw": 8 * 8,
    "l0a_read_bw": 256 * 16, "l0a_write_bw": 256 * 16, "l0b_read_bw": 256 * 8, "l0b_write_bw": 256 * 8,
    "l0c_read_bw": 256 * 8, "l0c_write_bw": 256 * 8, "l0c_read_bw_cube": 256 * 8, "l0c_write_bw_cube": 256 * 8,
    "ub_read_bw_vector": 128 * 2, "ub_write_bw_vector": 128 * 2, "ub_read_bw_scalar": 128,
    "ub_write_bw_scalar": 128, "ub_read_bw_mte": 128, "ub_write_bw_mte": 128,
}
# event names the Python path turns into a ratio (r / cyc); the bandwidths are PY_BANDWIDTH's
_PY_RATIOS = {n for n in EVENT_NAMES.values() if n.endswith(("_ratio", "_ratio_extra", "_rate"))}
# columns the Python path drops, always and when every member of a set is there
_PY_DROPPED = ("icache_req_ratio", "vec_fp16_128lane_ratio", "vec_fp16_64lane_ratio")
_PY_DROPPED_SETS = (("ub_read_bw_mte", "ub_write_bw_mte", "l2_write_bw", "main_mem_write_bw"),
                    ("ub_read_bw_mte", "ub_write_bw_mte"), ("l2_read_bw", "l2_write_bw"))
_VEC_FP16 = ("vec_fp16_128lane_ratio", "vec_fp16_64lane_ratio")
_VEC_FOPS = ("vec_fp16_128lane_ratio", "vec_fp16_64lane_ratio", "vec_fp32_ratio", "vec_int32_ratio",
             "vec_misc_ratio")


@dataclass(frozen=True)
class Rules:
    """Which reference code path the metrics follow: "cpp" or "python"; `v3`: chips V3 (platform 2,
    3, 4: 310P and kin) weigh vector fops lanes differently."""

    path: str = "cpp"
    v3: bool = False


def rules_for(platform: int) -> Rules:
    """The rules a CANN install applies to a chip: C++ for 910B (platform 5), Python elsewhere."""
    return Rules("cpp" if platform == 5 else "python", platform in (2, 3, 4))


def iteration_rules(rules: Rules) -> Optional[Rules]:
    """The rules of an iteration export (`--model-id M --iteration-id I`) where they are not
    `rules`: such an export runs the Python path on every install, so a chip whose whole exports
    follow the C++ rules gets the Python ones there (None: the same rules)."""
    return Rules("python", rules.v3) if rules.path == "cpp" else None


#: Groups whose metric table the Python path's FFTS PMU pass (STARS chips) cannot create: it names
#: the table's columns after the group's metrics with only "(GB/s)" and "(ms)" taken off, and the
#: "(KB)" left on these names makes sqlite refuse the CREATE. Nothing is stored then, and op_summary
#: has no PMU column at all, for either core (docs/exports.md, "PMU metric groups").
FFTS_TABLELESS = frozenset({"MemoryAccess"})


def ffts_python_columns(groups: Mapping[str, Tuple[str, Sequence[int]]], rules: Rules) -> Dict[str, List[str]]:
    """The Python path's metric columns of a STARS device per core ("aic", "aiv": their
    (group, events)), empty for both cores when one core's group is in FFTS_TABLELESS (the two
    cores share one table)."""
    if any(group in FFTS_TABLELESS for group, _ in groups.values()):
        return {core: [] for core in groups}
    return {core: metric_columns(events, group, rules) for core, (group, events) in groups.items()}


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


def is_custom(group: str) -> bool:
    """A user's event list ("Custom:0x8,0x9,...") rather than a named group."""
    return group.startswith("Custom")


def problem(events: Sequence[int], group: str, rules: Rules) -> Optional[str]:
    """Why a group's metrics cannot be computed under these rules (None when they can)."""
    if is_custom(group) or not events:
        return None
    if rules.path == "cpp":
        table = _cpp_groups(rules.v3).get(group)
        if table is None:
            return f"metric group {group!r} is not one the C++ analysis computes (known: {', '.join(CPP_GROUP_NAMES)})"
        missing = sorted({e for c in table for e in c.events} - set(events))
        if missing:
            return (f"metric group {group!r} needs events {', '.join(hex(e) for e in missing)}, which the event "
                    f"list {','.join(hex(e) for e in events)} lacks")
        return None
    if group not in PY_GROUPS:
        return f"metric group {group!r} is not one the Python analysis computes (known: {', '.join(PY_GROUPS)})"
    absent = [n for n in _py_columns(events, group) if n not in _py_available(events, group)]
    if absent:
        return (f"metric group {group!r} has columns {', '.join(absent)}, which the event list "
                f"{','.join(hex(e) for e in events)} does not give")
    return None


CPP_GROUP_NAMES = tuple(_cpp_groups(False))


def _custom_names(events: Sequence[int]) -> List[str]:
    """A custom list's columns: `r<hex>` per event of the record's slots, repeats once."""
    return list(dict.fromkeys(f"r{e:x}" for e in events[:PMU_SLOTS]))


def _py_names(events: Sequence[int]) -> List[str]:
    return [EVENT_NAMES.get(e, hex(e)) for e in events]


def _pipe_time(ratio: str) -> str:
    """The pipe time column of a ratio: mac_ratio_extra → mac_time, vec_ratio → vec_time."""
    return (ratio[: -len("_ratio_extra")] if ratio.endswith("_ratio_extra") else ratio[: -len("_ratio")]) + "_time"


def _py_available(events: Sequence[int], group: str) -> Set[str]:
    """The metric names the Python path derives from an event list (`_py_values`' keys)."""
    names = set(_py_names(events[:PMU_SLOTS]))
    if set(_VEC_FP16) <= names:
        names.add("vec_fp16_ratio")
    if {"mac_fp16_ratio", "mac_int8_ratio"} <= names:
        names.add("cube_fops")
    if {"mac_fp_ratio", "mac_int_ratio"} <= names:
        names.add("mac_ratio_extra")
    if set(_VEC_FOPS) <= names:
        names.add("vector_fops")
    if group in PIPE_GROUPS:
        names |= {_pipe_time(n) for n in names & PIPE_VALID}
    return names


def _py_columns(events: Sequence[int], group: str) -> List[str]:
    """The Python path's column list of a group (after total_time and total_cycles)."""
    listed = list(PY_GROUPS[group])
    if group in PIPE_GROUPS:
        with_times: List[str] = []
        for i, name in enumerate(listed):
            if i < len(listed) - 1:
                with_times.append(_pipe_time(name))
            with_times.append(name)
        listed = with_times
    if group == "ArithmeticUtilization":
        listed += ["cube_fops", "vector_fops"]
    dropped = set(_PY_DROPPED)
    for members in _PY_DROPPED_SETS:
        if set(members) <= set(listed):
            dropped |= set(members)
    return [n for n in listed if n not in dropped]


def _store_name(name: str) -> str:
    """The unified DB's name of a metric: `_extra` dropped (mac_ratio_extra → mac_ratio)."""
    return name.replace("_extra", "")


def metric_columns(events: Sequence[int], group: str, rules: Rules = Rules()) -> List[str]:
    """Column names of a group as the unified DB lists them (total_time, total_cycles first); only
    those two when the group cannot be computed (see `problem`)."""
    head = ["total_time", "total_cycles"]
    if is_custom(group):
        return head + _custom_names(events)
    if problem(events, group, rules) is not None or not events:
        return head
    if rules.path == "cpp":
        return head + [c.name for c in _cpp_groups(rules.v3)[group]]
    return head + [_store_name(n) for n in _py_columns(events, group)]


def total_time_us(cycles: np.ndarray, blocks: np.ndarray, cores: int, freq_hz: np.ndarray) -> np.ndarray:
    """cycles · 10^6 / f / blocks · ceil(blocks / cores), µs; 0 when blocks, cores or f is 0."""
    cyc: np.ndarray = cycles.astype(np.float64)
    b: np.ndarray = blocks.astype(np.int64)
    f = np.asarray(freq_hz, dtype=np.float64)
    ok = (b > 0) & (cores > 0) & (f > 0)
    ceil: np.ndarray = (b + cores - 1) // cores if cores else np.zeros(len(b), np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ok, cyc * 1e6 / np.where(f > 0, f, 1.0) / np.where(b > 0, b, 1) * ceil, 0.0)


def _counter(counters: np.ndarray, events: Sequence[int], event: int) -> np.ndarray:
    """The counter of an event (the first slot holding it), 0 when the list lacks it."""
    n = counters.shape[0]
    for i, e in enumerate(events):
        if e == event and i < counters.shape[1]:
            return counters[:, i].astype(np.float64)
    return np.zeros(n)


def _cpp_values(table: Tuple[Column, ...], events: Sequence[int], cyc: np.ndarray, counters: np.ndarray,
                total_us: np.ndarray, freq_hz: np.ndarray) -> Dict[str, np.ndarray]:
    has_cyc = cyc > 0
    safe = np.where(has_cyc, cyc, 1.0)
    f = np.asarray(freq_hz, dtype=np.float64)
    out: Dict[str, np.ndarray] = {}
    # each event's counter made once (only read below), and each events' ratio once for a _time
    # column and its _ratio column (handed out as a column's values once at most)
    counter: Dict[int, np.ndarray] = {}
    ratios: Dict[Tuple[int, ...], np.ndarray] = {}
    for col in table:
        r = [counter[e] if e in counter else counter.setdefault(e, _counter(counters, events, e)) for e in col.events]
        if col.kind in (RATIO, TIME):
            got = ratios.pop(col.events, None) if col.kind == RATIO else ratios.get(col.events)
            ratio = got if got is not None else np.where(has_cyc, sum(x / safe for x in r), 0.0)
            if col.kind == TIME:
                ratios[col.events] = ratio
            value = total_us * ratio * 1000.0 if col.kind == TIME else ratio
        elif col.kind == MISS:
            ok = has_cyc & (r[0] != 0) & (r[1] != 0)
            value = np.where(ok, (r[0] / safe) / np.where(ok, r[1] / safe, 1.0), 0.0)
        elif col.kind == BW:
            ok = has_cyc & (f > 0)
            seconds = safe / np.where(f > 0, f, 1.0)
            value = np.where(ok, sum(x * col.weights[0] for x in r) / seconds / BW_SCALE, 0.0)
        elif col.kind == COUNT:
            value = sum(r)
        elif col.kind == FOPS:
            value = np.where(has_cyc, sum(x * w for x, w in zip(r, col.weights)), 0.0)
        elif col.kind == DATA:
            value = col.weights[0] * r[0] - sum(col.weights[0] * x for x in r[1:])
        else:  # DATA_SUM
            value = sum(col.weights[0] * x for x in r)
        out[col.name] = value
    return out


def _py_values(events: Sequence[int], group: str, cyc: np.ndarray, counters: np.ndarray, total_us: np.ndarray,
               freq_hz: np.ndarray, v3: bool) -> Dict[str, np.ndarray]:
    """The Python path: each event's value by its name (r / cyc for ratios, the bandwidth formula
    for bandwidths, the raw counter otherwise and whenever cyc is 0), then the derived metrics."""
    has_cyc = cyc > 0
    safe = np.where(has_cyc, cyc, 1.0)
    f = np.asarray(freq_hz, dtype=np.float64)
    seconds = safe / np.where(f > 0, f, 1.0)
    value: Dict[str, np.ndarray] = {}
    for i, name in enumerate(_py_names(events)):
        if i >= counters.shape[1] or name in value:
            continue
        raw: np.ndarray = counters[:, i].astype(np.float64)
        if name in PY_BANDWIDTH:
            got = np.where(f > 0, raw * PY_BANDWIDTH[name] / seconds / BW_SCALE, 0.0)
        elif name in _PY_RATIOS:
            got = raw / safe
        else:
            got = raw
        value[name] = np.where(has_cyc, got, raw)
    if all(n in value for n in _VEC_FP16):
        value["vec_fp16_ratio"] = value[_VEC_FP16[0]] + value[_VEC_FP16[1]]
    if "mac_fp16_ratio" in value and "mac_int8_ratio" in value:
        value["cube_fops"] = value["mac_fp16_ratio"] * cyc * 8192 + value["mac_int8_ratio"] * cyc * 16384
    if "mac_fp_ratio" in value and "mac_int_ratio" in value:
        value["mac_ratio_extra"] = value.pop("mac_fp_ratio") + value.pop("mac_int_ratio")
    if "icache_miss_rate" in value and "icache_req_ratio" in value:
        req = value["icache_req_ratio"]
        value["icache_miss_rate"] = np.where(req != 0, value["icache_miss_rate"] / np.where(req != 0, req, 1.0),
                                             value["icache_miss_rate"])
    if all(n in value for n in _VEC_FOPS):
        lanes = (128.0, 64.0, 64.0, 16.0, 16.0) if v3 else (128.0, 64.0, 64.0, 64.0, 32.0)
        value["vector_fops"] = sum(value[n] * cyc * w for n, w in zip(_VEC_FOPS, lanes))
    if group in PIPE_GROUPS:
        for name in list(value):
            if name in PIPE_VALID:
                value[_pipe_time(name)] = total_us * value[name] * 1000.0
    n = len(cyc)
    return {_store_name(name): value.get(name, np.zeros(n)) for name in _py_columns(events, group)}


def compute(events: Sequence[int], group: str, cycles: np.ndarray, counters: np.ndarray,
            blocks: np.ndarray, cores: int, freq_hz: np.ndarray, rules: Rules = Rules()) -> Dict[str, np.ndarray]:
    """Metric values per task (the columns of `metric_columns`), times in ns.

    cycles: total_cycle per task; counters: (n, 8) raw counters in event order; blocks: block
    count used for the time (block_num, or mix_block_num for the secondary core of a MIX op);
    cores: AI Core (or vector core) count; freq_hz: AI Core frequency per task.
    """
    cyc: np.ndarray = cycles.astype(np.float64)
    total_us = total_time_us(cycles, blocks, cores, freq_hz)
    if is_custom(group):
        total_us = py_round_units(total_us, 2) / 100.0
    out: Dict[str, np.ndarray] = {"total_time": total_us * 1000.0, "total_cycles": cycles.astype(np.int64)}
    if is_custom(group):
        for i, e in enumerate(events[:PMU_SLOTS]):
            raw = counters[:, i].astype(np.float64) if i < counters.shape[1] else np.zeros(len(cyc))
            out.setdefault(f"r{e:x}", raw)
        return out
    if problem(events, group, rules) is not None or not events:
        return out
    if rules.path == "cpp":
        out.update(_cpp_values(_cpp_groups(rules.v3)[group], events, cyc, counters, total_us, freq_hz))
    else:
        out.update(_py_values(events, group, cyc, counters, total_us, freq_hz, rules.v3))
    return out


#: The events a metric divides by besides the cycles (icache_miss_rate's requests, under both rule
#: sets): a 0 there, like 0 cycles, sends the two rule sets down different branches.
_DIVISORS = (0x54,)
_PROBE_ROWS = 64


def branch_rows(events: Sequence[int], cycles: np.ndarray, counters: np.ndarray,
                freq_hz: np.ndarray) -> np.ndarray:
    """The tasks on which the C++ and the Python rules may part although `rules_agree`: a nonzero
    counter with no cycles (the Python rules keep the raw counters, the C++ ones print 0), no
    frequency, or no icache requests where the list counts them (the Python rules then keep misses
    per cycle). With every counter 0 both give 0 everywhere (and the same total time)."""
    out = (np.asarray(cycles) == 0) | ~(np.asarray(freq_hz, dtype=np.float64) > 0)
    for i, e in enumerate(events[:PMU_SLOTS]):
        if e in _DIVISORS and i < counters.shape[1]:
            out |= counters[:, i] == 0
    return out & (counters != 0).any(axis=1)


@functools.lru_cache(maxsize=None)
def _rules_agree(events: Tuple[int, ...], group: str, a: Rules, b: Rules) -> bool:
    columns = metric_columns(events, group, b)
    if not set(columns) <= set(metric_columns(events, group, a)):
        return False
    rng = np.random.default_rng(0)
    cycles = rng.integers(10 ** 5, 10 ** 7, _PROBE_ROWS)
    counters = (rng.random((_PROBE_ROWS, PMU_SLOTS)) * cycles[:, None]).astype(np.int64) + 1
    blocks = rng.integers(1, 64, _PROBE_ROWS)
    freq = np.full(_PROBE_ROWS, 1.8e9)
    got_a = compute(events, group, cycles, counters, blocks, 24, freq, a)
    got_b = compute(events, group, cycles, counters, blocks, 24, freq, b)
    return all(np.array_equal(got_a[c], got_b[c]) for c in columns)


def rules_agree(events: Sequence[int], group: str, a: Rules, b: Rules) -> bool:
    """Whether every column `b` gives a group is one of `a`'s, with the same value, bit for bit,
    on every task outside `branch_rows`. Tried on a fixed probe of such tasks (random counters
    below the cycles): the formulas act elementwise and branch only where `branch_rows` looks, so
    the same values there mean the same arithmetic."""
    return _rules_agree(tuple(events), group, a, b)
