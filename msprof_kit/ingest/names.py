"""Names from the host's dictionaries (hash_dic, type_info_dic, with the keys they lack noted for
one warning each) and names of codes, each evaluated once per distinct value."""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, Set, Tuple

import numpy as np
import pandas as pd

from ..errors import Diagnostics
from ..parsers import host as host_parsers
from .streams import read_lines
from .columns import GE_TASK_TYPES, DataFiles


def group_paths(files: DataFiles, kind: str) -> Iterator[Tuple[str, List[str]]]:
    """(group, slice files) of each file class of a host record kind, unaging first."""
    for group in ("unaging", "aging"):
        paths = files.get((kind, group), [])
        if paths:
            yield group, paths


class _Lookups(Dict[str, str]):
    """A dictionary file's table, and the keys looked up in vain (`misses`), for one warning at the
    end of the host's import naming how many there were and what `LOST` says of them."""

    LOST = ""
    WHEN_EMPTY = True  #: warn of misses also when the table has no entry at all

    def __init__(self) -> None:
        super().__init__()
        self.misses: Set[Any] = set()

    def warn_misses(self, where: str, diag: Diagnostics) -> None:
        if self.misses and (self or self.WHEN_EMPTY):
            diag.warn(f"{where}: {len(self.misses)} {self.LOST.format(min(self.misses))}")


class HashTable(_Lookups):
    """hash_dic: the text of each hash id (decimal); misses are ids."""

    LOST = ("hash ids resolve to no entry (e.g. {}); the op names, op types, kernel names or model names they "
            "stand for are left blank")


class TypeTable(_Lookups):
    """type_info_dic: the name of each '<level>_<type>'; misses are those keys (an empty table
    has its own warning, so it adds none)."""

    LOST = "API or task types have no entry (e.g. {}); they are shown as numbers instead of names"
    WHEN_EMPTY = False

    def name(self, key: str, default: str) -> str:
        got = self.get(key)
        if got is None:
            self.misses.add(key)
            return default
        return got


def type_name_of(types: Dict[str, str], key: str, default: str) -> str:
    """types[key], else `default` (noted in a TypeTable's misses)."""
    return types.name(key, default) if isinstance(types, TypeTable) else types.get(key, default)


def read_dictionary(files: DataFiles, kind: str, typed: bool, diag: Diagnostics) -> Dict[str, str]:
    """A dictionary kind's table (hash_dic, or with `typed` type_info_dic), unaging files first;
    a warning when its files have no entry."""
    table: Dict[str, str] = TypeTable() if typed else HashTable()
    for group in ("unaging", "aging"):
        for path in files.get((kind, group), []):
            part, issues = host_parsers.parse_dictionary_lines(read_lines([path]), typed)
            diag.extend(issues)
            table.update(part)
    paths = [p for _, group in group_paths(files, kind) for p in group]
    if paths and not table:
        diag.warn(f"{paths[0]}: no entries; {DICTIONARY_LOSS[kind]}")
    return table


DICTIONARY_LOSS = {"hash_dic": "the op names, op types, kernel names and model names it resolves are left blank",
                   "type_info_dic": "API and task types are shown as numbers instead of names"}


def distinct(values: np.ndarray, fn: Callable[[Any], Any]) -> Tuple[np.ndarray, List[Any]]:
    """(code of each value, `fn` of each distinct value): `fn` evaluated once per distinct value."""
    codes, uniq = pd.factorize(np.asarray(values), use_na_sentinel=False)
    return codes, [fn(u) for u in uniq]


def per_distinct(values: np.ndarray, fn: Callable[[Any], object], dtype: type = object) -> np.ndarray:
    """`fn` of each value, evaluated once per distinct value (ids, type codes and texts repeat a lot)."""
    if len(values) == 0:
        return np.zeros(0, dtype=dtype)
    codes, mapped = distinct(values, fn)
    return np.array(mapped, dtype=dtype)[codes]


def map_names(values: np.ndarray, types: Dict[str, str]) -> np.ndarray:
    """Runtime task type names (type_info_dic level 5000), the decimal code when unknown."""
    return per_distinct(values, lambda u: type_name_of(types, f"5000_{int(u)}", str(int(u))))


def hash_text(hashes: Dict[str, str], missing: str = "") -> Callable[[Any], str]:
    """The text of a hash id (hash_dic); `missing` for an unknown id (noted in a HashTable's
    misses), "" for id 0."""
    misses = hashes.misses if isinstance(hashes, HashTable) else set()

    def text(u: Any) -> str:
        key = int(u)
        got = hashes.get(str(key))
        if got is not None:
            return got
        if key:
            misses.add(key)
        return missing if key else ""
    return text


def code_text(table: Dict[int, str]) -> Callable[[Any], str]:
    """The name of an integer code, the decimal code when the table lacks it."""
    return lambda u: table.get(int(u), str(int(u)))


def hash_names(values: np.ndarray, hashes: Dict[str, str], missing: str = "") -> np.ndarray:
    """Texts of hash ids (hash_dic); `missing` for an unknown id, "" for id 0."""
    return per_distinct(values, hash_text(hashes, missing))


def lookup_codes(values: np.ndarray, table: Dict[int, str]) -> np.ndarray:
    """Names of integer codes, the decimal code when the table lacks it."""
    return per_distinct(values, code_text(table))


def ge_names(values: np.ndarray) -> np.ndarray:
    """GE task type names (node_basic_info's task_type), the decimal code when unknown."""
    return lookup_codes(values, GE_TASK_TYPES)


def map_text(values: np.ndarray, fn: Callable[[str], str]) -> np.ndarray:
    """`fn` applied to each text of an object array, evaluated once per distinct text."""
    return per_distinct(values, lambda u: fn(str(u)))


def where_text(values: np.ndarray, test: Callable[[str], bool]) -> np.ndarray:
    """`test` applied to each text of an object array, evaluated once per distinct text."""
    return per_distinct(values, lambda u: bool(test(str(u))), bool)
