"""Cluster kinds in the scaling loop, on real servers: dask-gateway-server, a `dask scheduler`
with `dask worker` processes, dask-jobqueue (job scripts, and its local-process jobs), a
caller's own Client/cluster; and everything throughput created is closed on every path."""

from __future__ import annotations

import csv
import os
import sys
from pathlib import Path

import numpy as np
import psutil
import pytest
from distributed import Client, LocalCluster

import throughput
from throughput.cli import main
from throughput.clusters import from_client, open_cluster
from throughput.errors import ClusterError, MissingDependencyError, UsageError
from throughput.servers import free_port, wait_until
from throughput.servers.gateway import CONFIG as GATEWAY_CONFIG
from throughput.servers.gateway import GatewayServer
from throughput.servers.scheduler import SchedulerProcesses
from throughput.sink import received
from throughput.sweep import run_sweep

from .conftest import SMALL_SHAPE

NBYTES = int(np.prod(SMALL_SHAPE)) * 4
SYNTHETIC = "synthetic://temp?shape=8,10,27,36&chunks=1,5,27,36"
SYNTHETIC_BYTES = 8 * 10 * 27 * 36 * 4


class Interrupt:
    """An ``on_start`` callback that presses Ctrl-C before run number ``at`` (and notes the workers)."""

    def __init__(self, cluster, at: int = 1):
        self.cluster, self.at, self.calls, self.pids = cluster, at, 0, {}

    def __call__(self, n, r):
        self.calls += 1
        self.pids = self.cluster.client.run(os.getpid)
        if self.calls >= self.at:
            raise KeyboardInterrupt


@pytest.fixture(scope="module")
def gateway_server():
    with GatewayServer() as server:
        yield server


@pytest.fixture(scope="module")
def scheduler():
    """A `dask scheduler` and two single-thread `dask worker` processes, started here."""
    with SchedulerProcesses(n_workers=2, nthreads=1) as processes:
        yield processes


def no_active_clusters(server) -> bool:
    return server.clusters() == {}


def clients_left(scheduler, expected=()) -> None:
    """The scheduler drops a closed client when its connection ends: poll for it, with a timeout."""
    wait_until(lambda: scheduler.clients() == sorted(expected), 30, f"scheduler clients == {list(expected)}")


# ---------------------------------------------------------------- dask-gateway


def test_gateway_new_cluster_scales_and_sweeps_zarr(gateway_server, seaweed, s3_zarr, tmp_path, capsys):
    """From the command line: a new gateway cluster, 1 then 2 workers, the Zarr on S3, shut down."""
    storage = [f"--storage-option=key={seaweed.access_key}", f"--storage-option=secret={seaweed.secret_key}",
               f"--storage-option=client_kwargs.endpoint_url={seaweed.endpoint_url}"]
    code = main(["sweep", s3_zarr[2], "-v", "temp", *storage, "--cluster", "gateway",
                 "--cluster-option", f"address={gateway_server.address}", "--cluster-option", "auth=basic",
                 "--cluster-option", "username=throughput", "--cluster-option", "worker_threads=2",
                 "-w", "1,2", "-r", "1", "--no-plot", "-o", str(tmp_path)])
    assert code == 0, capsys.readouterr().err
    (path,) = tmp_path.glob("*.csv")
    rows = list(csv.DictReader(path.open()))
    # worker_threads=2 is a cluster option of this gateway: it reached the workers
    assert [(r["requested_workers"], r["nworkers"], r["nthreads"]) for r in rows] == [("1", "1", "2"), ("2", "2", "4")]
    for r in rows:
        assert r["status"] == "ok", r["error"]
        assert r["cluster"] == "gateway" and r["note"] == "" and r["format"] == "zarr"
        assert int(r["bytes_received"]) == NBYTES == int(r["nbytes"])
        assert float(r["scale_seconds"]) > 0 and float(r["runtime"]) > 0
    assert seaweed.secret_key not in path.read_text()
    assert gateway_server.clusters(status="pending,running") == {}  # shut down on the gateway


def test_gateway_worker_limit_is_noted_and_ctrl_c_shuts_down(gateway_server):
    src = throughput.open_source(SYNTHETIC)
    provider = open_cluster("gateway", **gateway_server.cluster_options, max_workers=1, wait_timeout=300)
    interrupt = Interrupt(provider)
    with pytest.raises(KeyboardInterrupt), provider as cluster:
        name = cluster.cluster_name
        assert gateway_server.clusters(status="pending,running") == {name: "running"}
        # this cluster may have 1 worker: the point runs with 1, says why, and does not wait 300 s
        (row,) = run_sweep(src, cluster, [2], repeats=1)
        assert (row.requested_workers, row.nworkers, row.status) == (2, 1, "ok")
        assert row.note == ("the gateway allows 1 of 2 workers (Scale request of 2 workers would exceed "
                            "resource limit of 1 workers. Scaling to 1 instead.)")
        assert row.scale_seconds < 300 and row.bytes_received == SYNTHETIC_BYTES
        # Ctrl-C before the next run
        run_sweep(src, cluster, [1], repeats=1, on_start=interrupt)
    assert len(interrupt.pids) == 1 and provider.client is None
    assert name not in gateway_server.clusters(status="pending,running")
    # the gateway stops the scheduler and worker processes (after a few seconds' grace)
    wait_until(lambda: no_active_clusters(gateway_server), 60, "gateway clusters stopped")


def test_seed_notebook_gateway_client_is_swept_and_left_running(gateway_server):
    """The seed's way: gateway.new_cluster(), Client(cluster), then hand the client to throughput."""
    import dask_gateway

    from throughput.clusters.gateway import _forget_loop

    gateway = dask_gateway.Gateway(gateway_server.address, auth=dask_gateway.BasicAuth(username="throughput"))
    theirs = gateway.new_cluster()
    client = theirs.get_client(set_as_default=False)
    try:
        with from_client(client) as cluster:
            (row,) = run_sweep(throughput.open_source(SYNTHETIC), cluster, [1], repeats=1)
        assert (row.cluster, row.nworkers, row.status, row.bytes_received) == ("gateway", 1, "ok", SYNTHETIC_BYTES)
        assert client.status == "running"
        assert gateway_server.clusters(status="running") == {theirs.name: "running"}
    finally:
        client.close()
        theirs.shutdown()
        gateway.close()
        _forget_loop(gateway)
        _forget_loop(theirs.gateway)


def test_gateway_unreachable_is_one_clear_error():
    port = free_port()
    provider = open_cluster("gateway", address=f"http://127.0.0.1:{port}", auth="basic", password="SeCrEt-99")
    with pytest.raises(ClusterError) as info, provider:
        pass
    message = str(info.value)
    assert message.startswith(f"Could not start a dask-gateway cluster at http://127.0.0.1:{port}: ")
    assert "SeCrEt-99" not in message


def test_local_gateway_runs_this_venvs_dask():
    assert GatewayServer.executables()["dask"] == str(Path(sys.executable).parent / "dask")
    assert 'c.ClusterConfig.scheduler_cmd = [{dask!r}, "scheduler"]' in GATEWAY_CONFIG
    assert 'c.ClusterConfig.worker_cmd = [{dask!r}, "worker"]' in GATEWAY_CONFIG


def test_gateway_options_from_dask_config(gateway_server):
    import dask.config

    with dask.config.set({"gateway.address": gateway_server.address, "gateway.auth.type": "basic",
                          "throughput.cluster.gateway.cluster-options": {"worker_threads": 3}}):
        provider = open_cluster("gateway", username="throughput")
    assert provider.address == gateway_server.address and provider.cluster_options == {"worker_threads": 3}
    with pytest.raises(UsageError, match="No dask-gateway address"):
        open_cluster("gateway")


# ---------------------------------------------------------------- an existing scheduler address


def test_address_runs_on_n_of_the_workers_and_records_a_shortfall(scheduler):
    src = throughput.open_source(SYNTHETIC)
    with open_cluster("address", address=scheduler.address, wait_timeout=0.5) as cluster:
        (first,) = run_sweep(src, cluster, [1], repeats=1)
        used = cluster.workers_for(1)
        # the run was held to one worker: the other worker's sink received nothing
        sinks = cluster.client.run(received)
        assert [sinks[w]["bytes"] for w in sorted(sinks) if w not in used] == [0]
        more = run_sweep(src, cluster, [2, 3], repeats=1)
    rows = [first, *more]
    assert [(r.requested_workers, r.nworkers, r.nthreads) for r in rows] == [(1, 1, 1), (2, 2, 2), (3, 2, 2)]
    assert all(r.status == "ok" and r.bytes_received == SYNTHETIC_BYTES and r.cluster == "address" for r in rows)
    assert [r.note for r in rows] == ["", "", "only 2 of 3 workers arrived within 0.5 s"]
    assert rows[2].scale_seconds >= 0.5  # it waited the timeout for a third worker
    # ours is closed; the scheduler and its workers are untouched
    clients_left(scheduler)
    assert scheduler.worker_count() == 2


def test_address_client_is_closed_on_ctrl_c(scheduler):
    src = throughput.open_source(SYNTHETIC)
    with pytest.raises(KeyboardInterrupt), open_cluster("address", address=scheduler.address) as cluster:
        assert len(scheduler.clients()) == 1
        run_sweep(src, cluster, [2], repeats=1, on_start=Interrupt(cluster))
    clients_left(scheduler)
    assert scheduler.worker_count() == 2


def test_existing_client_is_used_and_left_open(scheduler):
    src = throughput.open_source(SYNTHETIC)
    with Client(scheduler.address, set_as_default=False) as mine:
        with from_client(mine) as cluster:
            records = run_sweep(src, cluster, [2, 1], repeats=1)
        assert [(r.nworkers, r.status, r.cluster) for r in records] == [(2, "ok", "address"), (1, "ok", "address")]
        assert mine.status == "running"
        clients_left(scheduler, [mine.id])


def test_existing_cluster_object_is_resized_and_left_running():
    # workers as threads of this process: they share one sink count, which must be counted once
    with LocalCluster(n_workers=0, processes=False, threads_per_worker=1, dashboard_address=":0") as mine:
        src = throughput.open_source(SYNTHETIC)
        with open_cluster(cluster=mine) as cluster:
            records = run_sweep(src, cluster, [2, 1], repeats=1)
            ours = cluster.client.id
        assert [(r.requested_workers, r.nworkers, r.cluster) for r in records] == [(2, 2, "local"), (1, 1, "local")]
        assert all(r.bytes_received == SYNTHETIC_BYTES and r.note == "" for r in records)
        assert mine.status.name == "running" and ours not in mine.scheduler.clients


# ---------------------------------------------------------------- LocalCluster: shortfall and Ctrl-C


def test_local_cluster_short_wait_and_ctrl_c():
    import dask.config

    src = throughput.open_source(SYNTHETIC)
    provider = open_cluster("local")
    interrupt = Interrupt(provider)
    no_dashboard_port = dask.config.set({"throughput.cluster.local.dashboard-address": ":0"})
    with pytest.raises(KeyboardInterrupt), no_dashboard_port, provider as cluster:
        run_sweep(src, cluster, [1], repeats=1, timeout=60)
        # new worker processes cannot start in 50 ms: the point runs on the one that was there
        (row,) = run_sweep(src, cluster, [3], repeats=1, timeout=0.05)
        assert row.requested_workers == 3 and row.status == "ok"
        assert row.nworkers < 3 and row.nthreads == row.nworkers
        assert row.note == f"only {row.nworkers} of 3 workers arrived within 0.05 s"
        assert row.bytes_received == SYNTHETIC_BYTES
        # Ctrl-C in the middle of the next sweep
        run_sweep(src, cluster, [2], repeats=1, on_start=interrupt)
    # a third worker still spawning from the scale(3) above may connect after the wait saw 2:
    # every worker seen at Ctrl-C (2 or 3) must be gone afterwards
    assert len(interrupt.pids) >= 2 and provider.client is None
    wait_until(lambda: not any(psutil.pid_exists(p) for p in interrupt.pids.values()), 30, "workers gone")


def test_wait_timeout_option_is_checked():
    with pytest.raises(UsageError, match=r"Bad wait_timeout 'soon': must be a positive number of seconds"):
        open_cluster("address", address="tcp://127.0.0.1:1", wait_timeout="soon")
    assert open_cluster("address", address="tcp://127.0.0.1:1", wait_timeout=7).wait_timeout == 7


# ---------------------------------------------------------------- dask-jobqueue


JOB_OPTIONS = {"cores": 4, "memory": "8GB", "processes": 2, "queue": "regular", "account": "proj42",
               "walltime": "10:30:00", "scheduler_options": {"dashboard_address": ":0"}}


def _worker_line(script: str) -> str:
    (line,) = [x for x in script.splitlines() if "distributed.cli.dask_worker" in x]
    return line


def test_slurm_job_script_from_our_options():
    provider = open_cluster("jobqueue", **{"class": "SLURMCluster"}, **JOB_OPTIONS,
                            job_extra_directives="--constraint=haswell;--exclusive")
    try:
        script = provider.job_script()
    finally:
        provider.close()
    lines = script.splitlines()
    for expected in ("#SBATCH -p regular", "#SBATCH -A proj42", "#SBATCH -n 1", "#SBATCH --cpus-per-task=4",
                     "#SBATCH --mem=8G", "#SBATCH -t 10:30:00", "#SBATCH --constraint=haswell",
                     "#SBATCH --exclusive"):
        assert expected in lines, script
    worker = _worker_line(script)
    assert worker.startswith(f"{sys.executable} -m distributed.cli.dask_worker tcp://")
    assert "--nthreads 2 --memory-limit 3.73GiB --nworkers 2 --nanny" in worker
    assert not any(line.startswith("#PBS") for line in lines)


def test_pbs_job_script_from_the_command_line(capsys):
    code = main(["job-script", "--cluster-option", "class=pbs", "--cluster-option", "cores=4",
                 "--cluster-option", "memory=8GB", "--cluster-option", "processes=1",
                 "--cluster-option", "queue=regular", "--cluster-option", "account=proj42",
                 "--cluster-option", "walltime=10:30:00", "--cluster-option", "job_extra_directives=-l place=scatter",
                 "--cluster-option", "scheduler_options.dashboard_address=:0"])
    script = capsys.readouterr().out
    assert code == 0
    lines = script.splitlines()
    for expected in ("#PBS -q regular", "#PBS -A proj42", "#PBS -l select=1:ncpus=4:mem=7630MB",
                     "#PBS -l walltime=10:30:00", "#PBS -l place=scatter"):
        assert expected in lines, script
    assert "--nthreads 4 --memory-limit 7.45GiB --nanny" in _worker_line(script)
    assert not any(line.startswith("#SBATCH") for line in lines)


def test_jobqueue_jobs_as_local_processes_in_the_sweep():
    """dask-jobqueue's LocalCluster runs each job script as a local process: the real scaling path.

    Two worker processes per job: one worker needs one job (two workers); runs use one of them.
    """
    src = throughput.open_source(SYNTHETIC)
    with open_cluster("jobqueue", cluster_class="LocalCluster", cores=2, memory="2GB", processes=2,
                      scheduler_options={"dashboard_address": ":0"}, wait_timeout=60) as cluster:
        (record,) = run_sweep(src, cluster, [1], repeats=1)
        assert len(cluster.present) == 2 and len(cluster.workers_for(1)) == 1
    assert (record.requested_workers, record.nworkers, record.nthreads) == (1, 1, 1)
    assert (record.cluster, record.status, record.note) == ("jobqueue", "ok", "")
    assert record.bytes_received == SYNTHETIC_BYTES


def test_jobqueue_without_its_batch_system_says_so():
    provider = open_cluster("jobqueue", cluster_class="slurm", cores=1, memory="1GB")
    with pytest.raises(ClusterError, match=r"^SLURMCluster submits jobs with 'sbatch', which is not on PATH here"):
        provider.start()
    assert provider.client is None
    with pytest.raises(UsageError, match=r"Unknown jobqueue class 'Nope'. Must be one of \['SLURMCluster'"):
        open_cluster("jobqueue", cluster_class="Nope")


# ---------------------------------------------------------------- the command line


def test_cli_address_sweep_records_shortfall(scheduler, tmp_path, capsys):
    code = main(["sweep", SYNTHETIC, "--cluster", "address", "--cluster-option", f"address={scheduler.address}",
                 "--cluster-option", "wait_timeout=0.5", "-w", "1,3", "-r", "1", "--no-plot", "-o", str(tmp_path)])
    assert code == 0, capsys.readouterr().err
    (path,) = tmp_path.glob("*.csv")
    rows = list(csv.DictReader(path.open()))
    assert [(r["requested_workers"], r["nworkers"], r["note"]) for r in rows] == [
        ("1", "1", ""), ("3", "2", "only 2 of 3 workers arrived within 0.5 s")]
    clients_left(scheduler)


@pytest.mark.parametrize("args, code, message", [
    (["--cluster", "bogus"], 2,
     "throughput: error: Unknown cluster kind 'bogus'. Must be one of ['address', 'client', 'gateway', 'jobqueue', 'local']."),
    (["--cluster", "address", "--threads-per-worker", "2", "--cluster-option", "address=tcp://127.0.0.1:1"], 2,
     ("throughput: error: Unknown option(s) ['threads_per_worker'] for 'address' clusters. "
      "Accepted: address, connect_timeout, wait_timeout.")),
    (["--cluster", "client"], 2,
     ("throughput: error: A 'client' cluster needs a distributed.Client or a cluster object: "
      "open_cluster(client=client) in Python; on the command line use --cluster address.")),
    (["--cluster", "jobqueue", "--cluster-option", "class=SLURMCluster", "--cluster-option", "cores=1",
      "--cluster-option", "memory=1GB"], 1,
     ("throughput: error: SLURMCluster submits jobs with 'sbatch', which is not on PATH here: "
      "run throughput on a login node of the batch system.")),
])
def test_cli_cluster_errors_are_one_line(args, code, message, tmp_path, capsys):
    assert main(["sweep", SYNTHETIC, *args, "-o", str(tmp_path)]) == code
    assert capsys.readouterr().err.strip() == message


def test_cli_missing_package_gives_install_hint(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "dask_gateway", None)  # as if dask-gateway were not installed
    monkeypatch.delitem(sys.modules, "throughput.clusters.gateway", raising=False)
    with pytest.raises(MissingDependencyError):
        open_cluster("gateway", address="http://127.0.0.1:1")
    assert main(["sweep", SYNTHETIC, "--cluster", "gateway", "-o", str(tmp_path)]) == 1
    assert capsys.readouterr().err.strip() == (
        "throughput: error: Missing package 'dask-gateway' required for 'gateway' clusters. "
        "Install it with: pip install dask-gateway  (or: pip install 'throughput[gateway]')")


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_local_workers_start_method_is_held_while_the_cluster_lives(method):
    import dask

    before = dask.config.get("distributed.worker.multiprocessing-method")
    with dask.config.set({"throughput.cluster.local.start-method": method}), open_cluster("local") as cluster:
        cluster.scale(2)
        assert cluster.wait_for_workers(2, 60) == 2
        parents = set(cluster.client.run(os.getppid).values())
        assert dask.config.get("distributed.worker.multiprocessing-method") == method
        # spawned workers are children of this process (their nanny's); forkserver's are the fork server's
        assert (parents == {os.getpid()}) is (method == "spawn"), parents
    assert dask.config.get("distributed.worker.multiprocessing-method") == before


def test_bad_start_method_is_named():
    import dask

    with dask.config.set({"throughput.cluster.local.start-method": "forksrv"}), \
            pytest.raises(UsageError, match="Bad throughput.cluster.local.start-method 'forksrv': must be forkserver, "
                                            "spawn, fork or null"):
        open_cluster("local").start()
