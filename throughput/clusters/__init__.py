"""Cluster providers: something that gives a Dask client and can be resized.

A provider kind is a module with a class derived from :class:`Cluster`;
:data:`CLUSTER_KINDS` maps a kind name to it, imported on first use.

Kinds: ``local`` (a LocalCluster started here), ``gateway`` (a new dask-gateway
cluster), ``jobqueue`` (a dask-jobqueue cluster: SLURM, PBS, ...), ``address`` (a
running scheduler that throughput does not resize: runs are restricted to N of its
workers) and ``client`` (a ``distributed.Client`` or cluster object the caller
already has, e.g. in a notebook). A provider closes what it created, and only that.
"""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import Callable
from typing import Any, Self

from distributed import Client

from .. import config
from ..errors import ClusterError, MissingDependencyError, UsageError

#: kind name -> "module:class", imported lazily
CLUSTER_KINDS: dict[str, str] = {
    "local": "throughput.clusters.local:LocalProvider",
    "gateway": "throughput.clusters.gateway:GatewayProvider",
    "jobqueue": "throughput.clusters.jobqueue:JobqueueProvider",
    "address": "throughput.clusters.address:AddressProvider",
    "client": "throughput.clusters.address:ExistingProvider",
}


class Cluster:
    """A Dask client plus the means to resize what it computes on.

    Subclasses set :attr:`kind` and implement :meth:`_start` and :meth:`scale`.
    Used as a context manager, everything the provider started is closed on exit,
    whatever the exit (success, error, Ctrl-C).

    Parameters
    ----------
    wait_timeout
        Seconds to wait for workers after scaling (default: the
        ``throughput.cluster.wait-timeout`` setting).
    """

    kind = "base"

    def __init__(self, wait_timeout: float | None = None, **options: Any):
        self.options = options
        self.client: Client | None = None
        self.wait_timeout = check_timeout(
            config.get("cluster.wait-timeout", 120) if wait_timeout is None else wait_timeout)
        #: whether :meth:`close` closes :attr:`client` (not when the caller gave it)
        self.owns_client = True
        #: whether throughput started the workers (and may tune them: :mod:`throughput.allocator`)
        self.starts_workers = True
        #: worker addresses connected at the end of the last wait
        self.present: list[str] = []

    def start(self) -> Client:
        if self.client is None:
            self.client = self._start()
        return self.client

    def _start(self) -> Client:
        raise NotImplementedError

    def scale(self, n: int) -> None:
        raise NotImplementedError

    def workers_for(self, n: int) -> list[str] | None:
        """The workers a run at size ``n`` may use (None: all of them).

        All of them when exactly ``n`` were there at the end of the wait; otherwise
        the run is held to the workers that were there (at most ``n``), so a worker
        that arrives late or has not left yet never joins a run unrecorded.
        """
        if len(self.present) == n:
            return None
        return sorted(self.present)[:n]

    def wait_for_workers(self, n: int, timeout: float) -> int:
        """Wait until exactly ``n`` workers are connected, or ``timeout`` passes.

        Returns the number of workers present at the end; never more waiting than
        ``timeout`` and no fixed sleeps: it polls the scheduler's own count.
        """
        return self._wait_for(lambda count: count == n, timeout)

    def shortfall(self, n: int, present: int, timeout: float) -> str:
        """The record's note when only ``present`` of ``n`` workers were there after the wait."""
        return f"only {present} of {n} workers arrived within {timeout:g} s"

    def _wait_for(self, done: Callable[[int], bool], timeout: float) -> int:
        client = self.start()
        deadline = time.monotonic() + timeout
        delay = 0.01
        while True:
            self.present = list(client.nthreads())
            if done(len(self.present)) or time.monotonic() >= deadline:
                return len(self.present)
            time.sleep(min(delay, max(deadline - time.monotonic(), 0)))
            delay = min(delay * 2, 0.1)

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
        """Close what this provider created (its client, its cluster); never the caller's."""
        client, self.client = self.client, None
        if client is not None and self.owns_client:
            client.close()

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:  # a half-started cluster (error, Ctrl-C) is closed too
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def check_timeout(value: Any) -> float:
    """A wait timeout in seconds: a positive number."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = float("nan")
    if isinstance(value, bool) or not seconds > 0:
        raise UsageError(f"Bad wait_timeout {value!r}: must be a positive number of seconds, like 120.")
    return seconds


def reject_options(kind: str, options: dict[str, Any], accepted: list[str]) -> None:
    """Raise a usage error naming options a provider does not take, and those it does."""
    if options:
        raise UsageError(f"Unknown option(s) {sorted(options)} for '{kind}' clusters. "
                         f"Accepted: {', '.join(accepted)}.")


def open_cluster(kind: str | None = None, **options: Any) -> Cluster:
    """Make a cluster provider by name.

    Parameters
    ----------
    kind
        One of :data:`CLUSTER_KINDS`; defaults to ``client`` when ``client=`` or
        ``cluster=`` is given, else to the ``throughput.cluster.kind`` setting.
    **options
        Passed to the provider (see each provider's docstring).

    Examples
    --------
    >>> open_cluster("address", address="tcp://127.0.0.1:8786")  # doctest: +SKIP
    >>> open_cluster(client=client)  # a notebook's client; never closed by throughput  # doctest: +SKIP
    """
    if kind is None and (options.get("client") is not None or options.get("cluster") is not None):
        kind = "client"
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


def from_client(client: Any) -> Cluster:
    """A provider for a ``distributed.Client`` or cluster object the caller already has.

    throughput uses it and closes only what it creates itself (never ``client``).
    """
    return open_cluster("client", client=client) if isinstance(client, Client) else \
        open_cluster("client", cluster=client)


__all__ = ["CLUSTER_KINDS", "Cluster", "ClusterError", "from_client", "open_cluster"]
