"""A new cluster on a dask-gateway server (Pangeo hubs), shut down when throughput is done.

Settings come from arguments first, then ``throughput.cluster.gateway.*``, then
dask-gateway's own ``gateway.*`` configuration (which a hub usually presets), so on
a hub ``open_cluster("gateway")`` needs nothing else, as ``Gateway()`` did in the seed.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

from distributed import Client

from .. import config
from ..errors import ClusterError, UsageError, missing_dependency
from ..redact import redact_text, redact_url
from . import Cluster

try:
    import dask_gateway
    from dask_gateway.auth import BasicAuth, GatewayAuth, get_auth
except ImportError:
    raise missing_dependency("dask-gateway", "'gateway' clusters", "gateway") from None

#: auth names dask-gateway knows ("simple" is the server's SimpleAuthenticator: HTTP basic)
AUTH_KINDS = ("basic", "simple", "kerberos", "jupyterhub")


class GatewayProvider(Cluster):
    """A cluster made with ``dask_gateway.Gateway(...)``: submitted, scaled, shut down.

    Parameters
    ----------
    address
        The gateway's address, e.g. ``http://127.0.0.1:8000`` (default: the
        ``throughput.cluster.gateway.address`` setting, then ``gateway.address``).
    proxy_address, public_address
        As in :class:`dask_gateway.Gateway` (default: settings, then ``address``).
    auth
        ``basic`` (or ``simple``), ``kerberos``, ``jupyterhub``, a class path, or a
        :class:`dask_gateway.auth.GatewayAuth` (default: ``gateway.auth.type``).
    username, password
        For ``basic`` auth; the password never reaches a row or a message.
    cluster_options
        Options of the new cluster (e.g. ``{"worker_cores": 2}``); merged over the
        ``throughput.cluster.gateway.cluster-options`` setting and dask-gateway's
        ``gateway.cluster.options``. Any other keyword is a cluster option too.
    wait_timeout
        Seconds to wait for workers after scaling.
    """

    kind = "gateway"

    def __init__(
        self,
        address: str | None = None,
        *,
        proxy_address: str | int | None = None,
        public_address: str | None = None,
        auth: str | GatewayAuth | None = None,
        username: str | None = None,
        password: str | None = None,
        cluster_options: dict[str, Any] | None = None,
        wait_timeout: float | None = None,
        **options: Any,
    ):
        if "threads_per_worker" in options:
            raise UsageError("threads_per_worker is set by the gateway's cluster options on 'gateway' clusters: "
                             "pass the option your gateway offers instead (e.g. worker_threads=2 or worker_cores=2).")
        super().__init__(wait_timeout=wait_timeout)
        self.address = address or _setting("address") or _setting("address", "gateway")
        if not self.address:
            raise UsageError("No dask-gateway address: give address=http://host:port "
                             "(--cluster-option address=...) or set gateway.address in the Dask config.")
        self.proxy_address = proxy_address or _setting("proxy-address") or None
        self.public_address = public_address or _setting("public-address") or None
        self.auth = _make_auth(auth or _setting("auth"), username, password)
        self.secrets = {password} if password else set()
        self.cluster_options = {**(_setting("cluster-options") or {}), **(cluster_options or {}), **options}
        self.cluster_name: str | None = None
        #: (workers, the gateway's message) when the last scale asked for more than it allows
        self.limit: tuple[int, str] | None = None
        self._gateway: dask_gateway.Gateway | None = None
        self._cluster: dask_gateway.GatewayCluster | None = None

    def _start(self) -> Client:
        where = redact_url(self.address)
        try:
            self._gateway = dask_gateway.Gateway(address=self.address, proxy_address=self.proxy_address,
                                                 public_address=self.public_address, auth=self.auth)
            # submit, then connect (what new_cluster does in one go): the name is known from the
            # first moment, so an error or Ctrl-C while it starts can still shut it down
            self.cluster_name = self._gateway.submit(**self.cluster_options)
            self._cluster = self._gateway.connect(self.cluster_name, shutdown_on_close=True)
            return self._cluster.get_client(set_as_default=False)
        except Exception as exc:  # noqa: BLE001 (any failure to start is a ClusterError, secrets scrubbed)
            self.close()
            message = redact_text(f"{type(exc).__name__}: {exc}".strip().splitlines()[0], self.secrets)
            raise ClusterError(f"Could not start a dask-gateway cluster at {where}: {message}") from None

    def scale(self, n: int) -> None:
        """Ask for ``n`` workers; a gateway's worker limit is noted, not waited out."""
        self.start()
        self.limit = None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", dask_gateway.GatewayWarning)
            self._cluster.scale(n)
        for warning in caught:
            capped = re.search(r"Scaling to (\d+) instead", str(warning.message))
            if issubclass(warning.category, dask_gateway.GatewayWarning) and capped:
                self.limit = (int(capped.group(1)), str(warning.message))
            else:
                warnings.warn(warning.message, warning.category, stacklevel=2)

    def wait_for_workers(self, n: int, timeout: float) -> int:
        target = min(n, self.limit[0]) if self.limit else n
        return self._wait_for(lambda count: count == target, timeout)

    def shortfall(self, n: int, present: int, timeout: float) -> str:
        if self.limit and present == self.limit[0]:
            return f"the gateway allows {present} of {n} workers ({self.limit[1]})"
        return super().shortfall(n, present, timeout)

    def close(self) -> None:
        """Close our client, shut the cluster down on the gateway, close the gateway client."""
        try:
            super().close()
        finally:
            cluster, self._cluster = self._cluster, None
            gateway, self._gateway = self._gateway, None
            try:
                if cluster is not None:
                    cluster.shutdown()  # the gateway stops its processes (asynchronously)
                elif gateway is not None and self.cluster_name is not None:
                    gateway.stop_cluster(self.cluster_name)
            finally:
                if gateway is not None:
                    gateway.close()
                for closed in (gateway, getattr(cluster, "gateway", None)):
                    _forget_loop(closed)


def _forget_loop(gateway: Any) -> None:
    # Gateway.__del__ closes again; with distributed >= 2023.6 that reads the stopped loop
    # and prints "Exception ignored ... the loop is not running". Closed is closed.
    if gateway is not None:
        vars(gateway).pop("_loop_runner", None)


def _setting(key: str, prefix: str | None = None) -> Any:
    if prefix is not None:
        import dask.config
        from dask_gateway.utils import format_template

        return format_template(dask.config.get(f"{prefix}.{key}", None))
    return config.get(f"cluster.gateway.{key}")


def _make_auth(auth: str | GatewayAuth | None, username: str | None, password: str | None) -> GatewayAuth:
    if isinstance(auth, str) and auth.lower() in ("basic", "simple") or (auth is None and (username or password)):
        return BasicAuth(username=username, password=password)
    if username or password:
        raise UsageError(f"username/password go with auth=basic, not auth={auth!r}.")
    try:
        return get_auth(auth)
    except (ImportError, TypeError, ValueError) as exc:
        raise UsageError(f"Bad gateway auth {auth!r}: must be one of {list(AUTH_KINDS)}, "
                         f"a class path, or a GatewayAuth ({exc}).") from None
