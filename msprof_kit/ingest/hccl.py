"""The host side of communication (HCCL): level-5500 APIs (one a task, `master` or `slave`), the
hccl_info record under each, the task tracks under them, and the node launches that make the
ops with their hccl_op_info and node_basic_info records (formats_more.md §1.2-1.5). `HcclHost`
collects them over the association's windows; `HcclDevice` joins them with the matched device
tasks. hccl_ops.py forms the ops and writes the tables.

Everything here is bounded by the number of communication tasks and ops, not by all tasks: the
association hands over only the records under level-5500 APIs and node launches holding them.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from ..arrays import isin
from ..spill import Runs, scratch_error
from ..timebase import Clock
from .association import contain
from .columns import LEVEL_HCCL, LEVEL_NODE, Columns, frame_of
from .names import per_distinct, type_name_of

MASTER = "master"  # the type name of a master task's API (type_info_dic 5500_65537)
INFO_FIELDS = ("item_id", "group_name", "local_rank", "remote_rank", "rank_size", "work_flow_mode", "plane_id",
               "ctx_id", "notify_id", "stage", "role", "duration_estimated", "data_size", "op_type", "data_type",
               "link_type", "transport_type", "rdma_type")
OP_INFO_FIELDS = ("flags", "data_type", "alg_type", "count", "group_name")


class TaskColumns:
    """The communication tasks' columns (HcclHostData.tasks), one scratch file each (`folder`),
    read whole when asked for: the 1.1M tasks' frame (about 100 MiB) is not held through the
    device matching and write_hccl's ops steps, which read a few columns each. With `hold` set, a
    column once read is kept (write_hccl's blocks of rows read every column again and again)."""

    def __init__(self, folder: str, prefix: str = "hccl.task") -> None:
        self.folder, self.prefix = folder, prefix
        self.dtypes: Dict[str, np.dtype] = {}
        self.rows = 0
        self.hold = False
        self.held: Dict[str, np.ndarray] = {}

    def _path(self, name: str) -> str:
        return os.path.join(self.folder, f"{self.prefix}.{name}")

    def put(self, name: str, values: np.ndarray) -> None:
        """Spill column `name` (every column as long as the first)."""
        values = np.ascontiguousarray(values)
        if self.dtypes and len(values) != self.rows:
            raise ValueError(f"task column {name} has {len(values)} rows, not {self.rows}")
        path = self._path(name)
        try:
            with open(path, "wb") as f:
                f.write(values.data.cast("B"))
        except OSError as exc:
            raise scratch_error(exc, path) from exc
        self.dtypes[name], self.rows = values.dtype, len(values)
        self.held.pop(name, None)

    @property
    def columns(self) -> Tuple[str, ...]:
        """The columns' names, in the order they were put."""
        return tuple(self.dtypes)

    def __len__(self) -> int:
        return self.rows

    def __contains__(self, name: object) -> bool:
        return name in self.dtypes

    def __getitem__(self, name: str) -> np.ndarray:
        """Column `name`, read from its file (or the one held)."""
        got = self.held.get(name)
        if got is not None:
            return got
        dtype = self.dtypes[name]
        out = np.empty(self.rows, dtype=dtype)
        with open(self._path(name), "rb") as f:
            if f.readinto(out.data.cast("B")) != self.rows * dtype.itemsize:
                raise OSError(f"{self._path(name)}: scratch file shorter than written")
        if self.hold:
            self.held[name] = out
        return out

    def close(self) -> None:
        """Let go of the held columns and remove the files."""
        self.held.clear()
        for name in self.dtypes:
            try:
                os.remove(self._path(name))
            except FileNotFoundError:
                pass
        self.dtypes.clear()
        self.rows = 0


@dataclass
class HcclHostData:
    """The host's communication tasks and the launches (ops) they hang under.

    tasks: one row per task track under a level-5500 API: `api` (its connection id), `node`
    (the node launch's), thread, `host_ns`, stream, task, batch, device, model id, `is_master`,
    `has_info` and the hccl_info fields (INFO_FIELDS; the last record under the API).
    ops: one row per node launch holding communication tasks: `node`, thread, `begin_ns`,
    `end_ns`, `item` (hash of the raw op name), the first hccl_op_info's fields (`has_op_info`)
    and the first node_basic_info's op type hash (`nbi_op_type`, 0: none).
    orphan_infos: hccl_info records under no level-5500 API. The tasks' columns are spilled
    (TaskColumns): whoever is done with them closes them (write_hccl)."""
    tasks: TaskColumns
    ops: pd.DataFrame
    orphan_infos: int
    info_where: str
    untracked: int = 0  # level-5500 APIs with an hccl_info record but no task track


TRACK_COLUMNS = ("pos", "api", "node", "thread", "host_ns", "stream_id", "task_id", "batch", "device_id", "model_id")


class HcclHost:
    """Collects the communication records over the association's windows (`add_apis` from each
    window of APIs, `step` from each association step) and puts them together (`finish`). The
    level-5500 APIs, task tracks and hccl_info records, one a communication task each, are spilled
    to `scratch` as they come (runs by connection id or record position) and read back a column at
    a time by `finish`. The hccl_info records' fields come apart from their times, all of them in
    record order (`add_info_fields`, before the windows): the windows carry only thread, time and
    position, and `finish` reads the fields of the records it keeps by position."""

    def __init__(self, clock: Clock, types: Dict[str, str], scratch: str) -> None:
        self.clock, self.types, self.folder = clock, types, scratch
        self.apis = Runs(scratch, "hccl.api", "api")  # level-5500 APIs (one a communication task)
        self.tracks = Runs(scratch, "hccl.track", "pos")
        self.infos = Runs(scratch, "hccl.info", "pos")  # the hccl_info records under level-5500 APIs: api, pos
        self.info_fields = Runs(scratch, "hccl.info_fields", "pos")  # every hccl_info record's INFO_FIELDS
        self.op_infos: List[pd.DataFrame] = []
        self.nodes: List[pd.DataFrame] = []
        self.nbi: List[pd.DataFrame] = []
        self.node_conns: np.ndarray = np.zeros(0, dtype=np.int64)  # launches known to hold communication
        self.orphans = 0
        self.info_where = ""

    def add_info_fields(self, cols: Columns) -> None:
        """The INFO_FIELDS of the next hccl_info records, in record order (positions follow on)."""
        n = len(cols[INFO_FIELDS[0]])
        if n:
            start = self.info_fields.rows
            self.info_fields.add({"pos": np.arange(start, start + n, dtype=np.int64), **cols})

    def add_apis(self, window: Columns) -> None:
        """The level-5500 APIs of a window of APIs (connection id, master or not)."""
        hccl = window["level"] == LEVEL_HCCL
        if not hccl.any():
            return
        kinds = window["type"][hccl]
        master = per_distinct(kinds, lambda t: type_name_of(self.types, f"{LEVEL_HCCL}_{int(t)}", "") == MASTER,
                              bool)
        self.apis.add({"api": window["conn"][hccl].astype(np.int64), "is_master": master.astype(np.int8)})

    def step(self, cand: Columns, tracks: pd.DataFrame, track_cols: Optional[Columns], op_info: Optional[Columns],
             info: Optional[Columns], nbi: pd.DataFrame) -> None:
        """One association window: `cand` the tree APIs that can contain its records (TREE_COLUMNS,
        host ticks), `tracks` its associated tracks (indexed by pos), `track_cols` the raw tracks,
        the window's hccl_op_info and hccl_info records (of these: thread, time, position), and its
        node_basic_info rows ready (`conn`)."""
        node = np.flatnonzero(cand["level"] == LEVEL_NODE)
        n_thread, n_begin, n_end = cand["thread"][node].astype(np.int64), cand["begin"][node], cand["end"][node]
        if len(tracks) and track_cols is not None:
            under = tracks["parent_level"].to_numpy() == LEVEL_HCCL
            if under.any():
                rows = np.flatnonzero(under)  # the window's columns taken at these rows (no frame copied)
                pos = tracks.index.to_numpy()[rows]

                def take(name: str) -> np.ndarray:
                    return tracks[name].to_numpy()[rows]
                by_pos = np.argsort(track_cols["pos"], kind="stable")  # the raw tracks' times by position
                raw = track_cols["timestamp"][by_pos[np.searchsorted(track_cols["pos"][by_pos], pos)]]
                del by_pos
                thread: np.ndarray = take("thread_id").astype(np.int64)
                found = contain(thread, raw, n_thread, n_begin, n_end)
                del raw
                ok = found >= 0
                at = node[np.clip(found, 0, None)]
                # int64 throughout (the users widen to it), so every run has the same types
                self.tracks.add({name: np.asarray(values).astype(np.int64) for name, values in {
                    "pos": pos, "api": take("conn"), "node": np.where(ok, cand["conn"][at].astype(np.int64), -1),
                    "thread": thread, "host_ns": take("ts_ns"), "stream_id": take("stream_id"),
                    "task_id": take("task_low"), "batch": take("batch"), "device_id": take("device_id"),
                    "model_id": take("model_id")}.items()})
                self._add_nodes(cand, at[ok])
        if op_info is not None and len(op_info["timestamp"]):
            found = contain(op_info["thread_id"].astype(np.int64), op_info["timestamp"], n_thread, n_begin, n_end)
            ok = found >= 0
            at = node[found[ok]]
            self.op_infos.append(frame_of({"node": cand["conn"][at].astype(np.int64), "pos": op_info["pos"][ok],
                                           **{k: op_info[k][ok] for k in OP_INFO_FIELDS}}))
            self._add_nodes(cand, at)
        if info is not None and len(info["timestamp"]):
            hapi = np.flatnonzero(cand["level"] == LEVEL_HCCL)
            found = contain(info["thread_id"].astype(np.int64), info["timestamp"], cand["thread"][hapi].astype(np.int64),
                            cand["begin"][hapi], cand["end"][hapi])
            ok = found >= 0
            self.orphans += int((~ok).sum())
            self.infos.add({"api": cand["conn"][hapi[found[ok]]].astype(np.int64),
                            "pos": info["pos"][ok].astype(np.int64)})
        if len(nbi) and len(self.node_conns):
            mine = isin(nbi["conn"].to_numpy().astype(np.int64), self.node_conns)
            if mine.any():
                rows = nbi[mine]
                self.nbi.append(frame_of({"node": rows["conn"].to_numpy().astype(np.int64),
                                          "pos": rows.index.to_numpy(), "op_type": rows["op_type"].to_numpy()}))

    def _add_nodes(self, cand: Columns, at: np.ndarray) -> None:
        if not len(at):
            return
        at = np.unique(at)
        conns = cand["conn"][at].astype(np.int64)
        self.node_conns = np.union1d(self.node_conns, conns)
        self.nodes.append(frame_of({"node": conns, "thread": cand["thread"][at].astype(np.int64),
                                    "begin_ns": self.clock.to_ns(cand["begin"][at]),
                                    "end_ns": self.clock.to_ns(cand["end"][at]), "item": cand["item"][at]}))

    def finish(self) -> Optional[HcclHostData]:
        """The tasks and ops, or None without communication records. Removes the spilled runs;
        the tasks' columns are spilled again, as TaskColumns."""
        tasks = TaskColumns(self.folder)
        try:
            if not self.tracks.rows and not self.infos.rows and not self.orphans:
                return None
            api = self._tasks(tasks)
            apis = pd.DataFrame({name: self.apis.read(name, 0, self.apis.rows) if self.apis.rows
                                 else np.zeros(0, dtype=np.int64) for name in ("api", "is_master")}) \
                .drop_duplicates("api")
            pos, hit = _lookup(apis["api"].to_numpy().astype(np.int64), api)
            tasks.put("is_master", _narrowed(_gathered(apis["is_master"].to_numpy(), pos, hit)))
            del apis, pos, hit
            untracked = self._attach_infos(tasks, api)
            del api
            task_nodes = tasks["node"]
        except BaseException:
            tasks.close()
            raise
        finally:
            self.close()
        nodes = _concat(self.nodes, ["node", "thread", "begin_ns", "end_ns", "item"]).drop_duplicates("node")
        ops = nodes[isin(nodes["node"].to_numpy(), task_nodes)].reset_index(drop=True)
        del task_nodes
        op_infos = _concat(self.op_infos, ["node", "pos", *OP_INFO_FIELDS]).sort_values("pos", kind="stable") \
            .drop_duplicates("node")
        ops["has_op_info"] = _attach(ops, "node", op_infos, OP_INFO_FIELDS)
        nbi = _concat(self.nbi, ["node", "pos", "op_type"]).sort_values("pos", kind="stable").drop_duplicates("node")
        _attach(ops, "node", nbi.rename(columns={"op_type": "nbi_op_type"}), ("nbi_op_type",))
        return HcclHostData(tasks=tasks, ops=ops.reset_index(drop=True), orphan_infos=self.orphans,
                            info_where=self.info_where, untracked=untracked)

    def _tasks(self, tasks: TaskColumns) -> np.ndarray:
        """The task tracks in record order into `tasks`, a column at a time from the runs (the small
        integer columns narrowed); returns their `api` column."""
        rows = self.tracks.rows
        if not rows:
            for name in TRACK_COLUMNS[1:]:
                tasks.put(name, np.zeros(0, dtype=np.int64))
            return np.zeros(0, dtype=np.int64)
        order = np.argsort(self.tracks.read("pos", 0, rows), kind="stable")
        api: np.ndarray = np.zeros(0, dtype=np.int64)
        for name in TRACK_COLUMNS[1:]:
            values = self.tracks.read(name, 0, rows)[order]
            if name == "api":
                api = values
            tasks.put(name, _narrowed(values) if name in NARROW_TASK_COLUMNS else values)
        return api

    def _attach_infos(self, tasks: TaskColumns, wanted: np.ndarray) -> int:
        """Add each task's hccl_info fields (the last record under its API `wanted`, by record
        position; 0 without one) and `has_info` to `tasks`, a field at a time; returns how many APIs
        with an hccl_info record have no task track."""
        rows = self.infos.rows
        keep: np.ndarray = np.zeros(0, dtype=np.int64)  # the kept records' positions
        keys: np.ndarray = np.zeros(0, dtype=np.int64)
        if rows:
            api = self.infos.read("api", 0, rows)
            pos = self.infos.read("pos", 0, rows)
            by_pos = np.argsort(pos, kind="stable")
            back = api[by_pos][::-1]  # the last record of each API: its first seen backwards
            kept = by_pos[len(back) - 1 - np.unique(back, return_index=True)[1]]
            keys, keep = api[kept], pos[kept]
            del api, pos, by_pos, back, kept
        untracked = int((~isin(keys, wanted)).sum())
        at, hit = _lookup(keys, wanted)
        for name in INFO_FIELDS:
            values = self.info_fields.read(name, 0, self.info_fields.rows)[keep] if rows \
                else np.zeros(0, dtype=np.int64)
            out = _gathered(values, at, hit)
            tasks.put(name, _narrowed(out) if name in NARROW_TASK_COLUMNS else out)
        tasks.put("has_info", hit.astype(np.int8))
        return untracked

    def close(self) -> None:
        """Remove the spilled runs."""
        self.apis.close()
        self.tracks.close()
        self.infos.close()
        self.info_fields.close()


# the task frame's integer columns held narrow (not the hashes, ids and sizes, which need 64 bits)
NARROW_TASK_COLUMNS = ("thread", "stream_id", "task_id", "batch", "device_id", "model_id", "is_master", "has_info",
                       *(f for f in INFO_FIELDS if f not in ("item_id", "group_name", "notify_id", "data_size")))


def _narrowed(values: np.ndarray) -> np.ndarray:
    """Integer `values` in the narrowest of int8/int16/int32 holding them all, when narrower than
    they are (the task frame lives through the device matching; its users widen what they take)."""
    if values.dtype.kind not in "iu" or not len(values):
        return values
    low, high = int(values.min()), int(values.max())
    for kind in (np.int8, np.int16, np.int32):
        if np.iinfo(kind).min <= low and high <= np.iinfo(kind).max:
            return values.astype(kind) if np.dtype(kind).itemsize < values.dtype.itemsize else values
    return values


def _lookup(keys: np.ndarray, wanted: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(where in `keys` (distinct) each wanted key is, whether it is there)."""
    order = np.argsort(keys, kind="stable")
    at = np.clip(np.searchsorted(keys[order], wanted), 0, max(len(keys) - 1, 0))
    hit = (keys[order][at] == wanted) if len(keys) else np.zeros(len(wanted), dtype=bool)
    return order[at] if len(keys) else at, hit


def _gathered(values: np.ndarray, at: np.ndarray, hit: np.ndarray) -> np.ndarray:
    """values[at] where `hit`, else 0, in the type of `values`."""
    out = np.zeros(len(at), dtype=values.dtype)
    out[hit] = values[at[hit]]
    return out


def _attach(frame: pd.DataFrame, key: str, other: pd.DataFrame, fields: Sequence[str]) -> np.ndarray:
    """Add `fields` of `other` (distinct `key`s) to `frame` by `key`, keeping their types (0 where
    `other` lacks the key); returns 1 where it has it, else 0."""
    keys = other[key].to_numpy().astype(np.int64)
    order = np.argsort(keys, kind="stable")
    wanted = frame[key].to_numpy().astype(np.int64)
    pos = np.clip(np.searchsorted(keys[order], wanted), 0, max(len(keys) - 1, 0))
    hit = (keys[order][pos] == wanted) if len(keys) else np.zeros(len(wanted), dtype=bool)
    for name in fields:
        values = other[name].to_numpy()[order] if len(keys) else np.zeros(0, dtype=np.int64)
        out = np.zeros(len(wanted), dtype=values.dtype)
        out[hit] = values[pos[hit]]
        frame[name] = out
    return hit.astype(np.int64)


def _concat(frames: List[pd.DataFrame], columns: List[str]) -> pd.DataFrame:
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame({c: np.zeros(0, dtype=np.int64) for c in columns})
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0].reset_index(drop=True)


DEVICE_COLUMNS = ("gid", "start_ns", "end_ns", "ctx")  # what HcclDevice keeps of a matched device task


class HcclDevice:
    """The device tasks matched with communication tasks' tracks (by the level-5500 API the track
    hangs under), a window of device tasks at a time. Their TASK connectionId becomes the node
    launch's, as the reference's (an HCCL task carries its op's connection id)."""

    def __init__(self, host: HcclHostData) -> None:
        api = host.tasks["api"]
        order = np.argsort(api, kind="stable")
        self.apis = api[order]
        del api
        self.nodes = host.tasks["node"][order]
        self.parts: List[pd.DataFrame] = []

    def take(self, device_id: int, matched: np.ndarray, conn: np.ndarray, cols: Dict[str, np.ndarray]) -> np.ndarray:
        """Note the window's communication tasks (`cols`: gid, start_ns, end_ns, ctx, per task;
        other columns are not kept) and return the connection ids TASK should hold (-1 where not
        matched)."""
        out = np.where(matched, conn.astype(np.int64), -1)
        if not len(self.apis):
            return out
        pos = np.clip(np.searchsorted(self.apis, out), 0, len(self.apis) - 1)
        hit = matched & (self.apis[pos] == out)
        if hit.any():
            self.parts.append(frame_of({"api": out[hit],
                                        "device_id_dev": np.full(int(hit.sum()), device_id, dtype=np.int32),
                                        **{k: np.asarray(cols[k])[hit] for k in DEVICE_COLUMNS}}))
            node = self.nodes[pos[hit]]
            out[hit] = np.where(node >= 0, node, out[hit])
        return out

    def frame(self) -> pd.DataFrame:
        """The matched device tasks: api, device_id_dev, and DEVICE_COLUMNS (once the device tasks
        are all taken: the parts and the sorted tracks are let go, the frame is their one copy)."""
        parts, self.parts = self.parts, []
        self.apis = self.nodes = np.zeros(0, dtype=np.int64)
        return _concat(parts, ["api", "device_id_dev", *DEVICE_COLUMNS])
