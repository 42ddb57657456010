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


def test_a_timeline_block_the_writing_thread_cannot_write_fails_the_close_and_removes_the_file(tmp_path, monkeypatch):
    """TraceWriter writes from its thread: a write that fails there (a full disk) is raised when
    the writer closes, and the unfinished file is removed."""
    from msprof_kit.exporters.timeline.writer import TraceWriter
    path = tmp_path / "t.json"
    with pytest.raises(OSError, match="No space left"):
        with TraceWriter(str(path)) as out:
            real = out._f.write

            def full(data):
                if b"boom" in bytes(data):
                    raise OSError(28, "No space left on device")
                return real(data)
            monkeypatch.setattr(out._f, "write", full)
            out.add(['{"name":"boom"}'])
    assert not path.exists()
