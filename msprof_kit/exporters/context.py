"""What every exporter needs: the open store, its facts, the export scope and the output folder."""
from __future__ import annotations

import dataclasses
import os
import sqlite3
import time
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple

import numpy as np
import pandas as pd

from .. import store
from ..store import before_start
from ..progress import Progress

OUTPUT_DIR = "mindstudio_profiler_output"
ALL_MODELS = None


Iteration = Tuple[int, int, int, int]  # (index, start ns, end ns, end ns of the previous iteration or 0)


@dataclass
class Scope:
    """Which data an export covers.

    All-export (the default) covers everything. A graph export (`--model-id M --iteration-id I
    [--iteration-count N]`) covers model M's iterations I..I+N-1; `iterations` holds them per
    device, and the windows below are the reference's (docs/research/iteration_export.md §2)."""

    model_id: Optional[int] = ALL_MODELS
    iteration_id: Optional[int] = None
    iteration_count: int = 1
    iterations: Dict[int, List[Iteration]] = field(default_factory=dict)

    @property
    def all_export(self) -> bool:
        return self.model_id is None

    @property
    def windows(self) -> Dict[int, Tuple[int, int]]:
        """Device task window per device: [first iteration start, last iteration end], closed; a
        device task is exported when both its start and its end lie inside."""
        return {dev: (min(i[1] for i in its), max(i[2] for i in its)) for dev, its in self.iterations.items() if its}

    def api_window(self) -> Optional[Tuple[int, int]]:
        """Host API window: from the end of the iteration before the first one (0 if none) to the
        last iteration's end; an API is exported when it starts inside or spans the window start."""
        its = [i for per in self.iterations.values() for i in per]
        return (min(i[3] for i in its), max(i[2] for i in its)) if its else None

    def timeline_window(self, device: int) -> Optional[Tuple[int, int]]:
        """Window of the timeline's device layers: [0 for iteration 1 else the first iteration's
        start, last iteration's end); an event is kept when it starts inside or spans the start."""
        its = self.iterations.get(device)
        if not its:
            return None
        lo = 0 if self.iteration_id == 1 else min(i[1] for i in its)
        return lo, max(i[2] for i in its)


@dataclass
class ExportContext:
    """An export's view of one store: the open connection, KIT_INFO per device, the scope (whole collection or
    one iteration), the timestamp of the files it writes and the tables the store has."""
    collection_path: str
    conn: sqlite3.Connection
    info: Dict[str, str]                  # KIT_INFO rows of deviceId -1 (chip, platform_version, ...)
    device_info: Dict[int, Dict[str, str]]  # KIT_INFO rows per device id
    scope: Scope = field(default_factory=Scope)
    stamp: str = field(default_factory=lambda: time.strftime("%Y%m%d%H%M%S"))
    tables: Set[str] = field(default_factory=set)
    written: List[str] = field(default_factory=list)
    layers: Optional[Set[str]] = None     # timeline layers chosen with -reports (None: all)
    jobs: int = 1                         # processes this export may use (1: no workers)
    output_root: str = ""                 # where the exports go: the collection, or its stand-in folder
    progress: Progress = field(default_factory=Progress, repr=False)  # phases and blocks done, on stderr
    ts_origin: str = "epoch"              # timeline times: µs since the epoch, or since the start ("start")

    def layer_on(self, key: str) -> bool:
        """Whether the timeline shows a layer (a -reports `json_process` key such as `cann`)."""
        return self.layers is None or key in self.layers

    @property
    def out_dir(self) -> str:
        path = os.path.join(self.output_root or self.collection_path, OUTPUT_DIR)
        os.makedirs(path, exist_ok=True)
        return path

    @property
    def flavour(self) -> str:
        """'cpp' where a CANN install's analysis uses its C++ exporters (the 910B family), else 'python'."""
        return "cpp" if self.info.get("platform_version") in ("5", "7", "8", "11") else "python"

    @property
    def stars(self) -> bool:
        """STARS chips (910B family): context ids, MIX block numbers and aic_/aiv_ PMU prefixes."""
        return self.info.get("pmu_prefixed") == "1" or self.info.get("platform_version") in ("5", "7", "8", "11")

    def reopened(self) -> "ExportContext":
        """This context over a new connection to the store (for a forked child process)."""
        return dataclasses.replace(self, conn=store.open_store(self.collection_path), written=[])

    def has(self, table: str) -> bool:
        return table in self.tables

    def api_rule(self, flavour: str) -> Optional[before_start.ApiRule]:
        """Which host APIs before the collection start the flavour keeps (None: all of them)."""
        mirror = self.stored("CANN_API") if self.has("KIT_COLUMNS") else None
        return before_start.api_rule(self.conn, flavour, mirror)

    def frame(self, sql: str, params: tuple = ()) -> pd.DataFrame:
        return pd.read_sql_query(sql, self.conn, params=params)

    def read_columns(self, table: str) -> pd.DataFrame:
        return store.read_columns(self.conn, table)

    def stored_columns(self, table: str) -> Iterator[Tuple[str, np.ndarray, Optional[np.ndarray]]]:
        """(name, values, labels) of each column of a column-wise KIT table, one column at a time,
        so that a wide table is never held twice (docs/store.md: KIT_COLUMNS holds each column's
        little-endian array bytes; a text column as int32 codes into its JSON list of labels, else
        labels is None)."""
        return store.iter_columns(self.conn, table)

    def stored(self, table: str) -> store.StoredColumns:
        """A column-wise table (or mirror), to read whole columns or row ranges of them."""
        return store.StoredColumns(self.conn, table)

    def reader(self, table: str, names: Sequence[str]) -> "RowReader":
        """Columns of an all-integer unified table, to be read whole or at chosen rows (see
        RowReader): from its column-wise mirror (schema.MIRRORED), or as int64 from sqlite for a
        store written before the mirrors were kept (empty int64 arrays when the table is absent)."""
        if not self.has(table):
            return RowReader(0, whole={n: np.zeros(0, np.int64) for n in names})
        if self.has("KIT_COLUMNS"):
            mirror = self.stored(table)
            if all(n in mirror for n in names):
                return RowReader(len(mirror), mirror=mirror)
        rows = self.conn.execute(f"SELECT {', '.join(names)} FROM {table} ORDER BY rowid").fetchall()
        arr = np.array(rows, dtype=np.int64).reshape(len(rows), len(names))
        return RowReader(len(rows), whole={n: arr[:, j] for j, n in enumerate(names)})

    def columns(self, table: str, names: Sequence[str]) -> Dict[str, np.ndarray]:
        """Columns of an all-integer unified table in row order, as the mirror stores them (the
        narrowest integer type holding the values; see `reader`)."""
        columns = self.reader(table, names)
        return {n: columns.read(n) for n in names}

    def ints(self, table: str, names: Sequence[str]) -> Dict[str, np.ndarray]:
        """`columns`, widened to int64."""
        return {n: v.astype(np.int64, copy=False) for n, v in self.columns(table, names).items()}

    def blocks(self, table: str, names: Sequence[str], size: int) -> Iterator[Tuple[int, int, Dict[str, np.ndarray]]]:
        """`ints` of an all-integer unified table `size` rows at a time: (first row, end row, the
        columns of those rows). Read by row range from the mirror; a store without one is read
        whole from sqlite, then cut."""
        columns = self.reader(table, names)
        for lo in range(0, len(columns), size):
            hi = min(len(columns), lo + size)
            yield lo, hi, {c: columns.span(c, lo, hi).astype(np.int64) for c in names}

    def path_for(self, kind: str, ext: str, part: Optional[int] = None) -> str:
        """`<kind>[_slice_<part>]_<stamp>.<ext>` in the output folder; the path is recorded as written."""
        name = f"{kind}_slice_{part}_{self.stamp}.{ext}" if part is not None else f"{kind}_{self.stamp}.{ext}"
        path = os.path.join(self.out_dir, name)
        self.written.append(path)
        return path


@dataclass
class RowReader:
    """Columns of a table read at chosen rows, as stored (narrowest integer types): from the
    column-wise mirror by the row ranges asked for, so that only those are loaded, or from whole
    columns held in memory (a store written before the mirrors were kept)."""
    n_rows: int
    mirror: Optional[store.StoredColumns] = None
    whole: Optional[Dict[str, np.ndarray]] = None

    def __len__(self) -> int:
        return self.n_rows

    def read(self, name: str, rows: Optional[np.ndarray] = None) -> np.ndarray:
        """A column whole (rows None) or at these rows (any order)."""
        if self.mirror is None:
            values = self._whole()[name]
            return values if rows is None else values[rows]
        return self.mirror.read(name) if rows is None else self.mirror.take(name, rows)

    def span(self, name: str, lo: int, hi: int) -> np.ndarray:
        """Rows lo:hi of a column."""
        if self.mirror is None:
            return self._whole()[name][lo:hi]
        return self.mirror.read(name, lo, hi)

    def _whole(self) -> Dict[str, np.ndarray]:
        """The whole columns of a reader without a mirror (ExportContext.reader gives one or the other)."""
        if self.whole is None:
            raise AssertionError("internal: a RowReader has neither a mirror nor whole columns")
        return self.whole

    def on(self, ctx: "ExportContext") -> "RowReader":
        """The same columns read through another context's connection (a forked child's)."""
        return self if self.mirror is None else RowReader(self.n_rows, mirror=self.mirror.on(ctx.conn))


def open_context(collection_path: str, scope: Optional[Scope] = None, stamp: Optional[str] = None) -> ExportContext:
    """The export context of an imported collection (the caller closes `ctx.conn`)."""
    conn = store.open_store(collection_path)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    info: Dict[str, str] = {}
    per_device: Dict[int, Dict[str, str]] = {}
    if "KIT_INFO" in tables:
        for dev, name, value in conn.execute("SELECT deviceId, name, value FROM KIT_INFO"):
            if dev == -1:
                info[name] = value
            else:
                per_device.setdefault(int(dev), {})[name] = value
    ctx = ExportContext(collection_path=collection_path, conn=conn, info=info, device_info=per_device,
                        scope=scope or Scope(), tables=tables, output_root=store.output_root(collection_path))
    if stamp:
        ctx.stamp = stamp
    return ctx
