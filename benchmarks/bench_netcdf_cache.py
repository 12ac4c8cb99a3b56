"""How fs.open cache settings change NetCDF/HDF5 reads over S3 (SeaweedFS on loopback).

Writes the demo's GFDL-like ``temp`` array (float32 12x20x270x360, HDF5 chunks of
1x5x270x360 = 1.944 MB, zlib level 1 + shuffle) as one NetCDF file to a local
SeaweedFS, then for each cache setting times opening the file and reading every
chunk into the null sink on a LocalCluster (2 worker processes, 1 thread each),
plus a single-threaded read that counts the bytes the cache asked the server for.

    python benchmarks/bench_netcdf_cache.py [--repeats 3] [--shape 12,20,270,360]
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import time

import dask
import xarray as xr

import throughput
from throughput.datasets import gfdl_like, write_netcdf
from throughput.servers.s3 import SeaweedS3
from throughput.sink import NullStore
from throughput.sweep import run_sweep

MiB = 2**20
SETTINGS = {
    "readahead (s3fs default, 50 MiB)": {"cache_type": "readahead", "block_size": None},
    "readahead 5 MiB": {"cache_type": "readahead", "block_size": 5 * MiB},
    "blockcache 4 MiB (xarray's default)": {"cache_type": "blockcache", "block_size": 4 * MiB},
    "blockcache 1 MiB": {"cache_type": "blockcache", "block_size": MiB},
    "bytes 1 MiB": {"cache_type": "bytes", "block_size": MiB},
    "none": {"cache_type": "none", "block_size": None},
    "first 1 MiB": {"cache_type": "first", "block_size": MiB},
    "first 4 MiB": {"cache_type": "first", "block_size": 4 * MiB},
}


def requested_bytes(url: str, storage_options: dict, opts: dict) -> tuple[int, int]:
    """Bytes and requests the cache sent to the server for one full single-threaded read."""
    import fsspec

    fs, path = fsspec.core.url_to_fs(url, **storage_options, skip_instance_cache=True)
    sent = {"bytes": 0, "requests": 0}
    with fs.open(path, "rb", **{k: v for k, v in opts.items() if v is not None}) as f:
        fetch = f.cache.fetcher

        def counting(start, end):  # count what the cache asks of the server
            sent["bytes"] += end - start
            sent["requests"] += 1
            return fetch(start, end)

        f.cache.fetcher = counting
        ds = xr.open_dataset(f, engine="h5netcdf", chunks={}, decode_times=False)
        with dask.config.set(scheduler="synchronous"):
            dask.array.store(ds.temp.data, NullStore(), lock=False)
    return sent["bytes"], sent["requests"]


def main() -> None:
    # stopped with SIGTERM: unwind, so the servers and the cluster stop too
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--shape", default="12,20,270,360")
    args = parser.parse_args()
    shape = tuple(int(v) for v in args.shape.split(","))
    with SeaweedS3() as s3, throughput.open_cluster("local") as cluster:
        s3.make_bucket("bench")
        url = write_netcdf(gfdl_like(shape), "s3://bench/ocean.nc", s3.storage_options)
        size = s3.filesystem().size("bench/ocean.nc")
        print(f"file: {size / 1e6:.1f} MB on disk, shape {shape}")
        print(f"| setting | open (s) | read, 2 workers (s, median of {args.repeats}) | MB/s | "
              "bytes requested / file size | requests |")
        print("|---|---|---|---|---|---|")
        for label, opts in SETTINGS.items():
            t0 = time.perf_counter()
            src = throughput.open_source(url, "temp", storage_options=s3.storage_options,
                                         open_options=opts)
            opened = time.perf_counter() - t0
            records = run_sweep(src, cluster, [2], repeats=args.repeats)
            assert all(r.status == "ok" and r.bytes_received == src.nbytes for r in records), records
            runtime = statistics.median(r.runtime for r in records)
            sent, requests = requested_bytes(url, s3.storage_options, opts)
            print(f"| {label} | {opened:.2f} | {runtime:.2f} | {src.nbytes / 1e6 / runtime:.0f} | "
                  f"{sent / size:.2f} | {requests} |")


if __name__ == "__main__":
    main()
