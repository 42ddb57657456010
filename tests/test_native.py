"""The C extension (msprof_kit._native) against its pure-Python twin (msprof_kit.native_impl):
the same bytes for every slot kind, Python's own repr for floats, the same errors, and the same
export files. These tests call both implementations directly, so they run once (under the
"python" parameter of the conftest fixture they are skipped, not repeated)."""
from __future__ import annotations

import decimal
import filecmp
import os
import shutil
import sys

import numpy as np
import pytest

from conftest import GOLDEN, copy_input, needs_shared, run_once_with_c

from msprof_kit import native_impl
from msprof_kit.errors import Diagnostics
from msprof_kit.cli import run_export

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import synth  # noqa: E402

INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1


@pytest.fixture(autouse=True)
def both(native_implementation):
    """Skip the repeat: each test here compares the two implementations itself."""
    run_once_with_c(native_implementation, "compares both implementations itself")


def c_rows(pieces, slots, n, sep):
    return native_impl._native.format_rows(pieces, slots, n, sep)


def both_rows(pieces, slots, n, sep=b"\n"):
    """The C bytes, after checking that the twin gives the same."""
    c = c_rows(pieces, slots, n, sep)
    assert native_impl.py_format_rows(pieces, slots, n, sep) == c
    return c


def cells(slot, sep=b"\n"):
    """The cell texts of one slot, from the C implementation (checked against the twin)."""
    out = both_rows([b"", b""], [slot], len(slot.values), sep)
    return out.decode("utf-8").split(sep.decode()) if len(slot.values) else []


def test_the_extension_is_built():
    """gcc is on every machine that runs this suite; a failed build would silently leave half of
    the suite skipped, so it fails here (MSPROF_KIT_NO_COMPILER=1 accepts a build without it)."""
    if os.environ.get("MSPROF_KIT_NO_COMPILER") == "1":
        pytest.skip("MSPROF_KIT_NO_COMPILER=1")
    assert native_impl.available()


# ------------------------------------------------------------------------------------------------
# FLOAT: Python's repr


def _edge_floats() -> np.ndarray:
    p2 = np.ldexp(1.0, np.arange(-1074, 1024))
    p10 = 10.0 ** np.arange(-323, 309)
    around = np.concatenate([p2, p10, np.nextafter(p2, np.inf), np.nextafter(p2, 0), np.nextafter(p10, np.inf),
                             np.nextafter(p10, 0)])
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, 2.2250738585072014e-308, 2.225073858507201e-308,
                        1.7976931348623157e308, 0.1, 0.2, 0.3, 1 / 3, 2 / 3, 1e16, 1e16 - 2, 9999999999999998.0,
                        1e-4, 9.999999999999999e-05, 1e-5, 0.00011, 123456789012345.67, 1e12, 999999999999.999,
                        4.35, 0.001, 0.0005, 2.675, 1e22, 1e23, 5e-310])
    thousandths = np.arange(-2000, 200_000) / 1000.0
    return np.concatenate([around, -around, special, -special, thousandths])


def test_float_is_pythons_repr_on_edge_values():
    x = _edge_floats()
    assert cells(native_impl.float_slot(x)) == [repr(v) for v in x.tolist()]
    assert [native_impl._native.float_repr(v) for v in x[:5000].tolist()] == [repr(v) for v in x[:5000].tolist()]


def test_float_is_pythons_repr_on_millions_of_random_values():
    rng = np.random.default_rng(20261122)
    parts = [rng.integers(0, 2 ** 64, 1_500_000, dtype=np.uint64).view(np.float64),   # every exponent
             rng.random(500_000) * 10.0 ** rng.integers(-8, 18, 500_000),             # short and long
             rng.integers(0, 10 ** 15, 500_000) / 1000.0,                              # µs from ns
             rng.integers(0, 2 ** 52, 200_000, dtype=np.uint64).view(np.float64)]       # subnormals
    x = np.concatenate(parts)
    out = native_impl._native.format_rows([b"", b""], [native_impl.float_slot(x)], len(x), b"\n").decode().split("\n")
    expected = list(map(repr, x.tolist()))
    wrong = [(e, o) for e, o in zip(expected, out) if e != o]
    assert not wrong, wrong[:10]


# ------------------------------------------------------------------------------------------------
# INT, FIXED, TRIM


def _ints() -> np.ndarray:
    rng = np.random.default_rng(7)
    edges = [0, 1, -1, 9, 10, 99, 100, 999, 1000, 1001, -999, -1000, -1001, 99_999, 100_000, 10 ** 15, 10 ** 18,
             -(10 ** 18), INT64_MIN, INT64_MIN + 1, INT64_MAX, INT64_MAX - 1]
    return np.concatenate([np.array(edges, dtype=np.int64), rng.integers(INT64_MIN, INT64_MAX, 20_000),
                           rng.integers(-10 ** 7, 10 ** 7, 20_000), rng.integers(0, 100_000, 20_000)])


def _decimal(k: int, d: int, trim: bool) -> str:
    """k / 10^d written out exactly (the definition FIXED and TRIM follow)."""
    sign = "-" if k < 0 else ""
    whole, frac = divmod(abs(k), 10 ** d)
    tail = f"{frac:0{d}d}"
    if trim:
        tail = tail.rstrip("0") or "0"
    return f"{sign}{whole}.{tail}"


def test_int_is_str():
    k = _ints()
    assert cells(native_impl.int_slot(k)) == [str(v) for v in k.tolist()]


@pytest.mark.parametrize("decimals", [1, 2, 3, 6, 9, 18])
def test_fixed_and_trim_are_exact_decimals(decimals):
    k = _ints()
    assert cells(native_impl.fixed_slot(k, decimals)) == [_decimal(v, decimals, False) for v in k.tolist()]
    assert cells(native_impl.trim_slot(k, decimals)) == [_decimal(v, decimals, True) for v in k.tolist()]


def test_trim_of_thousandths_is_the_repr_of_the_microseconds():
    k = np.arange(-5000, 300_000, dtype=np.int64)
    assert cells(native_impl.trim_slot(k, 3)) == [repr(v / 1000) for v in k.tolist()]
    exact = [str(decimal.Decimal(v).scaleb(-3).quantize(decimal.Decimal("0.001"))) for v in k[:3000].tolist()]
    assert cells(native_impl.fixed_slot(k[:3000], 3)) == exact


# ------------------------------------------------------------------------------------------------
# TEXT, alternatives, templates


@pytest.mark.parametrize("texts", [["a", "", "bc", "d e,f"], ["a", "é", "", "日本", "x"]])
def test_a_text_table_decodes_every_text_as_its_own_slice(texts):
    """TextTable.texts gives each text back (bytes that are not UTF-8 as surrogate escapes)."""
    table = native_impl.text_table(texts)
    assert table.texts() == texts
    raw = native_impl.TextTable(b"ab\xffc", np.array([0, 1, 3, 4], dtype=np.int64))
    assert raw.texts() == ["a", "b\udcff", "c"]
    shifted = native_impl.TextTable(b"xyzw", np.array([1, 3, 3, 4], dtype=np.int64))  # offsets past the start
    assert shifted.texts() == ["yz", "", "w"]


def test_text_codes_copy_their_bytes():
    texts = ['"a"', "", "名前", '"x,y"', "tab\there", "\U0001F600", "N/A"]
    table = native_impl.text_table(texts)
    assert table.texts() == texts
    codes = np.array([0, 1, 2, 3, 4, 5, 6, 6, 0], dtype=np.int64)
    assert cells(native_impl.text_slot(codes, table)) == [texts[c] for c in codes]
    assert cells(native_impl.text_slot(codes.astype(np.int32), table)) == [texts[c] for c in codes]


def test_overlays_replace_cells_last_one_winning():
    base = native_impl.int_slot(np.arange(6))
    first = native_impl.overlay(base, np.array([1, 1, 0, 0, 0, 0], bool), "0")
    slot = native_impl.overlay(first, np.array([0, 1, 1, 0, 0, 0], bool), "N/A")
    assert cells(slot) == ["0", "N/A", "N/A", "3", "4", "5"]
    assert native_impl.overlay(base, np.zeros(6, bool), "x") is base
    assert slot.take(slice(1, 3)).alts == (b"0", b"N/A")


def test_a_random_template_gives_the_same_bytes():
    rng = np.random.default_rng(11)
    n = 30_000
    table = native_impl.text_table([f'"op_{i}{"é" * (i % 3)}"' for i in range(500)] + [""])
    slots = [native_impl.int_slot(rng.integers(INT64_MIN, INT64_MAX, n)),
             native_impl.fixed_slot(rng.integers(-10 ** 12, 10 ** 18, n), 3),
             native_impl.trim_slot(rng.integers(-10 ** 7, 10 ** 7, n), 3),
             native_impl.fixed_slot(rng.integers(0, 10 ** 9, n), 6),
             native_impl.float_slot(rng.integers(0, 10 ** 9, n) / 1000.0),
             native_impl.float_slot(rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n)),
             native_impl.overlay(native_impl.text_slot(rng.integers(0, 501, n), table), rng.random(n) < 0.1, "N/A"),
             native_impl.overlay(native_impl.overlay(native_impl.trim_slot(rng.integers(0, 5000, n), 3),
                                                     rng.random(n) < 0.3, "0"),
                                 rng.random(n) < 0.3, "N/A")]
    pieces = [b'{"a":', b',"b":"', b'","c":', b',', b',', b',"d":', b',"e":', b',', b'}']
    out = both_rows(pieces, slots, n, b",")
    assert out.count(b"},{") == n - 1
    assert both_rows([b""] + [b","] * (len(slots) - 1) + [b"\n"], slots, n, b"").count(b"\n") == n


def test_small_and_empty_calls():
    assert both_rows([b"x"], [], 3, b",") == b"x,x,x"
    assert both_rows([b"a", b"b"], [native_impl.int_slot(np.zeros(0, np.int64))], 0, b",") == b""
    assert both_rows([b"{", b"}"], [native_impl.int_slot([5])], 1, b",") == b"{5}"
    many = [native_impl.int_slot(np.arange(4))] * 200  # a wide table: more slots than any template here
    assert both_rows([b""] + [b","] * 199 + [b"\n"], many, 4, b"").splitlines()[3] == b",".join([b"3"] * 200)


def test_a_text_longer_than_any_number_and_a_huge_table():
    big = "x" * 100_000
    table = native_impl.text_table(["a", big])
    codes = np.array([1, 0, 1], dtype=np.int64)
    assert cells(native_impl.text_slot(codes, table)) == [big, "a", big]
    wide = native_impl.text_table(str(i) for i in range(200_000))
    codes = np.arange(199_999, -1, -7, dtype=np.int64)
    assert cells(native_impl.text_slot(codes, wide)) == [str(c) for c in codes.tolist()]


BAD_CALLS = [
    ("codes out of range",
     lambda: ([b"", b""], [native_impl.text_slot([0, 2], native_impl.text_table(["a", "b"]))], 2), IndexError),
    ("negative code",
     lambda: ([b"", b""], [native_impl.text_slot([-1], native_impl.text_table(["a"]))], 1), IndexError),
    ("alt past alts",
     lambda: ([b"", b""], [native_impl.int_slot([1])._replace(alt=np.array([2], np.uint8), alts=(b"x",))], 1),
     IndexError),
    ("short values", lambda: ([b"", b""], [native_impl.int_slot([1, 2])], 3), ValueError),
    ("pieces count", lambda: ([b""], [native_impl.int_slot([1])], 1), ValueError),
    ("decimals",
     lambda: ([b"", b""], [native_impl.Slot(native_impl.FIXED, np.array([1], np.int64), 0)], 1), ValueError),
    ("unknown kind", lambda: ([b"", b""], [native_impl.Slot(9, np.array([1], np.int64))], 1), ValueError),
    ("float values in an INT slot",
     lambda: ([b"", b""], [native_impl.Slot(native_impl.INT, np.array([1.5]))], 1), TypeError),
    ("int values in a FLOAT slot",
     lambda: ([b"", b""], [native_impl.Slot(native_impl.FLOAT, np.array([1], np.int64))], 1), TypeError),
]


@pytest.mark.parametrize("name,make,error", BAD_CALLS, ids=[b[0] for b in BAD_CALLS])
def test_both_refuse_the_same_bad_calls(name, make, error):
    pieces, slots, n = make()
    with pytest.raises(error):
        c_rows(pieces, slots, n, b",")
    with pytest.raises(error):
        native_impl.py_format_rows(pieces, slots, n, b",")


# ------------------------------------------------------------------------------------------------
# The switch


def test_use_switches_and_returns_the_previous_choice():
    previous = native_impl.use("python")
    try:
        assert native_impl.current() == "python"
        assert native_impl.use("c") == "python" and native_impl.current() == "c"
        with pytest.raises(ValueError):
            native_impl.use("fortran")
    finally:
        native_impl.use(previous)


def test_asking_for_c_without_the_extension_is_a_clear_error():
    built = native_impl._native
    native_impl._native = None  # restored before the conftest fixture switches back to "c"
    try:
        assert not native_impl.available()
        with pytest.raises(native_impl.NativeUnavailable, match="not built"):
            native_impl.use("c")
        assert native_impl.current() == "c"  # the refused switch changed nothing
    finally:
        native_impl._native = built


# ------------------------------------------------------------------------------------------------
# Whole exports: the two implementations write the same files


def _export_tree(src: str, dest: str, **scope) -> str:
    shutil.copytree(src, dest)
    for what, extra in (("timeline", {}), ("summary", {"fmt": scope.pop("fmt", "csv")})):
        run_export(dest, what, Diagnostics(), stamp="20000101000000", **scope, **extra)
    return dest


def _same_exports(src: str, tmp_path, **scope) -> int:
    """Export `src` with each implementation; assert every file in the output folders is equal."""
    outs = []
    for impl in ("c", "python"):
        previous = native_impl.use(impl)
        try:
            outs.append(_export_tree(src, str(tmp_path / impl), **dict(scope)))
        finally:
            native_impl.use(previous)
    compared = 0
    for base, _, files in os.walk(outs[0]):
        if "mindstudio_profiler_output" not in base:
            continue
        for name in files:
            a = os.path.join(base, name)
            b = os.path.join(outs[1], os.path.relpath(a, outs[0]))
            assert filecmp.cmp(a, b, shallow=False), a
            compared += 1
    return compared


def test_synthetic_collections_export_the_same(tmp_path):
    for chip, devices in (("910B", 2), ("310P", 2)):
        src = tmp_path / f"src_{chip}"
        synth.write_collection(str(src), chip=chip, n_tasks=3000, devices=devices, model_fraction=0.2)
        assert _same_exports(str(src), tmp_path / chip) >= 4


@needs_shared
@pytest.mark.parametrize("case,scope", [
    ("910b_mixed", {}), ("910b_two_devices", {}), ("310p_hwts", {}), ("310p_hwts", {"fmt": "json"}),
    ("910b_steps", {"model_id": 1, "iteration_id": 3}), ("degraded_e", {})])
def test_golden_inputs_export_the_same(case, scope, tmp_path):
    copy_input(case, str(tmp_path / "src"))
    assert _same_exports(str(tmp_path / "src"), tmp_path, **scope) >= 2
    assert os.path.isdir(os.path.join(GOLDEN, case))


def _tensor_payload(rng, n: int) -> np.ndarray:
    """n awkward tensor_info payloads (tensor_num on): counts past 5, any type, formats with
    sub-formats or without a name, UNDEFINED codes, the largest dims, zeros mid-shape."""
    words = rng.integers(0, 4, (n, native_impl.TENSOR_WIDTH // 4), dtype=np.uint64)
    words[:, 0] = rng.integers(0, 9, n)
    slots = words[:, 1:].reshape(n, 5, 11)
    slots[:, :, 0] = rng.choice([0, 0, 1, 7], (n, 5))
    slots[:, :, 1] = rng.choice([0, 2, 29, 46, 200, 2 | (16 << 8), 255 | (0xFFFF << 8), 0xFFFFFFFF, 0x7F000003], (n, 5))
    slots[:, :, 2] = rng.choice([0, 1, 5, 27, 41, 42, 0xFFFFFFFE, 0xFFFFFFFF], (n, 5))
    slots[:, :, 3:] = rng.choice([0, 1, 7, 16, 1024, 0xFFFFFFFF], (n, 5, 8), p=[0.2, 0.3, 0.2, 0.1, 0.1, 0.1])
    return np.ascontiguousarray(words.astype("<u4")).view(np.uint8).reshape(n, native_impl.TENSOR_WIDTH)


def both_tensor_texts(payload, order, starts):
    from msprof_kit.parsers.host import GE_DTYPE_TABLE, GE_FORMAT_TABLE
    args = (payload, np.asarray(order, np.int64), np.asarray(starts, np.int64),
            (GE_DTYPE_TABLE.blob, GE_DTYPE_TABLE.offsets), (GE_FORMAT_TABLE.blob, GE_FORMAT_TABLE.offsets))
    c = native_impl._native.tensor_texts(*args)
    assert native_impl.py_tensor_texts(*args) == c
    blob, offsets = c[0], np.frombuffer(c[1], np.int64)
    return [blob[a:b].decode() for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]


def test_tensor_texts_agree_on_awkward_payloads():
    rng = np.random.default_rng(7)
    payload = _tensor_payload(rng, 3000)
    order = rng.integers(0, 3000, 5000)  # records repeated, ops of 0 to 4 records
    starts = np.concatenate([[0], np.cumsum(rng.integers(0, 5, 2000))])
    starts = starts[starts <= len(order)]
    texts = both_tensor_texts(payload, order, starts)
    assert len(texts) == 6 * (len(starts) - 1)
    empty = np.flatnonzero(np.diff(starts) == 0)
    assert len(empty) and all(texts[6 * g:6 * g + 6] == ["N/A"] * 6 for g in empty.tolist())
    assert any(":65535" in t for t in texts) and any("4294967295" in t for t in texts)


def test_tensor_texts_render_as_the_reference_prints():
    """A shape stops at its first zero; a format names its low byte, ':sub' when bits 8-23 hold
    one; unknown codes read in decimal; an op's records join with ';'; empty reads N/A; the hashes
    are the 64-bit FNV-1a of the texts."""
    words = np.zeros((3, native_impl.TENSOR_WIDTH // 4), dtype="<u4")
    words[0, :23] = [2] + [0, 2, 1, 8, 16, 0, 5, 0, 0, 0, 0] + [1, 29 | (3 << 8), 99] + [0] * 8
    words[1, :12] = [1] + [0, 46, 0xFFFFFFFF, 4, 0, 0, 0, 0, 0, 0, 0]
    words[2, 0] = 6  # six slots claimed, five read: all inputs of empty shape
    payload = words.view(np.uint8).reshape(3, native_impl.TENSOR_WIDTH)
    texts = both_tensor_texts(payload, [0, 1, 2], [0, 2, 2, 3])
    assert texts == ['"8,16;4"', "FLOAT16;UNDEFINED", "ND;46", "N/A", "99", "FRACTAL_NZ:3",
                     "N/A", "N/A", "N/A", "N/A", "N/A", "N/A",
                     '";;;;"', "FLOAT;FLOAT;FLOAT;FLOAT;FLOAT", "NCHW;NCHW;NCHW;NCHW;NCHW", "N/A", "N/A", "N/A"]
    table, hashes = native_impl.tensor_texts(payload, [0, 1, 2], [0, 2, 2, 3], *_ge_tables())
    assert hashes.tolist() == native_impl.fnv_hashes(table.blob, table.offsets).tolist()
    assert hashes[0] == _fnv(b'"8,16;4"')


def _ge_tables():
    from msprof_kit.parsers.host import GE_DTYPE_TABLE, GE_FORMAT_TABLE
    return GE_DTYPE_TABLE, GE_FORMAT_TABLE


def _fnv(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) % (1 << 64)
    return h


@pytest.mark.parametrize("payload,order,starts", [
    (np.zeros(223, np.uint8), [], [0]),
    (np.zeros(224, np.uint8), [1], [0, 1]),
    (np.zeros(224, np.uint8), [-1], [0, 1]),
    (np.zeros(224, np.uint8), [0, 0], [0, 2, 1]),
    (np.zeros(224, np.uint8), [0], [0, 2]),
    (np.zeros(224, np.uint8), [0], []),
], ids=["partial record", "order past the records", "negative order", "starts descend", "starts past order",
        "no starts"])
def test_tensor_texts_refuse_the_same_bad_calls(payload, order, starts):
    args = (payload, np.asarray(order, np.int64), np.asarray(starts, np.int64),
            *[(t.blob, t.offsets) for t in _ge_tables()])
    with pytest.raises(ValueError):
        native_impl._native.tensor_texts(*args)
    with pytest.raises(ValueError):
        native_impl.py_tensor_texts(*args)


def test_csv_table_twins_agree_and_quote_as_the_csv_module():
    """_native.csv_table and py_csv_table: the same bytes on awkward texts (empty, quotes, commas,
    CR/LF, non-ASCII, long); each field as Python's csv module writes it (QUOTE_MINIMAL, no
    trailing CR/LF); a non-str item and a lone surrogate refused alike."""
    import csv
    import io
    rng = np.random.default_rng(5)
    alphabet = list("ab,\"\n\r ;é中\t")
    texts = ["", ",", '"', '""', "a,b", "x\ny", "x\ry", "plain", "ünï,cödé", "1,2;3,4", "N/A", "a" * 100_000]
    texts += ["".join(rng.choice(alphabet, int(rng.integers(0, 12)))) for _ in range(3000)]
    blob, offsets = native_impl._native.csv_table(texts)
    assert (blob, offsets) == native_impl.py_csv_table(texts)
    off = np.frombuffer(offsets, np.int64).tolist()
    got = [blob[a:b].decode("utf-8") for a, b in zip(off, off[1:])]
    for text, field in zip(texts, got):
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\r\n").writerow([text])
        assert field == (buf.getvalue()[:-2] if text else "")  # the csv module writes a lone "" as ""
    assert native_impl._native.csv_table([]) == native_impl.py_csv_table([]) == (b"", np.zeros(1, np.int64).tobytes())
    _both_refuse_bad_texts(native_impl._native.csv_table, native_impl.py_csv_table)


def _both_refuse_bad_texts(c_fn, py_fn) -> None:
    """A text function's C and Python twins refuse a non-str item and a lone surrogate alike."""
    for bad, error in ((["a", 3], TypeError), (["a", "\ud800"], UnicodeEncodeError)):
        for fn in (c_fn, py_fn):
            with pytest.raises(error):
                fn(bad)


def test_json_table_twins_agree_and_write_json_string_literals():
    """_native.json_table and py_json_table: the same bytes on awkward texts (quotes, backslashes,
    every control character, DEL, non-ASCII, U+2028, long); each as json.dumps(text,
    ensure_ascii=False); a non-str item and a lone surrogate refused alike."""
    import json
    rng = np.random.default_rng(7)
    alphabet = [chr(c) for c in range(0x20)] + list('"\\/ a\x7fé中\u2028😀')
    texts = ["", '"', "\\", "\\\"", "plain", "a" * 100_000] + [chr(c) for c in range(0x20)]
    texts += ["".join(rng.choice(alphabet, int(rng.integers(0, 12)))) for _ in range(3000)]
    blob, offsets = native_impl._native.json_table(texts)
    assert (blob, offsets) == native_impl.py_json_table(texts)
    off = np.frombuffer(offsets, np.int64).tolist()
    assert [blob[a:b].decode("utf-8") for a, b in zip(off, off[1:])] == [json.dumps(t, ensure_ascii=False) for t in texts]
    assert native_impl._native.json_table([]) == native_impl.py_json_table([]) == (b"", np.zeros(1, np.int64).tobytes())
    _both_refuse_bad_texts(native_impl._native.json_table, native_impl.py_json_table)


def test_utf8_table_twins_agree_and_keep_the_texts_as_they_are():
    """_native.utf8_table and py_utf8_table: each text's UTF-8 unchanged (NUL, controls, non-ASCII,
    long), the same bytes and offsets; a non-str item and a lone surrogate refused alike."""
    rng = np.random.default_rng(11)
    alphabet = [chr(c) for c in range(0x20)] + list('"\\, a\x7fé中😀')
    texts = ["", "\x00", "plain", "a" * 100_000] + ["".join(rng.choice(alphabet, int(rng.integers(0, 12))))
                                                     for _ in range(3000)]
    blob, offsets = native_impl._native.utf8_table(texts)
    assert (blob, offsets) == native_impl.py_utf8_table(texts)
    off = np.frombuffer(offsets, np.int64).tolist()
    assert [blob[a:b].decode("utf-8") for a, b in zip(off, off[1:])] == texts
    assert native_impl._native.utf8_table([]) == native_impl.py_utf8_table([]) == (b"", np.zeros(1, np.int64).tobytes())
    _both_refuse_bad_texts(native_impl._native.utf8_table, native_impl.py_utf8_table)


def test_json_list_twins_agree_and_write_json_dumps_of_the_list():
    """_native.json_list and py_json_list: json.dumps(list, ensure_ascii=False) of awkward texts (a
    stored text column's labels); a non-str item and a lone surrogate refused alike."""
    import json
    rng = np.random.default_rng(9)
    alphabet = [chr(c) for c in range(0x20)] + list('"\\, []a\x7fé中😀')
    for n in (0, 1, 2, 3000):
        texts = ["".join(rng.choice(alphabet, int(rng.integers(0, 10)))) for _ in range(n)]
        got = native_impl._native.json_list(texts)
        assert got == native_impl.py_json_list(texts) == json.dumps(texts, ensure_ascii=False)
        assert json.loads(got) == texts
    _both_refuse_bad_texts(native_impl._native.json_list, native_impl.py_json_list)
