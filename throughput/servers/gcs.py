"""A Google Cloud Storage emulator on 127.0.0.1 (``gcp-storage-emulator`` from PyPI), for gs:// URLs.

gcsfs 2026.10 swaps in an experimental filesystem class (zonal and hierarchical
namespace buckets) at import time unless ``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT`` is
false; that class probes bucket types with calls the emulator does not answer, and
hangs. Importing this module sets the variable to ``false`` (unless it is already
set) before gcsfs is imported, and :meth:`GCSEmulator.start` refuses to run when
gcsfs was imported with the experimental class. Worker processes inherit the
variable, and a pickled filesystem carries its class with it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from typing import Any, Self

from ..errors import MissingDependencyError
from . import free_port, port_open, wait_until

os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")


class GCSEmulator:
    """``gcp-storage-emulator`` (in-memory) in a child process; stopped on exit.

    >>> # with GCSEmulator() as gcs:
    >>> #     gcs.make_bucket("demo"); url = "gs://demo/ocean.zarr"; opts = gcs.storage_options
    """

    kind = "gcs-emulator"

    def __init__(self, start_timeout: float = 60) -> None:
        self.port = 0
        self.start_timeout = start_timeout
        self.process: subprocess.Popen | None = None
        self._log = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def storage_options(self) -> dict[str, Any]:
        """gcsfs options that reach the emulator: anonymous token and the endpoint."""
        return {"token": "anon", "endpoint_url": self.endpoint_url}

    def filesystem(self):
        check_gcsfs()
        import gcsfs

        return gcsfs.GCSFileSystem(**self.storage_options, skip_instance_cache=True)

    def make_bucket(self, bucket: str) -> None:
        fs = self.filesystem()
        if not fs.exists(bucket):
            fs.mkdir(bucket)

    def start(self) -> Self:
        check_gcsfs()
        try:
            import gcp_storage_emulator  # noqa: F401
        except ImportError:
            raise MissingDependencyError(
                "Missing package 'gcp-storage-emulator' required for the local GCS server. "
                "Install it with: pip install gcp-storage-emulator") from None
        self.port = free_port()
        args = [sys.executable, "-m", "gcp_storage_emulator", "start", "--host=127.0.0.1",
                f"--port={self.port}", "--in-memory", "--quiet"]
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the server; a full pipe would block it)
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self._log,
                                        start_new_session=True)
        try:
            wait_until(self._ready, self.start_timeout, f"GCS emulator on port {self.port}")
        except BaseException:
            self.stop()
            raise
        return self

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            self._log.seek(0)
            err = self._log.read().decode(errors="replace")[-1000:]
            raise RuntimeError(f"gcp-storage-emulator exited with code {self.process.returncode}: {err}")
        return port_open(self.port)

    def stop(self, timeout: float = 5) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.process = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def check_gcsfs() -> None:
    """Fail clearly when gcsfs is missing, or was imported with the class that hangs on emulators."""
    try:
        import gcsfs
    except ImportError:
        raise MissingDependencyError(
            "Missing package 'gcsfs' required for gs:// URLs. Install it with: pip install gcsfs") from None
    if gcsfs.GCSFileSystem.__module__ != "gcsfs.core":
        raise RuntimeError(
            "gcsfs was imported with GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT enabled, which hangs against "
            "GCS emulators. Set GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false before importing gcsfs "
            "(or import throughput.servers.gcs first).")
