"""Writable copies of the real data sets in ../shared/data/real (the originals are read-only and
never written)."""
from __future__ import annotations

import os
import shutil
import stat

import pytest

from conftest import SHARED

REAL = os.path.join(SHARED, "data", "real")
#: skips a test when ../shared/data/real is not beside the repository
needs_real = pytest.mark.skipif(not os.path.isdir(REAL), reason="../shared/data/real is not beside the repo")


def writable_copy(src: str, dest: str) -> str:
    """A copy of the folder `src` at `dest` that the tests may write into."""
    shutil.copytree(src, dest)
    for root, dirs, files in os.walk(dest):
        for name in dirs + files:
            p = os.path.join(root, name)
            os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR)
    return dest


def copy_real(rel: str, dest_root: str) -> str:
    """A writable copy of the data set `rel` (relative to REAL) below dest_root."""
    return writable_copy(os.path.join(REAL, rel), os.path.join(str(dest_root), os.path.basename(rel)))
