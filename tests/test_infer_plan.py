"""The inference runner after ais_bench (collectors/infer/, spec/collectors.md §5), the parts that
run nothing: the argument rules (§5.2), device and input parsing, the statistics (§5.6) against
hand-computed values, the dated folder names. What runs (the emulator, msprof, acl.json mode,
the real-pyACL path): test_infer.py."""
from __future__ import annotations

import datetime
import re

import pytest

from msprof_kit.collectors import infer as inf
from msprof_kit.collectors.infer.files import make_run_dir
from msprof_kit.errors import InferOptionError, PathNotFound


# ---------------------------------------------------------------------------------------------
# §5.2: the rules, as a table

RULES = [
    # (options, mode or (error, message part), warm-up actually made, notes)
    ({}, inf.PLAIN, 1, 0),
    ({"output": "o"}, inf.PLAIN, 1, 0),
    ({"output": "o", "warmup_count": 0}, inf.PLAIN, 0, 0),
    ({"profiler": True, "output": "o"}, inf.PROFILER, 1, 0),
    ({"profiler": True, "output": "o", "has_inputs": True, "warmup_count": 3}, inf.PROFILER, 0, 1),
    ({"profiler": True, "output": "o", "has_inputs": True, "warmup_count": 0}, inf.PROFILER, 0, 0),
    ({"dump": True, "output": "o", "has_inputs": True}, inf.DUMP, 1, 0),
    ({"acl_json_path": "a.json"}, inf.ACL_JSON, 1, 0),
    ({"acl_json_path": "a.json", "profiler": True}, inf.ACL_JSON, 1, 1),
    # acl-json-path wins before anything else is looked at: no conflict, no output needed
    ({"acl_json_path": "a.json", "profiler": True, "dump": True}, inf.ACL_JSON, 1, 1),
    ({"output": "o", "output_dirname": "run1"}, inf.PLAIN, 1, 0),
    ({"profiler": True, "dump": True, "output": "o"}, (InferOptionError, "--profiler and --dump cannot both be on"),
     None, None),
    ({"profiler": True}, (InferOptionError, "--profiler needs --output"), None, None),
    ({"dump": True}, (InferOptionError, "--dump needs --output"), None, None),
    ({"output_dirname": "run1"}, (InferOptionError, "--output-dirname needs --output"), None, None),
    ({"output": "o", "output_dirname": "/abs/run"}, (InferOptionError, "expected a relative folder name"), None, None),
    ({"output": "o", "output_dirname": "a/../b"}, (InferOptionError, "expected a relative folder name"), None, None),
    ({"loop": 0}, (InferOptionError, "--loop is 0; expected an integer > 0"), None, None),
    ({"warmup_count": -1}, (InferOptionError, "--warmup-count is -1; expected an integer >= 0"), None, None),
]


@pytest.mark.parametrize("options,expected,warmup,notes", RULES)
def test_rules(options, expected, warmup, notes):
    if isinstance(expected, tuple):
        cls, part = expected
        with pytest.raises(cls) as info:
            inf.plan_run(**options)
        assert part in str(info.value)
        assert info.value.exit_code == 6
        return
    plan = inf.plan_run(**options)
    assert (plan.mode, plan.warmup_count, len(plan.notes)) == (expected, warmup, notes)


def test_rule_notes_say_what_was_ignored_or_changed():
    assert inf.plan_run(acl_json_path="a.json", profiler=True, dump=True).notes == (
        "--acl-json-path is given, so --profiler and --dump are ignored: a.json goes to acl.init as it is",)
    assert inf.plan_run(profiler=True, output="o", has_inputs=True, warmup_count=2).notes == (
        "--profiler with --input: the warm-up count 2 becomes 0, so that the profile holds only the measured runs",)


def test_device_and_input_parsing(tmp_path):
    assert inf.parse_devices("0,1") == (0, 1)
    assert inf.parse_devices(3) == (3,)
    assert inf.parse_devices([2, 0]) == (2, 0)
    for bad, part in (("0,0", "repeats an id"), ("256", "outside 0..255"), ("-1", "outside 0..255"),
                      ("a", "'a' is not a device id"), ("", "is not a device id"), (True, "expected ids")):
        with pytest.raises(InferOptionError, match=re.escape(part)):
            inf.parse_devices(bad)
    with pytest.raises(PathNotFound):
        inf.parse_inputs(str(tmp_path / "missing.bin"))
    with pytest.raises(InferOptionError, match="empty path"):
        inf.parse_inputs("a.bin,,b.bin")


def test_samples_from_files_and_folders(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for folder, names in ((a, ["2.bin", "1.bin", ".hidden"]), (b, ["x.bin", "y.bin"])):
        folder.mkdir()
        for n in names:
            (folder / n).write_bytes(b"\0")
    assert inf.samples_from_inputs([]) == [inf.Sample("pure_infer_data")]
    assert inf.samples_from_inputs([str(a / "2.bin"), str(b / "x.bin")]) == [
        inf.Sample("2", (str(a / "2.bin"), str(b / "x.bin")))]
    assert inf.samples_from_inputs([str(a), str(b)]) == [
        inf.Sample("1", (str(a / "1.bin"), str(b / "x.bin"))), inf.Sample("2", (str(a / "2.bin"), str(b / "y.bin")))]
    with pytest.raises(InferOptionError, match="mixes files and folders"):
        inf.samples_from_inputs([str(a), str(b / "x.bin")])
    (b / "z.bin").write_bytes(b"\0")
    with pytest.raises(InferOptionError, match=r"different numbers of files \(a: 2, b: 3\)"):
        inf.samples_from_inputs([str(a), str(b)])


# ---------------------------------------------------------------------------------------------
# §5.6: the statistics against hand-computed values

def test_stats_of_a_known_list():
    s = inf.latency_stats([4.0, 1.0, 100.0, 3.0, 2.0])
    # sorted 1 2 3 4 100: mean 110/5; median the middle one; p99 at rank 0.99 * 4 = 3.96, between
    # 4 and 100: 4 + 0.96 * 96
    assert (s.min, s.max, s.mean, s.median, s.count) == (1.0, 100.0, 22.0, 3.0, 5)
    assert s.p99 == pytest.approx(96.16, abs=1e-9)
    assert inf.throughput(4, s.mean) == pytest.approx(4000 / 22, abs=1e-9)    # 181.81...
    assert s.as_json() == {"min": 1.0, "max": 100.0, "mean": 22.0, "median": 3.0,
                           "percentile(99%)": s.p99, "count": 5}


def test_stats_of_an_even_list_and_of_one_value():
    s = inf.latency_stats([2.0, 4.0])
    assert (s.median, s.mean) == (3.0, 3.0)
    assert s.p99 == pytest.approx(2.0 + 0.99 * 2.0, abs=1e-12)                 # 3.98
    one = inf.latency_stats([2.5])
    assert (one.min, one.max, one.mean, one.median, one.p99, one.count) == (2.5, 2.5, 2.5, 2.5, 2.5, 1)
    assert inf.throughput(1, 2.5) == 400.0


def test_empty_list_gives_zeros_and_mean_zero_gives_throughput_zero():
    empty = inf.latency_stats([])
    assert empty == inf.LatencyStats(0.0, 0.0, 0.0, 0.0, 0.0, 0)
    assert empty.as_json() == {"min": 0.0, "max": 0.0, "mean": 0.0, "median": 0.0, "percentile(99%)": 0.0,
                               "count": 0}
    assert inf.throughput(8, empty.mean) == 0.0
    zeros = inf.latency_stats([0.0, 0.0, 0.0])
    assert zeros.mean == 0.0 and zeros.count == 3
    assert inf.throughput(8, zeros.mean) == 0.0
    assert inf.DeviceResult(device=0, batch=8, npu_compute_time_list=[0.0, 0.0]).throughput == 0.0
    assert inf.DeviceResult(device=0, batch=8).throughput == 0.0


def test_render_summary_prints_as_ais_bench_does():
    dev = inf.DeviceResult(device=0, batch=1, npu_compute_time_list=[1.0, 2.0, 3.0], h2d_latency_list=[0.5])
    result = inf.InferResult(mode=inf.PLAIN, emulated=False, devices=[dev])
    assert inf.render_summary(result) == (
        "[INFO] -----------------Performance Summary------------------\n"
        "[INFO] NPU_compute_time (ms): min = 1.0, max = 3.0, mean = 2.0, median = 2.0, percentile(99%) = 2.98\n"
        "[INFO] throughput 1000*batchsize.mean(1)/NPU_compute_time.mean(2.0): 500.0\n"
        "[INFO] ------------------------------------------------------\n")
    result.display_all = True
    dev.batch = 4
    assert inf.render_summary(result).splitlines()[1:4] == [
        "[INFO] H2D_latency (ms): min = 0.5, max = 0.5, mean = 0.5, median = 0.5, percentile(99%) = 0.5",
        "[INFO] NPU_compute_time (ms): min = 1.0, max = 3.0, mean = 2.0, median = 2.0, percentile(99%) = 2.98",
        "[INFO] D2H_latency (ms): min = 0.0, max = 0.0, mean = 0.0, median = 0.0, percentile(99%) = 0.0"]
    assert "[INFO] throughput 1000*batchsize.mean(4)/NPU_compute_time.mean(2.0): 2000.0" in inf.render_summary(result)


def test_dated_folder_names_and_collisions(tmp_path):
    now = datetime.datetime(2024, 3, 5, 7, 8, 9)
    first = make_run_dir(str(tmp_path), None, now)
    second = make_run_dir(str(tmp_path), None, now)
    assert first == (str(tmp_path / "2024_03_05-07_08_09"), True)
    assert second == (str(tmp_path / "2024_03_05-07_08_09_1"), True)
    assert make_run_dir(str(tmp_path), "fixed", now) == (str(tmp_path / "fixed"), True)
    assert make_run_dir(str(tmp_path), "fixed", now) == (str(tmp_path / "fixed"), False)   # reused
