"""The results archive: CSV files of records, written row by row, read back as tables."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Self

from .errors import ArchiveError
from .records import COLUMNS, Record


def results_path(out: str | os.PathLike, run_id: str, label: str) -> Path:
    """Where a sweep's CSV goes: a file path as given, or a new file in a folder.

    New files are named ``<UTC time>_<label>_<run_id>.csv`` so that they sort by time.
    """
    out = Path(out)
    if out.suffix.lower() == ".csv":
        return out
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", label).strip("-.")[:60] or "sweep"
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return out / f"{stamp}_{slug}_{run_id}.csv"


class ResultsFile:
    """A CSV file that records are appended to, one whole line at a time.

    Each row is formatted in memory and written with a single ``write`` then flushed
    and synced, so an interrupted sweep leaves only whole rows behind.
    """

    def __init__(self, path: str | os.PathLike, discard_if_empty: bool = False):
        self.path = Path(path)
        self.rows = 0
        self.discard_if_empty = discard_if_empty
        self._fd: int | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.created = not self.path.exists() or self.path.stat().st_size == 0
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            raise self._error(exc) from None
        header = self._line(dict(zip(COLUMNS, COLUMNS)))
        if self.created:
            try:
                self._write(header)
            except ArchiveError:
                self.discard_if_empty = True
                self.close()
                raise
        else:
            with self.path.open(encoding="utf-8", errors="replace", newline="") as f:
                first = f.readline()
            if first != header:  # appending would put values under the wrong column names
                self.close()
                raise ArchiveError(f"Cannot append to '{self.path}': its header is not this version's results "
                                   "schema (another throughput version, or not a results file). Write to a new file.")

    def _error(self, exc: OSError) -> ArchiveError:
        """The one-line error for a results file that cannot be written, naming its folder."""
        reason = exc.strerror or str(exc)
        return ArchiveError(f"Cannot write results file '{self.path.name}' in folder '{self.path.parent}': "
                            f"{reason}. Choose a writable folder with enough space with --out.")

    @staticmethod
    def _line(row: dict) -> str:
        buf = io.StringIO()
        csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n").writerow(row)
        return buf.getvalue()

    def _write(self, text: str) -> None:
        data = text.encode("utf-8")
        try:
            written = os.write(self._fd, data)
            if written != len(data):
                raise OSError(f"short write ({written} of {len(data)} bytes)")
            os.fsync(self._fd)
        except OSError as exc:
            raise self._error(exc) from None

    def append(self, record: Record) -> None:
        """Write one record as one CSV line, durably."""
        self._write(self._line(dataclasses.asdict(record)))
        self.rows += 1

    def close(self) -> None:
        """Close the file; with ``discard_if_empty``, remove it if this object created it and
        wrote no row (a sweep that stopped before its first run leaves no empty file)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            if self.discard_if_empty and self.created and self.rows == 0:
                with contextlib.suppress(OSError):
                    self.path.unlink()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
