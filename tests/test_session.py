"""ProfilingSession (collectors/session.py) on the emulator: every ACL code becomes its named
error, and clean-up runs in the documented order on every error path (the emulator records each
call), without a clean-up failure ever hiding the error that caused it."""
from __future__ import annotations

import json
import os
import sys
import threading
import warnings

import pytest

from msprof_kit.collectors import acl_codes, acl_runtime
from msprof_kit.collectors.emulator import CURRENT, STRICT, EmulatedAcl
from msprof_kit.collectors.session import ACL_ERRORS, ProfilingSession, acl_error, check
from msprof_kit.errors import (AclConfigRejected, AclError, AclInvalidDevice, AclInvalidFile, AclRepeatInitialize,
                               AclUninitialized,
                               BadOption, CollectorError, Diagnostics, MsproftxFailed, ProfAlreadyRunning,
                               ProfilingFailure, ProfModulesUnsupported, UnknownAclError)

OPEN = ["acl.prof.init", "acl.prof.create_config", "acl.prof.start"]
CLOSE = ["acl.prof.stop", "acl.prof.destroy_config", "acl.prof.finalize"]


def emulated(profile=STRICT, devices=2, **kw) -> EmulatedAcl:
    acl = EmulatedAcl(profile=profile, device_count=devices, exec_seconds=0, **kw)
    assert acl.init("") == 0
    return acl


def prof_calls(acl, since=1):
    return acl.call_names()[since:]


# ---------------------------------------------------------------------------------------------
# code -> named error

EXPECTED_CLASSES = {
    100000: "AclInvalidParam", 100001: "AclUninitialized", 100002: "AclRepeatInitialize", 100003: "AclInvalidFile",
    100006: "AclParseFile", 100010: "AclInvalidProfilingConfig", 100011: "AclInvalidModelId",
    100037: "AclRepeatFinalize", 100042: "ProfAlreadyRunning", 100043: "ProfNotRunning",
    148046: "ProfRepeatSubscribe", 148047: "ProfApiConflict", 200002: "AclInvalidDevice",
    200006: "AclFeatureUnsupported", 200007: "ProfModulesUnsupported", 300000: "StorageOverLimit",
    500000: "AclInternalError", 500005: "ProfilingFailure", -1: "MsproftxFailed",
}


def test_the_table_covers_every_documented_code():
    assert set(ACL_ERRORS) == set(EXPECTED_CLASSES)
    assert set(ACL_ERRORS) - {-1} == set(acl_codes.ACL_CODE_NAMES) - {0, -1}
    assert len({cls for cls, _ in ACL_ERRORS.values()}) == len(ACL_ERRORS)  # one class per code


@pytest.mark.parametrize("code", sorted(EXPECTED_CLASSES) + [123456])
def test_each_code_from_start_becomes_its_named_error(tmp_path, code):
    acl = emulated()
    acl.inject("acl.prof.start", code)
    with pytest.raises(AclError) as info:
        with ProfilingSession(str(tmp_path / "out"), acl=acl):
            pytest.fail("the body must not run")
    err = info.value
    assert type(err).__name__ == EXPECTED_CLASSES.get(code, "UnknownAclError")
    assert (err.code, err.call, err.exit_code) == (code, "acl.prof.start", 6)
    name = acl_codes.code_name(code)
    meaning = ACL_ERRORS[code][1] if code in ACL_ERRORS else \
        "a code msprof-kit does not know; see acl_base.h of the installed CANN"
    assert str(err) == f"acl.prof.start returned {name}: {meaning}"
    assert "\n" not in str(err)
    # start failed: nothing to stop; the config and the init are undone, in that order
    assert prof_calls(acl) == OPEN + ["acl.prof.destroy_config", "acl.prof.finalize"]


def test_exact_message_for_prof_already_run():
    err = acl_error("acl.prof.init", 100042)
    assert isinstance(err, ProfAlreadyRunning)
    assert str(err) == ("acl.prof.init returned ACL_ERROR_PROF_ALREADY_RUN 100042: profiling is already on: "
                        "acl.json or msprof switched it on (acl.prof.* cannot be used then), or a device of this "
                        "config is already started")


def test_check_accepts_only_ints():
    check("acl.prof.stop", 0)
    with pytest.raises(UnknownAclError, match=r"acl.prof.stop returned None, not an ACL code"):
        check("acl.prof.stop", None)
    with pytest.raises(UnknownAclError):
        check("acl.prof.stop", True)


# codes the emulator gives by itself, from the situations of spec §1.4


def test_prof_init_before_acl_init_strict(tmp_path):
    acl = EmulatedAcl()
    with pytest.raises(AclUninitialized, match=r"acl.init has not been called; call it first \(ProfilingSession"):
        ProfilingSession(str(tmp_path), acl=acl).start()
    assert acl.call_names() == ["acl.prof.init"]  # nothing opened, nothing to undo


def test_init_acl_option_makes_the_whole_sequence(tmp_path):
    acl = EmulatedAcl()
    with ProfilingSession(str(tmp_path / "out"), acl=acl, init_acl=True) as session:
        pass
    assert acl.call_names() == ["acl.init"] + OPEN + CLOSE + ["acl.finalize"]
    assert len(session.collections) == 1


def test_acl_json_switch_on_conflicts(tmp_path):
    path = tmp_path / "acl.json"
    path.write_text(json.dumps({"profiler": {"switch": "on", "output": str(tmp_path / "cmd")}}))
    acl = EmulatedAcl()
    with pytest.raises(ProfAlreadyRunning) as info:
        ProfilingSession(str(tmp_path / "out"), acl=acl, init_acl=True, acl_json=str(path)).start()
    assert info.value.call == "acl.prof.init"
    assert acl.call_names() == ["acl.init", "acl.prof.init", "acl.finalize"]


def test_a_second_session_while_one_runs_is_a_repeat_init(tmp_path):
    """acl.prof.init is once per process (§1.4 rule 6), so sessions do not nest: the second one's
    init fails, it undoes nothing, and the first one is unharmed."""
    acl = emulated()
    with ProfilingSession(str(tmp_path / "a"), devices=[0, 1], acl=acl) as first:
        with pytest.raises(AclRepeatInitialize):
            ProfilingSession(str(tmp_path / "b"), devices=[1], acl=acl).start()
    assert prof_calls(acl) == OPEN + ["acl.prof.init"] + CLOSE
    assert len(first.collections) == 1


def test_offline_device_and_unsupported_bits(tmp_path):
    acl = emulated(offline_devices=[1])
    with pytest.raises(AclInvalidDevice):
        ProfilingSession(str(tmp_path), devices=[1], acl=acl).start()
    acl = emulated()
    with pytest.raises(ProfModulesUnsupported):
        ProfilingSession(str(tmp_path), data_types=0x1 | (1 << 40), acl=acl).start()
    assert prof_calls(acl) == OPEN + ["acl.prof.destroy_config", "acl.prof.finalize"]


def test_bad_path_characters(tmp_path):
    acl = emulated()
    with pytest.raises(AclInvalidFile):
        ProfilingSession(str(tmp_path / "a;b"), acl=acl).start()
    assert prof_calls(acl) == ["acl.prof.init"]


def test_create_config_refusal_names_the_device(tmp_path):
    acl = emulated(devices=2)
    with pytest.raises(AclConfigRejected) as info:
        ProfilingSession(str(tmp_path), devices=[0, 3], acl=acl).start()
    assert str(info.value) == "acl.prof.create_config returned NULL: device 3 is not among the 2 device(s)"
    # no config to destroy; prof.init is undone
    assert prof_calls(acl) == ["acl.prof.init", "acl.prof.create_config", "acl.rt.get_device_count",
                               "acl.prof.finalize"]


def test_session_arguments_are_checked_first():
    acl = emulated()
    with pytest.raises(BadOption, match="repeat an id"):
        ProfilingSession("/tmp/x", devices=[0, 0], acl=acl)
    with pytest.raises(BadOption, match="only with the msproftx data type"):
        ProfilingSession("/tmp/x", devices=[], acl=acl)
    with pytest.raises(BadOption, match="unknown profiling data type 'task_tme'"):
        ProfilingSession("/tmp/x", data_types="acl_api,task_tme", acl=acl)
    with pytest.raises(BadOption, match="unknown AI Core metric group 'Pipe'"):
        ProfilingSession("/tmp/x", aicore_metrics="Pipe", acl=acl)
    assert acl.call_names() == ["acl.init"]


def test_metrics_turn_on_their_bit_and_reach_the_config(tmp_path):
    acl = emulated()
    session = ProfilingSession(str(tmp_path), data_types=["acl_api"], aicore_metrics="L2Cache", acl=acl)
    assert session.data_types == 0x1 | 0x4 and session.aicore_metrics == 6
    with session:
        pass
    assert acl.calls[2] == ("acl.prof.create_config", ([0], 6, 0, 0x5), acl.calls[2][2])


# ---------------------------------------------------------------------------------------------
# clean-up order on every error path


@pytest.mark.parametrize("failing,opened", [
    ("acl.init", []),
    ("acl.prof.init", ["acl.init"]),
    ("acl.prof.create_config", ["acl.init", "acl.prof.init"]),
    ("acl.prof.start", ["acl.init", "acl.prof.init", "acl.prof.create_config"]),
])
def test_cleanup_undoes_exactly_what_was_opened(tmp_path, failing, opened):
    acl = EmulatedAcl()
    acl.inject(failing, 0 if failing == "acl.prof.create_config" else 500005)
    with pytest.raises(AclError):
        ProfilingSession(str(tmp_path / "out"), acl=acl, init_acl=True).start()
    undo = {"acl.init": "acl.finalize", "acl.prof.init": "acl.prof.finalize",
            "acl.prof.create_config": "acl.prof.destroy_config"}
    diagnosis = ["acl.rt.get_device_count"] if failing == "acl.prof.create_config" else []  # for the message
    assert acl.call_names() == opened + [failing] + diagnosis + [undo[c] for c in reversed(opened)]


def test_error_in_the_body_cleans_up_in_order(tmp_path):
    acl = emulated()
    with pytest.raises(ZeroDivisionError):
        with ProfilingSession(str(tmp_path / "out"), acl=acl):
            1 / 0
    assert prof_calls(acl) == OPEN + CLOSE
    assert acl.mode == "OFF"


@pytest.mark.parametrize("failing", CLOSE)
def test_cleanup_failure_never_hides_the_original_error(tmp_path, failing):
    acl = emulated()
    acl.inject(failing, 500005)
    diag = Diagnostics()
    session = ProfilingSession(str(tmp_path / "out"), acl=acl, diag=diag)
    with pytest.raises(KeyError) as info:
        with session:
            raise KeyError("the user's error")
    assert prof_calls(acl) == OPEN + CLOSE  # every clean-up step still ran
    assert [type(e) for e in session.cleanup_errors] == [ProfilingFailure]
    message = f"{failing} returned ACL_ERROR_PROFILING_FAILURE 500005: " + ACL_ERRORS[500005][1]
    assert diag.warnings == [f"clean-up after the error also failed: {message}"]
    if sys.version_info >= (3, 11):
        assert info.value.__notes__ == [f"clean-up also failed: {message}"]


def test_cleanup_failure_without_an_error_is_raised_after_every_step(tmp_path):
    acl = emulated()
    acl.inject("acl.prof.stop", 100043)
    acl.inject("acl.prof.finalize", 500000)
    diag = Diagnostics()
    with pytest.raises(AclError) as info:
        with ProfilingSession(str(tmp_path / "out"), acl=acl, diag=diag):
            pass
    assert type(info.value).__name__ == "ProfNotRunning" and info.value.call == "acl.prof.stop"
    assert prof_calls(acl) == OPEN + CLOSE
    assert diag.warnings == ["clean-up also failed: acl.prof.finalize returned ACL_ERROR_INTERNAL_ERROR 500000: "
                             + ACL_ERRORS[500000][1]]


def test_a_python_exception_in_cleanup_is_reported_not_dropped(tmp_path):
    acl = emulated()
    session = ProfilingSession(str(tmp_path / "out"), acl=acl)
    session.start()
    real_stop = acl.prof.stop
    acl.prof.stop = lambda cfg: (_ for _ in ()).throw(RuntimeError("driver gone"))
    with pytest.raises(RuntimeError, match="driver gone"):
        session.stop()
    acl.prof.stop = real_stop
    assert acl.call_names()[-2:] == ["acl.prof.destroy_config", "acl.prof.finalize"]


def test_open_markers_are_closed_before_stop(tmp_path):
    acl = emulated()
    diag = Diagnostics()
    with ProfilingSession(str(tmp_path / "out"), data_types="acl_api,msproftx", acl=acl, diag=diag) as session:
        session.push("outer")
        session.range_start("unfinished")
    tail = acl.call_names()[-7:]
    assert tail == ["acl.prof.range_stop", "acl.prof.destroy_stamp", "acl.prof.pop", "acl.prof.destroy_stamp"] + CLOSE
    assert diag.warnings == ["msproftx range 1 was still open at stop; it is closed",
                             "an msproftx push was not popped before stop; it is popped"]


# ---------------------------------------------------------------------------------------------
# markers


def test_markers_reach_the_collection(tmp_path):
    acl = emulated()
    with ProfilingSession(str(tmp_path / "out"), devices=[0], data_types="acl_api,task_time,msproftx",
                          acl=acl) as session:
        session.mark("warm-up done")
        session.push("outer")
        with session.range("inference") as range_id:
            assert range_id == 1
        session.pop()
    (coll,) = session.collections
    events = [json.loads(x) for x in open(os.path.join(coll, "host", "data", "emulated_events.jsonl"))]
    assert [(e["kind"], e.get("message")) for e in events] == [
        ("mark", "warm-up done"), ("push", "outer"), ("range_start", "inference"), ("range_stop", None),
        ("pop", "outer")]
    assert acl.calls[4][0] == "acl.prof.create_stamp"
    assert acl.calls[5][0:2] == ("acl.prof.set_stamp_trace_message", (acl.calls[4][2], "warm-up done", 12))


def test_range_may_stop_on_another_thread(tmp_path):
    acl = emulated()
    with ProfilingSession(str(tmp_path / "out"), data_types="acl_api,msproftx", acl=acl) as session:
        range_id = session.range_start("crosses threads")
        t = threading.Thread(target=session.range_stop, args=(range_id,))
        t.start()
        t.join()
    assert "acl.prof.range_stop" in acl.call_names()


def test_marker_misuse(tmp_path):
    acl = emulated()
    session = ProfilingSession(str(tmp_path / "out"), acl=acl)
    with pytest.raises(CollectorError, match="between the session's start and stop"):
        session.mark("too early")
    with session:
        with pytest.raises(BadOption, match="need the msproftx data type"):
            session.mark("no bit")
    tx = ProfilingSession(str(tmp_path / "out2"), data_types="acl_api,msproftx", acl=emulated())
    with tx:
        with pytest.raises(CollectorError, match="pop without a push"):
            tx.pop()
        with pytest.raises(CollectorError, match="range 9 was not started"):
            tx.range_stop(9)


def test_msproftx_inactive_in_the_runtime_is_a_named_error(tmp_path):
    acl = emulated()
    with ProfilingSession(str(tmp_path / "out"), data_types="acl_api,msproftx", acl=acl) as session:
        acl.inject("acl.prof.create_stamp", 0)
        with pytest.raises(MsproftxFailed, match="create_stamp returned NULL: msproftx is not active"):
            session.mark("x")
        acl.inject("acl.prof.mark", -1)
        with pytest.raises(MsproftxFailed) as info:
            session.mark("y")
        assert str(info.value) == "acl.prof.mark returned PROFILING_FAILED -1: " + ACL_ERRORS[-1][1]
        assert acl.call_names()[-1] == "acl.prof.destroy_stamp"  # the stamp is not leaked


def test_range_body_error_survives_a_failing_range_stop(tmp_path):
    acl = emulated()
    diag = Diagnostics()
    with pytest.raises(ValueError, match="body"):
        with ProfilingSession(str(tmp_path / "out"), data_types="acl_api,msproftx", acl=acl, diag=diag) as s:
            with s.range("r"):
                acl.inject("acl.prof.range_stop", -1)
                raise ValueError("body")
    assert diag.warnings[0].startswith("closing msproftx range 1 also failed: acl.prof.range_stop returned")


# ---------------------------------------------------------------------------------------------
# module selection and profiles


def test_session_uses_the_emulator_only_when_asked(tmp_path, monkeypatch):
    monkeypatch.setattr(acl_runtime, "_EMULATED", None)
    monkeypatch.delenv("MSPROF_KIT_EMULATE_ACL", raising=False)
    with pytest.raises(CollectorError, match="pyACL .* is not installed"):
        ProfilingSession(str(tmp_path))
    diag = Diagnostics()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        session = ProfilingSession(str(tmp_path / "out"), emulate=True, diag=diag, init_acl=True)
    assert session.emulated is True and diag.warnings[0].startswith("EMULATED pyACL")
    with session:
        pass
    assert len(session.collections) == 1


@pytest.mark.parametrize("profile", [STRICT, CURRENT])
def test_two_sessions_in_a_row(tmp_path, profile):
    """init and finalize once per session; the second run gets a new PROF directory (§1.4 rule 6)."""
    acl = emulated(profile)
    first = ProfilingSession(str(tmp_path / "out"), acl=acl)
    with first:
        pass
    second = ProfilingSession(str(tmp_path / "out"), devices=[1], acl=acl)
    with second:
        pass
    assert len(first.collections) == len(second.collections) == 1
    assert first.collections != second.collections
    with pytest.raises(CollectorError, match="already started"):
        with second:
            second.start()
