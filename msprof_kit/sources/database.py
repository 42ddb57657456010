"""Unified databases (msprof_*.db, ascend_pytorch_profiler*.db): opened read-only, their op rows,
statistics and frequency (for Tables) and their tasks, API calls and steps (for Trace)."""
from __future__ import annotations

import os
import sqlite3
import urllib.parse
from typing import Callable, Dict, Iterable, List, Optional, Sequence

import numpy as np
import pandas as pd

from ..errors import MsprofKitError, UnreadableFile
from ..exporters.summary.pmu import pmu_header
from .derived import api_statistic_from_calls, statistic_from_ops
from .frames import (API_LEVELS, DEVICE, DURATION, NA, OP_NAME, OP_TYPE, START, TASK_TYPE, Tables, Trace,
                     api_frame, freq_frame, iteration_frame, lookup_strings, task_frame)

def _uri(path: str, extra: str = "mode=ro") -> str:
    return "file:" + urllib.parse.quote(os.path.abspath(path)) + "?" + extra


def open_db(path: str) -> sqlite3.Connection:
    """A unified database, read-only and leaving no file behind. Without a `-wal` file beside it the
    database is opened as immutable, so that sqlite creates no `-wal`/`-shm` files for a database in
    WAL mode; with one, read-only (the WAL holds data), or immutable when even that fails (a
    read-only folder)."""
    modes = ["mode=ro", "mode=ro&immutable=1"] if os.path.exists(path + "-wal") else ["mode=ro&immutable=1"]
    error: Optional[sqlite3.Error] = None
    for mode in modes:
        try:
            conn = sqlite3.connect(_uri(path, mode), uri=True)
            conn.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
            return conn
        except sqlite3.Error as exc:
            error = exc
    raise UnreadableFile(f"cannot open the database: {error}", path=path)


def _db_tables(conn: sqlite3.Connection) -> Dict[str, List[str]]:
    """Table name → column names."""
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    return {n: [r[1] for r in conn.execute(f'PRAGMA table_info("{n}")')] for n in names}


def is_unified_db(path: str) -> bool:
    """Whether `path` is a unified msprof_*.db (it opens read-only and has the unified tables)."""
    try:
        conn = open_db(path)
    except MsprofKitError:
        return False
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.Error:
        return False
    finally:
        conn.close()
    return "STRING_IDS" in names and bool(names & {"TASK", "CANN_API", "AICORE_FREQ"})


def _pmu_header(name: str) -> str:
    """A PMU metric's op_summary header (outputs.md §4.3; the Python flavour's spelling)."""
    return pmu_header(name.replace("_extra", ""), "python")


def read_db(tables: Tables, path: str, reports: Sequence[str]) -> None:
    """The tables of a unified database (msprof_*.db, ascend_pytorch_profiler*.db): op rows are
    TASK joined with COMPUTE_TASK_INFO (and COMMUNICATION_OP as COMMUNICATION rows), with the
    TASK_PMU_INFO metrics; op_statistic is aggregated from them; api_statistic from CANN_API."""
    conn = open_db(path)
    try:
        schema = _db_tables(conn)
        strings = dict(conn.execute("SELECT id, value FROM STRING_IDS").fetchall()) if "STRING_IDS" in schema else {}

        def text(ids: pd.Series) -> pd.Series:
            return ids.map(lambda i: strings.get(i, NA) if i is not None and i == i else NA).astype(str)

        if set(reports) & {"op_summary", "op_statistic"}:
            ops = _db_ops(conn, schema, text)
            tables.set("op_summary", ops, path)
            tables.set("op_statistic", statistic_from_ops(ops), path + " (aggregated)")
        if "api_statistic" in reports and "CANN_API" in schema:
            api = pd.read_sql_query("SELECT type, name, endNs - startNs AS dur FROM CANN_API", conn)
            levels = dict(API_LEVELS)
            if "ENUM_API_TYPE" in schema:
                levels.update(dict(conn.execute("SELECT id, name FROM ENUM_API_TYPE").fetchall()))
            calls = pd.DataFrame({"level": api["type"].map(lambda t: levels.get(t, str(t))),
                                  "name": text(api["name"]), "dur": api["dur"].astype(np.float64) / 1000})
            tables.set("api_statistic", api_statistic_from_calls(calls), path + " (CANN_API)")
        if "freq" in reports and "AICORE_FREQ" in schema:
            rows = conn.execute("SELECT deviceId, timestampNs, freq FROM AICORE_FREQ").fetchall()
            if rows:
                dev, ts, mhz = zip(*rows)
                tables.set("freq", freq_frame(dev, [float(t) / 1000 for t in ts], mhz, "recorded"), path)
    except sqlite3.Error as exc:
        raise UnreadableFile(f"cannot read the database: {exc}", path=path) from exc
    finally:
        conn.close()


def _db_ops(conn: sqlite3.Connection, schema: Dict[str, List[str]],
            text: Callable[[pd.Series], pd.Series]) -> Optional[pd.DataFrame]:
    """Op rows of a unified DB (see read_db); `text` maps STRING_IDS ids to their strings."""
    if "TASK" not in schema or "COMPUTE_TASK_INFO" not in schema:
        return None
    info = schema["COMPUTE_TASK_INFO"]
    block = next((c for c in ("blockNum", "blockDim", "block_dim") if c in info), None)
    mix = next((c for c in ("mixBlockNum", "mixBlockDim") if c in info), None)
    extra = "".join(f", c.{c} AS {alias}" for c, alias in ((block, "block"), (mix, "mix")) if c)
    frame = pd.read_sql_query(
        "SELECT t.deviceId, t.modelId, t.taskId, t.streamId, t.startNs, t.endNs, t.contextId, t.globalTaskId, "
        f"c.name, c.opType, c.taskType{extra} FROM TASK t JOIN COMPUTE_TASK_INFO c "
        "ON c.globalTaskId = t.globalTaskId ORDER BY t.startNs", conn)
    ops = pd.DataFrame({
        DEVICE: frame["deviceId"].astype(str), "Model ID": frame["modelId"].astype(np.float64),
        "Task ID": frame["taskId"].astype(np.float64), "Stream ID": frame["streamId"].astype(np.float64),
        OP_NAME: text(frame["name"]), OP_TYPE: text(frame["opType"]), TASK_TYPE: text(frame["taskType"]),
        START: frame["startNs"].astype(np.float64) / 1000,
        DURATION: (frame["endNs"] - frame["startNs"]).astype(np.float64) / 1000,
        "Block Num": frame["block"].astype(np.float64) if block else np.nan,
        "Mix Block Num": frame["mix"].astype(np.float64) if mix else np.nan,
        "Context ID": frame["contextId"].where(frame["contextId"] != 4294967295).astype(np.float64),
    })
    if "TASK_PMU_INFO" in schema:
        pmu = pd.read_sql_query("SELECT globalTaskId, name, value FROM TASK_PMU_INFO", conn)
        if not pmu.empty:
            pmu["metric"] = text(pmu["name"])
            wide = pmu.pivot_table(index="globalTaskId", columns="metric", values="value", aggfunc="first")
            from ..exporters.summary.pmu import UNSUPPORTED_PMU
            for metric in wide.columns:
                if metric in UNSUPPORTED_PMU:
                    continue
                values = frame["globalTaskId"].map(wide[metric]).astype(np.float64)
                # the DB keeps times in ns; the op_summary shows µs
                ops[_pmu_header(metric)] = values / 1000 if "time" in metric else values
    if "COMMUNICATION_OP" in schema:
        cols = schema["COMMUNICATION_OP"]
        comm = pd.read_sql_query(
            "SELECT opName, opType, startNs, endNs" + (", deviceId" if "deviceId" in cols else "") +
            " FROM COMMUNICATION_OP", conn)
        if not comm.empty:
            devices = ops[DEVICE].unique()
            device = comm["deviceId"].astype(str) if "deviceId" in comm else (devices[0] if len(devices) == 1 else NA)
            rows = pd.DataFrame({DEVICE: device, OP_NAME: text(comm["opName"]), OP_TYPE: text(comm["opType"]),
                                 TASK_TYPE: "COMMUNICATION", START: comm["startNs"].astype(np.float64) / 1000,
                                 DURATION: (comm["endNs"] - comm["startNs"]).astype(np.float64) / 1000})
            ops = pd.concat([ops, rows], ignore_index=True).sort_values(START, kind="stable")
    return ops.reset_index(drop=True)


def api_levels(conn: sqlite3.Connection, names: Iterable[str]) -> Dict[int, str]:
    """API level codes to names: the reference's defaults, updated from the DB's ENUM_API_TYPE when it has one."""
    levels = dict(API_LEVELS)
    if "ENUM_API_TYPE" in names:
        levels.update({int(i): str(n) for i, n in conn.execute("SELECT id, name FROM ENUM_API_TYPE").fetchall()})
    return levels


def level_names(types: np.ndarray, levels: Dict[int, str]) -> np.ndarray:
    """API level names of CANN_API type ids (the id itself, as text, when it has no name)."""
    ids = pd.Series(np.asarray(types, dtype=np.int64))
    return ids.map(levels).fillna(ids.astype(str)).to_numpy(dtype=object)


def trace_from_db(trace: Trace, path: str, parts: Sequence[str]) -> None:
    """Tasks (TASK with the names of COMPUTE_TASK_INFO or COMMUNICATION_TASK_INFO), host APIs
    (CANN_API) and profiler steps (STEP_TIME) of a unified database."""
    conn = open_db(path)
    try:
        schema = _db_tables(conn)
        strings = {int(i): str(v) for i, v in conn.execute("SELECT id, value FROM STRING_IDS").fetchall()} \
            if "STRING_IDS" in schema else {}
        if "tasks" in parts and "TASK" in schema:
            joins, names, types = "", [], []
            for table, alias in (("COMPUTE_TASK_INFO", "c"), ("COMMUNICATION_TASK_INFO", "m")):
                if table in schema and "globalTaskId" in schema[table]:
                    joins += f" LEFT JOIN {table} {alias} ON {alias}.globalTaskId = t.globalTaskId"
                    names.append(f"{alias}.name")
                    if "opType" in schema[table]:
                        types.append(f"{alias}.opType")
            name, op_type = (f"COALESCE({', '.join(c)})" if len(c) > 1 else (c[0] if c else "NULL")
                             for c in (names, types))
            frame = pd.read_sql_query(
                "SELECT t.deviceId AS dev, t.streamId AS stream, CAST(t.startNs AS INTEGER) AS s, "
                f"CAST(t.endNs AS INTEGER) AS e, t.taskType AS tt, {name} AS n, {op_type} AS ot FROM TASK t{joins}",
                conn)
            if not frame.empty:
                task_type = lookup_strings(frame["tt"].fillna(-1).to_numpy(np.int64), strings)
                named = frame["n"].notna().to_numpy()
                name_text = task_type.copy()
                name_text[named] = lookup_strings(frame["n"][named].to_numpy(np.int64), strings)
                op_text: np.ndarray = np.full(len(frame), NA, dtype=object)
                typed = frame["ot"].notna().to_numpy()
                op_text[typed] = lookup_strings(frame["ot"][typed].to_numpy(np.int64), strings)
                trace.set("tasks", task_frame(frame["dev"].to_numpy(), frame["stream"].to_numpy(), task_type,
                                              name_text, op_text, frame["s"].to_numpy(), frame["e"].to_numpy()),
                          path + " (TASK)")
        if "apis" in parts and "CANN_API" in schema:
            frame = pd.read_sql_query("SELECT CAST(startNs AS INTEGER) AS s, CAST(endNs AS INTEGER) AS e, type, "
                                      "globalTid, name FROM CANN_API", conn)
            if not frame.empty:
                levels = api_levels(conn, schema)
                level = level_names(frame["type"].to_numpy(np.int64), levels)
                trace.set("apis", api_frame(frame["globalTid"].to_numpy(np.int64) & 0xFFFFFFFF, level,
                                            lookup_strings(frame["name"].to_numpy(np.int64), strings),
                                             frame["s"].to_numpy(), frame["e"].to_numpy()), path + " (CANN_API)")
        if "iterations" in parts and "STEP_TIME" in schema:
            frame = pd.read_sql_query("SELECT id, CAST(startNs AS INTEGER) AS s, CAST(endNs AS INTEGER) AS e "
                                      "FROM STEP_TIME", conn)
            if not frame.empty:
                devices = conn.execute("SELECT DISTINCT deviceId FROM TASK").fetchall() if "TASK" in schema else []
                device = str(devices[0][0]) if len(devices) == 1 else NA
                s_ns, e_ns = frame["s"].to_numpy(np.int64), frame["e"].to_numpy(np.int64)
                trace.set("iterations", iteration_frame([device] * len(frame), [np.nan] * len(frame), frame["id"],
                                                        s_ns / 1000, e_ns / 1000, (e_ns - s_ns) / 1000),
                          path + " (STEP_TIME)")
    except (sqlite3.Error, pd.errors.DatabaseError) as exc:
        raise UnreadableFile(f"cannot read the database: {exc}", path=path) from exc
    finally:
        conn.close()
