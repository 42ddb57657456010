"""The inference runner after ais_bench (collectors/infer/, spec/collectors.md §5 and §7.4), the
parts that run: the emulator, msprof, acl.json mode, the command line, the real-pyACL path. The
rules, statistics and folder names: test_infer_plan.py.

What is real here: the argument rules and the statistics (pure Python, against hand-computed
values), PATH lookup, the msprof process (a real executable script named `msprof`, put first on
PATH, which records how it was called and runs the application from another directory), the re-run
of the inference in a child Python, and every file written. What is not: the NPU. The model runs on
the labelled pyACL emulator (collectors/emulator/), whose "execute" sleeps; the real-pyACL path is
exercised only against a recording stand-in defined below, which checks the calls and the bytes
moved, not CANN's behaviour.
"""
from __future__ import annotations

import datetime
import json
import os
import re
import shlex
import stat
import sys

import pytest

from msprof_kit import cli

from msprof_kit.collectors import acl_runtime
from msprof_kit.collectors import infer as inf
from msprof_kit.collectors.emulator import MARKER, EmulatedAcl
from msprof_kit.errors import (AclInvalidFile, AclInvalidParam, Diagnostics, InferOptionError, MsprofFailed,
                               PathNotFound, PyAclNotAvailable)

pytestmark = pytest.mark.filterwarnings("ignore::msprof_kit.collectors.acl_runtime.EmulatedAclWarning")

AIS_BENCH_KEYS = {"filesinfo", "args", "NPU_compute_time", "H2D_latency", "D2H_latency", "throughput",
                  "npu_compute_time_list", "pid"}
STAT_KEYS = {"min", "max", "mean", "median", "percentile(99%)", "count"}
RUN_DIR = re.compile(r"\d{4}_\d{2}_\d{2}-\d{2}_\d{2}_\d{2}")
PROF_DIR = re.compile(r"PROF_\d{6}_\d{17}_\d{8}[A-R]{8}")
# §5.3, written out here rather than taken from the module, so that a drift in either shows
MSPROF_FLAGS = ["--model-execution=on", "--sys-hardware-mem=on", "--sys-cpu-profiling=off", "--sys-profiling=off",
                "--sys-pid-profiling=off", "--dvpp-profiling=on", "--runtime-api=on", "--task-time=on", "--aicpu=on"]
OPT_OUTS = ["GE_PROFILIGN_TO_STD_OUT", "GE_PROFILING_TO_STD_OUT", "AIT_NO_MSPROF_MODE", "MSIT_NO_MSPROF_MODE"]

FAKE_MSPROF = r'''#!{python}
"""TEST STAND-IN for CANN's msprof, written by tests/test_infer.py. It records its argv, its
environment and the directory it runs the application in; runs --application from
$FAKE_MSPROF_CWD (msprof does not run it from the caller's directory, which is why relative paths
break: the ais_bench FAQ hazard); makes an empty PROF_ directory in --output, named as
spec/collectors.md 1.5 says; and exits with $FAKE_MSPROF_EXIT, else with the application's status."""
import datetime, json, os, random, shlex, subprocess, sys

options = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
cwd = os.environ["FAKE_MSPROF_CWD"]
out = options["output"]
os.makedirs(out, exist_ok=True)
now = datetime.datetime.now()
index = 1 + sum(n.startswith("PROF_") for n in os.listdir(out))
letters = "".join(random.choice("ABCDEFGHIJKLMNOPQR") for _ in range(8))
name = "PROF_%06d_%s%03d_%08d%s" % (index, now.strftime("%Y%m%d%H%M%S"), now.microsecond // 1000,
                                    os.getpid() % 10**8, letters)
for sub in ("host", "device_0"):
    os.makedirs(os.path.join(out, name, sub, "data"))
status = subprocess.call(shlex.split(options["application"]), cwd=cwd)
with open(os.environ["FAKE_MSPROF_RECORD"], "w") as f:
    json.dump({{"argv": sys.argv, "env": dict(os.environ), "cwd": cwd, "app_status": status}}, f)
sys.exit(int(os.environ.get("FAKE_MSPROF_EXIT", status)))
'''


# ---------------------------------------------------------------------------------------------
# fixtures

@pytest.fixture
def emu(monkeypatch):
    """A fresh emulator behind get_acl (2 devices, 1 ms per execute), asked for through the
    environment, which child processes inherit; no msprof opt-out variable set."""
    acl = EmulatedAcl(device_count=2, exec_seconds=0.001)
    monkeypatch.setattr(acl_runtime, "_EMULATED", acl)
    monkeypatch.setenv("MSPROF_KIT_EMULATE_ACL", "1")
    monkeypatch.setenv("MSPROF_KIT_EMULATE_EXEC_MS", "1")
    for name in ("MSPROF_KIT_EMULATE_DEVICES", "MSPROF_KIT_EMULATE_PROFILE", *OPT_OUTS):
        monkeypatch.delenv(name, raising=False)
    return acl


@pytest.fixture
def no_msprof(tmp_path, monkeypatch):
    """PATH holds only an empty folder: no msprof."""
    empty = tmp_path / "empty_bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


class FakeMsprof:
    def __init__(self, root):
        self.bin = root / "bin"
        self.path = self.bin / "msprof"
        self.cwd = root / "elsewhere"       # where it runs the application
        self.record_path = root / "msprof_record.json"

    def called(self) -> bool:
        return self.record_path.exists()

    def record(self):
        return json.loads(self.record_path.read_text())


@pytest.fixture
def fake_msprof(tmp_path, monkeypatch):
    """A real executable `msprof` first on PATH (see FAKE_MSPROF)."""
    fake = FakeMsprof(tmp_path / "msprof_fake")
    fake.bin.mkdir(parents=True)
    fake.cwd.mkdir()
    fake.path.write_text(FAKE_MSPROF.format(python=sys.executable))
    fake.path.chmod(fake.path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    monkeypatch.setenv("PATH", f"{fake.bin}{os.pathsep}{os.environ.get('PATH', os.defpath)}")
    monkeypatch.setenv("FAKE_MSPROF_RECORD", str(fake.record_path))
    monkeypatch.setenv("FAKE_MSPROF_CWD", str(fake.cwd))
    monkeypatch.delenv("FAKE_MSPROF_EXIT", raising=False)
    return fake


@pytest.fixture
def work(tmp_path, monkeypatch):
    """The user's directory: a dummy model.om and data/in.bin; the cwd."""
    root = tmp_path / "work"
    (root / "data").mkdir(parents=True)
    (root / "model.om").write_bytes(b"not a real model: the emulator only checks that the file exists")
    (root / "data" / "in.bin").write_bytes(bytes(range(8)))
    monkeypatch.chdir(root)
    return root


# ---------------------------------------------------------------------------------------------
# the emulator: a run end to end in this process

def test_emulated_run_writes_the_dated_folder_and_the_summary(emu, no_msprof, work):
    before = datetime.datetime.now().replace(microsecond=0)
    result = inf.infer("model.om", output="out", loop=3, warmup_count=2)
    after = datetime.datetime.now()
    out = work / "out"
    assert result.emulated and result.mode == inf.PLAIN
    name = os.path.basename(result.run_dir)
    assert RUN_DIR.fullmatch(name) and before <= datetime.datetime.strptime(name, "%Y_%m_%d-%H_%M_%S") <= after
    assert sorted(os.listdir(out)) == [name, name + "_summary.json"]
    assert os.listdir(result.run_dir) == [MARKER]                     # no output files: nothing ran
    assert result.summary_files == [str(out / (name + "_summary.json"))]

    summary = json.loads((out / (name + "_summary.json")).read_text())
    assert set(summary) == AIS_BENCH_KEYS | {"device", "batchsize", "emulated"}
    assert summary["emulated"] is True and summary["device"] == 0 and summary["pid"] == os.getpid()
    times = summary["npu_compute_time_list"]
    assert len(times) == 3 and all(t >= 1.0 for t in times)           # the emulator sleeps 1 ms
    for key in ("NPU_compute_time", "H2D_latency", "D2H_latency"):
        assert set(summary[key]) == STAT_KEYS
    assert summary["NPU_compute_time"] == inf.latency_stats(times).as_json()
    assert summary["H2D_latency"]["count"] == 0 and summary["D2H_latency"]["count"] == 0
    assert summary["throughput"] == pytest.approx(1000 * 1 / (sum(times) / 3))
    assert summary["filesinfo"] == {"0": {"infiles": [], "outfiles": []}}
    assert summary["args"] == ["msprof-kit", "infer", f"--model={work}/model.om", f"--output={out}", "--loop=3",
                               "--warmup-count=2", "--device=0"]

    # two warm-up runs, three measured, everything closed in reverse order
    assert emu.call_names() == (["acl.init", "acl.rt.set_device", "acl.rt.create_context", "acl.mdl.load_from_file"]
                                + ["acl.mdl.execute"] * 5
                                + ["acl.mdl.unload", "acl.rt.destroy_context", "acl.rt.reset_device", "acl.finalize"])
    text = inf.render_summary(result)
    assert text.startswith("[WARNING] EMULATED pyACL: ")
    assert "[INFO] -----------------Performance Summary------------------\n" in text


def test_emulated_run_over_several_devices_and_input_folders(emu, no_msprof, work):
    for i in range(3):
        (work / "data" / f"s{i}.bin").write_bytes(b"\0" * 4)
    (work / "data" / "in.bin").unlink()
    (work / "more").mkdir()
    for i in range(3):
        (work / "more" / f"t{i}.bin").write_bytes(b"\0" * 4)
    result = inf.infer(str(work / "model.om"), inputs="data,more", output="out", loop=2, devices="0,1", batch=8)
    run = result.run_dir
    assert sorted(os.listdir(run)) == [MARKER, "device0", "device0_summary.json", "device1", "device1_summary.json"]
    assert [d.device for d in result.devices] == [0, 1]
    for dev in result.devices:
        summary = json.loads(open(os.path.join(run, f"device{dev.device}_summary.json")).read())
        assert summary["device"] == dev.device and summary["batchsize"] == 8
        assert summary["NPU_compute_time"]["count"] == 6                  # 3 samples x loop 2
        assert summary["filesinfo"]["2"]["infiles"] == [f"{work}/data/s2.bin", f"{work}/more/t2.bin"]
        assert summary["throughput"] == pytest.approx(8000 / summary["NPU_compute_time"]["mean"])
    # device 0 is closed before device 1 is opened
    names = [n for n in emu.call_names() if n.startswith("acl.rt.")]
    assert names == ["acl.rt.set_device", "acl.rt.create_context", "acl.rt.destroy_context", "acl.rt.reset_device"] * 2
    assert [a for n, a, _ in emu.calls if n == "acl.rt.set_device"] == [(0,), (1,)]
    assert "[INFO] device 1\n" in inf.render_summary(result)


def test_without_output_nothing_is_written(emu, no_msprof, work):
    result = inf.infer("model.om", loop=2)
    assert result.run_dir is None and result.summary_files == []
    assert sorted(os.listdir(work)) == ["data", "model.om"]
    assert result.devices[0].npu_compute_time.count == 2


def test_an_acl_error_closes_what_was_opened_and_leaves_no_empty_folder(emu, no_msprof, work):
    emu.inject("acl.mdl.load_from_file", (0, 100003))
    with pytest.raises(AclInvalidFile, match="acl.mdl.load_from_file returned ACL_ERROR_INVALID_FILE 100003"):
        inf.infer("model.om", output="out", devices="0")
    assert emu.call_names()[-3:] == ["acl.rt.destroy_context", "acl.rt.reset_device", "acl.finalize"]
    assert os.listdir(work / "out") == []


def test_a_device_the_emulator_lacks_is_the_named_error(emu, no_msprof, work):
    with pytest.raises(AclInvalidParam, match="acl.rt.set_device returned ACL_ERROR_INVALID_PARAM 100000"):
        inf.infer("model.om", devices="0,5")
    assert emu.call_names()[-1] == "acl.finalize"


def test_missing_model(emu, no_msprof, work):
    with pytest.raises(PathNotFound, match="no such model file"):
        inf.infer("nope.om")


# ---------------------------------------------------------------------------------------------
# without CANN and without asking for the emulator

def test_without_pyacl_and_without_the_emulator_it_is_the_named_error(monkeypatch, no_msprof, work):
    monkeypatch.setattr(acl_runtime, "_EMULATED", None)
    monkeypatch.delenv("MSPROF_KIT_EMULATE_ACL", raising=False)
    with pytest.raises(PyAclNotAvailable) as info:
        inf.infer("model.om", output="out", profiler=True)
    assert "pyACL (the `acl` module of CANN) is not installed" in str(info.value)
    assert "MSPROF_KIT_EMULATE_ACL=1" in str(info.value) and info.value.exit_code == 6
    assert not (work / "out").exists()                                  # nothing written
    monkeypatch.setenv("MSPROF_KIT_EMULATE_ACL", "1")
    with pytest.raises(PyAclNotAvailable):
        inf.infer("model.om", emulate=False)


def test_without_pyacl_msprof_is_not_even_started(monkeypatch, fake_msprof, work):
    monkeypatch.setattr(acl_runtime, "_EMULATED", None)
    monkeypatch.delenv("MSPROF_KIT_EMULATE_ACL", raising=False)
    with pytest.raises(PyAclNotAvailable):
        inf.infer("model.om", output="out", profiler=True)
    assert not fake_msprof.called()


# ---------------------------------------------------------------------------------------------
# --profiler under msprof (§5.3): a real `msprof` executable on PATH

def _executable(folder, name="msprof"):
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return str(path)


def test_msprof_choice_table(tmp_path):
    msprof = _executable(tmp_path / "bin")
    path = {"PATH": str(tmp_path / "bin")}
    assert inf.msprof_choice(path) == (msprof, "")
    assert inf.msprof_choice({"PATH": str(tmp_path)}) == (None, "msprof is not on PATH")
    for name in OPT_OUTS:
        assert inf.msprof_choice({**path, name: "1"}) == (None, f"{name}=1 is set")
        assert inf.msprof_choice({**path, name: "0"}) == (msprof, "")   # only 1 opts out
        assert inf.msprof_choice({**path, name: ""}) == (msprof, "")


def test_profiler_runs_under_msprof_with_the_exact_command(emu, fake_msprof, work):
    result = inf.infer("model.om", inputs="data/in.bin", output="out", loop=2, warmup_count=3, profiler=True)
    rec = fake_msprof.record()
    application = [sys.executable, "-m", "msprof_kit", "infer", f"--model={work}/model.om",
                   f"--input={work}/data/in.bin", f"--output={work}/out", "--loop=2", "--warmup-count=3",
                   "--device=0", "--profiler=1", "--profiler=0", "--warmup_count=0"]
    assert rec["argv"][1:] == [f"--output={work}/out/profiler", "--application=" + shlex.join(application),
                               *MSPROF_FLAGS]
    assert rec["argv"][1 + 1].endswith(" --profiler=0 --warmup_count=0")
    assert result.msprof_command == [str(fake_msprof.path), *rec["argv"][1:]]
    # the hazard is real: the application runs elsewhere, where the relative paths do not exist
    assert rec["cwd"] != str(work) and not os.path.exists(os.path.join(rec["cwd"], "model.om"))
    assert rec["app_status"] == 0 and result.returncode == 0
    assert rec["env"]["MSPROF_KIT_EMULATE_ACL"] == "1"
    # the re-run wrote its dated folder and summary with no warm-up and no profiler of its own
    assert len(result.summary_files) == 1
    summary = json.loads(open(result.summary_files[0]).read())
    assert RUN_DIR.fullmatch(os.path.basename(result.summary_files[0])[:-len("_summary.json")])
    assert summary["emulated"] is True and summary["NPU_compute_time"]["count"] == 2
    assert "--warmup-count=0" in summary["args"] and "--profiler=1" not in summary["args"]
    assert summary["filesinfo"]["0"]["infiles"] == [f"{work}/data/in.bin"]
    assert len(result.prof_dirs) == 1 and PROF_DIR.fullmatch(os.path.basename(result.prof_dirs[0]))
    assert os.path.dirname(result.prof_dirs[0]) == f"{work}/out/profiler"
    assert not (work / "out" / "acl.json").exists()                   # msprof mode writes no acl.json
    assert emu.calls == []                                            # the model ran in the child only


def test_msprof_exit_status_propagates(emu, fake_msprof, work, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_MSPROF_EXIT", "3")
    with pytest.raises(MsprofFailed) as info:
        inf.infer("model.om", output="out", profiler=True)
    assert (info.value.status, info.value.exit_code) == (3, 3)
    assert "msprof exited with status 3 while running the inference; it left " in str(info.value)
    capsys.readouterr()
    assert cli.main(["infer", "--model", "model.om", "--output", "out", "--profiler", "1"]) == 3
    assert "Error: " in capsys.readouterr().err


def test_the_applications_failure_comes_back_through_msprof(emu, fake_msprof, work):
    # the child's emulator has 1 device (its environment says nothing else), so device 1 fails
    # there with AclInvalidParam, exit 6; the stand-in msprof returns the application's status
    with pytest.raises(MsprofFailed) as info:
        inf.infer("model.om", output="out", devices="1", profiler=True)
    assert fake_msprof.record()["app_status"] == 6
    assert info.value.exit_code == 6


# ---------------------------------------------------------------------------------------------
# --profiler through acl.json: msprof absent, or opted out

def _expected_profiler_json(out):
    return ('{\n    "profiler": {\n        "aic_metrics": "",\n        "aicpu": "on",\n'
            f'        "output": "{out}/profiler",\n        "switch": "on"\n    }}\n}}')


def _check_acl_json_mode(result, emu, out, why):
    assert (out / "acl.json").read_text() == _expected_profiler_json(out)
    assert stat.S_IMODE(os.stat(out / "profiler").st_mode) == 0o750 & ~_umask()
    assert result.profiler_via == "acl.json" and result.why_not_msprof == why
    assert result.acl_json == str(out / "acl.json")
    assert emu.calls[0] == ("acl.init", (str(out / "acl.json"),), 0)
    # the emulator reads the file as aclInit would and writes its (synthetic) collection there
    assert len(result.prof_dirs) == 1 and os.path.dirname(result.prof_dirs[0]) == str(out / "profiler")
    assert result.msprof_command is None
    assert f"profiling through {out}/acl.json ({why})" in inf.render_summary(result)


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("name", OPT_OUTS)
def test_opt_out_variables_switch_to_acl_json_mode(emu, fake_msprof, work, monkeypatch, name):
    monkeypatch.setenv(name, "1")
    result = inf.infer("model.om", inputs="data/in.bin", output="out", profiler=True)
    assert not fake_msprof.called()
    _check_acl_json_mode(result, emu, work / "out", f"{name}=1 is set")
    # with an input the warm-up count became 0: one measured execute only
    assert emu.call_names().count("acl.mdl.execute") == 1


def test_absent_msprof_switches_to_acl_json_mode(emu, no_msprof, work):
    diag = Diagnostics()
    result = inf.infer("model.om", output="out", profiler=True, diag=diag)
    _check_acl_json_mode(result, emu, work / "out", "msprof is not on PATH")
    assert emu.call_names().count("acl.mdl.execute") == 2             # no input: the warm-up stays


def test_the_emulators_collection_is_not_offered_to_import(emu, no_msprof, work, capsys):
    """Issue 22 item 5f: the emulator's PROF_xxx holds no records; the summary does not suggest
    importing it, and import, asked all the same, says why it refuses in one line."""
    result = inf.infer("model.om", output="out", profiler=True)
    text = inf.render_summary(result)
    assert "msprof-kit import" not in text
    assert "the emulator's PROF_xxx is synthetic and holds no profiling records, so there is nothing to import" \
        in text
    prof = result.prof_dirs[0]
    capsys.readouterr()
    assert cli.main(["import", "-dir", prof]) == 3
    err = capsys.readouterr().err
    assert err == f"Error: {prof}: no info.json names a platform_version: written by msprof-kit's pyACL emulator " \
                  f"({MARKER}), it is synthetic and holds no profiling records to import\n"


def test_an_acl_json_with_other_settings_is_not_overwritten(emu, no_msprof, work):
    (work / "out").mkdir()
    (work / "out" / "acl.json").write_text('{"err_msg_mode": "1"}')
    with pytest.raises(InferOptionError, match="an acl.json with other settings is in the way"):
        inf.infer("model.om", output="out", profiler=True)
    assert (work / "out" / "acl.json").read_text() == '{"err_msg_mode": "1"}'


# ---------------------------------------------------------------------------------------------
# --dump and --acl-json-path

def test_dump_writes_the_dump_acl_json(emu, no_msprof, work):
    diag = Diagnostics()
    result = inf.infer("model.om", output="out", dump=True, diag=diag)
    out = work / "out"
    assert (out / "acl.json").read_text() == (
        '{\n    "dump": {\n        "dump_list": [\n            {\n                "model_name": "model"\n'
        f'            }}\n        ],\n        "dump_mode": "all",\n        "dump_path": "{out}/dump"\n    }}\n}}')
    assert (out / "dump").is_dir() and emu.calls[0] == ("acl.init", (str(out / "acl.json"),), 0)
    assert "the emulator writes no dump data: the dump folder stays empty" in diag.warnings
    assert result.mode == inf.DUMP and result.prof_dirs == []


def test_acl_json_path_is_used_as_it_is_and_wins(emu, fake_msprof, work):
    text = json.dumps({"profiler": {"switch": "on", "output": "mine", "aicpu": "on"}})
    (work / "my_acl.json").write_text(text)
    diag = Diagnostics()
    result = inf.infer("model.om", output="out", profiler=True, dump=True, acl_json_path="my_acl.json", diag=diag)
    assert not fake_msprof.called()
    assert result.mode == inf.ACL_JSON and result.acl_json == str(work / "my_acl.json")
    assert emu.calls[0] == ("acl.init", (str(work / "my_acl.json"),), 0)
    assert (work / "my_acl.json").read_text() == text
    assert not (work / "out" / "acl.json").exists()
    assert [os.path.dirname(p) for p in result.prof_dirs] == [str(work / "mine")]
    assert diag.warnings[0].startswith("--acl-json-path is given, so --profiler and --dump are ignored")


# ---------------------------------------------------------------------------------------------
# the command line of the module (also what msprof re-runs)

def test_main_accepts_both_spellings_and_prints_the_summary(emu, no_msprof, work, capsys):
    code = cli.main(["infer", "-m", "model.om", "--output=out", "--loop=2", "--warmup_count=0", "--warmup-count=1",
                     "--device", "0", "--batchsize", "2", "--profiler=0", "--display_all_summary", "yes"])
    out, err = capsys.readouterr()
    assert code == 0
    assert out.startswith("[WARNING] EMULATED pyACL")
    assert "[INFO] H2D_latency (ms): min = 0.0" in out and "throughput 1000*batchsize.mean(2)/" in out
    assert err.startswith("Warning: EMULATED pyACL")
    assert emu.call_names().count("acl.mdl.execute") == 3             # the later --warmup-count=1 won
    assert cli.main(["infer", "-m", "model.om", "--profiler", "1", "--dump", "true"]) == 6
    assert capsys.readouterr().err.endswith("Error: --profiler and --dump cannot both be on: profiling and dumping "
                                            "exclude each other (run twice)\n")


# ---------------------------------------------------------------------------------------------
# the real-pyACL path, against a recording stand-in (not CANN: it checks the calls and the bytes)

class _Namespace:
    pass


class RecordingPyAcl:
    """A TEST STAND-IN with pyACL's call shapes: device memory is a dict of bytearrays, the model
    has one 8-byte input of dims [2, 4] and one 8-byte output, and "execute" writes the input
    reversed into the output. It counts what is created and destroyed."""

    def __init__(self):
        self.mem = {}
        self.next = 0x1000
        self.live = {}
        self.calls = []
        self.prof = _Namespace()
        self.prof.init = lambda path: 0                      # pyACL has acl.prof
        self.rt, self.mdl, self.util = _Namespace(), _Namespace(), _Namespace()
        rt, mdl, util = self.rt, self.mdl, self.util
        rt.set_device = lambda d: self._open("device", d, 0)
        rt.reset_device = lambda d: self._close("device", d)
        rt.create_context = lambda d: (self._open("context", self._id(), None), 0)
        rt.destroy_context = lambda c: self._close("context", c)
        rt.malloc = lambda size, policy: (self._alloc("dev", size), 0)
        rt.free = lambda p: self._close("dev", p)
        rt.malloc_host = lambda size: (self._alloc("host", size), 0)
        rt.free_host = lambda p: self._close("host", p)
        rt.memcpy = self._memcpy
        mdl.load_from_file = lambda path: (self._open("model", 1, None), 0)
        mdl.unload = lambda m: self._close("model", m)
        mdl.create_desc = lambda: self._open("desc", self._id(), None)
        mdl.destroy_desc = lambda d: self._close("desc", d)
        mdl.get_desc = lambda desc, model: 0
        mdl.get_num_inputs = lambda desc: 1
        mdl.get_num_outputs = lambda desc: 1
        mdl.get_input_size_by_index = lambda desc, i: 8
        mdl.get_output_size_by_index = lambda desc, i: 8
        mdl.get_input_dims = lambda desc, i: ({"name": "x", "dimCount": 2, "dims": [2, 4]}, 0)
        mdl.create_dataset = lambda: self._open("dataset", self._id(), None)
        mdl.destroy_dataset = lambda d: self._close("dataset", d)
        mdl.add_dataset_buffer = self._add
        mdl.execute = self._execute
        self.create_data_buffer = lambda ptr, size: self._open("buffer", self._id(), None)
        self.destroy_data_buffer = lambda b: self._close("buffer", b)
        util.bytes_to_ptr = lambda blob: self._host_copy(blob)
        util.ptr_to_bytes = lambda ptr, size: bytes(self.mem[ptr][:size])
        self.datasets = {}

    def init(self, path=""):
        self.calls.append("acl.init")
        return 0

    def finalize(self):
        self.calls.append("acl.finalize")
        return 0

    def _id(self):
        self.next += 0x10
        return self.next

    def _open(self, kind, key, result):
        self.calls.append(f"open {kind}")
        self.live[(kind, key)] = True
        return key if result is None else result

    def _close(self, kind, key):
        self.calls.append(f"close {kind}")
        return 0 if self.live.pop((kind, key), None) else 100000

    def _alloc(self, kind, size):
        ptr = self._id()
        self.mem[ptr] = bytearray(size)
        self.live[(kind, ptr)] = True
        return ptr

    def _host_copy(self, blob):
        ptr = self._id()
        self.mem[ptr] = bytearray(blob)
        return ptr

    def _memcpy(self, dst, dst_max, src, count, kind):
        assert count <= dst_max and kind in (1, 2)
        self.mem[dst][:count] = self.mem[src][:count]
        self.calls.append("memcpy h2d" if kind == 1 else "memcpy d2h")
        return 0

    def _add(self, dataset, buffer):
        self.datasets.setdefault(dataset, []).append(buffer)
        return dataset, 0

    def _execute(self, model, inputs, outputs):
        assert len(self.datasets[inputs]) == 1 and len(self.datasets[outputs]) == 1
        dev = sorted(p for (k, p) in self.live if k == "dev")           # input first, then output
        self.mem[dev[1]][:] = bytes(reversed(self.mem[dev[0]]))
        self.calls.append("execute")
        return 0


@pytest.fixture
def stand_in(monkeypatch):
    acl = RecordingPyAcl()
    monkeypatch.setattr(acl_runtime, "_real_acl", lambda: acl)
    return acl


def test_real_path_moves_the_bytes_and_frees_everything(stand_in, no_msprof, work):
    result = inf.infer("model.om", inputs="data/in.bin", output="out", loop=3, warmup_count=1)
    assert not result.emulated
    dev = result.devices[0]
    assert dev.batch == 2                                              # dim 0 of input 0
    assert (len(dev.h2d_latency_list), len(dev.npu_compute_time_list), len(dev.d2h_latency_list)) == (3, 3, 3)
    out_file = os.path.join(result.run_dir, "in_0.bin")
    assert dev.filesinfo == {0: {"infiles": [f"{work}/data/in.bin"], "outfiles": [out_file]}}
    assert open(out_file, "rb").read() == bytes(reversed(range(8)))
    assert stand_in.live == {}                                         # every open has its close
    assert stand_in.calls.count("execute") == 4 and stand_in.calls[-1] == "acl.finalize"
    assert MARKER not in os.listdir(result.run_dir)
    assert json.loads(open(result.summary_files[0]).read())["emulated"] is False
    assert not inf.render_summary(result).startswith("[WARNING]")


def test_real_path_refuses_an_input_of_the_wrong_size_and_still_frees_everything(stand_in, no_msprof, work):
    (work / "data" / "in.bin").write_bytes(b"\0" * 5)
    with pytest.raises(InferOptionError, match="the input holds 5 bytes; the model's input takes 8"):
        inf.infer("model.om", inputs="data/in.bin", output="out")
    assert stand_in.live == {} and stand_in.calls[-1] == "acl.finalize"
    assert os.listdir(work / "out") == []
