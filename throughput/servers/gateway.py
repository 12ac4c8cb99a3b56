"""A real dask-gateway-server on 127.0.0.1, for the tests and for trying ``--cluster gateway`` locally.

It runs ``dask-gateway-server -f config.py`` from the ``dask-gateway-server[local]``
package with the ``UnsafeLocalBackend`` (schedulers and workers are local processes
of this user) and the ``SimpleAuthenticator`` (HTTP basic, any user name). API and
scheduler proxy share one address. Try it by hand with::

    python -m throughput.servers.gateway
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Self

from ..errors import MissingDependencyError
from . import free_port, remove_workdir, stop_process_group, wait_until

CONFIG = """\
# written by throughput.servers.gateway: a local, single-user dask-gateway for testing
from dask_gateway_server.options import Integer, Options

c.DaskGateway.address = "127.0.0.1:{api_port}"
c.Proxy.address = "127.0.0.1:{proxy_port}"
c.DaskGateway.backend_class = "dask_gateway_server.backends.local.UnsafeLocalBackend"
c.DaskGateway.authenticator_class = "dask_gateway_server.auth.SimpleAuthenticator"
c.SimpleAuthenticator.password = {password!r}
c.DaskGateway.log_level = "INFO"
c.LocalBackend.clusters_directory = {clusters_dir!r}
# the defaults name dask-scheduler / dask-worker, which distributed no longer installs
c.ClusterConfig.scheduler_cmd = [{dask!r}, "scheduler"]
c.ClusterConfig.worker_cmd = [{dask!r}, "worker"]
c.ClusterConfig.worker_memory = {worker_memory!r}

def _options_handler(options):
    return {{"worker_cores": options.worker_threads, "worker_threads": options.worker_threads,
            "cluster_max_workers": options.max_workers}}

# user-facing cluster options, as hubs offer a few
c.Backend.cluster_options = Options(
    Integer("worker_threads", default=1, min=1, max=8, label="Threads per worker"),
    Integer("max_workers", default={max_workers}, min=1, max={max_workers}, label="Most workers"),
    handler=_options_handler,
)
"""


class GatewayServer:
    """``dask-gateway-server`` on free ports of 127.0.0.1; a context manager.

    Parameters
    ----------
    password
        The shared password of the SimpleAuthenticator (None: any password).
    worker_memory
        Memory limit of each worker, as dask-gateway writes it (``"1 G"``).
    max_workers
        Most workers one cluster may have (a cluster option lowers it per cluster).
    start_timeout
        Seconds to wait for the API to answer.
    """

    def __init__(self, password: str | None = None, worker_memory: str = "1 G", max_workers: int = 8,
                 start_timeout: float = 60) -> None:
        self.password = password
        self.worker_memory = worker_memory
        self.max_workers = max_workers
        self.start_timeout = start_timeout
        self.port = 0
        self.process: subprocess.Popen | None = None
        self.workdir: Path | None = None

    @property
    def address(self) -> str:
        """The gateway's address for ``dask_gateway.Gateway`` (API and scheduler proxy)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def cluster_options(self) -> dict[str, str]:
        """Options for ``open_cluster("gateway", **options)`` that reach this server."""
        options = {"address": self.address, "auth": "basic", "username": "throughput"}
        if self.password:
            options["password"] = self.password
        return options

    @staticmethod
    def executables() -> dict[str, str]:
        """``dask-gateway-server`` and ``dask`` from this Python's environment."""
        bindir = Path(sys.executable).parent
        found = {}
        for name in ("dask-gateway-server", "dask"):
            path = bindir / name
            found[name] = str(path) if path.exists() else shutil.which(name)
            if not found[name]:
                raise MissingDependencyError(
                    f"Missing program '{name}' required for the local dask-gateway server. "
                    "Install it with: pip install 'dask-gateway-server[local]'")
        return found

    def start(self) -> Self:
        programs = self.executables()
        self.workdir = Path(tempfile.mkdtemp(prefix="throughput-gateway-"))
        (self.workdir / "clusters").mkdir()
        self.port = free_port()
        config = self.workdir / "config.py"
        config.write_text(CONFIG.format(
            api_port=free_port(), proxy_port=self.port, password=self.password,
            clusters_dir=str(self.workdir / "clusters"), dask=programs["dask"],
            worker_memory=self.worker_memory, max_workers=int(self.max_workers)))
        env = dict(os.environ, PATH=os.pathsep.join([str(Path(programs["dask"]).parent), os.environ.get("PATH", "")]))
        with open(self.workdir / "gateway.log", "wb") as log:
            self.process = subprocess.Popen([programs["dask-gateway-server"], "-f", str(config)], cwd=self.workdir,
                                            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            wait_until(self._ready, self.start_timeout, f"dask-gateway-server on port {self.port}")
        except BaseException as exc:
            tail = self.log_tail()
            self.stop()
            if isinstance(exc, TimeoutError):
                raise TimeoutError(f"dask-gateway-server did not start within {self.start_timeout:g} s. "
                                   f"Log tail:\n{tail}") from None
            raise
        return self

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"dask-gateway-server exited with code {self.process.returncode}")
        with urllib.request.urlopen(f"{self.address}/api/health", timeout=2) as response:
            return json.load(response).get("status") == "pass"

    def clusters(self, username: str = "throughput", status: str = "pending,running,stopping") -> dict[str, str]:
        """The user's clusters in these states, name -> state, asked over the REST API."""
        token = base64.b64encode(f"{username}:{self.password or ''}".encode()).decode()
        request = urllib.request.Request(f"{self.address}/api/v1/clusters/?status={status}",
                                         headers={"Authorization": f"Basic {token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return {name: str(info["status"]).lower() for name, info in json.load(response).items()}

    def log_tail(self, chars: int = 3000) -> str:
        path = self.workdir / "gateway.log" if self.workdir else None
        return path.read_text(errors="replace")[-chars:] if path and path.exists() else ""

    def stop(self, timeout: float = 15) -> None:
        """SIGTERM (the server stops its clusters), then SIGKILL after ``timeout`` seconds."""
        stop_process_group(self.process, timeout)
        remove_workdir(self.workdir)
        self.process = self.workdir = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main() -> None:
    """Run a local gateway until Ctrl-C (or SIGTERM), printing how to reach it."""
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started in the background
    with GatewayServer() as server:
        print(f"dask-gateway-server at {server.address} (SimpleAuthenticator: any user name, no password)")
        print(f"try: throughput sweep 'synthetic://temp?shape=8,10,270,360' --cluster gateway "
              f"--cluster-option address={server.address} --cluster-option auth=basic")
        print("Ctrl-C to stop")
        try:
            server.process.wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
