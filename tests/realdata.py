"""Writable copies of the real data sets in ../shared/data/real (the originals are read-only and
never written)."""
from __future__ import annotations

import os
import shutil
import stat

from conftest import SHARED

REAL = os.path.join(SHARED, "data", "real")


def copy_real(rel: str, dest_root: str) -> str:
    """A writable copy of the data set `rel` (relative to REAL) below dest_root."""
    dest = os.path.join(dest_root, os.path.basename(rel))
    shutil.copytree(os.path.join(REAL, rel), dest)
    for root, dirs, files in os.walk(dest):
        for name in dirs + files:
            p = os.path.join(root, name)
            os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR)
    return dest
