"""Pure decoders: stream alignment, bad records, pairing, id decoding, dictionaries, tensors."""
from __future__ import annotations

import numpy as np
import pytest

from msprof_kit.parsers import device, host, records
from msprof_kit.parsers.stream import Piece, decode_stream, locate
from msprof_kit.timebase import Clock
from fractions import Fraction


def _api(n: int, over: dict = None) -> bytes:
    over = over or {}
    out = b""
    for i in range(n):
        fields = dict(magic=records.HOST_MAGIC, level=20000, type=1, thread_id=7, begin=100 + i, end=200 + i)
        fields.update(over.get(i, {}))
        out += records.pack(records.API_EVENT, **fields)
    return out


def test_bad_magic_costs_one_record():
    raw = _api(5, {2: {"magic": 0x5A5B}})
    cols, issues = host.decode_api_event(np.frombuffer(raw, np.uint8), [Piece("f", 0, len(raw))])
    assert list(cols["begin"]) == [100, 101, 103, 104]
    assert len(issues) == 1 and issues[0].offset == 80 and "0x5A5A" in issues[0].message


def test_truncated_tail_keeps_aligned_records():
    raw = _api(4)[:-15]
    cols, issues = host.decode_api_event(np.frombuffer(raw, np.uint8), [Piece("f", 0, len(raw))])
    assert list(cols["begin"]) == [100, 101, 102]
    assert any("truncated" in i.message and i.offset == 120 for i in issues)


def test_aged_head_follows_the_reference():
    raw = _api(4)[15:]  # the collector's ager cut the start
    cols, issues = host.decode_api_event(np.frombuffer(raw, np.uint8), [Piece("f", 0, len(raw))])
    assert list(cols["begin"]) == [101, 102, 103]
    assert any("leading" in i.message for i in issues)


def test_records_straddling_slices_and_locate():
    raw = _api(3)
    pieces = [Piece("a", 0, 50), Piece("b", 50, 70)]
    arr, offsets, issues = decode_stream(records.API_EVENT, np.frombuffer(raw, np.uint8), pieces)
    assert list(arr["begin"]) == [100, 101, 102] and not issues
    assert locate(pieces, 80) == ("b", 30)


def test_pairing_drops_only_the_orphans():
    keys = [np.array([1, 1, 1, 1, 2, 2])]
    time = np.array([10, 20, 30, 40, 15, 25])
    is_start = np.array([True, True, False, True, True, False])
    s, e, lost_end, lost_start = device.pair_start_end(keys, time, is_start)
    assert sorted(zip(time[s], time[e])) == [(15, 25), (20, 30)]
    assert (lost_end, lost_start) == (2, 0)


def test_stars_id_decoding():
    stream, task = device.stars_ids(np.array([5, 0x1000 | 7, 0x2000 | 0x123]), np.array([9, 0x2005, 0x1003]))
    assert list(stream) == [5, 7, 3]
    assert list(task) == [9, 0x0005, 0x123 | 0x1000]


def test_dictionaries():
    table, issues = host.parse_dictionary("12:a:b\nxx:bad\n7:c\n12:z\n", "d", typed=False)
    assert table == {"12": "z", "7": "c"} and len(issues) == 1 and issues[0].offset == 7
    types, issues = host.parse_dictionary("5000_802:task_track\n20000_x:bad\n", "t", typed=True)
    assert types == {"5000_802": "task_track"} and len(issues) == 1


def test_tensor_texts_join_split_records():
    def rec(ts, tensors):
        fields = dict(magic=records.HOST_MAGIC, level=10000, type=1, thread_id=3, timestamp=ts, op_name=99,
                      tensor_num=len(tensors))
        for i, (kind, fmt, dt, shape) in enumerate(tensors):
            fields.update({f"t{i}_type": kind, f"t{i}_format": fmt, f"t{i}_dtype": dt,
                           f"t{i}_shape": list(shape) + [0] * (8 - len(shape))})
        return records.pack(records.TENSOR_INFO, **fields)
    raw = rec(5, [(0, 2, 1, (8, 16)), (0, 29, 27, (4,))]) + rec(5, [(1, 2 | (16 << 8), 0, (8,))]) + \
        rec(6, [(0, 0xFFFFFFFF, 9, ())])
    arr = np.frombuffer(raw, dtype=records.TENSOR_INFO.dtype)
    group, table = host.render_tensors(arr)
    assert group.tolist() == [0, 0, 1]
    assert list(table[0]) == ['"8,16;4"', "FLOAT16;DT_BF16", "ND;FRACTAL_NZ", '"8"', "FLOAT", "ND:16"]
    assert list(table[1]) == ["N/A", "INT64", "UNDEFINED", "N/A", "N/A", "N/A"]


def test_clock_is_exact_integer_arithmetic():
    c = Clock(base_ticks=50_000_000_000, base_ns=1_700_902_984_000_000_000, mhz=Fraction(50))
    assert c.to_ns(np.array([50_000_000_003]))[0] == 1_700_902_984_000_000_060
    c = Clock(base_ticks=0, base_ns=0, mhz=Fraction("38.4"))
    assert c.to_ns(np.array([384]))[0] == 10_000


def test_clock_matches_exact_rounding_with_and_without_a_whole_ns_per_tick():
    """ns = base_ns + (t - base_ticks) * 1000 / MHz rounded half up, checked with Fractions, for
    clocks with a whole number of ns per tick (multiplied) and without (divided and rounded)."""
    import math
    rng = np.random.default_rng(7)
    ticks = np.concatenate([rng.integers(0, 2 ** 44, 500), [12345, 12346, 0]])
    for mhz in (Fraction(50), Fraction(100), Fraction(1000), Fraction("38.4"), Fraction(3), Fraction(2000), None):
        c = Clock(base_ticks=12345, base_ns=1_700_902_984_000_000_000, mhz=mhz)
        for arr in (ticks, ticks.astype(np.uint64)):
            got = c.to_ns(arr)
            want = [c.base_ns + (int(t) - c.base_ticks if mhz is None else
                                 math.floor(Fraction(int(t) - c.base_ticks) * 1000 / mhz + Fraction(1, 2)))
                    for t in ticks]
            assert got.dtype == np.int64 and got.tolist() == want, mhz
        assert np.array_equal(arr, ticks.astype(np.uint64))  # the input is left as it was


def test_interned_texts_survive_hash_collisions():
    """Texts told apart by their hash, checked byte by byte: when two texts share a hash the
    interner undoes the chunk and goes by the texts themselves from then on."""
    from msprof_kit.ingest.tensors import InternedTexts
    from msprof_kit.native_impl import fnv_hashes, text_table

    def add(interned, texts, hashes=None):
        t = text_table(texts)
        h = fnv_hashes(t.blob, t.offsets) if hashes is None else np.asarray(hashes, dtype=np.uint64)
        return interned.add(t.blob, t.offsets[:-1], t.offsets[1:], h).tolist()

    interned = InternedTexts()
    assert add(interned, ["a", "bb", "a", ""]) == [0, 1, 0, 2] and interned.table().texts() == ["a", "bb", ""]
    assert add(interned, ["bb", "ccc", "a"]) == [1, 3, 0] and interned.exact is None
    assert add(interned, ["x", "bb", "y", "x"], [7, 7, 7, 7]) == [4, 1, 5, 4] and interned.exact is not None
    assert interned.table().texts() == ["a", "bb", "", "ccc", "x", "y"]
    assert add(interned, ["y", "z"]) == [5, 6]


def _write_slices(tmp_path, raw: bytes, cuts) -> list:
    """`raw` split at `cuts` into slice files; their paths."""
    paths, lo = [], 0
    for i, hi in enumerate(list(cuts) + [len(raw)]):
        path = tmp_path / f"x.slice_{i}"
        path.write_bytes(raw[lo:hi])
        paths.append(str(path))
        lo = hi
    return paths


def _whole_and_chunked(paths, chunk_bytes):
    from msprof_kit.ingest.streams import RecordStream, read_stream
    buf, pieces = read_stream(paths)
    arr, offsets, issues = decode_stream(records.API_EVENT, buf, pieces, *host.HOST_VALID)
    stream = RecordStream(records.API_EVENT, paths, *host.HOST_VALID, chunk_bytes=chunk_bytes)
    parts = list(stream.chunks())
    got = np.concatenate([a for a, _ in parts]) if parts else np.zeros(0, records.API_EVENT.dtype)
    got_off = np.concatenate([o for _, o in parts]) if parts else np.zeros(0, np.int64)
    return (arr, offsets, [str(i) for i in issues]), (got, got_off, [str(i) for i in stream.issues])


def test_record_stream_reads_what_decode_stream_decodes(tmp_path):
    """Chunk by chunk, across slice boundaries: the same records, offsets and issues, in the same
    order, whatever the chunk size (24 bad records: 20 named, then one line for the rest)."""
    bad = {i: {"magic": 0x1111} for i in range(3, 60, 2)[:24]}
    cases = {
        "clean": _api(50),
        "bad records": _api(70, bad),
        "aged head": _api(40, {5: {"level": 1}})[13:],
        "cut tail": _api(40)[:-7],
        "cut tail, bad head": _api(40, {0: {"magic": 0}, 1: {"magic": 0}, 2: {"magic": 0}})[:-3],
    }
    for name, raw in cases.items():
        folder = tmp_path / name.replace(" ", "_")
        folder.mkdir()
        paths = _write_slices(folder, raw, [len(raw) // 3, len(raw) // 3 + 55])
        for chunk in (1, 40, 41, 120, 400, 1 << 20):
            whole, chunked = _whole_and_chunked(paths, chunk)
            assert np.array_equal(whole[0], chunked[0]), (name, chunk)
            assert np.array_equal(whole[1], chunked[1]), (name, chunk)
            assert whole[2] == chunked[2], (name, chunk)
            assert whole[2] or name == "clean"


def test_read_api_event_matches_the_whole_stream_decoder(tmp_path, monkeypatch):
    from msprof_kit.ingest import streams
    raw = _api(30, {4: {"magic": 7}, 11: {"end": records.EVENT_FLAG}})
    paths = _write_slices(tmp_path, raw, [100, 333])
    buf, pieces = streams.read_stream(paths)
    want, want_issues = host.decode_api_event(buf, pieces)
    monkeypatch.setattr(streams, "CHUNK_BYTES", 3 * records.API_EVENT.size)
    got, got_issues = streams.read_api_event(paths)
    assert want.keys() == got.keys() and all(np.array_equal(want[k], got[k]) for k in want)
    assert [str(i) for i in want_issues] == [str(i) for i in got_issues] and got_issues


@pytest.mark.parametrize("window", [1, 2, 3, 1000, "collision"])
def test_tensor_ops_by_windows_of_timestamps_match_the_whole_stream(window, tmp_path, monkeypatch):
    """The import groups tensor_info records into ops a window of timestamps at a time: each op
    (one record or several, their payloads repeating) reads the texts render_tensors gives the
    whole stream, its position is its first record's, and the ops of the aging stream follow.
    ("collision": every text has the same hash, and the texts are told apart by themselves.)"""
    from msprof_kit.ingest import limits, tensors
    from msprof_kit.errors import Diagnostics
    from msprof_kit.ingest import streams

    def rec(ts, thread, shape):
        fields = dict(magic=records.HOST_MAGIC, level=10000, type=1, thread_id=thread, timestamp=ts, op_name=99,
                      tensor_num=1, t0_type=ts % 2, t0_format=2, t0_dtype=1,
                      t0_shape=list(shape) + [0] * (8 - len(shape)))
        return records.pack(records.TENSOR_INFO, **fields)
    # stream order is not time order; ops of two and three records, interleaved with others (no
    # time 0: such a record is dropped as invalid)
    order = [5, 3, 9, 1, 9, 10, 7, 3, 2, 9, 8, 4, 6]
    raw = b"".join(rec(ts, 1 + ts % 2, (ts % 3 + 1, ts)) for ts in order)
    paths = {}
    for group in ("unaging", "aging"):
        (tmp_path / group).mkdir()
        paths[("tensor_info", group)] = _write_slices(tmp_path / group, raw, [5 * records.TENSOR_INFO.size])
    arr = np.frombuffer(raw, dtype=records.TENSOR_INFO.dtype)
    group, table = host.render_tensors(arr)
    first = np.unique(group, return_index=True)[1]
    want = sorted((int(arr["timestamp"][i]), tuple(table[group[i]])) for i in first)
    monkeypatch.setattr(streams, "CHUNK_BYTES", 2 * records.TENSOR_INFO.size)
    if window == "collision":
        render = host.render_ops
        monkeypatch.setattr(host, "render_ops", lambda *a: (render(*a)[0], np.zeros(6 * (len(a[2]) - 1), np.uint64)))
    else:
        monkeypatch.setattr(limits, "SPILL_ROWS", window)
        monkeypatch.setattr(limits, "SAMPLE_EVERY", 1)
    runs, got_table = tensors.tensor_texts(paths, Diagnostics(), str(tmp_path))
    ops = {name: runs.read(name, 0, runs.rows) for name in ("thread_id", "timestamp", "text", "pos")}
    runs.close()
    by_pos = np.argsort(ops["pos"], kind="stable")
    n = len(first)
    assert len(ops["pos"]) == 2 * n
    for half in (by_pos[:n], by_pos[n:]):  # unaging's ops, then aging's
        got = sorted(zip(ops["timestamp"][half].tolist(), got_table.rows(ops["text"][half])))
        assert got == want
        assert np.array_equal(np.sort(ops["pos"][half]) % len(order), np.sort(first))
    joined = dict(want)
    assert joined[9][3] == '"1,9;1,9;1,9"' and joined[3][3] == '"1,3;1,3"' and joined[2][0] == '"3,2"'


def test_span_twins_agree():
    """_native.gather_spans / spans_equal and their Python twins: empty and zero-length spans,
    spans at the ends, a bytearray, one byte changed, spans out of range refused alike."""
    from msprof_kit import native_impl
    from msprof_kit.ingest import tensors
    if not native_impl.available():
        pytest.skip("the C extension is not built")
    from msprof_kit import _native
    rnd = np.random.default_rng(3)
    for size in (0, 1, 7, 300, 70_000):
        blob = bytearray(rnd.integers(0, 4, size, dtype=np.uint8).tobytes())
        for count in (0, 1, 5, 2000):
            start = rnd.integers(0, size + 1, count).astype(np.int64)
            lengths = np.minimum(rnd.integers(0, 9, count), size - start).astype(np.int64)
            got = _native.gather_spans(blob, start, lengths)
            assert got == tensors.py_gather_spans(blob, start, lengths)
            copy = bytes(blob) + got  # the same spans, twice
            at = len(blob) + np.cumsum(lengths) - lengths
            assert _native.spans_equal(blob, start, copy, at, lengths) is True
            assert tensors.py_spans_equal(blob, start, copy, at, lengths) is True
            if int(lengths.sum()):
                changed = bytearray(copy)
                changed[len(blob) + int(rnd.integers(0, int(lengths.sum())))] ^= 0x10
                assert _native.spans_equal(blob, start, changed, at, lengths) is False
                assert tensors.py_spans_equal(blob, start, bytes(changed), at, lengths) is False
    for bad in ((np.array([3], np.int64), np.array([2], np.int64)), (np.array([-1], np.int64), np.array([1], np.int64)),
                (np.array([0], np.int64), np.array([-1], np.int64))):
        for fn in (_native.gather_spans, tensors.py_gather_spans):
            with pytest.raises(ValueError):
                fn(b"abcd", *bad)
        for fn in (_native.spans_equal, tensors.py_spans_equal):
            with pytest.raises(ValueError):
                fn(b"abcd", bad[0], b"abcd", np.zeros(1, np.int64), bad[1])
