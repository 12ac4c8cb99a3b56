"""A distributed ``LocalCluster`` on this machine: the embedded default."""

from __future__ import annotations

import logging
from typing import Any

from distributed import Client, LocalCluster

from .. import config
from ..errors import ClusterError
from . import Cluster


class LocalProvider(Cluster):
    """Worker processes on this machine, started and stopped by throughput."""

    kind = "local"

    def __init__(self, threads_per_worker: int | None = None, processes: bool | None = None, **options: Any):
        super().__init__(**options)
        self.threads_per_worker = threads_per_worker or config.get("cluster.local.threads-per-worker", 1)
        self.processes = config.get("cluster.local.processes", True) if processes is None else processes
        self._cluster: LocalCluster | None = None

    def _start(self) -> Client:
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
