"""What one collection offers the charts: its tables and intervals (read by the sources room),
and a short name for titles."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .. import sources
from ..errors import Diagnostics
from .drawing import relative, short_name


@dataclass
class Data:
    """One collection's tables and intervals, and a short name for titles."""
    tables: sources.Tables
    trace: sources.Trace
    name: str

    def source(self, report: str) -> str:
        """Where a table (a report of Tables, or a part of Trace) came from, relative to the collection."""
        where = self.tables.sources.get(report) or self.trace.sources.get(report, "")
        return relative(where, self.tables.path)


def collection_data(found: sources.Found, diag: Diagnostics, ensure: Optional[sources.EnsureStores] = None) -> Data:
    """The tables and intervals of one collection (`ensure`: see sources.EnsureStores)."""
    tables = sources.load(found, diag, ensure=ensure)
    trace = sources.read_trace(found, diag, ops=tables.op_rows, ops_source=tables.sources.get("op_summary", ""),
                               ensure=ensure)
    note = sources.exports_note(found.path, [tables.raw_problem, trace.raw_problem],
                                list(tables.sources.values()) + list(trace.sources.values()))
    if note:
        diag.note(note)
    return Data(tables, trace, short_name(found.path))
