"""Where a collection's store lives, and whether the one there can be read.

The store lives at `PROF_xxx/sqlite/msprof_kit.db` (a folder the reference analysis skips), or,
when the collection cannot be written or MSPROF_KIT_STORE (`--store`) names a folder, in a folder
standing for the collection elsewhere (`stand_in`). A store carries its format version; one that is
damaged, foreign or of another version is not read (`store_problem`). Writers that were killed
leave temporary files behind (`remove_leftovers` clears them)."""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import sqlite3
import urllib.parse
from typing import List, Optional

STORE_DIR = "sqlite"
STORE_NAME = "msprof_kit.db"
STORE_ENV = "MSPROF_KIT_STORE"  # a folder for the stores (one sub-folder per collection); --store sets it
CACHE_NAME = "msprof-kit"  # the per-user cache folder's name, in $XDG_CACHE_HOME or ~/.cache
STORE_VERSION = 5  # PRAGMA user_version of the stores this msprof-kit writes and reads (5: memory, AI CPU, real
# AI Core frequency, memcpy and msproftx tables; 4: KIT_HCCL_TASK.bandwidth in GB/s; 3: HCCL tables; 2: per-group PMU
# columns, KIT_TASK_PMU_PY, KIT_TASK.infoNs, names by task id in legacy JOBs; a store of another version is
# imported again)
APPLICATION_ID = 0x4D534B54  # PRAGMA application_id of a store ("MSKT")
NO_STORE = "there is no store"
SQLITE_MAGIC = b"SQLite format 3\x00"
# what a process leaves while it writes: `.<db>.tmp-PID` (and its `.parts` folder), `.scratch-PID-*`
LEFTOVER = re.compile(r"\.(?:msprof_kit|msprof_\d{14})\.db\.tmp-(\d+)(?:\.parts)?|\.scratch-(\d+)-.+")


def file_uri(path: str) -> str:
    """A `file:` URI for a path, whatever characters it holds (bytes that are not UTF-8 included:
    they are percent-encoded as the bytes the file system has)."""
    return "file:" + urllib.parse.quote(os.fsencode(os.path.abspath(path)))


def can_write(folder: str) -> bool:
    """Whether this process may create files in `folder`, or, when it does not exist yet, in the
    nearest folder above it that does (permissions, read-only mounts)."""
    folder = os.path.abspath(folder)
    while not os.path.isdir(folder):
        parent = os.path.dirname(folder)
        if parent == folder:
            return False
        folder = parent
    if os.access in os.supports_effective_ids:
        return os.access(folder, os.W_OK | os.X_OK, effective_ids=True)
    return os.access(folder, os.W_OK | os.X_OK)


def cache_root() -> str:
    """The per-user cache folder of msprof-kit: $XDG_CACHE_HOME/msprof-kit, else ~/.cache/msprof-kit."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # unset, empty or relative: the XDG default
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, CACHE_NAME)


def stand_in(collection_path: str) -> str:
    """The folder standing for a collection outside it: `<root>/<name>-<hash>`, where root is
    MSPROF_KIT_STORE (--store) or the per-user cache folder, name the collection folder's name
    (characters other than letters, digits, '.', '_' and '-' as '_') and hash the first 12 hex
    digits of the SHA-256 of its real path (two collections of one name stay apart). It is laid
    out as the collection: `sqlite/msprof_kit.db`, `mindstudio_profiler_output/`, `msprof_{ts}.db`."""
    real = os.path.realpath(collection_path)
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:12]
    name = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(real))[:80] or "root"
    root = os.environ.get(STORE_ENV) or cache_root()
    return os.path.join(os.path.abspath(os.path.expanduser(root)), f"{name}-{digest}")


def own_store_path(collection_path: str) -> str:
    """Where the store goes inside the collection: PROF_xxx/sqlite/msprof_kit.db."""
    return os.path.join(collection_path, STORE_DIR, STORE_NAME)


def store_path(collection_path: str, writing: bool = False) -> str:
    """Where the store of a collection is, or goes when `writing`: with MSPROF_KIT_STORE (--store)
    in its stand-in folder; else in the collection (sqlite/msprof_kit.db) when that can be written;
    else in its stand-in folder in the cache, except that a reader is given a usable store the
    collection already holds (imported by someone who could write it) when the cache has none."""
    kept = os.path.join(stand_in(collection_path), STORE_DIR, STORE_NAME)
    if os.environ.get(STORE_ENV):
        return kept
    own = own_store_path(collection_path)
    if can_write(os.path.dirname(own)):
        return own
    if not writing and _problem_at(kept) is not None and _problem_at(own) is None:
        return own
    return kept


def output_root(collection_path: str) -> str:
    """Where the exports of a collection go: the collection itself, or, when it cannot be written,
    its stand-in folder (mindstudio_profiler_output/ and msprof_{ts}.db there)."""
    return collection_path if can_write(collection_path) else stand_in(collection_path)


def elsewhere_note(collection_path: str, exports: bool = False) -> Optional[str]:
    """The one-line note for a collection that cannot be written: where its store is kept (unless
    --store chose it) and, with `exports`, where its exports go; None when it can be written."""
    if can_write(collection_path) and can_write(os.path.dirname(own_store_path(collection_path))):
        return None
    said = []
    where = store_path(collection_path)
    if not os.environ.get(STORE_ENV) and where != own_store_path(collection_path):
        said.append(f"its store is kept in {os.path.dirname(where)}")
    if exports and not can_write(collection_path):
        said.append(f"its exports go to {output_root(collection_path)}")
    return f"{collection_path} cannot be written; {' and '.join(said)}" if said else None


def store_problem(collection_path: str) -> Optional[str]:
    """Why the store of a collection cannot be read (NO_STORE when there is none), or None when it
    can: not a file, empty, not an sqlite database, truncated, not msprof-kit's, another format
    version, or a table missing from its table list (KIT_TABLES). Reads the 100-byte header and
    the table names, nothing more."""
    return _problem_at(store_path(collection_path))


def _problem_at(path: str) -> Optional[str]:
    if not os.path.lexists(path):
        return NO_STORE
    if not os.path.isfile(path):
        return "is not a file"
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(100)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if size == 0:
        return "is empty"
    if len(head) < 100 or not head.startswith(SQLITE_MAGIC):
        return "is not an sqlite database"
    page = int.from_bytes(head[16:18], "big")
    pages_ = int.from_bytes(head[28:32], "big")
    whole = (65536 if page == 1 else page) * pages_
    if head[24:28] == head[92:96] and size < whole:  # a valid page count (sqlite file format 1.3)
        return f"is truncated ({size} of {whole} bytes)"
    if int.from_bytes(head[68:72], "big") != APPLICATION_ID:
        return "carries no msprof-kit store format (another program's database, or an older msprof-kit's store)"
    version = int.from_bytes(head[60:64], "big")
    if version != STORE_VERSION:
        return f"has store format version {version}, this msprof-kit reads version {STORE_VERSION}"
    try:
        conn = sqlite3.connect(file_uri(path) + "?mode=ro", uri=True)
        try:
            present = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            listed = [r[0] for r in conn.execute("SELECT name FROM KIT_TABLES")] if "KIT_TABLES" in present else None
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return f"cannot be read ({exc})"
    if listed is None:
        return "lacks its table list (KIT_TABLES)"
    missing = [t for t in listed if t not in present]
    if missing:
        return f"lacks table {', '.join(missing)}"
    return None


def _running(pid: int) -> bool:
    """Whether process `pid` runs on this machine (a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):  # no /proc
        return True


def remove_leftovers(collection_path: str) -> List[str]:
    """Remove what writers that are no longer running left (killed): temporary stores and unified
    DBs (`.msprof_kit.db.tmp-PID`, `.msprof_{ts}.db.tmp-PID`, with their `.parts` folders) and
    scratch folders (`.scratch-PID-*`). Leftovers of running processes are kept. Returns what went."""
    gone = []
    for folder in (os.path.dirname(store_path(collection_path, writing=True)), output_root(collection_path)):
        if not can_write(folder):  # nothing of ours can be there (someone else's collection)
            continue
        try:
            names = os.listdir(folder)
        except (FileNotFoundError, NotADirectoryError):
            continue
        for name in names:
            m = LEFTOVER.fullmatch(name)
            if not m or _running(int(m.group(1) or m.group(2))):
                continue
            path = os.path.join(folder, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.remove(path)
            gone.append(path)
    return gone


def partial_path(path: str, pid: int) -> str:
    """Where process `pid` writes the database `path` before putting it in place."""
    return os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.tmp-{pid}")


def db_path(collection_path: str, stamp: str) -> str:
    """The unified DB export `msprof_{stamp}.db` at the collection root."""
    return os.path.join(collection_path, f"msprof_{stamp}.db")


