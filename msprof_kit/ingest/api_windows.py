"""The host's API records a window of begin times at a time (docs/benchmarks.md, issue 6).

A collection of ten million tasks holds some thirty million API records; sorting them into
connection-id order in memory took gigabytes. Here the api_event stream is read a chunk at a
time: each chunk's Event records are paired with the open ones of earlier chunks, and the merged
APIs are sorted by begin and appended to scratch files (one run a chunk). The begins are then cut
into windows of about WINDOW_ROWS APIs (equal begins never split; fewer when the window's times would
hold more than limits.WINDOW_TRACKS task tracks, see `bounded_edges`), and each window is gathered
from the runs and sorted into connection-id order: the windows, one after the other, are the
whole sorted table.
"""
from __future__ import annotations

from typing import Dict, Iterator, List, Optional, Sequence

import numpy as np

from ..arrays import group_ids, run_ranks
from ..errors import Diagnostics
from ..parsers import host, records
from ..parsers.stream import locate
from ..spill import Runs
from . import limits
from .streams import RecordStream

Columns = Dict[str, np.ndarray]
WINDOW_ROWS = 1 << 19   # APIs sorted at a time (a window holds more when many share one begin)
SAMPLE_EVERY = 64       # one begin in this many kept in memory to place the windows' edges
EVENT_KEYS = ("item", "reserve", "thread", "type", "level")
COLUMNS = ("level", "type", "thread", "reserve", "begin", "end", "item", "order")


class _Pairing:
    """Event records paired across chunks: in stream order within a key (EVENT_KEYS), records 0
    and 1 make an API, then 2 and 3, ...; a key's last record stays open until its partner comes."""

    def __init__(self) -> None:
        self.open: Optional[Columns] = None  # the open records (COLUMNS)

    def pair(self, cols: Columns) -> Columns:
        """The APIs completed by the event records `cols` (in stream order): the first record's
        fields, the second's begin as end, the second's position as order."""
        if self.open is not None and len(self.open["order"]):
            cols = {k: np.concatenate([self.open[k], cols[k]]) for k in cols}
        n = len(cols["order"])
        self.open = None
        if n == 0:
            return cols
        group = group_ids([cols[k] for k in EVENT_KEYS])
        by_key = np.argsort(group, kind="stable")
        grouped = group[by_key]
        first = run_ranks(grouped) % 2 == 0
        last_of_key: np.ndarray = np.ones(n, dtype=bool)
        last_of_key[:-1] = grouped[1:] != grouped[:-1]
        left = by_key[first & last_of_key]  # a key's first-of-a-pair with no partner yet
        left.sort()
        self.open = {k: v[left] for k, v in cols.items()}
        pos = np.flatnonzero(first & ~last_of_key)
        begins, ends = by_key[pos], by_key[pos + 1]
        order = np.argsort(begins, kind="stable")  # in stream order of their first records
        begins, ends = begins[order], ends[order]
        out = {k: v[begins] for k, v in cols.items()}
        out["end"] = cols["begin"][ends]
        out["order"] = cols["order"][ends]
        return out

    def unpaired(self) -> int:
        return 0 if self.open is None else len(self.open["order"])


def bounded_edges(edges: np.ndarray, keys: np.ndarray, step: int) -> np.ndarray:
    """`edges` (ascending, distinct) cut further where a window would hold more than `step` of
    the sorted sampled keys `keys`, whichever bound comes first: from each edge, the key `step`
    keys on when it comes before the next of `edges` (a key equal to the edge gives way to the
    next greater one). One pass a window (windows are few)."""
    out: List[int] = []
    edge: Optional[int] = None
    i = 0  # the next of `edges`
    while True:
        upcoming = int(edges[i]) if i < len(edges) else None
        cut: Optional[int] = None
        at = (0 if edge is None else int(np.searchsorted(keys, edge, side="left"))) + step
        if at < len(keys):
            cut = int(keys[at])
            if edge is not None and cut <= edge:  # equal keys past the step: the next greater one
                at = int(np.searchsorted(keys, edge, side="right"))
                cut = int(keys[at]) if at < len(keys) else None
        if cut is not None and (upcoming is None or cut < upcoming):
            edge = cut
        elif upcoming is not None:
            edge = upcoming
            i += 1
        else:
            return np.array(out, dtype=np.int64)
        out.append(edge)


class ApiWindows:
    """The APIs of one api_event stream (`paths`: unaging then aging slices), events merged,
    records with begin 0 dropped, as windows in connection-id order: begin, then level
    descending, thread, stream order (a pair's: its second record's). Reading reports the stream's
    issues and the merge's to `diag`, in that order."""

    def __init__(self, paths: Sequence[str], folder: str, diag: Diagnostics, data_dir: str) -> None:
        self.runs = Runs(folder, "api", "begin", SAMPLE_EVERY, background=True)
        try:
            self._read(paths, diag, data_dir)
        except BaseException:
            self.runs.close()
            raise
        self.count = self.runs.bounds[-1]

    def _read(self, paths: Sequence[str], diag: Diagnostics, data_dir: str) -> None:
        stream = RecordStream(records.API_EVENT, paths, *host.HOST_VALID)
        pairing = _Pairing()
        seen = zeros = reversed_ = 0
        first_reversed = -1  # stream offset of the first API ending before its begin
        for arr, offsets in stream.chunks():
            n = len(arr)
            cols = {"level": arr["level"], "type": arr["type"], "thread": arr["thread_id"],
                    "reserve": arr["reserve"], "begin": arr["begin"].view(np.int64), "end": arr["end"].view(np.int64),
                    "item": arr["item_id"], "order": np.arange(seen, seen + n, dtype=np.int64),
                    "offset": np.asarray(offsets, dtype=np.int64)}
            seen += n
            is_event = arr["end"] == np.uint64(records.EVENT_FLAG)
            if is_event.any():
                events = np.flatnonzero(is_event)
                paired = pairing.pair({k: v[events] for k, v in cols.items()})
                keep = np.flatnonzero(~is_event)
                cols = {k: np.concatenate([v[keep], paired[k]]) for k, v in cols.items()}
            else:
                cols = {k: np.ascontiguousarray(v) for k, v in cols.items()}
            del arr
            zero = cols["begin"] == 0
            if zero.any():
                zeros += int(zero.sum())
                cols = {k: v[~zero] for k, v in cols.items()}
            back = cols["end"] < cols["begin"]  # (an Event pair's: its begin record's offset)
            if back.any():
                reversed_ += int(back.sum())
                if first_reversed < 0:
                    first_reversed = int(cols["offset"][back].min())
                cols = {k: v[~back] for k, v in cols.items()}
            del cols["offset"]
            if len(cols["begin"]):
                self.runs.add(cols)
        diag.extend(stream.issues)
        if pairing.unpaired():
            diag.warn(f"{data_dir}/*.api_event.data: {pairing.unpaired()} begin/end event records have no "
                      f"partner; dropped")
        if zeros:
            diag.warn(f"{data_dir}: {zeros} API records have begin time 0; dropped")
        if reversed_:
            path, offset = locate(stream.pieces, first_reversed)
            more = f" ({reversed_} such API records in {data_dir})" if reversed_ > 1 else ""
            diag.warn(f"{path}: offset {offset}: api_event record ends before it begins{more}; dropped, as its "
                      f"duration would be negative")

    def edges(self, rows: Optional[int] = None, tracks: Optional[Runs] = None) -> np.ndarray:
        """Begins at which windows start (after the first): about `rows` (WINDOW_ROWS) APIs
        apart, distinct; with `tracks` (the task tracks' runs by time, sampled), cut sooner where a
        window would hold more than limits.WINDOW_TRACKS of them."""
        edges = self.runs.edges(rows or WINDOW_ROWS)
        if tracks is None or not tracks.sample:
            return edges
        return bounded_edges(edges, np.sort(np.concatenate(tracks.sample)),
                             max(1, limits.WINDOW_TRACKS // tracks.sample_every))

    def windows(self, edges: np.ndarray) -> Iterator[Columns]:
        """The APIs of each window of begins (COLUMNS but `order`, with `conn`: the connection
        id), in connection-id order; one window more than `edges`, an empty one holding no rows."""
        runs = self.runs
        runs.cut(edges)
        done = 0
        for w in range(len(edges) + 1):
            cols = runs.window(w)
            if cols is None:
                yield {name: np.zeros(0, dtype=np.int64) for name in COLUMNS[:-1] + ("conn",)}
                continue
            order = np.lexsort((cols.pop("order"), cols["thread"], -cols["level"].astype(np.int32), cols["begin"]))
            window = {name: v[order] for name, v in cols.items()}
            del cols, order
            n = len(window["begin"])
            window["conn"] = np.arange(done + 1, done + n + 1, dtype=np.int64)
            done += n
            yield window

    def close(self) -> None:
        """Remove the scratch files."""
        self.runs.close()
