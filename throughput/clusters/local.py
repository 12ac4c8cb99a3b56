"""A distributed ``LocalCluster`` on this machine: the embedded default."""

from __future__ import annotations

import logging
import multiprocessing
from typing import Any

import dask.config
from distributed import Client, LocalCluster

from .. import config
from ..errors import ClusterError, UsageError
from . import Cluster

#: imported once by the fork server (when this process starts it), so each new worker has them
#: already and its warm-up is connecting and reading, not importing the storage stack
FORK_SERVER_PRELOAD = ("zarr", "s3fs", "xarray", "h5netcdf", "throughput.sink", "throughput.instrument",
                       "throughput.sources")


def _preload_fork_server() -> None:
    """Add the storage stack to what the fork server imports before it forks workers.

    distributed sets the fork server's preload (itself and the packages it knows) on its
    first use; the list set last before the server starts wins, so it is set here again
    with ours added. No effect if this process's fork server is already running.
    """
    from distributed.utils import get_mp_context
    from distributed.versions import optional_packages, required_packages

    context = get_mp_context()  # distributed's own preload is set on this first call
    # the fork server skips a module it cannot import
    context.set_forkserver_preload(["distributed", *required_packages, *optional_packages, *FORK_SERVER_PRELOAD])


class LocalProvider(Cluster):
    """Worker processes on this machine, started and stopped by throughput."""

    kind = "local"

    def __init__(self, threads_per_worker: int | None = None, processes: bool | None = None, **options: Any):
        super().__init__(**options)
        self.threads_per_worker = threads_per_worker or config.get("cluster.local.threads-per-worker", 1)
        self.processes = config.get("cluster.local.processes", True) if processes is None else processes
        self._cluster: LocalCluster | None = None
        self._start_method: Any = None  # the dask.config.set holding the worker start method

    def _start(self) -> Client:
        method = config.get("cluster.local.start-method")
        if method is not None and method not in ("forkserver", "spawn", "fork"):
            raise UsageError(f"Bad throughput.cluster.local.start-method {method!r}: must be forkserver, "
                             "spawn, fork or null (Dask's setting).")
        if method not in multiprocessing.get_all_start_methods():  # no fork server on Windows: Dask's own
            method = None
        if self.processes and method and self._start_method is None:
            # read by each Nanny when it spawns a worker (also on scale-ups later), so held until close;
            # forkserver forks new workers from a process that has imported distributed and numpy
            # already: a scale-up takes ~0.1 s instead of ~1 s for a fresh interpreter (README)
            self._start_method = dask.config.set({"distributed.worker.multiprocessing-method": method})
            if method == "forkserver":
                _preload_fork_server()
        try:
            self._cluster = LocalCluster(
                n_workers=0, threads_per_worker=self.threads_per_worker, processes=self.processes,
                dashboard_address=config.get("cluster.local.dashboard-address"),
                silence_logs=logging.ERROR, **self.options,
            )
            return Client(self._cluster)
        except Exception as exc:
            self.close()
            raise ClusterError(f"Could not start a LocalCluster: {exc}") from exc

    def scale(self, n: int) -> None:
        self.start()
        self._cluster.scale(n)

    def close(self) -> None:
        super().close()
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None
        if self._start_method is not None:
            self._start_method.__exit__(None, None, None)
            self._start_method = None
