"""The CANN layer: the host APIs, one thread per OS thread, named `<Level>@<api>`, with the arrow
starts of the C++ flavour."""
from __future__ import annotations

import json
from typing import Dict, Optional

import numpy as np
import pandas as pd

from ...native_impl import Slot, float_slot, int_slot, text_slot, text_table
from ...progress import label
from ..context import ExportContext
from . import writer
from .apis import LEVEL_ACL, LEVEL_MODEL, LEVELS, ApiBlocks, ApiTexts
from .arrows import Arrows, flow_events, flows_of
from .facts import SORT_CANN, Facts
from .tasks import Tasks
from .writer import Template, TraceWriter, coded_slot, constant_slot, dur_us, json_text_slot, process_meta, thread_meta


API_EVENT = Template('{"name":', "name", ',"pid":', "pid", ',"tid":', "tid", ',"ts":"', "ts", '","dur":', "dur",
                     ',"ph":"X","args":{"Thread Id":', "tid", ',"Mode":', "mode", ',"level":', "level", ',"id":', "id",
                     ',"item_id":', "item", ',"connection_id":', "conn", '}}')


def write_cann(ctx: ExportContext, out: TraceWriter, facts: Facts, tasks: Tasks, blocks: Optional[ApiBlocks],
               arrows: Optional[Arrows]) -> None:
    """The CANN process: metadata, one X event per API in scope (None: the store has none), and
    the arrow starts (None: no arrows)."""
    pid = facts.pid(SORT_CANN)
    tids = blocks.threads() if blocks is not None else set()
    if arrows is not None:  # the threads of the arrows that start on host task records
        tids |= tasks.threads
    if not tids:
        return
    meta = process_meta(pid, "CANN", "CPU", SORT_CANN)
    for tid in sorted(tids):
        meta += thread_meta(pid, tid, f"Thread {tid}", tid)
    out.add(meta)
    if blocks is None:
        return
    texts = ApiTexts.load(ctx)
    # arrows that start on an API: the distinct flow ids of the tasks they end at (first seen
    # first), grouped by connection id (a flow id is the connection id << 32, plus the context id
    # in the Python rules)
    flow = tasks.flows if facts.python_rules or arrows is None else arrows.task_conns << 32  # (C++: with the ops')
    flow_conn = flow >> 32
    for lo, hi, block in blocks.counted(ctx.progress.phase(f"{label(ctx.collection_path)}: timeline CANN APIs",
                                                           total=blocks.rows, unit="APIs")):
        if not len(block):
            continue
        slots = _api_texts(block, facts, texts, *texts.lookup(block[:, 4], lo, hi))
        starts = arrows.starts(block[:, 4], block[:, 2]) if arrows is not None else np.zeros(len(block), dtype=bool)
        for first in range(0, len(block), writer.CHUNK):
            rows = block[first:first + writer.CHUNK]
            part = slice(first, first + len(rows))
            out.add_block(_api_events(rows, pid, {key: slot.take(part) for key, slot in slots.items()}, facts),
                          len(rows))
            here = np.flatnonzero(starts[part])
            if len(here):
                row, ids = flows_of(rows[here, 4], flow, flow_conn)
                row = here[row]
                flow_events(out, facts, "s", np.full(len(row), pid), rows[row, 3] & 0xFFFFFFFF, rows[row, 0], ids)


def _api_texts(api: np.ndarray, facts: Facts, texts: ApiTexts, mode: np.ndarray, item: np.ndarray,
               hit: np.ndarray) -> Dict[str, Slot]:
    """The event texts of every CANN_API row (startNs, endNs, type, globalTid, connectionId, name)
    as TEXT slots: `name` (<Level>@<api>), `level`, `id`, `mode` and `item`, each a code into the
    JSON literals of its distinct values, made once per distinct value."""
    level, name = api[:, 2], api[:, 5]
    level_idx, levels = pd.factorize(level)
    heads = [LEVELS.get(lv, ("Api", str(lv))) for lv in levels.tolist()]
    strings = facts.strings
    width = len(strings)

    def name_json(k: int) -> str:
        return json.dumps(strings[k], ensure_ascii=False)

    out = {"level": text_slot(level_idx.astype(np.int32), text_table(json.dumps(text) for _, text in heads)),
           "name": coded_slot(level_idx * width + name,
                              lambda k: json.dumps(heads[k // width][0] + "@" + strings[k % width],
                                                   ensure_ascii=False))}
    model = (level == LEVEL_MODEL) & facts.python_host
    # id: an ACL API's name, "0" for the others; the Python host parser keeps a model-level API's as 0
    id_key = np.where(level == LEVEL_ACL, name, -1)
    id_key[model] = -2
    out["id"] = coded_slot(id_key, lambda k: name_json(k) if k >= 0 else ('"0"' if k == -1 else "0"))
    # mode: KIT_API's (a code >= 0); an API KIT_API does not know: its name (-1 - name id)
    mode_key = np.where(hit, mode, -1 - name)
    out["mode"] = coded_slot(mode_key, lambda k: str(texts.mode_json[k]) if k >= 0 else name_json(-1 - k))
    # item: KIT_API's, else "0"; the Python host parser keeps a model-level API's numeric item as a number
    item = np.where(hit, item, len(texts.items) - 1)
    if facts.python_host:
        numeric = np.array([str(t).isdigit() for t in texts.items.tolist()], dtype=bool)[item]
        item = np.where(model & numeric, -1 - item, item)
    out["item"] = json_text_slot(item, texts.items) if not len(item) or item.min() >= 0 else \
        coded_slot(item, lambda k: json.dumps(str(texts.items[k]), ensure_ascii=False) if k >= 0
                   else str(texts.items[-1 - k]))
    return out


def _api_events(rows: np.ndarray, pid: int, texts: Dict[str, Slot], facts: Facts) -> bytes:
    """X events of CANN_API rows, with their `_api_texts` slots."""
    n = len(rows)
    return API_EVENT.rows(n, name=texts["name"], pid=constant_slot(pid, n), tid=int_slot(rows[:, 3] & 0xFFFFFFFF),
                          ts=facts.ts(rows[:, 0]), dur=float_slot(dur_us(rows[:, 0], rows[:, 1])),
                          mode=texts["mode"], level=texts["level"], id=texts["id"], item=texts["item"],
                          conn=int_slot(rows[:, 4]))
