"""Who runs the CLI when a test needs file permissions to bite (a mode-000 file, a read-only
collection): the suite's own user when it is not root; as root, a throwaway user, or, when that
user cannot start this interpreter (one under /root, mode 0700), root without the capabilities
that let it read and write any file. Shared by tests/test_mutation.py and test_progress_store.py."""
from __future__ import annotations

import contextlib
import ctypes
import os
import pwd
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Tuple

import pytest

PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2


@dataclass
class RunAs:
    """Another user (uid, gid), or root without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH in its
    bounding set (`drop_dac`, dropped before the exec so the interpreter starts without them)."""

    uid: Optional[int] = None
    gid: Optional[int] = None
    drop_dac: bool = False

    def apply(self) -> None:
        """Become this user; call in a child between fork and exec (a preexec_fn)."""
        if self.drop_dac:
            libc = ctypes.CDLL(None, use_errno=True)
            for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
                if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
                    raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")
        if self.gid is not None:
            os.setgroups([])
            os.setgid(self.gid)
        if self.uid is not None:
            os.setuid(self.uid)


@contextlib.contextmanager
def bound_by_permissions(prefix: str, runs: Callable[[RunAs], Tuple[bool, str]]) -> Iterator[Optional[RunAs]]:
    """None when this process is not root (permissions already bind it); else a throwaway user
    named `prefix` + hex (removed afterwards) when `runs(who)` says it can run the CLI, else root
    without the DAC capabilities; the test is skipped when neither can. `runs` gives (ok, stderr)."""
    if os.geteuid() != 0:
        yield None
        return
    name = prefix + secrets.token_hex(4)
    made = None
    if shutil.which("useradd") and shutil.which("userdel"):
        made = subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                              capture_output=True)
    try:
        if made is not None and made.returncode == 0:
            entry = pwd.getpwnam(name)
            who = RunAs(entry.pw_uid, entry.pw_gid)
            try:
                usable = runs(who)[0]
            except OSError:  # cannot execute the interpreter (under /root, say)
                usable = False
            if usable:
                yield who
                return
        who = RunAs(drop_dac=True)
        ok, err = runs(who)
        if not ok:
            pytest.skip("running as root, and neither a throwaway user nor root without CAP_DAC_OVERRIDE can "
                        f"run the CLI: {err.strip()[-300:]}")
        yield who
    finally:
        if made is not None and made.returncode == 0:
            subprocess.run(["userdel", name], check=False, capture_output=True)
