"""The `gantt` chart of `plot`: device tasks per stream for one iteration (or a window, or the
whole run), with lanes of host API calls (per thread and level) above the device lanes. Nothing is
drawn one task at a time: bars are PolyCollections built from numpy arrays, and a lane holding
more tasks than the plot has pixels is merged at one-pixel resolution first (the title says so)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple, cast

import numpy as np
import pandas as pd

from .. import sources
from ..errors import BadOption, InvalidIteration
from .collection import Data
from .drawing import OTHER_COLOR, SIZES, color_map, fmt_us, label, legend_handles, new_figure, plural, time_unit, title

if TYPE_CHECKING:  # matplotlib is imported when something is drawn
    from matplotlib.figure import Figure


MAX_HOST_LANES = 12                # the busiest lanes are kept when there are more
MAX_DEVICE_LANES = 28
MIN_ALPHA = 0.2                    # opacity of a merged Gantt bar whose span is hardly busy
WINDOW_PAD = 0.03                  # the Gantt of an iteration shows this share of its length either side
LEVEL_COLORS = {"acl": "#9ecae1", "model": "#fdae6b", "node": "#a1d99b", "communication": "#fc9272",
                "hccl": "#fc9272", "runtime": "#bcbddc"}
LEVEL_ORDER = ("acl", "model", "node", "communication", "hccl", "runtime")


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


def plot_gantt(data: Data, iteration: Optional[int], start: Optional[float] = None,
               end: Optional[float] = None) -> Tuple["Figure", str]:
    """Draw `gantt`: host API lanes above device stream lanes, over iteration
    `iteration` (None: the median-length one, or the whole run) or the window `start`..`end`
    (µs after the run's start). Returns the figure and what it shows."""
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
        order = pd.to_numeric(device[sources.DEVICE], errors="coerce").fillna(-1) * 1e6 + \
            device[sources.STREAM].fillna(-1)
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
    return fig, f"{what}, {plural(len(ticks), 'lane')}" + (f"; {'; '.join(notes)}" if notes else "")
