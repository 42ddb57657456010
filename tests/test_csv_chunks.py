"""The summary CSV writer's chunks: formatted by threads side by side, written in order."""
from __future__ import annotations

import io
import threading
import time

import numpy as np
import pytest

from msprof_kit.exporters.summary import files
from msprof_kit.native_impl import int_slot


def _chunks(count: int, rows: int = 3):
    for k in range(count):
        values = np.arange(k * rows, (k + 1) * rows, dtype=np.int64)
        yield rows, [int_slot(values)]


def test_chunks_are_written_in_order_when_a_later_one_is_formatted_first(monkeypatch):
    real = files.format_rows
    first_done = threading.Event()
    finished = []

    def slow_first(pieces, slots, n, sep):
        text = real(pieces, slots, n, sep)
        if slots[0].values[0] == 0:  # the first chunk finishes formatting after the second
            time.sleep(0.2)
        finished.append(int(slots[0].values[0]))
        if slots[0].values[0] == 0:
            first_done.set()
        return text
    monkeypatch.setattr(files, "format_rows", slow_first)
    out = io.BytesIO()
    files._write_chunks(out, [b"", b"\n"], _chunks(6))
    assert first_done.is_set() and finished[0] != 0  # the threads did overtake each other
    assert out.getvalue() == b"".join(b"%d\n" % i for i in range(18))


def test_a_chunk_that_fails_stops_the_writing_and_is_raised(monkeypatch):
    real = files.format_rows

    def failing(pieces, slots, n, sep):
        if slots[0].values[0] == 6:
            raise ValueError("format_rows: slot 0: code 99 at row 0 is out of range")
        return real(pieces, slots, n, sep)
    monkeypatch.setattr(files, "format_rows", failing)
    out = io.BytesIO()
    with pytest.raises(ValueError, match="code 99"):
        files._write_chunks(out, [b"", b"\n"], _chunks(50))
    written = out.getvalue()
    assert written == b"".join(b"%d\n" % i for i in range(6))  # the chunks before it, nothing after


def test_timeline_rows_formatted_by_the_writing_thread_read_as_rows_formatted_here(tmp_path):
    """TraceWriter formats `Template.later` blocks in its thread: the same bytes as `rows`, in
    the order added; a block that cannot be formatted fails the close, and no file is left."""
    import json

    from msprof_kit.exporters.timeline.writer import Template, TraceWriter
    event = Template('{"ts":', "ts", ',"k":', "k", "}")
    here, there = str(tmp_path / "here.json"), str(tmp_path / "there.json")
    with TraceWriter(here) as a, TraceWriter(there) as b:
        for k in range(5):
            ts, n = np.arange(k * 4, k * 4 + 4, dtype=np.int64), np.full(4, k, dtype=np.int64)
            a.add_block(event.rows(4, ts=int_slot(ts), k=int_slot(n)), 4)
            b.add_block(event.later(4, ts=int_slot(ts), k=int_slot(n)), 4)
    with open(here, "rb") as f, open(there, "rb") as g:
        mine = g.read()
        assert mine == f.read()
    assert [e["ts"] for e in json.loads(mine)] == list(range(20))
    bad = str(tmp_path / "bad.json")
    from msprof_kit.native_impl import text_slot, text_table
    with pytest.raises(IndexError, match="code 7 is not below the 1 texts"):
        with TraceWriter(bad) as c:
            wrong = text_slot(np.array([0, 7], dtype=np.int32), text_table(['"a"']))  # code 7: no such text
            c.add_block(event.later(2, ts=int_slot(np.arange(2)), k=wrong), 2)
    assert not (tmp_path / "bad.json").exists()
