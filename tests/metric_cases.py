"""The PMU metric-group cases (issue 23 item 1): one small synthetic collection per group, written
by ../shared/tools/mkprof.py (the groups its PMU_EVENTS knows) or by tests/synth (the others),
and the reference's exports of each, stored under tests/reference/<case>/{cpp,python}/.

`generate` writes a case's input; tests/reference/refresh_metric_refs.py ran the reference on it
(each case's MANIFEST.txt says how); tests/test_metric_groups.py exports it with msprof-kit and
compares."""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

from conftest import SHARED

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = os.path.join(HERE, "reference")
MKPROF = os.path.join(SHARED, "tools", "mkprof.py")
N_OPS = 30
#: an event list that is no group's: a pipe, two bandwidths, an fops, a conflict, an L0 and the icache pair
CUSTOM = "Custom:0x8,0x15,0x31,0x49,0x64,0x1b,0x54,0x55"


@dataclass(frozen=True)
class Case:
    """chip "910B" (compared with the C++ flavour) or "310P" (the Python flavour); `mkprof`: the
    mkprof.py arguments after OUT_PARENT, else `synth`: tests/synth write_collection keywords."""

    chip: str
    group: str
    mkprof: Tuple[str, ...] = ()
    synth: Dict[str, object] = field(default_factory=dict)

    @property
    def flavour(self) -> str:
        return "cpp" if self.chip == "910B" else "python"

    def command(self) -> str:
        """The generator call, as MANIFEST.txt names it."""
        if self.mkprof:
            return "python3 ../shared/tools/mkprof.py OUT " + " ".join(self.mkprof)
        args = ", ".join(f"{k}={v!r}" for k, v in self.synth.items())
        return f"tests/synth: write_collection(OUT, {args})"


def _mk(chip: str, group: str) -> Case:
    case = "910b_mixed" if chip == "910B" else "310p_hwts"
    return Case(chip, group, mkprof=("--case", case, "--metrics", group, "--n-ops", str(N_OPS)))


def _synth(chip: str, group: str, seed: int, **extra: object) -> Case:
    keywords: Dict[str, object] = {"chip": chip, "n_tasks": N_OPS, "metrics": group, "model_fraction": 0.3,
                                   "seed": seed}
    if chip == "910B":
        keywords["mix_fraction"] = 0.3
    keywords.update(extra)
    return Case(chip, group, synth=keywords)


CASES: Dict[str, Case] = {
    "metrics_PipeUtilization": _mk("910B", "PipeUtilization"),
    "metrics_PipeUtilizationExct": _mk("910B", "PipeUtilizationExct"),
    "metrics_ArithmeticUtilization": _mk("910B", "ArithmeticUtilization"),
    "metrics_Memory": _mk("910B", "Memory"),
    "metrics_MemoryL0": _mk("910B", "MemoryL0"),
    "metrics_ResourceConflictRatio": _mk("910B", "ResourceConflictRatio"),
    "metrics_MemoryUB": _synth("910B", "MemoryUB", 11),
    "metrics_L2Cache": _synth("910B", "L2Cache", 12),
    "metrics_MemoryAccess": _synth("910B", "MemoryAccess", 13),
    "metrics_Custom": _synth("910B", CUSTOM, 14),
    "metrics_310p_PipeUtilization": _mk("310P", "PipeUtilization"),
    "metrics_310p_ArithmeticUtilization": _mk("310P", "ArithmeticUtilization"),
    "metrics_310p_Memory": _mk("310P", "Memory"),
    "metrics_310p_MemoryL0": _mk("310P", "MemoryL0"),
    "metrics_310p_ResourceConflictRatio": _mk("310P", "ResourceConflictRatio"),
    "metrics_310p_MemoryUB": _synth("310P", "MemoryUB", 21),
    "metrics_310p_Custom": _synth("310P", CUSTOM, 22),
}

# Inputs on which msprof-kit deliberately differs from the reference (docs/exports.md); their stored
# reference outputs are the evidence.
#: A group whose event list lacks the group's events: the reference's C++ flavour refuses the PMU and
#: loses the device's tasks with it; msprof-kit keeps the tasks.
UNUSABLE = _synth("910B", "Memory", 31, events="0x8,0xa,0x9,0xb,0xc,0xd,0x54,0x55")
#: Custom event lists that differ between the cores: the reference names the AIV columns after the
#: AI Core's list and prints every PMU cell N/A; msprof-kit names each core's columns after its list.
CUSTOM_SPLIT = _synth("910B", CUSTOM, 32, aiv_metrics="Custom:0x9,0xc,0xd,0x16,0x43,0x44,0x37,0x38")
DIFFERENCES: Dict[str, Case] = {"metrics_unusable": UNUSABLE, "metrics_custom_split": CUSTOM_SPLIT}


def generate(case: Case, out_dir: str) -> str:
    """Write the case's raw collection below out_dir; returns its PROF directory."""
    os.makedirs(out_dir, exist_ok=True)
    if case.mkprof:
        res = subprocess.run([sys.executable, MKPROF, out_dir, *case.mkprof], capture_output=True, text=True,
                             check=True)
        return res.stdout.strip().splitlines()[-1]
    sys.path.insert(0, HERE)
    import synth  # noqa: E402  (tests/ is not a package)
    return synth.write_collection(out_dir, **case.synth)  # type: ignore[arg-type]  # Dict[str, object] keywords


def stored(name: str, flavour: str) -> str:
    return os.path.join(REFERENCE, name, flavour)


def kinds_of(name: str, flavour: str) -> List[str]:
    """The export kinds stored for a case's flavour (compare_exports' --kinds)."""
    folder = stored(name, flavour)
    have = set(os.listdir(folder)) if os.path.isdir(folder) else set()
    kinds = [k for k in ("op_summary", "op_statistic") if f"{k}.csv" in have]
    if "msprof.json" in have:
        kinds.append("timeline")
    if "msprof.db" in have:
        kinds.append("db")
    return kinds
