"""Types of msprof_kit._native (native/_native.c); msprof_kit.native_impl holds its Python twin."""
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

# (kind, values, arg, alt, alts): kind 0 INT, 1 FIXED, 2 TRIM (arg: decimals 1..18), 3 FLOAT,
# 4 TEXT (arg: (blob, int64 offsets)); alt: None or uint8 codes into alts (1-based)
SlotTuple = Tuple[int, np.ndarray, Union[int, Tuple[bytes, np.ndarray], None], Optional[np.ndarray], Tuple[bytes, ...]]

def format_rows(pieces: Sequence[bytes], slots: Sequence[SlotTuple], n: int, sep: bytes, /) -> bytes:
    """n rows of literal pieces and typed slots (len(pieces) == len(slots) + 1), joined by sep."""
    ...

def float_repr(x: float, /) -> str:
    """repr(float(x)), as format_rows prints a FLOAT slot."""
    ...

def table_leaves(kinds: bytes, columns: Sequence[Union[None, np.ndarray, Tuple[Union[bytes, bytearray, memoryview], np.ndarray]]],
                 n: int, page_size: int, rowids: Union[int, np.ndarray], /) -> Tuple[bytes, bytes]:
    """n rows as sqlite table b-tree leaf pages (kinds: b'i' int64, b'r' REAL, b'n' NUMERIC, b'k'
    the rowid alias, b't' TEXT as a (UTF-8 blob, n + 1 int64 offsets) pair); returns (pages, int64
    bytes of each page's last rowid)."""
    ...

def tensor_texts(payload: np.ndarray, order: np.ndarray, starts: np.ndarray, dtypes: Tuple[bytes, np.ndarray],
                 formats: Tuple[bytes, np.ndarray], /) -> Tuple[bytes, bytes, bytes]:
    """The six texts of each op of tensor_info records (native/tensor_texts.c): (blob, int64
    offsets, uint64 FNV-1a hashes), the last two as bytes."""
    ...

def dict_keys(buf: Union[bytes, np.ndarray], starts: np.ndarray, ends: np.ndarray, /) -> Tuple[bytes, bytes, bytes]:
    """The keys of hash_dic lines buf[starts[i]:ends[i]]: (int64 first ':' or -1, uint64 value,
    uint8 flags: 1 a key of 1-20 ASCII digits, 2 one a uint64 spells), as bytes."""
    ...

def gather_spans(blob: Union[bytes, bytearray, np.ndarray], starts: np.ndarray, lengths: np.ndarray, /) -> bytes:
    """blob[starts[i]:starts[i] + lengths[i]] of every i, one after the other."""
    ...

def spans_equal(a: Union[bytes, bytearray, np.ndarray], a_starts: np.ndarray, b: Union[bytes, bytearray, np.ndarray],
                b_starts: np.ndarray, lengths: np.ndarray, /) -> bool:
    """Whether each span of `a` reads the same as its span of `b`."""
    ...

def csv_table(texts: Sequence[str], /) -> Tuple[bytes, bytes]:
    """The texts as CSV fields (quoted when they must be), UTF-8 one after the other; int64 offsets."""
    ...

def json_table(texts: Sequence[str], /) -> Tuple[bytes, bytes]:
    """The texts as JSON string literals (as json.dumps with ensure_ascii=False), UTF-8 one after the other; int64 offsets."""
    ...

def utf8_table(texts: Sequence[str], /) -> Tuple[bytes, bytes]:
    """The texts' UTF-8 one after the other; int64 offsets."""
    ...

def json_list(texts: Sequence[str], /) -> str:
    """The list of texts as json.dumps(list(texts), ensure_ascii=False) writes it."""
    ...

def decode_spans(blob: Union[bytes, bytearray, np.ndarray], starts: np.ndarray, ends: np.ndarray, /) -> List[str]:
    """blob[starts[i]:ends[i]] of every i decoded as UTF-8, undecodable bytes as U+FFFD."""
    ...
