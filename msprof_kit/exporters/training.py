"""The training-trace points of each step-trace iteration: FP start (tag 2), BP end (tag 3), the
all-reduces (tags 10000-19999) and the Data Aug Bound, from the store's KIT_STEP_TRACE, as the
reference derives them (mscalculate/step_trace/tag_handler/, create_step_table.py).

* A tag belongs to the iteration whose opening and closing records (MODEL_START, MODEL_END,
  ITER_END) surround it in the per-model time order; tags outside every iteration are dropped.
* FP start and BP end are the iteration's last FP and last BP tag.
* All-reduce tags pair per stream: an even tag opens a reduce, an odd tag ends the stream's last
  reduce (a later odd tag moves that end). Within an iteration, the reduces come stream by
  stream (in the order the streams first tag in it), each stream's in time order.
* Data Aug Bound: FP start minus the end of the closest iteration (any model of the device, in
  the order of iteration ends) ending before it; none when no such iteration precedes it."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np
import pandas as pd

from ..store import iteration_spans
from .context import ExportContext

FP_TAG, BP_TAG = 2, 3
REDUCE_FIRST, REDUCE_LAST = 10000, 19999

Key = Tuple[int, int, int]  # (device, model, iteration index)
Reduce = Tuple[int, Optional[int]]  # (start ns, end ns or None when no end tag came)


@dataclass
class TrainingTrace:
    """The points of every iteration that has them, keyed by (device, model, iteration index);
    times in local ns. An iteration without a point has no key in that point's dict."""

    fp: Dict[Key, int] = field(default_factory=dict)
    bp: Dict[Key, int] = field(default_factory=dict)
    data_aug: Dict[Key, int] = field(default_factory=dict)
    reduces: Dict[Key, List[Reduce]] = field(default_factory=dict)
    # the ended reduces of the iterations before (by device, then time): the C++ timeline numbers
    # its Reduce events through the whole export
    reduces_before: Dict[Key, int] = field(default_factory=dict)

    def most_reduces(self, device: Optional[int] = None) -> int:
        """The largest number of reduces of one iteration (of one device, or of all)."""
        return max((len(r) for k, r in self.reduces.items() if device is None or k[0] == device), default=0)

    def ended(self, key: Key) -> List[Tuple[int, int]]:
        """The reduces of an iteration that have an end tag."""
        return [(start, end) for start, end in self.reduces.get(key, []) if end is not None]

    def unended(self) -> int:
        """How many reduces have a start tag and no end tag."""
        return sum(end is None for per in self.reduces.values() for _, end in per)


def training_trace(ctx: ExportContext) -> TrainingTrace:
    """The training-trace points of the store's step trace (empty without KIT_STEP_TRACE)."""
    out = TrainingTrace()
    if not ctx.has("KIT_STEP_TRACE"):
        return out
    rows = pd.read_sql_query("SELECT deviceId, modelId, timestampNs, tagId, streamId FROM KIT_STEP_TRACE "
                             "ORDER BY rowid", ctx.conn)
    for dev, per in rows.groupby("deviceId", sort=True):
        _device_points(int(dev), per, out)
    seen = 0
    for key in sorted(out.reduces, key=lambda k: (k[0], out.reduces[k][0][0])):
        out.reduces_before[key] = seen
        seen += len(out.ended(key))
    return out


def _device_points(dev: int, rows: pd.DataFrame, out: TrainingTrace) -> None:
    model = rows["modelId"].to_numpy(np.int64)
    stamp = rows["timestampNs"].to_numpy(np.int64)
    tag = rows["tagId"].to_numpy(np.int64)
    spans = iteration_spans(model, stamp, tag)
    if not spans.iterations:
        return
    keys = [(dev, m, i) for m, i, _, _ in spans.iterations]
    tags = tag[spans.order]
    wanted = np.flatnonzero((tags == FP_TAG) | (tags == BP_TAG) | ((tags >= REDUCE_FIRST) & (tags <= REDUCE_LAST)))
    k = np.searchsorted(spans.start_at, wanted, side="right") - 1
    inside = (k >= 0) & (wanted < spans.end_at[np.maximum(k, 0)])
    pos = wanted[inside]
    found = pd.DataFrame({"it": k[inside], "pos": pos, "tag": tags[pos], "ts": stamp[spans.order][pos],
                          "stream": rows["streamId"].to_numpy(np.int64)[spans.order][pos]})
    for point, which in ((out.fp, FP_TAG), (out.bp, BP_TAG)):
        last = found[found["tag"] == which].groupby("it")["ts"].last()
        point.update({keys[i]: int(t) for i, t in zip(last.index.tolist(), last.tolist())})
    _reduces(found.iloc[np.flatnonzero(found["tag"].to_numpy() >= REDUCE_FIRST)], keys, out)
    _data_aug(spans.iterations, keys, out)


def _reduces(tagged: pd.DataFrame, keys: List[Key], out: TrainingTrace) -> None:
    """Pair the reduce tags of each (iteration, stream): an even tag opens reduce n + 1 of the
    stream, an odd one ends its reduce n (the last one that opened); odd tags before any even
    one are dropped."""
    if tagged.empty:
        return
    tagged = tagged.assign(opens=(tagged["tag"] % 2 == 0).astype(np.int64))
    tagged = tagged.assign(n=tagged.groupby(["it", "stream"])["opens"].cumsum(),
                           first=tagged.groupby(["it", "stream"])["pos"].transform("min"))
    starts = tagged[tagged["opens"] == 1].set_index(["it", "stream", "n"])[["ts", "first"]]
    ends = tagged[(tagged["opens"] == 0) & (tagged["n"] > 0)].groupby(["it", "stream", "n"])["ts"].last()
    paired = starts.join(ends.rename("end").astype("Int64"), how="left").reset_index().sort_values(["it", "first", "n"])
    if paired.empty:
        return
    # one list per iteration, sliced from the pairs in (iteration, first tag, n) order
    its = paired["it"].to_numpy(np.int64)
    ended = paired["end"].notna().to_numpy()
    end = paired["end"].fillna(0).to_numpy(np.int64)
    pairs = [(int(s), int(e) if ok else None)
             for s, e, ok in zip(paired["ts"].to_numpy(np.int64).tolist(), end.tolist(), ended.tolist())]
    bounds = np.flatnonzero(np.r_[True, its[1:] != its[:-1], True]).tolist()
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        out.reduces[keys[int(its[lo])]] = pairs[lo:hi]


def _data_aug(its: List[Tuple[int, int, int, int]], keys: List[Key], out: TrainingTrace) -> None:
    """FP start minus the end of the closest earlier-ending iteration that ended before it."""
    ends = np.array([end for _, _, _, end in its], dtype=np.int64)
    by_end = np.argsort(ends, kind="stable")
    sorted_ends = ends[by_end]
    fp = np.array([out.fp.get(keys[i], -1) for i in by_end.tolist()], dtype=np.int64)
    before = np.minimum(np.arange(len(ends)) - 1, np.searchsorted(sorted_ends, fp, side="left") - 1)
    has = (fp >= 0) & (before >= 0)
    bound = fp[has] - sorted_ends[before[has]]
    out.data_aug.update({keys[i]: int(b) for i, b in zip(by_end[has].tolist(), bound.tolist())})
