"""Measurement fidelity: worker-side evidence, blocks per task, warm-up, spread, lean s3fs reads."""

from __future__ import annotations

import csv
import math

import dask
import dask.array as da
import numpy as np
import pytest

import throughput
from throughput.archive import ResultsFile
from throughput.errors import UsageError
from throughput.instrument import spread, summarise_run
from throughput.plan import null_store
from throughput.sink import NullStore, reset_received, task_log
from throughput.sources.zarr import lean_s3_options
from throughput.sweep import run_sweep, timed_read

from .conftest import SMALL_SHAPE

NCHUNKS = 8  # SMALL_SHAPE (4, 10, 27, 36) in chunks of (1, 5, 27, 36)
NBYTES = math.prod(SMALL_SHAPE) * 4


_REGIONS: list[tuple] = []
_VALUES: dict[tuple, np.ndarray] = {}


class RecordingStore:
    """A sink that keeps what it is given (in this process, like NullStore: copies share it)."""

    regions = _REGIONS
    values = _VALUES

    def __setitem__(self, key, value):
        region = tuple((s.start, s.stop) for s in key)
        _REGIONS.append(region)
        _VALUES[region] = np.array(value)


@pytest.mark.parametrize("blocks_per_task", [1, 3, 7, 100])
def test_grouped_store_writes_every_block_exactly_once(blocks_per_task):
    array = da.arange(7 * 9, chunks=4).reshape(7, 9).rechunk((2, 4))  # 4 x 3 blocks, ragged edges
    _REGIONS.clear()
    _VALUES.clear()
    sink = RecordingStore()
    stored, ntasks = null_store(array, sink, blocks_per_task)
    assert ntasks == (12 if blocks_per_task == 1 else math.ceil(12 / blocks_per_task))
    result = dask.compute(stored, scheduler="sync")[0]
    assert len(sink.regions) == 12 and len(set(sink.regions)) == 12  # each block once
    expected = np.arange(7 * 9).reshape(7, 9)
    for (r0, r1), (c0, c1) in sink.regions:
        np.testing.assert_array_equal(sink.values[((r0, r1), (c0, c1))], expected[r0:r1, c0:c1])
    assert sum(v.size for v in sink.values.values()) == 63
    if blocks_per_task > 1:
        assert result == 12  # the counting task saw every group's chunks


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "4"])
def test_bad_blocks_per_task(bad):
    with pytest.raises(UsageError, match=rf"Bad blocks per task {bad!r}: must be a positive integer"):
        null_store(da.ones(4, chunks=2), NullStore(), bad)


def test_sink_log_outside_a_worker_has_one_entry_per_chunk():
    reset_received()
    da.store(da.ones((6, 4), chunks=(2, 4), dtype="f8"), NullStore(), lock=False, scheduler="sync")
    log = task_log()
    assert [row[2] for row in log] == [64.0, 64.0, 64.0]  # bytes per chunk
    assert all(math.isnan(row[3]) for row in log)  # no task start time outside a worker
    reset_received()
    assert task_log() == []


def test_timed_read_logs_bytes_per_task_and_every_store_request(seaweed, s3_zarr, local_cluster):
    src = throughput.open_source(s3_zarr[3], "temp", storage_options=seaweed.storage_options)
    local_cluster.scale(2)
    local_cluster.wait_for_workers(2, 60)
    runtime, got = timed_read(local_cluster, src, None, 0)
    rows = [row for log in got["tasks"].values() for row in log]
    assert len(rows) == NCHUNKS and sum(row[2] for row in rows) == NBYTES == got["bytes"]
    assert all(0 < row[3] <= runtime for row in rows)  # each task's seconds inside the timed run
    requests = [r for log in got["requests"].values() for r in log]
    assert len(requests) == NCHUNKS  # one store read per chunk, no cache
    fs = seaweed.filesystem()
    prefix = s3_zarr[3].removeprefix("s3://") + "/temp/c"
    stored = sum(info["size"] for info in fs.find(prefix, detail=True).values())
    assert sum(b for b, _ in requests) == stored  # bytes on the wire = the chunk objects' sizes
    assert stored != NBYTES  # compressed: on the wire differs from decoded


def test_sweep_rows_carry_measured_columns(seaweed, s3_zarr, local_cluster, tmp_path):
    src = throughput.open_source(s3_zarr[2], "temp", storage_options=seaweed.storage_options)
    path = tmp_path / "rows.csv"
    with ResultsFile(path) as results:
        records = run_sweep(src, local_cluster, [2, 1], repeats=3, results=results)
    assert [r.status for r in records] == ["ok"] * 6
    for r in records:
        assert r.tasks == NCHUNKS and r.requests == NCHUNKS and r.blocks_per_task == 1
        assert r.bytes_received == NBYTES and 0 < r.wire_bytes < NBYTES * 1.01
        assert r.task_MBps_p10 <= r.task_MBps_median <= r.task_MBps_p90
        assert r.thread_MBps_min <= r.thread_MBps_median <= r.thread_MBps_max
        # every byte stored by some thread within the run: per-thread shares add up to the total
        assert 0 < r.busy_fraction <= 1.0 + 1e-6
        assert r.request_ms_p50 <= r.request_ms_p90 <= r.request_ms_p99
    for n in (2, 1):
        point = [r for r in records if r.requested_workers == n]
        assert [math.isnan(r.point_spread) for r in point] == [True, True, False]
        assert point[2].point_spread == pytest.approx(spread([r.runtime for r in point]))
        assert len({r.warmup_seconds for r in point}) == 1  # one warm-up per point
    # an untimed warm-up at 2 workers; at 1, the worker left was warmed already: no second warm-up
    assert {r.warmup_seconds for r in records if r.requested_workers == 2}.pop() > 0
    assert {r.warmup_seconds for r in records if r.requested_workers == 1} == {0.0}
    one = [r for r in records if r.nthreads == 1]
    assert all(r.thread_MBps_max == pytest.approx(r.throughput_MBps) for r in one)  # one thread did it all
    rows = list(csv.DictReader(path.open()))
    assert {"tasks", "requests", "wire_bytes", "point_spread", "task_MBps_median"} <= set(rows[0])
    assert rows[0]["point_spread"] == "nan" and rows[2]["point_spread"] != "nan"


def test_grouped_sweep_reads_every_byte_with_fewer_tasks(local_cluster):
    src = throughput.open_source("synthetic://t?shape=40,6&chunks=1,3")  # 80 chunks of 12 bytes
    records = run_sweep(src, local_cluster, [1], repeats=1, blocks_per_task=16, warmup=False)
    (r,) = records
    assert r.status == "ok", r.error
    assert r.bytes_received == src.nbytes == 40 * 6 * 4 and r.tasks == 5 and r.blocks_per_task == 16
    assert math.isnan(r.warmup_seconds) and r.requests == 0  # synthetic: no store reads


def test_summarise_run_values():
    tasks = {"w1": [("a", "t1", 2e6, 1.0), ("b", "t1", 2e6, 0.5)], "w2": [("c", "t2", 4e6, 2.0)], "w3": OSError("x")}
    requests = {"w1": [(1000, 0.010), (3000, 0.030)], "w2": [(2000, 0.020)]}
    got = summarise_run(tasks, requests, runtime=4.0, nthreads=3)
    assert got["tasks"] == 3 and got["requests"] == 3 and got["wire_bytes"] == 6000
    assert got["task_MBps_median"] == pytest.approx(2.0)  # rates 2, 4, 2
    assert got["busy_fraction"] == pytest.approx(3.5 / (3 * 4.0))
    assert got["thread_MBps_max"] == pytest.approx(1.0) and got["thread_MBps_min"] == 0.0  # third thread idle
    assert got["worker_MBps_min"] == pytest.approx(1.0) and got["worker_MBps_max"] == pytest.approx(1.0)
    assert got["request_ms_p50"] == pytest.approx(20.0)


def test_spread_is_iqr_over_median():
    assert spread([1.0, 2.0, 3.0, 4.0]) == pytest.approx((3.25 - 1.75) / 2.5)
    assert math.isnan(spread([1.0]))


def test_lean_s3_options_only_when_a_chunk_is_one_get():
    opts = {"key": "k"}
    assert lean_s3_options("s3://b/x.zarr", opts, 2_000_000) == {"key": "k", "max_concurrency": 1}
    assert lean_s3_options("s3://b/x.zarr", opts, 194_400_000) is opts  # s3fs may split: keep its way
    mine = {"max_concurrency": 4}
    assert lean_s3_options("s3://b/x.zarr", mine, 2_000_000) is mine  # the user's choice wins
    assert lean_s3_options("gs://b/x.zarr", opts, 2_000_000) is opts


def test_zarr_source_records_the_lean_choice(seaweed, s3_zarr):
    src = throughput.open_source(s3_zarr[2], "temp", storage_options=seaweed.storage_options)
    assert src.options["s3fs_max_concurrency"] == 1
    kept = throughput.open_source(s3_zarr[2], "temp", storage_options=seaweed.storage_options, lean_s3=False)
    assert "s3fs_max_concurrency" not in kept.options


def test_cli_blocks_per_task_reaches_the_rows(tmp_path, capsys):
    from throughput.cli import main

    out = tmp_path / "cli.csv"
    code = main(["sweep", "synthetic://t?shape=12,6&chunks=1,6", "--workers", "1", "--repeats", "1",
                 "--blocks-per-task", "5", "--no-warmup", "--no-plot", "--out", str(out)])
    assert code == 0
    (row,) = list(csv.DictReader(out.open()))
    assert row["blocks_per_task"] == "5" and row["tasks"] == "3" and row["bytes_received"] == str(12 * 6 * 4)
    assert row["warmup_seconds"] == "nan"
    assert main(["sweep", "synthetic://t", "--blocks-per-task", "0"]) == 2
    assert "--blocks-per-task" in capsys.readouterr().err


def test_workers_sharing_a_process_are_counted_once(seaweed, s3_zarr):
    from throughput.clusters import open_cluster

    src = throughput.open_source(s3_zarr[2], "temp", storage_options=seaweed.storage_options)
    with open_cluster("local", processes=False) as cluster:
        (r,) = run_sweep(src, cluster, [2], repeats=1)
    assert r.status == "ok" and r.nworkers == 2 and r.nthreads == 2
    assert r.bytes_received == NBYTES and r.tasks == NCHUNKS and r.requests == NCHUNKS
    assert r.note == "" and r.busy_fraction <= 1.0 + 1e-6


@pytest.mark.parametrize(("value", "nchunks", "nthreads", "expected"),
                         [("auto", 1, 1, 1), ("auto", 200, 2, 1), ("auto", 201, 2, 2), ("auto", 100_000, 2, 500),
                          ("auto", 100_000, 150, 7), ("auto", 5, 0, 1), (7, 100_000, 2, 7)])
def test_auto_blocks_per_task_groups_only_beyond_100_tasks_a_thread(value, nchunks, nthreads, expected):
    from throughput.plan import resolve_blocks_per_task

    assert resolve_blocks_per_task(value, nchunks, nthreads, 100) == expected


def test_auto_sweep_groups_per_point_and_reads_every_byte(local_cluster):
    src = throughput.open_source("synthetic://t?shape=40,6&chunks=1,3")  # 80 chunks of 12 bytes
    with dask.config.set({"throughput.sweep.tasks-per-thread": 10}):
        records = run_sweep(src, local_cluster, [1, 2], repeats=1, warmup=False)  # the default: auto
    # 1 thread: 8 chunks a task (10 tasks); 2 threads: 4 a task (20 tasks); a plan per value
    assert [(r.nthreads, r.blocks_per_task, r.tasks, r.bytes_received) for r in records] == \
        [(1, 8, 10, src.nbytes), (2, 4, 20, src.nbytes)]
    (seed,) = run_sweep(src, local_cluster, [1], repeats=1, warmup=False)  # 80 chunks <= 100 a thread
    assert (seed.blocks_per_task, seed.tasks, seed.bytes_received) == (1, 80, src.nbytes)


def test_cli_blocks_per_task_auto_and_bad_values(tmp_path, capsys):
    from throughput.cli import main

    out = tmp_path / "auto.csv"
    assert main(["sweep", "synthetic://t?shape=12,6&chunks=1,6", "-w", "1", "-r", "1", "--blocks-per-task", "auto",
                 "--no-warmup", "--no-plot", "--out", str(out)]) == 0
    (row,) = csv.DictReader(out.open())
    assert row["blocks_per_task"] == "1" and row["tasks"] == "12"
    capsys.readouterr()
    assert main(["sweep", "synthetic://t", "--blocks-per-task", "lots"]) == 2
    err = capsys.readouterr().err
    assert "'lots' is not a positive integer or auto" in err and err.count("\n") == 1
