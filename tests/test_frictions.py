"""Issue 22 item 5: small frictions of the CLI, each as a user meets it.

a. `plot --out` and `compare --plot --out` a folder that cannot be written: one line, exit 10;
b. `export db` after an export that wrote msprof_{ts}.db from the same store says it is current;
c. `export summary --format json` on the 910B family says in one line that it writes CSV;
d. `collect` takes `--task-time` and `--task_time` alike, and shows the dashed one;
e. `export` without WHAT prints export's help;
g. an empty folder is "no data" (exit 4) under every command.
(f, the emulator's `infer --profiler 1`, is in tests/test_infer.py.)
"""
from __future__ import annotations

import glob
import os
import sqlite3

import pytest

from msprof_kit import cli, store
from msprof_kit.errors import NoData, NotACollection

import synth
from conftest import run


def _dbs(prof):
    return sorted(glob.glob(os.path.join(prof, "msprof_*.db")))


# --- a. charts into a folder that cannot be written ------------------------------------------------

def test_plot_into_an_unwritable_folder_is_one_line_exit_10(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    prof = synth.write_collection(str(tmp_path / "in"), chip="910B", n_tasks=20, seed=1)
    blocker = tmp_path / "a_file"
    blocker.write_text("in the way")   # a file where a folder should be: unwritable even for root
    code, out, err = run(["plot", "-dir", prof, "--out", str(blocker / "charts")], capsys)
    assert code == 10 and out == ""
    assert err == f"Error: {blocker / 'charts'}: cannot write the chart top_operators.png (Not a directory)\n"


def test_compare_plot_into_an_unwritable_folder_is_one_line_exit_10(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    prof = synth.write_collection(str(tmp_path / "in"), chip="910B", n_tasks=20, seed=1)
    blocker = tmp_path / "a_file"
    blocker.write_text("in the way")
    code, _, err = run(["compare", "-dir", prof, "-dir", prof, "--plot", "--out", str(blocker)], capsys)
    assert code == 10
    assert err == f"Error: {blocker}: cannot write the chart compare_by_type.png (a file is in the way of the " \
                  "folder)\n"


# --- b. msprof_{ts}.db written once ----------------------------------------------------------------

def test_export_db_after_summary_says_current(tmp_path, capsys):
    prof = synth.write_collection(str(tmp_path), chip="910B", n_tasks=40, seed=7)
    assert run(["import", "-dir", prof], capsys)[0] == 0
    assert run(["export", "summary", "-dir", prof], capsys)[0] == 0
    first = _dbs(prof)
    assert len(first) == 1
    code, out, err = run(["export", "db", "-dir", prof], capsys)
    assert code == 0 and err == ""
    assert out == f"{first[0]} is current: made from this store, not written again\n"
    assert _dbs(prof) == first
    # the header names the store it was made from; the tables are the reference's
    with sqlite3.connect(first[0]) as conn:
        assert conn.execute("PRAGMA application_id").fetchone()[0] == store.DB_APPLICATION_ID
        assert conn.execute("PRAGMA user_version").fetchone()[0] == store.store_identity(prof)


def test_a_new_import_makes_the_db_stale(tmp_path, capsys):
    prof = synth.write_collection(str(tmp_path), chip="910B", n_tasks=40, seed=7)
    assert run(["import", "-dir", prof], capsys)[0] == 0
    code, out, _ = run(["export", "db", "-dir", prof], capsys)
    assert code == 0 and out.startswith("Wrote ")
    first = _dbs(prof)
    assert store.current_db(prof) == first[0]
    assert run(["import", "-dir", prof], capsys)[0] == 0   # the store is replaced: another identity
    assert store.current_db(prof) is None
    os.rename(first[0], first[0].replace("msprof_2", "msprof_1"))   # older than the one to come
    code, out, _ = run(["export", "db", "-dir", prof], capsys)
    assert code == 0 and out.startswith("Wrote ") and len(_dbs(prof)) == 2


def test_a_db_msprof_kit_did_not_make_is_not_current(tmp_path, capsys):
    prof = synth.write_collection(str(tmp_path), chip="910B", n_tasks=40, seed=7)
    assert run(["import", "-dir", prof], capsys)[0] == 0
    foreign = os.path.join(prof, "msprof_29991231235959.db")
    sqlite3.connect(foreign).execute("CREATE TABLE TASK (x)").connection.close()
    code, out, _ = run(["export", "db", "-dir", prof], capsys)
    assert code == 0 and out.startswith("Wrote ") and len(_dbs(prof)) == 2


# --- c. --format json on the 910B family -----------------------------------------------------------

def test_format_json_on_910b_warns_in_one_line(tmp_path, capsys):
    prof = synth.write_collection(str(tmp_path), chip="910B", n_tasks=40, seed=7)
    code, out, err = run(["export", "summary", "-dir", prof, "--format", "json"], capsys)
    assert code == 0
    assert err == f"Warning: {prof}: --format json: on the 910B family msprof's C++ exporters write the " \
                  "summaries as CSV whatever the format, and so does msprof-kit (docs/exports.md)\n"
    assert "op_summary_" in out and ".csv" in out


def test_format_json_on_310p_writes_json_without_a_warning(tmp_path, capsys):
    prof = synth.write_collection(str(tmp_path), chip="310P", n_tasks=40, seed=7)
    code, out, err = run(["export", "summary", "-dir", prof, "--format", "json"], capsys)
    assert code == 0 and err == ""
    assert glob.glob(os.path.join(prof, "mindstudio_profiler_output", "op_summary_*.json"))


# --- d. both spellings of every acl.json option of collect -----------------------------------------

@pytest.mark.parametrize("spelling", ["--task-time", "--task_time"])
def test_collect_takes_both_spellings(spelling):
    args = cli._parser().parse_args(["collect", "--application", "true", spelling, "l1",
                                     "--aic-metrics" if spelling == "--task-time" else "--aic_metrics", "Memory"])
    assert args.cann_task_time == "l1" and args.cann_aic_metrics == "Memory"
    soc = cli._parser().parse_args(["collect", "-m", "main", "--aac-metrics", "Memory", "--acl_api", "off"])
    assert soc.soc_aac_metrics == "Memory" and soc.soc_acl_api == "off"


def test_collect_help_shows_the_dashed_spelling(capsys):
    with pytest.raises(SystemExit):
        cli.main(["collect", "--help"])
    text = capsys.readouterr().out
    assert "--task-time V" in text and "--aic-metrics V" in text and "--sys-cpu-freq V" in text
    assert "--task_time" not in text and "--aic_metrics" not in text


# --- e. export without WHAT ------------------------------------------------------------------------

def test_export_alone_prints_exports_help(capsys):
    code, out, _ = run(["export"], capsys)
    assert code == 1 and out.startswith("usage: msprof-kit export ")
    assert "timeline" in out and "summary" in out and "query" not in out


# --- g. an empty folder: exit 4 under every command ------------------------------------------------

@pytest.mark.parametrize("argv", [["show"], ["plot"], ["import"], ["query"], ["export", "summary"],
                                  ["export", "timeline"], ["export", "db"]])
def test_an_empty_folder_is_no_data_everywhere(argv, tmp_path, capsys):
    if argv == ["plot"]:
        pytest.importorskip("matplotlib")
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = run([*argv, "-dir", str(empty), *(["--out", str(tmp_path / "o")] if argv == ["plot"] else [])],
                         capsys)
    assert code == NoData.exit_code == 4 and out == ""
    assert err.startswith(f"Error: {empty}: ") and err.count("\n") == 1


def test_an_empty_folder_is_no_data_for_compare_and_the_default_dir(tmp_path, capsys, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run(["compare", "-dir", str(empty), "-dir", str(empty)], capsys)[0] == 4
    monkeypatch.chdir(empty)
    assert run(["show"], capsys)[0] == 4


def test_a_missing_path_or_a_file_stays_a_path_error(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    for argv in (["show"], ["import"]):
        assert run([*argv, "-dir", str(tmp_path / "nope")], capsys)[0] == 2
        assert run([*argv, "-dir", str(tmp_path / "f")], capsys)[0] == 2


def test_the_no_collection_error_is_still_a_not_a_collection():
    from msprof_kit.errors import NoCollection
    assert issubclass(NoCollection, NotACollection) and NoCollection.exit_code == 4
