"""The measurement core against a real object store: sources -> null sink -> sweep -> CSV."""

from __future__ import annotations

import csv

import numpy as np
import pytest

import throughput
from throughput.archive import ResultsFile
from throughput.errors import UsageError, VariableNotFoundError
from throughput.records import COLUMNS
from throughput.sweep import run_sweep

from .conftest import SMALL_SHAPE

CHUNK_BYTES = 1 * 5 * SMALL_SHAPE[2] * SMALL_SHAPE[3] * 4
NBYTES = int(np.prod(SMALL_SHAPE)) * 4


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_zarr_source_geometry(seaweed, s3_zarr, zarr_format):
    src = throughput.open_source(s3_zarr[zarr_format], "temp", storage_options=seaweed.storage_options)
    assert src.format == "zarr"
    assert src.nbytes == NBYTES
    assert src.chunksize == CHUNK_BYTES
    assert src.nchunks == SMALL_SHAPE[0] * SMALL_SHAPE[1] // 5
    assert src.shape == SMALL_SHAPE and src.chunks == (1, 5, 27, 36)
    assert src.dims == ("time", "st_ocean", "yt_ocean", "xt_ocean")
    assert src.storage_library.startswith("s3fs ")
    assert src.options["zarr_format"] == zarr_format
    # credentials never kept on the source
    assert seaweed.secret_key not in repr(src.options) and seaweed.secret_key not in src.url


def test_zarr_values_roundtrip(seaweed, s3_zarr, small_dataset):
    src = throughput.open_source(s3_zarr[2], "temp", storage_options=seaweed.storage_options)
    np.testing.assert_array_equal(src.array[1, 5:10].compute(), small_dataset.temp.values[1, 5:10])


def test_missing_variable_lists_variables(seaweed, s3_zarr):
    with pytest.raises(VariableNotFoundError, match=r"'salt' not found .* Variables: \[.*'temp'"):
        throughput.open_source(s3_zarr[3], "salt", storage_options=seaweed.storage_options)


def test_sweep_reads_exactly_the_array_bytes(seaweed, s3_zarr, local_cluster, tmp_path):
    src = throughput.open_source(s3_zarr[2], "temp", storage_options=seaweed.storage_options, name="s3-zarr")
    path = tmp_path / "out.csv"
    with ResultsFile(path) as results:
        records = run_sweep(src, local_cluster, [2, 1], repeats=2, results=results,
                            labels={"cloud": "local", "region": "loopback"})
    assert [(r.requested_workers, r.repeat) for r in records] == [(2, 0), (2, 1), (1, 0), (1, 1)]
    for r in records:
        assert r.status == "ok", r.error
        assert r.bytes_received == NBYTES  # the sinks on the workers saw every byte once
        assert r.nworkers == r.requested_workers and r.nthreads == r.nworkers  # 1 thread per worker
        assert r.runtime > 0 and r.throughput_MBps == pytest.approx(NBYTES / 1e6 / r.runtime)
        assert r.throughput_MBps_per_thread == pytest.approx(r.throughput_MBps / r.nthreads)
        assert r.cluster == "local" and r.cloud == "local" and r.format == "zarr"
        assert r.scale_seconds >= 0 and r.host_cpus >= 1
    rows = list(csv.DictReader(path.open()))
    assert list(rows[0]) == list(COLUMNS) and len(rows) == 4
    assert {row["run_id"] for row in rows} == {records[0].run_id}
    assert int(rows[0]["nbytes"]) == NBYTES and rows[0]["chunks"] == "1x5x27x36"
    assert seaweed.secret_key not in path.read_text() and seaweed.access_key not in path.read_text()


def _explode(block, block_info=None):
    if block_info[0]["chunk-location"] == (1, 0):
        raise OSError("chunk (1, 0) unreadable")
    return block


def test_failed_run_is_a_row_and_sweep_goes_on(local_cluster, tmp_path):
    import dask.array as da

    good = throughput.open_source("synthetic://t?shape=4,4&chunks=2,2")
    bad = throughput.Source(name="bad", format="synthetic", url="synthetic://bad", variable="t",
                            array=da.ones((4, 4), chunks=2).map_blocks(_explode, dtype=float))
    path = tmp_path / "rows.csv"
    with ResultsFile(path) as results:
        records = run_sweep(bad, local_cluster, [1, 2], repeats=1, retries=0, results=results)
        records += run_sweep(good, local_cluster, [1], repeats=1, results=results)
    assert [r.status for r in records] == ["error", "error", "ok"]
    assert records[0].error == "OSError: chunk (1, 0) unreadable"
    assert records[0].nworkers == 1 and records[1].nworkers == 2
    rows = list(csv.DictReader(path.open()))
    assert [row["status"] for row in rows] == ["error", "error", "ok"]
    assert rows[0]["runtime"] == "nan" and rows[0]["error"] == "OSError: chunk (1, 0) unreadable"


def test_synthetic_source_on_cluster(local_cluster):
    src = throughput.open_source("synthetic://temp?shape=8,10,27,36&chunks=1,5,27,36")
    records = run_sweep(src, local_cluster, [1], repeats=1)
    assert records[0].status == "ok" and records[0].bytes_received == src.nbytes == 8 * 10 * 27 * 36 * 4


@pytest.mark.parametrize("workers", [[], [0], [-1], ["a"], [1.5], [True]])
def test_bad_worker_counts(workers, local_cluster):
    src = throughput.open_source("synthetic://t?shape=2,2&chunks=1,1")
    with pytest.raises(UsageError, match="worker count|No worker counts"):
        list(throughput.sweep(src, local_cluster, workers, 1))
