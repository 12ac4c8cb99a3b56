"""The embedded default: a GFDL-like dataset served from local servers on loopback.

Nothing here needs the internet or credentials: the servers are started on free
ports of 127.0.0.1 and stopped on exit.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from .datasets import DEFAULT_SHAPE, gfdl_like, write_zarr
from .servers.s3 import SeaweedS3
from .sources import Source, open_source

BUCKET = "throughput-demo"


@contextlib.contextmanager
def embedded_sources(shape: tuple[int, int, int, int] = DEFAULT_SHAPE,
                     status: Callable[[str], None] = lambda message: None,
                     opendap: bool = False) -> Iterator[dict[str, Source]]:
    """Start the local servers, write the dataset to them and yield its sources by name.

    Yields ``{"local-s3-zarr": Source, ...}``; everything started is stopped on exit.
    ``opendap=True`` adds ``local-opendap-netcdf`` (NetCDF over OPeNDAP, slow: opt-in).
    While they run, ``THROUGHPUT_S3_ENDPOINT`` (and ``THROUGHPUT_OPENDAP_URL``) point
    ``catalogs/local_demo.yaml`` at these servers.
    """
    status("starting a local S3 server (SeaweedFS) on 127.0.0.1")
    with SeaweedS3() as s3:
        s3.make_bucket(BUCKET)
        status(f"writing a GFDL CM2.6-like 'temp' array {shape} as Zarr to {s3.endpoint_url}")
        dataset = gfdl_like(shape)
        url = f"s3://{BUCKET}/gfdl_cm26_like/ocean.zarr"
        write_zarr(dataset, url, s3.storage_options, zarr_format=2)
        sources = {
            "local-s3-zarr": open_source(url, "temp", storage_options=s3.storage_options, name="local-s3-zarr"),
        }
        with contextlib.ExitStack() as extra:
            extra.enter_context(_environ(THROUGHPUT_S3_ENDPOINT=s3.endpoint_url))
            if opendap:
                sources.update(extra.enter_context(opendap_sources(dataset, status)))
            yield sources
        status("stopping the local servers")


@contextlib.contextmanager
def opendap_sources(dataset, status: Callable[[str], None] = lambda message: None) -> Iterator[dict[str, Source]]:
    """The dataset as a NetCDF4 file served over OPeNDAP by pydap on 127.0.0.1."""
    from .servers.opendap import OpendapServer, write_netcdf

    with tempfile.TemporaryDirectory(prefix="throughput-dap-") as folder:
        path = write_netcdf(dataset, Path(folder) / "ocean.nc")
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
