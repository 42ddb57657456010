"""The `memory` chart of `plot`: memory over time, the Device and APP totals of npu_mem (top) and
each module's reserved memory of npu_module_mem (bottom), one line per device and component; the
lines are the thinned series of sources/memory.py (each bucket's peak)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Tuple

import numpy as np

from .. import sources
from .collection import Data
from .drawing import new_figure, plural, time_unit, title
from .freq import PALETTE

if TYPE_CHECKING:  # matplotlib is imported when something is drawn
    from matplotlib.figure import Figure

TIME, VALUE, COMPONENT, KIND = "Timestamp(us)", "Memory(KB)", "Component", "Kind"
MB = 1024.0


def plot_memory(data: Data) -> Tuple["Figure", str]:
    """Draw `memory`: MB over time since the first sample, the sampled totals (Device, APP) above,
    the modules below (the axis says so when there are none). Returns the figure and what it shows."""
    series = data.tables.memory_series
    assert series is not None
    t0 = float(series[TIME].min())
    div, unit = time_unit(float(series[TIME].max()) - t0)
    fig = new_figure("memory")
    several = series[sources.DEVICE].nunique() > 1
    lines = 0
    for row, (kind, heading) in enumerate((("sampled", "Device and APP memory (npu_mem)"),
                                           ("module", "Reserved memory per module (npu_module_mem)"))):
        ax = fig.add_axes((0.08, 0.56 - 0.46 * row, 0.72, 0.34))
        part = series[series[KIND] == kind]
        keys = part[[sources.DEVICE, COMPONENT]].drop_duplicates().itertuples(index=False, name=None)
        for i, (dev, comp) in enumerate(keys):
            line = part[(part[sources.DEVICE] == dev) & (part[COMPONENT] == comp)].sort_values(TIME)
            x = (line[TIME].to_numpy(np.float64) - t0) / div
            name = f"{comp} (device {dev})" if several else str(comp)
            ax.step(x, line[VALUE].to_numpy(np.float64) / MB, where="post", color=PALETTE[i % len(PALETTE)],
                    label=name)
            lines += 1
        if part.empty:
            ax.text(0.5, 0.5, "no samples of this kind", ha="center", va="center", fontsize=8, transform=ax.transAxes)
        else:
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
        ax.set_title(heading, fontsize=10)
        ax.set_ylabel("Memory (MB)")
        ax.grid(alpha=0.3)
        if row == 1:
            ax.set_xlabel(f"Time since the first sample ({unit})")
    title(fig, f"Device memory — {data.name}", f"{plural(lines, 'line')}     [{data.source('memory')}]")
    return fig, plural(lines, "memory line")
