"""The operator charts of `plot`: `top_ops` (the top-N operators by total device time), `op_types`
(total time per operator type, stacked by core type, and per core type) and `pmu` (a heatmap of
the AI Core PMU pipe ratios of the top operators, each operator's limiting pipe framed)."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional, Tuple

import numpy as np
import pandas as pd

from .. import sources
from .collection import Data
from .drawing import (MAX_BARS, bar_labels, color_map, fmt_us, label, legend_handles, new_figure, plural, time_unit,
                      title)

if TYPE_CHECKING:  # matplotlib is imported when something is drawn
    from matplotlib.figure import Figure


def _op_rows(ops: pd.DataFrame, top: int) -> Tuple[pd.DataFrame, int]:
    """Operators (summed per Op Name over devices) by total time, largest first, the first `top`
    (MAX_BARS when 0); and how many there are."""
    totals = sources.op_totals(ops, [sources.OP_NAME]).sort_values("Total Time(us)", ascending=False, kind="stable")
    n = top if top else MAX_BARS
    return totals.head(n).reset_index(drop=True), len(totals)


def plot_top_ops(data: Data, top: int) -> Tuple["Figure", str]:
    """Draw `top_ops`: the `top` operators (0: MAX_BARS) by total device time. Returns
    the figure and what it shows, for the 'Wrote' line."""
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
    return fig, what[0].lower() + what[1:]


def _type_frame(data: Data) -> Tuple[Optional[pd.DataFrame], str]:
    """(OP Type, Core Type, Total Time(us), Count) summed over devices, and its source."""
    stat = data.tables.op_statistic
    if stat is not None:
        g = stat.groupby([sources.OP_TYPE, sources.CORE_TYPE], sort=False)[["Total Time(us)", "Count"]].sum() \
            .reset_index()
        return g, data.source("op_statistic")
    ops = data.tables.op_rows
    if ops is None or sources.TASK_TYPE not in ops.columns:
        return None, ""
    g = pd.DataFrame({sources.OP_TYPE: sources.NA, sources.CORE_TYPE: ops[sources.TASK_TYPE].astype(str),
                      "d": ops[sources.DURATION]}) \
        .groupby([sources.OP_TYPE, sources.CORE_TYPE], sort=False)["d"].agg(["sum", "size"]).reset_index()
    g.columns = [sources.OP_TYPE, sources.CORE_TYPE, "Total Time(us)", "Count"]
    return g, data.source("op_summary") + " (no OP Type there: by task type only)"


def plot_op_types(data: Data, top: int) -> Tuple["Figure", str]:
    """Draw `op_types`: total time per operator type (the `top` ones, 0: MAX_BARS),
    stacked by core type, and per core type. Returns the figure and what it shows."""
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
        wide = typed.pivot_table(index=sources.OP_TYPE, columns=sources.CORE_TYPE, values="Total Time(us)",
                                 aggfunc="sum") \
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
    return fig, f"{plural(len(shown), 'operator type')}, {plural(len(cores), 'core type')}"


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


def plot_pmu(data: Data, top: int) -> Tuple["Figure", str]:
    """A heatmap: one row per top operator, one column per PMU ratio, the cell's colour and text its
    value; the row's largest ratio (the pipe that limits the operator) is framed and named at the
    right. Pipes run in parallel, so ratios are not added up. Returns the figure and what it shows."""
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
    return fig, f"{plural(len(rows), 'operator')}, {plural(len(used), 'ratio')}"
