"""EMULATION: a stand-in for pyACL's `acl` module, for machines without CANN (spec/collectors.md §7.1).

Nothing here profiles anything. It exists so that the pyACL collector (collectors/session.py), and
later an inference runner, can be run and tested where no Ascend runtime exists, and so that the
documented call-order rules are checked the way the runtime checks them. It is handed out only
when asked for (collectors/acl_runtime.get_acl), it says so (`__emulated__ = True`, an
EmulatedAclWarning, and an EMULATED marker file in every directory it writes), and it is never
installed or importable as `acl`.

What it models, with the source of each rule:
* `acl.init` / `acl.finalize` (§1.4, §2.2): repeat codes 100002 / 100037; acl.json read per §2.1 and
  §2.2 (100003 missing file, 100006 bad JSON, 100000 an invalid profiler section, checked with
  collectors/acljson.py); a switch "on" puts profiling in CMD mode.
* `acl.prof.*` (§1.1, §1.4): the process-wide mode OFF / API_CTRL / CMD / SUBSCRIBE, the config
  handle registry, the data-type bit checks, the per-device start/stop bookkeeping and the codes of
  the table in §1.4. Two profiles:
    - "strict" (the default) is version A of the collector (2022), which matches the documentation;
    - "current" is version C (2026) where it differs: start without init initialises itself (path
      $ACL_PROF_PATH or ./), stop and finalize without init return 0, start(0) uses a default
      config (device 0, ACL_API|TASK_TIME), prof.init only checks the path (the directory is made
      at start), and prof.init before acl.init is allowed. C's consistency check of a second start
      against the first config is not modelled (overlaps get 100042 as in strict).
* msproftx (§1.1, §1.4 rule 9): stamps work only between start and stop of a config with the
  MSPROFTX bit; otherwise create_stamp gives 0 and the other calls -1; push/pop pair per thread,
  range_start returns (range_id, ret).
* `acl.rt` and `acl.mdl`: the few calls an inference runner needs, as EMULATION ONLY (set_device,
  reset_device, get_device_count, create_context, destroy_context; load_from_file, execute, which
  sleeps `exec_seconds`, unload). Their codes beyond "not initialised" and "unknown model id" are
  this module's choice.

Choices where no source says what happens, labelled [INFER] in docs/collectors.md:
* strict prof.init before acl.init returns 100001 (ACL_ERROR_UNINITIALIZE); acl.finalize without
  acl.init returns 100001 too;
* an unknown or destroyed config handle counts as an invalid parameter (100000) in every call;
* an AI Core metrics value outside the enum is refused at start with 100000;
* prof.finalize (or acl.finalize) with configs still started closes their collections, as the
  runtime flushes every module at finalize;
* set_stamp_trace_message needs 0 < msg_len <= the message's UTF-8 length (100000 otherwise);
  pop on an empty stack and range_stop of an unknown id return -1;
* the host pseudo-device is not tracked, so two starts on disjoint devices may run together.

What it writes, per successful start, under the prof.init path (§1.5): a directory
`PROF_<6-digit index>_<YYYYmmddHHMMSSfff>_<8-digit pid><8 letters A-R>` holding `host/` and
`device_<id>/` for each started device, each with an empty `data/`, `info.json[.id]`,
`sample.json` (the effective switches), `start_info[.id]` and, at stop, `end_info[.id]`; at its
root `EMULATED_BY_MSPROF_KIT.txt`. Events (msproftx marks, pushes, ranges, model executions) go
to the emulator's own `host/data/emulated_events.jsonl`, one JSON object per line with
`kind`, `ts_ns` (CLOCK_MONOTONIC_RAW), `tid` and the call's fields. No binary raw data is
written: nothing in these trees pretends to be real device data.

Test knobs: `calls` records every call as (name, args, result); `inject(name, result)` makes the
next call of that name return `result` without touching any state.

The modules: `state` (names, profiles, modes and the records of one emulated module), `tree` (the
synthetic PROF tree it writes), `msproftx` (the stamp calls) and `acl` (EmulatedAcl, its
namespaces, and the emulator the environment configures). This file re-exports what other
modules and the tests use.
"""
from __future__ import annotations

from .acl import EmulatedAcl, EmulatedMdl, EmulatedProf, EmulatedRt, from_environment
from .state import (ANNOUNCEMENT, CURRENT, DEFAULT_EXEC_SECONDS, EVENTS, MARKER, PROFILES, STRICT, Collection,
                    ProfConfig, Subscription)

__all__ = ["ANNOUNCEMENT", "CURRENT", "DEFAULT_EXEC_SECONDS", "EVENTS", "MARKER", "PROFILES", "STRICT", "Collection",
           "EmulatedAcl", "EmulatedMdl", "EmulatedProf", "EmulatedRt", "ProfConfig", "Subscription",
           "from_environment"]
