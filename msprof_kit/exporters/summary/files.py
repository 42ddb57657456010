"""The summary files: `<kind>_<stamp>.csv` (split in parts of CSV_LIMIT rows) and the Python
path's `<kind>_<stamp>.json`. The CSV writer renders CHUNK_ROWS rows at a time into one bytes block
with `native_impl.format_rows` (one C call per chunk when the extension is built), so a
million-task export never holds all its cell texts at once; two threads format and write the
chunks (in order) while the caller's thread computes the cells of the next."""
from __future__ import annotations

import collections
import json
from concurrent.futures import Future, ThreadPoolExecutor
from typing import BinaryIO, Iterator, List, Optional, Tuple

from ...native_impl import csv_field, format_rows
from ..context import ExportContext
from .columns import AnyTable

CSV_LIMIT = 1_000_000          # data rows per CSV file (outputs.md §2.1)
FORMAT_THREADS = 2             # threads formatting and writing a CSV's chunks (`_write_chunks`)


def csv_parts(n: int, flavour: str) -> List[Tuple[Optional[int], int, int]]:
    """(slice index or None, first row, end row) of each CSV file of n rows (outputs.md §2.1): the
    C++ writer numbers every part once there are more than CSV_LIMIT rows; the Python merger numbers
    the full parts, and the remainder only after a numbered part."""
    if n < CSV_LIMIT or (n == CSV_LIMIT and flavour == "cpp"):
        return [(None, 0, n)]
    bounds = list(range(0, n, CSV_LIMIT)) + [n]
    return [(i, lo, hi) for i, (lo, hi) in enumerate(zip(bounds, bounds[1:]))]


def write_csv(ctx: ExportContext, kind: str, table: AnyTable, flavour: str) -> None:
    """`<kind>_<stamp>.csv` (or its `_slice_<i>` parts): header, then the rows, LF line ends. A
    row is one template of the columns' slots, so each chunk of rows is one `format_rows` call."""
    ends = [","] * (len(table.columns) - 1) + ["\n"]
    pieces = [b""] + [(c.suffix + end).encode("utf-8") for c, end in zip(table.columns, ends)]
    header = (",".join(csv_field(h) for h in table.header) + "\n").encode("utf-8")
    for part, lo, hi in csv_parts(table.n_rows, flavour):
        with open(ctx.path_for(kind, "csv", part), "wb") as out:
            out.write(header)
            _write_chunks(out, pieces, ((rows.stop - rows.start, [c.slot(rows) for c in cols])
                                        for cols, rows in table.pieces(lo, hi)))


def _write_chunks(out: BinaryIO, pieces: List[bytes], chunks: Iterator[Tuple[int, list]]) -> None:
    """Format and write chunks of rows ((row count, slots) each, in order): FORMAT_THREADS threads
    format chunks side by side and write them in order while this one computes the slots of the
    next (format_rows and the write let go of the GIL), so that the cores left idle share the
    work. At most FORMAT_THREADS chunks are in the threads' hands at a time."""
    def job(n: int, slots: list, before: Optional["Future[None]"]) -> None:
        block = format_rows(pieces, slots, n, b"")
        del slots
        if before is not None:
            before.result()  # (its failure is raised where it is awaited, in order)
        out.write(block)
    with ThreadPoolExecutor(max_workers=FORMAT_THREADS, thread_name_prefix="csv-writer") as pool:
        pending: "collections.deque[Future[None]]" = collections.deque()
        for n, slots in chunks:
            pending.append(pool.submit(job, n, slots, pending[-1] if pending else None))
            del slots
            while len(pending) > FORMAT_THREADS:
                pending.popleft().result()
        while pending:
            pending.popleft().result()


def write_json(ctx: ExportContext, kind: str, table: AnyTable) -> None:
    """`<kind>_<stamp>.json`: a list of one object per row, header → value, as the Python path's
    JSON summaries (numbers as numbers, texts and timestamps as strings, `json.dump` separators)."""
    keys = [json.dumps(h) + ": " for h in table.header]
    with open(ctx.path_for(kind, "json"), "w", encoding="utf-8") as out:
        out.write("[")
        sep = ""
        for cols, rows in table.pieces(0, table.n_rows):
            columns = [c.json(rows) for c in cols]
            for row in zip(*columns):
                out.write(sep + "{" + ", ".join(k + v for k, v in zip(keys, row)) + "}")
                sep = ", "
        out.write("]")


def json_table(table: AnyTable) -> AnyTable:
    """The Python path's JSON summaries are per-device files without a Device_id key. Keep the key
    when the rows span several devices (the reference lets one device's file overwrite the other's)."""
    if "Device_id" not in table.header or table.distinct("Device_id") > 1:
        return table
    return table.drop(["Device_id"])
