"""hash_dic (`<decimal id>:<text>` lines) decoded in bulk into sorted uint64 ids and the byte
ranges of their texts in one buffer (`HashDictionary`): a million entries cost a few arrays,
not a million Python strings, and a text is decoded only when it is looked up.

The rules are those of parsers.host.parse_dictionary_lines (the reference's): lines split at the
first ':' after trailing '\\r's are stripped; empty lines are skipped; a line whose key is not all
decimal digits is reported and ignored; the last definition of a key wins; a line longer than the
line cap keeps its first bytes and a text longer than NAME_CAP characters its first NAME_CAP
(each reported). Texts are UTF-8, undecodable bytes read as U+FFFD. A key no uint64 spells in
decimal ('007', a 21-digit number, non-ASCII digits) is a valid entry that no id can find: it is
only counted (`unreachable`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

import numpy as np

from .. import native_impl
from ..native_impl import _native
from .stream import LINE_CAP, NAME_CAP, Issue, Piece, TextLines, cap_names, locate

KEY_DIGITS = 20  # decimal digits of the largest uint64
U64_MAX_TEXT = np.bytes_(b"18446744073709551615")


@dataclass
class HashDictionary:
    """hash_dic entries: `keys` ascending uint64 ids (each once), the text of keys[i] being the
    UTF-8 bytes data[starts[i]:ends[i]]; `unreachable` counts the entries of keys no id spells."""

    keys: np.ndarray     # uint64
    starts: np.ndarray   # int64 byte offsets into data
    ends: np.ndarray     # int64
    data: bytes
    unreachable: int = 0

    @classmethod
    def empty(cls) -> "HashDictionary":
        """No entry."""
        return cls(np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.int64), b"")

    def __len__(self) -> int:
        """Entries with a findable id (unreachable ones aside)."""
        return len(self.keys)

    def has_entries(self) -> bool:
        """Whether any line defined an entry (findable or not)."""
        return bool(len(self.keys) or self.unreachable)

    def find(self, ids: np.ndarray) -> np.ndarray:
        """The position in `keys` of each uint64 id, -1 where it has no entry."""
        ids = np.asarray(ids, dtype=np.uint64)
        if not len(self.keys):
            return np.full(len(ids), -1, dtype=np.int64)
        order = np.argsort(ids)  # (searchsorted walks sorted queries faster)
        at: np.ndarray = np.empty(len(ids), dtype=np.int64)
        at[order] = np.minimum(np.searchsorted(self.keys, ids[order]), len(self.keys) - 1)
        return np.where(self.keys[at] == ids, at, -1).astype(np.int64)

    def texts(self, at: np.ndarray) -> List[str]:
        """The texts of the entries at positions `at` (all found), decoded one by one in C
        (`decode_spans`)."""
        return decode_spans(self.data, self.starts[at], self.ends[at])

    @classmethod
    def merge(cls, parts: Sequence["HashDictionary"]) -> "HashDictionary":
        """One dictionary of several read in order: a key defined again later takes its later text."""
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return cls.empty()
        shift = np.cumsum([0] + [len(p.data) for p in parts[:-1]])
        keys = np.concatenate([p.keys for p in parts])
        starts = np.concatenate([p.starts + s for p, s in zip(parts, shift)])
        ends = np.concatenate([p.ends + s for p, s in zip(parts, shift)])
        keys, starts, ends = _last_of_each(keys, starts, ends)
        return cls(keys, starts, ends, b"".join(p.data for p in parts), sum(p.unreachable for p in parts))


def decode_spans(data: bytes, starts: np.ndarray, ends: np.ndarray) -> List[str]:
    """data[starts[i]:ends[i]] of every i as UTF-8 (undecodable bytes read U+FFFD): the C function
    (native/_native.c) when the C implementation is in use, else `py_decode_spans`."""
    s, e = np.ascontiguousarray(starts, dtype=np.int64), np.ascontiguousarray(ends, dtype=np.int64)
    if native_impl.c_chosen():
        return _native.decode_spans(data, s, e)
    return py_decode_spans(data, s, e)


def py_decode_spans(data: bytes, starts: np.ndarray, ends: np.ndarray) -> List[str]:
    """The pure-Python twin of `_native.decode_spans`."""
    if len(starts) != len(ends) or (len(starts) and (starts.min() < 0 or (ends < starts).any()
                                                     or ends.max() > len(data))):
        raise ValueError("decode_spans: a span is not within the bytes")
    return [data[s:e].decode("utf-8", "replace") for s, e in zip(starts.tolist(), ends.tolist())]


def _last_of_each(keys: np.ndarray, *cols: np.ndarray) -> Tuple[np.ndarray, ...]:
    """keys ascending, each once, with the columns of its last row."""
    order = np.argsort(keys)  # (not stable: each key's last row is found below)
    keys = keys[order]
    if not len(keys):
        return (keys, *cols)
    first = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
    last_row = np.maximum.reduceat(order, first)
    return (keys[first], *(c[last_row] for c in cols))


def line_ranges(buf: np.ndarray, cap: int = LINE_CAP) -> Tuple[np.ndarray, np.ndarray, Dict[int, int]]:
    """(starts, ends, cut) of the '\\n'-separated lines of a byte stream, as split_lines splits them
    (a last line without '\\n' counts, an empty one after the last '\\n' does not); lines longer
    than `cap` end after their first `cap` bytes, and `cut` maps their offsets to full lengths."""
    nl = np.flatnonzero(buf == ord("\n"))
    starts = np.concatenate([[0], nl + 1]).astype(np.int64)
    ends = np.concatenate([nl, [len(buf)]]).astype(np.int64)
    if starts[-1] == len(buf):
        starts, ends = starts[:-1], ends[:-1]
    long = np.flatnonzero(ends - starts > cap)
    cut = {int(starts[i]): int(ends[i] - starts[i]) for i in long}
    ends[long] = starts[long] + cap
    return starts, ends, cut


def parse_hash_dictionary(buf: np.ndarray, pieces: Sequence[Piece], cap: int = LINE_CAP
                          ) -> Tuple[HashDictionary, List[Issue]]:
    """The entries of a hash_dic stream (bytes as a uint8 array; `pieces` place its files) and the
    issues of its lines: over-long lines, malformed lines in line order, then over-long texts."""
    buf = np.asarray(buf, dtype=np.uint8)
    starts, ends, cut = line_ranges(buf, cap)
    issues = TextLines([], list(pieces), cut, cap).cut_issues(kept=True)
    # strip trailing '\r's (the body is the line without them); skip what is left empty
    cr = np.flatnonzero((ends > starts) & (buf[np.maximum(ends - 1, 0)] == ord("\r")))
    while len(cr):
        ends[cr] -= 1
        cr = cr[(ends[cr] > starts[cr]) & (buf[np.maximum(ends[cr] - 1, 0)] == ord("\r"))]
    body = np.flatnonzero(ends > starts)
    starts, ends = starts[body], ends[body]
    # the first ':' of each line, and keys of 1 to KEY_DIGITS ASCII digits (the fast path)
    colon, fast, value, reach = dict_keys(buf, starts, ends)
    has = colon >= 0
    # every other line: the parse of each line, as parse_dictionary_lines does it (rare: malformed
    # lines, or keys no id spells)
    slow = np.flatnonzero(~fast)
    slow_ok: List[int] = []
    for i in slow.tolist():
        text = buf[starts[i]:ends[i]].tobytes().decode("utf-8", errors="replace")
        key, sep, _ = text.partition(":")
        if sep and key.isdigit():
            slow_ok.append(i)
        else:
            path, at = locate(pieces, int(starts[i]))
            issues.append(Issue(path, at, f"dictionary line {text[:60]!r} is not '<decimal id>:<string>'; ignored"))
    value_start = np.where(has, colon + 1, ends)
    valid = fast.copy()
    valid[slow_ok] = True
    data = buf.tobytes()
    vs, ve = value_start, ends  # (ends is not read past here)
    # texts longer than NAME_CAP characters (only those of more bytes can be): cut, in an extra buffer
    extra: List[bytes] = []
    at_extra = len(data)
    long_rows = np.flatnonzero(valid & (ve - vs > NAME_CAP))
    if len(long_rows):
        texts = [data[vs[i]:ve[i]].decode("utf-8", "replace") for i in long_rows.tolist()]
        capped, cap_issues = cap_names(texts, starts[long_rows].tolist(), pieces, "names")
        issues += cap_issues
        for i, before, after in zip(long_rows.tolist(), texts, capped):
            if after is not before:
                raw = after.encode("utf-8")
                vs[i], ve[i] = at_extra, at_extra + len(raw)
                extra.append(raw)
                at_extra += len(raw)
    keys, s, e = _last_of_each(value[reach], vs[reach], ve[reach])
    return HashDictionary(keys, s, e, data + b"".join(extra) if extra else data,
                          int(np.count_nonzero(valid)) - int(np.count_nonzero(reach))), issues


def dict_keys(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray
              ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(colon, fast, value, reach) of the lines buf[starts[i]:ends[i]]: colon, the offset of a
    line's first ':' (-1: none); fast, a key (the bytes before it) of 1 to KEY_DIGITS ASCII digits;
    value, that key as a uint64; reach, a fast key some uint64 spells. The C function
    (native/_native.c) when the C implementation is in use, else `py_dict_keys`."""
    if not native_impl.c_chosen():
        return py_dict_keys(buf, starts, ends)
    colon, value, flags = _native.dict_keys(np.ascontiguousarray(buf, dtype=np.uint8),
                                            np.ascontiguousarray(starts, dtype=np.int64),
                                            np.ascontiguousarray(ends, dtype=np.int64))
    bits = np.frombuffer(flags, dtype=np.uint8)
    return (np.frombuffer(colon, dtype=np.int64), (bits & 1) != 0, np.frombuffer(value, dtype=np.uint64),
            (bits & 2) != 0)


def py_dict_keys(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray
                 ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The pure-Python twin of `_native.dict_keys`, as `dict_keys` returns it."""
    colons = np.flatnonzero(buf == ord(":"))
    j = np.searchsorted(colons, starts)
    colon = colons[np.minimum(j, len(colons) - 1)] if len(colons) else np.zeros(len(starts), np.int64)
    has = (j < len(colons)) & (colon < ends)
    klen = np.where(has, colon - starts, 0)
    fast, value, reach = _read_keys(buf, starts, klen)
    return np.where(has, colon, -1).astype(np.int64), fast, value, reach


KEY_ROWS = 1 << 16  # lines whose keys are read at a time (KEY_DIGITS bytes each, and their weights)
#: WEIGHTS[k, j]: what digit j of a key of k digits is worth, 10 ** (k - 1 - j), and 0 past the key
WEIGHTS = np.array([[10 ** (k - 1 - j) if j < k else 0 for j in range(KEY_DIGITS)] for k in range(KEY_DIGITS + 1)],
                   dtype=np.uint64)


def _read_keys(buf: np.ndarray, starts: np.ndarray, klen: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(fast, value, reach) of lines starting at `starts` whose key (before the first ':') has
    `klen` bytes: fast, a key of 1 to KEY_DIGITS ASCII digits; value, that key as a uint64; reach,
    a fast key some uint64 spells (no leading zero, at most the largest uint64)."""
    n = len(starts)
    fast: np.ndarray = np.zeros(n, dtype=bool)
    reach: np.ndarray = np.zeros(n, dtype=bool)
    value: np.ndarray = np.zeros(n, dtype=np.uint64)
    if not n:
        return fast, value, reach
    col = np.arange(KEY_DIGITS)
    # each line's first KEY_DIGITS bytes: rows of a sliding window (the stream's end padded)
    rows = np.lib.stride_tricks.sliding_window_view(buf if len(buf) >= KEY_DIGITS else np.zeros(KEY_DIGITS, np.uint8),
                                                    KEY_DIGITS)
    tail = np.concatenate([buf[max(0, len(buf) - KEY_DIGITS):], np.zeros(KEY_DIGITS, np.uint8)])
    tail_at = max(0, len(buf) - KEY_DIGITS)
    for lo in range(0, n, KEY_ROWS):
        hi = min(n, lo + KEY_ROWS)
        k = np.minimum(klen[lo:hi], KEY_DIGITS + 1)
        at = starts[lo:hi]
        near_end = at > len(buf) - KEY_DIGITS
        grid = rows[np.where(near_end, 0, at)]
        for i in np.flatnonzero(near_end).tolist():  # the few lines that start near the stream's end
            grid[i] = tail[at[i] - tail_at:at[i] - tail_at + KEY_DIGITS]
        digit = grid - np.uint8(ord("0"))  # other bytes wrap past 9
        ok = (k >= 1) & (k <= KEY_DIGITS) & ((digit <= 9) | (col >= k[:, None])).all(axis=1)
        # (keys of KEY_DIGITS digits past the largest uint64 wrap, and are found unreachable below)
        v = (digit.astype(np.uint64) * WEIGHTS[np.where(ok, k, 0)]).sum(axis=1, dtype=np.uint64)
        r = ok & ((k == 1) | (grid[:, 0] != ord("0")))
        twenty = np.flatnonzero(r & (k == KEY_DIGITS))
        if len(twenty):
            spelled = np.ascontiguousarray(grid[twenty]).view(f"S{KEY_DIGITS}").ravel()
            r[twenty[spelled > U64_MAX_TEXT]] = False
        fast[lo:hi], value[lo:hi], reach[lo:hi] = ok, v, r
    return fast, value, reach
