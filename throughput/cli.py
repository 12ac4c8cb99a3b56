"""The ``throughput`` command line.

Errors become one line on stderr and an exit code (2: usage, 1: runtime failure,
130/143: interrupted); ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import click
import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .errors import ThroughputError, UsageError
from .redact import redact_text

err_console = Console(stderr=True, highlight=False)
out_console = Console(highlight=False)


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived; unwinds like KeyboardInterrupt so every context manager closes."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.exit_code = 128 + signum


def _raise_interrupted(signum, frame):
    raise Interrupted(signum)


# ---------------------------------------------------------------- option parsing

def parse_workers(text: str) -> list[int]:
    """``"4,1,2"`` -> ``[4, 1, 2]``; anything else is a usage error naming the bad part."""
    parts = [p.strip() for p in str(text).split(",")]
    counts = []
    for part in parts:
        if not part.isdigit() or int(part) < 1:
            raise UsageError(f"Bad worker count '{part}' in --workers '{text}': give positive integers separated by commas, like 1,2,4.")
        counts.append(int(part))
    return counts


def parse_options(pairs: tuple[str, ...], flag: str = "--storage-option") -> dict[str, Any]:
    """``key=value`` pairs (values read as YAML scalars; dotted keys nest) -> a dict."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"Bad {flag} '{redact_text(pair.split('=')[0])}=...': write it as key=value, like anon=true or endpoint_url=https://host.")
        try:
            parsed = yaml.safe_load(value) if value else ""
        except yaml.YAMLError:
            parsed = value
        if not isinstance(parsed, (str, int, float, bool)) or parsed is None:
            parsed = value
        node = options
        *parents, leaf = key.strip().split(".")
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = parsed
    return options


# ---------------------------------------------------------------- shared display

def show_records(records, title: str = "Results") -> None:
    table = Table(title=title)
    for column in ("source", "nworkers", "nthreads", "repeat", "runtime (s)", "MB/s", "MB/s/thread", "status"):
        table.add_column(column, justify="right" if column not in ("source", "status") else "left")
    for r in records:
        ok = r.status == "ok"
        table.add_row(r.source, str(r.nworkers), str(r.nthreads), str(r.repeat),
                      f"{r.runtime:.3f}" if ok else "-", f"{r.throughput_MBps:.1f}" if ok else "-",
                      f"{r.throughput_MBps_per_thread:.1f}" if ok else "-",
                      "ok" if ok else f"error: {r.error}"[:60])
    out_console.print(table)


def execute_sweep(sources, cluster, workers, repeats, out, labels=None, run_id=None) -> tuple[Path, list]:
    """Sweep each source on the cluster, with a progress bar; rows go to one CSV as they end."""
    from .archive import ResultsFile, results_path
    from .sweep import check_repeats, check_workers, new_run_id, sweep

    workers, repeats = check_workers(workers), check_repeats(repeats)
    run_id = run_id or new_run_id()
    label = sources[0].name if len(sources) == 1 else "multi"
    path = results_path(out, run_id, label)
    records = []
    with ResultsFile(path) as results:
        err_console.print(f"results: {path}")
        total = len(sources) * len(workers) * repeats
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        try:
            with Progress(*columns, console=err_console) as progress:
                task = progress.add_task("sweep", total=total)
                for source in sources:
                    def started(n, r, source=source):
                        progress.update(task, description=f"{source.name}: {n} workers, repeat {r + 1}/{repeats}")
                    for record in sweep(source, cluster, workers, repeats, labels=labels, run_id=run_id, on_start=started):
                        results.append(record)
                        records.append(record)
                        progress.advance(task)
        finally:
            if records:
                err_console.print(f"{len(records)} row(s) in {path}")
    return path, records


# ---------------------------------------------------------------- commands

@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.version_option(package_name="throughput")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Measure how fast big arrays read from storage with Dask, and how it scales."""
    ctx.obj = {"debug": debug}


@cli.command()
@click.argument("url")
@click.option("--variable", "-v", help="Array to read (default: the only data array).")
@click.option("--format", "format_", help="Source format (default: guessed from the URL).")
@click.option("--name", help="Source name in the records (default: last part of the URL).")
@click.option("--workers", "-w", default="1,2", show_default=True, help="Worker counts, comma-separated, any order.")
@click.option("--repeats", "-r", default=3, show_default=True, type=int, help="Timed runs per worker count.")
@click.option("--threads-per-worker", type=click.IntRange(1, 1024), help="Threads per worker (local clusters).")
@click.option("--cluster", "cluster_kind", help="Cluster kind: local (default), gateway, jobqueue, address.")
@click.option("--cluster-option", multiple=True, metavar="KEY=VALUE", help="Option for the cluster (repeatable).")
@click.option("--storage-option", "-s", multiple=True, metavar="KEY=VALUE", help="Passed to fsspec (repeatable; dotted keys nest).")
@click.option("--cloud", default="", help="Storage provider label for the records.")
@click.option("--region", default="", help="Storage region label for the records.")
@click.option("--out", "-o", default="results", show_default=True, help="Folder (or .csv file) for the results.")
@click.option("--plot/--no-plot", default=True, show_default=True, help="Save the seed's three figures next to the CSV.")
def sweep(url, variable, format_, name, workers, repeats, threads_per_worker, cluster_kind, cluster_option,
          storage_option, cloud, region, out, plot):
    """Sweep a cluster over worker counts reading URL into a null sink; write CSV rows."""
    from .clusters import open_cluster
    from .sources import open_source

    counts = parse_workers(workers)
    storage_options = parse_options(storage_option)
    cluster_options = parse_options(cluster_option, "--cluster-option")
    if threads_per_worker:
        cluster_options["threads_per_worker"] = threads_per_worker
    source = open_source(url, variable, format=format_, storage_options=storage_options, name=name)
    with open_cluster(cluster_kind, **cluster_options) as cluster:
        path, records = execute_sweep([source], cluster, counts, repeats, out, {"cloud": cloud, "region": region})
    finish(path, records, plot)


@cli.command()
@click.option("--workers", "-w", default="1,2", show_default=True, help="Worker counts, comma-separated.")
@click.option("--repeats", "-r", default=3, show_default=True, type=int, help="Timed runs per worker count.")
@click.option("--out", "-o", default="results", show_default=True, help="Folder for the results and figures.")
def demo(workers, repeats, out):
    """Run the main job on the embedded default: local S3 server, LocalCluster, no credentials."""
    from .clusters import open_cluster
    from .embedded import embedded_sources

    counts = parse_workers(workers)
    with embedded_sources(status=lambda m: err_console.print(f"[dim]{m}[/dim]")) as sources:
        with open_cluster("local") as cluster:
            path, records = execute_sweep(list(sources.values()), cluster, counts, repeats, out,
                                          {"cloud": "local", "region": "127.0.0.1"})
    finish(path, records, plot=True)


def finish(path: Path, records: list, plot: bool) -> None:
    """Print the table, draw the figures, and fail the exit code if every run failed."""
    show_records(records)
    if plot and any(r.status == "ok" for r in records):
        from .report import load_results, scaling_figures

        for figure in scaling_figures(load_results(path), path.parent, stem=path.stem):
            err_console.print(f"figure: {figure}")
    failed = sum(r.status != "ok" for r in records)
    if failed:
        err_console.print(f"{failed} of {len(records)} run(s) failed; see the 'error' column of {path}")
        if failed == len(records):
            raise SystemExit(1)


# ---------------------------------------------------------------- entry point

def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code (also used as the console script)."""
    argv = sys.argv[1:] if argv is None else argv
    debug = "--debug" in argv
    previous = signal.signal(signal.SIGTERM, _raise_interrupted)
    try:
        cli.main(args=argv, prog_name="throughput", standalone_mode=False)
        return 0
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        err_console.print(f"throughput: error: {redact_text(exc.format_message())}", markup=False)
        return 2
    except (KeyboardInterrupt, click.exceptions.Abort, Interrupted) as exc:
        err_console.print("throughput: interrupted; every finished row is in the results file", markup=False)
        return getattr(exc, "exit_code", 130)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    except ThroughputError as exc:
        if debug:
            raise
        err_console.print(f"throughput: error: {redact_text(str(exc))}", markup=False)
        return exc.exit_code
    except Exception as exc:
        if debug:
            raise
        from .sweep import one_line

        err_console.print(f"throughput: error: {one_line(exc)} (run with --debug for the traceback)", markup=False)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)


def console_main() -> None:
    sys.exit(main())


if __name__ == "__main__":
    console_main()
