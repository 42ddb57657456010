"""`show` and `plot` on a cluster analysis output folder (sources/cluster.py, show.render_cluster,
plot/cluster.py): the golden 910b_hccl_8ranks text outputs plus the slow rank and link files, shown
as the CLI prints them."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from conftest import GOLDEN, needs_shared, run

from msprof_kit import show
from msprof_kit.cluster.result import load_text_outputs
from msprof_kit.cluster.slow import write_slow_outputs
from msprof_kit.errors import Diagnostics, NoData
from msprof_kit.sources import cluster as cluster_files

TEXT = os.path.join(GOLDEN, "910b_hccl_8ranks", "msprof_analyze", "text_all")


@pytest.fixture()
def cluster_dir(tmp_path) -> str:
    """A cluster folder holding cluster_analysis_output/ with the four text files and the slow files."""
    if not os.path.isdir(TEXT):
        pytest.skip("../shared/golden is not beside the repo")
    out = tmp_path / "CLUSTER" / "cluster_analysis_output"
    out.mkdir(parents=True)
    for name in os.listdir(TEXT):
        shutil.copyfile(os.path.join(TEXT, name), out / name)
    write_slow_outputs(load_text_outputs(str(out)), str(out))
    return str(tmp_path / "CLUSTER")


@needs_shared
def test_show_table_puts_slow_ranks_and_links_first(cluster_dir, capsys):
    code, out, err = run(["show", "-dir", cluster_dir], capsys)
    assert code == 0, err
    titles = [line for line in out.splitlines() if line.startswith(("Slow ranks", "Slow links", "Cluster ranks"))]
    assert [t.split(":")[0] for t in titles] == ["Slow ranks", "Slow links", "Cluster ranks"]
    lines = out.splitlines()
    first_rank = lines[lines.index(titles[0]) + 3].split()
    first_link = lines[lines.index(titles[1]) + 3].split()
    assert first_rank[0] == "2" and first_link[:2] == ["6-7", "HCCS"]
    assert "all 8 ranks in the slow ranks' order  [cluster_step_trace_time.csv]" in titles[2]


@needs_shared
def test_show_json_per_rank_summary(cluster_dir):
    doc = json.loads(show.render(cluster_dir, Diagnostics(), fmt="json", top=0))
    assert doc["collection"].endswith("cluster_analysis_output")
    assert [r["rank"] for r in doc["slow_ranks"]][:1] == [2]
    assert doc["slow_links"][0]["link"] == "6-7"
    rows = {r["Rank"]: r for r in doc["cluster"]}
    assert list(rows) == [r["rank"] for r in doc["slow_ranks"]]
    two = rows[2]
    assert two["Computing(us)"] == pytest.approx(10044.02, abs=1e-3)
    assert two["Communication(Not Overlapped)(us)"] == pytest.approx(4496.04, abs=1e-3)
    assert two["Free(us)"] == pytest.approx(649.14, abs=1e-3)
    # Total Op Info of rank 2: waits 3.58592 (world) + 0.06036 ms, transits 1.33692 + 0.79344 ms
    wait, transit = 3.58592 + 0.06036, 1.33692 + 0.79344
    assert two["Wait(ms)"] == pytest.approx(wait, abs=1e-3)
    assert two["Wait Ratio"] == pytest.approx(wait / (wait + transit), abs=1e-3)


@needs_shared
def test_show_one_report_as_csv(cluster_dir, capsys):
    code, out, _ = run(["show", "-dir", os.path.join(cluster_dir, "cluster_analysis_output"), "-r", "slow_links",
                        "--format", "csv", "--top", "1"], capsys)
    assert code == 0
    head, first = out.splitlines()
    assert head.startswith("link,transport,bandwidth_gbps,transport_median_gbps,ratio,op_ratio")
    assert first.startswith("6-7,HCCS,9.668,34.374,0.281,")


@needs_shared
def test_without_slow_files_ranks_by_number(cluster_dir):
    folder = os.path.join(cluster_dir, "cluster_analysis_output")
    os.remove(os.path.join(folder, "slow_ranks.csv"))
    os.remove(os.path.join(folder, "slow_links.csv"))
    doc = json.loads(show.render(cluster_dir, Diagnostics(), fmt="json", top=0))
    assert list(doc["sources"]) == ["cluster"]
    assert [r["Rank"] for r in doc["cluster"]] == list(range(8))
    links = cluster_files.link_bandwidth(cluster_files.read_cluster(cluster_dir))
    assert links is not None
    slow = links[(links["src"] == 6) & (links["dst"] == 7) & (links["transport"] == "HCCS")]
    assert float(slow["gbps"].iloc[0]) == pytest.approx(45.8752 / 4.7449)


def test_cluster_report_where_there_is_none(tmp_path, capsys):
    code, _, err = run(["show", "-dir", str(tmp_path), "-r", "cluster"], capsys)
    assert code != 0
    assert err.strip().splitlines()[-1] == (f"Error: {tmp_path}: no cluster analysis output here; looked for "
                                           f"{cluster_files.LOOKED_FOR_CLUSTER}")


@needs_shared
def test_damaged_file_is_one_line(cluster_dir, capsys):
    path = os.path.join(cluster_dir, "cluster_analysis_output", "cluster_communication.json")
    with open(path, "w") as f:
        f.write("{")
    code, _, err = run(["show", "-dir", cluster_dir], capsys)
    assert code != 0
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"Error: {path}: not JSON: ") and "Traceback" not in err


@needs_shared
def test_plot_draws_the_cluster_chart(cluster_dir, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "plots"
    code, stdout, err = run(["plot", "-dir", cluster_dir, "--out", str(out)], capsys)
    assert code == 0, err
    assert stdout.strip() == f"Wrote {out}/cluster.png: 8 ranks and 16 links"
    with open(out / "cluster.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_plot_without_step_trace_says_why(tmp_path):
    pytest.importorskip("matplotlib")
    from msprof_kit import plot
    folder = tmp_path / "cluster_analysis_output"
    folder.mkdir()
    (folder / "cluster_communication.json").write_text("{}")
    with pytest.raises(NoData) as err:
        plot.plot(str(tmp_path), str(tmp_path / "out"))
    assert str(err.value) == (f"{folder}: nothing to plot: no cluster_step_trace_time.csv; no links in "
                              "cluster_communication_matrix.json or slow_links.csv")
