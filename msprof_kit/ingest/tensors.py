"""The host's tensor_info records grouped into ops, with the texts of their tensors (shapes, data
types and formats), a window of time stamps at a time (docs/benchmarks.md)."""
from __future__ import annotations

from typing import List, Tuple, cast

import numpy as np

from ..arrays import first_seen
from ..errors import Diagnostics
from ..layout import ResultDir
from ..parsers import host as host_parsers
from ..parsers.records import TENSOR_INFO
from ..parsers.stream import decode_stream
from .streams import RecordStream, read_stream
from ..spill import Runs
from . import limits
from .columns import DataFiles, text_array
from .names import group_paths


def tensor_job(rd: ResultDir, files: DataFiles, scratch: str) -> Tuple[Runs, np.ndarray, List[str]]:
    """tensor_texts in a forked worker: (ops, text table, warnings)."""
    local = Diagnostics()
    tensors, table = tensor_texts(files, local, scratch)
    return tensors, table, local.warnings


def tensor_texts(files: DataFiles, diag: Diagnostics, scratch: str) -> Tuple[Runs, np.ndarray]:
    """(one row per op: thread_id, timestamp, text = row of the table, pos = stream position of
    its first record, spilled by timestamp under the prefix "tensor"; the (m, 6) text table).

    Records with the same (op_name, timestamp, thread_id) are one op's; its tensors may span
    several records. The records are spilled by timestamp, with a hash of their payload, and
    grouped a window of timestamps at a time (an op's records share one). Empty shapes and
    descriptions read `N/A`, as the reference prints them."""
    out = Runs(scratch, "tensor", "timestamp")
    tables = [text_array((1, 6), "N/A")]  # row 0: an op without tensor_info
    base, seen = 1, 0
    try:
        for _, paths in group_paths(files, "tensor_info"):
            recs = Runs(scratch, "tensor_records", "timestamp", limits.SAMPLE_EVERY)
            try:
                count, table = _tensor_stream(paths, recs, out, base, seen, diag)
            finally:
                recs.close()
            tables.append(table)
            base += len(table)
            seen += count
    except BaseException:
        out.close()
        raise
    table = np.concatenate(tables)
    for col in (0, 3):
        table[table[:, col] == '""', col] = "N/A"
    for col in (1, 2, 4, 5):
        table[table[:, col] == "", col] = "N/A"
    return out, table


def _tensor_stream(paths: List[str], recs: Runs, out: Runs, base: int, seen: int, diag: Diagnostics
                   ) -> Tuple[int, np.ndarray]:
    """One tensor_info stream's ops into `out` (text rows from `base`, positions from `seen`), its
    records spilled to `recs`; returns (its records, its text table)."""
    stream = RecordStream(TENSOR_INFO, paths, *host_parsers.HOST_VALID)
    payloads = host_parsers.TensorPayloads()
    count = 0
    for arr, _ in stream.chunks():
        h = payloads.hashes(arr)
        if h is None:  # two payloads share a hash: decode the stream whole to tell them apart
            buf, pieces = read_stream(paths)
            arr, _, issues = decode_stream(TENSOR_INFO, buf, pieces, *host_parsers.HOST_VALID)
            del buf
            diag.extend(issues)
            group, text_row, table = host_parsers.render_tensors(arr)
            first = np.unique(group, return_index=True)[1]
            out.add({"thread_id": arr["thread_id"][first].astype(np.int64),
                     "timestamp": arr["timestamp"][first].astype(np.int64),
                     "text": base + text_row[group[first]], "pos": seen + first})
            return len(arr), table
        n = len(arr)
        recs.add({"op_name": arr["op_name"].astype(np.int64), "timestamp": arr["timestamp"].astype(np.int64),
                  "thread_id": arr["thread_id"].astype(np.int64), "hash": h,
                  "seq": np.arange(count, count + n, dtype=np.int64)})
        count += n
    diag.extend(stream.issues)
    rendered = payloads.rendered()
    rows = host_parsers.tensor_rows(rendered)
    edges = recs.edges(limits.SPILL_ROWS)
    recs.cut(edges)
    for w in range(len(edges) + 1):
        c = recs.window(w)
        if c is None:
            continue
        order = np.argsort(c["seq"], kind="stable")
        c = {k: v[order] for k, v in c.items()}
        payload = cast(np.ndarray, np.searchsorted(payloads.known, c["hash"]))  # (numpy's stubs read an array of unknown dtype as a scalar)
        group, text = host_parsers.group_ops(c["op_name"], c["timestamp"], c["thread_id"], payload, rendered, rows)
        first = first_seen(group)
        out.add({"thread_id": c["thread_id"][first], "timestamp": c["timestamp"][first], "text": base + text,
                 "pos": seen + c["seq"][first]})
        del c
    table = np.empty((len(rows), 6), dtype=object)
    if rows:  # (a stream without one valid record has none)
        table[:] = rows
    return count, table
