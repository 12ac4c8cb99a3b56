"""The record: one row per timed run (results schema v1).

Field names are the CSV columns, in order. Names follow the seed notebook where it had
them, so its published archives load unchanged.
"""

from __future__ import annotations

import dataclasses
import functools
import socket
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Record:
    """One timed read of one source at one cluster size."""

    run_id: str
    """One id per sweep invocation."""
    timestamp: str
    """UTC ISO 8601 start of this run."""
    source: str
    operation: str = "load"
    format: str = ""
    cloud: str = ""
    region: str = ""
    url: str = ""
    """Where the data is, credentials removed."""
    variable: str = ""
    nbytes: int = 0
    """In-memory (decoded) bytes of the array read."""
    chunksize: int = 0
    """In-memory bytes of one chunk."""
    nchunks: int = 0
    dtype: str = ""
    shape: str = ""
    chunks: str = ""
    nworkers: int = 0
    """Workers counted on the cluster at the time of the run."""
    nthreads: int = 0
    """Worker threads counted on the cluster at the time of the run."""
    ncores: int = 0
    """Cores as Dask counts them (``Client.ncores``: one per worker thread), as the seed did."""
    host_cpus: int = 0
    """CPUs of the distinct hosts the workers run on (os.cpu_count per host)."""
    cluster: str = ""
    requested_workers: int = 0
    """Workers asked for at this point; differs from ``nworkers`` when fewer arrived."""
    repeat: int = 0
    runtime: float = float("nan")
    """Seconds, wall clock, of the store+compute only."""
    throughput_MBps: float = float("nan")
    throughput_MBps_per_thread: float = float("nan")
    bytes_received: int = 0
    """Bytes the null sinks on the workers received during this run."""
    request_retries: int = 0
    """Storage requests the workers' storage clients retried during this run (botocore, s3fs, gcsfs)."""
    task_retries: int = 0
    """Dask task retries during this run, counted by the scheduler (-1: not counted)."""
    scale_seconds: float = float("nan")
    """Seconds spent scaling the cluster and waiting for workers before this point (not timed)."""
    warmup_seconds: float = float("nan")
    """Seconds of the untimed warm-up (one chunk per thread of each worker new to the sweep) before this
    point's first repeat; 0 when all its workers were warmed at an earlier point, NaN when warm-up is off."""
    blocks_per_task: int = 1
    """Chunks stored per task (1: the seed's one task per chunk)."""
    tasks: int = 0
    """Tasks that stored chunks in this run, counted by the workers' sinks."""
    point_spread: float = float("nan")
    """IQR / median of ``runtime`` over this point's repeats; on the row of its last repeat only."""
    busy_fraction: float = float("nan")
    """Sum of the storing tasks' seconds / (nthreads * runtime): the threads' share of the run spent in tasks."""
    task_MBps_p10: float = float("nan")
    """10th percentile over the run's tasks of bytes stored / task seconds (measured on the workers)."""
    task_MBps_median: float = float("nan")
    """Median over tasks of bytes stored / task seconds."""
    task_MBps_p90: float = float("nan")
    """90th percentile over tasks of bytes stored / task seconds."""
    thread_MBps_min: float = float("nan")
    """Slowest worker thread: bytes it stored / runtime (0 for a thread that stored nothing)."""
    thread_MBps_median: float = float("nan")
    """Median worker thread: bytes it stored / runtime (compare ``throughput_MBps_per_thread``)."""
    thread_MBps_max: float = float("nan")
    """Fastest worker thread: bytes it stored / runtime."""
    worker_MBps_min: float = float("nan")
    """Slowest worker process: bytes its threads stored / runtime."""
    worker_MBps_max: float = float("nan")
    """Fastest worker process: bytes its threads stored / runtime."""
    requests: int = 0
    """Reads the Zarr store served on the workers during the run (0 where the source is not counted)."""
    wire_bytes: int = 0
    """Bytes those reads returned as stored (compressed), before decoding."""
    request_ms_p50: float = float("nan")
    """Median latency of those reads, in milliseconds."""
    request_ms_p90: float = float("nan")
    """90th percentile latency of those reads, in milliseconds."""
    request_ms_p99: float = float("nan")
    """99th percentile latency of those reads, in milliseconds."""
    status: str = "ok"
    error: str = ""
    note: str = ""
    storage_library: str = ""
    options: str = ""
    """Options that shaped the read, as JSON, secrets masked."""
    tags: str = ""
    host: str = field(default_factory=socket.gethostname)
    throughput_version: str = ""
    dask_version: str = ""
    distributed_version: str = ""
    zarr_version: str = ""
    xarray_version: str = ""
    fsspec_version: str = ""
    schema_version: int = SCHEMA_VERSION


COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Record))


def throughput_mbps(nbytes: int, runtime: float) -> float:
    """MB/s with MB = 10^6 bytes, as in the seed."""
    return nbytes / 1e6 / runtime if runtime > 0 else float("nan")


@functools.cache
def library_versions() -> dict[str, str]:
    """Versions of the libraries that shape a measurement, as record columns."""
    found = {}
    for package in ("throughput", "dask", "distributed", "zarr", "xarray", "fsspec"):
        try:
            found[f"{package}_version"] = version(package)
        except PackageNotFoundError:
            found[f"{package}_version"] = ""
    return found
