"""hash_dic decoded in bulk (parsers.hashdic) against the line-by-line dictionary parser it replaces,
and the vectorised lookups of ingest.names and ingest.tasks against the per-value loops they replace."""
from __future__ import annotations

import random
from typing import Dict

import numpy as np
import pytest

from msprof_kit.ingest.names import HashTable, ends_with
from msprof_kit.ingest import tasks
from msprof_kit.ingest.tasks import StringPool
from msprof_kit.parsers import hashdic, host
from msprof_kit.parsers.stream import Piece, split_lines

AWKWARD = [
    b"",
    b"\n",
    b"12:a:b\nxx:bad\n7:c\n12:z\n",
    b"12:a\r\n\r\r\n13\r\n:x\n0:zero\n00:z\n007:x\n18446744073709551615:max\n18446744073709551616:over\n"
    b"99999999999999999999:o\n123456789012345678901:long\n\xd9\xa1\xd9\xa2:arabic\n\xc2\xb2:sup\n5:\xff\xfe bad\n"
    b"6:\r\r\n7",
    b"1:" + b"x" * 5000 + b"\n2:" + "\u00e9".encode() * 3000 + b"\n3:" + "\u00e9".encode() * 2000 + b"\n4:" + b"\xff" * 5000,
    b"9:last\n9:again\r",
]


def _reachable(table: Dict[str, str]) -> Dict[str, str]:
    """The entries of the line parser's table an id can find: keys some uint64 spells in decimal."""
    return {k: v for k, v in table.items() if k.isascii() and k == str(int(k)) and int(k) < 1 << 64}


def _same(raw: bytes, cap: int = 1 << 20) -> None:
    pieces = [Piece("d", 0, len(raw))]
    want, want_issues = host.parse_dictionary_lines(split_lines(raw, pieces, cap=cap), False)
    got, issues = hashdic.parse_hash_dictionary(np.frombuffer(raw, np.uint8), pieces, cap)
    assert [(i.path, i.offset, i.message) for i in issues] == [(i.path, i.offset, i.message) for i in want_issues]
    table = dict(zip((str(k) for k in got.keys.tolist()), got.texts(np.arange(len(got)))))
    assert table == _reachable(want)
    assert got.has_entries() == bool(want)


@pytest.mark.parametrize("raw", AWKWARD)
def test_bulk_hash_dictionary_is_the_line_parser(raw):
    _same(raw)


def test_bulk_hash_dictionary_is_the_line_parser_on_random_bytes():
    rnd = random.Random(5)
    alphabet = [b"1", b"2", b"0", b":", b"\r", b"\n", b"a", "\u00e9".encode(), b"\xff", b"9", b"\xd9\xa1"]
    for _ in range(2000):
        raw = b"".join(rnd.choice(alphabet) for _ in range(rnd.randrange(0, 60)))
        _same(raw, cap=rnd.choice([4, 8, 1 << 20]))


def test_later_files_win_and_lookups_decode_only_what_is_asked():
    first, _ = hashdic.parse_hash_dictionary(np.frombuffer(b"5:five\n7:seven\n", np.uint8), [Piece("a", 0, 15)])
    second, _ = hashdic.parse_hash_dictionary(np.frombuffer(b"7:SEVEN\n0:nil\n", np.uint8), [Piece("b", 0, 14)])
    table = HashTable(hashdic.HashDictionary.merge([first, second]))
    got = table.texts(np.array([7, 5, 0, 9, 7, 11], dtype=np.uint64), "?")
    assert got.tolist() == ["SEVEN", "five", "nil", "?", "SEVEN", "?"] and table.misses == {9, 11}
    # KIT_API's item texts: the decimal id where there is none, "0" for id 0, and no misses noted
    empty = HashTable()
    assert not empty and empty.texts(np.array([0, 3], dtype=np.int64)).tolist() == ["", ""]
    assert empty.misses == {3}
    items = HashTable(first).texts_or_ids(np.array([0, 5, 8], dtype=np.uint64))
    assert items.tolist() == ["0", "five", "8"]
    # dict.get over the decimal texts: None where there is no entry, id 0 looked up like the others
    assert table.lookup(np.array([0, 5, 8], dtype=np.uint64)).tolist() == ["nil", "five", None]
    # negative ids (signed columns) are misses, never wrapped into uint64 ids
    assert HashTable(first).texts(np.array([-1, 5], dtype=np.int64)).tolist() == ["", "five"]


def test_string_pool_numbers_new_texts_in_first_row_order():
    pool = StringPool([""])
    ids = pool.ids_of(np.array(["b", "a", "b", "", "c", "a"], dtype=object))
    assert ids.tolist() == [1, 2, 1, 0, 3, 2]
    assert pool.ids_of(np.array(["d", "c"], dtype=object)).tolist() == [4, 3]
    assert pool.ids_of(np.array([1, "1", 2.0], dtype=object)).tolist() == [5, 5, 6]  # printed alike: one id
    assert list(pool.ids) == ["", "b", "a", "c", "d", "1", "2.0"]


def test_ends_with_is_str_endswith():
    texts = np.array(["xAicpuKernel", "AivKernel", "Aiv", "", "\u00e9AivKernel", "a\udcff"], dtype=object)
    want = [t.endswith(("AicpuKernel", "AivKernel")) for t in texts]
    assert ends_with(texts, ("AicpuKernel", "AivKernel")).tolist() == want


@pytest.mark.skipif(not hashdic.native_impl.available(), reason="the C extension is not built")
def test_dict_keys_twins_agree_on_awkward_and_random_lines():
    """_native.dict_keys and py_dict_keys: the same colons, keys and flags, lines cut anywhere
    (ends before the '\\n', lines without ':', empty ones, 20-digit keys around the largest uint64)."""
    from msprof_kit import _native
    rnd = random.Random(9)
    alphabet = [b"1", b"8", b"0", b":", b"\r", b"a", b"\xff", b"9", b"5", b"\n"]
    raws = AWKWARD + [b"18446744073709551615:a\n18446744073709551614:b\n18446744073709551616:c\n"
                      b"28446744073709551615:d\n012345678901234567890:e\n1:"]
    raws += [b"".join(rnd.choice(alphabet) for _ in range(rnd.randrange(0, 80))) for _ in range(1500)]
    for raw in raws:
        buf = np.frombuffer(raw, np.uint8)
        starts = np.array(sorted(rnd.randrange(0, len(raw) + 1) for _ in range(rnd.randrange(0, 6))), np.int64)
        ends = np.minimum(starts + np.array([rnd.randrange(0, 30) for _ in starts], np.int64), len(raw))
        if raw in AWKWARD:
            starts, ends, _ = hashdic.line_ranges(buf)
        colon, value, flags = _native.dict_keys(buf, starts, ends)
        want = hashdic.py_dict_keys(buf, starts, ends)
        bits = np.frombuffer(flags, np.uint8)
        got = (np.frombuffer(colon, np.int64), (bits & 1) != 0, np.frombuffer(value, np.uint64), (bits & 2) != 0)
        for g, w in zip(got, want):
            assert g.tolist() == w.tolist(), raw
    with pytest.raises(ValueError):
        _native.dict_keys(b"12:a", np.array([0], np.int64), np.array([9], np.int64))


@pytest.mark.skipif(not hashdic.native_impl.available(), reason="the C extension is not built")
def test_decode_spans_twins_agree():
    """_native.decode_spans and py_decode_spans: valid and broken UTF-8 (cut sequences, lone
    continuation bytes, surrogates' encodings), empty spans, spans out of range refused alike."""
    from msprof_kit import _native
    rnd = random.Random(4)
    pieces = [b"a", "\u00e9".encode(), "\u4e2d".encode(), "\U0001f600".encode(), b"\xff", b"\x80", b"\xed\xa0\x80",
              b"\xe4\xb8", b"\x00", b":"]
    data = b"".join(rnd.choice(pieces) for _ in range(3000))
    starts = np.array(sorted(rnd.randrange(0, len(data) + 1) for _ in range(500)), np.int64)
    ends = np.minimum(starts + np.array([rnd.randrange(0, 12) for _ in starts], np.int64), len(data))
    got = _native.decode_spans(data, starts, ends)
    assert got == hashdic.py_decode_spans(data, starts, ends) and "\ufffd" in "".join(got)
    assert _native.decode_spans(data, starts[:0], ends[:0]) == [] == hashdic.py_decode_spans(data, starts[:0], ends[:0])
    for s, e in (([3], [2]), ([-1], [1]), ([0], [len(data) + 1])):
        for fn in (_native.decode_spans, hashdic.py_decode_spans):
            with pytest.raises(ValueError):
                fn(data, np.array(s, np.int64), np.array(e, np.int64))


@pytest.mark.parametrize("rows", [1 << 20, 3])
def test_string_ids_number_new_strings_in_the_order_of_their_first_row(monkeypatch, rows):
    """StringPool.ids_of (one pass of setdefault, renumbered where found strings or repeats fall
    between new ones; `rows` strings at a time) against numbering the strings one by one."""
    monkeypatch.setattr(tasks, "LOOKUP_ROWS", rows)
    rng = np.random.default_rng(5)
    for trial in range(400):
        start = [str(v) for v in rng.integers(0, 20, rng.integers(0, 5))]
        pool, expect = StringPool(start), {}
        for s in start:
            expect.setdefault(s, len(expect))
        for _ in range(3):
            values = np.empty(int(rng.integers(0, 12)), dtype=object)
            values[:] = [rng.choice(["", "é", "x", "xx", str(int(rng.integers(0, 30)))]) for _ in range(len(values))]
            want = [expect.setdefault(v, len(expect)) for v in values]
            assert pool.ids_of(values).tolist() == want, (start, values)
            assert list(pool.ids.items()) == list(expect.items())
    mixed = np.array(["1", 1, None], dtype=object)  # not all strings: each read by its str
    assert StringPool(["1"]).ids_of(mixed).tolist() == [0, 0, 1]
