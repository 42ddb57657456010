"""op_summary (outputs.md §4): one row per device task that has a host compute description."""
from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np

from ...native_impl import Slot, fixed_slot, int_slot, overlay, trim_slot
from ..context import ExportContext
from .cells import NA
from .columns import BlockTable, Column, Rendered, coded, durations, from_strings, ints, stamps
from .pmu import PmuReader, op_summary_pmu
from .tasks import (INVALID_CONTEXT, Tasks, graph_mode, keep_after_start, model_table, names_of, of_model, ordered,
                    session_start)

# GE task types that never get an op_summary row (a COMMUNICATION op named *AivKernel does)
OP_SUMMARY_EXCLUDED = ("WRITE_BACK", "INVALID", "HCCL_AI_CPU", "COMMUNICATION")
AIV_KERNEL = "AivKernel"
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


def op_summary_table(ctx: ExportContext, tasks: Tasks, flavour: str) -> Optional[BlockTable]:
    """One row per device task that has a host compute description (§4.2), by device and start."""
    if tasks.info is None:
        return None
    begin = session_start(ctx)
    keep: np.ndarray = np.zeros(len(tasks), dtype=bool)
    for at in tasks.spans():
        task_type = tasks.info_ids("taskType", at)
        excluded = tasks.id_in(task_type, OP_SUMMARY_EXCLUDED)
        communication = tasks.id_in(task_type, ("COMMUNICATION",))
        if communication.any():
            aiv = tasks.id_test(tasks.info_ids("name", at), AIV_KERNEL, lambda name: name.endswith(AIV_KERNEL))
            excluded &= ~(communication & aiv)
        keep[at] = (tasks.has_info(at) & ~excluded & of_model(ctx, tasks, at)
                    & keep_after_start(tasks.col("startNs", at), tasks.col("endNs", at), begin, flavour))
    if not keep.any():
        return None
    idx = ordered(tasks, np.flatnonzero(keep), by_device=True)
    del keep
    devices = len(np.unique(tasks.col("deviceId", idx)))
    s = tasks.strings
    graph = graph_mode(ctx)
    pmu = PmuReader(ctx, iteration=graph)
    model_names = model_table(ctx) if graph else {}

    def block(lo: int, hi: int) -> List[Column]:
        at = idx[lo:hi]
        before = idx[lo - 1:lo]  # the row before the block, for its first wait time
        dev, b_start, b_end = (tasks.col(c, np.concatenate([before, at])) for c in ("deviceId", "startNs", "endNs"))
        wait, first = (a[len(before):] for a in _wait_ns(dev, b_start, b_end))
        dev, b_start, b_end = dev[len(before):], b_start[len(before):], b_end[len(before):]
        dur = b_end - b_start
        model = tasks.col("modelId", at)
        ctx_id = tasks.col("contextId", at)

        def info(key: str) -> np.ndarray:
            return tasks.info_ids(key, at)

        cols: List[Column] = [coded("Device_id", dev.astype(str), number=True)]
        if graph:
            cols.append(coded("Model Name", names_of(model_names, model)))
        cols += [coded("Model ID", model.astype(str), number=True),
                 ints("Task ID", tasks.col("taskId", at)),
                 ints("Stream ID", tasks.col("streamId", at))]
        if graph:
            if tasks.iteration is None:
                raise AssertionError("internal: the tasks of a graph export have no iterations")
            cols.append(coded("Infer ID", tasks.iteration[at].astype(str), number=True))
        cols += [from_strings("Op Name", info("name"), s),
                 from_strings("OP Type", info("opType"), s),
                 from_strings("OP State", info("opState"), s),
                 from_strings("Task Type", info("taskType"), s),
                 stamps("Task Start Time(us)", b_start),
                 durations("Task Duration(us)", dur, flavour),
                 _wait_cells(wait, first, flavour, top=lo == 0),
                 ints("Block Num", info("blockNum")),
                 ints("Mix Block Num", info("mixBlockNum")),
                 from_strings("HF32 Eligible", info("hf32Eligible"), s)]
        for header, key in (("Input Shapes", "inputShapes"), ("Input Data Types", "inputDataTypes"),
                            ("Input Formats", "inputFormats"), ("Output Shapes", "outputShapes"),
                            ("Output Data Types", "outputDataTypes"), ("Output Formats", "outputFormats")):
            cols.append(from_strings(header, info(key), s))
        cols.append(Rendered("Context ID", lambda rows: overlay(int_slot(ctx_id[rows]),
                                                                ctx_id[rows] == INVALID_CONTEXT, NA)))
        cols += op_summary_pmu(ctx, pmu, tasks.rows(at), dev, dur, tasks.text(info("taskType")), model, flavour)
        return cols

    return BlockTable(block, len(idx), () if ctx.stars else STARS_ONLY, counts={"Device_id": devices})
