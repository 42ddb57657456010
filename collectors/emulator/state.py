"""The emulator's records: its names and profiles, the process-wide profiling modes, the configs,
collections and subscriptions it tracks, and the State of one emulated `acl` module."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set, Tuple

from msprof_kit.layout import EMULATED_MARKER

from ..acl_codes import MAX_DEVICES

ANNOUNCEMENT = ("EMULATED pyACL: CANN's `acl` module is not installed, so msprof-kit's emulator stands in "
                "for it; nothing is profiled, and the PROF_xxx directories it writes are synthetic")
MARKER = EMULATED_MARKER  # one name, which import recognises (msprof_kit/layout.py)
EVENTS = "emulated_events.jsonl"
STRICT = "strict"
CURRENT = "current"
PROFILES = (STRICT, CURRENT)

# process-wide profiling modes of the collector (§1.4)
OFF, API_CTRL, CMD, SUBSCRIBE = "OFF", "API_CTRL", "CMD", "SUBSCRIBE"

# sample.json switch names (as in real collections) and the data-type bit each reflects
SAMPLE_SWITCHES = (("ascendcl", "acl_api"), ("runtime_api", "runtime_api"), ("task_trace", "task_time"),
                   ("ai_core_profiling", "aicore_metrics"), ("aicpu", "aicpu"), ("l2", "l2cache"),
                   ("hccl", "hccl_trace"), ("msproftx", "msproftx"), ("task_memory", "task_memory"))
HANDLE_BASE = 0x5A5A0000  # handles are non-zero ints, as pointer addresses are in pyACL
DEFAULT_EXEC_SECONDS = 0.005

Call = Tuple[str, Tuple[Any, ...], Any]


def monotonic_raw_ns() -> int:
    """The host's CLOCK_MONOTONIC_RAW in ns (CLOCK_MONOTONIC where it is missing), the clock CANN stamps host
    records with."""
    clock = getattr(time, "CLOCK_MONOTONIC_RAW", time.CLOCK_MONOTONIC)
    return time.clock_gettime_ns(clock)


@dataclass
class ProfConfig:
    """What acl.prof.create_config was given: device ids, AI Core metric group, data type bits."""

    devices: Tuple[int, ...]
    metrics: int
    data_types: int


@dataclass
class Collection:
    """One emulated PROF_xxx directory, open between start and stop."""

    path: str
    devices: Tuple[int, ...]
    data_types: int
    handle: int
    closed: bool = False


@dataclass
class Subscription:
    """A model subscription: its subscribe config handle."""

    config: int


@dataclass
class State:
    """Everything one emulated `acl` module tracks (acl.init, the profiling mode and collections,
    msproftx stamps, subscriptions, devices, contexts and models)."""

    acl: str = "uninit"                 # 'uninit' | 'init' | 'finalized'
    mode: str = OFF
    prof_path: Optional[str] = None
    prof_index: int = 0
    configs: Dict[int, ProfConfig] = field(default_factory=dict)
    started: Dict[int, Collection] = field(default_factory=dict)     # device id -> its collection
    collections: List[Collection] = field(default_factory=list)
    cmd_collection: Optional[Collection] = None
    stamps: Dict[int, str] = field(default_factory=dict)
    pushed: Dict[int, List[int]] = field(default_factory=dict)       # thread id -> stamp stack
    ranges: Dict[int, int] = field(default_factory=dict)             # range id -> stamp
    next_range: int = 1
    subscriptions: Dict[int, Subscription] = field(default_factory=dict)
    subscribe_configs: Set[int] = field(default_factory=set)
    devices_set: Dict[int, int] = field(default_factory=dict)        # device -> set_device count
    current_device: Optional[int] = None
    contexts: Dict[int, int] = field(default_factory=dict)           # context -> device
    models: Dict[int, str] = field(default_factory=dict)
    next_model: int = 1
    next_handle: int = 0


def started_keys(config: ProfConfig) -> Tuple[int, ...]:
    """The ids a config occupies while started: its devices; a device-less (msproftx-only) config
    occupies the host pseudo-device (MAX_DEVICES), which the runtime appends to every config. For
    configs with devices the host is not tracked [INFER], so disjoint device sets may run together."""
    return config.devices or (MAX_DEVICES,)
