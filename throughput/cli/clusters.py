"""``throughput job-script``: the batch script a ``--cluster jobqueue`` sweep would submit."""

from __future__ import annotations

import click

from . import cli
from .common import parse_options


@cli.command("job-script")
@click.option("--cluster-option", multiple=True, metavar="KEY=VALUE",
              help="jobqueue option (repeatable): class=SLURMCluster, cores=4, memory=16GB, queue=..., "
                   "account=..., walltime=01:00:00, job_extra_directives='--a;--b'.")
def job_script(cluster_option):
    """Print the job script of one worker job for a jobqueue cluster; submits nothing."""
    from ..clusters import open_cluster

    options = parse_options(cluster_option, "--cluster-option")
    provider = open_cluster("jobqueue", **options)
    try:
        click.echo(provider.job_script())
    finally:
        provider.close()
