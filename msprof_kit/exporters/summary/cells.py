"""Cell texts of the summary files, vectorized, as the reference's two code paths print them.

Numbers are first brought to integer units of 10^-decimals (with the rounding of the reference's
code path), then printed from those integers. step_trace.py and the tables behind show/compare
use these too."""
from __future__ import annotations

import json
import math
from typing import List

import numpy as np
from numpy.dtypes import StringDType

from ... import native_impl
from ...native_impl import csv_field
from ...arrays import near_half, scaled_exact

NA = "N/A"
NS_PER_US = 1000


SD = StringDType()


def int_text(a: np.ndarray) -> np.ndarray:
    """Integers as decimal text."""
    return native_impl.int_texts(np.asarray(a).astype(np.int64))


def decimal_text(k: np.ndarray, decimals: int = 3, strip: bool = False) -> np.ndarray:
    """Integer counts of 10^-decimals as decimal text: 1234567 → '1234.567' (decimals 3).

    strip=True gives Python's float repr of k / 1000 ('1234.5', '0.0') for decimals 3, exact for
    |k| < 2^53."""
    return native_impl.decimal_texts(k, decimals, trim=strip)


def fixed_ns(ns: np.ndarray) -> np.ndarray:
    """Integer ns as µs with 3 decimals by shifting the decimal point, as the C++ exporter prints
    times and durations (DivideByPowersOfTenWithPrecision): 1234567 → '1234.567'."""
    return decimal_text(ns, 3)


def stamp_ns(ns: np.ndarray) -> np.ndarray:
    """Absolute local ns as a CSV timestamp cell: µs with 3 decimals and a trailing TAB (§3.3)."""
    return np.strings.add(np.asarray(fixed_ns(ns)).astype(SD), "\t")


def repr_us(ns: np.ndarray) -> np.ndarray:
    """repr(ns / 1000): the Python path's round(ns / 1000, 3) of integer ns."""
    return decimal_text(ns, 3, strip=True)


def sqlite_round_units(x: np.ndarray, decimals: int = 3) -> np.ndarray:
    """SQLite's ROUND(x, decimals) in integer units of 10^-decimals (both paths round PMU values
    in SQL).

    SQLite prints the value with its own "%.<d>f": it adds half a unit of the last place, enlarged
    by 3e-16 of the value, in long double, and truncates. So halves, and values a few ulps below a
    half, round away from zero."""
    x = np.asarray(x, dtype=np.float64)
    mag = np.abs(x)
    scaled = mag * 10.0 ** decimals
    k = np.floor(scaled + 0.5)
    near = near_half(scaled)
    if near.any():
        m = mag[near]
        base = 0.5 / 10 ** decimals
        exponent = np.frexp(m)[1] - 1
        wide = m.astype(np.longdouble)
        bumped = (np.longdouble(base) + wide * np.longdouble(3e-16)).astype(np.float64)
        rounder = np.where(decimals + np.trunc(exponent / 3) < 15, bumped, base)
        k[near] = np.floor((wide + rounder.astype(np.longdouble)) * np.longdouble(10) ** decimals)
    return np.copysign(k, x).astype(np.int64)


def printf_units(x: np.ndarray, decimals: int) -> np.ndarray:
    """printf("%.<d>f") rounding (C++ std::fixed, std::to_string) in integer units of 10^-d."""
    x = np.asarray(x, dtype=np.float64)
    return np.rint(scaled_exact(x, decimals)).astype(np.int64)


def with_na(cells: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """The cells where `ok`, N/A elsewhere."""
    return cells if ok.all() else np.where(ok, cells, NA)


def double_to_str(value: float) -> str:
    """C++ DoubleToStr: 3 decimals, then trailing zeros and a trailing '.' stripped ('12.5', '3')."""
    text = f"{value:.3f}".rstrip("0")
    return text[:-1] if text.endswith(".") else text


def cpp_round3(value: float) -> float:
    """C++ RoundToDecimalPlaces(x, 3): std::round(x · 1000) / 1000, halves away from zero."""
    scaled = value * 1000.0
    whole = math.floor(abs(scaled))
    if abs(scaled) - whole >= 0.5:
        whole += 1
    return math.copysign(whole, scaled) / 1000.0


def csv_fields(texts: List[str]) -> List[str]:
    """csv_field of each text; one scan of their concatenation when none needs quoting (the usual case)."""
    whole = "\0".join(texts)
    if "," in whole or '"' in whole or "\n" in whole or "\r" in whole:
        return [csv_field(t) for t in texts]
    return texts


def json_value(text: str, number: bool) -> str:
    """A cell as the Python path's JSON summary writes it: numbers bare, everything else (N/A,
    names, timestamps with their TAB) as a JSON string (json.dumps defaults: ASCII escapes)."""
    return text if number and text != NA else json.dumps(text)
