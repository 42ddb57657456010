"""Opening raw and control files safely: only regular files are read.

A FIFO would block the import and /dev/zero never ends, so every file of a collection is opened
through `open_regular`, which refuses anything but a regular file (NotRegularFile, an OSError
naming what the path is). Used by layout (control files) and the ingest (raw slices).
`read_json_object` reads a small JSON file that must hold an object (exported outputs)."""
from __future__ import annotations

import errno
import io
import json
import os
import stat
from typing import Any, Dict

from .errors import UnreadableFile


class NotRegularFile(OSError):
    """A path that names something other than a regular file (after symlinks): `what` it is."""

    def __init__(self, path: str, what: str) -> None:
        super().__init__(errno.EINVAL, f"{what}, not a regular file", path)
        self.what = what


def file_kind(mode: int) -> str:
    """What a stat mode names, as an article and a noun ('a FIFO', 'a directory')."""
    for test, what in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return "not a file"


def open_regular(path: str) -> io.BufferedReader:
    """`path` opened for reading when it is a regular file (symlinks followed); else NotRegularFile.
    The open does not block (O_NONBLOCK: a FIFO without a writer would), and the check is made on
    what was opened (fstat), so a file swapped after a listing cannot slip through."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(path, file_kind(mode))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_json_object(path: str) -> Dict[str, Any]:
    """The JSON object in the file at `path`; UnreadableFile (one line naming the file) when it
    cannot be read, is not JSON or holds something else than an object. FileNotFoundError passes."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError) as e:
        raise UnreadableFile(f"cannot read: {e}", path=path) from None
    except ValueError as e:
        raise UnreadableFile(f"not JSON: {e}", path=path) from None
    if not isinstance(data, dict):
        raise UnreadableFile(f"expected a JSON object, found {type(data).__name__}", path=path)
    return data
