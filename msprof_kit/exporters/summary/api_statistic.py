"""api_statistic (outputs.md §6): one row per (API name, level) over the host APIs."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np

from ...arrays import py_round_units
from ..context import ExportContext
from .cells import NA, NS_PER_US, cpp_round3, double_to_str
from .columns import Column, Table, cells, coded, string_codes
from .tasks import summary_flavour

HOST_DEVICE = 64               # result-directory id of host/
API_LEVELS: Dict[int, str] = {20000: "acl", 15000: "model", 10000: "node", 5500: "communication", 5000: "runtime"}
# the level names the Python path knows besides (its LevelDataType)
PY_API_LEVELS: Dict[int, str] = {**API_LEVELS, 30000: "pytorch_tx", 25000: "pta", 20500: "msproftx", 6000: "aicpu"}
MODEL_LEVEL = 15000
# model-level APIs the collector reports as begin/end Event pairs (host_formats.md §2.2). The
# Python path keeps events apart from its API table, so its api_statistic never counts them.
EVENT_PAIR_APIS = ("ModelLoad", "ModelExecute")


API_HEADER = ("Device_id", "Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)", "Variance")


API_BLOCK = 1 << 20  # CANN_API rows read at a time


def _api_blocks(ctx: ExportContext, strings: np.ndarray) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
    """The host APIs in scope, API_BLOCK store rows at a time: (group key, duration in µs) per API
    in store order. The key is the name's code into `strings` + [N/A] shifted left 20 bits, plus
    the level.

    A graph export keeps the APIs that start inside its host window or span the window's start
    (docs/research/iteration_export.md §3.6). The Python path never counts Event pairs. The C++
    path leaves out the APIs before the collection start that it drops (msprof_kit.before_start);
    the Python path counts them."""
    names = ("startNs", "endNs", "type", "name", "globalTid")
    window = None if ctx.scope.all_export else ctx.scope.api_window()
    events = [i for i, v in enumerate(strings) if v in EVENT_PAIR_APIS] if ctx.flavour == "python" else []
    rule = ctx.api_rule("cpp") if summary_flavour(ctx) == "cpp" else None
    for _, _, cols in ctx.blocks("CANN_API", names, API_BLOCK):
        start, end, level, name, tid = (cols[c] for c in names)
        keep = np.ones(len(start), dtype=bool) if rule is None else rule.keep(start, end, tid)
        if window is not None:
            lo, hi = (int(x) for x in window)
            keep &= ((start >= lo) & (start <= hi)) | ((start <= lo) & (end >= lo))
        if events:
            keep &= ~((level == MODEL_LEVEL) & np.isin(name, events))
        key = string_codes(name[keep], strings) * (1 << 20) + level[keep]
        yield key, (end[keep] - start[keep]) / NS_PER_US


def _grouped(key: np.ndarray) -> Iterator[Tuple[int, np.ndarray]]:
    """(key, positions of its rows in order) of each distinct key."""
    if not len(key):
        return
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    bounds = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1], True])
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        yield int(sorted_key[lo]), order[lo:hi]


def _added(total: float, values: np.ndarray) -> float:
    """`total` with the values added one after the other, as a plain loop does (np.sum adds
    pairwise, which rounds differently)."""
    return float(np.cumsum(np.r_[total, values])[-1]) if len(values) else total


@dataclass
class ApiGroup:
    """The statistics of one (API name, level), in µs, rounded as the flavour's path rounds them."""
    name: str
    level: int
    total: float
    count: int
    avg: float
    low: float
    high: float
    variance: float


def api_groups(ctx: ExportContext, strings: np.ndarray, flavour: str) -> List[ApiGroup]:
    """One ApiGroup per (API name, level) of the host APIs in scope, in the path's row order: by
    name, then by level (as a number in C++, by its name in Python). Two passes over CANN_API in
    blocks: the sums, counts and extremes, then the variances around the averages; each sum adds
    a group's durations in store order."""
    if not ctx.has("CANN_API"):
        return []
    sums: Dict[int, List[float]] = {}  # key -> [sum, count, min, max]
    for key, dur in _api_blocks(ctx, strings):
        for k, at in _grouped(key):
            values = dur[at]
            got = sums.setdefault(k, [0.0, 0, math.inf, -math.inf])
            got[0] = _added(got[0], values)
            got[1] += len(values)
            got[2] = min(got[2], float(values.min()))
            got[3] = max(got[3], float(values.max()))
    if not sums:
        return []
    avgs: Dict[int, Tuple[float, float]] = {}  # key -> (total, avg) as the flavour rounds them
    for k, (total, count, _, _) in sums.items():
        if flavour == "cpp":
            avgs[k] = (total, cpp_round3(total / count))
        else:
            total = round(total, 3)
            avgs[k] = (total, round(total / count, 3))
    squares = dict.fromkeys(sums, 0.0)
    for key, dur in _api_blocks(ctx, strings):
        for k, at in _grouped(key):
            deviation = (dur[at] - avgs[k][1]) ** 2
            if flavour != "cpp":
                deviation = py_round_units(deviation, 3) / 1000.0
            squares[k] = _added(squares[k], deviation)
    names = np.append(strings, NA)
    groups = []
    for k, (_, count, low, high) in sums.items():
        total, avg = avgs[k]
        variance = squares[k] / count
        variance = cpp_round3(variance) if flavour == "cpp" else round(variance, 3)
        groups.append(ApiGroup(str(names[k >> 20]), k & ((1 << 20) - 1), total, int(count), avg, low, high, variance))
    if flavour == "cpp":
        groups.sort(key=lambda g: (g.name.encode("utf-8"), g.level))
    else:
        groups.sort(key=lambda g: (g.name, PY_API_LEVELS.get(g.level, "")))
    return groups


def api_statistic_table(ctx: ExportContext, strings: np.ndarray, flavour: str) -> Optional[Table]:
    """One row per (API name, level) over the host APIs (§6). C++ writes the table once with
    Device_id `host`; the Python path writes it once per device folder, with the device's id."""
    groups = api_groups(ctx, strings, flavour)
    if not groups:
        return None
    levels = PY_API_LEVELS if flavour == "python" else API_LEVELS
    if flavour == "cpp":
        number: Callable[[float], str] = double_to_str
        devices = ["host"]
    else:
        number = repr
        devices = [str(d) for d in sorted((d for d in ctx.device_info if d != HOST_DEVICE), key=str)] or ["host"]
    body = [[levels.get(g.level, ""), g.name, number(g.total), str(g.count), number(g.avg), number(g.low),
             number(g.high), number(g.variance)] for g in groups]
    rows = [[dev] + r for dev in devices for r in body]
    columns: List[Column] = []
    for j, header in enumerate(API_HEADER):
        values = np.array([r[j] for r in rows], dtype=object)
        columns.append(coded(header, values) if j < 3 else cells(header, values))
    return Table(columns, len(rows))
