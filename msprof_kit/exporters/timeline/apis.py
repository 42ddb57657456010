"""The host APIs the CANN layer shows: CANN_API in scope by connection id, a block at a time
(`ApiBlocks`), and their KIT_API texts (`ApiTexts`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterator, Optional, Sequence, Set, Tuple

import numpy as np

from ... import store
from ...store import before_start
from ...arrays import SortedKeys, ascending
from ...progress import Phase
from ..context import ExportContext
from .writer import CHUNK, json_literals

LEVEL_ACL, LEVEL_MODEL, LEVEL_NODE = 20000, 15000, 10000
# API level -> (event name prefix, args "level")
LEVELS: Dict[int, Tuple[str, str]] = {
    30000: ("Api", "pytorch"), 25000: ("Api", "pta"), 20500: ("Api", "msproftx"), LEVEL_ACL: ("AscendCL", "acl"),
    LEVEL_MODEL: ("Model", "model"), LEVEL_NODE: ("Node", "node"), 5500: ("Communication", "communication"),
    5000: ("Runtime", "runtime")}
ACL_EVENT_APIS = ("aclrtRecordEvent", "aclrtStreamWaitEvent")  # ACL calls whose device task gets an arrow


API_COLUMNS = ("startNs", "endNs", "type", "globalTid", "connectionId", "name")
API_BLOCK = 2 * CHUNK  # CANN_API rows read at a time (whole chunks: the events come in the same order)


class ApiBlocks:
    """CANN_API rows (API_COLUMNS, int64) by connection id, API_BLOCK store rows at a time: (first
    store row, last store row + 1, the rows of that range in scope). In scope are the APIs the
    reference keeps of those recorded before the collection start (`rule`, None: all; see
    msprof_kit.before_start) and, in an iteration export, that end at or after the window's start
    and start at or before its end. The store keeps CANN_API by connection id in its mirror; a
    store without one, or not in that order, is read whole once (and sorted)."""

    def __init__(self, ctx: ExportContext, window: Optional[Tuple[int, int]],
                 rule: Optional[before_start.ApiRule] = None) -> None:
        self.ctx, self.window, self.rule = ctx, window, rule
        self._threads: Optional[Set[int]] = None
        self.whole: Optional[Dict[str, np.ndarray]] = None
        mirror = ctx.stored("CANN_API") if ctx.has("KIT_COLUMNS") else None
        if mirror is None or not all(c in mirror for c in API_COLUMNS) or not ascending(mirror.read("connectionId")):
            api = ctx.ints("CANN_API", API_COLUMNS)
            order = np.argsort(api["connectionId"], kind="stable")
            self.whole = {c: v[order] for c, v in api.items()}
            self.rows = len(order)  # store rows
        else:
            self.rows = len(mirror)

    def __iter__(self) -> Iterator[Tuple[int, int, np.ndarray]]:
        for lo, hi, cols in self.each(API_COLUMNS):
            yield lo, hi, np.column_stack([cols[c] for c in API_COLUMNS])

    def counted(self, phase: Phase) -> Iterator[Tuple[int, int, np.ndarray]]:
        """The blocks, each counted in `phase` (its store rows) once it is handed over."""
        with phase:
            for lo, hi, block in self:
                yield lo, hi, block
                phase.advance(hi - lo)

    def each(self, names: Sequence[str]) -> Iterator[Tuple[int, int, Dict[str, np.ndarray]]]:
        """(first store row, last + 1, these columns of the rows of that range in scope), block by block."""
        extra: Tuple[str, ...] = ()
        if self.rule is not None:
            extra = ("startNs", "endNs", "globalTid")
        elif self.window is not None:
            extra = ("startNs", "endNs")
        need = list(names) + [c for c in extra if c not in names]
        if self.whole is not None:
            n = len(self.whole["connectionId"])
            source: Iterator[Tuple[int, int, Dict[str, np.ndarray]]] = (
                (lo, min(n, lo + API_BLOCK), {c: self.whole[c][lo:lo + API_BLOCK] for c in need})
                for lo in range(0, n, API_BLOCK))
        else:
            source = self.ctx.blocks("CANN_API", need, API_BLOCK)
        for lo, hi, cols in source:
            keep = None
            if self.rule is not None:
                keep = self.rule.keep(cols["startNs"], cols["endNs"], cols["globalTid"])
            if self.window is not None:
                inside = (cols["startNs"] <= self.window[1]) & (cols["endNs"] >= self.window[0])
                keep = inside if keep is None else keep & inside
            if keep is not None:
                cols = {c: v[keep] for c, v in cols.items()}
            yield lo, hi, {c: cols[c] for c in names}

    def threads(self) -> Set[int]:
        """The thread ids (globalTid's low 32 bits) of the APIs in scope (read once)."""
        if self._threads is None:
            tids: Set[int] = set()
            for _, _, cols in self.each(("globalTid",)):
                tids |= set((np.unique(cols["globalTid"]) & 0xFFFFFFFF).tolist())
            self._threads = tids
        return set(self._threads)


@dataclass
class ApiTexts:
    """KIT_API: the mode and item id of each API by connection id, as codes into their distinct
    texts. Item code len(items) - 1 is "0", the item of an API KIT_API does not know. KIT_API
    keeps the rows of CANN_API in the same order, so a block of APIs is looked up in the same
    range of KIT_API; rows that are not there are looked up in the whole table."""

    cols: Optional[store.StoredColumns]
    mode_json: np.ndarray   # JSON literal of each distinct mode
    items: np.ndarray       # distinct item texts, "0" last
    _whole: Optional[Tuple[SortedKeys, np.ndarray, np.ndarray]] = None  # all of KIT_API: (ids, mode, item)

    @classmethod
    def load(cls, ctx: ExportContext) -> "ApiTexts":
        cols = ctx.stored("KIT_API")
        usable = all(c in cols for c in ("connectionId", "mode", "itemId")) and len(cols) != 0
        modes, items = (cols.labels("mode"), cols.labels("itemId")) if usable else (None, None)
        if modes is None or items is None:  # (mode and itemId are text columns: labels None only without them)
            return cls(None, np.zeros(0, dtype=object), np.array(["0"], dtype=object))
        return cls(cols, json_literals(modes), np.append(items, "0"))

    def lookup(self, conn: np.ndarray, lo: int, hi: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(mode code, item code, found) of the APIs with these connection ids, read from store
        rows lo:hi of CANN_API."""
        n = len(conn)
        mode: np.ndarray = np.zeros(n, np.int64)
        item: np.ndarray = np.zeros(n, np.int64)
        hit: np.ndarray = np.zeros(n, dtype=bool)
        if self.cols is None or not n:
            return mode, item, hit
        near = self.cols.read("connectionId", lo, hi)
        if ascending(near):
            pos = SortedKeys(near).find(conn)
            hit = pos >= 0
            mode[hit] = self.cols.read("mode", lo, hi)[pos[hit]]
            item[hit] = self.cols.read("itemId", lo, hi)[pos[hit]]
        if not hit.all():
            if self._whole is None:
                self._whole = (SortedKeys(self.cols.read("connectionId")), self.cols.read("mode"),
                               self.cols.read("itemId"))
            keys, modes, items = self._whole
            miss = np.flatnonzero(~hit)
            pos = keys.find(conn[miss])
            miss, pos = miss[pos >= 0], pos[pos >= 0]
            mode[miss], item[miss], hit[miss] = modes[pos], items[pos], True
        return mode, item, hit
