"""The null sink: where the read data goes to be forgotten.

``dask.array.store(array, NullStore(), lock=False)`` forces every chunk to be read and
decoded and keeps nothing. Each worker process counts what its sink received, so a
run can check it read exactly the array's bytes, and logs one entry per chunk stored:
the task that stored it, the thread that ran the task, the bytes, and the seconds from
the start of the task to the chunk's arrival (Dask's worker sets the task's key and
start time on the thread; outside a distributed worker the key and duration are
unknown). :func:`task_log` turns that log into per-task bytes and durations, the
measured (not nominal) throughput of each task, thread and worker.
"""

from __future__ import annotations

import threading
import time

_lock = threading.Lock()
_received = {"bytes": 0, "chunks": 0}
#: one ``(task key, thread name, nbytes, seconds since the task started)`` per chunk stored
_log: list[tuple[str, str, int, float]] = []


def _task_context() -> tuple[str, float]:
    """The running task's key and seconds since it started, from distributed's thread state."""
    try:
        from distributed.worker import thread_state
    except ImportError:  # pragma: no cover - distributed is a dependency
        return "", float("nan")
    key = getattr(thread_state, "key", None)
    start = getattr(thread_state, "start_time", None)
    if key is None or start is None:
        return "", float("nan")
    # distributed stamps start_time with its wall clock (distributed.metrics.time == time.time)
    return str(key), time.time() - start


class NullStore:
    """A store that discards every chunk written to it (like piping to /dev/null)."""

    def __setitem__(self, key, value) -> None:
        nbytes = int(getattr(value, "nbytes", 0))
        task, seconds = _task_context()
        entry = (task, threading.current_thread().name, nbytes, seconds)
        with _lock:
            _received["bytes"] += nbytes
            _received["chunks"] += 1
            _log.append(entry)

    def __repr__(self) -> str:
        return "NullStore()"


def received() -> dict[str, int]:
    """Bytes and chunks the sinks of this process have received since the last reset."""
    with _lock:
        return dict(_received)


def reset_received() -> dict[str, int]:
    """Reset this process's counters and chunk log; returns the counters they held."""
    with _lock:
        before = dict(_received)
        _received.update(bytes=0, chunks=0)
        _log.clear()
    return before


def task_log() -> list[tuple[str, str, float, float]]:
    """Per task stored by this process since the last reset: ``(key, thread, bytes, seconds)``.

    ``seconds`` runs from the task's start to its last chunk's arrival in the sink, so
    it covers reading and decoding every chunk the task stored (several when blocks are
    grouped per task). Unknown (NaN) outside a distributed worker.
    """
    tasks: dict[str, list] = {}
    with _lock:
        entries = list(_log)
    for task, thread, nbytes, seconds in entries:
        if not task:  # not run by a distributed worker: one entry per chunk, no duration
            tasks[f"chunk-{len(tasks)}"] = [thread, nbytes, seconds]
            continue
        row = tasks.setdefault(task, [thread, 0, 0.0])
        row[1] += nbytes
        row[2] = max(row[2], seconds)
    return [(key, thread, float(nbytes), seconds) for key, (thread, nbytes, seconds) in tasks.items()]
