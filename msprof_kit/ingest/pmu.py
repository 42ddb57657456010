"""KIT_TASK_PMU (and KIT_TASK_PMU_PY) rows of a device's tasks, a window of tasks at a time: on
STARS chips from the FFTS context and block PMU records lying in each task (StarsPmu), on HWTS
chips from the AI Core PMU records in execution order (HwtsPmu); metric columns by metrics.py."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple, Union, cast

import numpy as np

from .. import metrics
from ..arrays import ascending, first_seen, run_ranks
from ..errors import Diagnostics
from ..layout import ResultDir
from .columns import Columns
from .device import DeviceData
from .freq import FreqChanges
from .pmu_blocks import KeyedTasks, ending_after


def metric_group(rd: ResultDir, core: str) -> Tuple[str, List[int]]:
    """(metric group, PMU event codes) sample.json names for a core ("aic" or "aiv")."""
    if core == "aic":
        return str(rd.sample.get("ai_core_metrics", "")), metrics.parse_events(rd.sample.get("ai_core_profiling_events"))
    return str(rd.sample.get("aiv_metrics", "")), metrics.parse_events(rd.sample.get("aiv_profiling_events"))


def pmu_columns(rd: ResultDir, prefixed: bool, rules: metrics.Rules) -> List[str]:
    """The metric columns of a device's PMU: aic_ and aiv_ prefixed (STARS chips), or the AI
    Core's unprefixed (HWTS chips)."""
    def names(core: str) -> List[str]:
        group, events = metric_group(rd, core)
        return metrics.metric_columns(events, group, rules)
    if not prefixed:
        return names("aic")
    return [f"{core}_{name}" for core in ("aic", "aiv") for name in names(core)]


def _number(info: Dict[str, object], key: str) -> Union[str, int, float]:
    """A number of DeviceInfo[0] (ResultDir.device_info keeps only usable ones: a JSON number or
    text), 0 when absent or empty."""
    return cast(Union[str, int, float], info.get(key, 0) or 0)


class StarsPmu:
    """KIT_TASK_PMU rows of one device's tasks, given a window of tasks at a time (in task order;
    `step` returns the rows that are final, in task order), and `finish` warns of the records
    left unattached.

    aic_*/aiv_* metrics per task (910B family): the context PMU record (by end time) that lies
    in the task, the first in stream order when several do, plus for MIX ops the other core's
    block PMU records, summed. The records come a window of end times at a time, the windows the
    tasks'; a task's metrics are final once the window's end has passed the task's end, and the
    rows are given in task order (a task still open holds back those after it).

    With `py_rules` (the store holds C++-rule metrics, metrics.iteration_rules), each step also
    keeps, for `python_part`, the rows whose metrics under the Python rules are not those: the
    values an iteration export prints."""

    def __init__(self, rd: ResultDir, dev: DeviceData, edges: np.ndarray, rules: metrics.Rules,
                 py_rules: Optional[metrics.Rules] = None, freq: Optional[FreqChanges] = None) -> None:
        info = rd.device_info()
        self.rd = rd
        self.rules = rules
        self.py_rules = py_rules
        self.freq = float(_number(info, "aic_frequency")) * 1e6
        self.changes = freq  # the real frequency: each task's cycles at the one in force at its PMU record's end
        self.cores = {"aic": int(_number(info, "ai_core_num")), "aiv": int(_number(info, "aiv_num"))}
        self.groups = {core: metric_group(rd, core) for core in ("aic", "aiv")}
        self.columns = pmu_columns(rd, True, rules)
        self.py_columns = metrics.ffts_python_columns(self.groups, py_rules) if py_rules is not None else {}
        self.py_agree = {core: py_rules is not None and metrics.rules_agree(events, group, rules, py_rules)
                         for core, (group, events) in self.groups.items()}
        self.python: Optional[Dict[str, np.ndarray]] = None  # the last step's rows whose Python-rule metrics differ
        self.ctx_runs, self.blk_runs = dev.ctx_pmu, dev.blk_pmu
        for runs in (self.ctx_runs, self.blk_runs):
            if runs is not None:
                runs.cut(edges)
        self.carry: Optional[Columns] = None   # each key's latest task of the earlier windows
        self.open: Optional[Columns] = None    # tasks whose metrics are not final yet
        self.hits: Optional[Columns] = None    # their context records so far (one a task)
        self.sums: Optional[Columns] = None    # their MIX block sums so far
        self.lost = 0

    def step(self, w: int, tasks: Columns, next_edge: Optional[int]) -> Optional[Dict[str, np.ndarray]]:
        """`tasks`: the window's key, start, end, end_ns, row, is_mix, main_aic, block, mix, gid."""
        self.open = tasks if self.open is None else {k: np.concatenate([self.open[k], v]) for k, v in tasks.items()}
        keyed = KeyedTasks(self.carry, tasks, ("key", "start", "end", "row", "end_ns"))
        ctx = self.ctx_runs.window(w) if self.ctx_runs is not None else None
        if ctx is not None:
            # (the records' key and is_aic made in the device's worker: pmu_blocks.context_records)
            row = keyed.attach(ctx["key"], ctx["end_syscnt"])
            self.lost += int((row < 0).sum())
            keep = row >= 0
            new = {"row": row[keep], "offset": ctx["offset"][keep], "cycles": ctx["total_cycle"][keep],
                   "pmu": ctx["pmu"][keep], "is_aic": ctx["is_aic"][keep], "end": ctx["end_syscnt"][keep]}
            both = new if self.hits is None else {k: np.concatenate([self.hits[k], v]) for k, v in new.items()}
            order = np.lexsort((both["offset"], both["row"]))
            first = first_seen(both["row"][order])
            self.hits = {k: v[order[first]] for k, v in both.items()}  # by row, the first in stream order
        blk = self.blk_runs.window(w) if self.blk_runs is not None else None
        if blk is not None:
            # (block sums per task and core, pmu_blocks.block_sums: each attaches to its task by the task's start)
            row = keyed.attach(blk["key"], blk["start"])
            at = cast(np.ndarray, np.searchsorted(self.open["row"], row))  # (numpy's stubs read an array of unknown dtype as a scalar)
            ok = (row >= 0) & (at < len(self.open["row"]))
            ok[ok] &= self.open["row"][at[ok]] == row[ok]
            ok[ok] &= self.open["is_mix"][at[ok]]
            # only the other core's blocks count: AIV blocks for MIX_AIC, AIC blocks for MIX_AIV
            ok[ok] &= np.where(self.open["main_aic"][at[ok]], blk["core_type"][ok] == 1, blk["core_type"][ok] == 0)
            new = {"row": row[ok], "cycles": blk["total_cycle"][ok], "pmu": blk["pmu"][ok]}
            both = new if self.sums is None else {k: np.concatenate([self.sums[k], v]) for k, v in new.items()}
            order = np.argsort(both["row"], kind="stable")
            ordered = both["row"][order]
            starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]])) if len(ordered) \
                else np.zeros(0, np.int64)
            self.sums = {"row": ordered[starts],
                         "cycles": np.add.reduceat(both["cycles"][order].astype(np.int64), starts)
                         if len(starts) else np.zeros(0, np.int64),
                         "pmu": np.add.reduceat(both["pmu"][order].astype(np.int64), starts, axis=0)
                         if len(starts) else np.zeros((0, 8), np.int64)}
        self.carry = ending_after(keyed.latest(), next_edge)
        # final: the rows before the first task that may still get records
        still = self.open["end_ns"] >= next_edge if next_edge is not None else np.zeros(len(self.open["row"]), bool)
        frontier = int(self.open["row"][still].min()) if still.any() else None
        return self._final(frontier)

    def _final(self, frontier: Optional[int]) -> Optional[Dict[str, np.ndarray]]:
        def split(cols: Optional[Columns]) -> Tuple[Optional[Columns], Optional[Columns]]:
            if cols is None or frontier is None:
                return cols, None
            # (open tasks, hits and sums are kept by ascending row: the rows before the frontier are a head)
            if ascending(cols["row"]):
                n = int(np.searchsorted(cols["row"], frontier))
                return {k: v[:n] for k, v in cols.items()}, {k: v[n:] for k, v in cols.items()}
            done = cols["row"] < frontier
            return {k: v[done] for k, v in cols.items()}, {k: v[~done] for k, v in cols.items()}
        tasks, self.open = split(self.open)
        hits, self.hits = split(self.hits)
        sums, self.sums = split(self.sums)
        if hits is None or not len(hits["row"]):
            return None
        assert tasks is not None
        rows = tasks["row"]
        if len(rows) and bool((rows[1:] - rows[:-1] == 1).all()):  # (the tasks' rows run on, one after another)
            at: np.ndarray = hits["row"] - rows[0]
        else:
            at = cast(np.ndarray, np.searchsorted(rows, hits["row"]))  # (numpy's stubs read an array of unknown dtype as a scalar)
        m = len(at)
        is_aic, is_mix = hits["is_aic"], tasks["is_mix"][at]
        block, mix = tasks["block"][at], tasks["mix"][at]
        mixed = np.flatnonzero(is_mix)
        sum_cyc: np.ndarray = np.zeros(len(mixed), np.int64)
        sum_pmu: np.ndarray = np.zeros((len(mixed), 8), np.int64)
        if sums is not None and len(sums["row"]) and len(mixed):
            j = np.minimum(np.searchsorted(sums["row"], hits["row"][mixed]), len(sums["row"]) - 1)
            has = sums["row"][j] == hits["row"][mixed]
            sum_cyc[has] = sums["cycles"][j[has]]
            sum_pmu[has] = sums["pmu"][j[has]]
        out: Dict[str, np.ndarray] = {"taskRow": hits["row"], "globalTaskId": tasks["gid"][at]}
        python: Dict[str, np.ndarray] = {}
        freq = np.full(m, self.freq) if self.changes is None else self.changes.pmu_hz(hits["end"])
        for core in ("aic", "aiv"):
            group, events = self.groups[core]
            main = is_aic if core == "aic" else ~is_aic
            # main core: its context record; MIX secondary core: block sums; otherwise zeros
            cyc: np.ndarray = np.where(main, hits["cycles"], 0).astype(np.int64, copy=False)
            cnt: np.ndarray = np.where(main[:, None], hits["pmu"], 0).astype(np.int64, copy=False)
            b: np.ndarray = np.where(main, block, 0).astype(np.int64, copy=False)
            second = ~main[mixed]
            cyc[mixed[second]] = sum_cyc[second]
            cnt[mixed[second]] = sum_pmu[second]
            b[mixed[second]] = mix[mixed[second]]
            got = metrics.compute(events, group, cyc, cnt, b, self.cores[core], freq, self.rules)
            for name in metrics.metric_columns(events, group, self.rules):
                out[f"{core}_{name}"] = got[name]
            if self.py_columns.get(core):
                python.update(self._python_values(core, out, cyc, cnt, b, freq))
        if self.py_rules is not None:
            self.python = _differing(out, python)
        return out

    def _python_values(self, core: str, stored: Dict[str, np.ndarray], cyc: np.ndarray, cnt: np.ndarray,
                       b: np.ndarray, freq: np.ndarray) -> Dict[str, np.ndarray]:
        """A core's metrics by the Python rules: computed for every task where the rule sets
        differ for its group, else only for the few tasks where they may part (metrics.branch_rows),
        the other tasks' being the stored ones."""
        assert self.py_rules is not None
        group, events = self.groups[core]
        names = self.py_columns[core]
        if not self.py_agree[core]:
            got = metrics.compute(events, group, cyc, cnt, b, self.cores[core], freq, self.py_rules)
            return {f"{core}_{name}": got[name] for name in names}
        take = np.flatnonzero(metrics.branch_rows(events, cyc, cnt, freq))
        if not len(take):
            return {f"{core}_{name}": stored[f"{core}_{name}"] for name in names}
        got = metrics.compute(events, group, cyc[take], cnt[take], b[take], self.cores[core], freq[take], self.py_rules)
        out = {}
        for name in names:
            values: np.ndarray = stored[f"{core}_{name}"].astype(np.float64)
            values[take] = got[name]
            out[f"{core}_{name}"] = values
        return out

    def python_part(self) -> Optional[Dict[str, np.ndarray]]:
        """The rows of the last step whose metrics under the Python rules differ from the stored
        ones in some column (taskRow, globalTaskId and every Python-rule column); None when none."""
        part, self.python = self.python, None
        return part

    def finish(self, diag: Diagnostics) -> None:
        if self.lost:
            diag.warn(f"{self.rd.data_dir}/ffts_profile.data.{self.rd.device_id}.*: {self.lost} context PMU records "
                      f"match no device task; dropped")


def _differing(stored: Dict[str, np.ndarray], python: Dict[str, np.ndarray]) -> Optional[Dict[str, np.ndarray]]:
    """The rows (taskRow, globalTaskId, then `python`'s columns) where a `python` column differs
    from the `stored` column of its name, or `stored` lacks it; None when no row does."""
    differ: np.ndarray = np.zeros(len(stored["taskRow"]), dtype=np.bool_)
    for name, values in python.items():
        have = stored.get(name)
        if have is None:
            differ[:] = True
            break
        if values is not have:
            np.logical_or(differ, values != have, out=differ)
    if not differ.any():
        return None
    return {"taskRow": stored["taskRow"][differ], "globalTaskId": stored["globalTaskId"][differ],
            **{name: values[differ] for name, values in python.items()}}


class HwtsPmu:
    """Unprefixed metrics per task (HWTS chips): the n-th PMU record of a (stream, task) goes to
    the n-th execution of that task in task order. The records are held whole (these chips'
    collections are small); each key's count of executions is carried from a window to the next."""

    def __init__(self, rd: ResultDir, dev: DeviceData, rules: metrics.Rules) -> None:
        pm = dev.aic_pmu
        assert pm is not None
        info = rd.device_info()
        self.rd = rd
        self.rules = rules
        self.freq = float(_number(info, "aic_frequency")) * 1e6
        self.cores = int(_number(info, "ai_core_num"))
        self.group, self.events = metric_group(rd, "aic")
        self.columns = pmu_columns(rd, False, rules)
        key = self._key(pm["stream_id"], pm["task_id"])
        code = (key << 36) | self._nth(key, None)
        self.order = np.argsort(code, kind="stable")
        self.codes = code[self.order]
        self.cycles, self.counters = pm["total_cycle"], pm["pmu"]
        self.seen: Optional[Columns] = None  # executions so far of each key
        self.matched = 0

    @staticmethod
    def _key(stream: np.ndarray, task: np.ndarray) -> np.ndarray:
        return ((np.asarray(stream).astype(np.int64) & 0x7FF) << 16) | (np.asarray(task).astype(np.int64) & 0xFFFF)

    @staticmethod
    def _nth(key: np.ndarray, seen: Optional[Columns]) -> np.ndarray:
        """Each row's count of earlier rows of its key (and of `seen` ones)."""
        order = np.argsort(key, kind="stable")
        k = key[order]
        rank = run_ranks(k)
        if seen is not None and len(seen["key"]):
            j = np.minimum(np.searchsorted(seen["key"], k), len(seen["key"]) - 1)
            rank += np.where(seen["key"][j] == k, seen["count"][j], 0)
        out: np.ndarray = np.empty(len(k), dtype=np.int64)
        out[order] = rank
        return out

    def step(self, w: int, tasks: Columns, next_edge: Optional[int]) -> Optional[Dict[str, np.ndarray]]:
        key = self._key(tasks["stream_id"], tasks["task_id"])
        nth = self._nth(key, self.seen)
        keys, counts = np.unique(key, return_counts=True)
        if self.seen is not None:
            both = np.concatenate([self.seen["key"], keys])
            total = np.concatenate([self.seen["count"], counts])
            keys, inverse = np.unique(both, return_inverse=True)
            counts = np.zeros(len(keys), np.int64)
            np.add.at(counts, inverse, total)
        self.seen = {"key": keys, "count": counts}
        if not len(self.codes):
            return None
        code = (key << 36) | nth
        at = np.minimum(np.searchsorted(self.codes, code), len(self.codes) - 1)
        hit = np.flatnonzero(self.codes[at] == code)
        if not len(hit):
            return None
        self.matched += len(hit)
        src = self.order[at[hit]]
        got = metrics.compute(self.events, self.group, self.cycles[src], self.counters[src], tasks["block"][hit],
                              self.cores, np.full(len(hit), self.freq), self.rules)
        return {"taskRow": tasks["row"][hit], "globalTaskId": tasks["gid"][hit],
                **{name: got[name] for name in metrics.metric_columns(self.events, self.group, self.rules)}}

    def finish(self, diag: Diagnostics) -> None:
        lost = len(self.codes) - self.matched
        if lost:
            diag.warn(f"{self.rd.data_dir}/aicore.data.{self.rd.device_id}.*: {lost} PMU records match no task; dropped")
