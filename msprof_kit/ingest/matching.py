"""Device tasks matched with the host's task tracks: the host entries spilled per device
(HostTasks), the entry each device task takes (Match, a window of starts at a time), and
COMPUTE_TASK_INFO, the host compute tasks under their globalTaskIds."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np
import pandas as pd

from ..arrays import ascending, first_seen, last_seen
from ..spill import Runs
from ..store.columns import narrowest
from . import limits
from .columns import INVALID_CTX, MIX_TYPES, Columns, frame_of
from .names import HashTable, distinct, ends_with
from .sink import TableSink
from .tasks import GID_KEYS, GlobalIds, StringPool, gid_ctx
from .tensors import TensorTable

MATCH_CTX_INVALID, MATCH_CTX_OTHER = 0x10000, 0x10001
ENTRY_PAYLOAD = ("type", "conn", "model_id", "request_id", "batch", "kernel", "thread_id", "ts_ns", "block", "mix",
                 "info_ts")
COMPUTE_TEXTS = ("op_name", "ge_type", "op_type", "state", "hf32")
HASHED_TEXTS = ("op_name", "op_type")  # of COMPUTE_TEXTS, those the association gives as hash_dic positions


def match_keys(stream: np.ndarray, task: np.ndarray, ctx: np.ndarray) -> np.ndarray:
    """One int64 per (stream, task id, context), the key a device task and a host track are
    matched on. Contexts a device task cannot carry (above 0xFFFF, the invalid one aside) share
    one value."""
    c = np.asarray(ctx).astype(np.int64)
    c = np.where(c == INVALID_CTX, MATCH_CTX_INVALID, np.where((c >= 0) & (c <= 0xFFFF), c, MATCH_CTX_OTHER))
    return ((np.asarray(stream).astype(np.int64) & 0xFFFF) << 34) | ((np.asarray(task).astype(np.int64) & 0xFFFF) << 17) | c


def _match_order(cols: Columns) -> Columns:
    """Host entries in the order the match reads them: time, then segment, then track position."""
    order = np.lexsort((cols["pos"], cols["seg"], cols["ts_ns"]))
    return {k: v[order] for k, v in cols.items()}


class HostTasks:
    """What the device tasks need of the host's task tracks, and the host compute tasks, spilled as
    the association makes them a window at a time.

    A track is an entry of the match under up to three keys (match_keys), each a segment: its
    stream and task id with the invalid context; with its op's context when it has one; with
    context 0 when it is a MIX kernel whose context is not 0. Entries are spilled per device, by
    time, with what a matched device task takes of the track (ENTRY_PAYLOAD); `first` keeps each
    key's first entry (for device tasks that begin before any entry of their key). Compute tasks
    are spilled by track position. Task types are coded by `types`; kernel names, op names and op
    types come as hash_dic positions p (-1: "") and are coded p + 1, so 1M distinct names are never
    made into texts a window at a time; the other texts are coded past them by `texts`
    (`text_table` reads every code)."""

    def __init__(self, folder: str, types: Dict[str, str], hashes: HashTable) -> None:
        self.folder = folder
        self.type_name = lambda u: types.get(f"5000_{int(u)}", str(int(u)))  # as map_names names them
        self.types = StringPool()
        self.hashes = hashes
        self.named: np.ndarray = np.zeros(len(hashes), dtype=bool)  # the positions coded so far
        self.texts = StringPool()  # code 1 + len(hashes) + its id
        self._table: Optional[np.ndarray] = None
        self.entries: Dict[int, Runs] = {}
        self._first: Dict[int, Columns] = {}  # each key's first entry so far, by device (a part may wait)
        self._pending: Dict[int, List[Columns]] = {}  # windows' first entries not merged into _first yet
        self.compute = Runs(folder, "compute", "track", limits.SAMPLE_EVERY, background=True)
        self.largest = dict.fromkeys(GID_KEYS, 0)  # of the compute tasks' keys and the tracks' batches

    def add(self, tracks: pd.DataFrame, compute: pd.DataFrame) -> None:
        pos = tracks.index.to_numpy()
        n = len(pos)
        ctx_of: np.ndarray = np.full(n, INVALID_CTX, dtype=np.int64)
        block: np.ndarray = np.zeros(n, dtype=np.int64)
        mix: np.ndarray = np.zeros(n, dtype=np.int64)
        info_ts: np.ndarray = np.full(n, -1, dtype=np.int64)
        if len(compute):
            at = np.searchsorted(pos, compute["track"].to_numpy())
            ctx_of[at] = compute["ctx"].to_numpy()
            block[at] = compute["block"].to_numpy()
            mix[at] = compute["mix"].to_numpy()
            info_ts[at] = compute["info_ts"].to_numpy()
        codes, names = distinct(tracks["type_raw"].to_numpy(), self.type_name)
        type_code = np.array([self.types.id(t) for t in names], dtype=np.int64)[codes]
        is_mix = np.array([t in MIX_TYPES for t in names], dtype=bool)[codes]
        kernel_code = self._name_codes(tracks["kernel"].to_numpy())  # (hash_dic positions)
        del codes, names
        has_ctx = np.flatnonzero(ctx_of != INVALID_CTX)
        zero = np.flatnonzero(is_mix & (ctx_of != 0))
        rows = np.concatenate([np.arange(n), has_ctx, zero])
        key_ctx = np.concatenate([np.full(n, INVALID_CTX, dtype=np.int64), ctx_of[has_ctx],
                                  np.zeros(len(zero), dtype=np.int64)])
        payload = {"type": type_code, "conn": tracks["conn"].to_numpy(),
                   "model_id": tracks["model_id"].to_numpy(), "request_id": tracks["request_id"].to_numpy(),
                   "batch": tracks["batch"].to_numpy(), "kernel": kernel_code,
                   "thread_id": tracks["thread_id"].to_numpy(), "ts_ns": tracks["ts_ns"].to_numpy(),
                   "block": block, "mix": mix, "info_ts": info_ts}
        self.largest["batch"] = max(self.largest["batch"], int(payload["batch"].max(initial=0)))
        seg: np.ndarray = np.repeat(np.arange(3, dtype=np.int8), [n, len(has_ctx), len(zero)])
        order = np.lexsort((seg, payload["ts_ns"][rows]))  # match order (rows are by position within a segment)
        rows, key_ctx, seg = rows[order], key_ctx[order], seg[order]
        cols = {"key": match_keys(tracks["stream_id"].to_numpy()[rows], tracks["task_low"].to_numpy()[rows], key_ctx),
                "seg": seg, "pos": pos[rows], **{k: v[rows] for k, v in payload.items()}}
        device = tracks["device_id"].to_numpy().astype(np.int64)[rows]
        del payload, rows, key_ctx, seg, order
        devices = np.unique(device)
        for d in devices.tolist():
            part = cols if len(devices) == 1 else {k: v[device == d] for k, v in cols.items()}
            if d not in self.entries:
                self.entries[d] = Runs(self.folder, f"entries{d}", "ts_ns", background=True)
            self.entries[d].add(part)
            first = first_seen(part["key"])
            self._pending.setdefault(d, []).append(part if first.all() else {k: v[first] for k, v in part.items()})
            del part, first
            # merged once the waiting parts outgrow what is merged (each row merged O(log) times, not once a window)
            merged = len(self._first[d]["key"]) if d in self._first else 0
            if sum(len(p["key"]) for p in self._pending[d]) > max(limits.TASK_ROWS, merged):
                self._merge_first(d, by_key=False)
        if len(compute):
            c = {k: compute[k].to_numpy() for k in ("track", "device_id", "stream_id", "task_id", "batch", "ctx",
                                                   "block", "mix", "tensors")}
            for k in COMPUTE_TEXTS:
                c[k] = self._name_codes(compute[k].to_numpy()) if k in HASHED_TEXTS else \
                    1 + len(self.named) + self.texts.ids_of(compute[k].to_numpy())
            for k in GID_KEYS:
                values = gid_ctx(c[k]) if k == "ctx" else c[k].astype(np.int64)
                self.largest[k] = max(self.largest[k], int(values.max(initial=0)))
            self.compute.add(c)

    def _merge_first(self, d: int, by_key: bool) -> None:
        """Each key's first entry (in match order) of device d's merged and waiting parts; in key
        order if `by_key` (else, when no key repeats, the parts are only joined: most keys are
        distinct, and each column gathered is a full copy)."""
        parts = ([self._first[d]] if d in self._first else []) + self._pending.pop(d, [])
        if not parts:
            return
        cols = parts[0] if len(parts) == 1 else {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        del parts
        keys = cols["key"]
        if ascending(keys) and (len(keys) < 2 or (keys[1:] != keys[:-1]).all()):
            self._first[d] = cols
            return
        order = np.argsort(keys, kind="stable")
        ordered = keys[order]
        if (ordered[1:] == ordered[:-1]).any():  # by key, then match order: each key's first run start
            order = np.lexsort((cols["pos"], cols["seg"], cols["ts_ns"], keys))
            ordered = keys[order]
            order = order[np.r_[True, ordered[1:] != ordered[:-1]]]
        elif not by_key:
            self._first[d] = cols
            return
        self._first[d] = {k: v[order] for k, v in cols.items()}

    @property
    def first(self) -> Dict[int, Columns]:
        """Each device's first entry of each key (in match order), for device tasks that begin
        before any entry of their key (Match), in key order."""
        for d in list(self._pending) + list(self._first):
            self._merge_first(d, by_key=True)
        return self._first

    def _name_codes(self, positions: np.ndarray) -> np.ndarray:
        """Codes of hash_dic positions (-1: "", code 0), the positions noted as used."""
        pos = np.asarray(positions, dtype=np.int64)
        self.named[pos[pos >= 0]] = True
        self._table = None
        return pos + 1

    def name_ends_with(self, codes: np.ndarray, suffixes: Tuple[str, ...]) -> np.ndarray:
        """Whether the text of each code (as `text_table` gives it) ends with one of the ASCII
        `suffixes`; the hash_dic texts are read as bytes, not decoded."""
        codes = np.asarray(codes, dtype=np.int64)
        out = self.hashes.ends_with(np.where(codes <= len(self.named), codes - 1, -1), suffixes)
        other = np.flatnonzero(codes > len(self.named))
        if len(other):
            out[other] = ends_with(self.text_table()[codes[other]], suffixes)
        return out

    def text_table(self) -> np.ndarray:
        """The texts by code (kernel names and the compute tasks' texts); the hash_dic texts
        decoded once, those of the positions coded only (the others are None)."""
        if self._table is None:
            named = np.flatnonzero(self.named)
            out: np.ndarray = np.empty(1 + len(self.named) + len(self.texts.ids), dtype=object)
            out[0] = ""
            out[1 + named] = self.hashes.at(named)
            out[1 + len(self.named):] = list(self.texts.ids)
            self._table = out
        return self._table

    def type_table(self) -> np.ndarray:
        """The task type names by code."""
        out: np.ndarray = np.empty(len(self.types.ids), dtype=object)
        out[:] = list(self.types.ids)
        return out

    def close(self) -> None:
        for runs in [self.compute, *self.entries.values()]:
            runs.close()


# COMPUTE_TASK_INFO's tensor columns and the TensorTable columns of their texts
TENSOR_COLUMNS = (("inputFormats", 2), ("inputDataTypes", 1), ("inputShapes", 0), ("outputFormats", 5),
                  ("outputDataTypes", 4), ("outputShapes", 3))


def write_compute_info(tasks: Optional[HostTasks], tensor_table: TensorTable, gids: GlobalIds, strings: StringPool,
                       put: TableSink) -> np.ndarray:
    """COMPUTE_TASK_INFO (each globalTaskId's first compute task, in track order), written a
    window of tracks at a time after a first pass that numbers the ids and puts the texts into
    STRING_IDS in the order one pass over the whole table would. Returns, by globalTaskId, which
    ids count as compute in OVERLAP_ANALYSIS (AI CPU and AIV kernels do not). `tensor_table`: the
    texts of the compute tasks' tensors, a row each (HostData.tensor_table)."""
    if tasks is None or not tasks.compute.rows:
        return np.zeros(0, dtype=bool)
    runs = tasks.compute
    edges = runs.edges(limits.TASK_ROWS)
    runs.cut(edges)
    texts = tasks.text_table()
    code_seen: Dict[str, np.ndarray] = {k: np.zeros(len(texts), dtype=bool) for k in COMPUTE_TEXTS}
    code_order: Dict[str, List[np.ndarray]] = {k: [] for k in COMPUTE_TEXTS}
    row_seen: np.ndarray = np.zeros(len(tensor_table), dtype=bool)
    row_order: List[np.ndarray] = []

    def first_new(values: np.ndarray, seen: np.ndarray, order: List[np.ndarray]) -> None:
        """The values not seen before, once each in the order of their first row, noted."""
        fresh = values[~seen[values]]
        if len(fresh):
            at = scratch(len(seen))
            row = np.arange(len(fresh))
            at[fresh] = len(fresh)
            np.minimum.at(at, fresh, row)  # each value's first row
            fresh = fresh[at[fresh] == row]
        seen[fresh] = True
        order.append(fresh)

    spare: List[np.ndarray] = [np.zeros(0, dtype=np.int64)]

    def scratch(n: int) -> np.ndarray:
        if len(spare[0]) < n:
            spare[0] = np.empty(max(n, len(texts)), dtype=np.int64)
        return spare[0]

    kept: Dict[int, Optional[Columns]] = {}  # one window is read once for both passes

    def window(w: int) -> Optional[Columns]:
        if w in kept:
            return kept.pop(w)
        cols = runs.window(w)
        if cols is not None:
            order = np.argsort(cols["track"], kind="stable")
            cols = {k: v[order] for k, v in cols.items()}
        if not len(edges):
            kept[w] = cols
        return cols

    ids: List[Tuple[np.ndarray, np.ndarray]] = []  # each window's (globalTaskIds, whether first)
    for w in range(len(edges) + 1):
        c = window(w)
        if c is None:
            continue
        before = gids.count
        gid = gids.ids(c["device_id"], c["stream_id"], c["task_id"], c["ctx"], c["batch"])
        first = (gid >= before) & first_seen(gid)
        for k in COMPUTE_TEXTS:
            first_new(c[k][first], code_seen[k], code_order[k])
        first_new(c["tensors"][first], row_seen, row_order)
        ids.append((gid.astype(np.int32) if gids.count < 1 << 31 else gid, first))
        del c, gid, first
    # STRING_IDS: the columns' texts in the order of COMPUTE_TASK_INFO's columns
    # ids in int32 where every id the op texts and the six tensor columns can add fits
    id_type = np.int32 if len(strings.ids) + 5 * len(texts) + 6 * len(tensor_table) + 2 < 1 << 31 else np.int64
    text_id: np.ndarray = np.full(len(texts), -1, dtype=id_type)

    def register(k: str) -> None:
        codes = np.concatenate(code_order[k])
        text_id[codes] = strings.ids_of(texts[codes])
    for k in ("op_name", "ge_type", "op_type"):
        register(k)
    rows = np.concatenate(row_order)
    tensor_id: Dict[int, np.ndarray] = {}
    for column in (2, 1, 0, 5, 4, 3):
        tensor_id[column] = np.zeros(len(tensor_table), dtype=id_type)
        tensor_id[column][rows] = strings.ids_of(tensor_table.column(column, rows))
    empty = strings.id("")
    for k in ("state", "hf32"):
        register(k)
    na = strings.id("N/A")
    skip: np.ndarray = np.zeros(len(texts), dtype=bool)  # by op name code, of those COMPUTE_TASK_INFO names
    names = np.concatenate(code_order["op_name"])
    skip[names] = tasks.name_ends_with(names, ("AicpuKernel", "AivKernel"))
    compute_ok: np.ndarray = np.zeros(gids.count, dtype=bool)
    at = 0
    for w in range(len(edges) + 1):
        c = window(w)
        if c is None:
            continue
        gid, first = ids[at]
        ids[at] = (np.zeros(0, np.int32), np.zeros(0, bool))
        at += 1
        f = np.flatnonzero(first)
        c = {k: v[f] for k, v in c.items()}
        gid = gid[f].astype(np.int64)
        n = len(f)
        t = c["tensors"]
        put("COMPUTE_TASK_INFO", frame_of({
            "name": text_id[c["op_name"]].astype(np.int64), "globalTaskId": gid, "blockNum": c["block"],
            "mixBlockNum": c["mix"], "taskType": text_id[c["ge_type"]].astype(np.int64),
            "opType": text_id[c["op_type"]].astype(np.int64),
            **{name: tensor_id[column][t].astype(np.int64) for name, column in TENSOR_COLUMNS},
            "attrInfo": np.full(n, empty), "opState": text_id[c["state"]].astype(np.int64),
            "hf32Eligible": text_id[c["hf32"]].astype(np.int64),
            "gridDim": np.full(n, na), "blockDim": np.full(n, na)}), last=False)
        compute_ok[gid[~skip[c["op_name"]]]] = True
        del c, gid, first
    put("COMPUTE_TASK_INFO", None, last=True)
    return compute_ok


class Match:
    """The host entry each device task of one device takes, a window of starts at a time: of the
    entries of its key, the latest at or before its start (ties: segment, then track position),
    else the key's first. Carried from a window to the next: each key's latest entry, by key.

    The windows of entries are cut at the same times as the windows of tasks, so an entry carried
    from an earlier window is older than every entry of the current one and than every task of it:
    a task takes the latest entry of its key at or before its start in its own window, else the
    carried one of its key, else its key's first."""

    PAYLOAD = ("key",) + ENTRY_PAYLOAD

    def __init__(self, first: Optional[Columns]) -> None:
        self.carry: Optional[Columns] = None  # each key's latest entry so far, by key
        self.first = None
        self.dtypes: Dict[str, np.dtype] = {}  # each column's type as the entries bring it
        if first is not None:  # (only what a lookup reads: the key and the payload; HostTasks gives them by key)
            self.dtypes = {k: v.dtype for k, v in first.items()}
            if ascending(first["key"]):
                self.first = _narrowed({k: first[k] for k in self.PAYLOAD})
            else:
                order = np.argsort(first["key"], kind="stable")
                self.first = _narrowed({k: first[k][order] for k in self.PAYLOAD})

    def window(self, key: np.ndarray, start_ns: np.ndarray, entries: Optional[Columns]
               ) -> Tuple[np.ndarray, Columns]:
        """(whether each task matched, ENTRY_PAYLOAD of each task, zero where it did not) of tasks
        in start order; `entries` the window's."""
        n = len(key)
        right = None
        if entries is not None and len(entries["key"]):
            self.dtypes.update((k, v.dtype) for k, v in entries.items())
            right = _match_order(entries)
        found: np.ndarray = np.full(n, -1, dtype=np.int64)
        if right is not None and n:
            got = pd.merge_asof(frame_of({"t": start_ns, "k": key}),
                                frame_of({"ts": right["ts_ns"], "k": right["key"], "i": np.arange(len(right["key"]))}),
                                left_on="t", right_on="ts", by="k", direction="backward")["i"].to_numpy()
            hit = ~np.isnan(got)
            found[hit] = got[hit].astype(np.int64)
        out: Columns = {k: np.zeros(n, dtype=self.dtypes.get(k, np.int64)) for k in ENTRY_PAYLOAD}
        hit = found >= 0
        if right is not None:
            for k in ENTRY_PAYLOAD:
                out[k][hit] = right[k][found[hit]]
        missing = np.flatnonzero(~hit)
        for table in (self.carry, self.first):  # (both by key)
            if not len(missing) or table is None or not len(table["key"]):
                continue
            fk = table["key"]
            at = np.minimum(np.searchsorted(fk, key[missing]), len(fk) - 1)
            ok = fk[at] == key[missing]
            for k in ENTRY_PAYLOAD:
                out[k][missing[ok]] = table[k][at[ok]]
            hit[missing[ok]] = True
            missing = missing[~ok]
        if right is not None:
            self._carry(right)
        return hit, out

    def _carry(self, right: Columns) -> None:
        """The carry updated with a window's entries (in match order): each key's latest. Built a
        column at a time in its narrow type (the carry has an entry of every key seen)."""
        last = last_seen(right["key"])
        new = {k: right[k][last] for k in self.PAYLOAD}
        old = self.carry
        if old is None:
            order = np.argsort(new["key"], kind="stable")
            self.carry = _narrowed({k: v[order] for k, v in new.items()})
            return
        m = len(old["key"])
        keys = np.concatenate([old["key"].astype(np.int64), new["key"]])
        order = np.argsort(keys, kind="stable")  # (two sorted runs at most: merged, not sorted)
        keys = keys[order]
        keep = order[np.append(keys[1:] != keys[:-1], True)]  # the last of each key: the window's when it has one
        del keys, order
        from_old = keep < m
        at_old, at_new = keep[from_old], keep[~from_old] - m
        carry: Columns = {}
        for k in self.PAYLOAD:
            column = np.empty(len(keep), dtype=np.result_type(old[k].dtype, new[k].dtype))
            column[from_old] = old[k][at_old]
            column[~from_old] = new[k][at_new]
            carry.update(_narrowed({k: column}))
        self.carry = carry


def _narrowed(cols: Columns) -> Columns:
    """Integer columns kept in the narrowest type that holds their values (Match's carry and first
    entries: an entry of every key seen, a million keys at 1M tasks); `Match.dtypes` gives them
    back their own type when they are read."""
    return {k: narrowest(v) if v.dtype.kind in "iu" and v.dtype.itemsize > 1 and
            (v.dtype.kind == "i" or not len(v) or int(v.max()) <= np.iinfo(np.int64).max) else v
            for k, v in cols.items()}
