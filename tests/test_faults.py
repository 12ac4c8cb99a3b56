"""Fault matrix (issue 8): a misbehaving store, a dying worker, a vanishing server, signals,
an unwritable results folder. Each test ends with every finished row intact in a valid CSV."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import numpy as np
import psutil
import pytest

import throughput
from throughput.archive import ResultsFile
from throughput.cli import main
from throughput.datasets import write_zarr
from throughput.errors import StorageUnreachableError
from throughput.records import COLUMNS
from throughput.servers import free_port, wait_until
from throughput.servers.faults import FaultyProxy
from throughput.servers.s3 import SeaweedS3
from throughput.sweep import run_sweep, sweep

from .conftest import SMALL_SHAPE

NBYTES = int(np.prod(SMALL_SHAPE)) * 4
CLI = str(Path(sys.executable).with_name("throughput"))  # the console script users run


def read_rows(path: Path) -> list[dict]:
    """Parse a results CSV strictly: header is schema v1, every line whole, no ragged rows."""
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n"), "last row is half-written"
    rows = list(csv.reader(text.splitlines()))
    assert tuple(rows[0]) == COLUMNS
    assert all(len(r) == len(COLUMNS) for r in rows[1:]), "a row has the wrong number of fields"
    return [dict(zip(COLUMNS, r)) for r in rows[1:]]


# --- 1. transient 5xx / throttling ------------------------------------------------------------

def test_throttled_store_runs_complete_and_rows_count_the_retries(seaweed, s3_zarr, local_cluster, tmp_path):
    with FaultyProxy(seaweed.endpoint_url, fail_every=3) as proxy:
        # signed for the proxy's address; the proxy forwards the Host header unchanged
        options = {**seaweed.storage_options, "client_kwargs": {"endpoint_url": proxy.endpoint_url}}
        src = throughput.open_source(s3_zarr[2], "temp", storage_options=options, name="throttled")
        proxy.reset_counts()  # count only what the timed runs ask for
        path = tmp_path / "throttled.csv"
        with ResultsFile(path) as results:
            # no untimed warm-up read: every request the proxy sees belongs to a timed run
            records = run_sweep(src, local_cluster, [2, 1], repeats=2, results=results, warmup=False)
    assert [r.status for r in records] == ["ok"] * 4, [r.error for r in records]
    assert all(r.bytes_received == NBYTES for r in records)
    # every 3rd GET failed (503 SlowDown, 500 InternalError in turn) and was retried
    assert proxy.injected >= 4 and proxy.retried == proxy.injected
    # the records count the same retries, seen from the workers' storage clients
    assert sum(r.request_retries for r in records) == proxy.injected
    assert all(r.request_retries > 0 for r in records)
    assert all(r.task_retries == 0 for r in records)  # botocore absorbed them: no task failed
    rows = read_rows(path)
    assert [int(row["request_retries"]) for row in rows] == [r.request_retries for r in records]
    assert seaweed.secret_key not in path.read_text()


def test_proxy_fails_a_deterministic_fraction_with_s3_error_bodies(seaweed, bucket):
    fs = seaweed.filesystem()
    fs.pipe(f"{bucket}/obj", b"x" * 100)
    import requests

    with FaultyProxy(seaweed.endpoint_url, fail_every=2) as proxy:
        answers = [requests.get(f"{proxy.endpoint_url}/{bucket}/obj", timeout=10) for _ in range(4)]
    assert [a.status_code for a in answers] == [200, 503, 200, 500]
    assert answers[0].content == b"x" * 100  # forwarded faithfully (anonymous read allowed)
    assert "<Code>SlowDown</Code>" in answers[1].text and "<Code>InternalError</Code>" in answers[3].text
    assert (proxy.requests, proxy.injected, proxy.retried) == (4, 2, 1)


# --- 2. a worker killed in the middle of a timed run -------------------------------------------

def _wait_for_release(block, event=None):
    from distributed import Event

    if not Event(event).wait(timeout=60):
        raise TimeoutError("never released")
    return block


def test_worker_killed_mid_run_is_an_error_row_and_the_sweep_goes_on(local_cluster, tmp_path):
    import dask.array as da
    from distributed import Event

    client = local_cluster.start()
    release = f"release-{uuid.uuid4().hex[:8]}"
    array = da.ones((8, 4), chunks=(1, 4)).map_blocks(_wait_for_release, event=release, meta=np.array((), dtype=float))
    src = throughput.Source(name="held", format="synthetic", url="synthetic://held", variable="t", array=array)
    killed: list[str] = []

    def kill_one_worker_mid_run():
        # the run has started once tasks are processing on the workers
        busy = wait_until(lambda: [w for w, keys in client.processing().items() if keys], 60, "tasks running")
        victim = busy[0]
        pid = client.run(os.getpid, workers=[victim])[victim]
        os.kill(pid, signal.SIGKILL)
        killed.append(victim)
        wait_until(lambda: victim not in client.nthreads(), 60, "scheduler noticing the dead worker")
        Event(release, client=client).set()

    def on_start(n, r):
        if r == 0:
            threading.Thread(target=kill_one_worker_mid_run, daemon=True).start()

    path = tmp_path / "killed.csv"
    with ResultsFile(path) as results:
        records = run_sweep(src, local_cluster, [2], repeats=2, results=results, on_start=on_start, warmup=False)
    assert [r.status for r in records] == ["error", "ok"]
    assert killed and killed[0] in records[0].error and "left during the run" in records[0].error
    assert records[0].nworkers == 2 and records[1].nworkers == 2  # the lost worker was replaced
    assert records[1].bytes_received == src.nbytes
    rows = read_rows(path)
    assert [row["status"] for row in rows] == ["error", "ok"] and rows[0]["runtime"] == "nan"


# --- a store of our own, with distinctive credentials, that the tests may stop -----------------

OWN_KEY = "TPKEYQ7Z3W9X"
OWN_SECRET = "tp-secret-5ff1a9c2e7d4b6"


@pytest.fixture(scope="module")
def own_store(small_dataset):
    """A SeaweedFS that needs credentials (no anonymous reads), with a distinctive secret."""
    server = SeaweedS3(anonymous_read=False)
    server.access_key, server.secret_key = OWN_KEY, OWN_SECRET
    with server:
        server.make_bucket("own-store")
        url = write_zarr(small_dataset, "s3://own-store/ocean.zarr", server.storage_options)
        yield server, url


def test_secrets_never_reach_any_output(own_store, tmp_path, capfd):
    server, url = own_store
    out = tmp_path / "out"
    code = main(["sweep", url, "-v", "temp", "-w", "1", "-r", "1", "-o", str(out),
                 "-s", f"key={OWN_KEY}", "-s", f"secret={OWN_SECRET}",
                 "-s", f"client_kwargs.endpoint_url={server.endpoint_url}"])
    first = capfd.readouterr()
    assert code == 0, first.err
    # credentials in the URL's userinfo and query string: refused, and not echoed
    code2 = main(["sweep", f"s3://{OWN_KEY}:{OWN_SECRET}@own-store/ocean.zarr?token={OWN_SECRET}",
                  "-o", str(out), "-s", f"client_kwargs.endpoint_url={server.endpoint_url}"])
    second = capfd.readouterr()
    assert code2 != 0 and second.err.count("\n") == 1
    files = [p for p in out.rglob("*") if p.is_file()]
    csvs = [p for p in files if p.suffix == ".csv"]
    assert len(csvs) == 1 and len(files) == 4  # the CSV and the three figures, nothing from the failed run
    rows = read_rows(csvs[0])
    assert rows[0]["status"] == "ok" and '"secret": "***"' in rows[0]["options"] and '"key": "***"' in rows[0]["options"]
    for text in (first.out, first.err, second.out, second.err, *(p.read_bytes().decode("latin-1") for p in files)):
        assert OWN_SECRET not in text and OWN_KEY not in text
    assert all(OWN_SECRET not in p.name and OWN_KEY not in p.name for p in files)


# --- 3. the store unreachable from the start, and going away mid-sweep -------------------------

def test_unreachable_store_from_the_start_is_one_line_naming_the_host(tmp_path, capfd):
    port = free_port()
    code = main(["sweep", "s3://nobucket/x.zarr", "-s", f"endpoint_url=http://127.0.0.1:{port}", "-s", "anon=true",
                 "-o", str(tmp_path)])
    err = capfd.readouterr().err
    assert code == 1
    expected = (f"throughput: error: Storage server 127.0.0.1:{port} did not answer (Connection refused) while "
                "opening 's3://nobucket/x.zarr'. Is the URL or endpoint_url right and the server up?")
    assert err.splitlines() == [expected]
    assert list(tmp_path.iterdir()) == []  # no empty results file left behind


def test_unreachable_store_cli_prints_no_traceback_at_exit(tmp_path):
    # a real interpreter exit: abandoned storage requests must not print tracebacks then
    port = free_port()
    done = subprocess.run([CLI, "sweep", "s3://nobucket/x.zarr",
                           "-s", f"endpoint_url=http://127.0.0.1:{port}", "-s", "anon=true", "-o", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr and f"127.0.0.1:{port}" in done.stderr


def test_store_going_away_mid_sweep_keeps_rows_and_names_the_host(own_store, local_cluster, tmp_path):
    """Runs last in this module: it stops the module's own store."""
    server, url = own_store
    src = throughput.open_source(url, "temp", storage_options=server.storage_options, name="vanishing")
    path = tmp_path / "vanishing.csv"
    records = []
    host = f"127.0.0.1:{server.port}"
    with ResultsFile(path) as results:
        runs = sweep(src, local_cluster, [1], repeats=20, retries=0)
        with pytest.raises(StorageUnreachableError) as caught:
            for record in runs:
                results.append(record)
                records.append(record)
                if len(records) == 2:
                    server.stop()  # the store goes away after two rows
    assert [r.status for r in records] == ["ok", "ok", "error"]
    assert host in records[2].error
    message = str(caught.value)
    assert f"Storage server {host} stopped answering" in message and "\n" not in message
    assert OWN_SECRET not in message and OWN_SECRET not in path.read_text()
    assert [row["status"] for row in read_rows(path)] == ["ok", "ok", "error"]


# --- 4. SIGINT and SIGTERM -----------------------------------------------------------------------

def _descendants(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


def _interrupt(args: list[str], out: Path, signum: int, env: dict | None = None, timeout: float = 120):
    """Start the CLI, wait for its first row, send ``signum``; return (exit code, stderr, leftovers, rows)."""
    proc = subprocess.Popen([CLI, *args, "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})}, start_new_session=True)
    try:
        def first_row():
            if proc.poll() is not None:
                return "exited"
            files = list(out.glob("*.csv"))
            return files if files and files[0].read_text().count("\n") >= 2 else None

        found = wait_until(first_row, timeout, "the first row")
        assert found != "exited", proc.communicate()
        csv_path = found[0]
        started = _descendants(proc.pid)
        names = [p.name() for p in started]
        os.kill(proc.pid, signum)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    _, alive = psutil.wait_procs(started, timeout=15)
    leftovers = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    for p in leftovers:
        p.kill()
    return proc.returncode, err, names, leftovers, read_rows(csv_path)


def test_sigint_mid_sweep_closes_the_cluster_and_keeps_whole_rows(seaweed, s3_zarr, tmp_path):
    code, err, started, leftovers, rows = _interrupt(
        ["sweep", s3_zarr[2], "-v", "temp", "-w", "2,1", "-r", "500", "--no-plot",
         "-s", f"key={seaweed.access_key}", "-s", f"secret={seaweed.secret_key}",
         "-s", f"client_kwargs.endpoint_url={seaweed.endpoint_url}"], tmp_path, signal.SIGINT)
    assert code == 130, err
    assert "interrupted" in err.splitlines()[-1] and "Traceback" not in err
    assert len(started) >= 2  # the LocalCluster's worker processes were running
    assert leftovers == []
    assert rows and all(row["status"] == "ok" for row in rows)


def test_sigterm_mid_demo_stops_the_cluster_and_the_store(tmp_path):
    code, err, started, leftovers, rows = _interrupt(
        ["demo", "-w", "1", "-r", "500"], tmp_path, signal.SIGTERM,
        env={"DASK_THROUGHPUT__DEMO__SHAPE": "[2, 10, 27, 36]"})
    assert code == 143, err
    assert "interrupted" in err.splitlines()[-1] and "Traceback" not in err
    names = started
    assert any("weed" in n for n in names), names  # the demo's own object store was running ...
    assert leftovers == []  # ... and is gone, with every dask process
    assert rows and all(row["status"] == "ok" and int(row["bytes_received"]) == 2 * 10 * 27 * 36 * 4 for row in rows)


# --- 6. results folder not writable, disk full ---------------------------------------------------

@pytest.fixture()
def tiny_mount(tmp_path):
    """A 64 kB tmpfs (root only); skipped where mounting is not allowed."""
    target = tmp_path / "mnt"
    target.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(target)], capture_output=True,
                          check=False)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], check=False)


def _full(mount: Path) -> Path:
    with open(mount / "filler", "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
                f.flush()
        except OSError:
            pass
    return mount / "results"


def _read_only(mount: Path) -> Path:
    subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
    return mount / "results"


def _dev_full(mount: Path) -> Path:
    (mount / "results").mkdir()
    (mount / "results" / "out.csv").symlink_to("/dev/full")
    return mount / "results" / "out.csv"


@pytest.mark.parametrize("make, reason", [
    (_full, "No space left on device"),
    (_read_only, "Read-only file system"),
    (_dev_full, "No space left on device"),
], ids=["disk-full", "read-only", "dev-full"])
def test_unwritable_results_found_before_any_run(make, reason, tiny_mount, seaweed, s3_zarr, capfd):
    out = make(tiny_mount)
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    with FaultyProxy(seaweed.endpoint_url) as proxy:
        code = main(["sweep", s3_zarr[2], "-v", "temp", "-w", "1", "-r", "1", "-o", str(out),
                     "-s", f"client_kwargs.endpoint_url={proxy.endpoint_url}"])
    err = capfd.readouterr().err
    assert code == 1
    folder = out.parent if out.suffix == ".csv" else out
    assert len(err.splitlines()) == 1 and f"in folder '{folder}'" in err and reason in err, err
    assert proxy.requests == 0  # no data read: found before the source was opened
    assert {p.pid for p in me.children(recursive=True)} == before  # no cluster started
