"""What the summaries read about communication (HCCL) ops: COMMUNICATION_OP and the master tasks of
COMMUNICATION_TASK_INFO, timed by their TASK rows (formats_more.md §1.5).

An op's span runs from the earliest start to the latest end of its master tasks (the slave plane's
tasks do not count). An op is in an export's scope when its first master task is: in a graph export
that task lies in the iteration window and the op belongs to the exported model. A graph export
numbers the ops of a group again from 0, as the reference's calculator sees only the iteration's
ops when it names them (`<name>_<group tail>_<k>_<iteration>`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np
import pandas as pd

from ...arrays import SortedKeys
from ..context import ExportContext
from .cells import NA
from .tasks import Tasks, session_start

OP_COLUMNS = ("opId", "opName", "opType", "groupName")
TASK_INFO_COLUMNS = ("globalTaskId", "opId", "isMaster")
AICPU_KERNEL = "AicpuKernel"   # ops of the AI CPU flavour are numbered apart from the others


@dataclass
class CommOps:
    """The communication ops in scope, in order of their start (then name): per op its device,
    model id, iteration (graph export; -1 otherwise), name (text), OP Type (STRING_IDS id), span
    over all its master tasks (`start`, `end`, local ns) and over those that start at or after the
    collection start (`kept_start`, `kept_end`; `kept` says whether there are any).
    `op_id`: COMMUNICATION_OP.opId; `cpp_order`: the op's place in the reference C++ path's op list
    (KIT_HCCL_OP.cppOrder; -1 - opId where the store lacks it). `problems`: what was wrong with the
    stored rows (one message per kind, with counts)."""
    op_id: np.ndarray
    device: np.ndarray
    model: np.ndarray
    iteration: np.ndarray
    name: np.ndarray
    op_type: np.ndarray
    start: np.ndarray
    end: np.ndarray
    kept_start: np.ndarray
    kept_end: np.ndarray
    kept: np.ndarray
    cpp_order: np.ndarray
    problems: List[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.start)


def load_comm_ops(ctx: ExportContext, tasks: Optional[Tasks]) -> Optional[CommOps]:
    """The communication ops in scope, or None when the store has none (or no tasks)."""
    if tasks is None or not (ctx.has("COMMUNICATION_OP") and ctx.has("COMMUNICATION_TASK_INFO")):
        return None
    info = ctx.ints("COMMUNICATION_TASK_INFO", TASK_INFO_COLUMNS)
    ops = ctx.ints("COMMUNICATION_OP", OP_COLUMNS)
    if not len(ops["opId"]) or not len(info["opId"]):
        return None
    problems: List[str] = []
    master = info["isMaster"] == 1
    gtid, op_id = info["globalTaskId"][master], info["opId"][master]
    row = SortedKeys(tasks.task.read("globalTaskId")).find(gtid)
    lost = int((row < 0).sum())
    if lost:
        problems.append(f"COMMUNICATION_TASK_INFO: {lost} master task(s) have no TASK row; left out of the "
                        "communication ops")
    found = row >= 0
    row, op_id = row[found], op_id[found]
    frame = pd.DataFrame({"op": op_id, "row": row,
                          "start": tasks.task.read("startNs", row).astype(np.int64),
                          "end": tasks.task.read("endNs", row).astype(np.int64),
                          "model": tasks.task.read("modelId", row).astype(np.int64)})
    begin = session_start(ctx)
    frame["kept"] = True if begin is None else frame["start"] >= begin
    frame = frame.sort_values(["op", "start", "row"], kind="stable")
    spans = frame.groupby("op", sort=True).agg(start=("start", "min"), end=("end", "max"), row=("row", "first"),
                                               model=("model", "first"))
    kept = frame[frame["kept"]].groupby("op", sort=True).agg(kept_start=("start", "min"), kept_end=("end", "max"))
    spans = spans.join(kept, how="left")
    has_kept = spans["kept_start"].notna().to_numpy()
    spans = spans.fillna(0).astype(np.int64)
    op_at = pd.Index(ops["opId"]).get_indexer(spans.index.to_numpy())
    missing = int((op_at < 0).sum())
    if missing:
        problems.append(f"COMMUNICATION_TASK_INFO: {missing} op id(s) name no COMMUNICATION_OP row; their tasks "
                        "are left out of the communication ops")
    spans, has_kept, op_at = spans[op_at >= 0], has_kept[op_at >= 0], op_at[op_at >= 0]
    without = len(ops["opId"]) - len(np.unique(op_at))
    if without:
        problems.append(f"COMMUNICATION_OP: {without} op(s) have no master task; left out of the summaries")
    first_row = spans["row"].to_numpy(dtype=np.int64)
    model = spans["model"].to_numpy(dtype=np.int64)
    iteration: np.ndarray = np.full(len(spans), -1, dtype=np.int64)
    scoped: np.ndarray = np.ones(len(spans), dtype=bool)
    if tasks.row is not None:
        at = np.minimum(np.searchsorted(tasks.row, first_row), max(len(tasks.row) - 1, 0))
        scoped = (tasks.row[at] == first_row) if len(tasks.row) else np.zeros(len(spans), dtype=bool)
        if tasks.iteration is not None:
            iteration = np.where(scoped, tasks.iteration[at], -1)
        scoped &= model == ctx.scope.model_id
    if not scoped.any():
        return None
    spans, op_at, model, iteration, has_kept = (spans[scoped], op_at[scoped], model[scoped], iteration[scoped],
                                                has_kept[scoped])
    names = tasks.text(ops["opName"][op_at])
    start = spans["start"].to_numpy(dtype=np.int64)
    order = np.lexsort((names.astype(str), start))
    device: np.ndarray = tasks.task.read("deviceId", first_row[scoped]).astype(np.int64)
    if not ctx.scope.all_export:
        names[order] = renumbered(names[order], device[order], ops["groupName"][op_at][order])
    return CommOps(
        op_id=spans.index.to_numpy(dtype=np.int64)[order], device=device[order], model=model[order],
        iteration=iteration[order], name=names[order],
        op_type=ops["opType"][op_at][order], start=start[order], end=spans["end"].to_numpy()[order],
        kept_start=spans["kept_start"].to_numpy()[order], kept_end=spans["kept_end"].to_numpy()[order],
        kept=has_kept[order], cpp_order=_cpp_order(ctx, spans.index.to_numpy(dtype=np.int64)[order]), problems=problems)


def _cpp_order(ctx: ExportContext, op_id: np.ndarray) -> np.ndarray:
    """KIT_HCCL_OP.cppOrder of each op (-1 - opId where the store has none, which keeps the ops in
    descending opId order)."""
    out: np.ndarray = -1 - op_id
    if ctx.has("KIT_HCCL_OP"):
        kit = ctx.frame("SELECT opId, cppOrder FROM KIT_HCCL_OP")
        found = pd.Series(kit["cppOrder"].to_numpy(), index=kit["opId"].to_numpy()).reindex(op_id)
        out = np.where(found.notna().to_numpy(), found.fillna(0).to_numpy(), out).astype(np.int64)
    return out


def renumbered(names: np.ndarray, devices: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """An iteration export's op names (in the order given, which is start order)
    `<name>_<group tail>_<k>_<iteration>` with k counted again from 0 per device, group and AI CPU or
    not, as the reference numbers the exported ops; a name of another shape is kept. The summaries and
    the timeline both name the ops with it."""
    out = np.asarray(names, dtype=object).copy()
    texts = [str(n) for n in out.tolist()]
    parts = [t.rsplit("_", 2) for t in texts]
    shaped = np.array([len(p) == 3 and p[1].isdigit() for p in parts], dtype=bool)
    if not shaped.any():
        return out
    aicpu = np.array([AICPU_KERNEL in t for t in texts], dtype=bool)
    key = pd.DataFrame({"device": devices, "group": groups, "aicpu": aicpu})[shaped]
    k = key.groupby(["device", "group", "aicpu"], sort=False).cumcount().to_numpy()
    for pos, index in zip(np.flatnonzero(shaped).tolist(), k.tolist()):  # the scope's ops, a few
        base, _, iteration = parts[pos]
        out[pos] = f"{base}_{index}_{iteration}"
    return out


def op_type_texts(ops: CommOps, strings: np.ndarray) -> np.ndarray:
    """OP Type of each op as text (N/A where the op has none)."""
    ids = ops.op_type
    ok = (ids >= 0) & (ids < len(strings))
    return np.where(ok, np.append(strings, NA)[np.where(ok, ids, len(strings))], NA)
