"""The embedded default: a GFDL-like dataset served from local servers on loopback.

The same generated dataset is published in several formats and on several servers
(Zarr and NetCDF on a local S3 store, Zarr on a static HTTP server, NetCDF over
OPeNDAP), so formats and protocols can be compared on one machine. Nothing here needs
the internet or credentials: servers start on free ports of 127.0.0.1, only when a
chosen source needs them, and stop on exit.

A new embedded source is one function ``(servers, dataset) -> Source`` and one entry
in :data:`EMBEDDED_SOURCES`; a new server is one cached property of :class:`LocalServers`.
While the servers run, ``THROUGHPUT_S3_ENDPOINT``, ``THROUGHPUT_HTTP_URL`` and
``THROUGHPUT_OPENDAP_URL`` point ``catalogs/local_demo.yaml`` at them.
"""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import xarray as xr

from .datasets import DEFAULT_SHAPE, gfdl_like, write_netcdf, write_zarr
from .errors import UsageError
from .sources import Source, open_source

BUCKET = "throughput-demo"
Status = Callable[[str], None]


class LocalServers:
    """The local servers of the embedded sources, each started on first use.

    Everything started is registered on ``stack`` and stops when it closes; servers
    already running can be handed in by name (``s3=...``) and are used as they are.
    """

    def __init__(self, stack: contextlib.ExitStack, status: Status = lambda message: None, **running) -> None:
        self.stack = stack
        self.status = status
        for name, server in running.items():
            self.__dict__[name] = self._announce(name, server)

    def _announce(self, name: str, server):
        if name == "s3":
            server.make_bucket(BUCKET)
            self.stack.enter_context(_environ(THROUGHPUT_S3_ENDPOINT=server.endpoint_url))
        elif name == "http":
            self.stack.enter_context(_environ(THROUGHPUT_HTTP_URL=server.url))
        return server

    @functools.cached_property
    def workdir(self) -> Path:
        """A temporary folder for files served from disk."""
        return Path(self.stack.enter_context(tempfile.TemporaryDirectory(prefix="throughput-demo-")))

    @functools.cached_property
    def s3(self):
        """SeaweedFS (a real S3 object store, anonymous read allowed) with the demo bucket."""
        from .servers.s3 import SeaweedS3

        self.status("starting a local S3 server (SeaweedFS) on 127.0.0.1")
        return self._announce("s3", self.stack.enter_context(SeaweedS3()))

    @functools.cached_property
    def http(self):
        """A static HTTP file server (no directory listings) over a temporary folder."""
        from .servers.http import StaticHTTPServer

        folder = self.workdir / "http"
        folder.mkdir()
        server = self.stack.enter_context(StaticHTTPServer(folder))
        self.status(f"started a static HTTP server on {server.url}")
        return self._announce("http", server)


def _s3_zarr(servers: LocalServers, ds: xr.Dataset) -> Source:
    s3 = servers.s3
    url = write_zarr(ds, f"s3://{BUCKET}/gfdl_cm26_like/ocean.zarr", s3.storage_options, zarr_format=2)
    return open_source(url, "temp", storage_options=s3.storage_options, name="local-s3-zarr")


def _s3_netcdf(servers: LocalServers, ds: xr.Dataset) -> Source:
    s3 = servers.s3
    url = write_netcdf(ds, f"s3://{BUCKET}/gfdl_cm26_like/ocean.nc", s3.storage_options)
    return open_source(url, "temp", storage_options=s3.storage_options, name="local-s3-netcdf")


def _http_zarr(servers: LocalServers, ds: xr.Dataset) -> Source:
    http = servers.http
    # consolidated: a plain HTTP server cannot list folders
    write_zarr(ds, str(http.folder / "gfdl_cm26_like" / "ocean.zarr"), zarr_format=2)
    return open_source(f"{http.url}/gfdl_cm26_like/ocean.zarr", "temp", name="local-http-zarr")


def _opendap_netcdf(servers: LocalServers, ds: xr.Dataset) -> Source:
    found = servers.stack.enter_context(opendap_sources(ds, servers.status))
    return found["local-opendap-netcdf"]


#: embedded source name -> function that publishes the dataset and opens it
EMBEDDED_SOURCES: dict[str, Callable[[LocalServers, xr.Dataset], Source]] = {
    "local-s3-zarr": _s3_zarr,
    "local-s3-netcdf": _s3_netcdf,
    "local-http-zarr": _http_zarr,
    "local-opendap-netcdf": _opendap_netcdf,
}

#: what ``throughput demo`` sweeps unless told otherwise: the seed's format comparison
DEFAULT_SOURCES: tuple[str, ...] = ("local-s3-zarr", "local-s3-netcdf")


def check_names(names: Sequence[str] | None) -> list[str]:
    """Validate embedded source names (``None``: the defaults; ``["all"]``: every one)."""
    if not names:
        return list(DEFAULT_SOURCES)
    if list(names) == ["all"]:
        return list(EMBEDDED_SOURCES)
    unknown = [n for n in names if n not in EMBEDDED_SOURCES]
    if unknown:
        raise UsageError(f"Unknown embedded source(s) {unknown}. Must be 'all' or some of {list(EMBEDDED_SOURCES)}.")
    return list(dict.fromkeys(names))


@contextlib.contextmanager
def embedded_sources(shape: tuple[int, int, int, int] = DEFAULT_SHAPE,
                     status: Status = lambda message: None,
                     sources: Sequence[str] | None = None,
                     opendap: bool = False,
                     http: bool = False,
                     s3=None) -> Iterator[dict[str, Source]]:
    """Start the local servers, publish the dataset to them and yield its sources by name.

    Parameters
    ----------
    shape
        Shape of the generated ``temp`` array (see :func:`throughput.datasets.gfdl_like`).
    status
        Called with a line of progress for the user.
    sources
        Names from :data:`EMBEDDED_SOURCES` (default :data:`DEFAULT_SOURCES`: Zarr and
        NetCDF on S3; ``["all"]`` for every one). Only the servers they need are started.
    opendap, http
        Also add ``local-opendap-netcdf`` (NetCDF over OPeNDAP; slow) or
        ``local-http-zarr`` (Zarr on a static HTTP server).
    s3
        An S3 server already running (a :class:`~throughput.servers.s3.S3Server`) to use
        instead of starting SeaweedFS; its ``throughput-demo`` bucket is made if needed.

    Yields ``{"local-s3-zarr": Source, ...}``; everything started is stopped on exit.
    """
    names = check_names(sources)
    names += [n for flag, n in ((opendap, "local-opendap-netcdf"), (http, "local-http-zarr"))
              if flag and n not in names]
    with contextlib.ExitStack() as stack:
        servers = LocalServers(stack, status, **({"s3": s3} if s3 is not None else {}))
        dataset = gfdl_like(shape)
        found = {}
        for name in names:
            status(f"publishing a GFDL CM2.6-like 'temp' array {shape} as {name}")
            found[name] = EMBEDDED_SOURCES[name](servers, dataset)
        yield found
        status("stopping the local servers")


@contextlib.contextmanager
def opendap_sources(dataset, status: Callable[[str], None] = lambda message: None) -> Iterator[dict[str, Source]]:
    """The dataset as a NetCDF4 file served over OPeNDAP by pydap on 127.0.0.1."""
    from .servers.opendap import OpendapServer
    from .servers.opendap import write_netcdf as write_local_netcdf

    with tempfile.TemporaryDirectory(prefix="throughput-dap-") as folder:
        path = write_local_netcdf(dataset, Path(folder) / "ocean.nc")
        status("starting a local OPeNDAP server (pydap) on 127.0.0.1")
        with OpendapServer([path]) as server, _environ(THROUGHPUT_OPENDAP_URL=server.endpoint_url):
            yield {"local-opendap-netcdf": open_source(server.url("ocean.nc"), "temp", format="opendap",
                                                       name="local-opendap-netcdf")}


@contextlib.contextmanager
def _environ(**values: str) -> Iterator[None]:
    """Set environment variables for the duration (for catalogs that template server URLs)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old
