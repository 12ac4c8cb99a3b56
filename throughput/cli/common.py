"""What the CLI commands share: option parsing, tables, progress, and running a sweep."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..errors import UsageError
from ..redact import redact_text

err_console = Console(stderr=True, highlight=False, soft_wrap=True)
out_console = Console(highlight=False)

class BlocksPerTask(click.ParamType):
    """``--blocks-per-task``: a positive integer or ``auto``."""

    name = "N|auto"

    def convert(self, value, param, ctx):
        if isinstance(value, int) or value == "auto":
            return value
        if str(value).isascii() and str(value).isdigit() and int(value) >= 1:
            return int(value)
        self.fail(f"{value!r} is not a positive integer or auto (like 1, 100 or auto).", param, ctx)


BLOCKS_PER_TASK = BlocksPerTask()


def parse_workers(text: str) -> list[int]:
    """``"4,1,2"`` -> ``[4, 1, 2]``; anything else is a usage error naming the bad part."""
    from ..sweep import check_workers

    parts = [p.strip() for p in str(text).split(",")]
    counts = []
    for part in parts:
        if not part.isascii() or not part.isdigit() or int(part) < 1:
            raise UsageError(f"Bad worker count '{part}' in --workers '{text}': give positive integers separated by commas, like 1,2,4.")
        counts.append(int(part))
    return check_workers(counts)


def open_results(out: str, label: str, run_id: str):
    """Preflight of the results file: create it (header written and synced) before any
    cluster starts or any data is read, so an unwritable folder or a full disk is found
    first. A sweep that ends before its first row leaves no file behind."""
    from ..archive import ResultsFile, results_path

    return ResultsFile(results_path(out, run_id, label), discard_if_empty=True)


def parse_options(pairs: tuple[str, ...], flag: str = "--storage-option") -> dict[str, Any]:
    """``key=value`` pairs (values read as YAML scalars; dotted keys nest) -> a dict."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"Bad {flag} '{redact_text(pair.split('=')[0])}=...': write it as key=value, like anon=true or endpoint_url=https://host.")
        if value.lstrip().startswith("!"):  # YAML tags construct objects: never taken from the command line
            raise UsageError(f"Bad {flag} '{key.strip()}': YAML tags (values starting with '!', like "
                             "!!python/object) are not accepted; give a plain value (text, number, true/false).")
        try:
            parsed = yaml.safe_load(value) if value else ""
        except yaml.YAMLError:
            parsed = value
        if not isinstance(parsed, (str, int, float, bool)) or parsed is None or ":" in value:
            parsed = value  # ":" keeps times (walltime=10:30:00) and addresses as written, not YAML base 60
        node = options
        *parents, leaf = key.strip().split(".")
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = parsed
    return options


def show_records(records, title: str = "Results") -> None:
    table = Table(title=title)
    for column in ("source", "nworkers", "nthreads", "repeat", "runtime (s)", "MB/s", "MB/s/thread", "status"):
        table.add_column(column, justify="right" if column not in ("source", "status") else "left",
                         overflow="fold" if column == "source" else "ellipsis")  # whole source names
    for r in records:
        ok = r.status == "ok"
        table.add_row(r.source, str(r.nworkers), str(r.nthreads), str(r.repeat),
                      f"{r.runtime:.3f}" if ok else "-", f"{r.throughput_MBps:.1f}" if ok else "-",
                      f"{r.throughput_MBps_per_thread:.1f}" if ok else "-",
                      "ok" if ok else f"error: {r.error}"[:60])
    out_console.print(table)


def execute_sweep(sources, cluster, workers, repeats, out, labels=None, run_id=None, results=None,
                  **sweep_options) -> tuple[Path, list]:
    """Sweep each source on the cluster, with a progress bar; rows go to one CSV as they end.

    ``results`` is a results file already opened (see :func:`open_results`); without
    it one is made in ``out``. ``sweep_options`` (``blocks_per_task``, ``warmup``, ...)
    pass to :func:`throughput.sweep.sweep`.
    """
    from ..archive import ResultsFile, results_path
    from ..sweep import check_repeats, check_workers, new_run_id, sweep

    workers, repeats = check_workers(workers), check_repeats(repeats)
    run_id = run_id or new_run_id()
    label = sources[0].name if len(sources) == 1 else "multi"
    if results is None:
        results = ResultsFile(results_path(out, run_id, label))
    path = results.path
    records = []
    with results:
        err_console.print(f"results: {path}")
        total = len(sources) * len(workers) * repeats
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        try:
            with Progress(*columns, console=err_console) as progress:
                task = progress.add_task("sweep", total=total)
                for source in sources:
                    def started(n, r, source=source):
                        progress.update(task, description=f"{source.name}: {n} workers, repeat {r + 1}/{repeats}")
                    for record in sweep(source, cluster, workers, repeats, labels=labels, run_id=run_id, on_start=started,
                                        **sweep_options):
                        results.append(record)
                        records.append(record)
                        progress.advance(task)
        finally:
            if records:
                err_console.print(f"{len(records)} row(s) in {path}")
    return path, records
