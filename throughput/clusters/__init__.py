"""Cluster providers: something that gives a Dask client and can be resized.

A provider kind is a module with a class derived from :class:`Cluster`;
:data:`CLUSTER_KINDS` maps a kind name to it, imported on first use.
"""

from __future__ import annotations

import importlib
import os
import time
from typing import Any

from distributed import Client

from .. import config
from ..errors import ClusterError, MissingDependencyError, UsageError

#: kind name -> "module:class", imported lazily
CLUSTER_KINDS: dict[str, str] = {
    "local": "throughput.clusters.local:LocalProvider",
}


class Cluster:
    """A Dask client plus the means to resize what it computes on.

    Subclasses set :attr:`kind` and implement :meth:`_start` and :meth:`scale`.
    Used as a context manager, everything the provider started is closed on exit,
    whatever the exit (success, error, Ctrl-C).
    """

    kind = "base"

    def __init__(self, **options: Any):
        self.options = options
        self.client: Client | None = None

    def start(self) -> Client:
        if self.client is None:
            self.client = self._start()
        return self.client

    def _start(self) -> Client:
        raise NotImplementedError

    def scale(self, n: int) -> None:
        raise NotImplementedError

    def workers_for(self, n: int) -> list[str] | None:
        """The workers a run at size ``n`` may use (None: all of them)."""
        return None

    def wait_for_workers(self, n: int, timeout: float) -> int:
        """Wait until exactly ``n`` workers are connected, or ``timeout`` passes.

        Returns the number of workers present at the end; never more waiting than
        ``timeout`` and no fixed sleeps: it polls the scheduler's own count.
        """
        client = self.start()
        deadline = time.monotonic() + timeout
        delay = 0.01
        while True:
            count = len(client.nthreads())
            if count == n or time.monotonic() >= deadline:
                return count
            time.sleep(delay)
            delay = min(delay * 2, 0.25)

    def counts(self, workers: list[str] | None = None) -> dict[str, int]:
        """Workers, threads, cores (Dask's count) and host CPUs, counted now."""
        client = self.start()
        nthreads = client.nthreads()
        if workers is not None:
            nthreads = {w: t for w, t in nthreads.items() if w in workers}
        info = client.scheduler_info(n_workers=-1)["workers"]
        cpus = client.run(os.cpu_count, workers=list(nthreads), on_error="return") if nthreads else {}
        per_host = {info[w]["host"]: c for w, c in cpus.items() if w in info and isinstance(c, int)}
        return {"nworkers": len(nthreads), "nthreads": sum(nthreads.values()),
                "ncores": sum(nthreads.values()), "host_cpus": sum(per_host.values())}

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def __enter__(self) -> "Cluster":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_cluster(kind: str | None = None, **options: Any) -> Cluster:
    """Make a cluster provider by name; ``kind`` defaults to ``throughput.cluster.kind``."""
    kind = kind or config.get("cluster.kind", "local")
    try:
        target = CLUSTER_KINDS[kind]
    except KeyError:
        raise UsageError(f"Unknown cluster kind '{kind}'. Must be one of {sorted(CLUSTER_KINDS)}.") from None
    module, cls = target.split(":")
    try:
        provider = getattr(importlib.import_module(module), cls)
    except ImportError as exc:
        if isinstance(exc, MissingDependencyError):
            raise
        raise MissingDependencyError(
            f"Missing package '{exc.name}' required for '{kind}' clusters. Install it with: pip install {exc.name}"
        ) from None
    return provider(**options)


__all__ = ["CLUSTER_KINDS", "Cluster", "ClusterError", "open_cluster"]
