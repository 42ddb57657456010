"""`msprof-kit cluster`: the analysis of a multi-rank job (docs/cluster.md) — find the ranks, read each
on Dask (engine), join them by communication group and write msprof-analyze's cluster outputs (run)."""
