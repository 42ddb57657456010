"""`plot`: PNG charts of a collection, drawn with matplotlib's Agg canvas (no display, no pyplot).

Five kinds, each one file (docs/plot_compare.md shows an example of each):

* `top_ops`: the top-N operators by total device time, horizontal bars labelled with the time,
  the share of all operator time and the task count;
* `op_types`: total time per operator type (stacked by core type) and per core type;
* `gantt`: device tasks per stream for one iteration (or the whole run when the collection has no
  iterations), with lanes of host API calls (per thread and level) above the device lanes;
* `pmu`: the AI Core PMU pipe ratios (mac, vec, scalar, mte1/2/3, fixpipe, ...) of the top
  operators as a heatmap, each operator's largest ratio framed;
* `freq`: the AI Core frequency over time, when it was recorded.

The data comes from `sources/` (store, exported CSVs, unified DBs or timelines, whatever the
directory holds), so every kind works on raw, JOB and exported-only collections. A kind whose data
is absent is skipped with one line saying why. Nothing is drawn one task at a time: bars are
PolyCollections built from numpy arrays, and a lane holding more tasks than the plot has pixels
is merged at one-pixel resolution first (the title says so).
"""
from __future__ import annotations

import importlib.util
import os
import re
import warnings
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple, cast

import numpy as np
import numpy.typing as npt
import pandas as pd

from . import sources
from .errors import BadOption, Diagnostics, InvalidIteration, MsprofKitError, NoCollection, NoData, OutputError

if TYPE_CHECKING:  # matplotlib is imported when something is drawn
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

KINDS = ("top_ops", "op_types", "gantt", "pmu", "freq")
FILE_NAMES = {"top_ops": "top_operators.png", "op_types": "time_by_type.png", "gantt": "gantt.png",
              "pmu": "pmu_ratios.png", "freq": "aicore_freq.png"}
DPI = 100
SIZES = {"top_ops": (1400, 900), "op_types": (1600, 800), "gantt": (1800, 1000), "pmu": (1400, 900),
         "freq": (1400, 600), "compare": (1800, 900)}   # pixels (width, height) of each file
DEFAULT_TOP = 20
DEFAULT_OUT = "msprof_kit_plots"   # below the current directory, when no --out is given
MAX_BARS = 60                      # bars per chart when --top is 0 (all)
MAX_HOST_LANES = 12                # the busiest lanes are kept when there are more
MAX_DEVICE_LANES = 28
MIN_ALPHA = 0.2                    # opacity of a merged Gantt bar whose span is hardly busy
WINDOW_PAD = 0.03                  # the Gantt of an iteration shows this share of its length either side
LABEL_CHARS = 60                   # longer operator names are shortened in the middle
TYPE_COLORS = 9                    # task types named in a legend; the rest are counted
OTHER_COLOR = "#b0b0b0"
# One colour per task / core type, the same in every chart of every run (compare's too). Types
# not listed get a colour of EXTRA_COLORS chosen by a CRC-32 of their name: stable, never by rank.
TASK_TYPE_COLORS = {
    "AI_CORE": "#d62728", "KERNEL_AICORE": "#d62728", "AIC": "#d62728",
    "AI_VECTOR_CORE": "#1f77b4", "KERNEL_AIVEC": "#1f77b4", "AIV": "#1f77b4",
    "MIX_AIC": "#9467bd", "KERNEL_MIX_AIC": "#9467bd", "MIX_AIV": "#17becf", "KERNEL_MIX_AIV": "#17becf",
    "FFTS_PLUS": "#e377c2",
    "AI_CPU": "#2ca02c", "KERNEL_AICPU": "#2ca02c", "AICPU": "#2ca02c",
    "HCCL": "#ff7f0e", "COMMUNICATION": "#ff7f0e", "COMMUNICATION_OP": "#ff7f0e",
    "DSA": "#8c564b", "MEMCPY_ASYNC": "#bcbd22", "WRITE_BACK": "#7f7f7f",
    "EVENT_RECORD": "#c5b0d5", "EVENT_WAIT": "#c49c94", "NOTIFY_RECORD": "#f7b6d2", "NOTIFY_WAIT": "#dbdb8d",
}
EXTRA_COLORS = ("#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#9edae5", "#637939", "#8c6d31", "#843c39",
                "#7b4173", "#3182bd", "#e6550d", "#31a354")
PALETTE = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c", "#ccb974",
           "#64b5cd")
LEVEL_COLORS = {"acl": "#9ecae1", "model": "#fdae6b", "node": "#a1d99b", "communication": "#fc9272",
                "hccl": "#fc9272", "runtime": "#bcbddc"}
LEVEL_ORDER = ("acl", "model", "node", "communication", "hccl", "runtime")
PIPE_COLORS = {"mac": "#4c72b0", "cube": "#4c72b0", "vec": "#dd8452", "scalar": "#55a868", "mte1": "#c44e52",
               "mte2": "#8172b3", "mte3": "#937860", "fixpipe": "#da8bc3", "icache": "#8c8c8c"}
CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Sans SC", "WenQuanYi Zen Hei", "WenQuanYi Micro Hei",
             "Source Han Sans SC", "SimHei", "Microsoft YaHei")


# ------------------------------------------------------------------------------------------------
# Drawing helpers (compare.py uses them too)


def require_matplotlib() -> None:
    """An error naming the missing dependency, before anything is read, when matplotlib is absent."""
    if importlib.util.find_spec("matplotlib") is None:
        raise MsprofKitError("plotting needs matplotlib: pip install 'msprof-kit[plot]'")


def new_figure(kind: str) -> "Figure":
    """A figure of SIZES[kind] pixels on an Agg canvas, with the fonts chosen by `_fonts`."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    width, height = SIZES[kind]
    fig = Figure(figsize=(width / DPI, height / DPI), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def _fonts() -> List[str]:
    """DejaVu Sans, then any installed CJK family (op names may hold Chinese characters)."""
    from matplotlib import font_manager
    installed = {f.name for f in font_manager.fontManager.ttflist}
    return ["DejaVu Sans"] + [name for name in CJK_FONTS if name in installed]


def save(fig: "Figure", path: str) -> str:
    """Write the figure as PNG at exactly its pixel size (no tight bounding box)."""
    import matplotlib
    began = False
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with matplotlib.rc_context({"font.family": _fonts()}), warnings.catch_warnings():
            # a glyph the fonts lack (CJK without a CJK font) is drawn as a box; say nothing about it
            warnings.filterwarnings("ignore", message=r"Glyph .* missing from")
            began = True
            fig.savefig(path, dpi=DPI, format="png")
    except OSError as exc:   # an --out that cannot be written: one line, exit 10 as for exports
        if began and os.path.isfile(path):
            os.remove(path)   # no half-written PNG is left behind
        cause = "a file is in the way of the folder" if isinstance(exc, FileExistsError) else exc.strerror or str(exc)
        where = exc.filename if isinstance(exc.filename, str) else path
        raise OutputError(f"cannot write the chart {os.path.basename(path)} ({cause})", path=where,
                          cause=cause) from exc
    return path


def label(text: object, limit: int = LABEL_CHARS) -> str:
    """Text safe for a matplotlib label: `$` escaped (no mathtext), shortened in the middle."""
    s = str(text)
    if len(s) > limit:
        keep = limit - 1
        s = s[:keep // 2] + "…" + s[len(s) - (keep - keep // 2):]
    return s.replace("$", r"\$")


def plural(n: int, word: str) -> str:
    """`1 lane`, `2 lanes`."""
    return f"{n} {word}" + ("" if n == 1 else "s")


def time_unit(max_us: float) -> Tuple[float, str]:
    """(divisor, unit) to show µs values whose largest is `max_us`: µs, ms or s."""
    if max_us >= 2e6:
        return 1e6, "s"
    if max_us >= 2e3:
        return 1e3, "ms"
    return 1.0, "µs"


def fmt_us(us: float) -> str:
    """A duration in µs with a readable unit and 4 significant digits (`12.35 ms`)."""
    if us != us:  # NaN
        return "N/A"
    div, unit = time_unit(abs(us))
    return f"{us / div:.4g} {unit}"


def relative(source: str, root: str) -> str:
    """A source path relative to its collection's folder (as `show` prints it), when inside it."""
    if not source:
        return source
    try:
        rel = os.path.relpath(source, root)
    except ValueError:
        return source
    return source if rel.startswith("..") else rel


def title(fig: "Figure", text: str, sub: str = "") -> None:
    """The figure's bold title, and a grey subtitle under it (both cut to fit)."""
    fig.suptitle(label(text, 160), fontsize=14, fontweight="bold", y=0.985)
    if sub:
        fig.text(0.5, 0.935, label(sub, 220), ha="center", va="center", fontsize=9, color="#555555")


def type_color(kind: object) -> str:
    """The colour of a task or core type: TASK_TYPE_COLORS, else one of EXTRA_COLORS by a CRC-32
    of the name (upper-cased), so a type has one colour in every chart and every run."""
    name = str(kind).strip().upper()
    if name in TASK_TYPE_COLORS:
        return TASK_TYPE_COLORS[name]
    if name in ("", "N/A", "NAN", "NONE", "OTHER", "OTHERS"):
        return OTHER_COLOR
    return EXTRA_COLORS[zlib.crc32(name.encode()) % len(EXTRA_COLORS)]


def color_map(keys: "npt.ArrayLike") -> Dict[str, str]:
    """The colour of each distinct key (a task or core type), from `type_color`."""
    return {k: type_color(k) for k in pd.unique(pd.Series(np.asarray(keys, dtype=object)))}


def legend_handles(colors: Dict[str, str], order: Sequence[str], limit: int = TYPE_COLORS) -> list:
    """Patches of the first `limit` keys of `order`, and a line counting the keys left out."""
    from matplotlib.patches import Patch
    shown = [k for k in order if k in colors][:limit]
    handles = [Patch(facecolor=colors[k], label=label(k, 30)) for k in shown]
    rest = sum(1 for k in colors if k not in shown)
    if rest:
        handles.append(Patch(facecolor="none", edgecolor="none", label=f"+{plural(rest, 'more type')}"))
    return handles


def bar_labels(ax: "Axes", values: np.ndarray, texts: Sequence[str], span: float) -> None:
    """Texts just right of horizontal bars ending at `values` (in axis units)."""
    for y, (v, text) in enumerate(zip(values, texts)):
        ax.text(max(float(v), 0.0) + span * 0.01, y, text, va="center", fontsize=8, color="#333333")


# ------------------------------------------------------------------------------------------------
# What a collection offers


@dataclass
class Data:
    """One collection's tables and intervals, and a short name for titles."""
    tables: sources.Tables
    trace: sources.Trace
    name: str

    def source(self, report: str) -> str:
        """Where a table (a report of Tables, or a part of Trace) came from, relative to the collection."""
        where = self.tables.sources.get(report) or self.trace.sources.get(report, "")
        return relative(where, self.tables.path)


def _why_not(kind: str, data: Data) -> Optional[str]:
    """Why a kind cannot be drawn for a collection, or None when it can."""
    ops = data.tables.op_rows
    if kind in ("top_ops", "pmu") and ops is None:
        return f"no operator rows; looked for {sources.LOOKED_FOR_REPORT['op_summary']}"
    if kind == "op_types" and data.tables.op_statistic is None and (ops is None or sources.TASK_TYPE not in ops.columns):
        return "no operator types or core types; looked for " + sources.LOOKED_FOR_REPORT["op_statistic"]
    if kind == "pmu" and ops is not None and not sources.pmu_ratio_columns(ops):
        return (f"the operator rows ({data.source('op_summary')}) have no PMU *_ratio columns "
                "(collected without --ai-core / --aic-metrics, or a source that does not carry them)")
    if kind == "gantt" and data.trace.tasks is None and data.trace.apis is None:
        return "no device tasks or host API calls with start times; looked for " + sources.LOOKED_FOR_TRACE["tasks"] + \
            "; and " + sources.LOOKED_FOR_TRACE["apis"]
    if kind == "freq":
        freq = data.tables.freq
        if freq is None:
            return "no AI Core frequency; looked for " + sources.LOOKED_FOR_REPORT["freq"]
        recorded = freq[freq[sources.FREQ_SOURCE] == "recorded"]
        if recorded.empty:
            nominal = ", ".join(f"{v:g} MHz" for v in freq[sources.FREQ_MHZ].dropna().unique())
            return f"the frequency was not recorded over time; only the nominal AI Core frequency from info.json " \
                   f"({nominal}) is known"
    return None


def _op_rows(ops: pd.DataFrame, top: int) -> Tuple[pd.DataFrame, int]:
    """Operators (summed per Op Name over devices) by total time, largest first, the first `top`
    (MAX_BARS when 0); and how many there are."""
    totals = sources.op_totals(ops, [sources.OP_NAME]).sort_values("Total Time(us)", ascending=False, kind="stable")
    n = top if top else MAX_BARS
    return totals.head(n).reset_index(drop=True), len(totals)


# ------------------------------------------------------------------------------------------------
# The kinds


def plot_top_ops(data: Data, path: str, top: int) -> str:
    """Draw `top_ops` to `path`: the `top` operators (0: MAX_BARS) by total device time. Returns
    what it shows, for the 'Wrote' line."""
    ops = data.tables.op_rows
    assert ops is not None
    rows, total_ops = _op_rows(ops, top)
    grand = float(ops[sources.DURATION].sum())
    fig = new_figure("top_ops")
    ax = fig.add_axes((0.30, 0.08, 0.53, 0.82))   # the legend goes right of the axes, over no bar
    div, unit = time_unit(float(rows["Total Time(us)"].max()))
    values = rows["Total Time(us)"].to_numpy(np.float64) / div
    task_types: pd.Series = rows[sources.TASK_TYPE].astype(str)
    first_type = task_types.str.split("/").str[0]
    colors = color_map(first_type)
    y = np.arange(len(rows))
    ax.barh(y, values, color=[colors[t] for t in first_type], height=0.7)
    ax.set_yticks(y, [label(n) for n in rows[sources.OP_NAME]], fontsize=8)
    ax.invert_yaxis()
    span = float(values.max()) if len(values) else 1.0
    ax.set_xlim(0, span * 1.32)
    share = rows["Total Time(us)"].to_numpy(np.float64) / grand * 100 if grand > 0 else np.zeros(len(rows))
    bar_labels(ax, values, [f"{fmt_us(t)} · {s:.1f}% · {int(c)}×" for t, s, c in
                            zip(rows["Total Time(us)"], share, rows["Count"])], span)
    ax.set_xlabel(f"Total device time ({unit})")
    ax.grid(axis="x", alpha=0.3)
    fig.legend(handles=legend_handles(colors, list(dict.fromkeys(first_type))), title="Task Type", loc="upper left",
               bbox_to_anchor=(0.84, 0.90), fontsize=8, frameon=False)
    what = f"Top {len(rows)} of {total_ops} operators" if len(rows) < total_ops else f"All {total_ops} operators"
    title(fig, f"{what} by total device time — {data.name}",
          f"labels: total time · share of all operator time ({fmt_us(grand)}) · tasks     "
          f"[{data.source('op_summary')}]")
    save(fig, path)
    return what[0].lower() + what[1:]


def _type_frame(data: Data) -> Tuple[Optional[pd.DataFrame], str]:
    """(OP Type, Core Type, Total Time(us), Count) summed over devices, and its source."""
    stat = data.tables.op_statistic
    if stat is not None:
        g = stat.groupby([sources.OP_TYPE, sources.CORE_TYPE], sort=False)[["Total Time(us)", "Count"]].sum().reset_index()
        return g, data.source("op_statistic")
    ops = data.tables.op_rows
    if ops is None or sources.TASK_TYPE not in ops.columns:
        return None, ""
    g = pd.DataFrame({sources.OP_TYPE: sources.NA, sources.CORE_TYPE: ops[sources.TASK_TYPE].astype(str), "d": ops[sources.DURATION]}) \
        .groupby([sources.OP_TYPE, sources.CORE_TYPE], sort=False)["d"].agg(["sum", "size"]).reset_index()
    g.columns = [sources.OP_TYPE, sources.CORE_TYPE, "Total Time(us)", "Count"]
    return g, data.source("op_summary") + " (no OP Type there: by task type only)"


def plot_op_types(data: Data, path: str, top: int) -> str:
    """Draw `op_types` to `path`: total time per operator type (the `top` ones, 0: MAX_BARS),
    stacked by core type, and per core type. Returns what it shows."""
    frame, source = _type_frame(data)
    assert frame is not None
    fig = new_figure("op_types")
    left = fig.add_axes((0.14, 0.09, 0.48, 0.74))   # the legend sits above both panels, over no bar
    right = fig.add_axes((0.74, 0.09, 0.22, 0.74))
    cores = frame.groupby(sources.CORE_TYPE, sort=False)["Total Time(us)"].sum().sort_values(ascending=False)
    colors = color_map(list(cores.index))
    grand = float(cores.sum())
    typed = frame[~frame[sources.OP_TYPE].isin(sources.NA_TEXTS)]
    per_type = typed.groupby(sources.OP_TYPE, sort=False)["Total Time(us)"].sum().sort_values(ascending=False)
    n = top if top else MAX_BARS
    shown = per_type.head(n)
    if len(shown):
        div, unit = time_unit(float(shown.max()))
        wide = typed.pivot_table(index=sources.OP_TYPE, columns=sources.CORE_TYPE, values="Total Time(us)", aggfunc="sum") \
            .reindex(index=shown.index, columns=cores.index).fillna(0.0) / div
        y = np.arange(len(shown))
        base = np.zeros(len(shown))
        for core in wide.columns:   # a few core types: one call each
            left.barh(y, wide[core].to_numpy(), left=base, color=colors[core], height=0.7, label=label(core, 30))
            base += wide[core].to_numpy()
        left.set_yticks(y, [label(t, 40) for t in shown.index], fontsize=8)
        left.invert_yaxis()
        span = float(base.max()) if len(base) else 1.0
        left.set_xlim(0, span * 1.3)
        counts = typed.groupby(sources.OP_TYPE, sort=False)["Count"].sum().reindex(shown.index)
        bar_labels(left, base, [f"{fmt_us(t)} · {t / grand * 100:.1f}% · {int(c)}×" for t, c in
                                zip(shown.to_numpy(), counts.to_numpy())], span)
        left.set_xlabel(f"Total time ({unit})")
        handles = legend_handles(colors, list(cores.index))
        fig.legend(handles=handles, title="Core Type", loc="upper center", bbox_to_anchor=(0.5, 0.915),
                   ncol=min(len(handles), 6), fontsize=8, frameon=False)
        left.grid(axis="x", alpha=0.3)
        what = f"top {len(shown)} of {len(per_type)}" if len(shown) < len(per_type) else f"all {len(per_type)}"
        left.set_title(f"By operator type ({what})", fontsize=11)
    else:
        left.axis("off")
        left.text(0.5, 0.5, "No OP Type in this source", ha="center", va="center", fontsize=12, color="#555555")
    div, unit = time_unit(float(cores.max()))
    y = np.arange(len(cores))
    values = cores.to_numpy(np.float64) / div
    right.barh(y, values, color=[colors[c] for c in cores.index], height=0.6)
    right.set_yticks(y, [label(c, 24) for c in cores.index], fontsize=9)
    right.invert_yaxis()
    right.set_xlim(0, float(values.max()) * 1.6)
    bar_labels(right, values, [f"{fmt_us(t)} · {t / grand * 100:.1f}%" for t in cores.to_numpy()],
               float(values.max()))
    right.set_xlabel(f"Total time ({unit})")
    right.set_title("By core type", fontsize=11)
    right.grid(axis="x", alpha=0.3)
    title(fig, f"Total operator time by type — {data.name}", f"labels: total · share · tasks     [{source}]")
    save(fig, path)
    return f"{plural(len(shown), 'operator type')}, {plural(len(cores), 'core type')}"


def run_span(trace: sources.Trace) -> Tuple[float, float]:
    """(first start, last end) in µs of the device tasks, or of the API calls when there are no
    tasks: the whole run, whose start is the origin of --start / --end."""
    frame = trace.table("tasks")
    frame = frame if frame is not None else trace.table("apis")
    assert frame is not None
    valid = frame[frame[sources.START].notna() & frame[sources.DURATION].notna()]
    return float(valid[sources.START].min()), float((valid[sources.START] + valid[sources.DURATION]).max())


def choose_window(trace: sources.Trace, iteration: Optional[int], where: str, start: Optional[float] = None,
                  end: Optional[float] = None) -> Tuple[float, float, str]:
    """The Gantt's time window (µs) and its description: `start`..`end` µs after the run's start
    (`run_span`; either may be left out); iteration `iteration` (over all the devices and models
    that have it); without either, the iteration of median length when there are iterations, else
    the whole run."""
    if start is not None or end is not None:
        first, last = run_span(trace)
        lo = first + (start if start is not None else 0.0)
        hi = first + end if end is not None else max(last, lo)
        if not hi > lo and end is not None:
            raise BadOption(f"--start {start if start is not None else 0:g} --end {end if end is not None else last - first:g}: "
                            "expected a window whose end is after its start (µs after the run's start)")
        if hi < first or lo >= last:
            raise BadOption(f"--start/--end: {where} has no task or API call between {fmt_us(lo - first)} and "
                            f"{fmt_us(hi - first)} after the run's start; the run lasts {fmt_us(last - first)}")
        return lo, hi, f"the window {fmt_us(lo - first)} to {fmt_us(hi - first)}"
    its = trace.table("iterations")
    if iteration is not None:
        if its is None:
            raise BadOption(f"--iteration {iteration}: {where} records no iterations; looked for "
                            f"{sources.LOOKED_FOR_TRACE['iterations']}{sources.raw_reason([trace.raw_problem])}")
        ids = its[sources.ITERATION].dropna()
        chosen = its[its[sources.ITERATION] == iteration]
        if chosen.empty:
            raise InvalidIteration(f"--iteration {iteration}: {where} has iterations {int(ids.min())}-"
                                   f"{int(ids.max())}")
        return float(chosen[sources.ITER_START].min()), float(chosen[sources.ITER_END].max()), f"iteration {iteration}"
    if its is not None:
        ordered = its.sort_values([sources.ITER_TIME, sources.ITER_START], kind="stable").reset_index(drop=True)
        pick = ordered.iloc[(len(ordered) - 1) // 2]
        ident = pick[sources.ITERATION]
        chosen = its[its[sources.ITERATION] == ident] if ident == ident else its.iloc[[(len(ordered) - 1) // 2]]
        what = f"iteration {int(ident)}" if ident == ident else "an iteration"
        if len(its[sources.ITERATION].dropna().unique()) > 1:
            what += f" (median length of {len(its[sources.ITERATION].dropna().unique())})"
        return float(chosen[sources.ITER_START].min()), float(chosen[sources.ITER_END].max()), what
    first, last = run_span(trace)
    return first, last, "the whole run"


@dataclass
class Lanes:
    """Bars to draw: lane index, start and end (µs since the window start) and colour key."""
    lane: np.ndarray
    start: np.ndarray
    end: np.ndarray
    key: np.ndarray
    names: List[str]
    fill: Optional[np.ndarray] = None   # busy share of each merged bar (None: not merged)
    text: Optional[np.ndarray] = None   # the name of each bar (op or API), when not merged
    merged_from: int = 0     # tasks before merging (0: not merged)
    dropped_lanes: int = 0   # lanes left out (the least busy)


def _in_window(frame: Optional[pd.DataFrame], lo: float, hi: float, origin: float) -> Optional[pd.DataFrame]:
    """The intervals overlapping [lo, hi], clipped to it, with `s` / `e` in µs since `origin`."""
    if frame is None:
        return None
    start = frame[sources.START].to_numpy(np.float64)
    end = start + np.nan_to_num(frame[sources.DURATION].to_numpy(np.float64))
    keep = (start <= hi) & (end >= lo) & ~np.isnan(start)
    out = frame[keep].copy()
    out["s"] = np.clip(start[keep], lo, hi) - origin
    out["e"] = np.clip(end[keep], lo, hi) - origin
    return out if not out.empty else None


def _lanes(frame: pd.DataFrame, lane_keys: List[str], order: pd.Series, color_key: pd.Series, limit: int,
           px: float, text: Optional[pd.Series] = None) -> Lanes:
    """Bars of one side (host or device): lanes named by `lane_keys` values, ordered by `order`,
    the `limit` busiest kept; in lanes with more tasks than pixels, bars closer than `px` merged."""
    lane_name = frame[lane_keys[0]].astype(str)
    for k in lane_keys[1:]:
        lane_name = lane_name + " " + frame[k].astype(str)
    busy = (frame["e"] - frame["s"]).groupby(lane_name).sum()
    dropped = max(0, len(busy) - limit)
    kept = set(busy.sort_values(ascending=False, kind="stable").index[:limit])
    lane_order = pd.DataFrame({"name": lane_name, "order": order}).drop_duplicates("name") \
        .sort_values(["order", "name"], kind="stable")
    names = [n for n in lane_order["name"] if n in kept]
    index = pd.Series(np.arange(len(names)), index=names)
    sel = lane_name.isin(kept).to_numpy()
    lane = index.reindex(lane_name[sel]).to_numpy(np.int64)
    start = frame["s"].to_numpy(np.float64)[sel]
    end = frame["e"].to_numpy(np.float64)[sel]
    key = color_key.astype(str).to_numpy(dtype=object)[sel]
    counts = np.bincount(lane, minlength=len(names)) if len(lane) else np.zeros(0, np.int64)
    merged_from = 0
    fill = None
    names_of = text.astype(str).to_numpy(dtype=object)[sel] if text is not None else None
    if len(counts) and counts.max() > _pixel_budget():
        merged_from = len(lane)
        lane, start, end, key, fill = merge_bars(lane, start, end, key, px)
        names_of = None
    return Lanes(lane, start, end, key, names, fill, names_of, merged_from, dropped)


def _pixel_budget() -> int:
    """Tasks a lane may hold before its bars are merged: about the plot's width in pixels."""
    return int(SIZES["gantt"][0] * 0.8)


def merge_bars(lane: np.ndarray, start: np.ndarray, end: np.ndarray, key: np.ndarray,
               px: float) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Bars of each lane merged where the gap to the bars before is under `px` (one pixel), so that
    a lane never holds more bars than pixels. A merged bar spans its bars, takes the colour key
    that covers most of it, and has a `fill`: the share of its span its bars cover (at most 1).
    Vectorized: sort, running maximum of the ends, group ids by cumsum."""
    order = np.lexsort((start, lane))
    lane, start, end, key = lane[order], start[order], end[order], key[order]
    run_end = pd.Series(end).groupby(lane).cummax().to_numpy()
    prev_end = np.empty_like(run_end)
    prev_end[0] = -np.inf
    prev_end[1:] = run_end[:-1]
    new: np.ndarray = np.ones(len(lane), dtype=bool)
    new[1:] = (lane[1:] != lane[:-1]) | (start[1:] > prev_end[1:] + px)
    group = np.cumsum(new) - 1
    g_lane = lane[new]
    g_start = start[new]
    g_end = pd.Series(end).groupby(group).max().to_numpy()
    weight = pd.DataFrame({"g": group, "k": key, "w": end - start}).groupby(["g", "k"], sort=False)["w"].sum()
    best = weight.reset_index().sort_values(["g", "w"], ascending=[True, False], kind="stable") \
        .drop_duplicates("g").set_index("g")["k"]
    g_key = best.reindex(np.arange(group[-1] + 1)).to_numpy(dtype=object)
    covered = np.bincount(group, weights=end - start)
    span = g_end - g_start
    fill = np.where(span > 0, np.minimum(covered / np.where(span > 0, span, 1.0), 1.0), 1.0)
    return g_lane, g_start, g_end, g_key, fill


def _numbered(prefix: str, values: pd.Series, missing: str) -> np.ndarray:
    """`prefix` + the integer value of each cell, `missing` for NaN (vectorized)."""
    known = values.notna().to_numpy()
    text = prefix + values.fillna(-1).astype(np.int64).astype(str)
    return np.where(known, text.to_numpy(dtype=object), missing)


def rgba(keys: np.ndarray, colors: Dict[str, str]) -> np.ndarray:
    """An (n, 4) RGBA array of the colour of each key (OTHER_COLOR for keys not in `colors`),
    converted once per distinct key."""
    from matplotlib.colors import to_rgba_array
    codes, uniques = pd.factorize(pd.Series(keys, dtype=object))
    palette = to_rgba_array([colors.get(k, OTHER_COLOR) for k in uniques]) if len(uniques) else np.zeros((0, 4))
    return palette[codes] if len(codes) else np.zeros((0, 4))


LABEL_PX_PER_CHAR = 6.0   # width of a character of a Gantt bar label (7 pt DejaVu Sans at 100 dpi), px
MAX_GANTT_LABELS = 400    # the widest bars are labelled first


def bar_texts(names: np.ndarray, width_px: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(indices, texts) of the bars whose name fits inside them: the name's last `/` part, cut to
    the bar's width; at most MAX_GANTT_LABELS, the widest bars first."""
    fits = np.floor((width_px - 4) / LABEL_PX_PER_CHAR).astype(np.int64)
    candidates = np.flatnonzero(fits >= 4)
    candidates = candidates[np.argsort(-width_px[candidates], kind="stable")][:MAX_GANTT_LABELS]
    texts = []
    for i in candidates:
        name = str(names[i]).rsplit("/", 1)[-1]
        n = int(fits[i])
        texts.append(name if len(name) <= n else name[:n - 1] + "…")
    return candidates, np.array(texts, dtype=object)


def _level_rank(level: pd.Series) -> pd.Series:
    rank = {name: i for i, name in enumerate(LEVEL_ORDER)}
    names: pd.Series = level.astype(str)
    return names.str.lower().map(rank).fillna(len(LEVEL_ORDER))


def plot_gantt(data: Data, path: str, iteration: Optional[int], start: Optional[float] = None,
               end: Optional[float] = None) -> str:
    """Draw `gantt` to `path`: host API lanes above device stream lanes, over iteration
    `iteration` (None: the median-length one, or the whole run) or the window `start`..`end`
    (µs after the run's start). Returns what it shows."""
    from matplotlib.collections import PolyCollection
    trace = data.trace
    lo, hi, what = choose_window(trace, iteration, data.tables.path, start, end)
    if not hi > lo:
        hi = lo + 1.0
    one = what.startswith("iteration")
    window = what.startswith("the window")
    pad = WINDOW_PAD * (hi - lo) if one else 0.0   # a little context around an iteration
    div, unit = time_unit(hi - lo)
    fig = new_figure("gantt")
    ax = fig.add_axes((0.14, 0.08, 0.70, 0.82))
    axes_px = SIZES["gantt"][0] * 0.70
    px = (hi - lo + 2 * pad) / axes_px
    host = _in_window(trace.apis, lo - pad, hi + pad, lo)
    device = _in_window(trace.tasks, lo - pad, hi + pad, lo)
    sides: List[Tuple[str, Lanes, Dict[str, str]]] = []
    if host is not None:
        host = host.assign(thread=_numbered("T", host[sources.THREAD], "T?"), lvl=host[sources.LEVEL].astype(str))
        order = host[sources.THREAD].fillna(-1) * 100 + _level_rank(host[sources.LEVEL])
        lanes = _lanes(host, ["thread", "lvl"], order, host[sources.LEVEL].astype(str).str.lower(), MAX_HOST_LANES, px,
                       host[sources.API_NAME] if sources.API_NAME in host.columns else None)
        colors = {k: LEVEL_COLORS.get(k, OTHER_COLOR) for k in np.unique(lanes.key)}
        sides.append(("host", lanes, colors))
    if device is not None:
        dev = device[sources.DEVICE].astype(str)
        several = dev.nunique() > 1
        device = device.assign(dev=("NPU" + dev) if several else "",
                               stream=_numbered("stream ", device[sources.STREAM], "tasks"))
        order = pd.to_numeric(device[sources.DEVICE], errors="coerce").fillna(-1) * 1e6 + device[sources.STREAM].fillna(-1)
        ttype = device[sources.TASK_TYPE].astype(str)
        lanes = _lanes(device, ["dev", "stream"] if several else ["stream"], order, ttype, MAX_DEVICE_LANES, px,
                       device[sources.OP_NAME] if sources.OP_NAME in device.columns else None)
        colors = color_map(lanes.key)
        sides.append(("device", lanes, colors))
    offset = 0
    labelled = 0
    ticks: List[Tuple[float, str]] = []
    notes: List[str] = []
    handles = []
    from matplotlib.patches import Patch
    for side, lanes, colors in sides:
        n = len(lanes.names)
        if len(lanes.lane):
            width = np.maximum(lanes.end - lanes.start, px * 0.8)   # at least about a pixel, so every bar shows
            x0 = lanes.start / div
            x1 = (lanes.start + width) / div
            y: np.ndarray = (lanes.lane + offset).astype(np.float64)
            verts = np.stack([np.column_stack([x0, y - 0.38]), np.column_stack([x0, y + 0.38]),
                              np.column_stack([x1, y + 0.38]), np.column_stack([x1, y - 0.38])], axis=1)
            faces = rgba(lanes.key, colors)
            if lanes.fill is not None:   # a merged bar is as opaque as its span is busy
                faces[:, 3] = MIN_ALPHA + (1 - MIN_ALPHA) * lanes.fill
            # an (n, 4, 2) array, not a list: PolyCollection's vectorized path (the stubs say a sequence of
            # (4, 2) arrays, which the array is to everything PolyCollection does with it)
            polygons = cast(Sequence[np.ndarray], verts)
            ax.add_collection(PolyCollection(polygons, facecolors=faces, edgecolors="none", linewidths=0))
            if lanes.text is not None:   # op (API) names inside the bars wide enough to hold them
                at, texts = bar_texts(lanes.text, (lanes.end - lanes.start) / px)
                for i, text in zip(at.tolist(), texts.tolist()):
                    ax.text((lanes.start[i] + lanes.end[i]) / 2 / div, y[i], label(text), ha="center",
                            va="center", fontsize=7, color="#111111", clip_on=True)
                labelled += len(at)
        ticks += [(offset + i, ("host " if side == "host" else "") + name) for i, name in enumerate(lanes.names)]
        if lanes.merged_from:
            notes.append(f"{lanes.merged_from} {'API calls' if side == 'host' else 'tasks'} → {len(lanes.lane)} bars")
        if lanes.dropped_lanes:
            notes.append(f"busiest {n} of {n + lanes.dropped_lanes} {side} lanes")
        if side == "host":
            levels = [k for k in LEVEL_ORDER if k in colors] + sorted(k for k in colors if k not in LEVEL_ORDER)
            handles += [Patch(facecolor=colors[k], label=f"API: {k}") for k in levels]
        else:
            weights = pd.Series(lanes.end - lanes.start).groupby(lanes.key).sum().sort_values(ascending=False)
            handles += legend_handles(colors, list(weights.index))
        offset += n
        if side == "host" and len(sides) > 1:
            ax.axhline(offset - 0.5, color="#444444", linewidth=1.0)
    ax.set_ylim(offset - 0.5, -0.5)
    ax.set_xlim(-pad / div, (hi - lo + pad) / div)
    if one:
        for x in (0.0, (hi - lo) / div):
            ax.axvline(x, color="#222222", linestyle="--", linewidth=1.0)
    ax.set_yticks([t for t, _ in ticks], [label(n, 28) for _, n in ticks], fontsize=8)
    ax.set_xlabel(f"Time since the {what.split(' (')[0]} start ({unit})" if one else
                  f"Time since the window's start ({unit})" if window else
                  f"Time since the first {'task' if trace.tasks is not None else 'API call'} ({unit}): the "
                  f"run's start, the origin of --start / --end")
    ax.grid(axis="x", alpha=0.3)
    if handles:
        fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.855, 0.90), fontsize=8, title="Colour",
                   frameon=False)
    read_from = "; ".join(f"{p}: {data.source(p)}" for p in ("apis", "tasks") if p in trace.sources)
    merged = any(lanes.merged_from for _, lanes, _ in sides)
    sub = (f"{what.split(' (')[0]}: {fmt_us(hi - lo)} between the dashed lines" if one else
           f"span {fmt_us(hi - lo)}") + (" · " + " · ".join(notes) if notes else "") + \
        (" (bars < 1 px apart merged; paler = less busy; --start/--end µs zoom in)" if merged else "") + \
        (f" · {plural(labelled, 'bar')} labelled" if labelled else "") + f"     [{read_from}]"
    title(fig, f"Host APIs and device streams, {what} — {data.name}", sub)
    save(fig, path)
    return f"{what}, {plural(len(ticks), 'lane')}" + (f"; {'; '.join(notes)}" if notes else "")


def _pipe(column: str) -> Tuple[str, bool]:
    """(pipe name, on the vector core) of a PMU ratio column: `aiv_mte2_ratio` → ('mte2', True)."""
    vector = column.startswith("aiv_")
    name = re.sub(r"^(aic|aiv)_", "", column)
    return re.sub(r"_ratio$", "", name), vector


PIPE_ORDER = ("mac", "cube", "vec", "scalar", "mte1", "mte2", "mte3", "fixpipe", "icache")
MAX_CELL_TEXTS = 900   # cells written with their value; larger heatmaps show colours only


def _ratio_order(column: str) -> Tuple[int, int, str]:
    """AI Core ratios first, then AI Vector Core ones; pipes in PIPE_ORDER, the rest by name."""
    pipe, vector = _pipe(column)
    head = pipe.split("_")[0]
    return (int(vector), PIPE_ORDER.index(head) if head in PIPE_ORDER else len(PIPE_ORDER), column)


def limiting(values: np.ndarray) -> np.ndarray:
    """The column of each row's largest ratio (its limiting pipe), -1 for a row with none."""
    filled = np.where(np.isnan(values), -np.inf, values)
    best = np.argmax(filled, axis=1) if values.shape[1] else np.zeros(len(values), dtype=np.int64)
    return np.where(np.isfinite(filled.max(axis=1)) if values.shape[1] else False, best, -1)


def plot_pmu(data: Data, path: str, top: int) -> str:
    """A heatmap: one row per top operator, one column per PMU ratio, the cell's colour and text its
    value; the row's largest ratio (the pipe that limits the operator) is framed and named at the
    right. Pipes run in parallel, so ratios are not added up."""
    from matplotlib.patches import Rectangle
    ops = data.tables.op_rows
    assert ops is not None
    ratios = sources.pmu_ratio_columns(ops)
    totals = sources.op_totals(ops, [sources.OP_NAME]).sort_values("Total Time(us)", ascending=False, kind="stable")
    has = totals[ratios].fillna(0.0).sum(axis=1) > 0
    n = top if top else MAX_BARS
    rows = totals[has].head(n).reset_index(drop=True)
    used = sorted((c for c in ratios if rows[c].fillna(0.0).gt(0).any()), key=_ratio_order)
    values = rows[used].to_numpy(np.float64) if used else np.zeros((len(rows), 0))
    fig = new_figure("pmu")
    ax = fig.add_axes((0.30, 0.06, 0.50, 0.76))
    top_value = max(1.0, float(np.nanmax(values)) if values.size and not np.isnan(values).all() else 1.0)
    import matplotlib
    cmap = matplotlib.colormaps["YlOrRd"].with_extremes(bad="#eeeeee")   # grey: no value
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=0.0, vmax=top_value, aspect="auto",
                      interpolation="nearest")
    limit = limiting(values)
    small = len(rows) * len(used) <= MAX_CELL_TEXTS
    size = 8 if len(rows) <= 25 else 6
    for r in range(len(rows)):
        c = int(limit[r])
        if c >= 0:   # the limiting pipe: framed
            ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, edgecolor="#000000", linewidth=2.2))
        if small:
            for col in range(len(used)):
                v = values[r, col]
                if v == v:
                    ax.text(col, r, f"{v:.2f}", ha="center", va="center", fontsize=size,
                            fontweight="bold" if col == c else "normal",
                            color="white" if v > 0.6 * top_value else "#222222")
    ax.set_xticks(np.arange(len(used)), [c.replace("_ratio", "") for c in used], rotation=40, ha="left",
                  fontsize=8)
    ax.xaxis.tick_top()
    names = [f"{label(n, 44)}  [{t.split('/')[0]}]" for n, t in zip(rows[sources.OP_NAME], rows[sources.TASK_TYPE])]
    ax.set_yticks(np.arange(len(rows)), names, fontsize=size)
    for r in range(len(rows)):   # the limiting pipe named right of the row
        c = int(limit[r])
        if c >= 0:
            ax.text(len(used) - 0.5 + 0.15, r, f"{used[c].replace('_ratio', '')} {values[r, c]:.2f}",
                    ha="left", va="center", fontsize=size, color="#000000", clip_on=False)
    ax.text(len(used) - 0.5 + 0.15, -0.9, "limiting pipe", ha="left", va="bottom", fontsize=8,
            fontweight="bold", clip_on=False)
    bar = fig.add_axes((0.93, 0.06, 0.015, 0.76))
    fig.colorbar(image, cax=bar).set_label("ratio of the core's busy time", fontsize=8)
    title(fig, f"AI Core PMU ratios of the top {len(rows)} operators by total time — {data.name}",
          f"mean over each operator's tasks; framed: the highest ratio of the row, the pipe that limits it; "
          f"aiv_: AI Vector Core; {int((~has).sum())} operators without PMU data left out     "
          f"[{data.source('op_summary')}]")
    save(fig, path)
    return f"{plural(len(rows), 'operator')}, {plural(len(used), 'ratio')}"


def plot_freq(data: Data, path: str) -> str:
    """Draw `freq` to `path`: the recorded AI Core frequency over time, one line per device.
    Returns what it shows."""
    freq = data.tables.freq
    assert freq is not None
    rec = freq[(freq[sources.FREQ_SOURCE] == "recorded") & freq[sources.FREQ_TIME].notna()]
    t0 = float(rec[sources.FREQ_TIME].min())
    div, unit = time_unit(float(rec[sources.FREQ_TIME].max()) - t0)
    fig = new_figure("freq")
    ax = fig.add_axes((0.08, 0.12, 0.86, 0.76))
    devices = sorted(rec[sources.DEVICE].unique(), key=lambda d: (len(d), d))
    for i, dev in enumerate(devices):   # one line per device
        part = rec[rec[sources.DEVICE] == dev].sort_values(sources.FREQ_TIME)
        x = (part[sources.FREQ_TIME].to_numpy(np.float64) - t0) / div
        ax.step(x, part[sources.FREQ_MHZ].to_numpy(np.float64), where="post", marker="o", markersize=3,
                color=PALETTE[i % len(PALETTE)], label=f"device {dev}")
    top = float(rec[sources.FREQ_MHZ].max())
    ax.set_ylim(0, top * 1.15 if top > 0 else 1.0)
    ax.set_xlabel(f"Time since the first record ({unit})")
    ax.set_ylabel("AI Core frequency (MHz)")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    values = ", ".join(f"{v:g}" for v in sorted(rec[sources.FREQ_MHZ].unique())[:6])
    title(fig, f"AI Core frequency — {data.name}",
          f"{plural(len(rec), 'record')} on {plural(len(devices), 'device')}; values seen: {values} MHz     "
          f"[{data.source('freq')}]")
    save(fig, path)
    return plural(len(rec), "record")


# ------------------------------------------------------------------------------------------------
# Entry point


def short_name(path: str) -> str:
    """The collection's folder name, with its parent when the name alone says little."""
    base = os.path.basename(os.path.normpath(path))
    parent = os.path.basename(os.path.dirname(os.path.normpath(path)))
    return f"{parent}/{base}" if parent and len(base) < 12 else base


def _out_dirs(paths: Sequence[str], root: str, out: str) -> Dict[str, str]:
    """The output folder of each collection: `out` itself for one, else a sub-folder per collection
    named after its path below `root`."""
    if len(paths) == 1:
        return {paths[0]: out}
    dirs = {}
    for p in paths:
        rel = os.path.relpath(p, root)
        dirs[p] = os.path.join(out, re.sub(r"[^\w.-]+", "_", rel if rel != "." else os.path.basename(p)))
    return dirs


def collection_data(found: sources.Found, diag: Diagnostics, ensure: Optional[sources.EnsureStores] = None) -> Data:
    """The tables and intervals of one collection (`ensure`: see sources.EnsureStores)."""
    tables = sources.load(found, diag, ensure=ensure)
    trace = sources.read_trace(found, diag, ops=tables.op_rows, ops_source=tables.sources.get("op_summary", ""),
                         ensure=ensure)
    note = sources.exports_note(found.path, [tables.raw_problem, trace.raw_problem],
                          list(tables.sources.values()) + list(trace.sources.values()))
    if note:
        diag.note(note)
    return Data(tables, trace, short_name(found.path))


def plot(path: str, out: Optional[str], top: int = DEFAULT_TOP, iteration: Optional[int] = None,
         diag: Optional[Diagnostics] = None, start: Optional[float] = None, end: Optional[float] = None,
         ensure: Optional[sources.EnsureStores] = None) -> List[str]:
    """Draw every plot kind for each collection at or below `path`; returns one line per file
    written (`Wrote <file>: <what>`) and per kind skipped (`Skipped <kind>: <why>`).

    out: the output folder (default DEFAULT_OUT below the current directory); with several
    collections each gets a sub-folder. top: bars in the operator charts (0: all, up to MAX_BARS).
    iteration: the iteration the Gantt shows (default: the median-length one, or the whole run).
    start, end: instead, the Gantt's window in µs after the run's start (its first device task, or
    first API call without tasks); either may be left out. ensure: makes the stores of raw
    collections (sources.EnsureStores)."""
    if top < 0:
        raise BadOption(f"--top {top}: expected 0 (all, up to {MAX_BARS}) or a positive number of bars")
    if iteration is not None and iteration < 0:
        raise BadOption(f"--iteration {iteration}: expected an iteration number")
    if iteration is not None and (start is not None or end is not None):
        raise BadOption("--iteration and --start/--end both choose the Gantt's window: give one of them")
    for name, value in (("--start", start), ("--end", end)):
        if value is not None and not (value >= 0 and np.isfinite(value)):
            raise BadOption(f"{name} {value:g}: expected µs after the run's start, 0 or more")
    require_matplotlib()
    diag = diag if diag is not None else Diagnostics()
    found = sources.discover(path)
    if not found:
        raise NoCollection(f"no profiling data here or below; looked for {sources.LOOKED_FOR}", path=path)
    out = out if out is not None else os.path.join(os.getcwd(), DEFAULT_OUT)
    dirs = _out_dirs([f.path for f in found], path, out)
    lines: List[str] = []
    reasons: List[str] = []
    problems: List[Optional[str]] = []
    for f in found:
        data = collection_data(f, diag, ensure)
        problems += [data.tables.raw_problem, data.trace.raw_problem]
        where = "" if len(found) == 1 else f" [{f.path}]"
        stand_in = data.tables.raw_problem or data.trace.raw_problem
        for kind in KINDS:
            why = _why_not(kind, data)
            if why:
                if stand_in:  # exported files stood in for the raw data (the note says why)
                    why += "; not in the exported files read instead of the raw data"
                lines.append(f"Skipped {kind}{where}: {why}")
                reasons.append(f"{kind}: {why}")
                continue
            target = os.path.join(dirs[f.path], FILE_NAMES[kind])
            if kind == "top_ops":
                what = plot_top_ops(data, target, top)
            elif kind == "op_types":
                what = plot_op_types(data, target, top)
            elif kind == "gantt":
                what = plot_gantt(data, target, iteration, start, end)
            elif kind == "pmu":
                what = plot_pmu(data, target, top)
            else:
                what = plot_freq(data, target)
            lines.append(f"Wrote {target}: {what}")
    if not any(line.startswith("Wrote ") for line in lines):
        raise NoData("nothing to plot: " + "; ".join(dict.fromkeys(reasons)) + sources.raw_reason(problems), path=path)
    return lines
