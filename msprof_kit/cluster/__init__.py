"""`msprof-kit cluster`: the analysis of a multi-rank job (docs/cluster.md).

Phase 0 finds the ranks (`ranks.py`), phase 1 reads each rank's small tables (`rank_tables.py`) on
Dask (`engine.py`), phase 2 joins them into a `ClusterResult` (`join.py`, `result.py`), and phase 3
writes the outputs from it: msprof-analyze's text files (`text_outputs.py`), `cluster_analysis.db`
(`database.py`) and the slow ranks and links (`slow.py`); `run.py` wires the phases.
"""
