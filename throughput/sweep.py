"""The scaling loop: for each worker count, for each repeat, time a read into the null sink."""

from __future__ import annotations

import itertools
import json
import math
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import dask.array as dsa
import numpy as np

from . import allocator, config
from .archive import ResultsFile
from .clusters import Cluster
from .errors import StorageUnreachableError, UsageError
from .instrument import reset_worker_counters, spread, summarise_run, worker_counters
from .plan import check_blocks_per_task, null_store, resolve_blocks_per_task
from .records import Record, library_versions, throughput_mbps
from .redact import redact_text, secret_values
from .retries import read_watch, request_retries, reset_request_retries, start_watch
from .sink import NullStore
from .sources import Source
from .storage import endpoint_host, is_unreachable


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def check_workers(workers: Iterable[Any]) -> list[int]:
    """Validate a list of worker counts (any order, each a positive integer)."""
    counts = list(workers)
    if not counts:
        raise UsageError("No worker counts given. Give positive integers, like 1,2,4.")
    for n in counts:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise UsageError(f"Bad worker count {n!r}: must be a positive integer, like 1,2,4.")
        if n > 100_000:
            raise UsageError(f"Worker count {n} is larger than any cluster throughput can drive (at most 100000).")
    return counts


def check_repeats(repeats: Any) -> int:
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1 or repeats > 10_000:
        raise UsageError(f"Bad repeats {repeats!r}: must be an integer from 1 to 10000.")
    return repeats


def one_line(exc: BaseException, secrets: set[str] = frozenset()) -> str:
    """An exception as one line, credentials scrubbed."""
    text = str(exc).strip().splitlines()
    message = f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
    return redact_text(message, secrets)[:500]


def _sum_workers(results: dict) -> dict[str, Any]:
    """Sink totals over the worker processes, plus each one's task log and store requests.

    Workers sharing a process share its counters: each process is counted once.
    """
    total: dict[str, Any] = {"bytes": 0, "chunks": 0, "tasks": {}, "requests": {}}
    seen: set = set()
    for worker, value in sorted(results.items()):
        if isinstance(value, dict):
            if value.get("process") in seen:
                continue
            seen.add(value.get("process"))
            total["bytes"] += value["received"]["bytes"]
            total["chunks"] += value["received"]["chunks"]
            total["tasks"][worker] = value["tasks"]
            total["requests"][worker] = value["requests"]
    return total


def _sum_retries(results: dict) -> int:
    """Retried storage requests over the worker processes, each process counted once."""
    seen, total = set(), 0
    for worker, value in results.items():
        if isinstance(value, (tuple, list)) and (worker.rsplit(":", 1)[0], value[0]) not in seen:
            seen.add((worker.rsplit(":", 1)[0], value[0]))
            total += value[1]
    return total


def _reset_on_worker() -> None:
    """Zero every counter a run reads back: sink, store requests, retried requests (run on each worker)."""
    reset_worker_counters()
    reset_request_retries()


def _collect_on_worker() -> tuple[dict, tuple[int, int]]:
    """This worker's counters since the reset, in one round trip (run on each worker)."""
    return worker_counters(), request_retries()


def timed_read(cluster: Cluster, source: Source, workers: list[str] | None, retries: int,
               *, blocks_per_task: int = 1, plan: Any = None) -> tuple[float, dict]:
    """Store the source into the null sink on the cluster; return (runtime, worker counts).

    The graph is built and the workers' counters reset before the clock starts; only
    submitting and computing the store is timed. The counts are the sinks' ``bytes``
    and ``chunks`` summed over the workers, and per worker the ``tasks`` log
    (:func:`throughput.sink.task_log`) and the store ``requests``
    (:func:`throughput.instrument.store_requests`), collected after the clock stops.
    ``plan`` is a store built earlier by :func:`throughput.plan.null_store` for this
    source and ``blocks_per_task`` (a sweep builds one per value and reuses it every run).
    """
    client = cluster.start()
    stored = plan if plan is not None else null_store(source.array, NullStore(), blocks_per_task)[0]
    client.run(_reset_on_worker, workers=workers, on_error="ignore")
    watching = start_watch(client)
    before = set(client.nthreads())
    start = time.perf_counter()
    future = client.compute(stored, retries=retries, workers=workers, allow_other_workers=workers is None)
    future.result()
    runtime = time.perf_counter() - start
    del future
    collected = client.run(_collect_on_worker, workers=workers, on_error="return")
    collected = {w: v for w, v in collected.items() if isinstance(v, tuple)}  # not a worker that failed
    counts = _sum_workers({w: v[0] for w, v in collected.items()})
    counts["request_retries"] = _sum_retries({w: v[1] for w, v in collected.items()})
    watch = read_watch(client) if watching else None
    counts["task_retries"] = watch["task_retries"] if watch else -1  # -1: the scheduler cannot count them
    left = set(watch["workers_left"]) if watch else set()
    counts["workers_left"] = sorted(left | (before - set(client.nthreads())))  # workers lost mid-run
    return runtime, counts


def warm_up(cluster: Cluster, source: Source, workers: list[str] | None) -> float:
    """Read one chunk per worker thread, untimed; returns the seconds it took.

    A fresh worker pays once for imports, Zarr's IO loop, the storage client's session
    and its first connections. The seed's first point paid that inside its timer;
    here it is paid before a point's first repeat and recorded as ``warmup_seconds``.
    Each worker thread gets a different chunk (the same chunk would be one task).
    """
    client = cluster.start()
    nthreads = client.nthreads()
    targets = [w for w in nthreads if workers is None or w in workers]
    array = source.array
    blocks = list(itertools.islice(np.ndindex(*array.numblocks), sum(nthreads[w] for w in targets)))
    if not blocks:
        return 0.0
    began = time.perf_counter()
    futures, i = [], 0
    for worker in targets:
        for _ in range(nthreads[worker]):
            if i >= len(blocks):
                break
            stored = dsa.store(array.blocks[blocks[i]], NullStore(), lock=False, compute=False)
            # loose restriction: a worker lost during the warm-up must not leave its chunk waiting forever
            futures.append(client.compute(stored, workers=[worker], allow_other_workers=True))
            i += 1
    client.gather(futures)
    del futures
    return time.perf_counter() - began


def sweep(
    source: Source,
    cluster: Cluster,
    workers: Sequence[int],
    repeats: int | None = None,
    *,
    labels: dict[str, str] | None = None,
    run_id: str | None = None,
    retries: int | None = None,
    timeout: float | None = None,
    secrets: set[str] = frozenset(),
    skip: Callable[[int, int], bool] | None = None,
    on_start: Callable[[int, int], None] | None = None,
    blocks_per_task: int | str | None = None,
    warmup: bool | None = None,
) -> Iterator[Record]:
    """Yield one :class:`Record` per timed run, as soon as the run ends.

    Parameters
    ----------
    source, cluster
        What to read, and where to compute.
    workers
        Worker counts, in the order to visit them (the seed went 30, 20, 10, 5).
    repeats
        Timed runs at each worker count.
    labels
        ``cloud``, ``region`` and free-form ``tags`` for the records.
    secrets
        Secret strings to scrub from error messages.
    skip
        ``skip(nworkers, repeat)`` true for points already measured (resume).
    on_start
        Called with ``(nworkers, repeat)`` before each run (for progress displays).
    blocks_per_task
        Chunks stored per task, or ``"auto"`` (default ``throughput.sweep.blocks-per-task``):
        the seed's one task per chunk while the array has at most
        ``throughput.sweep.tasks-per-thread`` (100) chunks per worker thread of the point,
        grouped beyond so that each thread gets about that many tasks
        (:func:`throughput.plan.resolve_blocks_per_task`). Larger values cut the
        scheduler's cost per chunk (:mod:`throughput.plan`); every chunk is still read.
    warmup
        Read one chunk per worker thread, untimed, before each point's first repeat
        (default ``throughput.sweep.warmup``, true), on the workers that have not read
        one yet in this sweep; see :func:`warm_up`.
    """
    workers = check_workers(workers)
    repeats = check_repeats(config.get("sweep.repeats", 3) if repeats is None else repeats)
    retries = config.get("sweep.retries", 5) if retries is None else retries
    timeout = cluster.wait_timeout if timeout is None else timeout
    blocks_per_task = check_blocks_per_task(
        config.get("sweep.blocks-per-task", "auto") if blocks_per_task is None else blocks_per_task)
    tasks_per_thread = config.get("sweep.tasks-per-thread", 100)
    warmup = bool(config.get("sweep.warmup", True) if warmup is None else warmup)
    labels = dict(labels or {})
    tags = labels.pop("tags", "")
    if isinstance(tags, dict):
        tags = ";".join(f"{k}={v}" for k, v in tags.items())
    run_id = run_id or new_run_id()
    secrets = set(secrets) | secret_values(source.options)
    base = dict(
        run_id=run_id, **source.describe(), cluster=cluster.kind, tags=str(tags),
        cloud=str(labels.get("cloud", "")), region=str(labels.get("region", "")),
        **library_versions(),
    )
    client = cluster.start()
    allocator.tune_workers(client, cluster.starts_workers)
    plans: dict[int, Any] = {}  # the store graph per blocks per task, built once per sweep, outside every timer
    warmed: set[str] = set()  # worker addresses that have read a chunk in this sweep
    for n in workers:
        if skip is not None and all(skip(n, r) for r in range(repeats)):
            continue
        began = time.perf_counter()
        cluster.scale(n)
        present = cluster.wait_for_workers(n, timeout)
        scale_seconds = time.perf_counter() - began
        short = cluster.shortfall(n, present, timeout) if present < n else ""
        use = cluster.workers_for(n)
        # what shaped the read: the source's options and the workers' allocator, as they report it
        options = json.dumps({**source.options, "worker_malloc": allocator.reported(client, use)},
                             sort_keys=True, default=str)
        warm = float("nan")
        runtimes: list[float] = []
        for r in range(repeats):
            if skip is not None and skip(n, r):
                continue
            if len(client.nthreads()) < present:  # a worker died: wait for its replacement
                present = cluster.wait_for_workers(n, timeout)
                use = cluster.workers_for(n)
            if on_start is not None:
                on_start(n, r)
            counts = cluster.counts(use)
            stamp = datetime.now(UTC).isoformat(timespec="milliseconds")
            row = dict(base, options=options, timestamp=stamp, repeat=r, requested_workers=n, scale_seconds=scale_seconds,
                       blocks_per_task=resolve_blocks_per_task(blocks_per_task, source.nchunks, counts["nthreads"],
                                                               tasks_per_thread), **counts, note=short)
            if counts["nworkers"] == 0:
                yield Record(**row, status="error", error=f"no workers: {short or 'the cluster has none'}")
                continue
            try:
                if warmup and math.isnan(warm):  # only workers not warmed earlier in this sweep
                    cold = [w for w in (use if use is not None else client.nthreads()) if w not in warmed]
                    warm = warm_up(cluster, source, cold) if cold else 0.0
                    warmed.update(cold)
                blocks = row["blocks_per_task"]
                if blocks not in plans:
                    plans[blocks] = null_store(source.array, NullStore(), blocks)[0]
                runtime, got = timed_read(cluster, source, use, retries, blocks_per_task=blocks, plan=plans[blocks])
            except Exception as exc:  # noqa: BLE001 - a failed run is a row, and the sweep goes on
                yield Record(**row, warmup_seconds=warm, status="error", error=one_line(exc, secrets))
                if is_unreachable(exc):  # every later run would fail the same way, slowly
                    host = endpoint_host(source.url, source.options.get("storage_options"))
                    raise StorageUnreachableError(
                        f"Storage server {host} stopped answering during the sweep of '{source.url}' "
                        f"({one_line(exc, secrets)}); the sweep stopped, finished rows are kept.") from None
                continue
            if got["workers_left"]:  # the timing mixes cluster sizes: not a measurement at n workers
                yield Record(**row, warmup_seconds=warm, status="error", task_retries=got["task_retries"],
                             request_retries=got["request_retries"],
                             error=f"worker(s) {', '.join(got['workers_left'])} left during the run; their "
                                   "tasks were recomputed on the others, so the timing is discarded")
                continue
            runtimes.append(runtime)
            tput = throughput_mbps(source.nbytes, runtime)
            note = short
            if got["bytes"] != source.nbytes:
                note = "; ".join(filter(None, [note, f"sinks received {got['bytes']} of {source.nbytes} bytes"]))
            measured = summarise_run(got["tasks"], got["requests"], runtime, counts["nthreads"])
            yield Record(**{**row, "note": note}, runtime=runtime, throughput_MBps=tput,
                         throughput_MBps_per_thread=tput / counts["nthreads"], bytes_received=got["bytes"],
                         warmup_seconds=warm, point_spread=spread(runtimes) if r == repeats - 1 else float("nan"),
                         request_retries=got["request_retries"], task_retries=got["task_retries"], **measured)


def run_sweep(
    source: Source,
    cluster: Cluster,
    workers: Sequence[int],
    repeats: int | None = None,
    *,
    results: ResultsFile | None = None,
    **options: Any,
) -> list[Record]:
    """Run a whole sweep; append each record to ``results`` as it ends; return the records."""
    records = []
    for record in sweep(source, cluster, workers, repeats, **options):
        if results is not None:
            results.append(record)
        records.append(record)
    return records
