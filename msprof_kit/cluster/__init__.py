"""The cluster analysis: msprof-analyze's cluster outputs made from several ranks' collections.

Phase 0 finds the ranks, phase 1 reads each rank's tables, phase 2 joins them into a
`ClusterResult` (`result.py`), and phase 3 writes the outputs from it: msprof-analyze's text files,
`cluster_analysis.db` (`database.py`) and the slow ranks and links (`slow.py`). docs/cluster.md
describes each output.
"""
