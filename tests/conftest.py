"""Shared fixtures: real servers on 127.0.0.1 (free ports), tiny data, a LocalCluster."""

from __future__ import annotations

import uuid

import pytest

from throughput.datasets import gfdl_like, write_zarr
from throughput.servers.s3 import MotoS3, SeaweedS3

#: small GFDL-like shape for tests: 4 x 10 levels, 27 x 36 plane -> 8 chunks of 19,440 bytes
SMALL_SHAPE = (4, 10, 27, 36)


@pytest.fixture(scope="session")
def seaweed():
    """A real S3 object store (SeaweedFS) for the whole test session."""
    with SeaweedS3() as server:
        yield server


@pytest.fixture(scope="session")
def moto_s3():
    """moto's S3 server, quick to start, for unit tests."""
    with MotoS3() as server:
        yield server


@pytest.fixture()
def bucket(seaweed):
    """A fresh bucket on the SeaweedFS server."""
    name = f"test-{uuid.uuid4().hex[:10]}"
    seaweed.make_bucket(name)
    return name


@pytest.fixture(scope="session")
def small_dataset():
    return gfdl_like(SMALL_SHAPE)


@pytest.fixture(scope="session")
def s3_zarr(seaweed, small_dataset):
    """URLs of the small dataset as Zarr v2 (consolidated) and v3 on SeaweedFS."""
    name = f"zarr-{uuid.uuid4().hex[:8]}"
    seaweed.make_bucket(name)
    urls = {}
    for fmt in (2, 3):
        urls[fmt] = write_zarr(small_dataset, f"s3://{name}/v{fmt}/ocean.zarr", seaweed.storage_options, zarr_format=fmt)
    return urls


@pytest.fixture(scope="module")
def local_cluster():
    """A LocalCluster provider (processes, 1 thread each), started once per module."""
    from throughput.clusters import open_cluster

    with open_cluster("local") as cluster:
        yield cluster
