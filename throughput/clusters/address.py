"""Clusters throughput did not start: a scheduler address, or a caller's Client or cluster object.

A scheduler reached by address cannot be resized from here, so a run "with N workers"
is a run restricted to N of its workers (``client.compute(..., workers=[...],
allow_other_workers=False)``), and the record counts those N. A caller's cluster
object (LocalCluster, GatewayCluster, SLURMCluster ...) is resized with its own
``scale``. Either way throughput closes only the client it opened itself.
"""

from __future__ import annotations

from typing import Any

import dask.config
from distributed import Client

from .. import config
from ..errors import ClusterError, UsageError
from ..redact import redact_url
from . import Cluster, reject_options


class AddressProvider(Cluster):
    """A running scheduler at ``address``; throughput never resizes or stops it.

    Parameters
    ----------
    address
        The scheduler, e.g. ``tcp://10.0.0.5:8786`` (default: the
        ``throughput.cluster.address.address`` setting, then Dask's ``scheduler-address``).
    connect_timeout
        Seconds to wait for the scheduler to answer.
    wait_timeout
        Seconds to wait for N workers to be connected when fewer are there now.
    """

    kind = "address"

    def __init__(self, address: str | None = None, *, connect_timeout: float | None = None,
                 wait_timeout: float | None = None, **options: Any):
        reject_options(self.kind, options, ["address", "connect_timeout", "wait_timeout"])
        super().__init__(wait_timeout=wait_timeout)
        self.starts_workers = False
        self.address = address or config.get("cluster.address.address") or dask.config.get("scheduler-address", None)
        if not self.address:
            raise UsageError("No scheduler address: give address=tcp://host:8786 "
                             "(--cluster-option address=...) or set throughput.cluster.address.address.")
        self.connect_timeout = connect_timeout or config.get("cluster.address.connect-timeout", 10)

    def _start(self) -> Client:
        try:
            return Client(self.address, timeout=self.connect_timeout, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise ClusterError(f"Could not reach the Dask scheduler at {redact_url(str(self.address))} "
                               f"within {self.connect_timeout:g} s: {exc}") from None

    def scale(self, n: int) -> None:
        """Nothing to do: the cluster is not ours to resize; runs use N of its workers."""
        self.start()

    def wait_for_workers(self, n: int, timeout: float) -> int:
        """Wait until at least ``n`` workers are connected, or ``timeout`` passes.

        Returns how many of them a run at size ``n`` can use (at most ``n``).
        """
        return min(self._wait_for(lambda count: count >= n, timeout), n)

    def workers_for(self, n: int) -> list[str] | None:
        """``n`` of the scheduler's workers (all of them, when fewer are there)."""
        return sorted(self.present)[:n]


class ExistingProvider(AddressProvider):
    """A ``distributed.Client`` or cluster object the caller already has (a notebook's).

    With a cluster object (or a client of one), the sweep resizes it with its own
    ``scale``; with a client of a bare scheduler, runs are restricted to N of its
    workers, as for an ``address``. The caller's client and cluster are never closed;
    a client throughput opens to a given cluster object is.

    Parameters
    ----------
    client
        A connected ``distributed.Client``.
    cluster
        A cluster object with ``scale`` (LocalCluster, GatewayCluster, SLURMCluster ...).
    wait_timeout
        Seconds to wait for workers after scaling.
    """

    kind = "client"

    def __init__(self, client: Client | None = None, cluster: Any = None, *,
                 wait_timeout: float | None = None, **options: Any):
        reject_options(self.kind, options, ["client", "cluster", "wait_timeout"])
        if client is None and cluster is None:
            raise UsageError("A 'client' cluster needs a distributed.Client or a cluster object: "
                             "open_cluster(client=client) in Python; on the command line use --cluster address.")
        if client is not None and not isinstance(client, Client):
            raise UsageError(f"client must be a distributed.Client, not {type(client).__name__}; "
                             "pass cluster objects as cluster=...")
        Cluster.__init__(self, wait_timeout=wait_timeout)
        self.starts_workers = False  # the caller's workers
        self.given_client = client
        self.cluster = cluster if cluster is not None else getattr(client, "cluster", None)
        self.resizable = callable(getattr(self.cluster, "scale", None))
        # the record says what the cluster is, when we can tell
        self.kind = _kind_of(self.cluster) if self.cluster is not None else "address"

    def _start(self) -> Client:
        if self.given_client is not None:
            self.owns_client = False
            return self.given_client
        self.owns_client = True
        if type(self.cluster).__module__.startswith("dask_gateway"):
            return self.cluster.get_client(set_as_default=False)  # carries the gateway's TLS security
        return Client(self.cluster, set_as_default=False)

    def scale(self, n: int) -> None:
        self.start()
        if self.resizable:
            self.cluster.scale(n)

    def wait_for_workers(self, n: int, timeout: float) -> int:
        if self.resizable:
            return Cluster.wait_for_workers(self, n, timeout)
        return super().wait_for_workers(n, timeout)

    def workers_for(self, n: int) -> list[str] | None:
        if self.resizable:
            return Cluster.workers_for(self, n)
        return super().workers_for(n)


def _kind_of(cluster: Any) -> str:
    """``gateway``, ``jobqueue``, ``local`` or ``client``, from the cluster object's class."""
    module = type(cluster).__module__
    if module.startswith("dask_gateway"):
        return "gateway"
    if module.startswith("dask_jobqueue"):
        return "jobqueue"
    if type(cluster).__name__ == "LocalCluster":
        return "local"
    return "client"
