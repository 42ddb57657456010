"""Where `msprof-kit cluster` writes, and how: CLUSTER/cluster_analysis_output/ or
OUT/cluster_analysis_output/ (msprof-analyze's names), appearing whole or not at all. Everything is
written into a hidden temporary folder beside it, which replaces the folder (and a previous run's
output) only once every file is written; a failure or an interrupt removes the temporary folder and
leaves any previous output as it was."""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import Callable, List, Optional, Sequence, Union

from ..errors import OutputError

__all__ = ["OUTPUT_DIR", "Writer", "output_folder", "write_atomically"]

#: the output folder's name, msprof-analyze's
OUTPUT_DIR = "cluster_analysis_output"

#: a phase-3 writer: fills a folder, returns the file or files it wrote there
Writer = Callable[[str], Union[str, Sequence[str]]]


def output_folder(cluster_dir: str, out_dir: Optional[str] = None) -> str:
    """Where the outputs go: OUT/cluster_analysis_output with -o OUT, else CLUSTER/cluster_analysis_output
    (msprof-analyze's rule for its --output_path)."""
    return os.path.join(os.path.abspath(out_dir or cluster_dir), OUTPUT_DIR)


def write_atomically(folder: str, writers: Sequence[Writer]) -> List[str]:
    """Run each writer on a fresh temporary folder beside `folder`, then put that folder in
    `folder`'s place (replacing a previous one). Returns the files written, as paths inside
    `folder`. On any failure or interrupt nothing is left: the temporary folder is removed and a
    previous `folder` stays as it was. A folder that cannot be written is an OutputError."""
    parent = os.path.dirname(os.path.abspath(folder))
    name = os.path.basename(os.path.normpath(folder))
    try:
        os.makedirs(parent, exist_ok=True)
        fresh = tempfile.mkdtemp(prefix=f".{name}.writing-", dir=parent)
    except OSError as exc:
        raise OutputError(f"cannot write the cluster outputs here: {exc.strerror or exc}", path=parent,
                          cause=exc.strerror or str(exc)) from exc
    old: Optional[str] = None
    moved = False
    try:
        written: List[str] = []
        for writer in writers:
            out = writer(fresh)
            written += [out] if isinstance(out, str) else list(out)
        if os.path.lexists(folder):
            old = fresh + ".previous"
            os.rename(folder, old)
        os.rename(fresh, folder)
        moved = True
    except OSError as exc:
        raise OutputError(f"cannot write the cluster outputs: {exc.strerror or exc}",
                          path=exc.filename or folder, cause=exc.strerror or str(exc)) from exc
    finally:
        if not moved:
            shutil.rmtree(fresh, ignore_errors=True)
            if old is not None and not os.path.lexists(folder):
                os.rename(old, folder)  # the previous output back in its place
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return [os.path.join(folder, os.path.relpath(path, fresh)) for path in written]
