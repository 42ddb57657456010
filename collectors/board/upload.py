"""Up to the board: the project folder (files keep their permission bits, less BOARD_UMASK) and the
SoC acl.json, written over SFTP into the run folder."""
from __future__ import annotations

import logging
import os
import posixpath
import stat

from msprof_kit.errors import UploadFailed

from ..acljson import dumps_acl_json, soc_profiler_config
from .config import BOARD_UMASK, JOB_PREFIX
from .ssh import Session

LOG = logging.getLogger(__name__)

def upload(session: Session, local_root: str, remote_root: str) -> None:
    """Copy the project folder to the board (files keep their permission bits)."""
    assert session.sftp is not None
    count = size = 0
    skip_output = os.path.commonpath([local_root, session.plan.output]) == local_root
    for base, dirnames, filenames in os.walk(local_root):
        rel = os.path.relpath(base, local_root)
        rdir = remote_root if rel == "." else posixpath.join(remote_root, *rel.split(os.sep))
        session.mkdir(rdir, _masked(stat.S_IMODE(os.stat(base).st_mode) | 0o700))
        keep = []
        for d in sorted(dirnames):
            full = os.path.join(base, d)
            if os.path.islink(full):
                session.diag.warn(f"{full}: a link to a folder, not uploaded")
            elif (skip_output and full == session.plan.output) or \
                    (base == session.plan.output and d.startswith(JOB_PREFIX)):
                LOG.debug("not uploading %s (the output folder, or a JOB collected before)", full)
            else:
                keep.append(d)
        dirnames[:] = keep
        for name in sorted(filenames):
            lp = os.path.join(base, name)
            rp = posixpath.join(rdir, name)
            if not os.path.isfile(lp):
                session.diag.warn(f"{lp}: not a regular file, not uploaded")
                continue
            try:
                attrs = session.sftp.put(lp, rp, confirm=True)
                session.sftp.chmod(rp, _masked(stat.S_IMODE(os.stat(lp).st_mode)))
            except session.errors as exc:
                raise UploadFailed(f"cannot upload {lp} to the board as {rp}: {session.reason(exc)}") from None
            count += 1
            size += attrs.st_size or 0
    LOG.info("uploaded %d files (%d bytes) to %s", count, size, remote_root)

def write_acl_json(session: Session, path: str, prof_dir: str) -> None:
    """Write the acl.json for this run to `path` on the board (creating its missing folders inside the run
    folder), its output set to `prof_dir`."""
    assert session.sftp is not None
    text = dumps_acl_json(soc_profiler_config(output=prof_dir, **session.plan.acl_fields))
    parent = posixpath.dirname(path)
    missing = []
    while parent != session.run_dir and not session.exists(parent):
        missing.append(parent)
        parent = posixpath.dirname(parent)
    for folder in reversed(missing):
        session.mkdir(folder)
    try:
        with session.sftp.open(path, "w") as f:
            f.write(text.encode("utf-8"))
        session.sftp.chmod(path, 0o640)
    except session.errors as exc:
        raise UploadFailed(f"cannot write {path} on the board: {session.reason(exc)}") from None
    LOG.info("wrote %s on the board", path)

def _masked(mode: int) -> int:
    """A permission mode with the bits BOARD_UMASK clears cleared."""
    return mode & ~int(BOARD_UMASK, 8)
