"""``throughput sweep`` and ``throughput demo``: measure, write rows, draw figures."""

from __future__ import annotations

from pathlib import Path

import click

from . import cli
from .common import (
    BLOCKS_PER_TASK,
    err_console,
    execute_sweep,
    open_results,
    parse_options,
    parse_workers,
    show_records,
)


@cli.command()
@click.argument("url")
@click.option("--variable", "-v", help="Array to read (default: the only data array).")
@click.option("--format", "format_", help="Source format (default: guessed from the URL).")
@click.option("--name", help="Source name in the records (default: last part of the URL).")
@click.option("--workers", "-w", default="1,2", show_default=True, help="Worker counts, comma-separated, any order.")
@click.option("--repeats", "-r", default=3, show_default=True, type=int, help="Timed runs per worker count.")
@click.option("--threads-per-worker", type=click.IntRange(1, 1024), help="Threads per worker (local clusters).")
@click.option("--cluster", "cluster_kind", help="Cluster kind: local (default), gateway, jobqueue, address.")
@click.option("--cluster-option", multiple=True, metavar="KEY=VALUE",
              help="Option for the cluster (repeatable): address=..., auth=basic, class=SLURMCluster, cores=4, "
                   "wait_timeout=60 ... (see README).")
@click.option("--storage-option", "-s", multiple=True, metavar="KEY=VALUE", help="Passed to fsspec (repeatable; dotted keys nest).")
@click.option("--option", "-O", "source_option", multiple=True, metavar="KEY=VALUE",
              help="Option of the source kind (repeatable; dotted keys nest), e.g. open_options.cache_type=none.")
@click.option("--cloud", default="", help="Storage provider label for the records.")
@click.option("--region", default="", help="Storage region label for the records.")
@click.option("--out", "-o", default="results", show_default=True, help="Folder (or .csv file) for the results.")
@click.option("--plot/--no-plot", default=True, show_default=True, help="Save the seed's three figures next to the CSV.")
@click.option("--blocks-per-task", type=BLOCKS_PER_TASK, default=None,
              help="Chunks stored per task, or auto (default: 1, the seed's way, up to 100 chunks a thread; grouped beyond).")
@click.option("--warmup/--no-warmup", default=None, help="Untimed read of one chunk per worker thread before each point (default on).")
def sweep(url, variable, format_, name, workers, repeats, threads_per_worker, cluster_kind, cluster_option,
          storage_option, source_option, cloud, region, out, plot, blocks_per_task, warmup):
    """Sweep a cluster over worker counts reading URL (or CATALOG:ENTRY) into a null sink; write CSV rows."""
    from ..catalog import resolve_entry, split_catalog_spec
    from ..clusters import open_cluster
    from ..sources import default_name, open_source
    from ..sweep import check_repeats, new_run_id

    # every usage error is found before any server is contacted or any file written
    counts, repeats = parse_workers(workers), check_repeats(repeats)
    storage_options = parse_options(storage_option)
    cluster_options = parse_options(cluster_option, "--cluster-option")
    if threads_per_worker:
        cluster_options["threads_per_worker"] = threads_per_worker
    source_options = parse_options(source_option, "--option")
    cluster = open_cluster(cluster_kind, **cluster_options)  # not started yet
    entry = None
    if url.lower().split("?")[0].endswith((".yaml", ".yml")) or split_catalog_spec(url):
        # CATALOG:ENTRY; the catalog's cloud/region labels fill what the command line left empty
        entry = resolve_entry(url)  # reads the catalog only: unknown entries are found here
        cloud, region = cloud or entry.cloud, region or entry.region
    run_id = new_run_id()
    with open_results(out, name or (entry.name if entry else default_name(url)), run_id) as results:
        if entry is not None:
            source = entry.open(variable, format=format_, storage_options=storage_options, name=name,
                                **source_options)
        else:
            source = open_source(url, variable, format=format_, storage_options=storage_options, name=name,
                                 **source_options)
        with cluster:
            path, records = execute_sweep([source], cluster, counts, repeats, out, {"cloud": cloud, "region": region},
                                          run_id=run_id, results=results, blocks_per_task=blocks_per_task,
                                          warmup=warmup)
    finish(path, records, plot)


@cli.command()
@click.option("--workers", "-w", default="1,2", show_default=True, help="Worker counts, comma-separated.")
@click.option("--repeats", "-r", default=3, show_default=True, type=int, help="Timed runs per worker count.")
@click.option("--out", "-o", default="results", show_default=True, help="Folder for the results and figures.")
@click.option("--sources", "source_names", default="", metavar="NAMES",
              help="Embedded sources to sweep, comma-separated, or 'all' "
                   "(default: local-s3-zarr,local-s3-netcdf; see throughput.embedded.EMBEDDED_SOURCES).")
@click.option("--opendap", is_flag=True, help="Also serve the array as NetCDF over OPeNDAP (pydap; slow).")
def demo(workers, repeats, out, source_names, opendap):
    """Run the main job on the embedded default: local servers, LocalCluster, no credentials."""
    from .. import config
    from ..clusters import open_cluster
    from ..datasets import DEFAULT_SHAPE
    from ..embedded import check_names, embedded_sources
    from ..sweep import check_repeats, new_run_id

    counts, repeats = parse_workers(workers), check_repeats(repeats)
    names = check_names([n.strip() for n in source_names.split(",") if n.strip()])
    run_id = new_run_id()
    status = lambda m: err_console.print(f"[dim]{m}[/dim]")
    shape = tuple(config.get("demo.shape", None) or DEFAULT_SHAPE)  # smaller for quick checks
    with (open_results(out, "demo", run_id) as results,
          embedded_sources(shape, status=status, sources=names, opendap=opendap) as sources,
          open_cluster("local") as cluster):
        path, records = execute_sweep(list(sources.values()), cluster, counts, repeats, out,
                                      {"cloud": "local", "region": "127.0.0.1"}, run_id=run_id, results=results)
    finish(path, records, plot=True)


def finish(path: Path, records: list, plot: bool) -> None:
    """Print the table, draw the figures, and fail the exit code if every run failed."""
    show_records(records)
    if plot and any(r.status == "ok" for r in records):
        from ..report import load_results, scaling_figures

        for figure in scaling_figures(load_results(path), path.parent, stem=path.stem):
            err_console.print(f"figure: {figure}")
    failed = sum(r.status != "ok" for r in records)
    if failed:
        err_console.print(f"{failed} of {len(records)} run(s) failed; see the 'error' column of {path}")
        if failed == len(records):
            raise SystemExit(1)
