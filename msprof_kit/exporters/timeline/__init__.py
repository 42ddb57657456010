"""msprof_{ts}.json, the timeline (Chrome trace event format, outputs.md §9), and step_trace_{ts}.json.

The file is a bare JSON array. Its processes, one per layer and device (pid = real pid << 10 |
sort index << 5 | device id, 31 for the host):

* CANN (sort index 7): the host APIs, one thread per OS thread, named `<Level>@<api>`;
* Ascend Hardware (14): the device tasks, one thread per stream, named after their op (or task
  type); and the step-trace iterations of each model (thread 70000 + model id);
* AI Core Freq (15): a counter of the AI Core frequency (MHz);
* Overlap Analysis (31; 20 in the Python flavour): when the device computed and when it was idle.

HostToDevice flow arrows join each device task to the host call that issued it: the node launch
(or the ACL call of a memory copy or event task) in the C++ flavour; in the Python flavour the
host task record inside the launch (outputs.md §9.5). Only complete arrows are written: the
reference also writes an arrow start without an end when a launch's task is missing.

The modules: writer.py streams the JSON (`TraceWriter`, `Template`); facts.py, tasks.py and apis.py
read what the layers show; one module per layer (cann.py, hardware.py with steps.py, freq.py,
overlap.py) and arrows.py for the flows; export.py runs them (`write_timeline`).

Every event kind has one text template (a `Template` of literal pieces and typed slots), filled
from column arrays a chunk at a time by `native_impl.format_rows` (one C call per chunk when the
extension is built, its Python twin otherwise); each chunk is written as soon as it is made, so
memory is bounded by a chunk. Texts (names, modes, task types) are JSON-encoded once per distinct
value and referenced by code. Times are printed from integer ns as "<µs>.<3 decimals>" (exact);
durations are the float µs the reference prints (Python's repr of ns / 1000). Times are µs since the
Unix epoch, as the reference writes them, or with `ts_origin="start"` µs since the collection's start
(`ts_origin_ns`): Perfetto turns a time into ns through a double, which keeps 3 decimals of µs
exact below about 10^12 µs but not at epoch values (~1.7 * 10^15), where back-to-back slices then
overlap by a few ns and are dropped.

The rules follow the flavour a CANN install uses for the chip (`ctx.flavour`): the C++ exporters
on the 910B family, the Python exporters on other chips and for every iteration (graph) export.
An iteration export applies the reference's windows (docs/research/iteration_export.md §2, §3.8):
device tasks whose start and end lie in the iterations (the window's tasks of other models shown as
device-only tasks), host APIs in or spanning the API window, the requested iterations only, the
overlap recomputed from the exported tasks, and every device layer cut to the timeline window.
"""
from __future__ import annotations

from .export import ts_origin_ns, write_timeline

__all__ = ["ts_origin_ns", "write_timeline"]
