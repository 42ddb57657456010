"""`export summary`'s entry point: op_summary, op_statistic, task_time, communication_statistic,
api_statistic and the operator memory reports (memory_ops.py), each built (one module per report) and written where the store has its data."""
from __future__ import annotations

import functools
import glob
import os
from typing import Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ...errors import Diagnostics
from ...forked import Forked, can_fork
from ...progress import label
from ..context import ExportContext
from .aicpu import aicpu_table
from .api_statistic import api_statistic_table
from .columns import AnyTable
from .communication import CommOps, load_comm_ops
from .communication_statistic import communication_statistic_table
from .files import json_table, write_csv, write_json
from .memory_ops import MEMORY_TABLES
from .msprof_tx import msprof_tx_table
from .memory import write_memory_summaries
from .op_statistic import op_statistic_table
from .op_summary import op_summary_table
from .task_time import task_time_table
from .tasks import Tasks, load_strings, load_tasks, summary_flavour


Loaded = Tuple[np.ndarray, Optional[Tasks], Optional[CommOps]]


def load_summary_data(ctx: ExportContext) -> Loaded:
    """What the summaries read first: STRING_IDS, the tasks and the communication ops in scope."""
    strings = load_strings(ctx)
    tasks = load_tasks(ctx, strings)
    return strings, tasks, load_comm_ops(ctx, tasks)


def summary_tables(ctx: ExportContext, flavour: str, skip: Sequence[str] = (),
                   loaded: Optional[Loaded] = None) -> Iterator[Tuple[str, AnyTable]]:
    """(kind, table) of each summary the store has data for, built one at a time (but the `skip`
    kinds). `loaded`: what `load_summary_data` gives, when the caller has read it already."""
    strings, tasks, ops = load_summary_data(ctx) if loaded is None else loaded
    if tasks is not None:
        builds = (("op_summary", functools.partial(op_summary_table, ops=ops)), ("op_statistic", op_statistic_table),
                  ("task_time", task_time_table),
                  ("communication_statistic", functools.partial(communication_statistic_table, ops=ops)))
        for kind, build in builds:
            if kind in skip:
                continue
            table = build(ctx, tasks, flavour=flavour)
            if table is not None and table.n_rows:
                yield kind, table
    if "api_statistic" not in skip:
        table = api_statistic_table(ctx, strings, flavour)
        if table is not None and table.n_rows:
            yield "api_statistic", table
    if "msprof_tx" not in skip:
        tx = msprof_tx_table(ctx)
        if tx is not None and tx.n_rows:
            yield "msprof_tx", tx
    if "aicpu" not in skip:
        table = aicpu_table(ctx, strings)
        if table is not None and table.n_rows:
            yield "aicpu", table


# reports the reference's Python exporter writes in both paths (CSV or JSON as it does)
PYTHON_WRITTEN = ("aicpu",)


def _write_one(ctx: ExportContext, kind: str, table: AnyTable, flavour: str, fmt: str) -> None:
    if kind in PYTHON_WRITTEN:
        flavour = "python"
    if fmt == "json" and flavour == "python":
        write_json(ctx, kind, json_table(table))
    else:
        write_csv(ctx, kind, table, flavour)


def _op_summary_job(ctx: ExportContext, tasks: Tasks, ops: Optional[CommOps], flavour: str, fmt: str) -> List[str]:
    """op_summary alone, in a forked child (on a connection of its own, sharing the parent's tasks
    copy-on-write); the files it wrote."""
    ctx = ctx.reopened()
    try:
        table = op_summary_table(ctx, tasks.on(ctx), flavour, ops)
        if table is not None and table.n_rows:
            _write_one(ctx, "op_summary", table, flavour, fmt)
        return ctx.written
    finally:
        ctx.conn.close()


def write_summary(ctx: ExportContext, fmt: str = "csv", diag: Optional[Diagnostics] = None) -> None:
    """Write op_summary, op_statistic, task_time, communication_statistic and api_statistic where
    the store has their data; what is wrong with the stored communication rows goes to `diag`.
    With ctx.jobs > 1 a forked child writes op_summary (the largest) meanwhile.

    `fmt` 'json' writes JSON summaries where the Python path would; the C++ path writes these kinds
    as CSV whatever the format (outputs.md §2.3)."""
    flavour = summary_flavour(ctx)
    who = label(ctx.collection_path)
    with ctx.progress.phase(f"{who}: reading tasks"):
        strings, tasks, ops = load_summary_data(ctx)
    if ops is not None and diag is not None:
        for problem in ops.problems:
            diag.warn(f"{ctx.collection_path}: {problem}")
    helper = Forked(functools.partial(_op_summary_job, ctx, tasks, ops, flavour, fmt), "op_summary") \
        if ctx.jobs > 1 and can_fork() and tasks is not None else None
    try:
        before = len(ctx.written)
        with ctx.progress.phase(f"{who}: summary files", unit="files") as phase:
            for kind, table in summary_tables(ctx, flavour, skip=("op_summary",) if helper else (),
                                              loaded=(strings, tasks, ops)):
                _write_one(ctx, kind, table, flavour, fmt)
                phase.advance()
            for _ in write_memory_summaries(ctx, flavour, fmt):  # npu_mem, npu_module_mem (streamed)
                phase.advance()
            if helper is not None:  # op_summary's files first, as one process lists them
                ctx.written[before:before] = helper.result()
                phase.advance()
            for kind, build in MEMORY_TABLES:  # the Python exporter's in both paths: JSON with --format json
                memory = build(ctx, json=fmt == "json")
                if memory is not None and memory.n_rows:
                    write_json(ctx, kind, memory) if fmt == "json" else write_csv(ctx, kind, memory, flavour)
                    phase.advance()
    except BaseException:
        if helper is not None:  # stopped, failed or interrupted: the files it began go too
            helper.cancel()
            for leftover in glob.glob(os.path.join(ctx.out_dir, f"op_summary_*{ctx.stamp}.*")):
                os.remove(leftover)
        raise
