"""The `cluster` chart of `plot`, for a cluster analysis output folder: each rank's step time as
stacked bars (computing, communication not overlapped, free; µs from cluster_step_trace_time.csv)
in the slow ranks' order, and per transport a src x dst heatmap of the links' bandwidth (GB/s,
coloured by its ratio to the median link of that transport, so a slow link stands out)."""
from __future__ import annotations

from typing import TYPE_CHECKING, List, Tuple

import numpy as np
import pandas as pd

from ..sources import cluster as cluster_files
from .drawing import fmt_us, new_figure, plural, time_unit, title

if TYPE_CHECKING:  # matplotlib is imported when something is drawn
    from matplotlib.figure import Figure

PARTS = (("Computing(us)", "computing", "#4c72b0"),
         ("Communication(Not Overlapped)(us)", "communication (not overlapped)", "#dd8452"),
         ("Free(us)", "free", "#b0b0b0"))
MAX_HEATMAPS = 3   # transports drawn; the others are counted in the subtitle
RATIO_RANGE = (0.0, 1.2)


def why_not(files: cluster_files.ClusterFiles) -> List[str]:
    """What the cluster chart lacks: the step trace, the link bandwidths (empty when it has both)."""
    missing = []
    if files.step_trace is None:
        missing.append(f"no {cluster_files.STEP_TRACE_CSV}")
    if cluster_files.link_bandwidth(files) is None:
        missing.append(f"no links in {cluster_files.MATRIX_JSON} or {cluster_files.SLOW_LINKS_CSV}")
    return missing


def _steps(fig: "Figure", summary: pd.DataFrame, slow: List[int]) -> None:
    ax = fig.add_axes((0.06, 0.12, 0.36, 0.74))
    x = np.arange(len(summary))
    total = np.zeros(len(summary))
    for column, _, _ in PARTS:
        total += np.nan_to_num(summary[column].to_numpy(np.float64))
    div, unit = time_unit(float(total.max()) if len(total) else 0.0)
    bottom = np.zeros(len(summary))
    for column, name, color in PARTS:
        values = np.nan_to_num(summary[column].to_numpy(np.float64)) / div
        ax.bar(x, values, bottom=bottom, color=color, label=name)
        bottom += values
    labels = [f"{int(r)}*" if int(r) in slow else str(int(r)) for r in summary["Rank"]]
    ax.set_xticks(x, labels)
    for xi, t in zip(x, total):
        ax.text(xi, t / div, fmt_us(float(t)), ha="center", va="bottom", fontsize=7)
    ax.set_ylim(0, float(bottom.max()) * 1.25 if len(bottom) and bottom.max() > 0 else 1.0)
    ax.set_xlabel("rank (* slow rank, slowest first)" if slow else "rank")
    ax.set_ylabel(f"Time ({unit})")
    ax.set_title("Step time per rank", fontsize=10)
    ax.legend(loc="upper center", ncol=3, fontsize=8)
    ax.grid(axis="y", alpha=0.3)


def _heatmaps(fig: "Figure", links: pd.DataFrame) -> Tuple[int, int]:
    """One heatmap per transport (the MAX_HEATMAPS with most links); returns (drawn, transports)."""
    counts = links["transport"].value_counts()
    transports = list(counts.index[:MAX_HEATMAPS])
    ranks = sorted(set(links["src"].tolist()) | set(links["dst"].tolist()))
    where = {r: i for i, r in enumerate(ranks)}
    width = 0.50 / max(len(transports), 1)
    image = None
    for n, transport in enumerate(transports):
        part = links[links["transport"] == transport]
        median = float(part["gbps"].median())
        grid = np.full((len(ranks), len(ranks)), np.nan)
        ratio = np.full_like(grid, np.nan)
        for src, dst, gbps in zip(part["src"], part["dst"], part["gbps"]):
            grid[where[src], where[dst]] = gbps
            ratio[where[src], where[dst]] = gbps / median if median > 0 else np.nan
        ax = fig.add_axes((0.47 + n * width, 0.12, width * 0.88, 0.74))
        image = ax.imshow(np.ma.masked_invalid(ratio), cmap="RdYlGn", vmin=RATIO_RANGE[0], vmax=RATIO_RANGE[1],
                          aspect="auto")
        for i in range(len(ranks)):
            for j in range(len(ranks)):
                if np.isfinite(grid[i, j]):
                    ax.text(j, i, f"{grid[i, j]:.3g}", ha="center", va="center", fontsize=7)
        ax.set_xticks(np.arange(len(ranks)), [str(r) for r in ranks], fontsize=7)
        ax.set_yticks(np.arange(len(ranks)), [str(r) for r in ranks], fontsize=7)
        ax.set_xlabel("dst rank")
        if n == 0:
            ax.set_ylabel("src rank")
        ax.set_title(f"{transport} GB/s (median {median:.3g})", fontsize=10)
    if image is not None:
        bar = fig.colorbar(image, ax=fig.axes[-len(transports):], fraction=0.03, pad=0.02)
        bar.set_label("bandwidth / transport median", fontsize=8)
    return len(transports), len(counts)


def plot_cluster(files: cluster_files.ClusterFiles) -> Tuple["Figure", str]:
    """Draw `cluster`: the per-rank step breakdown (stacked bars) and the link-bandwidth heatmaps.
    Returns the figure and what it shows."""
    summary = cluster_files.rank_summary(files)
    assert summary is not None
    links = cluster_files.link_bandwidth(files)
    assert links is not None
    slow: List[int] = []
    if files.slow_ranks is not None and {"rank", "votes"} <= set(files.slow_ranks.columns):
        voted = files.slow_ranks[files.slow_ranks["votes"] > 0]
        slow = [int(r) for r in voted["rank"].head(1)]
    fig = new_figure("cluster")
    _steps(fig, summary, slow)
    drawn, transports = _heatmaps(fig, links)
    sub = f"{plural(len(summary), 'rank')}, {plural(len(links), 'link')} over {plural(transports, 'transport')}"
    if drawn < transports:
        sub += f" ({drawn} drawn)"
    if files.slow_links is not None and len(files.slow_links):
        first = files.slow_links.iloc[0]
        sub += f"; slowest link {first['link']} {first['transport']} at {float(first['ratio']):.2f}x its median"
    title(fig, f"Cluster — {files.folder}", sub + f"     [{cluster_files.STEP_TRACE_CSV}, {cluster_files.MATRIX_JSON}]")
    return fig, f"{plural(len(summary), 'rank')} and {plural(len(links), 'link')}"
