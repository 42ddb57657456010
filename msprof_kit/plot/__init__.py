"""`plot`: PNG charts of a collection, drawn with matplotlib's Agg canvas (no display, no pyplot).

Six kinds, each one file (docs/plot_compare.md shows an example of each):

* `top_ops`: the top-N operators by total device time, horizontal bars labelled with the time,
  the share of all operator time and the task count;
* `op_types`: total time per operator type (stacked by core type) and per core type;
* `gantt`: device tasks per stream for one iteration (or the whole run when the collection has no
  iterations), with lanes of host API calls (per thread and level) above the device lanes;
* `pmu`: the AI Core PMU pipe ratios (mac, vec, scalar, mte1/2/3, fixpipe, ...) of the top
  operators as a heatmap, each operator's largest ratio framed;
* `freq`: the AI Core frequency over time, when it was recorded;
* `communication`: the time per collective (communication OP) type, with the master planes'
  Notify_Wait time inside it, and the bandwidth per transport (RDMA, HCCS, PCIE, SDMA, SIO).

On a cluster analysis output folder (cluster_analysis_output/) `plot` draws one chart instead,
`cluster.png` (plot/cluster.py): each rank's step time as stacked bars and the links' bandwidth as
a heatmap per transport.

The data comes from `sources/` (store, exported CSVs, unified DBs or timelines, whatever the
directory holds), so every kind works on raw, JOB and exported-only collections. A kind whose data
is absent is skipped with one line saying why.

The modules: `drawing` (what every chart shares, compare's too), `collection` (one collection's
data), one per chart family (`operators`: top_ops, op_types, pmu; `gantt`; `freq`; `communication`) and `run`
(the `plot` entry point, which writes each figure). This file re-exports what cli.py uses.
"""
from __future__ import annotations

from .drawing import DEFAULT_OUT, MAX_BARS, SIZES
from .run import DEFAULT_TOP, FILE_NAMES, KINDS, plot

__all__ = ["DEFAULT_OUT", "DEFAULT_TOP", "FILE_NAMES", "KINDS", "MAX_BARS", "SIZES", "plot"]
