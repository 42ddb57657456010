"""`compare`: two collections side by side, operator by operator, and end to end.

Operators are matched between collection A and collection B by OP Type or by Op Name
(docs/plot_compare.md states the rules), their counts, totals and averages put side by side with
the change `Delta = Total B - Total A` and `Ratio = Total B / Total A`, largest change first; rows
found on one side only say so. The end-to-end part puts side by side the total operator time, the
model executions the API statistic records (aclmdlExecute, ModelExecute, ...) and the iterations of
the step trace. `--plot` draws the changes as a chart.

Both sides are read with `sources/`, so a raw collection (PROF or JOB), a store, exported CSVs, a
unified DB or a timeline can be compared with any other. Nothing here prints; the CLI does.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from .plot import drawing
from . import sources
from .errors import BadOption, Diagnostics, NoCollection, NoData

BY = ("type", "name")
DEFAULT_TOP = 20
FILE_NAME = "compare_by_{by}.png"
TOTAL_A, TOTAL_B = "Total A(us)", "Total B(us)"
COUNT_A, COUNT_B = "Count A", "Count B"
AVG_A, AVG_B = "Avg A(us)", "Avg B(us)"
DELTA, RATIO, MATCH = "Delta(us)", "Ratio B/A", "Match"
ONLY_A, ONLY_B = "only in A", "only in B"
# how a row was matched (docs/plot_compare.md)
SAME_TYPE, SAME_NAME, RENUMBERED = "same type", "same name", "renumbered"
INTEGER_COLUMNS = (COUNT_A, COUNT_B)
METRIC = "Metric"


@dataclass
class Side:
    """One collection: its tables, its iterations, and a short name for titles."""
    path: str
    tables: sources.Tables
    iterations: Optional[pd.DataFrame]
    name: str


@dataclass
class Comparison:
    """The result of compare_sides. `rows`: one row per matched (or one-sided) key, all of them,
    largest |Delta| first. `e2e`: end-to-end metrics. `by`: 'type' or 'name' (what was used).
    `notes`: how the rows were obtained (fallbacks, sums over devices)."""
    a: Side
    b: Side
    by: str
    key: str
    rows: pd.DataFrame
    e2e: pd.DataFrame
    notes: List[str] = field(default_factory=list)

    def row(self, key: str) -> pd.Series:
        """The row of a key (an OP Type, or an Op Name of A or of B)."""
        hit = self.rows[(self.rows["key A"] == key) | (self.rows["key B"] == key)]
        if hit.empty:
            raise KeyError(key)
        return hit.iloc[0]


# ------------------------------------------------------------------------------------------------
# Reading a side


def load_side(path: str, diag: Diagnostics, ensure: Optional[sources.EnsureStores] = None) -> Side:
    """One collection (an error when `path` holds none or several), with its iterations (`ensure`
    makes the store of a raw one: sources.EnsureStores)."""
    found = sources.discover(path)
    if not found:
        raise NoCollection(f"no profiling data here or below; looked for {sources.LOOKED_FOR}", path=path)
    if len(found) > 1:
        listed = ", ".join(os.path.relpath(f.path, path) for f in found[:6]) + (" ..." if len(found) > 6 else "")
        raise BadOption(f"{path} holds {len(found)} collections ({listed}); give -dir one collection")
    tables = sources.load(found[0], diag, ("op_summary", "op_statistic", "api_statistic"), ensure)
    if tables.op_rows is None and tables.op_statistic is None:
        raw = " (imported: no device tasks there)" if found[0].raw else ""
        raise NoData(f"no operator data{raw}; looked for {sources.LOOKED_FOR_REPORT['op_summary']}"
                     f"{sources.raw_reason([tables.raw_problem])}", path=path)
    trace = sources.read_trace(found[0], diag, ("iterations",), ops=tables.op_rows,
                               ops_source=tables.sources.get("op_summary", ""), ensure=ensure)
    note = sources.exports_note(found[0].path, [tables.raw_problem, trace.raw_problem],
                                list(tables.sources.values()) + list(trace.sources.values()))
    if note:
        diag.note(note)
    return Side(found[0].path, tables, trace.table("iterations"), drawing.short_name(found[0].path))


def _has_types(side: Side) -> bool:
    ops = side.tables.op_rows
    if ops is not None and sources.OP_TYPE in ops.columns and not ops[sources.OP_TYPE].isin(sources.NA_TEXTS).all():
        return True
    return ops is None and side.tables.op_statistic is not None


def _per_key(side: Side, by: str) -> pd.DataFrame:
    """The side's operators summed per key (over devices): key, Count, Total Time(us), Avg
    Time(us), First Start(us), OP Type, Task Type."""
    ops = side.tables.op_rows
    if by == "type" and ops is None:
        stat = side.tables.op_statistic
        assert stat is not None
        g = stat.groupby(sources.OP_TYPE, sort=False)
        out = g[["Count", "Total Time(us)"]].sum().reset_index()
        out[sources.TASK_TYPE] = g[sources.CORE_TYPE].agg(_types_joined).to_numpy()
        out["Avg Time(us)"] = out["Total Time(us)"] / out["Count"]
        out["First Start(us)"] = np.nan
        out["key"] = out[sources.OP_TYPE].astype(str)
        return out
    assert ops is not None
    column = sources.OP_TYPE if by == "type" else sources.OP_NAME
    out = sources.op_totals(ops, [column])
    out["key"] = out[column].astype(str)
    return out


# ------------------------------------------------------------------------------------------------
# Matching


def _types_joined(values: pd.Series) -> str:
    """The distinct texts of a column, sorted and '/'-joined."""
    texts: pd.Series = values.astype(str)
    return "/".join(sorted(set(texts.tolist())))


def _pair_in_order(a: pd.DataFrame, b: pd.DataFrame, key_a: pd.Series, key_b: pd.Series) -> pd.DataFrame:
    """Pairs (index in a, index in b) of rows with equal keys, the k-th of a key in A (by first
    start, then name) with the k-th in B."""
    def ranked(frame: pd.DataFrame, key: pd.Series) -> pd.DataFrame:
        f = pd.DataFrame({"k": key, "s": frame["First Start(us)"], "n": frame["key"], "i": frame.index})
        f = f[f["k"].notna().to_numpy()].sort_values(["k", "s", "n"], kind="stable", na_position="last")
        f["r"] = f.groupby("k").cumcount()
        return f
    ra, rb = ranked(a, key_a), ranked(b, key_b)
    pairs = ra.merge(rb, on=["k", "r"], suffixes=("_a", "_b"))
    return pairs[["i_a", "i_b"]]


def match(a: pd.DataFrame, b: pd.DataFrame, by: str) -> pd.DataFrame:
    """Pairs of rows of A and B (`ia`, `ib`; -1 on the side that has none) and how they matched.

    by type: equal OP Type. by name: (1) equal Op Name; then, among the rest, (2) names equal once
    every run of digits is ignored, with equal OP Type and Task Type (an op renumbered by the graph
    compiler: Conv2D_12 → Conv2D_13), several candidates paired in order of first start. Ops of
    different types are never paired (`.../Mul_131` and `.../FlashAttentionScore_131` are two
    different operators): an op whose type changed is one removed and one added."""
    same = a.reset_index().merge(b.reset_index(), on="key", suffixes=("_a", "_b"))
    pairs = [pd.DataFrame({"ia": same["index_a"], "ib": same["index_b"],
                           "how": SAME_TYPE if by == "type" else SAME_NAME})]
    if by == "name":
        rest_a, rest_b = a.drop(index=same["index_a"]), b.drop(index=same["index_b"])
        if not (rest_a.empty or rest_b.empty):
            def digitless(f: pd.DataFrame) -> pd.Series:   # the OP Type and Task Type are part of the key
                return f["key"].str.replace(r"\d+", "#", regex=True) + "\x00" + f[sources.OP_TYPE].astype(str) + \
                    "\x00" + f[sources.TASK_TYPE].astype(str)
            found = _pair_in_order(rest_a, rest_b, digitless(rest_a), digitless(rest_b))
            pairs.append(pd.DataFrame({"ia": found["i_a"], "ib": found["i_b"], "how": RENUMBERED}))
    matched = pd.concat(pairs, ignore_index=True)
    only_a = a.index.difference(pd.Index(matched["ia"]))
    only_b = b.index.difference(pd.Index(matched["ib"]))
    return pd.concat([matched, pd.DataFrame({"ia": only_a, "ib": -1, "how": ONLY_A}),
                      pd.DataFrame({"ia": -1, "ib": only_b, "how": ONLY_B})], ignore_index=True)


def _pick(frame: pd.DataFrame, at: np.ndarray, column: str, fill: object) -> np.ndarray:
    """frame[column] at positions `at` (-1: `fill`)."""
    values = frame[column].to_numpy()
    out: np.ndarray = np.full(len(at), fill, dtype=object if values.dtype == object else np.float64)
    ok = at >= 0
    out[ok] = values[at[ok]]
    return out


def _joined(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """`left`, or `right` where left is missing, or `left → right` where they differ."""
    left = left.astype(object)
    right = right.astype(object)
    out = np.where(pd.isna(left), right, left).astype(object)
    differ = ~pd.isna(left) & ~pd.isna(right) & (left != right)
    out[differ] = [f"{x} → {y}" for x, y in zip(left[differ], right[differ])]
    return out


def compare_sides(a: Side, b: Side, by: str) -> Comparison:
    """Match A's and B's operators (see `match`) and put them side by side, largest |Delta| first."""
    if by not in BY:
        raise BadOption(f"--by {by!r}: choose from {', '.join(BY)}")
    notes: List[str] = []
    used = by
    if by == "type" and not (_has_types(a) and _has_types(b)):
        lacking = " and ".join(s for s, side in (("A", a), ("B", b)) if not _has_types(side))
        if a.tables.op_rows is None or b.tables.op_rows is None:
            raise NoData(f"cannot compare: {lacking} has no OP Type and no operator rows to match by name")
        used = "name"
        notes.append(f"{lacking} carries no OP Type ({'; '.join(_source(s) for s in (a, b))}): compared by name")
    if used == "name":
        for side, tag in ((a, "A"), (b, "B")):
            if side.tables.op_rows is None:
                raise NoData(f"cannot compare by name: {tag} has only an op_statistic "
                             f"({side.tables.sources.get('op_statistic', '')}), no operator rows", path=side.path)
    ka, kb = _per_key(a, used), _per_key(b, used)
    pairs = match(ka, kb, used)
    ia, ib = pairs["ia"].to_numpy(np.int64), pairs["ib"].to_numpy(np.int64)
    key = sources.OP_TYPE if used == "type" else sources.OP_NAME
    total_a = _pick(ka, ia, "Total Time(us)", np.nan)
    total_b = _pick(kb, ib, "Total Time(us)", np.nan)
    rows = pd.DataFrame({
        key: _joined(_pick(ka, ia, "key", None), _pick(kb, ib, "key", None)),
        **({sources.OP_TYPE: _joined(_pick(ka, ia, sources.OP_TYPE, None), _pick(kb, ib, sources.OP_TYPE, None))}
           if used == "name" else {}),
        "Core Type" if used == "type" else sources.TASK_TYPE:
            _joined(_pick(ka, ia, sources.TASK_TYPE, None), _pick(kb, ib, sources.TASK_TYPE, None)),
        COUNT_A: _pick(ka, ia, "Count", np.nan), COUNT_B: _pick(kb, ib, "Count", np.nan),
        TOTAL_A: total_a, TOTAL_B: total_b,
        AVG_A: _pick(ka, ia, "Avg Time(us)", np.nan), AVG_B: _pick(kb, ib, "Avg Time(us)", np.nan),
        DELTA: np.nan_to_num(total_b) - np.nan_to_num(total_a),
        RATIO: np.where((total_a > 0) & ~np.isnan(total_b), total_b / np.where(total_a > 0, total_a, 1.0), np.nan),
        MATCH: pairs["how"].to_numpy(dtype=object),
        "key A": _pick(ka, ia, "key", None), "key B": _pick(kb, ib, "key", None)})
    rows = rows.assign(_abs=np.abs(rows[DELTA])).sort_values(["_abs", key], ascending=[False, True], kind="stable") \
        .drop(columns="_abs").reset_index(drop=True)
    for side, tag in ((a, "A"), (b, "B")):
        ops = side.tables.op_rows if side.tables.op_rows is not None else side.tables.op_statistic
        assert ops is not None
        devices = ops[sources.DEVICE].nunique() if sources.DEVICE in ops.columns else 1
        if devices > 1:
            notes.append(f"{tag} holds {devices} devices; their operators are summed")
    return Comparison(a, b, used, key, rows, end_to_end(a, b), notes)


# ------------------------------------------------------------------------------------------------
# End to end


def _ops_total(side: Side) -> Tuple[float, float]:
    ops = side.tables.op_rows
    if ops is not None:
        return float(len(ops)), float(ops[sources.DURATION].sum())
    stat = side.tables.op_statistic
    assert stat is not None
    return float(stat["Count"].sum()), float(stat["Total Time(us)"].sum())


def end_to_end(a: Side, b: Side) -> pd.DataFrame:
    """Metric, Count A, Count B, A(us), B(us), Delta(us), Ratio B/A: the total operator time, each
    model-execution API of the API statistic (its total and its time per call), and the iterations
    (their total and their time per iteration) when either side has them."""
    rows: List[Tuple[str, float, float, float, float]] = []
    (ca, ta), (cb, tb) = _ops_total(a), _ops_total(b)
    rows.append(("operators: total device time", ca, cb, ta, tb))
    ea, eb = sources.model_execution(a.tables.api_statistic), sources.model_execution(b.tables.api_statistic)
    keys: List[Tuple[str, str]] = []
    for frame in (ea, eb):
        if frame is not None:
            keys += [k for k in zip(frame[sources.LEVEL], frame[sources.API_NAME]) if k not in keys]
    for level, api in keys:
        def stats(frame: Optional[pd.DataFrame]) -> Tuple[float, float, float]:
            if frame is None:
                return np.nan, np.nan, np.nan
            hit = frame[(frame[sources.LEVEL] == level) & (frame[sources.API_NAME] == api)]
            if hit.empty:
                return np.nan, np.nan, np.nan
            return float(hit["Count"].iloc[0]), float(hit["Time(us)"].iloc[0]), float(hit["Avg(us)"].iloc[0])
        (na, sa, va), (nb, sb, vb) = stats(ea), stats(eb)
        rows.append((f"{api} ({level}): total", na, nb, sa, sb))
        rows.append((f"{api} ({level}): per call", na, nb, va, vb))
    if a.iterations is not None or b.iterations is not None:
        def its(frame: Optional[pd.DataFrame]) -> Tuple[float, float, float]:
            if frame is None:
                return np.nan, np.nan, np.nan
            t = frame[sources.ITER_TIME]
            return float(len(t)), float(t.sum()), float(t.mean())
        (na, sa, va), (nb, sb, vb) = its(a.iterations), its(b.iterations)
        rows.append(("iterations: total", na, nb, sa, sb))
        rows.append(("iterations: per iteration", na, nb, va, vb))
    frame = pd.DataFrame(rows, columns=[METRIC, COUNT_A, COUNT_B, "A(us)", "B(us)"])
    both = frame["A(us)"].notna() & frame["B(us)"].notna()
    frame[DELTA] = np.where(both, frame["B(us)"] - frame["A(us)"], np.nan)
    frame[RATIO] = np.where(both & (frame["A(us)"] > 0), frame["B(us)"] / frame["A(us)"].where(frame["A(us)"] > 0),
                            np.nan)
    return frame


# ------------------------------------------------------------------------------------------------
# Rendering


def _cell(value: object, column: str) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return sources.NA
    if isinstance(value, (float, np.floating)):
        if column in INTEGER_COLUMNS and float(value).is_integer():
            return str(int(value))
        if column == DELTA:
            return f"{float(value):+.3f}"
        return f"{float(value):.3f}"
    return str(value)


def _table(frame: pd.DataFrame) -> str:
    from tabulate import tabulate
    cols = list(frame.columns)
    cells = [[_cell(v, c) for v, c in zip(row, cols)] for row in frame.itertuples(index=False, name=None)]
    align = ["right" if frame[c].dtype.kind in "iuf" else "left" for c in cols]
    return tabulate(cells, headers=cols, tablefmt="simple", disable_numparse=True, colalign=align)


def _source(side: Side) -> str:
    report = "op_summary" if side.tables.op_rows is not None else "op_statistic"
    return drawing.relative(side.tables.sources.get(report, ""), side.path)


def render(result: Comparison, top: int) -> str:
    """The text compare prints."""
    rows = result.rows
    shown = rows if top == 0 else rows.head(top)
    unit = "op types" if result.by == "type" else "operators"
    counts = rows[MATCH].value_counts()
    n_a = int((rows["key A"].notna()).sum())
    n_b = int((rows["key B"].notna()).sum())
    both = n_a - int(counts.get(ONLY_A, 0))
    how = "" if result.by == "type" else " (" + ", ".join(
        f"{int(counts.get(h, 0))} {h}" for h in (SAME_NAME, RENUMBERED) if counts.get(h, 0)) + ")"
    lines = [f"Comparing operators by {'OP Type' if result.by == 'type' else 'Op Name'}",
             f"  A: {result.a.path}  [{_source(result.a)}]",
             f"  B: {result.b.path}  [{_source(result.b)}]"]
    lines += [f"  Note: {n}" for n in result.notes]
    lines.append(f"A has {n_a} {unit}, B {n_b}: {both} in both{how}, {int(counts.get(ONLY_A, 0))} only in A, "
                 f"{int(counts.get(ONLY_B, 0))} only in B.")
    what = f"top {len(shown)} of {len(rows)}" if len(shown) < len(rows) else f"all {len(rows)}"
    lines.append(f"\n{what} rows by |Delta|, largest first (Delta = Total B - Total A; Ratio = Total B / Total A)")
    lines.append(_table(shown.drop(columns=["key A", "key B"])))
    lines.append("\nEnd to end")
    lines.append(_table(result.e2e))
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------
# The chart


def _names(path_a: str, path_b: str) -> Tuple[str, str]:
    """Short names that tell two collections apart: their folder names, or their paths below the
    folder they share when those names are equal."""
    a, b = drawing.short_name(path_a), drawing.short_name(path_b)
    if a != b:
        return a, b
    try:
        common = os.path.commonpath([os.path.abspath(path_a), os.path.abspath(path_b)])
    except ValueError:
        return path_a, path_b
    return os.path.relpath(path_a, common), os.path.relpath(path_b, common)


def plot_comparison(result: Comparison, path: str, top: int) -> str:
    """Delta per row (largest |Delta| first; red: B slower, green: B faster, hatched: one side only)
    and the end-to-end totals of A and B side by side."""
    fig = drawing.new_figure("compare")
    left = fig.add_axes((0.26, 0.09, 0.44, 0.80))
    right = fig.add_axes((0.80, 0.09, 0.17, 0.80))
    n = top if top else drawing.MAX_BARS
    rows = result.rows.head(n)
    div, unit = drawing.time_unit(float(np.abs(rows[DELTA]).max()) if len(rows) else 1.0)
    values = rows[DELTA].to_numpy(np.float64) / div
    y = np.arange(len(rows))
    one_sided = rows[MATCH].isin([ONLY_A, ONLY_B]).to_numpy()
    colors = np.where(values > 0, "#c44e52", "#55a868")
    for mask, hatch in ((~one_sided, None), (one_sided, "//")):   # two calls: matched rows, one-sided rows
        if mask.any():
            left.barh(y[mask], values[mask], color=colors[mask], hatch=hatch, edgecolor="white", height=0.7)
    left.axvline(0, color="#333333", linewidth=0.8)
    left.set_yticks(y, [drawing.label(k, 50) for k in rows[result.key]], fontsize=8)
    left.invert_yaxis()
    span = float(np.abs(values).max()) if len(values) else 1.0
    span = span if span > 0 else 1.0
    left.set_xlim(-span * 1.45, span * 1.45)
    texts = [m if m in (ONLY_A, ONLY_B) else (f"{r:.2f}×" if r == r else "") for m, r in zip(rows[MATCH], rows[RATIO])]
    for at, v, text, d in zip(y.tolist(), values.tolist(), texts, rows[DELTA].tolist()):
        left.text(v + (span * 0.02 if v >= 0 else -span * 0.02), at,
                  f"{'+' if d >= 0 else '−'}{drawing.fmt_us(abs(d))}  {text}", va="center",
                  ha="left" if v >= 0 else "right", fontsize=7.5, color="#333333")
    left.set_xlabel(f"Change in total time, B − A ({unit}): right = B slower, left = B faster")
    left.grid(axis="x", alpha=0.3)
    what = f"top {len(rows)} of {len(result.rows)}" if len(rows) < len(result.rows) else f"all {len(rows)}"
    left.set_title(f"By {'OP Type' if result.by == 'type' else 'Op Name'} ({what}, largest change first; hatched: "
                   "one side only)", fontsize=10)
    totals = result.e2e[(result.e2e[METRIC].str.endswith(": total") | result.e2e[METRIC].str.startswith("operators"))
                        & result.e2e[RATIO].notna()]
    if len(totals):
        lanes = np.arange(len(totals))
        percent = totals[RATIO].to_numpy(np.float64) * 100
        colours = np.select([np.abs(percent - 100) < 0.5, percent > 100], ["#8c8c8c", "#c44e52"], "#55a868")
        right.barh(lanes, percent, height=0.6, color=colours)
        right.axvline(100, color="#333333", linewidth=0.8)
        right.set_yticks(lanes, [drawing.label(re.sub(r": total$", "", m), 28) for m in totals[METRIC]], fontsize=8)
        right.invert_yaxis()
        right.set_xlim(0, max(150.0, float(percent.max()) * 1.25))
        for at, (va, vb) in enumerate(zip(totals["A(us)"].tolist(), totals["B(us)"].tolist())):
            right.text(2, at + 0.42, f"{drawing.fmt_us(va)} → {drawing.fmt_us(vb)}", va="center", fontsize=7.5,
                       color="#333333")
        right.set_xlabel("B as % of A (100 = unchanged)")
        right.grid(axis="x", alpha=0.3)
    right.set_title("End to end", fontsize=10)
    name_a, name_b = _names(result.a.path, result.b.path)
    drawing.title(fig, f"B vs A — A: {name_a}   B: {name_b}",
                  f"A: {drawing.label(result.a.path, 90)}     B: {drawing.label(result.b.path, 90)}")
    drawing.save(fig, path)
    return path


# ------------------------------------------------------------------------------------------------
# Entry point


def compare(path_a: str, path_b: str, by: str = "type", top: int = DEFAULT_TOP, plot: bool = False,
            out: Optional[str] = None, diag: Optional[Diagnostics] = None,
            ensure: Optional[sources.EnsureStores] = None) -> str:
    """The text `msprof-kit compare -dir A -dir B` prints. by: 'type' or 'name'. top: rows shown
    (0: all). plot: also draw the chart into `out` (default plot.DEFAULT_OUT below the current
    directory), named compare_by_<by>.png; the text then ends with a `Wrote <file>` line. ensure:
    makes the stores of raw collections (sources.EnsureStores)."""
    if by not in BY:
        raise BadOption(f"--by {by!r}: choose from {', '.join(BY)}")
    if top < 0:
        raise BadOption(f"--top {top}: expected 0 (all rows) or a positive number of rows")
    diag = diag if diag is not None else Diagnostics()
    if plot:
        drawing.require_matplotlib()
    result = compare_sides(load_side(path_a, diag, ensure), load_side(path_b, diag, ensure), by)
    text = render(result, top)
    if plot:
        folder = out if out is not None else os.path.join(os.getcwd(), drawing.DEFAULT_OUT)
        target = plot_comparison(result, os.path.join(folder, FILE_NAME.format(by=result.by)), top)
        text += f"Wrote {target}\n"
    return text


__all__: Sequence[str] = ("compare", "compare_sides", "load_side", "match", "render", "plot_comparison",
                          "Comparison", "Side", "BY")
