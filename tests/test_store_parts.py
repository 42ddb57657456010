"""Tables written in parts (TableWriter.put with last=False) hold what one put of the whole holds."""
from __future__ import annotations

import os
import sqlite3

import numpy as np
import pandas as pd
import pytest

from msprof_kit import native_impl
from msprof_kit import schema, store
from msprof_kit.store import CodedTexts
from msprof_kit.errors import StoreError

NAMES = np.array(["aclopCompile", "launch", "aclopCompile", "x" * 40, "\u7b97\u5b50"], dtype=object)


def _apis(n: int, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    start = np.cumsum(rng.integers(0, 5000, n)) + 1_700_000_000_000_000_000
    return pd.DataFrame({"startNs": start, "endNs": start + rng.integers(0, 900, n),
                         "type": rng.choice([5000, 10000, 15000, 20000], n),
                         "globalTid": (np.int64(4242) << 32) | rng.integers(0, 70_000, n),
                         "connectionId": np.arange(1, n + 1), "name": rng.integers(0, 300, n)})


def _kit(n: int, seed: int = 4) -> dict:
    rng = np.random.default_rng(seed)
    return {"connectionId": np.arange(1, n + 1, dtype=np.int64),
            "mode": CodedTexts(rng.integers(0, len(NAMES), n), NAMES),
            "itemId": np.array([str(v) for v in rng.integers(0, 9, n)], dtype=object)}


def _cut(table, bounds):
    if isinstance(table, pd.DataFrame):
        return [table.iloc[lo:hi].reset_index(drop=True) for lo, hi in zip(bounds, bounds[1:])]
    return [{k: (CodedTexts(v.codes[lo:hi], v.texts) if isinstance(v, CodedTexts) else v[lo:hi])
             for k, v in table.items()} for lo, hi in zip(bounds, bounds[1:])]


def _dump(path: str) -> dict:
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        out = {t: conn.execute(f'SELECT * FROM "{t}" ORDER BY rowid').fetchall() for t in tables}
        out["indexes"] = conn.execute("SELECT name, tbl_name FROM sqlite_master WHERE type='index'").fetchall()
        return out
    finally:
        conn.close()


def test_parts_write_what_one_put_writes(tmp_path):
    """CANN_API (rows as pages with the C packer, mirrored in KIT_COLUMNS) and KIT_API (columnar,
    texts) in uneven parts, interleaved, some empty: the tables, the KIT_COLUMNS rows (narrowed
    types, labels in first-row order) and the indexes are those of a single put each. (Every test
    runs with both implementations: sqlite's INSERT with the Python one.)"""
    n = 70_000
    apis, kit = _apis(n), _kit(n)
    bounds = [0, 1, 1, 20_000, 20_001, 69_000, n]
    with store.TableWriter(str(tmp_path / "whole.db")) as out:
        out.put("CANN_API", apis)
        out.put("KIT_API", kit)
    with store.TableWriter(str(tmp_path / "parts.db"), background=True) as out:
        for a, k in zip(_cut(apis, bounds), _cut(kit, bounds)):
            out.put("CANN_API", a, last=False)
            out.put("KIT_API", k, last=False)
        out.put("CANN_API", apis.iloc[:0])
        out.put("KIT_API", _cut(kit, [0, 0])[0])
    assert sorted(os.listdir(tmp_path)) == ["parts.db", "whole.db"]
    whole, parts = _dump(str(tmp_path / "whole.db")), _dump(str(tmp_path / "parts.db"))
    assert len(whole["CANN_API"]) == n
    assert parts == whole


def test_a_table_left_without_its_last_part_fails_and_leaves_no_file(tmp_path):
    with pytest.raises(StoreError, match="did not get its last part"):
        with store.TableWriter(str(tmp_path / "s.db")) as out:
            out.put("KIT_API", _kit(10), last=False)
    assert os.listdir(tmp_path) == []


def test_no_other_table_is_written_while_one_of_pages_waits_for_parts(tmp_path):
    if native_impl.current() != "c":
        pytest.skip("rows go through sqlite with the Python implementation: nothing waits")
    with pytest.raises(StoreError, match="waits for its next part"):
        with store.TableWriter(str(tmp_path / "s.db"), background=True) as out:
            out.put("CANN_API", _apis(10), last=False)
            out.put("TASK", pd.DataFrame({c: np.arange(3) for c, _ in schema.UNIFIED["TASK"]}))
            out.put("CANN_API", None)
    assert os.listdir(tmp_path) == []


def test_parts_of_one_column_in_two_types_are_an_internal_error(tmp_path):
    with pytest.raises(StoreError, match="in one part"):
        with store.TableWriter(str(tmp_path / "s.db")) as out:
            out.put("KIT_TASK", {c: np.zeros(2, np.int64) for c in schema.COLUMNAR["KIT_TASK"]}, last=False)
            out.put("KIT_TASK", {c: np.zeros(2, np.int32) for c in schema.COLUMNAR["KIT_TASK"]})
    assert os.listdir(tmp_path) == []


def test_text_parts_in_shared_and_own_tables_write_what_one_put_writes(tmp_path):
    """KIT_API's text columns in parts: CodedTexts over one shared table (texts in it twice, codes
    never used), over tables of their own, and plain object arrays, one after the other: the
    labels (first-row order over all parts) and codes are those of one put of the whole column."""
    rng = np.random.default_rng(9)
    shared = np.array(["b", "a", "b", "unused", "c" * 30, "\u7b97"], dtype=object)
    own = np.array(["z", "a", "y", "y"], dtype=object)
    parts = [CodedTexts(rng.choice([0, 1, 2, 4], 50), shared), CodedTexts(rng.integers(0, 4, 40), own),
             CodedTexts(rng.choice([0, 2, 5], 30), shared), np.array(["q", "a", "c" * 30, "q"], dtype=object),
             CodedTexts(rng.integers(0, 6, 60), shared)]
    texts = np.concatenate([np.asarray(p.texts, dtype=object)[p.codes] if isinstance(p, CodedTexts) else p
                            for p in parts])
    n = len(texts)
    with store.TableWriter(str(tmp_path / "whole.db")) as out:
        out.put("KIT_API", {"connectionId": np.arange(n), "mode": texts, "itemId": texts})
    with store.TableWriter(str(tmp_path / "parts.db")) as out:
        at = 0
        for p in parts:
            m = len(p.codes) if isinstance(p, CodedTexts) else len(p)
            out.put("KIT_API", {"connectionId": np.arange(at, at + m), "mode": p, "itemId": texts[at:at + m]},
                    last=False)
            at += m
        out.put("KIT_API", None)
    assert _dump(str(tmp_path / "parts.db")) == _dump(str(tmp_path / "whole.db"))
