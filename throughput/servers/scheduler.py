"""A Dask scheduler and workers as separate processes on 127.0.0.1 (``dask scheduler`` / ``dask worker``).

Stands in for "a cluster someone else runs" in the tests of ``--cluster address``:
throughput only gets its address.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Self

from ..errors import MissingDependencyError
from . import free_port, port_open, wait_until


class SchedulerProcesses:
    """``dask scheduler`` plus ``n_workers`` ``dask worker`` processes; a context manager.

    Parameters
    ----------
    n_workers
        Worker processes to start (more can be added with :meth:`add_worker`).
    nthreads
        Threads per worker.
    start_timeout
        Seconds to wait for the scheduler and for all workers to connect.
    """

    def __init__(self, n_workers: int = 2, nthreads: int = 1, start_timeout: float = 60) -> None:
        self.n_workers = n_workers
        self.nthreads = nthreads
        self.start_timeout = start_timeout
        self.port = 0
        self.processes: list[subprocess.Popen] = []
        self.workdir: Path | None = None

    @property
    def address(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    @staticmethod
    def dask_program() -> str:
        path = Path(sys.executable).parent / "dask"
        found = str(path) if path.exists() else shutil.which("dask")
        if not found:
            raise MissingDependencyError("Missing program 'dask' required to start a scheduler. "
                                         "Install it with: pip install distributed")
        return found

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        with open(self.workdir / f"{name}.log", "wb") as log:
            process = subprocess.Popen([self.dask_program(), *args], cwd=self.workdir, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        self.processes.append(process)
        return process

    def start(self) -> Self:
        self.workdir = Path(tempfile.mkdtemp(prefix="throughput-scheduler-"))
        self.port = free_port()
        try:
            scheduler = self._spawn("scheduler", ["scheduler", "--host", "127.0.0.1", "--port", str(self.port),
                                                  "--dashboard-address", "127.0.0.1:0", "--no-show"])

            def listening() -> bool:
                if scheduler.poll() is not None:
                    raise RuntimeError(f"dask scheduler exited with code {scheduler.returncode}")
                return port_open(self.port)

            wait_until(listening, self.start_timeout, f"dask scheduler on port {self.port}")
            for _ in range(self.n_workers):
                self.add_worker(wait=False)
            self.wait_for_workers(self.n_workers)
        except BaseException:
            self.stop()
            raise
        return self

    def add_worker(self, wait: bool = True) -> subprocess.Popen:
        """Start one more ``dask worker`` (no nanny: one process per worker)."""
        process = self._spawn(f"worker-{len(self.processes)}", [
            "worker", self.address, "--host", "127.0.0.1", "--nthreads", str(self.nthreads), "--no-nanny",
            "--dashboard-address", "127.0.0.1:0", "--memory-limit", "1GiB"])
        if wait:
            self.wait_for_workers(len(self.processes) - 1)
        return process

    def worker_count(self) -> int:
        """Workers connected to the scheduler now (asked through a short-lived client)."""
        from distributed import Client

        with Client(self.address, timeout=10, set_as_default=False) as client:
            return len(client.nthreads())

    def wait_for_workers(self, n: int) -> None:
        wait_until(lambda: self.worker_count() == n, self.start_timeout, f"{n} dask workers at {self.address}")

    def clients(self) -> list[str]:
        """Ids of the clients connected to the scheduler now, other than the one asking."""
        from distributed import Client

        with Client(self.address, timeout=10, set_as_default=False) as client:
            ids = client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.clients))
            return sorted(i for i in ids if i != client.id and i != "fire-and-forget")

    def stop(self, timeout: float = 5) -> None:
        """SIGTERM the workers, then the scheduler; SIGKILL what has not exited after ``timeout`` seconds."""
        workers, scheduler = self.processes[1:], self.processes[:1]
        for group in (workers, scheduler):  # workers first, so none waits on a scheduler that is gone
            for process in group:
                _signal(process, signal.SIGTERM)
            for process in group:
                try:
                    process.wait(timeout)
                except subprocess.TimeoutExpired:
                    _signal(process, signal.SIGKILL)
                    process.wait(5)
        self.processes = []
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _signal(process: subprocess.Popen, signum: int) -> None:
    if process.poll() is None:
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:
            pass
