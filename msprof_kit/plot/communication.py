"""The `communication` chart of `plot`: the time per collective type (total op time, with the
master planes' Notify_Wait time inside it) and the bandwidth of each transport (RDMA, HCCS, PCIE,
SDMA, SIO; analyze's communication rule, SDMA including HCCS, PCIE and SIO as the reference counts it)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Tuple, cast

import numpy as np
import pandas as pd

from .. import sources
from .collection import Data
from .drawing import bar_labels, fmt_us, label, new_figure, plural, title

if TYPE_CHECKING:  # matplotlib is imported when something is drawn
    from matplotlib.figure import Figure

TOTAL_COLOR = "#4c72b0"
WAIT_COLOR = "#dd8452"
BANDWIDTH_COLOR = "#55a868"


def plot_communication(data: Data) -> Tuple["Figure", str]:
    """Draw `communication`: bars of the total time per communication OP Type (all devices summed,
    the wait time drawn inside), and bars of the bandwidth (GB/s) per transport. Returns the figure
    and what it shows."""
    comm = data.tables.communication
    assert comm is not None
    columns = ["Total Time(us)", sources.WAIT_TIME, "Count"]
    # a list of labels selects a frame (pandas-stubs type the grouped sum as a Series)
    sums = cast(pd.DataFrame, comm.groupby(sources.OP_TYPE, sort=False)[columns].sum(min_count=1))
    per_type = sums.sort_values(by="Total Time(us)", ascending=True, kind="stable")
    fig = new_figure("communication")
    ax = fig.add_axes((0.16, 0.12, 0.44, 0.74))
    y = np.arange(len(per_type))
    total = per_type["Total Time(us)"].to_numpy(np.float64)
    wait = per_type[sources.WAIT_TIME].to_numpy(np.float64)
    ax.barh(y, total, color=TOTAL_COLOR, label="op time")
    if np.isfinite(wait).any():
        ax.barh(y, np.nan_to_num(wait), height=0.4, color=WAIT_COLOR, label="Notify_Wait (master plane)")
    ax.set_yticks(y, [label(t, 30) for t in per_type.index])
    span = float(np.nanmax(total)) if len(total) else 1.0
    bar_labels(ax, total, [f"{fmt_us(t)} · {plural(int(n), 'op')}" for t, n in zip(total, per_type["Count"])], span)
    ax.set_xlim(0, span * 1.3 if span > 0 else 1.0)
    ax.set_xlabel("Time (µs)")
    ax.set_title("Time per collective type", fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    bw_ax = fig.add_axes((0.68, 0.12, 0.29, 0.74))
    bw = data.tables.comm_bandwidth
    if bw is not None:
        per_kind = bw.groupby(sources.TRANSPORT, sort=False)[["Transit Size(MB)", "Transit Time(ms)"]].sum()
        per_kind = per_kind.reindex([k for k in ("RDMA", "HCCS", "PCIE", "SDMA", "SIO") if k in per_kind.index])
        size = per_kind["Transit Size(MB)"].to_numpy(np.float64)
        time = per_kind["Transit Time(ms)"].to_numpy(np.float64)
        gbs = np.divide(size, time, out=np.zeros_like(size), where=time > 0)  # MB / ms = GB/s
        x = np.arange(len(per_kind))
        bw_ax.bar(x, gbs, color=BANDWIDTH_COLOR)
        bw_ax.set_xticks(x, list(per_kind.index))
        for xi, v, mb in zip(x, gbs, size):
            if v > 0:
                bw_ax.text(xi, v, f"{v:.2f}\n{mb:.1f} MB", ha="center", va="bottom", fontsize=7)
        top = float(gbs.max()) if len(gbs) else 0.0
        bw_ax.set_ylim(0, top * 1.25 if top > 0 else 1.0)
    else:
        bw_ax.text(0.5, 0.5, "no bandwidth: no analyze/communication.json\nand no HCCL tasks in a store",
                   ha="center", va="center", fontsize=8, transform=bw_ax.transAxes)
    bw_ax.set_ylabel("Bandwidth (GB/s)")
    bw_ax.set_title("Bandwidth per transport", fontsize=10)
    bw_ax.grid(axis="y", alpha=0.3)
    sub = f"{plural(int(per_type['Count'].sum()), 'op')} of {plural(len(per_type), 'type')}     " \
          f"[{data.source('communication')}]"
    title(fig, f"Communication — {data.name}", sub)
    return fig, plural(len(per_type), "collective type")
