"""The acl.json `profiler` schema (CANN and SoC flavours) and writer: collectors/acljson.py.

Each key's accepted and refused values come from spec/collectors.md §2.1 (CANN) and §2.3 (SoC);
the codes from §2.2. The same tables are run against the compiled stand-in program in
tests/test_collect_local.py, so Python's verdict and the "runtime's" verdict are compared there.
"""
from __future__ import annotations

import json
import os
import stat

import pytest

from msprof_kit.collectors import acljson
from msprof_kit.collectors.acljson import (cann_profiler_config, dumps_acl_json, soc_profiler_config, validate,
                                           write_acl_json)
from msprof_kit.errors import AclJsonError, CollectorError, MsprofKitError

ON_OFF_KEYS = ["ascendcl", "runtime_api", "aicpu", "l2", "hccl", "msproftx", "task_memory", "task_tsfw",
               "instr_profiling"]
FREQ_100 = ["sys_hardware_mem_freq", "sys_io_sampling_freq", "dvpp_freq", "sys_lp_freq"]
FREQ_50 = ["sys_interconnection_freq", "sys_cpu_freq", "host_sys_usage_freq"]

CANN_GOOD = {
    "switch": ["on", "off"],
    "output": ["/tmp/prof_out", "rel/dir", "./with space", "数据/输出"],
    "storage_limit": ["200MB", "4294967295MB", "1024MB"],
    "task_time": ["on", "off", "l0", "l1", "l2", "l3"],
    "aic_metrics": ["ArithmeticUtilization", "PipeUtilization", "Memory", "MemoryL0", "ResourceConflictRatio",
                    "MemoryUB", "L2Cache", "PipelineExecuteUtilization", "MemoryAccess", "Custom:0x8",
                    "Custom:0x8,0xa,0x9,0xb,0xc,0xd,0x54,0x55"],
    "ge_api": ["l0", "l1", "off"],
    "instr_profiling_freq": ["300", "1000", "30000"],
    "llc_profiling": ["read", "write"],
    "host_sys": ["cpu", "cpu,mem,disk,network,osrt", "numa"],
    "host_sys_usage": ["cpu", "mem", "cpu,mem"],
    "sys_mem_serviceflow": ["x", "a,b"],
    "optype": ["Conv2D", "Conv2D,MatMul", "x" * 256],
    **{k: ["on", "off"] for k in ON_OFF_KEYS},
    **{k: ["1", "50", "100"] for k in FREQ_100},
    **{k: ["1", "50"] for k in FREQ_50},
}

# values the runtime refuses with ACL_ERROR_INVALID_PARAM (100000)
CANN_BAD = {
    "output": ["a;b", "a|b", "a$b", "a`b", "a\nb", "a\\b", "a'b", 'a"b', "a%b", "a>b", "a<b", "a&b", "a\tb",
               "a\x7fb", "a\rb", "a\fb", "a\vb", "a\bb", "/" + "x" * 4096],
    "storage_limit": ["199MB", "4294967296MB", "200", "200mb", "MB", "200 MB", "-200MB"],
    "task_time": ["l4", "L1", "ON", ""],
    "aic_metrics": ["pipeutilization", "Custom:", "Custom:8", "Custom:0x1,", "Custom:" + ",".join(["0x1"] * 9),
                    "Bandwidth", "PipeUtilizationExct"],
    "ge_api": ["on", "l2", ""],
    "instr_profiling_freq": ["299", "30001", "1e3", "", "1000.0"],
    "llc_profiling": ["capacity", "", "READ"],
    "host_sys": ["", "cpu,,mem", "gpu", "cpu,cpu", "cpu,"],
    "host_sys_usage": ["disk", "", "cpu,mem,disk"],
    "sys_mem_serviceflow": ["", "  "],
    "optype": ["", ",", "a,,b", "x" * 257, "a,"],
    **{k: ["ON", "1", "true", "", "of"] for k in ON_OFF_KEYS},
    **{k: ["0", "101", "-1", "1.5", "", " 5"] for k in FREQ_100},
    **{k: ["0", "51", "100"] for k in FREQ_50},
}

SOC_GOOD = {
    "switch": ["on", "off"],
    "output": ["/home/user_1/profiling", "rel_dir", "./out", "../a/b_1", "/", "a//b/"],
    "aacpu": ["on", "off"],
    "aac_metrics": ["ArithmeticUtilization"],
    "acl_api": ["on", "off"],
    "interval": ["0", "2", "1000", 0, 7],
}
SOC_BAD = {
    "output": ["a-b", "a.b", "with space", "a;b", "数据", ""],
    "aacpu": ["ON", "", "1"],
    "acl_api": ["yes", ""],
    "interval": ["-1", "1.5", "x", "", -1],
}


def test_the_tables_cover_every_key():
    assert set(CANN_GOOD) == set(CANN_BAD) | {"switch"} == {k.name for k in acljson.CANN_KEYS}
    assert set(SOC_GOOD) == {k.name for k in acljson.SOC_KEYS}
    assert set(SOC_BAD) | {"switch", "aac_metrics"} == set(SOC_GOOD)


@pytest.mark.parametrize("flavour,key,value",
                         [("cann", k, v) for k, vs in CANN_GOOD.items() for v in vs]
                         + [("soc", k, v) for k, vs in SOC_GOOD.items() for v in vs])
def test_accepted_values(flavour, key, value):
    validate({key: value}, flavour)


@pytest.mark.parametrize("flavour,key,value",
                         [("cann", k, v) for k, vs in CANN_BAD.items() for v in vs]
                         + [("soc", k, v) for k, vs in SOC_BAD.items() for v in vs])
def test_refused_values_carry_the_runtime_code(flavour, key, value):
    with pytest.raises(AclJsonError) as info:
        validate({"switch": "off", key: value}, flavour)
    assert info.value.key == key
    assert info.value.acl_code == 100000
    assert "ACL_ERROR_INVALID_PARAM 100000" in str(info.value)
    assert "\n" not in str(info.value).replace("\\n", "")  # one line (a newline in the value is shown escaped)


@pytest.mark.parametrize("flavour", ["cann", "soc"])
@pytest.mark.parametrize("value", [1, 1.5, True, None, ["on"], {"a": "b"}])
def test_values_must_be_json_strings(flavour, value):
    key = "aicpu" if flavour == "cann" else "aacpu"
    with pytest.raises(AclJsonError) as info:
        validate({key: value}, flavour)
    assert info.value.acl_code == 100000
    assert "the value must be a string" in str(info.value)


def test_soc_interval_may_be_an_integer_but_not_a_bool_or_float():
    validate({"interval": 3}, "soc")
    for bad in (True, 1.5, -2):
        with pytest.raises(AclJsonError) as info:
            validate({"interval": bad}, "soc")
        assert info.value.acl_code == 100000


def test_unknown_key_is_refused_even_with_the_switch_off():
    with pytest.raises(AclJsonError) as info:
        validate({"switch": "off", "foo": "on"}, "cann")
    assert info.value.key == "foo" and info.value.acl_code == 100000
    assert str(info.value).startswith('acl.json profiler (cann flavour): unknown key "foo" (known keys: switch, output,')
    assert str(info.value).endswith("every key is checked even with the switch off "
                                    "(aclInit would return ACL_ERROR_INVALID_PARAM 100000)")


def test_unknown_key_hints():
    cases = {
        ("cann", "task_tme"): 'did you mean "task_time"?',
        ("cann", "aacpu"): "it is a soc-flavour key",
        ("soc", "aicpu"): "it is a cann-flavour key",
        ("cann", "training_trace"): "training_trace is a GE option",
        ("cann", "aiv_metrics"): "Dec-2025 adapter",
        ("soc", "task_time"): "it is a cann-flavour key",
    }
    for (flavour, key), hint in cases.items():
        with pytest.raises(AclJsonError) as info:
            validate({key: "on"}, flavour)
        assert hint in str(info.value), (flavour, key, str(info.value))
        assert info.value.acl_code == 100000


def test_exact_message_for_a_bad_value():
    with pytest.raises(AclJsonError) as info:
        cann_profiler_config(task_time="l5")
    assert str(info.value) == ('acl.json profiler (cann flavour): task_time is "l5"; expected one of on, off, l0, '
                               "l1, l2, l3 (aclInit would return ACL_ERROR_INVALID_PARAM 100000)")
    assert info.value.exit_code == 6 and isinstance(info.value, MsprofKitError)


def test_soc_message_names_svp_acl_init():
    with pytest.raises(AclJsonError) as info:
        soc_profiler_config(output="/tmp/a-b")
    assert str(info.value) == ('acl.json profiler (soc flavour): output is "/tmp/a-b"; expected a path made only '
                               "of letters, digits and _ (separated by /) (svp_acl_init would return "
                               "ACL_ERROR_INVALID_PARAM 100000)")


@pytest.mark.parametrize("flavour,config", [
    ("cann", {"switch": "ON"}), ("cann", {"switch": "yes"}), ("cann", {"switch": ""}),
    ("soc", {"switch": "On"}), ("cann", {"aic_metrics": ""}), ("cann", {"output": ""}),
    ("soc", {"aac_metrics": "PipeUtilization"}), ("soc", {"aac_metrics": ""}),
])
def test_refusals_stricter_than_the_runtime_have_no_code(flavour, config):
    """The runtime takes these silently (a switch typo means off; SoC ignores other metrics);
    msprof-kit refuses them and says what the runtime would have done."""
    with pytest.raises(AclJsonError) as info:
        validate(config, flavour)
    assert info.value.acl_code is None
    assert "refused by msprof-kit: " in str(info.value)


def test_missing_switch_is_valid_and_means_off():
    validate({"aicpu": "on"}, "cann")
    assert not acljson.switch_is_on({"aicpu": "on"})
    assert acljson.switch_is_on({"switch": "on"})
    assert not acljson.switch_is_on({"switch": "off"})


def test_instr_profiling_excludes_the_task_keys():
    validate({"instr_profiling": "on", "instr_profiling_freq": "500", "aicpu": "off", "task_time": "off"}, "cann")
    validate({"instr_profiling": "off", "aicpu": "on"}, "cann")
    for key, value in [("aicpu", "on"), ("aic_metrics", "PipeUtilization"), ("task_time", "l1"),
                       ("ascendcl", "on"), ("runtime_api", "on"), ("l2", "on"), ("hccl", "on")]:
        with pytest.raises(AclJsonError) as info:
            validate({"instr_profiling": "on", key: value}, "cann")
        assert info.value.key == "instr_profiling" and info.value.acl_code == 100000
        assert key in str(info.value)


def test_section_must_be_an_object_and_flavour_known():
    with pytest.raises(AclJsonError) as info:
        validate("on", "cann")  # type: ignore[arg-type]
    assert info.value.acl_code == 100000 and "not an object" in str(info.value)
    with pytest.raises(CollectorError, match="unknown acl.json flavour 'ascend'"):
        validate({}, "ascend")
    validate({}, "cann")
    validate({}, "soc")


def test_soc_profiler_config_defaults_and_order():
    assert list(soc_profiler_config(output="/home/u/profiling").items()) == [
        ("switch", "on"), ("output", "/home/u/profiling"), ("aacpu", "on"),
        ("aac_metrics", "ArithmeticUtilization"), ("acl_api", "on"), ("interval", "0")]
    assert "output" not in soc_profiler_config()
    assert soc_profiler_config(interval=5, switch="off", aacpu="off", acl_api="off")["interval"] == "5"
    assert soc_profiler_config(interval="12")["interval"] == "12"
    with pytest.raises(AclJsonError) as info:
        soc_profiler_config(interval=-1)
    assert info.value.key == "interval"
    with pytest.raises(AclJsonError):
        soc_profiler_config(switch="maybe")


def test_cann_profiler_config_builds_strings_in_order():
    config = cann_profiler_config(output="/data/prof", task_time="l1", sys_cpu_freq=20, aic_metrics=None)
    assert list(config.items()) == [("switch", "on"), ("output", "/data/prof"), ("task_time", "l1"),
                                    ("sys_cpu_freq", "20")]
    assert cann_profiler_config(switch="off") == {"switch": "off"}
    assert cann_profiler_config(switch=None) == {}
    with pytest.raises(AclJsonError) as info:
        cann_profiler_config(aicpu=True)
    assert info.value.key == "aicpu"
    with pytest.raises(AclJsonError):
        cann_profiler_config(task_tsfw="maybe")


def test_dumps_exact_text_cann():
    text = dumps_acl_json(cann_profiler_config(output="/data/prof", aic_metrics="PipeUtilization"))
    assert text == ('{\n    "profiler": {\n        "switch": "on",\n        "output": "/data/prof",\n'
                    '        "aic_metrics": "PipeUtilization"\n    }\n}\n')


def test_dumps_exact_text_soc():
    text = dumps_acl_json(soc_profiler_config(output="/root/profiling", interval=2))
    assert text == ('{\n    "profiler": {\n        "switch": "on",\n        "output": "/root/profiling",\n'
                    '        "aacpu": "on",\n        "aac_metrics": "ArithmeticUtilization",\n'
                    '        "acl_api": "on",\n        "interval": "2"\n    }\n}\n')


def test_dumps_writes_utf8_unescaped_and_validates():
    assert '"output": "数据"' in dumps_acl_json({"switch": "on", "output": "数据"})
    with pytest.raises(AclJsonError) as info:  # a SoC key makes it a SoC section, where aicpu is unknown
        dumps_acl_json({"switch": "on", "aacpu": "on", "aicpu": "on"})
    assert info.value.key == "aicpu"
    with pytest.raises(AclJsonError):
        dumps_acl_json({"switch": "on", "bogus": "1"})
    assert acljson.flavour_of({"interval": "0"}) == "soc"
    assert acljson.flavour_of({"switch": "on", "output": "x"}) == "cann"


def test_write_acl_json(tmp_path):
    target = tmp_path / "acl.json"
    target.write_text("old")
    written = write_acl_json(str(target), {"switch": "on", "task_time": "l0"})
    assert written == str(target)
    assert json.loads(target.read_text()) == {"profiler": {"switch": "on", "task_time": "l0"}}
    assert target.read_text() == dumps_acl_json({"switch": "on", "task_time": "l0"})
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    assert sorted(os.listdir(tmp_path)) == ["acl.json"]  # no temp file left


def test_write_acl_json_relative_path_and_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert write_acl_json("acl.json", {"switch": "off"}) == str(tmp_path / "acl.json")
    with pytest.raises(CollectorError) as info:
        write_acl_json(str(tmp_path / "missing" / "acl.json"), {"switch": "on"})
    assert str(info.value).startswith(f"{tmp_path / 'missing' / 'acl.json'}: cannot write acl.json: ")
    with pytest.raises(AclJsonError):  # nothing is written for an invalid section
        write_acl_json(str(tmp_path / "bad.json"), {"switch": "on", "nope": "x"})
    assert not (tmp_path / "bad.json").exists()


def test_docs_name_every_key():
    docs = open(os.path.join(os.path.dirname(__file__), "..", "docs", "collectors.md"), encoding="utf-8").read()
    for spec in acljson.CANN_KEYS + acljson.SOC_KEYS:
        assert spec.name in docs, spec.name
