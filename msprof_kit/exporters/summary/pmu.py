"""op_summary's PMU columns (outputs.md §4.3): the KIT_TASK_PMU metrics of a block of tasks, their
headers and output units, the reference's losses, and memory_bound and cube_utilization(%)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...arrays import SortedKeys, py_round_units
from ...native_impl import fixed_slot, int_slot, overlay, trim_slot
from ...store import StoredColumns
from ..context import ExportContext
from .cells import NA, NS_PER_US, printf_units, sqlite_round_units
from .columns import Column, Rendered
from .tasks import device_number, graph_mode, session_start

NO_MODEL = 4294967295  # model id of eager (single-operator) tasks
# task types whose PMU cells are always N/A
NO_PMU_TYPES = ("AI_CPU", "DSA", "DVPP")
# PMU metrics the split-core (aic_/aiv_) chips do not support (C++ MetricProcessor and Python
# AiCoreOpReport both drop them)
UNSUPPORTED_PMU = frozenset({
    "aic_vec_ratio", "aic_vec_time", "aiv_mac_ratio", "aiv_mac_time", "aiv_mte1_ratio", "aiv_mte1_time",
    "aic_ub_read_bw", "aic_ub_write_bw", "aiv_l1_read_bw", "aiv_l1_write_bw", "aic_l0c_read_bw",
    "aic_l0c_write_bw", "aiv_l0a_read_bw", "aiv_l0a_write_bw", "aiv_l0b_read_bw", "aiv_l0b_write_bw",
    "aiv_l0c_read_bw_cube", "aiv_l0c_write_bw_cube", "aic_ub_read_bw_mte", "aic_ub_write_bw_mte",
    "aic_ub_read_bw_vector", "aic_ub_write_bw_vector", "aiv_mac_fp16_ratio", "aiv_mac_int8_ratio",
    "aic_vec_fp32_ratio", "aic_vec_fp16_ratio", "aic_vec_int32_ratio", "aic_vec_misc_ratio",
    "aic_vec_fp16_128lane_ratio", "aic_vec_fp16_64lane_ratio", "aic_vec_bankgroup_cflt_ratio",
    "aic_vec_bank_cflt_ratio", "aic_vec_resc_cflt_ratio", "aic_vector_fops", "aiv_cube_fops",
    "aiv_fixpipe_ratio", "aiv_fixpipe_time",
})
# memory_bound inputs (mac, vec, mte2): plain names or the *_exe_* variants
MEMORY_BOUND_INPUTS = (("mac_ratio", "vec_ratio", "mte2_ratio"), ("mac_exe_ratio", "vec_exe_ratio", "mte2_exe_ratio"))


#: KIT_INFO, per device of a store whose KIT_TASK_PMU holds C++-rule metrics (910B family): the
#: metric columns of an iteration export (the Python rules', comma-separated; empty: none at all)
ITERATION_COLUMNS = "pmu_iteration_columns"


class PmuReader:
    """KIT_TASK_PMU metrics of given TASK rows, read from the store by row range (so that only the
    rows of a block of tasks are loaded, not the whole table).

    `iteration`: the metrics an iteration export prints. Where the store keeps the C++ rules'
    metrics (KIT_INFO names the Python rules' columns per device), those are the Python rules'
    columns: the value of KIT_TASK_PMU_PY where it holds the task (the tasks whose values differ),
    else KIT_TASK_PMU's (docs/exports.md, "Iteration exports: the Python path's metrics")."""

    def __init__(self, ctx: ExportContext, iteration: bool = False) -> None:
        self.cols = ctx.stored("KIT_TASK_PMU")
        names = self.cols.names
        self.metrics = [n for n in names[1:] if n != "globalTaskId"] if names[:1] == ["taskRow"] else []
        self.rows = SortedKeys(self.cols.read("taskRow") if self.metrics else np.zeros(0, np.int64))
        self.listed: Dict[int, List[str]] = {}
        if iteration:
            self.listed = {d: [n for n in i[ITERATION_COLUMNS].split(",") if n]
                           for d, i in ctx.device_info.items() if ITERATION_COLUMNS in i}
        self.python = ctx.stored("KIT_TASK_PMU_PY") if self.listed else self.cols
        self.python_rows = SortedKeys(self.python.read("taskRow") if self.listed and "taskRow" in self.python
                                      else np.zeros(0, np.int64))

    @staticmethod
    def _take(cols: StoredColumns, names: Sequence[str], keys: SortedKeys,
              rows: np.ndarray) -> Tuple[Dict[str, np.ndarray], np.ndarray]:
        at = keys.find(rows)
        found = at >= 0
        if not found.any():
            return {name: np.full(len(rows), np.nan) for name in names}, found
        lo, hi = int(at[found].min()), int(at[found].max()) + 1
        local = np.where(found, at - lo, 0)
        return {name: np.where(found, cols.read(name, lo, hi)[local].astype(np.float64), np.nan)
                for name in names}, found

    def read(self, rows: np.ndarray, devices: Optional[np.ndarray] = None) -> Tuple[Dict[str, np.ndarray], np.ndarray]:
        """The metrics of these TASK rows (float64, NaN where a task has no PMU record), in store
        column order, and which rows have a record (the first, where a row has several). With
        `iteration` set: the iteration export's columns, NaN on the rows of `devices` whose list
        lacks the column."""
        if not self.metrics or not len(self.rows.keys):
            return {}, np.zeros(len(rows), dtype=bool)
        stored, found = self._take(self.cols, self.metrics, self.rows, rows)
        if not self.listed:
            return stored, found
        names = list(dict.fromkeys(n for listed in self.listed.values() for n in listed))
        python, differs = self._take(self.python, names, self.python_rows, rows)
        out: Dict[str, np.ndarray] = {}
        for name in names:
            values = np.where(differs, python[name], stored[name] if name in stored else np.nan)
            if devices is not None:
                values[np.isin(devices, [d for d, listed in self.listed.items() if name not in listed])] = np.nan
            out[name] = values
        return out, found


@dataclass
class PmuColumn:
    """One op_summary PMU column: its store name, its header and its values per output row
    (µs for times; NaN where the task has no PMU record)."""
    store: str
    header: str
    values: np.ndarray


def pmu_header(name: str, flavour: str) -> str:
    """The op_summary header of a metric (§4.3 header rewriting)."""
    if name in ("total_time", "aic_total_time"):
        return "aicore_time(us)"
    if name == "aiv_total_time":
        return "aiv_time(us)"
    if "time" in name:
        return name + "(us)"
    if "bw" in name and "(GB/s)" not in name:
        return name + "(GB/s)"
    if flavour == "cpp" and "datas" in name and "(KB)" not in name:
        return name + "(KB)"
    return name


def _core_prefix(name: str) -> str:
    return name[:4] if name.startswith(("aic_", "aiv_")) else ""


def _to_output_units(metrics: Dict[str, np.ndarray], flavour: str) -> None:
    """Turn the time metrics from ns into µs, in place.

    The Python path then derives each pipe time from the total time rounded to 2 decimals; the C++
    path prints the stored values."""
    for name, values in metrics.items():
        if name.endswith("time"):
            values /= NS_PER_US
    if flavour == "cpp":
        return
    for prefix in ("", "aic_", "aiv_"):
        total = metrics.get(prefix + "total_time")
        if total is None:
            continue
        rounded = py_round_units(np.nan_to_num(total), 2) / 100.0
        rounded[np.isnan(total)] = np.nan
        metrics[prefix + "total_time"] = rounded
        for name in list(metrics):
            ratio = metrics.get(name[: -len("time")] + "ratio")
            if _core_prefix(name) == prefix and name.endswith("_time") and ratio is not None:
                metrics[name] = rounded * ratio


def pmu_columns(metrics: Dict[str, np.ndarray], flavour: str) -> List[PmuColumn]:
    """The op_summary PMU columns in store order (times in µs), less the metrics split-core chips
    lack. The metric arrays are converted in place."""
    _to_output_units(metrics, flavour)
    return [PmuColumn(name, pmu_header(name, flavour), values)
            for name, values in metrics.items() if name not in UNSUPPORTED_PMU]


#: The core whose metrics a MIX op's block PMU records give (the other core's come from its
#: context PMU record): the metric prefix per task type.
MIX_OTHER_CORE = {"MIX_AIC": "aiv_", "MIX_AIV": "aic_"}


def graph_export_losses(metrics: Dict[str, np.ndarray], task_type: np.ndarray,
                        lost: Optional[np.ndarray] = None) -> None:
    """Zero, in place, the metrics of the tasks whose block numbers the reference's Python PMU pass
    does not read (`lost`, bool per task; None: all of them, as in a graph export, where its query
    for the GE task info fails: docs/research/iteration_export.md §3.2). NaN (no PMU record) stays.

    * every time column is 0 (the times derive from the block number); cycles and ratios of the
      core that wrote the context PMU record are unaffected;
    * a MIX op keeps only that core: the other core's cycles and metrics come from the block PMU
      records, which the pass adds only when the op's mix block number is not 0, so they are all
      0 (the AIV side of MIX_AIC, the AIC side of MIX_AIV; docs/exports.md)."""
    rows = np.ones(len(task_type), dtype=bool) if lost is None else lost
    if not rows.any():
        return
    for name, values in metrics.items():
        if name.endswith("time"):
            values[rows & ~np.isnan(values)] = 0.0
    for mix_type, prefix in MIX_OTHER_CORE.items():
        mixed = rows & (task_type == mix_type)
        if not mixed.any():
            continue
        for name, values in metrics.items():
            if name.startswith(prefix):
                values[mixed & ~np.isnan(values)] = 0.0


def described_before_start(ctx: ExportContext, rows: np.ndarray, model: np.ndarray, begin: Optional[int]) -> np.ndarray:
    """Which of these TASK rows are eager ops (no model) whose GE task info (node_basic_info) was
    stamped before the collection start: the reference's Python PMU pass reads the block numbers
    of eager tasks stamped at or after the start only (mscalculate/aic/pmu_calculator.py:118-137),
    so theirs count as 0. False for a store that does not know the stamps (KIT_TASK.infoNs)."""
    kit = ctx.stored("KIT_TASK")
    if begin is None or "infoNs" not in kit or not len(rows):
        return np.zeros(len(rows), dtype=bool)
    stamp: np.ndarray = kit.take("infoNs", rows).astype(np.int64)
    return (model == NO_MODEL) & (stamp >= 0) & (stamp < begin)


def _pmu_cells(col: PmuColumn, ok: np.ndarray) -> Rendered:
    """Cycle counts as integers, everything else as SQLite's ROUND(x, 3) (both paths)."""
    values = col.values
    if "cycle" in col.store:
        return Rendered(col.header, lambda rows: overlay(
            int_slot(np.nan_to_num(values[rows]).astype(np.int64)), ~ok[rows], NA))
    return Rendered(col.header, lambda rows: overlay(
        trim_slot(sqlite_round_units(np.nan_to_num(values[rows]), 3), 3), ~ok[rows], NA))


def _memory_bound(cols: List[PmuColumn], ok: np.ndarray, flavour: str) -> Optional[Rendered]:
    """mte2_ratio / max(mac_ratio, vec_ratio) over the rounded ratios; None when the metrics lack
    those names (split-core chips name them aic_/aiv_)."""
    by_name = {c.store: c.values for c in cols}
    names = next((n for n in MEMORY_BOUND_INPUTS if all(x in by_name for x in n)), None)
    if names is None:
        return None
    mac, vec, mte2 = (sqlite_round_units(np.nan_to_num(by_name[n]), 3) / 1000.0 for n in names)
    top = np.maximum(mac, vec)
    bound = mte2 / np.where(top != 0, top, 1)
    if flavour == "cpp":
        valid = ok & (mac != 0) & (vec != 0)
        return Rendered("memory_bound", lambda rows: overlay(fixed_slot(printf_units(bound[rows], 6), 6),
                                                             ~valid[rows], NA))
    zero = top == 0
    return Rendered("memory_bound", lambda rows: overlay(
        overlay(trim_slot(py_round_units(bound[rows], 3), 3), zero[rows], "0"), ~ok[rows], NA))


def _cube_utilization(cols: List[PmuColumn], ok: np.ndarray, dur_ns: np.ndarray, freq: np.ndarray,
                      cores: np.ndarray, flavour: str) -> Optional[Rendered]:
    """total_cycles / (aic_freq_MHz · ai_core_num · duration_µs) · 100; None when the metrics lack
    the cycles or the mac ratio."""
    by_name = {c.store: c.values for c in cols}
    cyc_name = "aic_total_cycles" if "aic_total_cycles" in by_name else "total_cycles"
    mac_name = "aic_mac_ratio" if "aic_mac_ratio" in by_name else "mac_ratio"
    if cyc_name not in by_name or mac_name not in by_name:
        return None
    cycles = np.nan_to_num(by_name[cyc_name])
    scale = freq * cores
    has_scale = scale > 0
    if flavour == "cpp":
        # C++ prints cycles / (freq · cores) · 100 with std::to_string, then divides that text by the
        # duration text (µs, 3 decimals) and prints %.3f
        per_us = printf_units(cycles / np.where(has_scale, scale, 1) * 100, 6) / 1e6
        usage = per_us / np.where(dur_ns > 0, dur_ns / NS_PER_US, 1)
        valid = ok & has_scale
        positive = dur_ns > 0
        return Rendered("cube_utilization(%)", lambda rows: overlay(
            overlay(fixed_slot(printf_units(usage[rows], 3), 3), ~positive[rows], "0"), ~valid[rows], NA))
    mac = sqlite_round_units(np.nan_to_num(by_name[mac_name]), 3)
    denom = scale * dur_ns
    usage = cycles / np.where(denom > 0, denom, 1) * NS_PER_US * 100
    zero = (mac == 0) | (cycles == 0) | (dur_ns == 0) | ~has_scale
    return Rendered("cube_utilization(%)", lambda rows: overlay(
        overlay(trim_slot(py_round_units(usage[rows], 3), 3), zero[rows], "0"), ~ok[rows], NA))


def op_summary_pmu(ctx: ExportContext, pmu: PmuReader, rows: np.ndarray, dev: np.ndarray, dur: np.ndarray,
                   task_type: np.ndarray, model: np.ndarray, flavour: str,
                   hidden: Optional[np.ndarray] = None) -> List[Column]:
    """The PMU columns of these TASK rows (`model`: their model ids), then memory_bound and
    cube_utilization(%) (§4.3); N/A on the `hidden` rows (communication ops' rows)."""
    metrics, found = pmu.read(rows, dev)
    if not metrics:
        return []
    ok = found & ~np.isin(task_type, NO_PMU_TYPES)
    if hidden is not None:
        ok &= ~hidden
    if graph_mode(ctx):
        graph_export_losses(metrics, task_type)
    elif flavour == "python":
        graph_export_losses(metrics, task_type, described_before_start(ctx, rows, model, session_start(ctx)))
    columns = pmu_columns(metrics, flavour)
    del metrics
    out: List[Column] = [_pmu_cells(c, ok) for c in columns]
    bound = _memory_bound(columns, ok, flavour)
    if bound is not None:
        out.append(bound)
    facts = {d: (device_number(ctx, d, "aic_frequency"), device_number(ctx, d, "ai_core_num"))
             for d in np.unique(dev).tolist()}
    freq = np.zeros(len(dev))
    cores = np.zeros(len(dev))
    for d, (mhz, n) in facts.items():
        freq[dev == d] = mhz
        cores[dev == d] = n
    cube = _cube_utilization(columns, ok, dur, freq, cores, flavour)
    if cube is not None:
        out.append(cube)
    return out
