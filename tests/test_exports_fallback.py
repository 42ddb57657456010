"""Issue 23 item 5: `show`, `plot` and `compare` on a PROF whose raw data cannot be used read its
exported files instead (mindstudio_profiler_output/ CSVs and timeline, msprof_*.db), with one note
naming those files and why the raw data was not used; a view the exported files cannot give says
so in one line with an exit code.

Unusable raw data: (a) absent (no data/ at all, or no host/ / device_N/ folder), (b) damaged so
that the import refuses it, (c) absent with only msprof_*.db exported; and partial (no device
data: the exported op_summary stands in for the missing report). Real exported files come from
../shared/data/real, copied first (never written)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Dict, Optional, Tuple

import pandas as pd
import pytest

import synth
from conftest import run, tree_hashes
from realdata import copy_real, needs_real
from users import RunAs, bound_by_permissions

from msprof_kit import sources
from msprof_kit.errors import Diagnostics


NAME = "PROF_000001_20231125090304544_EXPORTED"
BOARD = "oam-tools-experience/msprof_cli_matmul_910B3_cann852/20260624_matmul_basic_api_board"
BOARD_OP = "_Z11mmad_customILj256ELj64ELj256ELj128ELj128ELj64ELj256EEvPhS0_S0_"
BOARD_STAMP = "20260624165820"
AS_STRIDED = "cann-learning-hub-as_strided/perf/round_001"
REFUSED = "the raw data cannot be used (host/host_start.log: host_start.log lacks clock_monotonic_raw / cntvct; " \
          "expected both to convert host counter ticks)"
NO_DATA = "no raw data: device_0/ has no data/, host/ has no data/"


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A synthetic 910B PROF imported and exported by msprof-kit (timeline, summaries, msprof_*.db),
    its store then removed: what msprof leaves after `msprof --export`."""
    prof = synth.write_collection(str(tmp_path_factory.mktemp("exported")), chip="910B", n_tasks=30,
                                  model_fraction=0.3, name=NAME)
    from msprof_kit import cli
    for what in ("timeline", "summary"):
        assert cli.main(["export", what, "-dir", prof, "-q"]) == 0
    shutil.rmtree(os.path.join(prof, "sqlite"))
    return prof


def variant(exported: str, dest, kind: str) -> str:
    """A copy of the exported PROF whose raw data is: 'absent' (no data/), 'refused' (host_start.log
    without its sync keys), 'db_only' (absent, and only msprof_*.db exported), 'partial' (no device
    data) or 'refused_csv' (refused, and only the summary CSVs exported)."""
    prof = os.path.join(str(dest), NAME)
    shutil.copytree(exported, prof, ignore=shutil.ignore_patterns("sqlite"))
    if kind in ("absent", "db_only"):
        for d in ("host", "device_0"):
            shutil.rmtree(os.path.join(prof, d, "data"))
    if kind in ("refused", "refused_csv"):
        with open(os.path.join(prof, "host", "host_start.log"), "w") as f:
            f.write("[Host]\nclock_realtime: 1\n")
    if kind == "db_only":
        shutil.rmtree(os.path.join(prof, "mindstudio_profiler_output"))
    if kind == "refused_csv":
        out = os.path.join(prof, "mindstudio_profiler_output")
        for name in os.listdir(out):
            if not name.endswith(".csv"):
                os.remove(os.path.join(out, name))
        for name in os.listdir(prof):
            if name.startswith("msprof_") and name.endswith(".db"):
                os.remove(os.path.join(prof, name))
    if kind == "partial":
        shutil.rmtree(os.path.join(prof, "device_0", "data"))
    return prof


def exported_names(prof: str) -> Dict[str, str]:
    out = os.path.join(prof, "mindstudio_profiler_output")
    names = {n.split("_2")[0]: os.path.join("mindstudio_profiler_output", n) for n in os.listdir(out)} \
        if os.path.isdir(out) else {}
    names["db"] = next(n for n in os.listdir(prof) if n.startswith("msprof_") and n.endswith(".db")) \
        if any(n.endswith(".db") for n in os.listdir(prof)) else ""
    return names


def notes(err: str) -> list:
    return [line for line in err.splitlines() if line.startswith("Note: ")]


# ------------------------------------------------------------------------------------------------
# show


@pytest.mark.parametrize("kind, why, source", [
    ("absent", NO_DATA, "op_summary"),
    ("refused", REFUSED, "op_summary"),
    ("db_only", NO_DATA, "db"),
])
def test_show_prints_the_top_operators_from_the_exports(exported, tmp_path, capsys, kind, why, source):
    prof = variant(exported, tmp_path, kind)
    names = exported_names(prof)
    before = tree_hashes(prof)
    code, out, err = run(["show", "-dir", prof, "-r", "op_summary", "--top", "3"], capsys)
    assert code == 0, err
    assert notes(err) == [f"Note: {prof}: {why}; read from the exported files {names[source]}"]
    assert "Traceback" not in err and "Error" not in err
    assert "Op summary: top 3 of 30 operators" in out and "model/layer_0/Mul_2" in out
    assert tree_hashes(prof) == before and not os.path.exists(os.path.join(prof, "sqlite"))


def test_show_all_reports_names_every_file_read(exported, tmp_path, capsys):
    prof = variant(exported, tmp_path, "refused")
    names = exported_names(prof)
    code, out, err = run(["show", "-dir", prof], capsys)
    assert code == 0, err
    files = ", ".join(names[k] for k in ("op_summary", "op_statistic", "api_statistic", "db"))
    assert notes(err) == [f"Note: {prof}: {REFUSED}; read from the exported files {files}"]
    for title in ("Op summary:", "Op statistic:", "API statistic:", "AI Core frequency:"):
        assert title in out


def test_a_report_the_exports_lack_is_one_error_line(exported, tmp_path, capsys):
    prof = variant(exported, tmp_path, "refused_csv")
    code, out, err = run(["show", "-dir", prof, "-r", "freq"], capsys)
    assert code == 4 and out == ""
    assert err == f"Error: {prof}: no freq data here or below; looked for {sources.LOOKED_FOR_REPORT['freq']}; " \
                  f"{REFUSED}\n"


def test_refused_raw_data_without_exports_stays_an_error(exported, tmp_path, capsys):
    prof = variant(exported, tmp_path, "refused")
    shutil.rmtree(os.path.join(prof, "mindstudio_profiler_output"))
    for name in os.listdir(prof):
        if name.endswith(".db"):
            os.remove(os.path.join(prof, name))
    code, out, err = run(["show", "-dir", prof], capsys)
    assert code == 3 and out == ""
    assert err == f"Error: {prof}/host/host_start.log: host_start.log lacks clock_monotonic_raw / cntvct; " \
                  "expected both to convert host counter ticks\n"


def test_partial_raw_data_takes_the_missing_reports_from_the_exports(exported, tmp_path, capsys):
    prof = variant(exported, tmp_path, "partial")
    names = exported_names(prof)
    code, out, err = run(["show", "-dir", prof, "--top", "2"], capsys)
    assert code == 0, err
    assert notes(err) == [f"Note: {prof}: the raw data gives no op_summary, op_statistic, freq; read from the "
                          f"exported files {names['op_summary']}, {names['op_statistic']}, {names['db']}"]
    assert "model/layer_0/Mul_2" in out
    assert "API statistic: top 2 of 13 APIs" in out and "[sqlite/msprof_kit.db]" in out


def test_exports_made_from_the_store_are_not_read_again(exported, tmp_path, capsys):
    """A host-only collection exported by msprof-kit: its exports came from its store, so nothing
    is taken from them (no note), and the device tables are simply absent."""
    prof = variant(exported, tmp_path, "partial")
    shutil.rmtree(os.path.join(prof, "mindstudio_profiler_output"))
    for name in os.listdir(prof):
        if name.endswith(".db"):
            os.remove(os.path.join(prof, name))
    from msprof_kit import cli
    assert cli.main(["export", "summary", "-dir", prof, "-q"]) == 0
    capsys.readouterr()
    code, out, err = run(["show", "-dir", prof], capsys)
    assert code == 0 and not notes(err)
    assert "Op summary" not in out and "API statistic" in out


# ------------------------------------------------------------------------------------------------
# plot and compare


@pytest.mark.parametrize("kind", ["absent", "refused", "db_only"])
def test_plot_draws_from_the_exports(exported, tmp_path, capsys, kind):
    pytest.importorskip("matplotlib")
    prof = variant(exported, tmp_path, kind)
    before = tree_hashes(prof)
    code, out, err = run(["plot", "-dir", prof, "--out", str(tmp_path / "plots")], capsys)
    assert code == 0, err
    [note] = notes(err)
    assert note.startswith(f"Note: {prof}: ") and "; read from the exported files " in note
    assert "Traceback" not in err
    for name in ("top_operators.png", "time_by_type.png", "gantt.png", "pmu_ratios.png"):
        assert f"Wrote {tmp_path / 'plots' / name}: " in out
    assert tree_hashes(prof) == before and not os.path.exists(os.path.join(prof, "sqlite"))


def test_plot_of_csvs_only_says_what_they_lack(exported, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    prof = variant(exported, tmp_path, "refused_csv")
    code, out, err = run(["plot", "-dir", prof, "--out", str(tmp_path / "plots")], capsys)
    assert code == 0, err
    assert "Skipped freq: no AI Core frequency; looked for " in out
    assert out.splitlines()[-1].endswith("; not in the exported files read instead of the raw data")
    code, out, err = run(["plot", "-dir", prof, "--out", str(tmp_path / "plots"), "--iteration", "1"], capsys)
    assert code == 1 and err.count("\n") == 1 + len(notes(err))
    assert err.splitlines()[-1].startswith(f"Error: --iteration 1: {prof} records no iterations; looked for ")
    assert err.splitlines()[-1].endswith(REFUSED)


@pytest.mark.parametrize("kind", ["absent", "refused", "db_only"])
def test_compare_reads_the_exports(exported, tmp_path, capsys, kind):
    a = variant(exported, tmp_path / "a", kind)
    b = shutil.copytree(exported, str(tmp_path / "b" / NAME))  # imported by the comparison
    code, out, err = run(["compare", "-dir", a, "-dir", b, "--top", "3"], capsys)
    assert code == 0, err
    [note] = notes(err)
    assert note.startswith(f"Note: {a}: ")
    assert "A has 10 op types, B 10: 10 in both" in out
    assert "+0.000" in out  # the same operators, the same times


# ------------------------------------------------------------------------------------------------
# Real exported files in a PROF whose raw data cannot be used


def _prof_with_real_exports(tmp_path, exported: Optional[str]) -> Tuple[str, str]:
    """A PROF holding the real board run's mindstudio_profiler_output: without any raw data (no
    host/ or device_N/), or, with `exported`, beside the refused synthetic raw data."""
    board = copy_real(BOARD, tmp_path / "real")
    if exported is None:
        prof = str(tmp_path / NAME)
        os.makedirs(prof)
    else:
        prof = variant(exported, tmp_path, "refused")
        shutil.rmtree(os.path.join(prof, "mindstudio_profiler_output"))
        for name in os.listdir(prof):
            if name.endswith(".db"):
                os.remove(os.path.join(prof, name))
    shutil.copytree(os.path.join(board, "mindstudio_profiler_output"), os.path.join(prof, "mindstudio_profiler_output"))
    return prof, os.path.join("mindstudio_profiler_output", f"op_summary_{BOARD_STAMP}.csv")


@needs_real
@pytest.mark.parametrize("raw", ["none", "refused"])
def test_real_exports_show_their_top_operator(exported, tmp_path, capsys, raw):
    prof, op_summary = _prof_with_real_exports(tmp_path, exported if raw == "refused" else None)
    code, out, err = run(["show", "-dir", prof, "-r", "op_summary,op_statistic"], capsys)
    assert code == 0, err
    why = REFUSED if raw == "refused" else "no raw data: no host/ or device_N/ folder"
    assert notes(err) == [f"Note: {prof}: {why}; read from the exported files {op_summary}, "
                          f"mindstudio_profiler_output/op_statistic_{BOARD_STAMP}.csv"]
    assert "Op summary: all 1 operator" in out and BOARD_OP in out and "7.840" in out


@needs_real
def test_real_csv_times_with_a_tab_read_as_numbers(tmp_path):
    """Exported CSVs end a time stamp with a TAB (`1782291497409494.520\\t,`); it is a number."""
    prof, op_summary = _prof_with_real_exports(tmp_path, None)
    [found] = sources.discover(prof)
    tables = sources.load(found, Diagnostics())
    raw = pd.read_csv(os.path.join(prof, op_summary), dtype=str)
    assert raw[sources.START].str.endswith("\t").all()
    assert tables.op_rows[sources.START].dtype.kind == "f"
    assert tables.op_rows[sources.START].tolist() == [float(v) for v in raw[sources.START]]
    trace = sources.read_trace(found, Diagnostics(), ops=tables.op_rows)
    assert trace.tasks is not None and trace.tasks[sources.START].dtype.kind == "f"


@needs_real
def test_real_loose_csvs_in_a_prof(tmp_path, capsys):
    """The as_strided run's loose summary CSVs (op_summary.csv, task_time.csv with TAB-ended times)
    as a PROF's exports: the top operator, and its tasks from task_time for the Gantt."""
    src = copy_real(AS_STRIDED, tmp_path / "real")
    prof = str(tmp_path / NAME)
    shutil.copytree(src, os.path.join(prof, "mindstudio_profiler_output"))
    code, out, err = run(["show", "-dir", prof, "-r", "op_summary", "--top", "1"], capsys)
    assert code == 0, err
    assert notes(err) == [f"Note: {prof}: no raw data: no host/ or device_N/ folder; read from the exported files "
                          "mindstudio_profiler_output/op_summary.csv"]
    assert "aclnnInplaceCopy_SliceAiCore_Slice" in out and "258.487" in out
    [found] = sources.discover(prof)
    trace = sources.read_trace(found, Diagnostics(), ("tasks",))
    assert trace.tasks is not None and len(trace.tasks) == 22 and \
        trace.tasks[sources.START].min() == 1778059616756218.655


# ------------------------------------------------------------------------------------------------
# A read-only collection


@pytest.fixture(scope="module")
def reader():
    def runs(who: RunAs) -> Tuple[bool, str]:
        probe = subprocess.run([sys.executable, "-m", "msprof_kit", "--help"], capture_output=True, text=True,
                               preexec_fn=who.apply, cwd="/")
        return probe.returncode == 0, probe.stderr

    with bound_by_permissions("mskf", runs) as who:
        yield who


def test_read_only_collection_is_not_written(exported, tmp_path, reader):
    prof = variant(exported, tmp_path, "refused")
    home = tmp_path / "home"
    home.mkdir()
    os.chmod(home, 0o777)
    if reader is not None and reader.uid is not None:
        for folder in [tmp_path, *[p for p in tmp_path.parents if str(p).startswith(("/tmp/", "/var/tmp/"))]]:
            os.chmod(folder, os.stat(folder).st_mode | 0o055)
    for base, _, files in os.walk(prof):
        for name in files:
            os.chmod(os.path.join(base, name), 0o444)
        os.chmod(base, 0o555)
    before = tree_hashes(prof)
    env = dict(os.environ, HOME=str(home), XDG_CACHE_HOME=str(home / "cache"))
    env.pop("MSPROF_KIT_STORE", None)
    try:
        got = subprocess.run([sys.executable, "-m", "msprof_kit", "show", "-dir", prof, "-r", "op_summary"],
                             capture_output=True, text=True, env=env, cwd=str(home),
                             preexec_fn=reader.apply if reader is not None else None)
    finally:
        for base, _, _ in os.walk(prof):
            os.chmod(base, 0o755)
    assert got.returncode == 0, got.stderr
    assert got.stderr.splitlines() == [f"Note: {prof}: {REFUSED}; read from the exported files "
                                       f"{exported_names(prof)['op_summary']}"]
    assert "model/layer_0/Mul_2" in got.stdout
    assert tree_hashes(prof) == before and not os.path.exists(os.path.join(prof, "sqlite"))
