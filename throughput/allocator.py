"""The workers' memory allocator: buffers reused, not mapped and zero-filled afresh per chunk.

Dask's nanny starts every worker process with ``MALLOC_TRIM_THRESHOLD_=65536``
(``distributed.nanny.pre-spawn-environ``), to hand freed memory back to the system
sooner. Setting any of glibc's malloc thresholds also switches off glibc's *dynamic*
mmap threshold, so every allocation above 128 KiB (each decoded chunk, each response
body) becomes a fresh ``mmap``, zero-filled one page fault at a time, and is unmapped
when freed. A throughput run allocates exactly such buffers, chunk after chunk, so the
workers measured their own page faults: on this project's 2-core test machine, decoding
192 chunks of 1.94 MB took 0.49 s in Dask worker processes against 0.11 s in a plain
Python process, and a hand-written GET+decode loop inside two workers ran at 440-470
MB/s with Dask's setting against 634 MB/s with the one below (the plain process: about
850 MB/s).

:class:`AllocatorSettings` is a worker plugin that sets, with ``mallopt``, the values
glibc's dynamic rule itself converges to for large buffers: an mmap threshold of 32 MiB
(the largest that rule reaches) and a trim threshold of twice that. Buffers up to 32 MiB are then
reused from the heap; larger ones are mapped as before (for the hand-written reader
too). It is applied on the clusters throughput starts (``local``, ``gateway``,
``jobqueue``), not on borrowed ones (``address``, ``client``) unless asked
(``throughput.workers.malloc``), and each record's ``options`` says which setting its
workers had. On a system without glibc nothing changes and the record says so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

from . import config
from .errors import UsageError

#: glibc's mallopt parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: the largest mmap threshold glibc's dynamic rule reaches on 64-bit systems (DEFAULT_MMAP_THRESHOLD_MAX)
MMAP_THRESHOLD = 32 * 2**20
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD
#: the ``options`` value for workers left as Dask started them
UNCHANGED = "dask default"
PLUGIN_NAME = "throughput-allocator"

logger = logging.getLogger(__name__)
_applied = UNCHANGED  # this process's setting, once a plugin set it


@functools.cache
def _libc() -> Any:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        libc.gnu_get_libc_version  # noqa: B018 - the parameter numbers below are glibc's
        return libc
    except (OSError, AttributeError):
        return None


def set_thresholds(mmap_threshold: int = MMAP_THRESHOLD, trim_threshold: int = TRIM_THRESHOLD) -> str:
    """Set this process's glibc malloc thresholds; returns the setting as recorded.

    Returns :data:`UNCHANGED` (plus why) where there is no glibc ``mallopt`` or it
    refused a value.
    """
    global _applied
    libc = _libc()
    if libc is None:
        _applied = f"{UNCHANGED} (no glibc mallopt here)"
    elif not (libc.mallopt(M_MMAP_THRESHOLD, mmap_threshold) and libc.mallopt(M_TRIM_THRESHOLD, trim_threshold)):
        _applied = f"{UNCHANGED} (mallopt refused {mmap_threshold}, {trim_threshold})"
    else:
        _applied = f"glibc mmap_threshold={mmap_threshold} trim_threshold={trim_threshold}"
    return _applied


def applied() -> str:
    """The setting this process runs with (run on each worker)."""
    return _applied


class AllocatorSettings(WorkerPlugin):
    """Sets the malloc thresholds on every worker, present and future."""

    name = PLUGIN_NAME

    def __init__(self, mmap_threshold: int = MMAP_THRESHOLD, trim_threshold: int = TRIM_THRESHOLD):
        self.mmap_threshold = mmap_threshold
        self.trim_threshold = trim_threshold

    def setup(self, worker) -> None:
        set_thresholds(self.mmap_threshold, self.trim_threshold)


def wanted(cluster_starts_workers: bool) -> bool:
    """Whether to tune a cluster's workers (``throughput.workers.malloc``: auto, true or false)."""
    value = config.get("workers.malloc", "auto")
    if value == "auto":
        return cluster_starts_workers
    if isinstance(value, bool):
        return value
    raise UsageError(f"Bad throughput.workers.malloc {value!r}: must be auto, true or false.")


def tune_workers(client, cluster_starts_workers: bool) -> None:
    """Register :class:`AllocatorSettings` on the cluster if wanted.

    Dask runs a registered plugin's setup on the workers present and on every worker
    that joins later, so it is registered once per sweep, before the first scaling.
    """
    if wanted(cluster_starts_workers):
        try:
            client.register_plugin(AllocatorSettings(), name=PLUGIN_NAME)
        except Exception as exc:  # noqa: BLE001 - e.g. workers without throughput: the rows say
            # "dask default", and the runs themselves report what the workers lack
            logger.warning("throughput: workers' malloc thresholds left as they were (%s)", str(exc)[:200])


def reported(client, workers: list[str] | None = None) -> str:
    """The setting the workers report: one text when they agree, else each distinct one joined by ``|``."""
    answers = client.run(applied, workers=workers, on_error="return")
    return " | ".join(sorted({v for v in answers.values() if isinstance(v, str)})) or UNCHANGED
