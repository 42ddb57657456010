"""Back from the board: the JOB folders a run produced, found by listing (a name the board returns
becomes a local path, so only `JOB` + letters, digits and `_` is taken, and every listed name is
checked), copied over SFTP into a hidden partial folder, verified (file count and sizes), and
only then renamed into the output folder; or moved from this machine's NFS export."""
from __future__ import annotations

import logging
import os
import posixpath
import re
import shutil
import stat
import tempfile
from typing import Any, Dict, List, Sequence, Tuple, Type

from msprof_kit.errors import BoardConnectionError, CopyBackFailed

from .config import JOB_NAME, JOB_PREFIX
from .ssh import Session

LOG = logging.getLogger(__name__)

def job_dirs(session: Session, folder: str) -> List[str]:
    """The JOB folders in `folder` on the board. A name the board returns becomes a local path
    later: only `JOB` followed by letters, digits and `_` is taken; other JOB-like entries are
    named in a warning and left on the board."""
    assert session.sftp is not None
    try:
        entries = session.sftp.listdir_attr(folder)
    except FileNotFoundError:
        return []
    except UnicodeDecodeError:
        raise CopyBackFailed(f"the board listed a name that is not UTF-8 in {folder}; nothing was copied "
                             "from there") from None
    except session.errors as exc:
        raise BoardConnectionError(f"cannot list {folder} on {session.label}: {session.reason(exc)}") from None
    found = []
    for e in entries:
        name = e.filename
        if not name.startswith(JOB_PREFIX):
            continue
        if not JOB_NAME.match(name):
            session.diag.warn(f"{folder} on the board holds {name!r}, which is not a JOB folder name ('JOB' "
                              "followed by letters, digits and '_'): not copied")
        elif stat.S_ISDIR(e.st_mode or 0):
            found.append(name)
    return sorted(found)

def missing_parts(session: Session, job: str) -> str:
    """What a JOB directory lacks of `data/` and `info.json.N` ('' when complete)."""
    assert session.sftp is not None
    entries = {e.filename: e for e in _listing(session, job)}
    lacks = []
    if "data" not in entries or not stat.S_ISDIR(entries["data"].st_mode or 0):
        lacks.append("data/")
    if not any(re.fullmatch(r"info\.json\.\d+", n) for n in entries):
        lacks.append("info.json.N")
    return " and ".join(lacks)

def _listing(session: Session, folder: str) -> List[Any]:
    """listdir_attr of `folder` on the board, every name checked: a name that is not UTF-8, is
    empty, `.` or `..`, or holds `/` or NUL would take a local path out of the copy, so it fails
    the copy-back (CopyBackFailed) before anything is written."""
    assert session.sftp is not None
    try:
        entries = session.sftp.listdir_attr(folder)
    except UnicodeDecodeError:
        raise CopyBackFailed(f"copying {folder} back failed: the board listed a name that is not UTF-8 "
                             "there") from None
    except session.errors as exc:
        raise CopyBackFailed(f"copying {folder} back failed: cannot list it on {session.label}: "
                             f"{session.reason(exc)}") from None
    for e in entries:
        name = e.filename
        if name in ("", ".", "..") or "/" in name or "\0" in name:
            raise CopyBackFailed(f"copying {folder} back failed: the board listed the entry {name!r}, which "
                                 "is not a plain file or folder name; nothing was copied")
    return sorted(entries, key=lambda e: e.filename)

def _remote_tree(session: Session, root: str) -> Tuple[List[str], List[Tuple[str, int]]]:
    """Folders and (file, size) pairs below root, relative to it."""
    dirs: List[str] = []
    files: List[Tuple[str, int]] = []
    todo = [""]
    while todo:
        rel = todo.pop()
        for e in _listing(session, posixpath.join(root, rel) if rel else root):
            sub = posixpath.join(rel, e.filename) if rel else e.filename
            mode = e.st_mode or 0
            if stat.S_ISDIR(mode):
                dirs.append(sub)
                todo.append(sub)
            elif stat.S_ISREG(mode):
                files.append((sub, e.st_size or 0))
            else:
                session.diag.warn(f"{posixpath.join(root, sub)} on the board is not a regular file, not copied")
    return dirs, files

def bring_back(session: Session, folder: str, name: str, prof_dir: str) -> str:
    """The JOB `folder/name` into the output folder, under a name not used there yet."""
    out = session.plan.output
    if session.mounted and folder == prof_dir and session.plan.nfs is not None:
        export_dir = session.plan.nfs[1]
        here = os.path.join(export_dir, name)
        if os.path.isdir(here):  # this machine serves the NFS export: the data is already here
            if os.path.realpath(export_dir) == os.path.realpath(out):
                return here
            return _move_local(here, out, name)
    return _copy_job(session, posixpath.join(folder, name), out, name)

def _copy_job(session: Session, remote: str, out: str, name: str) -> str:
    assert session.sftp is not None
    if not JOB_NAME.match(name):  # _job_dirs let only such names through; checked again where it matters
        raise CopyBackFailed(f"the board's JOB folder {name!r} is not a JOB folder name; nothing was copied")
    copy_errors: Tuple[Type[BaseException], ...] = (UnicodeDecodeError,) + session.errors
    partial = tempfile.mkdtemp(prefix=f".{name}.partial-", dir=out)
    try:
        try:
            dirs, files = _remote_tree(session, remote)
            for d in dirs:
                os.makedirs(_inside(partial, d, remote), exist_ok=True)
            for rel, size in files:
                local = _inside(partial, rel, remote)
                session.sftp.get(posixpath.join(remote, rel), local)
                got = os.path.getsize(local)
                if got != size:
                    raise CopyBackFailed(f"copying {remote} back failed: {rel} has {got} bytes here, "
                                         f"{size} on the board; the partial copy was removed")
            _verify_tree(partial, files, f"copying {remote} back failed")
        except copy_errors as exc:
            raise CopyBackFailed(f"copying {remote} back failed: {session.reason(exc)}; the partial copy was "
                                 "removed") from None
        final = _claim(out, name)
        os.rename(partial, final)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    LOG.info("copied %s (%d files) to %s", remote, len(files), final)
    return final

def _inside(root: str, rel: str, remote: str) -> str:
    """The local path of the board's `rel` ('/'-separated) below `root`, checked to stay inside it
    once resolved (links included)."""
    local = os.path.join(root, *rel.split("/"))
    real_root = os.path.realpath(root)
    if os.path.commonpath([real_root, os.path.realpath(local)]) != real_root:
        raise CopyBackFailed(f"copying {remote} back failed: its entry {rel!r} would be written outside the copy; "
                             "nothing was kept")
    return local

def _claim(out: str, name: str) -> str:
    """An empty folder `out/name`, or `out/name_1`, `_2`, ... when taken: claimed by creating it, so
    two runs never write into one JOB folder (a folder renamed onto it replaces it)."""
    k = 0
    while True:
        final = os.path.join(out, name if k == 0 else f"{name}_{k}")
        try:
            os.mkdir(final)
            return final
        except FileExistsError:
            k += 1

def _verify_tree(root: str, files: Sequence[Tuple[str, int]], what: str) -> None:
    """Raise CopyBackFailed unless `root` holds exactly `files` with their sizes."""
    have: Dict[str, int] = {}
    for base, _, names in os.walk(root):
        for n in names:
            p = os.path.join(base, n)
            have[os.path.relpath(p, root).replace(os.sep, "/")] = os.path.getsize(p)
    want = dict(files)
    if have != want:
        missing = sorted(set(want) - set(have))
        wrong = sorted(k for k in set(want) & set(have) if want[k] != have[k])
        raise CopyBackFailed(f"{what}: {len(have)} of {len(want)} files arrived"
                             + (f", missing {missing[0]}" if missing else "")
                             + (f", {wrong[0]} has the wrong size" if wrong else "")
                             + "; the partial copy was removed")

def _move_local(src: str, out: str, name: str) -> str:
    """Move the JOB `src` (on this machine's NFS export) into `out`, checked like a copy."""
    files = []
    for base, _, names in os.walk(src):
        for n in names:
            p = os.path.join(base, n)
            files.append((os.path.relpath(p, src).replace(os.sep, "/"), os.path.getsize(p)))
    partial = tempfile.mkdtemp(prefix=f".{name}.partial-", dir=out)
    try:
        shutil.copytree(src, partial, dirs_exist_ok=True)
        _verify_tree(partial, files, f"moving {src} failed")
        final = _claim(out, name)
        os.rename(partial, final)
    except OSError as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise CopyBackFailed(f"moving {src} into {out} failed: {exc.strerror or exc}; the partial copy was "
                             "removed") from None
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    shutil.rmtree(src)
    LOG.info("moved %s to %s", src, final)
    return final
