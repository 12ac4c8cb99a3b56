"""``throughput report``: one self-contained HTML page (and PNGs) from results archives."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from . import cli
from .common import err_console, out_console, parse_options


@cli.command()
@click.argument("results", nargs=-1, required=True)
@click.option("--out", "-o", default="report.html", show_default=True, help="HTML file to write.")
@click.option("--png-dir", type=click.Path(file_okay=False), help="Also write every figure as a PNG here.")
@click.option("--title", default="throughput report", show_default=True, help="Title of the report.")
@click.option("--storage-option", "-s", multiple=True, metavar="KEY=VALUE",
              help="Passed to fsspec for URLs of results (repeatable; dotted keys nest).")
def report(results, out, png_dir, title, storage_option):
    """Draw the figures and the table of points of RESULTS (folders, CSV files or fsspec URLs).

    Repeats of one point (same source, workers and threads) are summarised by their
    median and interquartile range; failed runs are listed apart.

    \b
    Example:
      throughput report results/ results/published -o report.html --png-dir figures/
    """
    from ..report import load_results, write_report

    rows = load_results(list(results), storage_options=parse_options(storage_option))
    made = write_report(rows, out, title=title, png_dir=png_dir, stem=Path(out).stem)
    points, failed = made["points"], made["failures"]
    table = Table(title="Points (median of repeats)")
    for column in ("source", "nworkers", "nthreads", "repeats", "runtime (s)", "MB/s", "MB/s IQR"):
        table.add_column(column, justify="left" if column == "source" else "right")
    for p in points.itertuples():
        table.add_row(p.source, str(p.nworkers), str(p.nthreads), str(p.repeats), f"{p.runtime_median:,.3f}",
                      f"{p.throughput_median:,.1f}", f"{p.throughput_iqr:,.1f}")
    out_console.print(table)
    err_console.print(f"{len(rows)} row(s), {len(points)} point(s), {len(failed)} failed run(s)")
    for path in made["pngs"]:
        err_console.print(f"figure: {path}")
    err_console.print(f"report: {made['html']}")
