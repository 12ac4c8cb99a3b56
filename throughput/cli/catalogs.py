"""``throughput sources CATALOG``: list the entries of an intake catalog."""

from __future__ import annotations

import click
from rich.table import Table

from ..redact import redact_url
from . import cli
from .common import err_console, out_console, parse_options


def _size(nbytes: int) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} B"


@cli.command()
@click.argument("catalog")
@click.option("--size", "with_size", is_flag=True, help="Open each entry (metadata only) to show its size.")
@click.option("--param", "-p", multiple=True, metavar="KEY=VALUE", help="Catalog user parameter (repeatable).")
@click.option("--storage-option", "-s", multiple=True, metavar="KEY=VALUE", help="fsspec options to read the catalog file.")
def sources(catalog, with_size, param, storage_option):
    """List the sources of an intake CATALOG (local path or fsspec URL): format, labels, location."""
    from ..catalog import catalog_entries, entry_size
    from ..sweep import one_line

    entries = catalog_entries(catalog, parse_options(storage_option), **parse_options(param, "--param"))
    table = Table(title=f"{catalog}: {len(entries)} source(s)")
    table.add_column("entry", no_wrap=True)
    for column in ("format", "variable", "cloud", "region", "location", "size"):
        table.add_column(column, overflow="fold")
    for entry in entries:
        location = redact_url(entry.url) if not entry.missing else f"needs {'; '.join(entry.missing)}"
        size = "-"
        if with_size and not entry.missing:
            try:
                size = _size(entry_size(entry))
            except Exception as exc:  # noqa: BLE001  one unreachable entry must not hide the others
                size = "error"
                err_console.print(f"{entry.name}: {one_line(exc)}", markup=False)
        table.add_row(entry.name, entry.format, entry.variable or "-", entry.cloud or "-",
                      entry.region or "-", location, size)
    out_console.print(table)
