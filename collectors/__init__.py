"""Collectors: write acl.json and run a program (`local`), profile from Python through pyACL
(`session`), and the clearly labelled pyACL emulator used only when asked (`emulator`).
docs/collectors.md describes each, and what is emulated."""
from __future__ import annotations

from .acl_runtime import get_acl
from .acljson import (CANN_KEYS, SOC_KEYS, cann_profiler_config, dumps_acl_json, soc_profiler_config,
                      validate, write_acl_json)
from .local import collect_local
from .session import ProfilingSession

__all__ = [
    "CANN_KEYS", "SOC_KEYS", "ProfilingSession", "cann_profiler_config", "collect_local", "dumps_acl_json",
    "get_acl", "soc_profiler_config", "validate", "write_acl_json",
]
