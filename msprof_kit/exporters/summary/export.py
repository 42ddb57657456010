"""`export summary`'s entry point: op_summary, op_statistic, task_time and api_statistic, each
built (one module per report) and written where the store has its data."""
from __future__ import annotations

import functools
import glob
import os
from typing import Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ...forked import Forked, can_fork
from ...progress import label
from ..context import ExportContext
from .api_statistic import api_statistic_table
from .columns import AnyTable
from .files import json_table, write_csv, write_json
from .op_statistic import op_statistic_table
from .op_summary import op_summary_table
from .task_time import task_time_table
from .tasks import Tasks, load_strings, load_tasks, summary_flavour


def summary_tables(ctx: ExportContext, flavour: str, skip: Sequence[str] = (),
                   loaded: Optional[Tuple[np.ndarray, Optional[Tasks]]] = None) -> Iterator[Tuple[str, AnyTable]]:
    """(kind, table) of each summary the store has data for, built one at a time (but the `skip`
    kinds). `loaded`: the strings and tasks when the caller has read them already."""
    if loaded is None:
        strings = load_strings(ctx)
        tasks = load_tasks(ctx, strings)
    else:
        strings, tasks = loaded
    if tasks is not None:
        for kind, build in (("op_summary", op_summary_table), ("op_statistic", op_statistic_table),
                            ("task_time", task_time_table)):
            if kind in skip:
                continue
            table = build(ctx, tasks, flavour)
            if table is not None and table.n_rows:
                yield kind, table
    if "api_statistic" not in skip:
        table = api_statistic_table(ctx, strings, flavour)
        if table is not None and table.n_rows:
            yield "api_statistic", table


def _write_one(ctx: ExportContext, kind: str, table: AnyTable, flavour: str, fmt: str) -> None:
    if fmt == "json" and flavour == "python":
        write_json(ctx, kind, json_table(table))
    else:
        write_csv(ctx, kind, table, flavour)


def _op_summary_job(ctx: ExportContext, tasks: Tasks, flavour: str, fmt: str) -> List[str]:
    """op_summary alone, in a forked child (on a connection of its own, sharing the parent's tasks
    copy-on-write); the files it wrote."""
    ctx = ctx.reopened()
    try:
        table = op_summary_table(ctx, tasks.on(ctx), flavour)
        if table is not None and table.n_rows:
            _write_one(ctx, "op_summary", table, flavour, fmt)
        return ctx.written
    finally:
        ctx.conn.close()


def write_summary(ctx: ExportContext, fmt: str = "csv") -> None:
    """Write op_summary, op_statistic, task_time and api_statistic where the store has their data.
    With ctx.jobs > 1 a forked child writes op_summary (the largest) meanwhile.

    `fmt` 'json' writes JSON summaries where the Python path would; the C++ path writes these kinds
    as CSV whatever the format (outputs.md §2.3)."""
    flavour = summary_flavour(ctx)
    who = label(ctx.collection_path)
    with ctx.progress.phase(f"{who}: reading tasks"):
        strings = load_strings(ctx)
        tasks = load_tasks(ctx, strings)
    helper = Forked(functools.partial(_op_summary_job, ctx, tasks, flavour, fmt), "op_summary") \
        if ctx.jobs > 1 and can_fork() and tasks is not None else None
    try:
        before = len(ctx.written)
        with ctx.progress.phase(f"{who}: summary files", unit="files") as phase:
            for kind, table in summary_tables(ctx, flavour, skip=("op_summary",) if helper else (),
                                              loaded=(strings, tasks)):
                _write_one(ctx, kind, table, flavour, fmt)
                phase.advance()
            if helper is not None:  # op_summary's files first, as one process lists them
                ctx.written[before:before] = helper.result()
                phase.advance()
    except BaseException:
        if helper is not None:  # stopped, failed or interrupted: the files it began go too
            helper.cancel()
            for leftover in glob.glob(os.path.join(ctx.out_dir, f"op_summary_*{ctx.stamp}.*")):
                os.remove(leftover)
        raise
