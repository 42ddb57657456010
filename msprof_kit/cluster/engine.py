"""Phase 1 of `msprof-kit cluster` on Dask distributed: one function mapped over the ranks, one task
per rank, with every failure kept as one line and the progress counted in ranks.

Two ways to run, both through a `distributed.Client`:

- embedded (the default): a `LocalCluster` of `workers` worker processes on this machine (one thread
  each: a rank's import is CPU-bound Python), each with a memory limit, its scratch space in a
  temporary folder removed at the end, and a dashboard only when bokeh is installed;
- an existing cluster: `scheduler` (or the environment variable DASK_SCHEDULER_ADDRESS) is the
  address of a running scheduler (`dask scheduler`, dask-jobqueue, dask-kubernetes ...); its workers
  must have msprof-kit installed and see the rank folders at the same paths (a shared file system).

A rank fails in one of three ways, each ending as a line in the failures and never as a traceback:
the function raises a `MsprofKitError` (a bad rank: its message, not retried — it would fail again);
it raises anything else (retried `retries` times on any worker, then "Type: message"); or the
worker running it dies (the scheduler reruns the task elsewhere up to `allowed-failures` times,
then "a worker died ..."). The client and the LocalCluster are closed on every way out, Ctrl-C and
SIGTERM included (the caller runs inside msprof_kit.interrupt.terminate_as_interrupt), so no worker
process outlives the command.

Dask is an optional extra (`pip install 'msprof-kit[cluster]'`): it is imported inside the functions,
and `require_dask` turns its absence into one line.
"""
from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import shutil
import tempfile
import uuid
from typing import Any, Callable, Dict, Hashable, Iterator, List, Optional, Sequence, Tuple, TypeVar, Union

from ..errors import MsprofKitError
from ..progress import Progress

__all__ = ["map_ranks", "require_dask", "DaskMissing", "SchedulerUnreachable", "SCHEDULER_ENV", "failure_line",
           "DEFAULT_MEMORY_LIMIT", "DEFAULT_RETRIES", "DEFAULT_ALLOWED_FAILURES"]

Item = TypeVar("Item", bound=Hashable)
Result = TypeVar("Result")

#: the environment variable naming an existing scheduler (Dask's own name for it)
SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"
#: LocalCluster's memory limit per worker: "auto" is the machine's memory shared by the workers
DEFAULT_MEMORY_LIMIT = "auto"
#: reruns of a task whose function raised something other than a MsprofKitError
DEFAULT_RETRIES = 1
#: reruns of a task whose worker died, on an embedded cluster (the scheduler's `allowed-failures`)
DEFAULT_ALLOWED_FAILURES = 2
#: how long connecting to an existing scheduler may take, s
CONNECT_TIMEOUT = 20.0
#: how long an existing scheduler may take to have a worker, s
WORKER_WAIT = 120.0
#: the loggers of Dask that would put tracebacks of failed tasks and restarted workers on stderr
DASK_LOGGERS = ("distributed", "bokeh", "tornado")


class DaskMissing(MsprofKitError):
    """Dask distributed is not installed (the optional extra `cluster`)."""

    exit_code = 2


class SchedulerUnreachable(MsprofKitError):
    """The scheduler given by --scheduler or DASK_SCHEDULER_ADDRESS did not answer, or has no worker."""

    exit_code = 2


def require_dask() -> None:
    """Raise DaskMissing (one line: how to install it) unless `distributed` is importable."""
    if importlib.util.find_spec("distributed") is None:
        raise DaskMissing("Dask distributed is not installed: pip install 'msprof-kit[cluster]'")


def failure_line(exc: BaseException) -> str:
    """One line for a failed task: a MsprofKitError's own message; anything else as 'Type: message';
    a task whose workers kept dying as such."""
    if isinstance(exc, MsprofKitError):
        text = str(exc)
    elif type(exc).__name__ == "KilledWorker":
        text = "a worker died while reading it, each time it was tried (killed, or out of memory)"
    else:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return " ".join(text.split()) or type(exc).__name__


def _run_one(func: Callable[[Any], Any], item: Any) -> Tuple[bool, Any]:
    """The task a worker runs: (True, result), or (False, the line) when `func` raised a
    MsprofKitError, which is the rank's fault and not retried. Other exceptions propagate, so that
    Dask retries them."""
    try:
        return True, func(item)
    except MsprofKitError as exc:
        return False, failure_line(exc)


def _dashboard_installed() -> bool:
    return importlib.util.find_spec("bokeh") is not None


@contextlib.contextmanager
def _quiet_dask(level: int = logging.CRITICAL) -> Iterator[None]:
    """Dask's loggers in this process held at `level` while the block runs (a failed task's
    traceback, a restarted worker, a closing comm), then put back."""
    loggers = [logging.getLogger(name) for name in DASK_LOGGERS]
    before = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(level)
    try:
        yield
    finally:
        for lg, old in zip(loggers, before):
            lg.setLevel(old)


@contextlib.contextmanager
def _client(workers: Optional[int], scheduler: Optional[str], memory_limit: Union[str, int, float, None],
            allowed_failures: int) -> Iterator[Tuple[Any, Optional[str]]]:
    """A connected Client and the dashboard's address (None without one); closed on every way out."""
    import dask
    from distributed import Client, LocalCluster

    address = scheduler or os.environ.get(SCHEDULER_ENV) or None
    if address:
        try:
            client = Client(address, timeout=CONNECT_TIMEOUT, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise SchedulerUnreachable(f"cannot reach the Dask scheduler at {address}: {failure_line(exc)}") from exc
        try:
            try:
                client.wait_for_workers(1, timeout=WORKER_WAIT)
            except (OSError, TimeoutError) as exc:
                raise SchedulerUnreachable(f"the Dask scheduler at {address} has no worker after "
                                           f"{WORKER_WAIT:.0f} s") from exc
            dashboard = client.dashboard_link if "dashboard" in client.scheduler_info().get("services", {}) else None
            yield client, dashboard
        finally:
            client.close()
        return
    scratch = tempfile.mkdtemp(prefix="msprof-kit-dask-")
    try:
        # the scheduler's and workers' scratch space (dask-scratch-space) in a folder removed at the end
        with dask.config.set({"distributed.scheduler.allowed-failures": allowed_failures,
                              "distributed.worker.daemon": False, "temporary-directory": scratch}):
            with LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1, processes=True,
                              memory_limit=memory_limit, local_directory=scratch,
                              dashboard_address=":0",  # a free port: never a clash with 8787
                              silence_logs=logging.CRITICAL) as cluster:
                with Client(cluster, set_as_default=False) as client:
                    yield client, (client.dashboard_link if _dashboard_installed() else None)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def map_ranks(func: Callable[[Item], Result], items: Sequence[Item], *, workers: Optional[int] = None,
              scheduler: Optional[str] = None, memory_limit: Union[str, int, float, None] = DEFAULT_MEMORY_LIMIT,
              progress: Optional[Progress] = None, retries: int = DEFAULT_RETRIES,
              allowed_failures: int = DEFAULT_ALLOWED_FAILURES,
              announce: Optional[Callable[[str], None]] = None) -> Tuple[Dict[Item, Result], Dict[Item, str]]:
    """Run `func(item)` for every item as one Dask task each; returns (results, failures), both keyed
    by item: every item is in exactly one of them, a failure as one line (module docstring).

    `func` must be importable by the workers (a module-level function of an installed package) and
    its result small: it travels back to this process. `workers`: worker processes of the embedded
    LocalCluster (default the core count); `scheduler`: an existing scheduler's address instead
    (default: DASK_SCHEDULER_ADDRESS, else embedded). `memory_limit`: per embedded worker ("4GiB",
    bytes, "auto" = this machine's memory / workers, None = none); a worker above 95% of it is
    restarted by its nanny and its task rerun. `retries`: reruns of a task whose function raised
    something other than a MsprofKitError; `allowed_failures`: reruns of a task whose worker died
    (embedded cluster only; an existing scheduler keeps its own setting). `progress` counts ranks
    done; `announce` is called once with the dashboard's address when one is running."""
    require_dask()
    from distributed import as_completed

    items = list(items)
    results: Dict[Item, Result] = {}
    failures: Dict[Item, str] = {}
    if not items:
        return results, failures
    reporter = progress if progress is not None else Progress()
    with contextlib.ExitStack() as stack:
        stack.enter_context(_quiet_dask())
        with reporter.phase("connecting to the Dask scheduler" if scheduler or os.environ.get(SCHEDULER_ENV)
                            else "starting the Dask workers"):
            client, dashboard = stack.enter_context(_client(workers, scheduler, memory_limit, allowed_failures))
        if dashboard and announce is not None:
            announce(f"Dask dashboard: {dashboard}")
        name = "reading ranks" + (f" (Dask dashboard {dashboard})" if dashboard else "")
        run = uuid.uuid4().hex[:8]
        futures: List[Any] = []
        try:
            with reporter.phase(name, total=len(items), unit="ranks") as phase:
                owner = {}
                for index, item in enumerate(items):
                    future = client.submit(_run_one, func, item, key=f"rank-{run}-{index}", pure=False,
                                           retries=retries)
                    futures.append(future)
                    owner[future.key] = item
                for future in as_completed(futures, loop=client.loop):
                    item = owner[future.key]
                    if future.status == "finished":
                        done, value = future.result()
                        if done:
                            results[item] = value
                        else:
                            failures[item] = value
                    else:
                        failures[item] = failure_line(_exception(future))
                    future.release()
                    phase.advance()
        finally:
            for future in futures:
                future.release()
    order = {item: index for index, item in enumerate(items)}  # the items' order, not the finishing order
    return ({item: results[item] for item in sorted(results, key=order.__getitem__)},
            {item: failures[item] for item in sorted(failures, key=order.__getitem__)})


def _exception(future: Any) -> BaseException:
    """The exception of a failed or cancelled future (a cancelled one has none to fetch)."""
    if future.status == "cancelled":
        return RuntimeError("the task was cancelled (the scheduler lost it)")
    try:
        exc = future.exception()
    except BaseException as fetched:  # noqa: B902 - a cancelled future raises on fetch
        if isinstance(fetched, KeyboardInterrupt):
            raise
        return fetched
    return exc if isinstance(exc, BaseException) else RuntimeError(str(exc))
