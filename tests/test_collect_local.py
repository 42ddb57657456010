"""collect_local against a real compiled program (tests/collector_programs/fake_acl_app.c).

The program is built here with the system gcc (nothing binary is committed). It really reads the
acl.json the collector wrote (from ./acl.json or the path in its argv), applies the runtime's rules
(spec/collectors.md §2.2, §2.3), writes a PROF_xxx (CANN build) or JOBxxx (SoC build) directory
into `output` or, when that is missing or not writable, into its own directory, and exits 1 with
the ACL code on stderr when aclInit fails. Only the Ascend runtime is stood in for: processes,
exit statuses, signals, timeouts, file placement and the import/export of `--all` are real.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import COMPARE, GOLDEN, copy_input, needs_shared, stop_with_signal
from test_acljson import CANN_BAD, CANN_GOOD, SOC_BAD, SOC_GOOD

from msprof_kit import cli
from msprof_kit.collectors import acljson
from msprof_kit.collectors.acljson import cann_profiler_config, dumps_acl_json, soc_profiler_config
from msprof_kit.collectors.local import PROF_NAME, collect_local
from msprof_kit.errors import (AclJsonError, ApplicationError, ApplicationTimeout, BadOption, Diagnostics,
                               NoNewCollection)

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "collector_programs", "fake_acl_app.c")
GCC = shutil.which("gcc")
pytestmark = pytest.mark.skipif(GCC is None, reason="gcc is not installed")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """{'cann': path, 'soc': path}: the program compiled in both flavours."""
    out = tmp_path_factory.mktemp("fake_acl_build")
    exes = {}
    for flavour, defines in (("cann", []), ("soc", ["-DSOC_FLAVOUR"])):
        exe = str(out / f"{flavour}_app")
        subprocess.run([GCC, "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", *defines, "-o", exe, SOURCE],
                       check=True, capture_output=True, text=True)
        exes[flavour] = exe
    return exes


def install(built, flavour, folder) -> str:
    """A copy of the program as `folder/main` (its directory is the runtime's fallback output)."""
    os.makedirs(folder, exist_ok=True)
    exe = os.path.join(folder, "main")
    shutil.copy2(built[flavour], exe)
    return exe


@pytest.fixture
def app(built, tmp_path, monkeypatch):
    """The CANN program in tmp/bin/main, run from tmp/run (the cwd)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    monkeypatch.chdir(run_dir)
    return install(built, "cann", str(tmp_path / "bin"))


@pytest.fixture
def soc_dir():
    """A scratch directory whose path holds only letters, digits and _ (the SoC path rule)."""
    path = tempfile.mkdtemp(prefix="msk_soc_", dir="/tmp")
    assert re.fullmatch(r"[A-Za-z0-9_/]+", path)
    yield path
    shutil.rmtree(path)


@pytest.fixture
def read_only_dir(tmp_path):
    """A directory nobody can write into: a read-only bind mount when running as root (root ignores
    mode bits), else mode 0555."""
    path = tmp_path / "readonly"
    path.mkdir()
    if os.geteuid() != 0:
        path.chmod(0o555)
        yield str(path)
        path.chmod(0o755)
        return
    mounted = subprocess.run(["mount", "--bind", str(path), str(path)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip("cannot make a read-only directory as root here (mount --bind failed)")
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], capture_output=True).returncode != 0:
            pytest.skip("cannot remount read-only here")
        yield str(path)
    finally:
        subprocess.run(["umount", str(path)], check=True)


def children(path) -> list:
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


# ---------------------------------------------------------------------------------------------
# The Python schema and the program agree on every key rule


def run_direct(exe, config_text, cwd) -> subprocess.CompletedProcess:
    with open(os.path.join(cwd, "acl.json"), "w", encoding="utf-8") as f:
        f.write(config_text)
    return subprocess.run([exe], cwd=cwd, capture_output=True, text=True)


def verdict_cases():
    for flavour, good, bad in (("cann", CANN_GOOD, CANN_BAD), ("soc", SOC_GOOD, SOC_BAD)):
        for key, values in good.items():
            for v in values:
                yield flavour, {key: v}
        for key, values in bad.items():
            for v in values:
                yield flavour, {key: v}
    for flavour, config in [("cann", {"bogus": "on"}), ("soc", {"aicpu": "on"}), ("cann", {"aicpu": 1}),
                            ("cann", {"switch": "ON"}), ("cann", {"aic_metrics": ""}), ("soc", {"interval": 1.5}),
                            ("soc", {"aac_metrics": "PipeUtilization"}), ("cann", {"aicpu": None}),
                            ("cann", {"instr_profiling": "on", "aicpu": "on"}),
                            ("cann", {"instr_profiling": "on", "aicpu": "off"})]:
        yield flavour, config


def test_python_verdicts_match_the_program(built, tmp_path):
    """For every value of the schema tables (plus type and policy cases), with the switch off:
    where Python says the runtime returns 100000, the program's aclInit fails with 100000; where
    Python accepts, or refuses only on msprof-kit's policy (acl_code None), the program succeeds."""
    checked = 0
    for flavour, config in verdict_cases():
        section = {"switch": "off", **config}
        try:
            acljson.validate(section, flavour)
            expected = None
        except AclJsonError as exc:
            expected = exc.acl_code
        res = run_direct(built[flavour], json.dumps({"profiler": section}), str(tmp_path))
        if expected is None:
            assert res.returncode == 0, (flavour, config, res.stderr)
        else:
            assert res.returncode == 1, (flavour, config)
            assert f"ret = {expected}" in res.stderr, (flavour, config, res.stderr)
        checked += 1
    assert checked > 250


def test_program_reports_missing_and_malformed_files(built, tmp_path):
    res = subprocess.run([built["cann"], "--acl", str(tmp_path / "none.json")], capture_output=True, text=True)
    assert res.returncode == 1 and "aclInit failed, ret = 100003" in res.stderr
    res = run_direct(built["cann"], '{"profiler": {"switch": "on",', str(tmp_path))
    assert res.returncode == 1 and "aclInit failed, ret = 100006" in res.stderr
    res = run_direct(built["soc"], '{"dump": {"dump_list": [{"model_name": "m"}]}}', str(tmp_path))
    assert res.returncode == 0 and "profiling off" in res.stdout


# ---------------------------------------------------------------------------------------------
# collect_local


def test_switch_on_absolute_output(app, tmp_path, capfd):
    out = tmp_path / "prof_out"
    out.mkdir()
    diag = Diagnostics()
    found = collect_local(f"{app} --echo-config", cann_profiler_config(task_time="l1"), output=str(out),
                          diag=diag)
    assert len(found) == 1 and os.path.dirname(found[0]) == str(out)
    name = os.path.basename(found[0])
    assert PROF_NAME.fullmatch(name) and len(name) == 46
    assert children(found[0]) == ["device_0", "host"]
    assert "end_info.0" in children(os.path.join(found[0], "device_0"))
    assert diag.warnings == []
    assert not os.path.exists("acl.json")  # the file it wrote in the cwd is gone again
    stdout = capfd.readouterr().out
    echoed = stdout.split("----- acl.json -----\n")[1]
    assert echoed == dumps_acl_json({"switch": "on", "task_time": "l1", "output": str(out)})
    assert "[fake_acl_app] read acl.json: profiling on" in stdout


@pytest.mark.parametrize("profiler", [{"switch": "off"}, {"aicpu": "on"}], ids=["off", "missing"])
def test_switch_off_or_missing_runs_without_profiling(app, tmp_path, capfd, profiler):
    out = tmp_path / "prof_out"
    out.mkdir()
    diag = Diagnostics()
    assert collect_local(app, profiler, output=str(out), diag=diag) == []
    assert children(out) == [] and children(tmp_path / "bin") == ["main"]
    assert diag.warnings == ['the profiler switch is not "on": the program runs without profiling and no '
                             "collection is expected"]
    assert "profiling off" in capfd.readouterr().out
    assert not os.path.exists("acl.json")


def test_unknown_key_is_refused_before_running(app, tmp_path, capfd):
    with pytest.raises(AclJsonError) as info:
        collect_local(app, {"switch": "on", "task_tme": "on"}, output=str(tmp_path))
    assert info.value.acl_code == 100000 and info.value.key == "task_tme"
    assert not os.path.exists("acl.json")
    assert capfd.readouterr().out == ""  # the program never ran


def test_bad_path_characters_are_refused_before_running(app, tmp_path, capfd):
    with pytest.raises(AclJsonError) as info:
        collect_local(app, cann_profiler_config(), output=str(tmp_path / "a;rm -rf x"))
    assert info.value.key == "output" and info.value.acl_code == 100000
    assert "expected a path without ;" in str(info.value)
    assert capfd.readouterr().out == "" and not os.path.exists("acl.json")
    assert not (tmp_path / "a;rm -rf x").exists()


def test_relative_output_is_resolved_from_the_cwd(app, tmp_path, capfd):
    found = collect_local(f"{app} --echo-config", cann_profiler_config(), output="rel_out")
    assert [os.path.dirname(p) for p in found] == [str(tmp_path / "run" / "rel_out")]
    assert '"output": "rel_out"' in capfd.readouterr().out  # written as given: the program resolves it


def test_missing_output_is_created(app, tmp_path):
    out = tmp_path / "new" / "deeper"
    found = collect_local(app, cann_profiler_config(), output=str(out))
    assert [os.path.dirname(p) for p in found] == [str(out)]


def test_output_that_cannot_be_created_falls_back_to_the_program_dir(app, tmp_path, read_only_dir):
    out = os.path.join(read_only_dir, "sub")
    diag = Diagnostics()
    found = collect_local(app, cann_profiler_config(), output=out, diag=diag)
    assert [os.path.dirname(p) for p in found] == [str(tmp_path / "bin")]
    assert diag.warnings[0].startswith(f"{out}: cannot create the output directory (")
    assert diag.warnings[1] == f"{found[0]}: the runtime wrote into the program's directory instead of {out}"


def test_read_only_output_falls_back_to_the_program_dir(app, tmp_path, read_only_dir, capfd):
    diag = Diagnostics()
    found = collect_local(app, cann_profiler_config(), output=read_only_dir, diag=diag)
    assert [os.path.dirname(p) for p in found] == [str(tmp_path / "bin")]
    assert diag.warnings == [
        f"{read_only_dir}: the output is not a writable directory; the runtime writes into the program's "
        f"directory {tmp_path / 'bin'}",
        f"{found[0]}: the runtime wrote into the program's directory instead of {read_only_dir}"]
    assert "is missing or not writable" in capfd.readouterr().err  # the program's own message, passed through


def test_no_output_key_means_the_program_dir(app, tmp_path):
    found = collect_local(app, {"switch": "on"})
    assert [os.path.dirname(p) for p in found] == [str(tmp_path / "bin")]


def test_two_runs_into_one_directory_pick_the_new_one(app, tmp_path):
    out = tmp_path / "prof_out"
    out.mkdir()
    # an older collection whose mtime is in the future: discovery must not go by mtimes
    old = out / "PROF_000001_20200101000000000_00000001ABCDEFGH"
    (old / "host").mkdir(parents=True)
    future = time.time() + 3600
    os.utime(old, (future, future))
    first = collect_local(app, cann_profiler_config(), output=str(out))
    second = collect_local(app, cann_profiler_config(), output=str(out))
    assert len(first) == len(second) == 1 and first != second
    assert children(out) == sorted([old.name, os.path.basename(first[0]), os.path.basename(second[0])])


def test_crash_is_a_clear_error_and_names_the_partial_collection(app, tmp_path):
    out = tmp_path / "prof_out"
    (tmp_path / "run" / "acl.json").write_text('{"dump": {}}')
    with pytest.raises(ApplicationError) as info:
        collect_local(f"{app} --crash", cann_profiler_config(), output=str(out))
    partial = os.path.join(str(out), children(out)[0])
    assert str(info.value) == f"{app}: the program was killed by SIGSEGV (it crashed); it left {partial}"
    assert info.value.exit_code == 7
    assert (tmp_path / "run" / "acl.json").read_text() == '{"dump": {}}'  # put back


def test_non_zero_exit_is_a_clear_error(app, tmp_path):
    with pytest.raises(ApplicationError) as info:
        collect_local(f"{app} --exit 3", cann_profiler_config(), output=str(tmp_path / "o"))
    assert str(info.value).startswith(f"{app}: the program exited with status 3; it left {tmp_path / 'o'}/PROF_")


def test_program_reading_another_path_fails_with_its_acl_code(app, tmp_path):
    """acl.json written where the program does not look: its aclInit fails (100003), and the error
    quotes the program's last stderr line."""
    with pytest.raises(ApplicationError) as info:
        collect_local(app, cann_profiler_config(), output=str(tmp_path / "o"),
                      acl_json_path=str(tmp_path / "elsewhere.json"))
    assert str(info.value) == (f"{app}: the program exited with status 1: aclInit failed, ret = 100003: "
                               "cannot open acl.json: No such file or directory")
    assert not (tmp_path / "elsewhere.json").exists()


def test_explicit_acl_json_path_like_the_samples(built, tmp_path, monkeypatch, capfd):
    """The CANN samples run from out/ and read ../src/acl.json."""
    (tmp_path / "src").mkdir()
    old_text = '{"profiler": {"switch": "off"}, "dump": {"dump_path": "x"}}\n'
    (tmp_path / "src" / "acl.json").write_text(old_text)
    os.chmod(tmp_path / "src" / "acl.json", 0o604)
    exe = install(built, "cann", str(tmp_path / "out"))
    monkeypatch.chdir(tmp_path / "out")
    diag = Diagnostics()
    found = collect_local("./main --acl ../src/acl.json", cann_profiler_config(), output="../prof",
                          acl_json_path="../src/acl.json", diag=diag)
    assert [os.path.dirname(p) for p in found] == [str(tmp_path / "prof")]
    assert (tmp_path / "src" / "acl.json").read_text() == old_text
    assert stat.S_IMODE(os.stat(tmp_path / "src" / "acl.json").st_mode) == 0o604
    assert diag.warnings == [f"{tmp_path / 'src' / 'acl.json'}: the existing acl.json's other sections (dump) "
                             "are not used during the profiling run; the file is put back afterwards"]
    assert "read ../src/acl.json: profiling on" in capfd.readouterr().out
    assert os.path.samefile(exe, tmp_path / "out" / "main")


def test_quoted_arguments_are_split_like_a_shell(built, tmp_path, monkeypatch):
    folder = tmp_path / "with space"
    exe = install(built, "cann", str(folder / "bin"))
    monkeypatch.chdir(tmp_path)
    found = collect_local(f"'{exe}' --acl 'with space/acl.json'", cann_profiler_config(),
                          output=str(tmp_path / "o"), acl_json_path=str(folder / "acl.json"))
    assert len(found) == 1


def test_timeout_kills_the_program(app, tmp_path):
    started = time.monotonic()
    out = tmp_path / "o"
    with pytest.raises(ApplicationTimeout) as info:
        collect_local(f"{app} --sleep 30", cann_profiler_config(), output=str(out), timeout=0.5)
    assert time.monotonic() - started < 10
    (partial,) = children(out)  # made at "aclInit", before the sleep; its name carries the pid
    assert str(info.value) == (f"{app}: the program ran longer than the 0.5 s timeout and was killed; "
                               f"it left {out / partial}")
    assert info.value.exit_code == 7
    pid = int(PROF_NAME.fullmatch(partial) and partial.split("_")[3][:8])
    assert not os.path.exists(f"/proc/{pid}")  # killed and reaped
    assert not os.path.exists("acl.json")


def test_no_timeout_means_waiting(app, tmp_path):
    found = collect_local(f"{app} --sleep 0.3", cann_profiler_config(), output=str(tmp_path / "o"), timeout=0)
    assert len(found) == 1


def test_missing_or_not_executable_program(app, tmp_path):
    with pytest.raises(ApplicationError, match="no such program on PATH"):
        collect_local("no_such_program_xyz", cann_profiler_config())
    script = tmp_path / "run" / "plain.txt"
    script.write_text("x")
    with pytest.raises(ApplicationError) as info:
        collect_local(str(script), cann_profiler_config())
    assert str(info.value) == f"{script}: the program is not executable (chmod +x it)"
    with pytest.raises(BadOption):
        collect_local("", cann_profiler_config())
    with pytest.raises(BadOption, match="cannot split"):
        collect_local(f"{app} 'unbalanced", cann_profiler_config())
    assert not os.path.exists("acl.json")


def test_program_that_ignores_acl_json_gives_no_new_collection(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(NoNewCollection) as info:
        collect_local("true", cann_profiler_config(), output=str(tmp_path / "o"))
    assert "no new PROF_xxx or JOBxxx directory appeared" in str(info.value)
    assert info.value.exit_code == 4
    assert not (tmp_path / "acl.json").exists()


def test_soc_flavour_writes_a_job_dir(built, soc_dir, monkeypatch, capfd):
    exe = install(built, "soc", os.path.join(soc_dir, "project"))
    monkeypatch.chdir(os.path.join(soc_dir, "project"))
    out = os.path.join(soc_dir, "profiling")
    os.mkdir(out)
    found = collect_local("./main --echo-config", soc_profiler_config(interval=2), output=out)
    assert len(found) == 1 and os.path.basename(found[0]).startswith("JOB")
    assert children(found[0]) == ["data", "end_info.0", "info.json.0", "start_info.0"]
    assert json.load(open(os.path.join(found[0], "info.json.0")))["fake_acl_app"] == "synthetic"
    echoed = capfd.readouterr().out.split("----- acl.json -----\n")[1]
    assert json.loads(echoed)["profiler"] == {"switch": "on", "output": out, "aacpu": "on",
                                              "aac_metrics": "ArithmeticUtilization", "acl_api": "on",
                                              "interval": "2"}
    assert os.path.dirname(exe) == os.getcwd()


@needs_shared
def test_all_imports_and_exports_the_new_collection(app, tmp_path, capsys):
    """--all end to end: the program's payload is a copy of the golden min_910b input, so the real
    importer and exporters run on what it wrote, and the exports equal the reference's."""
    payload = copy_input("min_910b", str(tmp_path / "payload"))
    out = tmp_path / "prof_out"
    diag = Diagnostics()
    found = collect_local(f"{app} --payload {payload}", cann_profiler_config(), output=str(out), diag=diag)
    assert len(found) == 1 and os.path.isdir(found[0])
    written = cli.import_and_export(found, diag)  # the CLI's --all pipeline
    assert all(os.path.isfile(p) for p in written) and len(written) > 4
    exported = children(os.path.join(found[0], "mindstudio_profiler_output"))
    for prefix in ("op_summary_", "op_statistic_", "api_statistic_", "task_time_", "msprof_"):
        assert any(n.startswith(prefix) for n in exported), (prefix, exported)
    assert os.path.isfile(os.path.join(found[0], "sqlite", "msprof_kit.db"))
    capsys.readouterr()
    res = subprocess.run([sys.executable, COMPARE, found[0],
                          os.path.join(GOLDEN, "min_910b"), "--kinds",
                          "op_summary,op_statistic,api_statistic,task_time,timeline"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.strip().splitlines()[-1].startswith("verdict: equal")


@needs_shared
def test_the_cli_collects_imports_and_exports_in_one_command(app, tmp_path, capsys):
    """`msprof-kit collect --application "CMD" --all`: the program's acl.json carries the CLI's
    keys, and the new collection is imported and exported."""
    from msprof_kit import cli

    payload = copy_input("min_910b", str(tmp_path / "payload"))
    out = tmp_path / "cli_out"
    code = cli.main(["collect", "--application", f"{app} --payload {payload}", "--output", str(out),
                     "--task_time", "l1", "--aic_metrics", "PipeUtilization", "--all"])
    stdout, err = capsys.readouterr()
    assert code == 0, err
    collected = [line.split(" ", 1)[1] for line in stdout.splitlines() if line.startswith("Collected ")]
    assert len(collected) == 1 and os.path.dirname(collected[0]) == str(out)
    assert any(line.startswith("Wrote ") and "op_summary_" in line for line in stdout.splitlines())
    assert not os.path.exists(os.path.join(os.getcwd(), "acl.json"))  # the acl.json it wrote is gone


def test_the_cli_refuses_a_bad_key_value_before_running_anything(app, tmp_path, capsys):
    from msprof_kit import cli

    marker = tmp_path / "ran"
    code = cli.main(["collect", "--application", f"touch {marker}", "--output", str(tmp_path),
                     "--task_time", "bogus"])
    err = capsys.readouterr().err
    assert code == 6 and err.count("\n") == 1 and "task_time" in err and not marker.exists()


def test_the_cli_imports_nothing_after_a_run_with_the_switch_off(tmp_path, monkeypatch, capsys):
    """`collect --switch off --all`: a directory the run left is listed, but not imported (the run
    was not profiled); the --all pipeline runs only on profiled collections."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    prof = out / "PROF_000001_20240101000000000_ABCDEFGH"
    program = tmp_path / "writes_a_prof.sh"
    program.write_text(f'#!/bin/sh\nmkdir -p "{prof}/host"\n')
    program.chmod(0o755)
    code = cli.main(["collect", "--application", str(program), "--output", str(out), "--switch", "off", "--all"])
    stdout, err = capsys.readouterr()
    assert code == 0, err
    assert stdout == f"Collected {prof}\n"
    assert 'the profiler switch is not "on"' in err
    assert sorted(os.listdir(prof)) == ["host"]  # no store, no exports


# ------------------------------------------------------------------------------------------------
# Issue 21: SIGTERM and SIGHUP clean up as Ctrl-C does; a linked acl.json stays a link


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_sigterm_kills_the_program_and_restores_acl_json(app, tmp_path, signame):
    original = b'{"dump": {"dump_path": "/keep/me"}}\n'
    with open("acl.json", "wb") as f:
        f.write(original)
    os.chmod("acl.json", 0o604)
    out = tmp_path / "o"
    proc = subprocess.Popen([sys.executable, "-m", "msprof_kit", "collect", "--application", f"{app} --sleep 60",
                             "--output", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (out.exists() and children(out)):  # past "aclInit"
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        (partial,) = children(out)
        pid = int(partial.split("_")[3][:8])
        assert os.path.exists(f"/proc/{pid}")
    except BaseException:
        os.killpg(proc.pid, 9)
        proc.wait()
        raise
    stop_with_signal(proc, signame)
    with open("acl.json", "rb") as f:
        assert f.read() == original  # byte for byte, with its mode
    assert stat.S_IMODE(os.stat("acl.json").st_mode) == 0o604
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{pid}")  # the program was killed with its group


def test_a_linked_acl_json_is_written_through_and_stays_a_link(app, tmp_path):
    conf = tmp_path / "conf"
    conf.mkdir()
    target = conf / "acl.json"
    original = b'{"profiler": {"switch": "off"}}\n'
    target.write_bytes(original)
    os.symlink(str(target), "acl.json")
    found = collect_local(f"{app} --echo-config", cann_profiler_config(), output=str(tmp_path / "o"))
    assert len(found) == 1
    assert os.path.islink("acl.json") and os.readlink("acl.json") == str(target)
    assert target.read_bytes() == original
    assert [n for n in os.listdir(conf) if n != "acl.json"] == []  # no temp file left beside the target
