"""The scaling loop: for each worker count, for each repeat, time a read into the null sink."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timezone
from typing import Any

import dask.array as dsa

from . import config
from .archive import ResultsFile
from .clusters import Cluster
from .errors import UsageError
from .records import Record, library_versions, throughput_mbps
from .redact import redact_text, secret_values
from .sink import NullStore, received, reset_received
from .sources import Source


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


def _process() -> int:
    return os.getpid()


def _sum_workers(results: dict, processes: dict | None = None) -> dict[str, int]:
    total = {"bytes": 0, "chunks": 0}
    seen = set()
    for worker, value in results.items():
        # workers that are threads of one process (processes=False) share that process's sink count
        process = (worker.rsplit(":", 1)[0], (processes or {}).get(worker, worker))
        if process in seen:
            continue
        seen.add(process)
        if isinstance(value, dict):
            total["bytes"] += value["bytes"]
            total["chunks"] += value["chunks"]
    return total


def timed_read(cluster: Cluster, source: Source, workers: list[str] | None, retries: int) -> tuple[float, dict]:
    """Store the source into the null sink on the cluster; return (runtime, sink counts).

    The graph is built and the sink counters reset before the clock starts; only
    submitting and computing the store is timed.
    """
    client = cluster.start()
    stored = dsa.store(source.array, NullStore(), lock=False, compute=False)
    client.run(reset_received, workers=workers, on_error="ignore")
    start = time.perf_counter()
    future = client.compute(stored, retries=retries, workers=workers, allow_other_workers=workers is None)
    future.result()
    runtime = time.perf_counter() - start
    del future
    processes = client.run(_process, workers=workers, on_error="return")
    return runtime, _sum_workers(client.run(received, workers=workers, on_error="return"), processes)


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
    """
    workers = check_workers(workers)
    repeats = check_repeats(config.get("sweep.repeats", 3) if repeats is None else repeats)
    retries = config.get("sweep.retries", 5) if retries is None else retries
    timeout = cluster.wait_timeout if timeout is None else timeout
    labels = dict(labels or {})
    tags = labels.pop("tags", "")
    if isinstance(tags, dict):
        tags = ";".join(f"{k}={v}" for k, v in tags.items())
    run_id = run_id or new_run_id()
    secrets = set(secrets) | secret_values(source.options)
    base = dict(
        run_id=run_id, **source.describe(), cluster=cluster.kind, tags=str(tags),
        cloud=str(labels.get("cloud", "")), region=str(labels.get("region", "")),
        options=json.dumps(source.options, sort_keys=True, default=str), **library_versions(),
    )
    cluster.start()
    for n in workers:
        if skip is not None and all(skip(n, r) for r in range(repeats)):
            continue
        began = time.perf_counter()
        cluster.scale(n)
        present = cluster.wait_for_workers(n, timeout)
        scale_seconds = time.perf_counter() - began
        short = cluster.shortfall(n, present, timeout) if present < n else ""
        use = cluster.workers_for(n)
        for r in range(repeats):
            if skip is not None and skip(n, r):
                continue
            if on_start is not None:
                on_start(n, r)
            counts = cluster.counts(use)
            stamp = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
            row = dict(base, timestamp=stamp, repeat=r, requested_workers=n, scale_seconds=scale_seconds,
                       **counts, note=short)
            if counts["nworkers"] == 0:
                yield Record(**row, status="error", error=f"no workers: {short or 'the cluster has none'}")
                continue
            try:
                runtime, got = timed_read(cluster, source, use, retries)
            except Exception as exc:  # a failed run is a row, and the sweep goes on
                yield Record(**row, status="error", error=one_line(exc, secrets))
                continue
            tput = throughput_mbps(source.nbytes, runtime)
            note = short
            if got["bytes"] != source.nbytes:
                note = "; ".join(filter(None, [note, f"sinks received {got['bytes']} of {source.nbytes} bytes"]))
            yield Record(**{**row, "note": note}, runtime=runtime, throughput_MBps=tput,
                         throughput_MBps_per_thread=tput / counts["nthreads"], bytes_received=got["bytes"])


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
