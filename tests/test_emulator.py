"""The pyACL emulator (collectors/emulator/) and get_acl (collectors/acl_runtime.py).

Two layers of checks:
* RULES: one row per documented rule of spec/collectors.md §1.4 (and §2.2 for acl.init), with
  the code each profile returns, run as small scenarios;
* random call sequences (seeded; hypothesis is not installed in this venv) checked call by call
  against `Reference`, a small independent model of the same table, for both profiles.
Then what the emulator writes (§1.5) and get_acl.

Why one file of ~630 lines: every section drives the same emulator through the same few helpers
(`fresh`, `acl_json`, the data-type shorthands), and the rules table and the random sequences
check one table from two sides; splitting it would move those helpers into a module of their own
to save some 30 lines, and put the two halves of the table's check in different files.
"""
from __future__ import annotations

import json
import os
import random
import re
import sys
import threading
import types
import time
import warnings

import pytest

from msprof_kit.collectors import acl_runtime, emulator
from msprof_kit.collectors.acl_codes import (ACL_PROF_ACL_API, ACL_PROF_AICORE_METRICS, ACL_PROF_MSPROFTX,
                                             ACL_PROF_TASK_TIME)
from msprof_kit.collectors.acl_runtime import EmulatedAclWarning, get_acl
from msprof_kit.collectors.emulator import CURRENT, STRICT, EmulatedAcl
from msprof_kit.errors import BadOption, Diagnostics, PyAclNotAvailable

API = ACL_PROF_ACL_API
TASK = ACL_PROF_TASK_TIME
TX = ACL_PROF_MSPROFTX
UNKNOWN_BIT = 1 << 40
PROF_RE = re.compile(r"PROF_(\d{6})_(\d{17})_(\d{8})([A-R]{8})")


def fresh(tmp_path, profile=STRICT, devices=2, init=True, **kw) -> EmulatedAcl:
    acl = EmulatedAcl(profile=profile, device_count=devices, exec_seconds=0.001, **kw)
    if init:
        assert acl.init("") == 0
    return acl


# ---------------------------------------------------------------------------------------------
# The documented rules, one scenario each: (rule, profile, steps). Each step is (call, args,
# expected return); a handle argument "$n" is the result of step n.

def acl_json(tmp_path, section) -> str:
    path = tmp_path / f"acl_{len(list(tmp_path.glob('acl_*.json')))}.json"
    path.write_text(json.dumps({"profiler": section}))
    return str(path)


def rules(tmp_path):
    out = str(tmp_path / "out")
    on = acl_json(tmp_path, {"switch": "on", "output": str(tmp_path / "cmd")})
    both = [STRICT, CURRENT]
    rows = [
        # rule 1 / §8: prof.init before acl.init (strict: a labelled choice)
        ("prof.init before acl.init", STRICT, False, [("prof.init", (out,), 100001)]),
        ("prof.init before acl.init", CURRENT, False, [("prof.init", (out,), 0)]),
        # rule 2: acl.json switch on -> CMD mode
        *[("acl.json on, then prof.*", p, False, [("init", (on,), 0), ("prof.init", (out,), 100042),
                                                  ("prof.finalize", (), 100042)]) for p in both],
        # rule 3: start/stop/finalize without prof.init
        ("start without init", STRICT, True, [("prof.create_config", ([0], 0xFF, 0, API), "handle"),
                                              ("prof.start", ("$0",), 100043), ("prof.stop", ("$0",), 100043),
                                              ("prof.finalize", (), 100043)]),
        ("start without init", CURRENT, True, [("prof.create_config", ([0], 0xFF, 0, API), "handle"),
                                               ("prof.stop", ("$0",), 0), ("prof.finalize", (), 0),
                                               ("prof.start", ("$0",), 0), ("prof.stop", ("$0",), 0)]),
        # rule 5: a device already started
        *[("overlapping start", p, True, [("prof.init", (out,), 0),
                                          ("prof.create_config", ([0, 1], 0xFF, 0, API), "handle"),
                                          ("prof.create_config", ([1], 0xFF, 0, API), "handle"),
                                          ("prof.start", ("$1",), 0), ("prof.start", ("$2",), 100042),
                                          ("prof.start", ("$1",), 100042)]) for p in both],
        # rule 6: init twice
        *[("prof.init twice", p, True, [("prof.init", (out,), 0), ("prof.init", (out,), 100002)]) for p in both],
        # rule 7: stop with another config (A compares the data types) / a device not started
        *[("stop with another config", p, True, [("prof.init", (out,), 0),
                                                 ("prof.create_config", ([0], 0xFF, 0, API), "handle"),
                                                 ("prof.create_config", ([0], 0xFF, 0, API | TASK), "handle"),
                                                 ("prof.create_config", ([1], 0xFF, 0, API), "handle"),
                                                 ("prof.start", ("$1",), 0), ("prof.stop", ("$2",), 100010),
                                                 ("prof.stop", ("$3",), 100043), ("prof.stop", ("$1",), 0)])
          for p in both],
        # documented multi-model sequence: start(0,1) .. stop .. start(1) .. stop
        *[("several models", p, True, [("prof.init", (out,), 0),
                                       ("prof.create_config", ([0, 1], 0xFF, 0, API), "handle"),
                                       ("prof.start", ("$1",), 0), ("prof.stop", ("$1",), 0),
                                       ("prof.create_config", ([1], 0xFF, 0, API | TASK), "handle"),
                                       ("prof.start", ("$4",), 0), ("prof.stop", ("$4",), 0),
                                       ("prof.destroy_config", ("$1",), 0), ("prof.destroy_config", ("$4",), 0),
                                       ("prof.finalize", (), 0), ("finalize", (), 0)]) for p in both],
        # create_config refusals (NULL -> 0)
        *[("create_config refusals", p, True, [("prof.create_config", ([0, 0], 0xFF, 0, API), 0),
                                               ("prof.create_config", ([2], 0xFF, 0, API), 0),
                                               ("prof.create_config", ([0, 1, 2], 0xFF, 0, API), 0),
                                               ("prof.create_config", ([], 0xFF, 0, API), 0),
                                               ("prof.create_config", ([0], 0xFF, 1, API), 0),
                                               ("prof.create_config", ([], 0xFF, 0, TX), "handle")]) for p in both],
        # data type bits; a NULL config
        *[("bit checks", p, True, [("prof.init", (out,), 0),
                                   ("prof.create_config", ([0], 0xFF, 0, 0), "handle"),
                                   ("prof.create_config", ([0], 0xFF, 0, API | UNKNOWN_BIT), "handle"),
                                   ("prof.start", ("$1",), 100000), ("prof.start", ("$2",), 200007)]) for p in both],
        ("start(NULL)", STRICT, True, [("prof.init", (out,), 0), ("prof.start", (0,), 100000)]),
        ("start(NULL)", CURRENT, True, [("prof.init", (out,), 0), ("prof.start", (0,), 0)]),
        *[("destroy_config(NULL or twice)", p, True, [("prof.destroy_config", (0,), 100000),
                                                      ("prof.create_config", ([0], 0xFF, 0, API), "handle"),
                                                      ("prof.destroy_config", ("$1",), 0),
                                                      ("prof.destroy_config", ("$1",), 100000)]) for p in both],
        # prof.init path checks
        *[("prof.init path", p, True, [("prof.init", ("",), 100000), ("prof.init", (str(tmp_path / "a;b"),), 100003),
                                       ("prof.init", ("/" + "x" * 4096,), 100000), ("prof.init", (out,), 0)])
          for p in both],
        # acl.init / acl.finalize repeats (§1.4 last rows) and acl.json problems (§2.2)
        *[("acl.init/finalize repeats", p, False, [("init", ("",), 0), ("init", ("",), 100002),
                                                   ("finalize", (), 0), ("finalize", (), 100037)]) for p in both],
        *[("acl.json problems", p, False, [("init", (str(tmp_path / "missing.json"),), 100003),
                                           ("init", (str(tmp_path / "bad.json"),), 100006),
                                           ("init", (acl_json(tmp_path, {"switch": "off", "x": "1"}),), 100000)])
          for p in both],
        # offline device
        *[("offline device", p, True, [("prof.init", (out,), 0),
                                       ("prof.create_config", ([1], 0xFF, 0, API), "handle"),
                                       ("prof.start", ("$1",), 200002)]) for p in both],
    ]
    (tmp_path / "bad.json").write_text("{not json")
    return rows


def resolve(acl, name):
    target = acl
    for part in name.split("."):
        target = getattr(target, part)
    return target


def test_documented_rules(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the current profile's auto-init writes into ./
    for rule, profile, init, steps in rules(tmp_path):
        acl = fresh(tmp_path, profile=profile, init=init, offline_devices=[1] if rule == "offline device" else ())
        results = []
        for call, args, expected in steps:
            args = tuple(results[int(a[1:])] if isinstance(a, str) and a.startswith("$") else a for a in args)
            got = resolve(acl, call)(*args)
            results.append(got)
            if expected == "handle":
                assert isinstance(got, int) and got != 0, (rule, profile, call)
            else:
                assert got == expected, (rule, profile, call, args, got)


# ---------------------------------------------------------------------------------------------
# Random sequences against an independent reference model


class Reference:
    """§1.4 as a model: which code each call returns, given the state. `profile` picks A or C."""

    def __init__(self, profile, devices=2):
        self.profile = profile
        self.devices = devices
        self.acl = "uninit"
        self.mode = "OFF"
        self.configs = {}      # handle -> (devices, bits)
        self.started = {}      # device (or 'host') -> bits
        self.stamps = set()
        self.pushed = 0
        self.ranges = set()

    def tx(self):
        return any(bits & TX for bits in self.started.values())

    def keys(self, devs):
        return list(devs) or ["host"]

    def call(self, op, arg):
        strict = self.profile == STRICT
        if op == "init":
            if self.acl == "init":
                return 100002
            self.acl = "init"
            return 0
        if op == "finalize":
            if self.acl != "init":
                return 100037 if self.acl == "finalized" else 100001
            self.acl, self.mode = "finalized", "OFF"
            self.started.clear()
            self.pushed, self.ranges = 0, set()
            return 0
        if op == "prof.init":
            if not arg:
                return 100000
            if self.mode == "API":
                return 100002
            if strict and self.acl != "init":
                return 100001
            if ";" in arg:
                return 100003
            self.mode = "API"
            return 0
        if op == "create_config":
            devs, bits = arg
            if len(set(devs)) != len(devs) or any(d >= self.devices for d in devs) or (not devs and not bits & TX):
                return "NULL"
            return "HANDLE"
        if op == "destroy_config":
            if arg not in self.configs:
                return 100000
            del self.configs[arg]
            return 0
        if op in ("start", "stop", "prof.finalize"):
            if self.mode == "OFF":
                if strict:
                    return 100043
                if op != "start":
                    return 0
                self.mode = "API"
        if op == "start":
            if arg not in self.configs:
                return 100000 if strict or arg != 0 else self._start(((0,), API | TASK))
            return self._start(self.configs[arg])
        if op == "stop":
            if arg not in self.configs:
                return 100000
            devs, bits = self.configs[arg]
            keys = self.keys(devs)
            if any(k not in self.started for k in keys):
                return 100043
            if any(self.started[k] != bits for k in keys):
                return 100010
            for k in keys:
                del self.started[k]
            if not self.tx():
                self.pushed, self.ranges = 0, set()
            return 0
        if op == "prof.finalize":
            self.mode = "OFF"
            self.started.clear()
            self.pushed, self.ranges = 0, set()
            return 0
        if op == "create_stamp":
            return "HANDLE" if self.tx() else "NULL"
        if op == "mark":
            return 0 if self.tx() and arg in self.stamps else -1
        if op == "push":
            if self.tx() and arg in self.stamps:
                self.pushed += 1
                return 0
            return -1
        if op == "pop":
            if self.tx() and self.pushed:
                self.pushed -= 1
                return 0
            return -1
        if op == "range_start":
            return "RANGE" if self.tx() and arg in self.stamps else -1
        if op == "range_stop":
            if self.tx() and arg in self.ranges:
                self.ranges.discard(arg)
                return 0
            return -1
        raise AssertionError(op)

    def _start(self, config):
        devs, bits = config
        if bits == 0:
            return 100000
        if bits & UNKNOWN_BIT:
            return 200007
        if any(k in self.started for k in self.keys(devs)):
            return 100042
        for k in self.keys(devs):
            self.started[k] = bits
        return 0


OP_WEIGHTS = {"init": 1, "finalize": 0.3, "prof.init": 2, "create_config": 3, "destroy_config": 1, "start": 4,
              "stop": 3, "prof.finalize": 0.5, "create_stamp": 1.5, "mark": 1.5, "push": 1.5, "pop": 1.5,
              "range_start": 1.5, "range_stop": 1.5}


def random_sequence(rng, acl, ref, out, steps):
    handles = [0, 0x1234]
    stamps = [0, 0x999]
    ranges = [0, 77]
    ops, weights = zip(*OP_WEIGHTS.items())
    prefix = [op for op, p in (("init", 0.8), ("prof.init", 0.6)) if rng.random() < p]
    for step in range(steps):
        op = prefix[step] if step < len(prefix) else rng.choices(ops, weights)[0]
        if op == "init":
            got, want = acl.init(""), ref.call(op, None)
        elif op == "finalize":
            got, want = acl.finalize(), ref.call(op, None)
        elif op == "prof.init":
            path = out if step < len(prefix) else rng.choice([out, out, "", out + ";x"])
            got, want = acl.prof.init(path), ref.call(op, path)
        elif op == "create_config":
            devs = rng.choice([[0], [1], [0, 1], [1, 0], [], [2], [0, 0]])
            bits = rng.choice([API, API | TASK, TX, API | TX, 0, API | UNKNOWN_BIT, API | ACL_PROF_AICORE_METRICS])
            got = acl.prof.create_config(devs, 0xFF, 0, bits)
            want = ref.call(op, (devs, bits))
            if got:
                ref.configs[got] = (tuple(devs), bits)
                handles.append(got)
            got = "HANDLE" if got else "NULL"
        elif op == "destroy_config":
            h = rng.choice(handles)
            got, want = acl.prof.destroy_config(h), ref.call(op, h)
        elif op in ("start", "stop"):
            h = rng.choice(handles)
            got, want = getattr(acl.prof, op)(h), ref.call(op, h)
        elif op == "prof.finalize":
            got, want = acl.prof.finalize(), ref.call(op, None)
        elif op == "create_stamp":
            got = acl.prof.create_stamp()
            want = ref.call(op, None)
            if got:
                stamps.append(got)
                ref.stamps.add(got)
                ok = acl.prof.set_stamp_trace_message(got, f"m{len(stamps)}", len(f"m{len(stamps)}"))
                assert ok == 0
            got = "HANDLE" if got else "NULL"
        elif op in ("mark", "push", "range_start"):
            s = rng.choice(stamps)
            got, want = getattr(acl.prof, op)(s), ref.call(op, s)
            if op == "range_start":
                range_id, ret = got
                got = "RANGE" if ret == 0 and range_id > 0 else ret
                if ret == 0:
                    ranges.append(range_id)
                    ref.ranges.add(range_id)
        elif op == "pop":
            got, want = acl.prof.pop(), ref.call(op, None)
        else:
            r = rng.choice(ranges)
            got, want = acl.prof.range_stop(r), ref.call(op, r)
        yield op, got, want


@pytest.mark.parametrize("profile", [STRICT, CURRENT])
def test_random_sequences_follow_the_reference(tmp_path, monkeypatch, profile):
    monkeypatch.chdir(tmp_path)  # the current profile's auto-init writes into ./
    rng = random.Random(20240611 + len(profile))
    seen = set()
    for seq in range(150):
        acl = EmulatedAcl(profile=profile, device_count=2, exec_seconds=0)
        ref = Reference(profile)
        out = str(tmp_path / f"out{seq}")
        for i, (op, got, want) in enumerate(random_sequence(rng, acl, ref, out, 60)):
            assert got == want, (profile, seq, i, op, acl.calls[-3:])
            seen.add((op, got))
        starts = [c for c in acl.calls if c[0] == "acl.prof.start" and c[2] == 0]
        assert len(acl.collections) == len(starts)  # one PROF directory per successful start
    # the sequences do reach the interesting states
    expected = {("start", 0), ("start", 100042), ("start", 100000), ("start", 200007), ("stop", 0),
                ("stop", 100043), ("stop", 100010), ("prof.init", 100002), ("prof.init", 100003),
                ("create_stamp", "HANDLE"), ("mark", 0), ("mark", -1), ("push", 0), ("pop", 0), ("pop", -1),
                ("range_start", "RANGE"), ("range_stop", 0), ("range_stop", -1), ("create_config", "NULL"),
                ("destroy_config", 100000), ("finalize", 100037)}
    if profile == STRICT:
        expected |= {("start", 100043), ("prof.finalize", 100043), ("prof.init", 100001)}
    assert expected <= seen, sorted(expected - seen, key=str)


# ---------------------------------------------------------------------------------------------
# What the emulator writes (§1.5)


def test_prof_tree_names_and_files(tmp_path):
    acl = fresh(tmp_path)
    out = str(tmp_path / "out")
    assert acl.prof.init(out) == 0
    cfg = acl.prof.create_config([0, 1], 1, 0, API | TASK | ACL_PROF_AICORE_METRICS)
    assert acl.prof.start(cfg) == 0
    (path,) = acl.collections
    name = os.path.basename(path)
    m = PROF_RE.fullmatch(name)
    assert m and len(name) == 46 and m.group(1) == "000001" and int(m.group(3)) == os.getpid() % 10**8
    assert sorted(os.listdir(path)) == ["EMULATED_BY_MSPROF_KIT.txt", "device_0", "device_1", "host"]
    assert sorted(os.listdir(os.path.join(path, "device_1"))) == ["data", "info.json.1", "sample.json",
                                                                   "start_info.1"]
    assert acl.prof.stop(cfg) == 0
    assert sorted(os.listdir(os.path.join(path, "host"))) == ["data", "end_info", "info.json", "sample.json",
                                                              "start_info"]
    for sub in ("host", "device_0", "device_1"):
        assert os.listdir(os.path.join(path, sub, "data")) == []  # no pretend device data
    info = json.load(open(os.path.join(path, "device_1", "info.json.1")))
    assert info["emulated"] is True and info["devices"] == "1"
    sample = json.load(open(os.path.join(path, "device_0", "sample.json")))
    assert (sample["ascendcl"], sample["task_trace"], sample["ai_core_profiling"], sample["aicpu"]) == \
        ("on", "on", "on", "off")
    assert sample["ai_core_metrics"] == "PipeUtilization" and sample["data_type_config"] == "0x7"
    start = json.load(open(os.path.join(path, "device_0", "start_info.0")))
    end = json.load(open(os.path.join(path, "device_0", "end_info.0")))
    assert int(end["collectionTimeEnd"]) >= int(start["collectionTimeBegin"]) > 1.6e15
    assert int(end["clockMonotonicRaw"]) >= int(start["clockMonotonicRaw"])
    assert "EMULATED pyACL" in open(os.path.join(path, "EMULATED_BY_MSPROF_KIT.txt")).read()
    # a second start gets the next index
    assert acl.prof.start(cfg) == 0
    assert PROF_RE.fullmatch(os.path.basename(acl.collections[1])).group(1) == "000002"


def test_prof_finalize_closes_what_is_still_started(tmp_path):
    acl = fresh(tmp_path)
    acl.prof.init(str(tmp_path / "out"))
    cfg = acl.prof.create_config([0], 0xFF, 0, API)
    acl.prof.start(cfg)
    assert acl.prof.finalize() == 0
    assert os.path.exists(os.path.join(acl.collections[0], "device_0", "end_info.0"))
    assert acl.mode == "OFF"


def test_acl_json_switch_on_writes_a_collection_at_init(tmp_path):
    cmd_out = tmp_path / "cmd"
    acl = EmulatedAcl()
    path = acl_json(tmp_path, {"switch": "on", "output": str(cmd_out)})
    assert acl.init(path) == 0 and acl.mode == "CMD"
    (coll,) = acl.collections
    assert os.path.dirname(coll) == str(cmd_out)
    assert not os.path.exists(os.path.join(coll, "host", "end_info"))
    assert acl.finalize() == 0
    assert os.path.exists(os.path.join(coll, "host", "end_info"))


def test_acl_json_switch_off_or_empty_leaves_profiling_off(tmp_path):
    for section in ({"switch": "off"}, {}, {"switch": "ON"}):
        acl = EmulatedAcl()
        assert acl.init(acl_json(tmp_path, section)) == 0
        assert acl.mode == "OFF" and acl.prof.init(str(tmp_path / "o")) == 0


def test_msproftx_records_and_threads(tmp_path):
    acl = fresh(tmp_path)
    acl.prof.init(str(tmp_path / "out"))
    plain = acl.prof.create_config([0], 0xFF, 0, API)
    tx = acl.prof.create_config([], 0xFF, 0, TX)
    assert acl.prof.start(plain) == 0
    assert acl.prof.create_stamp() == 0  # no msproftx bit started yet
    assert acl.prof.start(tx) == 0
    stamp = acl.prof.create_stamp()
    assert stamp != 0
    assert acl.prof.set_stamp_trace_message(stamp, "héllo", 6) == 0
    assert acl.prof.set_stamp_trace_message(stamp, "x", 0) == 100000
    assert acl.prof.mark(stamp) == 0
    assert acl.prof.push(stamp) == 0
    range_id, ret = acl.prof.range_start(stamp)
    assert ret == 0 and range_id == 1
    other = {}

    def elsewhere():
        other["pop"] = acl.prof.pop()              # push/pop do not cross threads
        other["range_stop"] = acl.prof.range_stop(range_id)  # ranges may

    t = threading.Thread(target=elsewhere)
    t.start()
    t.join()
    assert other == {"pop": -1, "range_stop": 0}
    assert acl.prof.pop() == 0 and acl.prof.pop() == -1
    assert acl.prof.range_stop(range_id) == -1
    assert acl.prof.destroy_stamp(stamp) is None
    assert acl.prof.mark(stamp) == -1
    assert acl.prof.stop(tx) == 0
    assert acl.prof.create_stamp() == 0
    tx_coll = acl.collections[1]
    assert sorted(os.listdir(tx_coll)) == ["EMULATED_BY_MSPROF_KIT.txt", "host"]
    events = [json.loads(line) for line in open(os.path.join(tx_coll, "host", "data", "emulated_events.jsonl"))]
    assert [e["kind"] for e in events] == ["mark", "push", "range_start", "range_stop", "pop"]
    assert events[0]["message"] == "héllo" and events[2]["range_id"] == 1
    assert events[3]["tid"] != events[0]["tid"]


def test_subscription_conflicts(tmp_path):
    acl = fresh(tmp_path)
    model = tmp_path / "m.om"
    model.write_bytes(b"om")
    assert acl.rt.set_device(0) == 0
    model_id, ret = acl.mdl.load_from_file(str(model))
    assert ret == 0
    sub = acl.prof.create_subscribe_config(1, 0, 3)
    assert acl.prof.model_subscribe(model_id, sub) == 0 and acl.mode == "SUBSCRIBE"
    assert acl.prof.model_subscribe(model_id, sub) == 148046
    assert acl.prof.init(str(tmp_path / "o")) == 148047
    assert acl.prof.model_un_subscribe(model_id) == 0 and acl.mode == "OFF"
    assert acl.prof.init(str(tmp_path / "o")) == 0
    assert acl.prof.model_subscribe(model_id, sub) == 148047
    assert acl.prof.destroy_subscribe_config(sub) == 0


def test_rt_and_mdl_emulation(tmp_path):
    acl = fresh(tmp_path, init=False, devices=2)
    model = tmp_path / "m.om"
    model.write_bytes(b"om")
    assert acl.rt.set_device(0) == 100001
    assert acl.mdl.load_from_file(str(model)) == (0, 100001)
    acl.init("")
    assert acl.rt.get_device_count() == (2, 0)
    assert acl.mdl.load_from_file(str(model)) == (0, 200002)  # no device set
    assert acl.rt.set_device(2) == 100000
    assert acl.rt.set_device(1) == 0
    context, ret = acl.rt.create_context(1)
    assert ret == 0 and context != 0
    assert acl.mdl.load_from_file(str(tmp_path / "none.om")) == (0, 100003)
    model_id, ret = acl.mdl.load_from_file(str(model))
    assert (model_id, ret) == (1, 0)
    acl.exec_seconds = 0.02
    began = time.monotonic()
    assert acl.mdl.execute(model_id, None, None) == 0
    assert time.monotonic() - began >= 0.02
    assert acl.mdl.execute(99, None, None) == 100011
    assert acl.mdl.unload(model_id) == 0 and acl.mdl.unload(model_id) == 100011
    assert acl.rt.destroy_context(context) == 0 and acl.rt.destroy_context(context) == 100000
    assert acl.rt.reset_device(1) == 0
    assert acl.rt.reset_device(1) == 100000
    context, ret = acl.rt.create_context(0)  # sets the device when it is not set
    assert ret == 0 and acl.rt.reset_device(0) == 0


def test_execute_is_recorded_while_its_device_is_profiled(tmp_path):
    acl = fresh(tmp_path)
    model = tmp_path / "m.om"
    model.write_bytes(b"om")
    acl.rt.set_device(0)
    model_id, _ = acl.mdl.load_from_file(str(model))
    acl.prof.init(str(tmp_path / "out"))
    cfg = acl.prof.create_config([0], 0xFF, 0, API)
    acl.prof.start(cfg)
    acl.mdl.execute(model_id, None, None)
    acl.prof.stop(cfg)
    acl.mdl.execute(model_id, None, None)  # after stop: not recorded
    lines = open(os.path.join(acl.collections[0], "host", "data", "emulated_events.jsonl")).read().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["kind"] == "model_execute"


def test_calls_are_recorded_and_injection_changes_nothing(tmp_path):
    acl = fresh(tmp_path)
    acl.inject("acl.prof.init", 500005)
    assert acl.prof.init(str(tmp_path / "o")) == 500005
    assert acl.mode == "OFF" and not (tmp_path / "o").exists()
    assert acl.prof.init(str(tmp_path / "o")) == 0
    assert acl.calls[-2:] == [("acl.prof.init", (str(tmp_path / "o"),), 500005),
                              ("acl.prof.init", (str(tmp_path / "o"),), 0)]
    assert acl.call_names()[0] == "acl.init"


def test_constructor_checks():
    with pytest.raises(BadOption, match="unknown emulator profile 'lenient'"):
        EmulatedAcl(profile="lenient")
    with pytest.raises(BadOption, match="outside 1..64"):
        EmulatedAcl(device_count=0)
    assert EmulatedAcl.__emulated__ is True
    assert repr(EmulatedAcl()) == "<EMULATED acl (msprof-kit), profile strict, 1 device(s)>"


# ---------------------------------------------------------------------------------------------
# get_acl


@pytest.fixture
def no_cached_emulator(monkeypatch):
    monkeypatch.setattr(acl_runtime, "_EMULATED", None)
    for name in ("MSPROF_KIT_EMULATE_ACL", "MSPROF_KIT_EMULATE_PROFILE", "MSPROF_KIT_EMULATE_DEVICES",
                 "MSPROF_KIT_EMULATE_EXEC_MS"):
        monkeypatch.delenv(name, raising=False)


def test_get_acl_refuses_without_being_asked(no_cached_emulator, monkeypatch):
    with pytest.raises(PyAclNotAvailable) as info:
        get_acl()
    assert str(info.value) == ("pyACL (the `acl` module of CANN) is not installed; install the CANN toolkit and "
                               "source its set_env.sh, or set MSPROF_KIT_EMULATE_ACL=1 to use msprof-kit's "
                               "emulator (no real profiling)")
    monkeypatch.setenv("MSPROF_KIT_EMULATE_ACL", "1")
    with pytest.raises(PyAclNotAvailable):
        get_acl(emulate=False)


def test_get_acl_emulator_announces_itself(no_cached_emulator, monkeypatch):
    monkeypatch.setenv("MSPROF_KIT_EMULATE_ACL", "1")
    monkeypatch.setenv("MSPROF_KIT_EMULATE_PROFILE", "current")
    monkeypatch.setenv("MSPROF_KIT_EMULATE_DEVICES", "4")
    monkeypatch.setenv("MSPROF_KIT_EMULATE_EXEC_MS", "2.5")
    diag = Diagnostics()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module, emulated = get_acl(diag=diag)
    assert emulated is True and module.__emulated__ is True
    assert (module.profile, module.device_count, module.exec_seconds) == ("current", 4, 0.0025)
    assert [w.category for w in caught] == [EmulatedAclWarning]
    assert str(caught[0].message) == emulator.ANNOUNCEMENT
    assert diag.warnings == [emulator.ANNOUNCEMENT]
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        again, _ = get_acl(emulate=True)
    assert again is module  # one per process, as the real module's state is


def test_get_acl_prefers_a_real_module(no_cached_emulator, monkeypatch):
    real = types.ModuleType("acl")
    real.prof = types.SimpleNamespace(init=lambda path: 0)
    monkeypatch.setitem(sys.modules, "acl", real)
    assert get_acl(emulate=True) == (real, False)


def test_get_acl_ignores_an_unrelated_acl_package(no_cached_emulator, monkeypatch):
    """PyPI's `acl` (access control lists) is importable as `acl` but is not pyACL."""
    other = types.ModuleType("acl")
    other.__file__ = "/site-packages/acl/__init__.py"
    monkeypatch.setitem(sys.modules, "acl", other)
    with pytest.raises(PyAclNotAvailable, match=r"the `acl` module at /site-packages/acl/__init__.py is another "
                                                r"package, without acl.prof"):
        get_acl()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        module, emulated = get_acl(emulate=True)
    assert emulated and module is not other


def test_emulator_environment_errors(monkeypatch):
    monkeypatch.setenv("MSPROF_KIT_EMULATE_DEVICES", "two")
    with pytest.raises(BadOption, match="bad emulator setting"):
        emulator.from_environment()
    monkeypatch.setenv("MSPROF_KIT_EMULATE_DEVICES", "1")
    monkeypatch.setenv("MSPROF_KIT_EMULATE_EXEC_MS", "-1")
    with pytest.raises(BadOption, match="expected >= 0"):
        emulator.from_environment()
