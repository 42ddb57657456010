"""Step-trace iterations: the `Iteration <n>` events of the Ascend Hardware layer and of
step_trace_{ts}.json, with their training-trace events (FP_BP Time, Iteration Refresh, Data_aug
Bound, Reduce) where the step trace has FP/BP and all-reduce tags (exporters/training.py)."""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from ..context import ExportContext
from ..scope import step_iterations
from .facts import Facts
from .writer import meta_event, thread_meta

STEP_TID_BASE = 70000     # step-trace thread of model m: 70000 + m


Iteration = Tuple[int, int, int, int]  # (model id, iteration index, start ns, end ns)


def iteration_events(facts: Facts, pid: int, its: Sequence[Iteration], device: int,
                     tid_of: Optional[Dict[int, int]] = None) -> List[str]:
    """The step-trace events of one device's iterations, on thread 70000 + model id (or
    `tid_of[model]`): per iteration an `Iteration <n>` X event (category `Iteration Time`) from
    model start (or the previous iteration end) to iteration end; with FP and BP tags, an
    `FP_BP Time <n>` and an `Iteration Refresh <n>` X event and the `Data_aug Bound` flow (a `t`
    event at FP start, an `s` event in the refresh); and one `Reduce_<n>_<k>` X event per ended
    all-reduce. In the C++ flavour k counts every reduce of the export and the Reduce args are
    ns; the Python flavour (and an iteration export) counts per iteration and prints µs."""
    events: List[str] = []
    trace = facts.training
    for model, index, start, end in sorted(its, key=lambda it: (it[2], it[0])):
        key = (device, model, index)
        tid = tid_of[model] if tid_of else STEP_TID_BASE + model
        fp, bp = trace.fp.get(key), trace.bp.get(key)
        dur = max(end - start, 0) / 1000.0
        head = f'"pid":{pid},"tid":{tid}'
        events.append(f'{{"name":"Iteration {index}",{head},"ts":"{facts.us_text(start)}","dur":{dur!r},"ph":"X",'
                      f'"cat":"Iteration Time","args":{{"Iteration ID":{index},"FP Start":"{_stamp(facts, fp)}",'
                      f'"BP End":"{_stamp(facts, bp)}","Iteration End":"{facts.us_text(end)}",'
                      f'"Iteration Time(us)":{dur!r}}}}}')
        if fp is not None and bp is not None:
            events += _training_events(facts, head, index, fp, bp, end, trace.data_aug.get(key), f"{pid}_{tid}")
        first = 0 if facts.python_rules else trace.reduces_before.get(key, 0)
        events += _reduce_events(facts, head, index, trace.ended(key), first)
    return events


def _reduce_events(facts: Facts, head: str, index: int, reduces: List[Tuple[int, int]], first: int) -> List[str]:
    """`Reduce_<index>_<k>` X events, k from `first`; the args in ns (C++) or µs (Python)."""
    events = []
    for k, (start, end) in enumerate(reduces, start=first):
        ns = not facts.python_rules
        text = (str(start - facts.origin), str(end - facts.origin)) if ns else (facts.us_text(start), facts.us_text(end))
        events.append(f'{{"name":"Reduce_{index}_{k}",{head},"ts":"{facts.us_text(start)}",'
                      f'"dur":{max(end - start, 0) / 1000.0!r},"ph":"X","cat":"Reduce","args":{{'
                      f'"Iteration ID":{index},"Reduce Start {k}":"{text[0]}","Reduce End {k}":"{text[1]}"}}}}')
    return events


def _stamp(facts: Facts, ns: Optional[int]) -> str:
    return "N/A" if ns is None else facts.us_text(ns)


def _training_events(facts: Facts, head: str, index: int, fp: int, bp: int, end: int, aug: Optional[int],
                     flow: str) -> List[str]:
    """FP_BP Time, Iteration Refresh and the Data_aug Bound flow of one iteration. The flow's
    `s` event lies half the Data Aug Bound after BP end in the C++ flavour, half the refresh in
    the Python one; its arg is 0 when the iteration has no Data Aug Bound."""
    fp_bp, refresh = (bp - fp) / 1000.0, (end - bp) / 1000.0
    # the Python export shows a zero span as N/A (viewer/training/step_trace_viewer.py)
    fp_bp_arg = '"N/A"' if facts.python_rules and bp == fp else repr(fp_bp)
    refresh_arg = '"N/A"' if facts.python_rules and end == bp else repr(refresh)
    middle = bp + ((end - bp) // 2 if facts.python_rules else (aug or 0) // 2)
    return [
        f'{{"name":"FP_BP Time {index}",{head},"ts":"{facts.us_text(fp)}","dur":{fp_bp!r},"ph":"X",'
        f'"cat":"FP_BP Time","args":{{"Iteration ID":{index},"FP Start":"{facts.us_text(fp)}",'
        f'"BP End":"{facts.us_text(bp)}","FP_BP Time(us)":{fp_bp_arg}}}}}',
        f'{{"name":"Iteration Refresh {index}",{head},"ts":"{facts.us_text(bp)}","dur":{refresh!r},"ph":"X",'
        f'"cat":"Iteration Refresh","args":{{"Iteration ID":{index},"BP End":"{facts.us_text(bp)}",'
        f'"Iteration End":"{facts.us_text(end)}","Iteration Refresh(us)":{refresh_arg}}}}}',
        f'{{"name":"Data_aug Bound {index - 1}","cat":"Data_aug Bound","ph":"t","ts":"{facts.us_text(fp)}",'
        f'{head},"id":"Data_aug Bound {flow}","args":{{"Iteration ID":{index}}}}}',
        f'{{"name":"Data_aug Bound {index}","cat":"Data_aug Bound","ph":"s","ts":"{facts.us_text(middle)}",'
        f'{head},"id":"Data_aug Bound {flow}","args":{{"Data_aug Bound(us)":{(aug or 0) / 1000.0!r}}}}}',
    ]


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
        texts += iteration_events(facts, real, its, dev, tid_of)
    return texts
