"""What every chart of `plot` and `compare` shares: figures of a fixed pixel size on matplotlib's
Agg canvas (no display, no pyplot), PNG writing, labels, time units, and one colour per task or
core type in every chart of every run."""
from __future__ import annotations

import importlib.util
import os
import warnings
import zlib
from typing import TYPE_CHECKING, Dict, List, Sequence, Tuple

import numpy as np
import numpy.typing as npt
import pandas as pd

from ..errors import MsprofKitError, OutputError

if TYPE_CHECKING:  # matplotlib is imported when something is drawn
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


DPI = 100
SIZES = {"top_ops": (1400, 900), "op_types": (1600, 800), "gantt": (1800, 1000), "pmu": (1400, 900),
         "freq": (1400, 600), "communication": (1600, 700), "compare": (1800, 900),
         "memory": (1600, 900)}   # pixels (width, height) of each file
DEFAULT_OUT = "msprof_kit_plots"   # below the current directory, when no --out is given
MAX_BARS = 60                      # bars per chart when --top is 0 (all)
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
CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Sans SC", "WenQuanYi Zen Hei", "WenQuanYi Micro Hei",
             "Source Han Sans SC", "SimHei", "Microsoft YaHei")


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


def short_name(path: str) -> str:
    """The collection's folder name, with its parent when the name alone says little."""
    base = os.path.basename(os.path.normpath(path))
    parent = os.path.basename(os.path.dirname(os.path.normpath(path)))
    return f"{parent}/{base}" if parent and len(base) < 12 else base
