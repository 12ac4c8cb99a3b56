"""A dask-jobqueue cluster (SLURM, PBS, SGE, LSF, HTCondor, ...) on an HPC login node.

The scheduler runs here; each worker is a batch job that dask-jobqueue submits
(``sbatch``, ``qsub`` ...). Scaling to N workers asks for ``ceil(N / processes)``
jobs, and the time the queue takes to start them is the point's ``scale_seconds``.
"""

from __future__ import annotations

import math
import shutil
from typing import Any

from distributed import Client

from .. import config
from ..errors import ClusterError, UsageError, missing_dependency
from . import Cluster

try:
    import dask_jobqueue
    import dask_jobqueue.local
except ImportError:
    raise missing_dependency("dask-jobqueue", "'jobqueue' clusters", "jobqueue") from None

#: the cluster classes of dask-jobqueue, by name; its LocalCluster runs each "job" as a local
#: process through the same job-script machinery (dask-jobqueue's own tests use it)
JOBQUEUE_CLASSES = {name: dask_jobqueue for name in (
    "SLURMCluster", "PBSCluster", "SGECluster", "LSFCluster", "HTCondorCluster", "MoabCluster", "OARCluster")}
JOBQUEUE_CLASSES["LocalCluster"] = dask_jobqueue.local

#: options that dask-jobqueue takes as lists; on the command line, items are separated by ";"
LIST_OPTIONS = ("job_extra_directives", "job_directives_skip", "job_script_prologue", "worker_extra_args")


class JobqueueProvider(Cluster):
    """A ``dask_jobqueue`` cluster; every job it submitted is cancelled on close.

    Parameters
    ----------
    cluster_class
        ``SLURMCluster``, ``PBSCluster``, ... (or ``slurm``, ``pbs``, ...); also
        accepted as the option ``class``. Default: ``throughput.cluster.jobqueue.class``.
    wait_timeout
        Seconds to wait for the queue to start the workers of a point.
    **options
        Keyword arguments of the class: ``cores``, ``memory``, ``processes``,
        ``queue``, ``account``, ``walltime``, ``job_extra_directives`` ...; merged
        over ``throughput.cluster.jobqueue.options`` (and dask-jobqueue's own
        ``jobqueue.<scheduler>.*`` settings fill in the rest).
    """

    kind = "jobqueue"

    def __init__(self, cluster_class: str | None = None, *, wait_timeout: float | None = None, **options: Any):
        if "threads_per_worker" in options:
            raise UsageError("threads_per_worker is cores / processes on 'jobqueue' clusters: "
                             "give cores=... and processes=... instead.")
        super().__init__(wait_timeout=wait_timeout)
        name = cluster_class or options.pop("class", None) or config.get("cluster.jobqueue.class")
        self.cluster_class = _resolve_class(name)
        self.class_options = {**(config.get("cluster.jobqueue.options") or {}), **options}
        for key in LIST_OPTIONS:
            if isinstance(self.class_options.get(key), str):
                self.class_options[key] = [s.strip() for s in self.class_options[key].split(";") if s.strip()]
        self._cluster: dask_jobqueue.JobQueueCluster | None = None

    @property
    def submit_command(self) -> str:
        """The batch command that starts a job (``sbatch``, ``qsub`` ...)."""
        return str(getattr(self.cluster_class.job_cls, "submit_command", None) or "")

    def job_script(self) -> str:
        """The batch script one worker job would be submitted with (no job is submitted)."""
        return self._make_cluster().job_script()

    def _make_cluster(self) -> dask_jobqueue.JobQueueCluster:
        if self._cluster is None:
            try:
                self._cluster = self.cluster_class(**self.class_options)
            except (TypeError, ValueError) as exc:
                detail = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
                raise UsageError(f"Bad options for {self.cluster_class.__name__}: {detail}") from None
        return self._cluster

    def _start(self) -> Client:
        command = self.submit_command.split()[:1]
        if command and self.cluster_class.__name__ != "LocalCluster" and not shutil.which(command[0]):
            raise ClusterError(f"{self.cluster_class.__name__} submits jobs with '{command[0]}', which is not on "
                               "PATH here: run throughput on a login node of the batch system.")
        return Client(self._make_cluster(), set_as_default=False)

    @property
    def processes(self) -> int:
        """Worker processes per job."""
        return int(self._make_cluster()._dummy_job.worker_processes)

    def scale(self, n: int) -> None:
        self.start()
        self._cluster.scale(n)  # ceil(n / processes) jobs

    def wait_for_workers(self, n: int, timeout: float) -> int:
        """Wait for every worker of the jobs that ``n`` workers need (runs then use ``n`` of them)."""
        expected = math.ceil(n / self.processes) * self.processes
        return self._wait_for(lambda count: count == expected, timeout)

    def close(self) -> None:
        try:
            super().close()
        finally:
            cluster, self._cluster = self._cluster, None
            if cluster is not None:
                cluster.close()


def _resolve_class(name: Any) -> type:
    if not name:
        raise UsageError(f"No jobqueue class: give class=SLURMCluster (--cluster-option class=...); "
                         f"one of {list(JOBQUEUE_CLASSES)}.")
    wanted = str(name).lower().removesuffix("cluster")
    for candidate, module in JOBQUEUE_CLASSES.items():
        if candidate.lower().removesuffix("cluster") == wanted:
            return getattr(module, candidate)
    raise UsageError(f"Unknown jobqueue class '{name}'. Must be one of {list(JOBQUEUE_CLASSES)}.")
