"""`msprof-kit cluster`: the four phases wired together (docs/cluster.md).

Phase 0 finds the ranks under the cluster folder (cluster.ranks), phase 1 reads each rank into its
small tables as one Dask task (cluster.rank_tables on cluster.engine), phase 2 joins them by
communication group (cluster.join), phase 3 writes the outputs (cluster.text_outputs,
cluster.database, cluster.slow) into CLUSTER/cluster_analysis_output/ or OUT/cluster_analysis_output/,
as msprof-analyze names it.

The output folder appears whole or not at all (cluster.outdir).
"""
from __future__ import annotations

import os
from typing import Callable, Dict, List, Optional, Union

from ..errors import Diagnostics, NoData
from ..interrupt import terminate_as_interrupt
from .database import write_cluster_db
from .engine import DEFAULT_MEMORY_LIMIT, map_ranks, require_dask
from .join import join
from .outdir import OUTPUT_DIR, Writer, output_folder, write_atomically
from .rank_tables import rank_tables
from .ranks import find_ranks
from .slow import write_slow_outputs
from .text_outputs import write_text_outputs

__all__ = ["run_cluster", "output_folder", "write_atomically", "lacking_line", "OUTPUT_DIR"]


def lacking_line(rank: Optional[int], path: str, error: str) -> str:
    """The line naming a rank left out of the analysis and why."""
    who = f"rank {rank}" if rank is not None and rank >= 0 else "a rank"
    where = "" if error.startswith(path) else f"{path}: "  # most errors name a file of the rank already
    return f"{who} is left out of the cluster analysis: {where}{error}"


def run_cluster(cluster_dir: str, out_dir: Optional[str] = None, workers: Optional[int] = None,
                scheduler: Optional[str] = None, diag: Optional[Diagnostics] = None,
                memory_limit: Union[str, int, float, None] = DEFAULT_MEMORY_LIMIT,
                announce: Optional[Callable[[str], None]] = None) -> List[str]:
    """Analyse the ranks under `cluster_dir` and write the cluster outputs; returns the files
    written (in output_folder(cluster_dir, out_dir)).

    `workers`, `scheduler`, `memory_limit`: where phase 1 runs (cluster.engine.map_ranks: an
    embedded LocalCluster of `workers` processes, or the existing scheduler at `scheduler`).
    A rank that cannot be read is left out with a warning in `diag` naming it and why; only when no
    rank can be read is it an error (NoData). SIGTERM and SIGHUP stop it as Ctrl-C does: the Dask
    workers are stopped and nothing is left of the output. `announce` gets the Dask dashboard's
    address when one runs."""
    diag = diag if diag is not None else Diagnostics()
    require_dask()
    with terminate_as_interrupt():
        ranks = find_ranks(cluster_dir, diag)
        paths = [os.path.abspath(info.path) for info in ranks]
        rank_of: Dict[str, Optional[int]] = {os.path.abspath(info.path): info.rank for info in ranks}
        tables, failures = map_ranks(rank_tables, paths, workers=workers, scheduler=scheduler,
                                     memory_limit=memory_limit, progress=diag.progress, announce=announce)
        for path, error in failures.items():
            diag.warn(lacking_line(rank_of.get(path), path, error))
        if not tables:
            first = next(iter(failures.values()), "no rank found")
            raise NoData(f"none of the {len(paths)} ranks could be read (the first: {first})", path=cluster_dir)
        result = join([tables[path] for path in paths if path in tables], failures)
        writers: List[Writer] = [lambda folder: write_text_outputs(result, folder),
                                 lambda folder: write_cluster_db(result, folder),
                                 lambda folder: write_slow_outputs(result, folder)]
        with diag.progress.phase("writing the cluster outputs"):
            return write_atomically(output_folder(cluster_dir, out_dir), writers)
