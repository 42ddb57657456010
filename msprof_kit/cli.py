"""The `msprof-kit` command: thin commands over the library, one error boundary in `main`."""
from __future__ import annotations

import argparse
import contextlib
import os
import sqlite3
import sys
from typing import Any, Dict, Iterator, List, Optional

# numpy's OpenBLAS starts a thread a core when it is imported, and they spin for a while; msprof-kit
# does no linear algebra, so its commands run without them (a setting of the user's own stands)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from . import __version__, importer, memory, progress, store
from .errors import BadOption, Diagnostics, MsprofKitError, StoreError
from .forked import default_jobs
from .interrupt import Terminated, terminate_as_interrupt
from .exporters.analyze import RULES as ANALYZE_RULES
from .show_options import DEFAULT_TOP, FORMATS


WRITE_CHUNK = 1 << 16  # characters of show's output written at a time


def _dir_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("-dir", "--collection-dir", dest="dir", required=True, metavar="DIR",
                   help="a PROF_xxx collection, or a folder holding several")
    _jobs_arg(p)
    _talk_args(p)


def _talk_args(p: argparse.ArgumentParser, top: bool = False) -> None:
    """--quiet, --progress and --store, given before the command or after it."""
    # a command's own default would hide the top's
    default: Dict[str, Any] = {} if top else {"default": argparse.SUPPRESS}
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors on stderr: no progress, "
                   "notes or warnings (and no 'Imported'/'Wrote' lines)", **default)
    p.add_argument("--progress", action="store_true", help="report progress on stderr even when it is not a "
                   "terminal (a line per phase, and one every few seconds); a terminal gets a live bar anyway",
                   **default)
    p.add_argument("--store", metavar="DIR", help="keep the stores in DIR (one folder per collection) instead of "
                   f"PROF_xxx/sqlite/ (also: the environment variable {store.STORE_ENV})", **default)


def _jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of processes, 1 or more, not {text!r}")
    return value


def _jobs_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("-j", "--jobs", type=_jobs, default=default_jobs(), metavar="N",
                   help="processes sharing the work: collections, and a collection's devices "
                        f"(default: the core count, {default_jobs()} here)")


def _scope_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model-id", type=int, metavar="M", help="export one model's iterations (with --iteration-id)")
    p.add_argument("--iteration-id", type=int, metavar="I", help="the first iteration to export (with --model-id)")
    p.add_argument("--iteration-count", type=int, default=1, metavar="N",
                   help="how many iterations from --iteration-id (1 to 5, default 1)")
    p.add_argument("--clear", action="store_true", help="remove the store msprof-kit made, after exporting")


def _parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="msprof-kit",
                                  description="Parse and export Ascend msprof profiling collections, no CANN needed.")
    top.add_argument("--version", action="version", version=f"msprof-kit {__version__}")
    top.add_argument("--traceback", action="store_true", help="show the Python stack on errors")
    _talk_args(top, top=True)
    sub = top.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("import", help="parse raw data into the store (PROF_xxx/sqlite/msprof_kit.db)",
                       description="Parse a raw collection into its sqlite store; re-import replaces it.")
    _dir_arg(p)
    p.set_defaults(run=cmd_import)

    p = sub.add_parser("export", help="write exports of a collection",
                       description="Write exports of a collection (imports it first when needed).")
    p.set_defaults(help_of=p)  # `export` alone prints export's help, not the top level's
    esub = p.add_subparsers(dest="what", metavar="WHAT")
    e = esub.add_parser("db", help="the unified msprof_{ts}.db at the collection root",
                        description="Write PROF_xxx/msprof_{ts}.db, the unified database msprof writes.")
    _dir_arg(e)
    e.set_defaults(run=cmd_export_db)
    e = esub.add_parser("timeline", help="the msprof_{ts}.json timeline in mindstudio_profiler_output/",
                        description="Write the chrome-trace timeline msprof writes (open it in Perfetto or "
                                    "MindStudio Insight).")
    _dir_arg(e)
    _scope_args(e)
    e.add_argument("-reports", "--reports", metavar="FILE",
                   help='JSON choosing the layers: {"json_process": {"cann": true, "ascend": true, '
                        '"step_trace": true, "freq": false, "overlap_analyse": true}}')
    e.add_argument("--ts-origin", choices=("epoch", "start"), default="epoch",
                   help="times as µs since the Unix epoch, as msprof writes them (default), or since the "
                        "collection's start, which Perfetto keeps exact to the ns (docs/exports.md)")
    e.set_defaults(run=cmd_export, what="timeline")
    e = esub.add_parser("summary", help="op_summary, op_statistic, api_statistic, task_time ... CSVs",
                        description="Write the summary files msprof writes into mindstudio_profiler_output/.")
    _dir_arg(e)
    _scope_args(e)
    e.add_argument("--format", choices=("csv", "json"), default="csv", help="file format (default csv)")
    e.set_defaults(run=cmd_export, what="summary")

    p = sub.add_parser("analyze", help="communication analysis: analyze/communication.json and "
                       "communication_matrix.json", description="Write PROF_xxx/analyze/<rule>.json as msprof.py "
                       "analyze does, from the collection's communication (HCCL) tasks (imports it first when needed).")
    _dir_arg(p)
    p.add_argument("-rule", "--rule", default=",".join(ANALYZE_RULES), metavar="RULES",
                   help="comma-separated: communication, communication_matrix (default: both)")
    p.set_defaults(run=cmd_analyze)

    p = sub.add_parser("query", help="print the collection's devices, models and iterations",
                       description="Print the msprof query table: device, model ids, iteration counts.")
    _dir_arg(p)
    p.set_defaults(run=cmd_query)

    p = sub.add_parser("show", help="print the op summary, op statistic, API statistic and AI Core frequency",
                       description="Print the key tables of a collection: raw (imported first), or only "
                                   "exported files (mindstudio_profiler_output/, ASCEND_PROFILER_OUTPUT/, summary "
                                   "CSVs, msprof_*.db, timelines). Numbers sort largest first.")
    p.add_argument("-dir", "--collection-dir", dest="dir", metavar="DIR",
                   help="a collection, or a folder holding several (default: the newest collection under the "
                        "current directory)")
    p.add_argument("-r", "--report", action="append", metavar="REPORT",
                   help="op_summary, op_statistic, api_statistic, freq or communication; repeat or comma-separate "
                        "(default: every one that has data); on a cluster analysis output: slow_ranks, slow_links, "
                        "cluster")
    p.add_argument("--top", type=int, default=DEFAULT_TOP, metavar="N",
                   help=f"rows per table (default {DEFAULT_TOP}; 0 for all)")
    p.add_argument("--sort", metavar="COLUMN", help="order by this column (any case, or the start of its name)")
    p.add_argument("--format", choices=FORMATS, default="table", help="table (default), csv or json")
    _talk_args(p)
    p.set_defaults(run=cmd_show)
    p = sub.add_parser("plot", help="draw PNG charts: top operators, time by type, a per-stream Gantt, PMU "
                                    "ratios, AI Core frequency, communication",
                       description="Draw PNG charts of a collection (raw, JOB, or exported files only): the top "
                                   "operators, total time by op type and core type, a per-stream Gantt of one "
                                   "iteration with host API lanes, the PMU ratios of the top operators, the AI "
                                   "Core frequency, and the time per collective type with the bandwidth per "
                                   "transport. docs/plot_compare.md shows each.")
    p.add_argument("-dir", "--collection-dir", dest="dir", metavar="DIR",
                   help="a collection, or a folder holding several (default: the newest collection under the "
                        "current directory)")
    p.add_argument("--out", metavar="DIR", help="where the PNG files go (default ./msprof_kit_plots)")
    p.add_argument("--top", type=int, default=10, metavar="N", help="bars in the operator charts (default 10)")
    p.add_argument("--iteration", type=int, metavar="I", help="the Gantt's iteration (default: the median one)")
    p.add_argument("--start", type=float, metavar="US", help="the Gantt's window instead: from US µs after the run's "
                                                           "start (its first device task)")
    p.add_argument("--end", type=float, metavar="US", help="... to US µs after the run's start (default: its end)")
    _talk_args(p)
    p.set_defaults(run=cmd_plot)

    p = sub.add_parser("compare", help="compare the operators of two collections",
                       description="Match the operators of two collections (by op type, or by name with a fallback "
                                   "for renamed ops) and print counts, totals, averages, the delta and the ratio per "
                                   "row, largest change first, and the end-to-end model execution times.")
    p.add_argument("-dir", "--collection-dir", dest="dirs", action="append", required=True, metavar="DIR",
                   help="give it twice: collection A, then collection B")
    p.add_argument("--by", choices=("type", "name"), default="type", help="match by op type (default) or op name")
    p.add_argument("--top", type=int, default=20, metavar="N", help="rows shown (default 20; 0 for all)")
    p.add_argument("--plot", action="store_true", help="also draw the delta chart")
    p.add_argument("--out", metavar="DIR", help="where the chart goes (default ./msprof_kit_plots)")
    _talk_args(p)
    p.set_defaults(run=cmd_compare)

    _cluster_parser(sub)
    _collect_parser(sub)
    _infer_parser(sub)
    return top


def _memory_limit(text: str) -> str:
    """--memory-limit: 'auto', 'none', or a size Dask reads (4GiB, 500MB, bytes)."""
    value = text.strip()
    if value.lower() in ("auto", "none", "0"):
        return value.lower()
    try:
        from dask.utils import parse_bytes
        parse_bytes(value)
    except ImportError:
        return value  # the command says Dask is missing, once it runs
    except (ValueError, TypeError):
        raise argparse.ArgumentTypeError(f"expected a size such as 4GiB or 500MB, auto or none, not {text!r}")
    return value


def _cluster_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("cluster", help="analyse a multi-rank job from its raw rank collections, on Dask: "
                                       "msprof-analyze's cluster outputs plus the slow ranks and links",
                       description="Read every rank collection (PROF_xxx) under a cluster folder as one Dask "
                                   "task each, join them by communication group and write msprof-analyze's "
                                   "cluster outputs (cluster_step_trace_time.csv, cluster_communication.json, "
                                   "cluster_communication_matrix.json, communication_group.json, "
                                   "cluster_analysis.db) plus slow_ranks.csv and slow_links.csv into "
                                   "CLUSTER/cluster_analysis_output/. Needs the extra: pip install "
                                   "'msprof-kit[cluster]'. docs/cluster.md has the recipes for several machines.")
    p.add_argument("-dir", "--collection-dir", dest="dir", required=True, metavar="CLUSTER",
                   help="the folder holding the ranks' PROF_xxx collections (searched 10 levels deep)")
    p.add_argument("-o", "--output", metavar="OUT", help="write OUT/cluster_analysis_output/ instead of "
                                                          "CLUSTER/cluster_analysis_output/")
    p.add_argument("--workers", type=_jobs, metavar="N", help="worker processes of the Dask cluster started on "
                   f"this machine (default: the core count, {default_jobs()} here)")
    p.add_argument("--scheduler", metavar="ADDR", help="use the running Dask cluster whose scheduler is at ADDR "
                   "(tcp://HOST:8786) instead; its workers must see CLUSTER at the same path (also: the "
                   "environment variable DASK_SCHEDULER_ADDRESS)")
    p.add_argument("--memory-limit", type=_memory_limit, default="auto", metavar="SIZE",
                   help="memory per worker of the cluster started here (4GiB; default auto: this machine's "
                        "memory shared by the workers; none: no limit); a worker above it is restarted and "
                        "its rank read again")
    _talk_args(p)
    p.set_defaults(run=cmd_cluster)


def _collect_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    from .collectors import acljson
    p = sub.add_parser(
        "collect", help="profile a program: locally through acl.json, or on a SoC board over SSH",
        description="Profile one run of a program. --application runs it here with an acl.json written "
                    "where it reads it; -m runs a SoC board's `main` over SSH (board.ini [ssh_config]) and "
                    "brings the JOB data back. --all then imports and exports what was collected. "
                    "docs/collectors.md has the details.")
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--application", metavar="CMD", help="the program and its arguments, as one string")
    how.add_argument("-m", "--main", metavar="MAIN", help="the board program (its folder is uploaded)")
    p.add_argument("--config", metavar="INI", help="with -m: board.ini holding [ssh_config] ip, username, pwd, port")
    p.add_argument("--flavour", choices=("cann", "soc"), default="cann",
                   help="with --application: the acl.json keys to write (default cann)")
    p.add_argument("--output", metavar="DIR", help="where the collection goes (default: the current directory)")
    p.add_argument("--acl-json-path", metavar="FILE", help="with --application: where the program reads "
                                                          "acl.json (default ./acl.json)")
    p.add_argument("--timeout", type=float, metavar="S", help="stop the program after S seconds")
    p.add_argument("--all", dest="run_all", action="store_true", help="import and export what was collected")
    p.add_argument("--switch", choices=("on", "off"), default="on", help="the acl.json master switch (default on)")
    soc = p.add_argument_group("SoC keys (-m, or --flavour soc)")
    for key in acljson.SOC_KEYS:
        if key.name not in ("switch", "output"):
            _key_option(soc, key.name, f"soc_{key.name}", f"{key.meaning} (default {key.default})")
    cann = p.add_argument_group("CANN keys (--application)")
    for key in acljson.CANN_KEYS:
        if key.name not in ("switch", "output"):
            _key_option(cann, key.name, f"cann_{key.name}", f"{key.meaning} (default {key.default})")
    board = p.add_argument_group("board (-m)")
    board.add_argument("--nfs", metavar="SERVER:/abs/path", help="mount the board's profiling folder there "
                                                                "instead of copying over SFTP")
    board.add_argument("--accept-new-host-key", action="store_true", help="trust and record an unknown host key")
    board.add_argument("--known-hosts", metavar="FILE", help="trusted host keys (default ~/.ssh/known_hosts)")
    p.set_defaults(run=cmd_collect)


def _switch_value(text: str) -> bool:
    """ais_bench's switch values: 1/true/t/yes/y and 0/false/f/no/n, any case."""
    value = text.strip().lower()
    if value in ("1", "true", "t", "yes", "y"):
        return True
    if value in ("0", "false", "f", "no", "n"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not a switch value (1/0, true/false, yes/no)")


def _infer_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """`infer`: ais_bench's options, in their dashed spellings; the underscored ones are accepted too."""
    p = sub.add_parser("infer", help="run an offline model as ais_bench does, optionally profiled",
                       description="Run an offline model (.om) as ais_bench does: warm-up, loops, latency and "
                                   "throughput summary, optionally under msprof or with a generated acl.json. "
                                   "Without CANN it runs only on the emulator, when asked "
                                   "(MSPROF_KIT_EMULATE_ACL=1). docs/collectors.md has the rules.")
    p.add_argument("-m", "--model", required=True, help="the offline model (.om)")
    p.add_argument("-i", "--input", help="input files (one per model input) or folders (one per model input, "
                                         "one file per sample), comma-separated; default: zero data")
    p.add_argument("-o", "--output", help="results root: <output>/<YYYY_MM_DD-HH_MM_SS>/ and its _summary.json; "
                                          "default: nothing is written")
    p.add_argument("--output-dirname", "--output_dirname", dest="output_dirname",
                   help="a fixed result folder inside --output instead of the date")
    p.add_argument("-l", "--loop", type=int, default=1, help="measured runs per sample (default 1)")
    p.add_argument("--warmup-count", "--warmup_count", dest="warmup_count", type=int, default=1,
                   help="unmeasured runs first (default 1)")
    p.add_argument("-d", "--device", default="0", help="device id, or ids such as 0,1 run in turn (default 0)")
    p.add_argument("--batch", "--batchsize", dest="batch", type=int,
                   help="batch size for the throughput (default: dim 0 of input 0)")
    p.add_argument("--profiler", type=_switch_value, default=False, metavar="1|0",
                   help="profile the run: under msprof when it is on PATH, else through <output>/acl.json")
    p.add_argument("--dump", type=_switch_value, default=False, metavar="1|0",
                   help="dump every operator's data into <output>/dump through <output>/acl.json")
    p.add_argument("--acl-json-path", "--acl_json_path", dest="acl_json_path",
                   help="an acl.json given to acl.init as it is (--profiler and --dump are then ignored)")
    p.add_argument("--display-all-summary", "--display_all_summary", dest="display_all", type=_switch_value,
                   default=False, metavar="1|0", help="also print the H2D and D2H latencies")
    p.set_defaults(run=cmd_infer)


def _key_option(group: "argparse._ArgumentGroup", name: str, dest: str, text: str) -> None:
    """An acl.json key as an option spelt as msprof spells it, with dashes (`--task-time`), and
    also as the key itself (`--task_time`); the help shows the dashed spelling only."""
    dashed = "--" + name.replace("_", "-")
    group.add_argument(dashed, dest=dest, metavar="V", help=text)
    if "_" in name:
        group.add_argument(f"--{name}", dest=dest, metavar="V", help=argparse.SUPPRESS)


def _report(diag: Diagnostics, quiet: bool = False) -> None:
    """The notes and warnings of a command on stderr (nothing with --quiet)."""
    if quiet:
        return
    for n in diag.notes:
        print(f"Note: {n}", file=sys.stderr)
    for w in diag.warnings:
        print(f"Warning: {w}", file=sys.stderr)


def cmd_import(args: argparse.Namespace, diag: Diagnostics) -> int:
    """`msprof-kit import`: build the store of each collection under -dir."""
    done = importer.import_path(args.dir, diag, args.jobs)
    _report(diag, args.quiet)
    for item in done if not args.quiet else ():
        print(f"Imported {item.collection.path} -> {item.store}")
    return 0


def cmd_export_db(args: argparse.Namespace, diag: Diagnostics) -> int:
    """`msprof-kit export db`: write msprof_{ts}.db from each collection's store."""
    done = importer.export_db(args.dir, diag, args.jobs)
    _report(diag, args.quiet)
    for path, written in done if not args.quiet else ():
        print(f"Wrote {path}" if written else f"{path} is current: made from this store, not written again")
    return 0


def run_export(path: str, what: str, diag: Diagnostics, model_id: Optional[int] = None,
               iteration_id: Optional[int] = None, iteration_count: int = 1, fmt: str = "csv",
               stamp: Optional[str] = None, clear: bool = False, reports: Optional[str] = None,
               jobs: int = 1, ts_origin: str = "epoch") -> List[str]:
    """`export timeline|summary` of every collection at `path`: the options checked, then the
    collections imported where needed (as the reference parses before it exports), then exported
    from their stores (exporters.run.export_stores, which has the options' meaning). Returns the
    files written."""
    from .exporters import run as export_run  # (a command imports only what it runs: start-up)
    from .exporters.scope import check_options

    check_options(model_id, iteration_id)  # before anything is read or imported
    layers = export_run.read_reports(reports, diag) if reports else None
    paths = [coll.path for coll in importer.ensure_imported(path, diag, jobs)]
    for p in paths:
        importer.note_elsewhere(p, diag, exports=True)
    return export_run.export_stores(paths, what, diag, model_id=model_id, iteration_id=iteration_id,
                                    iteration_count=iteration_count, fmt=fmt, stamp=stamp, clear=clear,
                                    layers=layers, jobs=jobs, ts_origin=ts_origin)


def cmd_export(args: argparse.Namespace, diag: Diagnostics) -> int:
    """`msprof-kit export summary|timeline`: write the exports from each collection's store (importing first
    when needed)."""
    written = run_export(args.dir, args.what, diag, model_id=args.model_id, iteration_id=args.iteration_id,
                         iteration_count=args.iteration_count, fmt=getattr(args, "format", "csv"), clear=args.clear,
                         reports=getattr(args, "reports", None), jobs=args.jobs,
                         ts_origin=getattr(args, "ts_origin", "epoch"))
    _report(diag, args.quiet)
    for path in written if not args.quiet else ():
        print(f"Wrote {path}")
    return 0


def cmd_analyze(args: argparse.Namespace, diag: Diagnostics) -> int:
    """`analyze --rule ...`: each collection imported where needed, then its analyze files written."""
    from .exporters import analyze_store

    rules = analyze_store.check_rules(args.rule)  # before anything is read or imported
    written: List[str] = []
    for path in [coll.path for coll in importer.ensure_imported(args.dir, diag, args.jobs)]:
        importer.note_elsewhere(path, diag, exports=True)
        written += analyze_store.analyze_collection(path, rules, diag)
    _report(diag, args.quiet)
    for path in written if not args.quiet else ():
        print(f"Wrote {path}")
    return 0


def cmd_query(args: argparse.Namespace, diag: Diagnostics) -> int:
    """`msprof-kit query`: one row per device of each collection (models, iterations)."""
    rows = importer.query_rows(args.dir, diag, args.jobs)
    _report(diag, args.quiet)
    sys.stdout.write(importer.format_query(rows))
    return 0


def _given_or_newest(path: Optional[str], doing: str, quiet: bool = False) -> str:
    """-dir, or the newest collection under the current directory (said on stderr)."""
    if path is None:
        from .show import newest_collection

        path = newest_collection(os.getcwd())
        if not quiet:
            print(f"{doing} {path} (the newest collection under {os.getcwd()})", file=sys.stderr)
    return path


def cmd_show(args: argparse.Namespace, diag: Diagnostics) -> int:
    """`msprof-kit show`: print a table of the collection's ops, tasks, APIs or frequency."""
    from . import show

    path = _given_or_newest(args.dir, "Showing", args.quiet)
    text = show.render(path, diag, reports=args.report, top=args.top, sort=args.sort, fmt=args.format,
                       ensure=importer.imported_paths)
    _report(diag, args.quiet)
    for start in range(0, len(text), WRITE_CHUNK):  # written piecewise: a closed pipe is noticed early
        sys.stdout.write(text[start:start + WRITE_CHUNK])
    return 0


def cmd_cluster(args: argparse.Namespace, diag: Diagnostics) -> int:
    """`msprof-kit cluster`: every rank read on Dask, joined, and the cluster outputs written."""
    from .cluster.engine import require_dask
    require_dask()  # before anything else: one line telling how to install it
    from .cluster.run import run_cluster

    def announce(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    limit = None if args.memory_limit in ("none", "0") else args.memory_limit
    written = run_cluster(args.dir, args.output, workers=args.workers, scheduler=args.scheduler, diag=diag,
                          memory_limit=limit, announce=None if args.quiet else announce)
    _report(diag, args.quiet)
    for path in written if not args.quiet else ():
        print(f"Wrote {path}")
    return 0


def cmd_collect(args: argparse.Namespace, diag: Diagnostics) -> int:
    """`collect`: run one collector; with --all, then import and export what it collected."""
    from .collectors import acljson
    soc = {k.name: getattr(args, f"soc_{k.name}") for k in acljson.SOC_KEYS
           if getattr(args, f"soc_{k.name}", None) is not None}
    output = args.output or os.getcwd()
    if args.main:
        from .collectors.board import collect_board
        if not args.config:
            raise BadOption("collect -m needs --config board.ini ([ssh_config] ip, username, pwd, port)")
        found = collect_board(args.main, args.config, output, switch=args.switch, nfs=args.nfs,
                              accept_new_host_key=args.accept_new_host_key, known_hosts=args.known_hosts,
                              diag=diag, **({"timeout": args.timeout} if args.timeout else {}), **soc)
        profiled = True  # with --switch off the program may profile through the API: its JOBs are imported too
    else:
        from .collectors.local import collect_local
        if args.flavour == "soc":
            profiler = acljson.soc_profiler_config(switch=args.switch, output=output, **soc)
        else:
            cann = {k.name: getattr(args, f"cann_{k.name}") for k in acljson.CANN_KEYS
                    if getattr(args, f"cann_{k.name}", None) is not None}
            profiler = acljson.cann_profiler_config(switch=args.switch, output=output, **cann)
        found = collect_local(args.application, profiler, output=output, acl_json_path=args.acl_json_path,
                              timeout=args.timeout, diag=diag)
        profiled = acljson.switch_is_on(profiler)  # switch off: the run was not profiled, nothing is imported
    written = list(found)
    if args.run_all and profiled:
        written += import_and_export(found, diag)
    _report(diag, args.quiet)
    for path in written:
        print(f"Collected {path}" if os.path.isdir(path) else f"Wrote {path}")
    return 0


def import_and_export(paths: List[str], diag: Diagnostics) -> List[str]:
    """The `collect --all` pipeline after a collector: import each collection into its store, then
    export its summary and its timeline (what `msprof-kit import` and `export summary|timeline`
    do). SIGTERM and SIGHUP stop it as Ctrl-C does, as they stop the collectors. Returns the files
    written."""
    written: List[str] = []
    with terminate_as_interrupt():
        for path in paths:
            importer.import_path(path, diag)
            written += run_export(path, "summary", diag)
            written += run_export(path, "timeline", diag)
    return written


def cmd_plot(args: argparse.Namespace, diag: Diagnostics) -> int:
    """`msprof-kit plot`: draw the charts of a collection as PNG files."""
    from . import plot
    path = _given_or_newest(args.dir, "Plotting", args.quiet)
    lines = plot.plot(path, args.out, top=args.top, iteration=args.iteration, diag=diag, start=args.start,
                      end=args.end, ensure=importer.imported_paths)
    _report(diag, args.quiet)
    print("\n".join(lines))
    return 0


def cmd_compare(args: argparse.Namespace, diag: Diagnostics) -> int:
    """`msprof-kit compare`: compare two runs op type by op type."""
    from . import compare
    if len(args.dirs) != 2:
        raise BadOption("compare needs -dir twice: -dir A -dir B")
    a, b = (os.path.expanduser(d.lstrip("=")) for d in args.dirs)
    text = compare.compare(a, b, by=args.by, top=args.top, plot=args.plot, out=args.out, diag=diag,
                           ensure=importer.imported_paths)
    _report(diag, args.quiet)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def cmd_infer(args: argparse.Namespace, diag: Diagnostics) -> int:
    """`infer`: run the model with the parsed options and print ais_bench's summary."""
    import warnings

    from .collectors import infer
    from .collectors.acl_runtime import EmulatedAclWarning
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmulatedAclWarning)  # the same line comes through diag
        result = infer.infer(model=args.model, inputs=args.input, output=args.output, loop=args.loop,
                             warmup_count=args.warmup_count, devices=args.device, batch=args.batch,
                             profiler=args.profiler, dump=args.dump, acl_json_path=args.acl_json_path,
                             output_dirname=args.output_dirname, display_all=args.display_all, diag=diag)
    _report(diag, args.quiet)
    sys.stdout.write(infer.render_summary(result))
    return 0


def _tolerate_odd_names() -> None:
    """Paths printed as the file system has them: a file name's bytes that are not UTF-8 go to
    stdout as those bytes (as ls prints them) and to stderr as \\xNN escapes, never a traceback."""
    for stream, real, errors in ((sys.stdout, sys.__stdout__, "surrogateescape"),
                                 (sys.stderr, sys.__stderr__, "backslashreplace")):
        reconfigure = getattr(stream, "reconfigure", None)
        if stream is real and reconfigure is not None:  # the process's own streams, not a caller's
            reconfigure(errors=errors)


@contextlib.contextmanager
def _stores_in(folder: Optional[str]) -> Iterator[None]:
    """--store DIR: MSPROF_KIT_STORE is DIR while the command runs (its forked workers inherit it)."""
    if folder is None:
        yield
        return
    before = os.environ.get(store.STORE_ENV)
    os.environ[store.STORE_ENV] = os.path.abspath(os.path.expanduser(folder))
    try:
        yield
    finally:
        if before is None:
            del os.environ[store.STORE_ENV]
        else:
            os.environ[store.STORE_ENV] = before


def main(argv: Optional[List[str]] = None) -> int:
    """The command line's entry point: parse, run the command, and turn every error into one line and an exit
    code."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        getattr(args, "help_of", parser).print_help()
        return 1
    if getattr(args, "dir", None) is not None:
        args.dir = os.path.expanduser(args.dir.lstrip("="))
    if args.command == "cluster" and args.output is not None:
        args.output = os.path.expanduser(args.output)
    memory.tune_allocator(one_heap=args.command == "import")
    _tolerate_odd_names()
    diag = Diagnostics(progress=progress.reporter(sys.stderr, args.progress, args.quiet))
    try:
        with _stores_in(args.store):
            code = int(args.run(args, diag))
        sys.stdout.flush()  # a closed pipe (show | head) shows up here, inside the boundary
        return code
    except MsprofKitError as exc:
        if args.traceback:
            raise
        _report(diag, args.quiet)
        print(f"Error: {exc}", file=sys.stderr)
        return exc.exit_code
    except sqlite3.DatabaseError as exc:  # a store damaged past what its header check sees
        if args.traceback:
            raise
        _report(diag, args.quiet)
        where = getattr(args, "dir", None) or "."
        print(f"Error: {store.store_path(where)}: the store is damaged ({exc}); import the collection again "
              f"(msprof-kit import -dir {where})", file=sys.stderr)
        return StoreError.exit_code
    except BrokenPipeError:
        # the reader went away (show | head): stop quietly, and keep Python's final flush of
        # stdout from failing again at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Terminated as exc:  # SIGTERM / SIGHUP inside a collector, cleaned up as Ctrl-C is
        print(f"Terminated ({exc.name})", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("Interrupted", file=sys.stderr)
        return 130


def entry() -> None:
    """The installed `msprof-kit` script: `main`, then a quick exit. Tearing the interpreter down
    (numpy's and pandas' modules, the freed heap) takes 0.05-0.15 s a command and changes nothing on
    disk, so once the command is over and nothing else runs, the process flushes its streams, runs
    the exit hooks and leaves (`main` called in a process of its own keeps Python's exit)."""
    code = main()
    _leave(code)
    sys.exit(code)


def _leave(code: int) -> None:
    """os._exit(code) after the exit hooks, when nothing is left to wait for: no other thread, no
    child process, and streams that flush. Returns otherwise, for the ordinary exit."""
    import atexit
    import threading

    run_hooks = getattr(atexit, "_run_exitfuncs", None)
    if run_hooks is None or threading.active_count() > 1:
        return
    children = sys.modules.get("multiprocessing")
    if children is not None and children.active_children():
        return
    run_hooks()  # (once: Python's own exit does not run them again)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe or stream: Python's own exit reports it
        return
    os._exit(code)


if __name__ == "__main__":
    entry()
