"""The board's clean-up, run whatever happened (errors, Ctrl-C, SIGTERM, SIGHUP): the profiling
folder unmounted when it was mounted, then the run folder removed (never through a mount)."""
from __future__ import annotations

import logging
import posixpath
import shlex

from msprof_kit.errors import MsprofKitError

from .config import PROFILING_DIR, Runner
from .ssh import Session

LOG = logging.getLogger(__name__)

def clean_up(session: Session, runner: Runner) -> None:
    """Remove from the board everything this run created; problems become warnings (they must
    not hide the error that may be on its way)."""
    keep_mount = False
    if session.mounted and session.run_dir is not None:
        prof_dir = posixpath.join(session.run_dir, PROFILING_DIR)
        try:
            status, message = runner(["umount", prof_dir])
        except MsprofKitError as exc:
            status, message = -1, str(exc)
        if status == 0:
            session.mounted = False
        else:
            keep_mount = True
            session.diag.warn(f"umount {prof_dir} on the board failed (exit status {status}: "
                              f"{session.clean(message)}); the mounted folder and {session.run_dir} were left there")
    if session.run_dir is None:
        return
    targets = [session.run_dir]
    if keep_mount:  # never delete through a mount: that would delete the server's files
        try:
            names = session.sftp.listdir(session.run_dir) if session.sftp is not None else []
        except session.errors as exc:
            session.diag.warn(f"could not list {session.run_dir} on the board to clean it up: {session.reason(exc)}")
            return
        targets = [posixpath.join(session.run_dir, n) for n in names if n != PROFILING_DIR]
        if not targets:
            return
    removed = session.quiet("rm -rf -- " + " ".join(shlex.quote(t) for t in targets))
    if removed != 0:
        session.diag.warn(f"could not remove {session.run_dir} from the board "
                          f"({'connection lost' if removed is None else f'rm exit status {removed}'})")
    else:
        LOG.info("removed %s from the board", session.run_dir)
