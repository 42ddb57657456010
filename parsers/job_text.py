"""Legacy `JOBxxx` collections: the text kinds (parsers/job.py holds the binary ones and the
record tables).

`Framework.host.vm.{task_desc_info,graph_desc_info,point}` (one op or point a line) and the older
text `DATA_PREPROCESS.dev.AICPU` (NUL-separated "Node:" / "Thread" lines); `Framework.hash_dic` is
read by parsers.host.parse_dictionary_lines. Lines in (parsers.stream.TextLines), columns and
`Issue`s out: no file IO, no logging. Also the six tensor texts as the store keeps them
(render_tensors), with which the binary tensor records are rendered too.

Sources (facts only): MindInsight / MindSpore `profiler/parser/{framework_parser,
aicpu_data_parser}.py`.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Tuple

import numpy as np

from .host import dtype_name, format_name
from .stream import Columns, Issue, TextLines, cap_names, locate

# MindSpore's number types as written by the 2020 text reporter (Framework.host.vm.graph_desc_info)
VM_DTYPES_2020 = {27: "BOOL", 28: "INT", 29: "INT8", 30: "INT16", 31: "INT32", 32: "INT64", 33: "UINT",
                  34: "UINT8", 35: "UINT16", 36: "UINT32", 37: "UINT64", 38: "FLOAT", 39: "FLOAT16",
                  40: "FLOAT32", 41: "FLOAT64"}
NA = "N/A"


def _lines(text: TextLines, issues: List[Issue]) -> List[Tuple[int, str]]:
    """(byte offset, text) of each non-empty line of a text stream; a line longer than the line
    cap cannot be whole and is ignored (reported in `issues`)."""
    issues.extend(text.cut_issues(kept=False))
    out: List[Tuple[int, str]] = []
    for pos, raw in text.lines:
        if pos in text.cut:
            continue
        line = raw.rstrip(b"\r\0").decode("utf-8", errors="replace")
        if line.strip():
            out.append((pos, line))
    return out


Tensor = Tuple[str, str, str]  # (shape, data type, format) texts


def render_tensors(ins: List[Tensor], outs: List[Tensor]) -> Tuple[str, str, str, str, str, str]:
    """The six description texts as the store keeps them (as for PROF collections): shapes
    `"d,d;d,d"` with the quotes, types and formats `;`-joined, N/A when there is no tensor."""
    def side(ts: List[Tensor]) -> Tuple[str, str, str]:
        if not ts:
            return NA, NA, NA
        return '"' + ";".join(t[0] for t in ts) + '"', ";".join(t[1] for t in ts), ";".join(t[2] for t in ts)
    a, b, c = side(ins)
    d, e, f = side(outs)
    return a, b, c, d, e, f


def parse_task_desc_text(text: TextLines) -> Tuple[Columns, List[Issue]]:
    """`<full op name> <block dim> <task id> <stream id>` lines (a 5-field line has an extra
    leading field, which is ignored). Op names are cut to NAME_CAP characters."""
    pieces = text.pieces
    names: List[str] = []
    nums: List[Tuple[int, int, int]] = []
    where: List[int] = []
    issues: List[Issue] = []
    for off, line in _lines(text, issues):
        parts = line.split()
        if len(parts) == 5:
            parts = parts[1:]
        if len(parts) != 4 or not all(p.isdigit() for p in parts[1:]):
            path, at = locate(pieces, off)
            issues.append(Issue(path, at, f"task_desc_info line {line[:80]!r} is not '<op name> <block dim> "
                                          f"<task id> <stream id>'; ignored"))
            continue
        names.append(parts[0])
        nums.append((int(parts[1]), int(parts[2]), int(parts[3])))
        where.append(off)
    names, capped = cap_names(names, where, pieces, "op names")
    issues.extend(capped)
    table = np.array(nums, dtype=np.int64).reshape(-1, 3)
    return {"op_name": np.array(names, dtype=object), "block_dim": table[:, 0], "task_id": table[:, 1],
            "stream_id": table[:, 2], "offset": np.array(where, dtype=np.int64)}, issues


GraphInfo = Tuple[str, str, str, str, str, str, str]  # op type, then the six tensor texts


def parse_graph_desc_text(text: TextLines, backend: str) -> Tuple[Dict[str, GraphInfo], List[Issue]]:
    """`op_name:<name> op_type:<type> input_id:0 input_format:.. input_data_type:.. input_shape:".."
    output_id:0 ...` lines -> op name -> (op type, six tensor texts). Backend 'vm' writes
    MindSpore's 2020 number types and format names; 'ge' writes GE enum codes. Names, types and
    tensor texts are cut to NAME_CAP characters."""
    pieces = text.pieces
    rows: List[Tuple[str, ...]] = []
    where: List[int] = []
    issues: List[Issue] = []
    for off, line in _lines(text, issues):
        name = op_type = ""
        ins: List[List[str]] = []
        outs: List[List[str]] = []
        current: List[str] = []
        bad = ""
        for token in line.split(" "):
            if not token:
                continue
            key, sep, value = token.partition(":")
            if not sep:
                bad = token
                break
            if key == "op_name":
                name = value
            elif key == "op_type":
                op_type = value
            elif key in ("input_id", "output_id"):
                current = ["", "", ""]
                (ins if key == "input_id" else outs).append(current)
            elif key.endswith(("_format", "_data_type", "_shape")) and current:
                if key.endswith("_shape"):
                    current[0] = value.strip('"')
                elif key.endswith("_data_type"):
                    code = int(value) if value.isdigit() else -1
                    current[1] = (VM_DTYPES_2020.get(code, value) if backend == "vm" else
                                  dtype_name(code) if code >= 0 else value)
                else:
                    current[2] = format_name(int(value)) if backend == "ge" and value.isdigit() else value
        if bad or not name:
            path, at = locate(pieces, off)
            issues.append(Issue(path, at, f"graph_desc_info line {line[:80]!r} is not 'op_name:.. op_type:.. "
                                          f"input_id:.. ...'; ignored"))
            continue
        ins_t = [(c[0], c[1], c[2]) for c in ins]
        outs_t = [(c[0], c[1], c[2]) for c in outs]
        rows.append((name, op_type or NA) + render_tensors(ins_t, outs_t))
        where.append(off)
    columns: List[List[str]] = [list(c) for c in zip(*rows)] if rows else []
    for j, what in enumerate(("op names", "op types") + tuple(f"{c} texts" for c in _TENSOR_TEXTS)):
        if columns:
            columns[j], capped = cap_names(columns[j], where, pieces, what)
            issues.extend(capped)
    out: Dict[str, GraphInfo] = {row[0]: row[1:] for row in zip(*columns)}
    return out, issues


_TENSOR_TEXTS = ("input shape", "input data type", "input format", "output shape", "output data type",
                 "output format")


def parse_point_text(text: TextLines) -> Tuple[Columns, List[Issue]]:
    """`<point tag> <full op name>` lines: the op that records each step-trace point."""
    pieces = text.pieces
    tags: List[int] = []
    names: List[str] = []
    where: List[int] = []
    issues: List[Issue] = []
    for off, line in _lines(text, issues):
        tag, _, name = line.strip().partition(" ")
        if not tag.isdigit() or not name:
            path, at = locate(pieces, off)
            issues.append(Issue(path, at, f"point line {line[:80]!r} is not '<tag> <op name>'; ignored"))
            continue
        tags.append(int(tag))
        names.append(name.strip())
        where.append(off)
    names, capped = cap_names(names, where, pieces, "op names")
    issues.extend(capped)
    return {"tag": np.array(tags, dtype=np.int64), "op_name": np.array(names, dtype=object)}, issues


# ------------------------------------------------------------------------------------------------
# AI CPU (DATA_PREPROCESS)

_DISPATCH = re.compile(r"dispatchTime=\s*([0-9.]+)")
_TOTAL = re.compile(r"totalTime=\s*([0-9.]+)")
_NUMBER = re.compile(r"[0-9]+")


AICPU_SEP = b"\0"  # what separates the segments of a text DATA_PREPROCESS file


def parse_aicpu_text(text: TextLines) -> Tuple[Columns, List[Issue]]:
    """'[ts] Node:<name>, Run start:<us> [<ticks>], ..., Run end:<us> [<ticks>]' segments, each
    followed by its 'Thread[..] ... dispatchTime=<us> us, totalTime=<us> us' segment; segments
    are NUL-separated (`text` split at AICPU_SEP). A segment longer than the line cap is ignored;
    node names are cut to NAME_CAP characters."""
    pieces = text.pieces
    issues: List[Issue] = text.cut_issues(kept=False)
    segments = [(pos, "" if pos in text.cut else raw.strip(b"\n").decode("utf-8", errors="replace"))
                for pos, raw in text.lines]
    rows: List[Tuple[str, int, int, int, int, float, float, int]] = []
    for i, (off, seg) in enumerate(segments):
        if "Node" not in seg:
            continue
        thread = segments[i + 1][1] if i + 1 < len(segments) else ""
        fields = seg.split(",")
        dispatch, total = _DISPATCH.search(thread), _TOTAL.search(thread)
        start_nums = _NUMBER.findall(fields[1].split(":")[-1]) if len(fields) > 1 else []
        end_nums = _NUMBER.findall(fields[-1].split(":")[-1])
        if "Thread" not in thread or dispatch is None or total is None or len(fields) not in (3, 6) \
                or not start_nums or not end_nums:
            path, at = locate(pieces, off)
            issues.append(Issue(path, at, f"AI CPU node line {seg[:80]!r} has no 'Run start', 'Run end' or thread "
                                          f"line with dispatchTime and totalTime; ignored"))
            continue
        name = fields[0].split("Node:", 1)[-1].strip()
        rows.append((name, int(start_nums[0]), int(end_nums[0]), int(start_nums[1]) if len(start_nums) > 1 else -1,
                     int(end_nums[1]) if len(end_nums) > 1 else -1, float(dispatch.group(1)),
                     float(total.group(1)), off))
    n = len(rows)
    col: List[Tuple[Any, ...]] = list(zip(*rows)) if rows else [()] * 8
    if rows:
        names, capped = cap_names(list(col[0]), list(col[7]), pieces, "node names")
        col[0] = tuple(names)
        issues.extend(capped)
    return {
        "stream_id": np.full(n, -1, dtype=np.int64), "task_id": np.full(n, -1, dtype=np.int64),
        "name": np.array(col[0], dtype=object), "run_start_us": np.array(col[1], dtype=np.int64),
        "run_end_us": np.array(col[2], dtype=np.int64), "start_ticks": np.array(col[3], dtype=np.int64),
        "end_ticks": np.array(col[4], dtype=np.int64), "dispatch_us": np.array(col[5], dtype=np.float64),
        "total_us": np.array(col[6], dtype=np.float64), "offset": np.array(col[7], dtype=np.int64),
    }, issues
