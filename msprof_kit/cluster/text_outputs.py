"""Phase 3, text: the four files msprof-analyze's text mode writes into cluster_analysis_output/,
in its formats (prof_common/file_manager.py): each JSON as json.dumps with its defaults on one line
(no indentation, no trailing newline, keys in insertion order); the CSV through csv.writer
(',' separated, '\\r\\n' line ends, floats as repr, an empty Step). Like msprof-analyze, a file with
no content (no communication at all) is not written. `result.load_text_outputs` reads them back."""
from __future__ import annotations

import contextlib
import csv
import json
import os
import secrets
from typing import Any, Callable, Dict, List, Tuple

import pandas as pd

from ..errors import BadControlFile, NoData, OutputError
from .join import STEP_TRACE_COLUMNS
from .result import COMMUNICATION_JSON, GROUP_JSON, MATRIX_JSON, STEP_TRACE_CSV, TEXT_FILES, ClusterResult



def _write_csv(path: str, frame: pd.DataFrame) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(list(frame.columns))
        writer.writerows(frame.itertuples(index=False, name=None))


def _json_writer(data: Any) -> Callable[[str], None]:
    def write(path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(json.dumps(data))
    return write


def write_text_outputs(result: ClusterResult, out_dir: str) -> List[str]:
    """Write the text outputs of `result` into `out_dir` (created if missing): temporary names
    first, renamed at the end; on failure none is left (OutputError). Returns the written paths."""
    jobs: List[Tuple[str, Callable[[str], None]]] = []
    if len(result.step_trace):
        frame = result.step_trace.reindex(columns=STEP_TRACE_COLUMNS)
        jobs.append((STEP_TRACE_CSV, lambda p: _write_csv(p, frame)))
    for name, data in ((COMMUNICATION_JSON, result.communication), (MATRIX_JSON, result.matrix),
                       (GROUP_JSON, result.groups)):
        if data:
            jobs.append((name, _json_writer(data)))
    temps: List[Tuple[str, str]] = []
    try:
        os.makedirs(out_dir, exist_ok=True)
        for name, write in jobs:
            final = os.path.join(out_dir, name)
            tmp = os.path.join(out_dir, f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
            temps.append((tmp, final))
            write(tmp)
        for tmp, final in temps:
            os.replace(tmp, final)
    except OSError as exc:
        with contextlib.suppress(OSError):
            for tmp, _ in temps:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        raise OutputError(f"cannot write the cluster outputs ({exc.strerror or exc})", path=out_dir,
                          cause=str(exc.strerror or exc)) from exc
    return [final for _, final in temps]
