"""`get_acl`, which finds the `acl` module to profile with: the real pyACL when it is importable,
else, only when asked, msprof-kit's emulator (collectors/emulator/), which announces itself.

pyACL ships only with CANN; it is not on PyPI or in Debian (spec/collectors.md §6). The codes,
bits and metric groups of pyACL are in collectors/acl_codes.py.
"""
from __future__ import annotations

import os
import warnings
from types import ModuleType
from typing import Any, Optional, Tuple

from msprof_kit.errors import Diagnostics, PyAclNotAvailable

from . import emulator

EMULATE_ENV = "MSPROF_KIT_EMULATE_ACL"


class EmulatedAclWarning(UserWarning):
    """Issued whenever the pyACL emulator is handed out instead of the real `acl` module."""


_EMULATED: Optional[Any] = None


def _wants_emulator(emulate: Optional[bool]) -> bool:
    if emulate is not None:
        return emulate
    return os.environ.get(EMULATE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _real_acl() -> Optional[ModuleType]:
    """The importable `acl` module, if any (pyACL is installed with CANN, not from PyPI)."""
    try:
        import acl  # type: ignore[import-not-found]  # pyACL comes with CANN: no package or stub to install
    except ImportError:
        return None
    return acl


def _is_pyacl(module: ModuleType) -> bool:
    """pyACL has the acl.prof namespace; PyPI's unrelated `acl` (access control lists) does not."""
    return not getattr(module, "__emulated__", False) and hasattr(getattr(module, "prof", None), "init")


def get_acl(emulate: Optional[bool] = None, diag: Optional[Diagnostics] = None) -> Tuple[Any, bool]:
    """(module, emulated): the real `acl` module when it is importable; otherwise, only when asked
    (`emulate=True`, or MSPROF_KIT_EMULATE_ACL=1 when `emulate` is None), the emulator from
    collectors/emulator/, announced by an EmulatedAclWarning and a Diagnostics line; otherwise
    PyAclNotAvailable. `emulate=False` never emulates.

    The emulator is one per process, as the real module is (its profiling state is process-wide);
    its profile, device count and execute time come from MSPROF_KIT_EMULATE_PROFILE,
    MSPROF_KIT_EMULATE_DEVICES and MSPROF_KIT_EMULATE_EXEC_MS (collectors/emulator/)."""
    global _EMULATED
    real = _real_acl()
    if real is not None and _is_pyacl(real):
        return real, False
    if not _wants_emulator(emulate):
        unrelated = (f" (the `acl` module at {getattr(real, '__file__', '?')} is another package, without "
                     "acl.prof)") if real is not None else ""
        raise PyAclNotAvailable(
            f"pyACL (the `acl` module of CANN) is not installed{unrelated}; install the CANN toolkit and source "
            f"its set_env.sh, or set {EMULATE_ENV}=1 to use msprof-kit's emulator (no real profiling)")
    if _EMULATED is None:
        _EMULATED = emulator.from_environment()
    message = emulator.ANNOUNCEMENT
    warnings.warn(message, EmulatedAclWarning, stacklevel=2)
    if diag is not None:
        diag.warn(message)
    return _EMULATED, True
