"""Measured, not nominal: what the storage served and what each task, thread and worker did.

Two kinds of worker-side evidence, both reset before a timed run and collected after it
(outside the timer):

- :class:`CountingStore` wraps a Zarr store and counts, in each process, the reads it
  served: requests, bytes as stored (on the wire, before decoding) and each request's
  latency. It sits between Zarr and the storage library, so a request here is one
  ``get`` of a chunk; what the library does underneath (s3fs may add a HEAD per object,
  see :mod:`throughput.sources.zarr`) is not seen.
- the null sink's chunk log (:func:`throughput.sink.task_log`): bytes and seconds per
  task, with the thread that ran it.

:func:`summarise_run` turns both into record columns.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from zarr.storage import WrapperStore

_lock = threading.Lock()
_requests: list[tuple[int, float]] = []  # (bytes, seconds) per get, this process


def _count(nbytes: int, seconds: float) -> None:
    with _lock:
        _requests.append((nbytes, seconds))


class CountingStore(WrapperStore):
    """A Zarr store that counts and times every read of the store it wraps."""

    async def get(self, key, prototype, byte_range=None):
        start = time.perf_counter()
        value = await self._store.get(key, prototype, byte_range)
        _count(len(value) if value is not None else 0, time.perf_counter() - start)
        return value

    async def get_partial_values(self, prototype, key_ranges):
        key_ranges = list(key_ranges)
        start = time.perf_counter()
        values = await self._store.get_partial_values(prototype, key_ranges)
        seconds = (time.perf_counter() - start) / max(len(values), 1)
        for value in values:
            _count(len(value) if value is not None else 0, seconds)
        return values

    def __repr__(self) -> str:
        return f"CountingStore({self._store!r})"


def store_requests() -> list[tuple[int, float]]:
    """``(bytes, seconds)`` of every read the counting stores of this process served since the reset."""
    with _lock:
        return list(_requests)


def reset_store_requests() -> int:
    """Forget this process's reads; returns how many there were."""
    with _lock:
        count = len(_requests)
        _requests.clear()
    return count


def _percentiles(values: Iterable[float], qs: tuple[float, ...]) -> list[float]:
    data = np.asarray([v for v in values if not math.isnan(v)], dtype=float)
    if data.size == 0:
        return [float("nan")] * len(qs)
    return [float(v) for v in np.percentile(data, qs)]


def spread(runtimes: Iterable[float]) -> float:
    """Interquartile range over median of some runtimes (linear interpolation); NaN for fewer than 2."""
    data = [r for r in runtimes if not math.isnan(r)]
    if len(data) < 2:
        return float("nan")
    q1, median, q3 = _percentiles(data, (25, 50, 75))
    return (q3 - q1) / median if median > 0 else float("nan")


def summarise_run(
    tasks: Mapping[str, Any],
    requests: Mapping[str, Any],
    runtime: float,
    nthreads: int,
) -> dict[str, Any]:
    """Record columns from what the workers logged during one timed run.

    Parameters
    ----------
    tasks
        Worker address -> list of ``(key, thread, bytes, seconds)`` from
        :func:`throughput.sink.task_log` (other values, such as errors, are skipped).
    requests
        Worker address -> list of ``(bytes, seconds)`` from :func:`store_requests`.
    runtime
        The run's timed seconds.
    nthreads
        Worker threads counted on the cluster for this run.

    Returns
    -------
    dict
        ``tasks``, ``task_MBps_p10/median/p90`` (bytes / seconds of each task),
        ``busy_fraction`` (sum of task seconds / (nthreads * runtime)),
        ``thread_MBps_min/median/max`` (bytes each thread stored / runtime; threads that
        stored nothing count as 0 when ``nthreads`` exceeds the threads seen),
        ``worker_MBps_min/max`` (the same per worker process), ``requests``,
        ``wire_bytes``, ``request_ms_p50/p90/p99``.
    """
    rows = [row for value in tasks.values() if isinstance(value, list) for row in value]
    per_task = [b / 1e6 / s for _, _, b, s in rows if s > 0]
    busy = sum(s for *_, s in rows if not math.isnan(s))
    per_thread: dict[tuple[str, str], float] = {}
    per_worker: dict[str, float] = {}
    for worker, value in tasks.items():
        if not isinstance(value, list):
            continue
        for _, thread, nbytes, _ in value:
            per_thread[(worker, thread)] = per_thread.get((worker, thread), 0.0) + nbytes
            per_worker[worker] = per_worker.get(worker, 0.0) + nbytes
    thread_rates = [b / 1e6 / runtime for b in per_thread.values()] if runtime > 0 else []
    thread_rates += [0.0] * max(0, nthreads - len(thread_rates))
    worker_rates = [b / 1e6 / runtime for b in per_worker.values()] if runtime > 0 else []
    p10, p50, p90 = _percentiles(per_task, (10, 50, 90))
    t_min, t_med, t_max = _percentiles(thread_rates, (0, 50, 100))
    w_min, _, w_max = _percentiles(worker_rates, (0, 50, 100))
    reqs = [r for value in requests.values() if isinstance(value, list) for r in value]
    r50, r90, r99 = _percentiles((s * 1e3 for _, s in reqs), (50, 90, 99))
    return {
        "tasks": len(rows),
        "task_MBps_p10": p10, "task_MBps_median": p50, "task_MBps_p90": p90,
        "busy_fraction": busy / (nthreads * runtime) if nthreads and runtime > 0 else float("nan"),
        "thread_MBps_min": t_min, "thread_MBps_median": t_med, "thread_MBps_max": t_max,
        "worker_MBps_min": w_min, "worker_MBps_max": w_max,
        "requests": len(reqs), "wire_bytes": int(sum(b for b, _ in reqs)),
        "request_ms_p50": r50, "request_ms_p90": r90, "request_ms_p99": r99,
    }


def reset_worker_counters() -> None:
    """Reset the sink's counters and chunk log and the store's request log (run on each worker)."""
    from .sink import reset_received

    reset_received()
    reset_store_requests()


def worker_counters() -> dict[str, Any]:
    """This process's sink counts, per-task log and store requests (run on each worker).

    The counters are per process: workers that share a process (``processes=False``)
    all return the same ones, told apart by ``process`` (host, pid) so that they are
    counted once.
    """
    import os
    import socket

    from .sink import received, task_log

    return {"process": (socket.gethostname(), os.getpid()), "received": received(), "tasks": task_log(), "requests": store_requests()}
