"""Names from the host's dictionaries (hash_dic, type_info_dic, with the keys they lack noted for
one warning each) and names of codes, each evaluated once per distinct value.

hash_dic's ids are nearly all distinct on real collections (an op name each), so HashTable looks
them up with numpy (searchsorted over its sorted ids) and decodes only the texts asked for; the
per-distinct helpers below (`distinct`, `per_distinct`, `where_text`, ...) call Python once per
distinct value, and are meant for columns of few distinct values (task types, API types, codes)."""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Tuple

import numpy as np
import pandas as pd

from ..errors import Diagnostics
from ..parsers import host as host_parsers
from ..parsers.hashdic import HashDictionary, parse_hash_dictionary
from .streams import read_lines, read_stream
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


class HashTable:
    """hash_dic: the text of each hash id, kept as the parser's HashDictionary (sorted uint64 ids and
    byte ranges of one buffer) and decoded only for the ids looked up; `misses` are the ids looked
    up in vain, for one warning at the end of the host's import."""

    LOST = ("hash ids resolve to no entry (e.g. {}); the op names, op types, kernel names or model names they "
            "stand for are left blank")

    def __init__(self, entries: Optional[HashDictionary] = None) -> None:
        self.entries = entries if entries is not None else HashDictionary.empty()
        self.misses: Set[int] = set()

    @classmethod
    def of(cls, texts: Dict[int, str]) -> "HashTable":
        """A table of the given id -> text entries (tests, small tables)."""
        keys = np.array(sorted(texts), dtype=np.uint64)
        raw = [texts[k].encode("utf-8") for k in sorted(texts)]
        ends = np.cumsum([len(r) for r in raw], dtype=np.int64)
        return cls(HashDictionary(keys, ends - np.array([len(r) for r in raw], dtype=np.int64), ends, b"".join(raw)))

    def __bool__(self) -> bool:
        return self.entries.has_entries()

    def warn_misses(self, where: str, diag: Diagnostics) -> None:
        """One warning naming how many ids were missed, and the smallest."""
        if self.misses:
            diag.warn(f"{where}: {len(self.misses)} {self.LOST.format(min(self.misses))}")

    def _find(self, uniq: np.ndarray) -> np.ndarray:
        """Positions in the dictionary of distinct ids (int64 or uint64), -1 where none."""
        pos: np.ndarray = np.full(len(uniq), -1, dtype=np.int64)
        ok = uniq >= 0 if uniq.dtype.kind == "i" else np.ones(len(uniq), dtype=bool)
        pos[ok] = self.entries.find(uniq[ok].astype(np.uint64))
        return pos

    def texts(self, values: np.ndarray, missing: str = "") -> np.ndarray:
        """Texts (object array) of hash ids: `missing` for an id without entry (noted in `misses`),
        "" for id 0 when it has none. Each distinct id is looked up once."""
        codes, uniq = _int_codes(values)
        pos = self._find(uniq)
        out: np.ndarray = np.full(len(uniq), missing, dtype=object)
        found = np.flatnonzero(pos >= 0)
        out[found] = self.entries.texts(pos[found])
        lost = pos < 0
        out[lost & (uniq == 0)] = ""
        self.misses.update(uniq[lost & (uniq != 0)].tolist())
        return out[codes]

    def positions(self, values: np.ndarray) -> np.ndarray:
        """The dictionary position (int64) of each hash id, -1 where it has none: what `texts` reads
        with missing="" without making the texts (`at` gives them); the misses are noted alike."""
        codes, uniq = _int_codes(values)
        pos = self._find(uniq)
        self.misses.update(uniq[(pos < 0) & (uniq != 0)].tolist())
        return pos[codes]

    def __len__(self) -> int:
        """Entries with a findable id (the range of `positions`)."""
        return len(self.entries)

    def at(self, positions: np.ndarray) -> np.ndarray:
        """The texts (object array) of dictionary positions, "" for -1."""
        pos = np.asarray(positions, dtype=np.int64)
        out: np.ndarray = np.full(len(pos), "", dtype=object)
        found = np.flatnonzero(pos >= 0)
        out[found] = self.entries.texts(pos[found])
        return out

    def ends_with(self, positions: np.ndarray, suffixes: Tuple[str, ...]) -> np.ndarray:
        """Whether the text (as `at` decodes it) of each dictionary position (-1: "") ends with
        one of the ASCII `suffixes`, read off the texts' bytes without decoding them: an ASCII
        byte decodes to itself and nothing else decodes to ASCII, so the decoded text ends with an
        ASCII suffix exactly when its bytes do."""
        pos = np.asarray(positions, dtype=np.int64)
        out: np.ndarray = np.zeros(len(pos), dtype=bool)
        data = np.frombuffer(self.entries.data, dtype=np.uint8)
        found = np.flatnonzero(pos >= 0)
        ends = self.entries.ends[pos[found]]
        size = ends - self.entries.starts[pos[found]]
        for suffix in suffixes:
            raw = np.frombuffer(suffix.encode("ascii"), dtype=np.uint8)
            cand = np.flatnonzero(size >= len(raw))
            for j in range(1, len(raw) + 1):  # from the last byte: few texts keep matching
                cand = cand[data[ends[cand] - j] == raw[-j]]
            out[found[cand]] = True
        return out

    def lookup(self, values: np.ndarray) -> np.ndarray:
        """Texts (object array) of hash ids, None where the dictionary lacks one (id 0 included;
        not noted as misses): what dict.get gives over the ids' decimal texts."""
        codes, uniq = _int_codes(values)
        pos = self._find(uniq)
        out: np.ndarray = np.full(len(uniq), None, dtype=object)
        found = np.flatnonzero(pos >= 0)
        out[found] = self.entries.texts(pos[found])
        return out[codes]

    def texts_or_ids(self, values: np.ndarray) -> np.ndarray:
        """Texts of hash ids as KIT_API's item column shows them: the decimal id where the
        dictionary lacks it, "0" for id 0 (not noted as misses)."""
        codes, uniq = _int_codes(values)
        pos = self._find(uniq)
        out: np.ndarray = np.empty(len(uniq), dtype=object)
        found = (pos >= 0) & (uniq != 0)
        at = np.flatnonzero(found)
        out[at] = self.entries.texts(pos[at])
        at = np.flatnonzero(~found)
        out[at] = uniq[at].astype(str).astype(object)
        return out[codes]


def _int_codes(values: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(codes, distinct values) of an array of integer ids, as int64 or uint64."""
    v = np.asarray(values)
    if v.dtype.kind not in "iu":
        v = np.array([int(x) for x in v.tolist()], dtype=object)
        v = v.astype(np.uint64) if len(v) and min(v) >= 0 else v.astype(np.int64)
    codes, uniq = pd.factorize(v, use_na_sentinel=False)
    return codes, np.asarray(uniq)


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
    """A dictionary kind's table (type_info_dic with `typed`), unaging files first; a warning when
    its files have no entry. (hash_dic: read_hashes.)"""
    table: Dict[str, str] = TypeTable() if typed else {}
    for group in ("unaging", "aging"):
        for path in files.get((kind, group), []):
            part, issues = host_parsers.parse_dictionary_lines(read_lines([path]), typed)
            diag.extend(issues)
            table.update(part)
    paths = [p for _, group in group_paths(files, kind) for p in group]
    if paths and not table:
        diag.warn(f"{paths[0]}: no entries; {DICTIONARY_LOSS[kind]}")
    return table


def read_hashes(files: DataFiles, diag: Diagnostics) -> HashTable:
    """hash_dic's table, unaging files first (a later file's definition of an id wins); a warning
    when its files have no entry."""
    parts = []
    paths = [p for _, group in group_paths(files, "hash_dic") for p in group]
    for path in paths:
        buf, pieces = read_stream([path])
        part, issues = parse_hash_dictionary(buf, pieces)
        del buf
        diag.extend(issues)
        parts.append(part)
    table = HashTable(HashDictionary.merge(parts))
    if paths and not table:
        diag.warn(f"{paths[0]}: no entries; {DICTIONARY_LOSS['hash_dic']}")
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


def code_text(table: Dict[int, str]) -> Callable[[Any], str]:
    """The name of an integer code, the decimal code when the table lacks it."""
    return lambda u: table.get(int(u), str(int(u)))


def hash_names(values: np.ndarray, hashes: HashTable, missing: str = "") -> np.ndarray:
    """Texts of hash ids (hash_dic); `missing` for an unknown id (noted in the table's misses), ""
    for id 0 when the dictionary lacks it."""
    return hashes.texts(values, missing)


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


def ends_with(texts: np.ndarray, suffixes: Tuple[str, ...]) -> np.ndarray:
    """Whether each text of an object array of str ends with one of `suffixes` (numpy's string
    functions, no Python call per text)."""
    arr = np.asarray(texts, dtype=object)
    try:
        coded = arr.astype(np.dtypes.StringDType())
    except (UnicodeEncodeError, TypeError, ValueError):  # a lone surrogate, or not a str
        return np.array([str(t).endswith(suffixes) for t in arr.tolist()], dtype=bool)
    out: np.ndarray = np.zeros(len(arr), dtype=bool)
    for suffix in suffixes:
        out |= np.strings.endswith(coded, suffix)
    return out

