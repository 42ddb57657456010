"""The `freq` chart of `plot`: the recorded AI Core frequency over time, one line per device."""
from __future__ import annotations

from typing import TYPE_CHECKING, Tuple

import numpy as np

from .. import sources
from .collection import Data
from .drawing import new_figure, plural, time_unit, title

if TYPE_CHECKING:  # matplotlib is imported when something is drawn
    from matplotlib.figure import Figure


PALETTE = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c", "#ccb974",
           "#64b5cd")


def plot_freq(data: Data) -> Tuple["Figure", str]:
    """Draw `freq`: the recorded AI Core frequency over time, one line per device.
    Returns the figure and what it shows."""
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
    return fig, plural(len(rec), "record")
