"""Issue 7, part 1: `plot` draws each kind as a PNG of the promised size, from raw (PROF and JOB)
and exported-only collections, and says why it skips a kind; plus the reading layer it adds to
sources/ (intervals, iterations) and the Gantt's merging of tasks finer than a pixel."""
from __future__ import annotations

import os
import shutil

import numpy as np
import pandas as pd
import pytest

from msprof_kit import plot
from msprof_kit.plot import drawing, gantt, operators
from msprof_kit.plot import run as plot_run
from msprof_kit import sources
from msprof_kit.errors import BadOption, Diagnostics, InvalidIteration
from msprof_kit.importer import imported_paths

from realdata import copy_real, needs_real
from conftest import GOLDEN, copy_input, needs_shared, run, tree_hashes
import synth

# matplotlib is an install requirement (setup.cfg install_requires); skip only where it is not there yet
pytest.importorskip("matplotlib", reason="matplotlib is not installed (setup.cfg install_requires lists it)")

TORCH_MLP = "oam-tools-experience/torch_npu_mlp_cann910"
PT_LEVEL1_RANK0 = "msinsight-testdata/test_data_pytorch/text/level1/rank0_ascend_pt"
MINDINSIGHT = "mindinsight-prof910a-timeline"


def read_png(path: str) -> np.ndarray:
    """The decoded pixels (height, width, channels)."""
    try:
        from PIL import Image
    except ImportError:
        import matplotlib.image
        return np.asarray(matplotlib.image.imread(path))
    with Image.open(path) as img:
        img.load()
        return np.asarray(img)


def check_png(path: str, kind: str) -> None:
    assert os.path.isfile(path), path
    pixels = read_png(path)
    width, height = plot.SIZES[kind]
    assert pixels.shape[:2] == (height, width), (path, pixels.shape)
    # not blank: a chart has dark text and coloured bars on the white background
    rgb = pixels[..., :3]
    rgb = (rgb * 255).astype(np.uint32) if rgb.dtype.kind == "f" else rgb.astype(np.uint32)
    colours = np.unique((rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2])
    assert len(colours) > 20


# the kinds drawn for a collection with operators but no communication (HCCL) ops: all but communication
OP_FILES = {k: v for k, v in plot.FILE_NAMES.items() if k not in ("communication", "memory")}


def written(lines):
    return {os.path.basename(line.split(": ")[0][len("Wrote "):]): line for line in lines if line.startswith("Wrote ")}


def skipped(lines):
    return {line.split(":")[0][len("Skipped "):].split(" ")[0]: line for line in lines if line.startswith("Skipped ")}


@pytest.fixture(scope="module")
def steps_plots(tmp_path_factory):
    """910b_steps (iterations, recorded frequency, PMU): every kind drawn."""
    if not os.path.isdir(GOLDEN):
        pytest.skip("../shared/golden is not beside the repo")
    root = tmp_path_factory.mktemp("steps")
    prof = copy_input("910b_steps", str(root / "in"))
    out = str(root / "plots")
    return prof, out, plot.plot(prof, out, top=10, iteration=None, diag=Diagnostics(), ensure=imported_paths)


@needs_shared
def test_every_kind_is_drawn_at_its_size(steps_plots):
    prof, out, lines = steps_plots
    assert len(lines) == len(plot.KINDS) and all(line.startswith("Wrote ") for line in lines[:-2])
    assert lines[-2].startswith("Skipped communication: no communication (HCCL) ops")
    assert lines[-1].startswith("Skipped memory: no device memory samples")
    assert set(written(lines)) == set(OP_FILES.values())
    for kind, name in OP_FILES.items():
        check_png(os.path.join(out, name), kind)
    assert not os.path.exists(os.path.join(prof, plot.DEFAULT_OUT))  # nothing is written into the collection


@needs_shared
def test_lines_say_what_was_drawn(steps_plots):
    _, _, lines = steps_plots
    by_file = written(lines)
    # 910b_steps has 15 distinct op names, 8 op types on 2 core types, 5 iterations, 2 frequency records
    assert by_file["top_operators.png"].endswith(": top 10 of 15 operators")
    assert by_file["time_by_type.png"].endswith(": 8 operator types, 2 core types")
    # the default Gantt shows the iteration of median length: lengths 568.42, 545.82, 517.64, 483.98, 541.86
    assert by_file["gantt.png"].endswith(": iteration 5 (median length of 5), 5 lanes")
    assert by_file["pmu_ratios.png"].endswith(": 10 operators, 9 ratios")
    assert by_file["aicore_freq.png"].endswith(": 2 records")


@needs_shared
def test_mixed_case_every_kind(tmp_path):
    prof = copy_input("910b_mixed", str(tmp_path / "in"))
    lines = plot.plot(prof, str(tmp_path / "out"), top=0, iteration=None, diag=Diagnostics(), ensure=imported_paths)
    by_file = written(lines)
    assert len(by_file) == 5
    # no step trace: the Gantt shows the whole run; 2 host threads x their levels + streams 2 and 3
    assert "the whole run, 9 lanes" in by_file["gantt.png"]
    # --top 0: all operators up to MAX_BARS
    assert by_file["top_operators.png"].endswith(f": top {plot.MAX_BARS} of 116 operators")
    for kind, name in OP_FILES.items():
        check_png(os.path.join(str(tmp_path / "out"), name), kind)


@needs_shared
def test_iteration_option(tmp_path):
    prof = copy_input("910b_steps", str(tmp_path / "in"))
    out = str(tmp_path / "out")
    lines = plot.plot(prof, out, top=5, iteration=3, diag=Diagnostics(), ensure=imported_paths)
    assert written(lines)["gantt.png"].endswith(": iteration 3, 5 lanes")
    check_png(os.path.join(out, "gantt.png"), "gantt")
    with pytest.raises(InvalidIteration) as err:
        plot.plot(prof, out, top=5, iteration=9, diag=Diagnostics(), ensure=imported_paths)
    assert str(err.value) == "--iteration 9: " + prof + " has iterations 1-5"


@needs_shared
def test_iteration_without_a_step_trace_is_an_error(tmp_path):
    prof = copy_input("910b_mixed", str(tmp_path / "in"))
    with pytest.raises(BadOption, match=r"--iteration 2: .* records no iterations"):
        plot.plot(prof, str(tmp_path / "out"), top=5, iteration=2, diag=Diagnostics(), ensure=imported_paths)


def test_bad_top_is_an_error(tmp_path):
    with pytest.raises(BadOption, match=r"--top -1"):
        plot.plot(str(tmp_path), str(tmp_path / "out"), top=-1, iteration=None, diag=Diagnostics())


def test_job_skips_say_why(tmp_path):
    """A synthetic JOB (SoC board) has no PMU data and only the nominal frequency of info.json."""
    import synth_job
    job = synth_job.write_job(str(tmp_path / "job"), 40)
    out = str(tmp_path / "out")
    lines = plot.plot(job, out, top=20, iteration=2, diag=Diagnostics(), ensure=imported_paths)
    assert set(written(lines)) == {"top_operators.png", "time_by_type.png", "gantt.png"}
    why = skipped(lines)
    assert set(why) == {"pmu", "freq", "communication", "memory"}
    assert "have no PMU *_ratio columns" in why["pmu"]
    assert why["freq"] == ("Skipped freq: the frequency was not recorded over time; only the nominal AI Core "
                           "frequency from info.json (1000 MHz) is known")
    assert written(lines)["gantt.png"].endswith(": iteration 2, 3 lanes")  # acl lane + streams 3 and 4
    for name, kind in (("top_operators.png", "top_ops"), ("time_by_type.png", "op_types"), ("gantt.png", "gantt")):
        check_png(os.path.join(out, name), kind)


@needs_real
def test_real_torch_npu_run(tmp_path):
    """An exported-only PyTorch-profiler run: everything drawn, nothing written into it."""
    folder = copy_real(TORCH_MLP, str(tmp_path))
    before = tree_hashes(folder)
    out = str(tmp_path / "out")
    lines = plot.plot(folder, out, top=20, iteration=None, diag=Diagnostics(), ensure=imported_paths)
    by_file = written(lines)
    assert set(by_file) == set(OP_FILES.values())
    assert by_file["top_operators.png"].endswith(": all 2 operators")   # MatMulV2 and Gelu kernels
    for kind, name in OP_FILES.items():
        check_png(os.path.join(out, name), kind)
    assert tree_hashes(folder) == before


@needs_real
def test_real_pytorch_step(tmp_path):
    """kernel_details + trace_view.json: the Gantt shows ProfilerStep#50 with CANN lanes."""
    folder = copy_real(PT_LEVEL1_RANK0, str(tmp_path))
    out = str(tmp_path / "out")
    lines = plot.plot(folder, out, top=20, iteration=None, diag=Diagnostics(), ensure=imported_paths)
    gantt = written(lines)["gantt.png"]
    assert ": iteration 50, " in gantt
    check_png(os.path.join(out, "gantt.png"), "gantt")
    check_png(os.path.join(out, "aicore_freq.png"), "freq")


@needs_real
def test_real_timelines_of_two_collections(tmp_path):
    """Two PROF folders holding only MindInsight-era timelines: a sub-folder each, and the kinds
    the timelines cannot give are skipped with the reason."""
    root = copy_real(MINDINSIGHT, str(tmp_path))
    out = str(tmp_path / "out")
    lines = plot.plot(root, out, top=15, iteration=4, diag=Diagnostics(), ensure=imported_paths)
    assert sum(line.startswith("Wrote ") for line in lines) == 6
    assert sum(line.startswith("Skipped pmu [") for line in lines) == 2
    assert sum(line.startswith("Skipped freq [") and "no AI Core frequency" in line for line in lines) == 2
    gantts = [line for line in lines if "gantt.png" in line]
    assert len(gantts) == 2 and all(": iteration 4, " in line for line in gantts)
    for name in sorted(os.listdir(out)):
        assert name.startswith("PROF_")
        check_png(os.path.join(out, name, "gantt.png"), "gantt")
        check_png(os.path.join(out, name, "time_by_type.png"), "op_types")


def test_default_out_is_below_the_current_directory(tmp_path, monkeypatch):
    import synth_job
    job = synth_job.write_job(str(tmp_path / "job"), 20)
    monkeypatch.chdir(tmp_path)
    lines = plot.plot(job, None, top=5, iteration=None, diag=Diagnostics(), ensure=imported_paths)
    assert written(lines)["top_operators.png"].startswith(f"Wrote {os.path.join(str(tmp_path), plot.DEFAULT_OUT)}/")


# ------------------------------------------------------------------------------------------------
# The Gantt's merging, and the large case


def test_merge_bars_keeps_the_busy_spans():
    lane = np.array([0, 0, 0, 1, 0])
    start = np.array([0.0, 1.5, 10.0, 0.0, 3.0])
    end = np.array([1.0, 2.0, 11.0, 5.0, 3.5])
    key = np.array(["A", "B", "B", "A", "A"], dtype=object)
    g_lane, g_start, g_end, g_key, fill = gantt.merge_bars(lane, start, end, key, px=1.0)
    # lane 0: [0,1] [1.5,2] [3,3.5] are < 1 px apart -> one bar [0, 3.5]; [10, 11] stays; lane 1 stays
    assert g_lane.tolist() == [0, 0, 1]
    assert g_start.tolist() == [0.0, 10.0, 0.0] and g_end.tolist() == [3.5, 11.0, 5.0]
    assert g_key.tolist() == ["A", "B", "A"]           # A covers 1.5 of the merged bar, B 0.5
    assert fill.tolist() == pytest.approx([2.0 / 3.5, 1.0, 1.0])


def test_large_collection_is_merged_per_pixel(tmp_path):
    import synth
    prof = synth.write_collection(str(tmp_path / "in"), n_tasks=6000, model_fraction=0.0, seed=5)
    out = str(tmp_path / "out")
    lines = plot.plot(prof, out, top=20, iteration=None, diag=Diagnostics(), ensure=imported_paths)
    gantt = written(lines)["gantt.png"]
    # 6000 eager tasks on stream 2, more than the plot is wide in pixels: merged, and the line says so
    assert "6000 tasks → " in gantt
    bars = int(gantt.split("6000 tasks → ")[1].split(" bars")[0])
    assert 0 < bars <= plot.SIZES["gantt"][0]
    check_png(os.path.join(out, "gantt.png"), "gantt")


# ------------------------------------------------------------------------------------------------
# The reading layer added to sources/ (then tables.py)


@needs_shared
def test_read_trace_of_the_store_matches_the_reference(tmp_path):
    prof = copy_input("910b_steps", str(tmp_path / "in"))
    found = sources.discover(prof)[0]
    trace = sources.read_trace(found, Diagnostics(), ensure=imported_paths)
    golden = pd.read_csv(os.path.join(GOLDEN, "910b_steps", "cpp", "step_trace.csv"), dtype=str)
    its = trace.iterations
    assert its[sources.ITERATION].tolist() == [1, 2, 3, 4, 5]
    assert its[sources.ITER_TIME].round(3).tolist() == pd.to_numeric(golden["Iteration Time(us)"]).tolist()
    assert its[sources.ITER_END].tolist() == pytest.approx(
        pd.to_numeric(golden["Iteration End(us)"].str.strip()).tolist(), abs=0.5)
    assert len(trace.tasks) == 56 and set(trace.tasks[sources.STREAM]) == {2.0, 6.0}
    # 140 CANN_API rows: acl, model, node and runtime levels on thread 6006
    assert len(trace.apis) == 140 and set(trace.apis[sources.THREAD]) == {6006.0}
    assert set(trace.apis[sources.LEVEL]) == {"acl", "model", "node", "runtime"}


@needs_shared
def test_read_trace_of_an_export_equals_the_store(tmp_path, capsys):
    """The exported timeline and step_trace CSV give the store's intervals back."""
    from conftest import run
    prof = copy_input("910b_steps", str(tmp_path / "in"))
    assert run(["export", "timeline", "-dir", prof], capsys)[0] == 0
    assert run(["export", "summary", "-dir", prof], capsys)[0] == 0
    exported = str(tmp_path / "exported")
    shutil.copytree(os.path.join(prof, "mindstudio_profiler_output"), os.path.join(exported,
                                                                                  "mindstudio_profiler_output"))
    store = sources.read_trace(sources.discover(prof)[0], Diagnostics(), ensure=imported_paths)
    export = sources.read_trace(sources.discover(exported)[0], Diagnostics())
    assert export.sources["tasks"].endswith(".json") and export.sources["iterations"].endswith(".json")
    assert len(export.tasks) == len(store.tasks)
    assert export.tasks[sources.DURATION].sum() == pytest.approx(store.tasks[sources.DURATION].sum(), abs=1e-6)
    assert len(export.apis) == len(store.apis)
    assert export.iterations[sources.ITER_TIME].tolist() == pytest.approx(store.iterations[sources.ITER_TIME].tolist())
    # without the timeline: tasks from the task_time CSV, iterations from the step_trace CSV
    for name in os.listdir(os.path.join(exported, "mindstudio_profiler_output")):
        if name.endswith(".json"):
            os.remove(os.path.join(exported, "mindstudio_profiler_output", name))
    csv_only = sources.read_trace(sources.discover(exported)[0], Diagnostics())
    assert os.path.basename(csv_only.sources["tasks"]).startswith("task_time_")
    assert os.path.basename(csv_only.sources["iterations"]).startswith("step_trace_")
    assert csv_only.apis is None and len(csv_only.tasks) == 56
    assert csv_only.iterations[sources.ITER_TIME].tolist() == store.iterations[sources.ITER_TIME].round(3).tolist()
    lines = plot.plot(exported, str(tmp_path / "out"), top=10, iteration=2, diag=Diagnostics())
    assert written(lines)["gantt.png"].endswith(": iteration 2, 1 lane")   # stream 6 only: no host APIs
    assert skipped(lines)["freq"].startswith("Skipped freq: no AI Core frequency; looked for ")


def test_model_execution_counts_a_repeated_host_table_once():
    api = pd.DataFrame({sources.DEVICE: ["0", "1", "0"], sources.LEVEL: ["acl", "acl", "acl"],
                        sources.API_NAME: ["aclmdlExecute", "aclmdlExecute", "aclrtMemcpy"],
                        "Time(us)": [100.0, 100.0, 5.0], "Count": [4.0, 4.0, 1.0]})
    rows = sources.model_execution(api)
    assert rows[[sources.API_NAME, "Count", "Time(us)", "Avg(us)"]].values.tolist() == \
        [["aclmdlExecute", 4.0, 100.0, 25.0]]
    assert sources.model_execution(api[api[sources.API_NAME] == "aclrtMemcpy"]) is None


@needs_shared
def test_the_cli_plots_and_prints_one_line_per_file(tmp_path, capsys):
    from msprof_kit import cli

    prof = copy_input("910b_steps", str(tmp_path / "in"))
    out = tmp_path / "png"
    assert cli.main(["plot", "-dir", prof, "--out", str(out), "--top", "5", "--iteration", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    wrote = [line.split(" ", 1)[1].split(":")[0] for line in lines if line.startswith("Wrote ")]
    assert sorted(os.path.basename(w) for w in wrote) == sorted(os.listdir(out)) and len(wrote) == 5
    assert any("iteration 2" in line for line in lines)


@needs_shared
def test_the_cli_reports_a_bad_iteration_in_one_line(tmp_path, capsys):
    from msprof_kit import cli

    prof = copy_input("910b_steps", str(tmp_path / "in"))
    code = cli.main(["plot", "-dir", prof, "--out", str(tmp_path / "png"), "--iteration", "99"])
    err = capsys.readouterr().err
    assert code != 0 and err.startswith("Error: ") and err.count("\n") == 1


# ------------------------------------------------------------------------------------------------
# Issue 22 item 6: charts that answer profiling questions


@pytest.fixture()
def figures(monkeypatch):
    """The figures `save` is given, by file name, instead of writing them."""
    drawn = {}

    def keep(fig, path):
        drawn[os.path.basename(path)] = fig
        return path
    monkeypatch.setattr(plot_run, "save", keep)
    return drawn


def _legend_colours(fig):
    """label -> RGBA of every legend patch of a figure (figure and axes legends)."""
    from matplotlib.colors import to_rgba
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    out = {}
    for legend in legends:
        for patch, text in zip(legend.get_patches(), legend.get_texts()):
            out[text.get_text()] = to_rgba(patch.get_facecolor())
    return out


@needs_shared
def test_a_task_type_has_one_colour_in_every_chart_and_run(tmp_path, figures):
    from matplotlib.colors import to_rgba
    seen = {}
    for case in ("910b_mixed", "910b_steps"):
        prof = copy_input(case, str(tmp_path / case))
        figures.clear()
        plot.plot(prof, str(tmp_path / "out"), top=10, diag=Diagnostics(), ensure=imported_paths)
        for name in ("top_operators.png", "time_by_type.png", "gantt.png"):
            for kind, colour in _legend_colours(figures[name]).items():
                seen.setdefault(kind, set()).add(colour)
    assert {"AI_CORE", "AI_VECTOR_CORE"} <= set(seen)
    assert all(len(colours) == 1 for colours in seen.values()), seen
    assert seen["AI_VECTOR_CORE"] == {to_rgba(drawing.TASK_TYPE_COLORS["AI_VECTOR_CORE"])}
    assert drawing.type_color("SOME_NEW_TYPE") == drawing.type_color("SOME_NEW_TYPE") in drawing.EXTRA_COLORS


def _overlaps(a, b):
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


@needs_shared
def test_legends_cover_no_bar_label(tmp_path, figures):
    figs = []
    for case, top in (("910b_mixed", 20), ("910b_mixed", 3), ("910b_steps", 0), ("synth", 10)):
        prof = synth.write_collection(str(tmp_path / "synth"), n_tasks=12, seed=4) if case == "synth" else \
            copy_input(case, str(tmp_path / f"{case}{top}"))
        plot.plot(prof, str(tmp_path / "out"), top=top, diag=Diagnostics(), ensure=imported_paths)
        figs += [(f"{case} --top {top}: {name}", figures[name]) for name in ("top_operators.png", "time_by_type.png")]
    for name, fig in figs:
        renderer = fig.canvas.get_renderer()
        fig.draw(renderer)
        legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
        assert legends
        labels = [t for ax in fig.axes for t in ax.texts]
        bars = [p for ax in fig.axes for p in ax.patches]
        assert labels and bars
        for legend in legends:
            box = legend.get_window_extent(renderer)
            assert not any(_overlaps(box, t.get_window_extent(renderer)) for t in labels), name
            assert not any(_overlaps(box, p.get_window_extent(renderer)) for p in bars), name


@needs_shared
def test_pmu_heatmap_frames_each_operators_limiting_pipe(tmp_path, figures):
    from matplotlib.image import AxesImage
    from matplotlib.patches import Rectangle
    prof = copy_input("910b_mixed", str(tmp_path / "in"))
    plot.plot(prof, str(tmp_path / "out"), top=12, diag=Diagnostics(), ensure=imported_paths)
    fig = figures["pmu_ratios.png"]
    ax = fig.axes[0]
    image = [a for a in ax.get_children() if isinstance(a, AxesImage)][0]
    values = np.ma.filled(image.get_array(), np.nan)
    assert values.shape == (12, 9) and np.nanmax(values) <= 1.0   # ratios side by side, never summed
    frames = sorted((int(round(p.get_y() + 0.5)), int(round(p.get_x() + 0.5))) for p in ax.patches
                    if isinstance(p, Rectangle) and not p.get_fill())
    assert frames == [(r, int(np.nanargmax(values[r]))) for r in range(12)]
    named = [t.get_text() for t in ax.texts if t.get_position()[0] > values.shape[1] - 0.5]
    columns = [t.get_text() for t in ax.get_xticklabels()]
    assert "limiting pipe" in named
    for r in range(12):
        c = int(np.nanargmax(values[r]))
        assert f"{columns[c]} {values[r, c]:.2f}" in named
    assert operators.limiting(np.array([[0.1, 0.5, np.nan], [np.nan, np.nan, np.nan]])).tolist() == [1, -1]


def test_gantt_window_labels_ops_in_a_run_without_iterations(tmp_path, figures):
    prof = synth.write_collection(str(tmp_path / "in"), chip="910B", n_tasks=3000, seed=2)
    whole = plot.plot(prof, str(tmp_path / "out"), top=5, diag=Diagnostics(), ensure=imported_paths)
    gantt = [line for line in whole if "gantt.png" in line][0]
    assert ": the whole run, " in gantt and "tasks →" in gantt   # merged: no room for labels
    tasks = sources.read_trace(sources.discover(prof)[0], Diagnostics(), ("tasks",), ensure=imported_paths).tasks
    ops = set(tasks[sources.OP_NAME].astype(str))
    labels = [t.get_text() for t in figures["gantt.png"].axes[0].texts]
    assert not any(text in ops or (text.endswith("…") and any(o.startswith(text[:-1]) for o in ops))
                   for text in labels)
    lines = plot.plot(prof, str(tmp_path / "out"), top=5, diag=Diagnostics(), start=100.0, end=400.0,
                   ensure=imported_paths)
    gantt = [line for line in lines if "gantt.png" in line][0]
    assert ": the window 100 µs to 400 µs, " in gantt and "→" not in gantt
    labels = [t.get_text() for t in figures["gantt.png"].axes[0].texts]
    whole_names = [text for text in labels if text in ops]
    cut_names = [text for text in labels if text.endswith("…") and any(o.startswith(text[:-1]) for o in ops)]
    assert len(whole_names) + len(cut_names) >= 2, labels   # op names, cut to their bar when longer


def test_gantt_window_options_are_checked(tmp_path, capsys):
    prof = synth.write_collection(str(tmp_path / "in"), chip="910B", n_tasks=40, seed=2)
    out = str(tmp_path / "out")
    for argv, text in ((["--start", "5", "--end", "5"], "expected a window whose end is after its start"),
                       (["--start", "1e12"], "has no task or API call between"),
                       (["--start", "-1"], "--start -1: expected µs after the run's start"),
                       (["--iteration", "1", "--start", "0"], "--iteration and --start/--end both choose")):
        code, _, err = run(["plot", "-dir", prof, "--out", out, *argv], capsys)
        assert code == 1 and text in err and err.count("\n") == 1, err
