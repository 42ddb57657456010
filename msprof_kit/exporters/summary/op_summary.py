"""op_summary (outputs.md §4): one row per device task that has a host compute description, and
one per communication op (Task Type COMMUNICATION, N/A task and stream ids, Block Num 0, N/A in the
description and PMU cells), merged by device and start."""
from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np

from ...cxx_order import cxx_sort_order
from ...native_impl import Slot, fixed_slot, int_slot, overlay, trim_slot
from ..context import ExportContext
from .cells import NA
from .columns import BlockTable, Coded, Column, CsvTexts, Rendered, coded, coded_numbers, durations, from_strings, ints, stamps, string_codes
from .communication import CommOps
from .pmu import PmuReader, op_summary_pmu
from .tasks import (INVALID_CONTEXT, Tasks, device_rank, graph_mode, keep_after_start, model_table, names_of, of_model,
                    ordered, session_start)

# GE task types that never get an op_summary row (a COMMUNICATION op named *AivKernel does)
OP_SUMMARY_EXCLUDED = ("WRITE_BACK", "INVALID", "HCCL_AI_CPU", "COMMUNICATION")
AIV_KERNEL = "AivKernel"
COMMUNICATION = "COMMUNICATION"   # Task Type of a communication op's row
# op_summary columns only STARS chips have (§4.1)
STARS_ONLY = ("Context ID", "Mix Block Num", "aiv_time(us)", "aiv_total_time(us)")


def _wait_ns(device: np.ndarray, start: np.ndarray, end: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """The gap before each task since the previous task on its device ended (rows sorted by device,
    then start), clipped at 0, and whether a row is its device's first."""
    first: np.ndarray = np.ones(len(start), dtype=bool)
    first[1:] = device[1:] != device[:-1]
    wait: np.ndarray = np.zeros(len(start), dtype=np.int64)
    wait[1:] = start[1:] - end[:-1]
    return np.where(first, 0, np.maximum(wait, 0)), first


def _wait_cells(wait: np.ndarray, first: np.ndarray, flavour: str, top: bool) -> Rendered:
    """C++: '0' on the file's first row (`top`: these rows start the table), std::to_string
    (6 decimals) elsewhere; Python: 0 on each device's first row, round(x, 3) elsewhere."""
    def slot(rows: slice) -> Slot:
        if flavour == "python":
            return overlay(trim_slot(wait[rows], 3), first[rows], "0")
        cells = fixed_slot(wait[rows] * 1000, 6)
        if top and rows.start == 0 and len(cells.values):
            cells = overlay(cells, np.arange(len(cells.values)) == 0, "0")
        return cells
    return Rendered("Task Wait Time(us)", slot)


def _comm_kept(ops: Optional[CommOps], begin: Optional[int], flavour: str) -> np.ndarray:
    """The communication ops that get a row: C++ drops those that start before the collection
    start, Python keeps those that start after it or straddle it."""
    if ops is None:
        return np.zeros(0, dtype=np.int64)
    if begin is None:
        return np.arange(len(ops), dtype=np.int64)
    if flavour == "cpp":
        return np.flatnonzero(ops.start >= begin)
    return np.flatnonzero(keep_after_start(ops.start, ops.end, begin, flavour))


def _merged(tasks: Tasks, idx: np.ndarray, ops: CommOps, comm: np.ndarray, flavour: str) -> np.ndarray:
    """The rows of the tasks (positions `idx`) and of the communication ops `comm` (as -1 - op),
    by device (text order) and start. Python: at one start, tasks before ops, ops in the order they
    come in. C++: the order std::sort leaves the rows in (cxx_order.py), handed the task rows (in
    start order) and then the ops in the order of the reference's op list (CommOps.cpp_order):
    rows that start together on a device come out as its unstable sort leaves them
    (docs/exports.md, "Communication ops that start together")."""
    if flavour == "cpp":
        comm = comm[np.argsort(ops.cpp_order[comm], kind="stable")]
    start = np.concatenate([tasks.col("startNs", idx), ops.start[comm]])
    rank = device_rank(np.concatenate([tasks.col("deviceId", idx), ops.device[comm]]))
    pos = np.concatenate([idx, -1 - comm])
    if flavour == "cpp":
        by_key = np.lexsort((start, rank))
        key: np.ndarray = np.empty(len(pos), dtype=np.int64)
        fresh = np.r_[True, (rank[by_key][1:] != rank[by_key][:-1]) | (start[by_key][1:] != start[by_key][:-1])]
        key[by_key] = np.cumsum(fresh) - 1
        if fresh.all():  # no ties: the sorted order is the only one
            return pos[by_key]
        return pos[cxx_sort_order(key)]
    kind = np.concatenate([np.zeros(len(idx), dtype=np.int64), np.ones(len(comm), dtype=np.int64)])
    tie = np.concatenate([np.zeros(len(idx), dtype=np.int64), comm])
    return pos[np.lexsort((tie, kind, start, rank))]


def _stand_ins(pos: np.ndarray, is_op: np.ndarray) -> np.ndarray:
    """Task positions to read the task columns at: each op row takes the nearest task row before
    it (or after it, or task 0), so that the rows read stay those of the block."""
    if not is_op.any():
        return pos
    if is_op.all():
        return np.zeros(len(pos), dtype=np.int64)
    seen = np.where(is_op, -1, np.arange(len(pos)))
    np.maximum.accumulate(seen, out=seen)
    seen[seen < 0] = int(np.flatnonzero(~is_op)[0])
    return pos[seen]


def op_summary_table(ctx: ExportContext, tasks: Tasks, flavour: str,
                     ops: Optional[CommOps] = None) -> Optional[BlockTable]:
    """One row per device task that has a host compute description (§4.2), and one per
    communication op (formats_more.md §1.5), by device and start."""
    if tasks.info is None and ops is None:
        return None
    begin = session_start(ctx)
    keep: np.ndarray = np.zeros(len(tasks), dtype=bool)
    for at in tasks.spans() if tasks.info is not None else ():
        task_type = tasks.info_ids("taskType", at)
        excluded = tasks.id_in(task_type, OP_SUMMARY_EXCLUDED)
        communication = tasks.id_in(task_type, ("COMMUNICATION",))
        if communication.any():
            aiv = tasks.id_test(tasks.info_ids("name", at), AIV_KERNEL, lambda name: name.endswith(AIV_KERNEL))
            excluded &= ~(communication & aiv)
        keep[at] = (tasks.has_info(at) & ~excluded & of_model(ctx, tasks, at)
                    & keep_after_start(tasks.col("startNs", at), tasks.col("endNs", at), begin, flavour))
    comm = _comm_kept(ops, begin, flavour)
    if not keep.any() and not len(comm):
        return None
    idx = ordered(tasks, np.flatnonzero(keep), by_device=True)
    del keep
    pos = _merged(tasks, idx, ops, comm, flavour) if ops is not None and len(comm) else idx
    devices = len(np.unique(np.concatenate([tasks.col("deviceId", idx), ops.device[comm] if ops else idx[:0]])))
    s = tasks.strings
    s_csv = CsvTexts(np.append(s, NA).astype(object))  # every block's text columns show them
    graph = graph_mode(ctx)
    pmu = PmuReader(ctx, iteration=graph)
    model_names = model_table(ctx) if graph else {}

    def values(p: np.ndarray, name: str) -> np.ndarray:
        """A TASK column (startNs, endNs, deviceId, modelId) of merged rows, ops' values on theirs."""
        is_op = p < 0
        out = tasks.col(name, _stand_ins(p, is_op))
        if ops is not None and is_op.any():
            of_op = {"startNs": ops.start, "endNs": ops.end, "deviceId": ops.device, "modelId": ops.model}[name]
            out[is_op] = of_op[-1 - p[is_op]]
        return out

    def block(lo: int, hi: int) -> List[Column]:
        p = pos[lo:hi]
        is_op = p < 0
        op = -1 - p[is_op]
        at = _stand_ins(p, is_op)
        before = pos[lo - 1:lo]  # the row before the block, for its first wait time
        both = np.concatenate([before, p])
        dev, b_start, b_end = (values(both, c) for c in ("deviceId", "startNs", "endNs"))
        wait, first = (a[len(before):] for a in _wait_ns(dev, b_start, b_end))
        dev, b_start, b_end = dev[len(before):], b_start[len(before):], b_end[len(before):]
        dur = b_end - b_start
        model = values(p, "modelId")
        ctx_id = tasks.col("contextId", at)

        def info(key: str) -> np.ndarray:
            ids = tasks.info_ids(key, at)
            ids[is_op] = -1
            return ids

        def task_cells(header: str, key: str) -> Rendered:
            ids = tasks.col(key, at)
            return Rendered(header, lambda rows: overlay(int_slot(ids[rows]), is_op[rows], NA))

        op_type = info("opType")
        task_type = info("taskType")
        name_codes = string_codes(info("name"), s)
        if ops is not None and is_op.any():
            op_type[is_op] = ops.op_type[op]
            name_codes[is_op] = len(s) + 1 + np.arange(len(op))
            task_type_codes = string_codes(task_type, s)
            task_type_codes[is_op] = len(s) + 1
        else:
            task_type_codes = string_codes(task_type, s)
        op_names = np.concatenate([s_csv.texts, ops.name[op] if ops is not None else []]).astype(object)
        task_types = np.concatenate([s_csv.texts, [COMMUNICATION]]).astype(object)
        block_num = info("blockNum")
        block_num[is_op] = 0
        mix_block = info("mixBlockNum")

        cols: List[Column] = [coded_numbers("Device_id", dev)]
        if graph:
            cols.append(coded("Model Name", names_of(model_names, model)))
        cols += [coded_numbers("Model ID", model),
                 task_cells("Task ID", "taskId"),
                 task_cells("Stream ID", "streamId")]
        if graph:
            if tasks.iteration is None:
                raise AssertionError("internal: the tasks of a graph export have no iterations")
            iteration = tasks.iteration[at]
            if ops is not None:
                iteration[is_op] = ops.iteration[op]
            cols.append(coded_numbers("Infer ID", iteration))
        cols += [Coded("Op Name", name_codes, op_names, shared=s_csv),
                 from_strings("OP Type", op_type, s, s_csv),
                 from_strings("OP State", info("opState"), s, s_csv),
                 Coded("Task Type", task_type_codes, task_types, shared=s_csv),
                 stamps("Task Start Time(us)", b_start),
                 durations("Task Duration(us)", dur, flavour),
                 _wait_cells(wait, first, flavour, top=lo == 0),
                 ints("Block Num", block_num),
                 Rendered("Mix Block Num", lambda rows: overlay(int_slot(mix_block[rows]), is_op[rows], NA)),
                 from_strings("HF32 Eligible", info("hf32Eligible"), s, s_csv)]
        for header, key in (("Input Shapes", "inputShapes"), ("Input Data Types", "inputDataTypes"),
                            ("Input Formats", "inputFormats"), ("Output Shapes", "outputShapes"),
                            ("Output Data Types", "outputDataTypes"), ("Output Formats", "outputFormats")):
            cols.append(from_strings(header, info(key), s, s_csv))
        no_context = (ctx_id == INVALID_CONTEXT) | is_op
        cols.append(Rendered("Context ID", lambda rows: overlay(int_slot(ctx_id[rows]), no_context[rows], NA)))
        cols += op_summary_pmu(ctx, pmu, tasks.rows(at), dev, dur, task_types[task_type_codes], model, flavour,
                               hidden=is_op)
        return cols

    return BlockTable(block, len(pos), () if ctx.stars else STARS_ONLY, counts={"Device_id": devices})
