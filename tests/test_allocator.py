"""The workers' allocator setting (throughput.allocator): applied where throughput started the workers, recorded."""

from __future__ import annotations

import json

import dask
import pytest
from distributed import Client, LocalCluster

import throughput
from throughput.allocator import MMAP_THRESHOLD, TRIM_THRESHOLD, UNCHANGED, wanted
from throughput.clusters import from_client, open_cluster
from throughput.errors import UsageError
from throughput.sweep import run_sweep

TUNED = f"glibc mmap_threshold={MMAP_THRESHOLD} trim_threshold={TRIM_THRESHOLD}"
BUFFER = 2_000_000  # a decoded chunk's size: above glibc's 128 KiB starting mmap threshold
PAGES = BUFFER // 4096


def page_faults_for_buffers(count: int = 40) -> int:
    """Minor page faults of this process while it fills and frees ``count`` 2 MB buffers (run on a worker)."""
    import resource

    import numpy as np

    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(count):
        buffer = np.ones(BUFFER // 8)  # touches every page, as a decoder does
        del buffer
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def source():
    return throughput.open_source("synthetic://t?shape=40,6&chunks=10,6")


def test_workers_throughput_starts_reuse_large_buffers_and_rows_say_so():
    with open_cluster("local") as cluster:
        records = run_sweep(source(), cluster, [2, 1], repeats=1, warmup=False)
        faults = cluster.client.run(page_faults_for_buffers)
    assert [r.status for r in records] == ["ok", "ok"]
    assert {json.loads(r.options)["worker_malloc"] for r in records} == {TUNED}
    # freed buffers are reused from the heap: about one buffer's pages in all, not one per buffer
    (count,) = faults.values()  # the sweep ended at 1 worker
    assert count < 5 * PAGES, count


def test_borrowed_workers_are_left_as_dask_started_them():
    with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=":0") as lc, Client(lc) as client:
        (record,) = run_sweep(source(), from_client(client), [1], repeats=1, warmup=False)
        faults = client.run(page_faults_for_buffers)
    assert record.status == "ok"
    assert json.loads(record.options)["worker_malloc"] == UNCHANGED
    # Dask's MALLOC_TRIM_THRESHOLD_ keeps glibc's mmap threshold at 128 KiB: every buffer is mapped afresh
    (count,) = faults.values()
    assert count > 20 * PAGES, count


@pytest.mark.parametrize(("value", "started", "expected"),
                         [("auto", True, True), ("auto", False, False), (True, False, True), (False, True, False)])
def test_malloc_setting(value, started, expected):
    with dask.config.set({"throughput.workers.malloc": value}):
        assert wanted(started) is expected


def test_bad_malloc_setting():
    with dask.config.set({"throughput.workers.malloc": "sometimes"}), \
            pytest.raises(UsageError, match="Bad throughput.workers.malloc 'sometimes': must be auto, true or false"):
        wanted(True)

