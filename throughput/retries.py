"""Count the retries that happen inside a timed run, so a record can say they happened.

Two kinds, counted where they happen:

- *request retries*: storage clients (botocore under s3fs, s3fs itself, gcsfs) retry
  throttled or failed HTTP requests internally and invisibly. Each logs one DEBUG
  line per retry; a handler on exactly those loggers counts them, per worker process.
- *task retries*: Dask reruns a failed task (``compute(..., retries=n)``); a
  scheduler plugin counts the ``processing -> waiting`` transitions that follow an
  error, and the workers that left the cluster.
"""

from __future__ import annotations

import logging
import os
import threading

from distributed.diagnostics.plugin import SchedulerPlugin

#: logger name -> start of the DEBUG message it writes once per retried request
RETRY_MESSAGES: dict[str, tuple[str, ...]] = {
    "botocore.retryhandler": ("Retry needed, action of",),  # legacy retry mode (the default)
    "botocore.retries.standard": ("Retry needed, retrying request",),  # standard / adaptive modes
    "s3fs": ("Retryable error",),
    "gcsfs": ("retrying after exception",),  # matched anywhere in the message, see _Counter
}

_lock = threading.Lock()
_count = {"retries": 0}


class _Counter(logging.Handler):
    """Counts retry log lines; formats and prints nothing."""

    def emit(self, record: logging.LogRecord) -> None:
        message = str(record.msg)
        if any(message.startswith(p) or (record.name == "gcsfs" and p in message)
               for p in RETRY_MESSAGES.get(record.name, ())):
            with _lock:
                _count["retries"] += 1


_handler = _Counter(logging.DEBUG)


def install_request_counter() -> int:
    """Attach the counter to the storage clients' retry loggers in this process (idempotent).

    Returns this process's id, so callers can count each process once.
    """
    for name in RETRY_MESSAGES:
        logger = logging.getLogger(name)
        if _handler not in logger.handlers:
            logger.addHandler(_handler)
        # DEBUG records must be created for the handler to see them; the counter prints
        # nothing, and other handlers keep their own levels
        if logger.getEffectiveLevel() > logging.DEBUG:
            logger.setLevel(logging.DEBUG)
    return os.getpid()


def request_retries() -> tuple[int, int]:
    """``(pid, retried requests)`` counted in this process since the last reset."""
    with _lock:
        return os.getpid(), _count["retries"]


def reset_request_retries() -> int:
    """Install the counter if needed and set it to zero; returns this process's id."""
    install_request_counter()
    with _lock:
        _count["retries"] = 0
    return os.getpid()


class RunWatch(SchedulerPlugin):
    """Scheduler plugin: task retries and workers that left, since the last :meth:`reset`."""

    name = "throughput-run-watch"

    def __init__(self) -> None:
        self.task_retries = 0
        self.workers_left: list[str] = []

    def transition(self, key, start, finish, *args, stimulus_id: str = "", **kwargs) -> None:
        # a retried task goes back from processing to waiting after its error
        if start == "processing" and finish == "waiting" and str(stimulus_id).startswith("task-erred"):
            self.task_retries += 1

    def remove_worker(self, scheduler, worker: str, **kwargs) -> None:
        self.workers_left.append(worker)

    def reset(self) -> None:
        self.task_retries = 0
        self.workers_left = []

    def snapshot(self) -> dict:
        return {"task_retries": self.task_retries, "workers_left": list(self.workers_left)}


def _watch(dask_scheduler, action: str) -> dict | None:
    plugin = dask_scheduler.plugins.get(RunWatch.name)
    if plugin is None:
        return None
    if action == "reset":
        plugin.reset()
    return plugin.snapshot()


def start_watch(client) -> bool:
    """Register (once) and reset the scheduler plugin; False when the scheduler cannot take it
    (for example a remote scheduler without throughput installed)."""
    try:
        if client.run_on_scheduler(_watch, action="snapshot") is None:
            client.register_plugin(RunWatch(), name=RunWatch.name)
        return client.run_on_scheduler(_watch, action="reset") is not None
    except Exception:  # noqa: BLE001  the counts are extra information: a run goes on without them
        return False


def read_watch(client) -> dict | None:
    """What the scheduler plugin counted since :func:`start_watch`, or None."""
    try:
        return client.run_on_scheduler(_watch, action="snapshot")
    except Exception:  # noqa: BLE001
        return None
