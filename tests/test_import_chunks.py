"""The import reads raw slices a chunk at a time: the store must not depend on the chunk size."""
from __future__ import annotations

import sqlite3

import pytest

from msprof_kit import store
from msprof_kit.parsers import stream as S

from conftest import DEGRADED_CASES, INTACT_CASES, copy_input, needs_shared, run


def _tables(prof: str) -> dict:
    """Every table of the store, rows in rowid order (the collection's own path left out)."""
    conn = sqlite3.connect(store.store_path(prof))
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        out = {n: conn.execute(f'SELECT * FROM "{n}" ORDER BY rowid').fetchall() for n in names}
    finally:
        conn.close()
    return {n: [tuple(str(v).replace(prof, "PROF") for v in row) for row in rows] for n, rows in out.items()}


@needs_shared
@pytest.mark.parametrize("case", INTACT_CASES + DEGRADED_CASES)
def test_chunks_of_a_few_records_import_the_same_store(case, tmp_path, capsys, monkeypatch):
    """With chunks of 700 bytes (2 to 17 records, bad records and tensor groups crossing chunk
    edges) every table, warnings included, is the one-chunk import's."""
    whole = copy_input(case, str(tmp_path / "whole"))
    assert run(["import", "-dir", whole], capsys)[0] == 0
    monkeypatch.setattr(S, "CHUNK_BYTES", 700)
    small = copy_input(case, str(tmp_path / "small"))
    assert run(["import", "-dir", small], capsys)[0] == 0
    want, got = _tables(whole), _tables(small)
    assert want.get("TASK") or want.get("CANN_API") or want.get("KIT_WARNINGS")
    assert got == want
