"""Which results file a sweep file writes, and which of its points that file already holds.

A sweep file's results are named ``<UTC time>_<sweep name>_<content hash>.csv`` in its
output folder: they sort by time, and the hash (of the file's parsed content) lets a
later ``--resume`` find them again without being told.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

from .archive import results_path
from .errors import ArchiveError, UsageError
from .records import COLUMNS

#: a point of a sweep: (source name, requested workers, repeat)
Point = tuple[str, int, int]


def new_results_path(output: str | os.PathLike, name: str, digest: str) -> Path:
    """A fresh, time-stamped results path for a sweep file (``digest`` identifies its content)."""
    return results_path(output, digest, name)


def latest_results_path(output: str | os.PathLike, name: str, digest: str) -> Path | None:
    """The newest results file an earlier run of the same sweep file content wrote, if any."""
    pattern = "*_" + new_results_path(output, name, digest).name.split("_", 1)[1]
    found = sorted(Path(output).glob(pattern))
    return found[-1] if found else None


def recorded_points(path: str | os.PathLike, retry_failed: bool = False) -> set[Point]:
    """Points already in a results file (whole rows only; every row ResultsFile writes is whole).

    With ``retry_failed``, points whose rows all have ``status=error`` count as not done,
    so they are measured again (the error rows stay, as a record of what happened).
    """
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return set()
    ok: set[Point] = set()
    failed: set[Point] = set()
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise ArchiveError(f"Cannot resume into '{path}': its header is not this version's results schema "
                               "(it was written by another throughput version, or is not a results file). "
                               "Run without --resume, or give a new file with --results.")
        for line, row in enumerate(reader, start=2):
            try:
                point = (row["source"], int(row["requested_workers"]), int(row["repeat"]))
            except (TypeError, ValueError):
                raise ArchiveError(f"Cannot resume into '{path}': row {line} is not a whole results row "
                                   f"(source={row.get('source')!r}, requested_workers={row.get('requested_workers')!r}, "
                                   f"repeat={row.get('repeat')!r}).") from None
            (ok if row["status"] == "ok" else failed).add(point)
    return ok | (set() if retry_failed else failed)


def choose_results_path(output: str | os.PathLike, name: str, digest: str, *, results: str | os.PathLike | None = None,
                        resume: bool = False) -> tuple[Path, bool]:
    """Where a run of a sweep file writes, and whether it continues an earlier file.

    ``results`` (``--results FILE``) wins; otherwise ``--resume`` picks the newest file of
    the same sweep content in ``output``, and a plain run starts a new file. A plain run
    never appends to an existing file: that is what ``--resume`` is for.
    """
    if results is not None:
        path = Path(results)
        if path.suffix.lower() != ".csv":
            raise UsageError(f"--results '{path}' must name a .csv file.")
        existing = path.exists() and path.stat().st_size > 0
        if existing and not resume:
            raise UsageError(f"Results file '{path}' already exists. Add --resume to continue it, "
                             "or give a new file with --results.")
        return path, existing
    if resume:
        found = latest_results_path(output, name, digest)
        if found is not None:
            return found, True
    path = new_results_path(output, name, digest)
    if path.exists():
        raise UsageError(f"Results file '{path}' already exists. Add --resume to continue it.")
    return path, False
