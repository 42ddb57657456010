"""Step-trace iterations: the `Iteration <n>` events of the Ascend Hardware layer and of
step_trace_{ts}.json."""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from ..context import ExportContext
from ..scope import step_iterations
from .facts import Facts
from .writer import meta_event, thread_meta

STEP_TID_BASE = 70000     # step-trace thread of model m: 70000 + m


Iteration = Tuple[int, int, int, int]  # (model id, iteration index, start ns, end ns)


def iteration_events(facts: Facts, pid: int, its: Sequence[Iteration],
                     tid_of: Optional[Dict[int, int]] = None) -> List[str]:
    """`Iteration <n>` X events (category `Iteration Time`) from model start (or the previous
    iteration end) to iteration end, on thread 70000 + model id (or `tid_of[model]`). FP/BP tags
    are not in inference collections: `N/A`."""
    events = []
    for model, index, start, end in sorted(its, key=lambda it: (it[2], it[0])):
        dur = max(end - start, 0) / 1000.0
        tid = tid_of[model] if tid_of else STEP_TID_BASE + model
        events.append(f'{{"name":"Iteration {index}","pid":{pid},"tid":{tid},'
                      f'"ts":"{facts.us_text(start)}","dur":{dur!r},"ph":"X","cat":"Iteration Time","args":{{'
                      f'"Iteration ID":{index},"FP Start":"N/A","BP End":"N/A","Iteration End":"{facts.us_text(end)}",'
                      f'"Iteration Time(us)":{dur!r}}}}}')
    return events


def timeline_steps(ctx: ExportContext) -> Dict[int, List[Iteration]]:
    """The iterations msprof.json shows per device: all of them, or the exported ones."""
    sc = ctx.scope
    if sc.model_id is None:
        steps = step_iterations(ctx)
    else:
        model = sc.model_id
        steps = {dev: [(model, index, start, end) for index, start, end, _ in its]
                 for dev, its in sc.iterations.items()}
    return {dev: its for dev, its in steps.items() if its}


def graph_step_texts(ctx: ExportContext, facts: Facts) -> List[str]:
    """step_trace_{ts}.json of an iteration export: every iteration, in the reference's unlabelled
    form (process `Step Trace` with the device's real pid, thread `Model ID:<m>` = real pid + 70000
    + the model's rank; iteration_export.md §3.5)."""
    texts: List[str] = []
    for dev, its in sorted(step_iterations(ctx).items()):
        if not its:
            continue
        real = facts.device_pids.get(dev, facts.host_pid)
        tid_of = {m: real + STEP_TID_BASE + k for k, m in enumerate(sorted({it[0] for it in its}))}
        texts.append(meta_event("process_name", real, 0, {"name": "Step Trace"}))
        for model, tid in tid_of.items():
            texts += thread_meta(real, tid, f"Model ID:{model}", STEP_TID_BASE + model)
        texts += iteration_events(facts, real, its, tid_of)
    return texts
