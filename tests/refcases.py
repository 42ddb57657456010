"""Reference outputs kept in tests/reference/<case>/: where they are, and the digest of the input each
MANIFEST.txt names, so a test can tell that the generator still writes the input the reference read."""
from __future__ import annotations

import hashlib
import os
import re

REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference")


def tree_digest(prof: str) -> str:
    """sha256 over the files sorted by path relative to the PROF directory: the path's bytes, a NUL
    byte, the contents (as tests/reference/*/MANIFEST.txt state it)."""
    files = sorted(os.path.relpath(os.path.join(r, f), prof) for r, _, fs in os.walk(prof) for f in fs)
    h = hashlib.sha256()
    for rel in files:
        h.update(rel.encode() + b"\0")
        with open(os.path.join(prof, rel), "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def manifest_digest(manifest_text: str) -> str:
    """The `input sha256:` a MANIFEST.txt records ('' when it records none)."""
    found = re.search(r"input sha256: ([0-9a-f]{64})", manifest_text)
    return found.group(1) if found else ""
