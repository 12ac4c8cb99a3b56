"""The embedded default: a GFDL-like dataset served from local servers on loopback.

Nothing here needs the internet or credentials: the servers are started on free
ports of 127.0.0.1 and stopped on exit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from .datasets import DEFAULT_SHAPE, gfdl_like, write_zarr
from .servers.s3 import SeaweedS3
from .sources import Source, open_source

BUCKET = "throughput-demo"


@contextlib.contextmanager
def embedded_sources(shape: tuple[int, int, int, int] = DEFAULT_SHAPE,
                     status: Callable[[str], None] = lambda message: None) -> Iterator[dict[str, Source]]:
    """Start the local servers, write the dataset to them and yield its sources by name.

    Yields ``{"local-s3-zarr": Source, ...}``; everything started is stopped on exit.
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
        yield sources
        status("stopping the local servers")
