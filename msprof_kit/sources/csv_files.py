"""Summary CSVs as exported by msprof, the PyTorch profiler or older tools: which summary a CSV
holds (from its header), and its rows as a normalized frame, a chunk at a time."""
from __future__ import annotations

import csv
import warnings
from typing import Iterable, List, Optional, Sequence

import pandas as pd

from ..errors import UnreadableFile
from .frames import API_NAME, CORE_TYPE, DURATION, OP_NAME, OP_TYPE, OP_VARIANTS, TASK_TYPE, normalize

CSV_CHUNK_ROWS = 200_000

def csv_kind(path: str) -> Optional[str]:
    """Which summary a CSV holds, from its header: 'op_summary' (one row per task: op_summary,
    kernel_details), 'task_time', 'op_statistic', 'api_statistic', 'communication_statistic', or None."""
    try:
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            header = next(csv.reader([f.readline()]), [])
    except OSError:
        return None
    cols = {h.strip().lstrip("\ufeff") for h in header}
    if {"kernel_name", "task_time(us)"} <= cols:
        return "task_time"
    named = {OP_VARIANTS.get(c, c) for c in cols}
    if {OP_NAME, DURATION} <= named and named & {OP_TYPE, TASK_TYPE}:
        return "op_summary"
    if {CORE_TYPE, "Count", "Total Time(us)"} <= cols and named & {OP_TYPE}:
        return "op_statistic"
    if {API_NAME, "Time(us)", "Count"} <= cols:
        return "api_statistic"
    if {"Count", "Total Time(us)", "Max Time(us)"} <= cols and OP_TYPE in named and CORE_TYPE not in cols:
        return "communication_statistic"
    return None


def read_csvs(paths: Sequence[str], kind: str) -> pd.DataFrame:
    """The rows of one export's CSV parts, normalized, read CSV_CHUNK_ROWS rows at a time."""
    parts: List[pd.DataFrame] = []
    for p in paths:
        try:
            try:
                with warnings.catch_warnings():
                    # pandas only warns when a row has more fields than the header, and drops them
                    warnings.simplefilter("error", pd.errors.ParserWarning)
                    chunks = pd.read_csv(p, dtype=str, keep_default_na=False, chunksize=CSV_CHUNK_ROWS,
                                         encoding="utf-8", encoding_errors="replace", index_col=False)
                    done = [normalize(chunk, kind) for chunk in chunks]
            except (pd.errors.ParserError, pd.errors.ParserWarning):
                done = [normalize(chunk, kind) for chunk in _repaired_chunks(p)]
            parts += done
        except (OSError, ValueError, csv.Error) as exc:
            raise UnreadableFile(f"cannot read as a {kind} CSV: {exc}", path=p) from exc
    if not parts:
        return pd.DataFrame()
    return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]


def _repaired_chunks(path: str) -> Iterable[pd.DataFrame]:
    """The rows of a CSV some of whose rows have more fields than its header, as the reference's
    C++ writer makes them: it quotes nothing, so an op name holding a comma spans several fields.
    Extra fields that are empty at the end of a row are dropped; others are joined back into the
    name column (Op Name / Name / kernel_name, else the first column)."""
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        reader = csv.reader(f)
        header = next(reader, [])
        width = len(header)
        stripped = [h.strip().lstrip("\ufeff") for h in header]
        at = next((i for i, h in enumerate(stripped) if OP_VARIANTS.get(h, h) == OP_NAME), 0)
        rows: List[List[str]] = []
        for row in reader:
            extra = len(row) - width
            while extra > 0 and row[-1] == "":
                row.pop()
                extra -= 1
            if extra > 0:
                row[at:at + extra + 1] = [",".join(row[at:at + extra + 1])]
            elif extra < 0:
                row += [""] * -extra
            rows.append(row)
            if len(rows) == CSV_CHUNK_ROWS:
                yield pd.DataFrame(rows, columns=header, dtype=object)
                rows = []
        if rows or not header:
            yield pd.DataFrame(rows, columns=header, dtype=object)
