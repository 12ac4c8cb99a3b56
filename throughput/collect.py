"""Collecting results archives: CSV files from folders and URLs merged into one schema-v1 table.

Rows are kept as the text they were written as (no float round trips), so the same
row met twice, in two copies of an archive, is recognised and kept once. Files in the
seed study's layout (Zenodo 10.5281/zenodo.3829032: leading unnamed index column, no
``source``, ``status`` or per-thread column) are brought to schema v1 the same way the
reports read them.
"""

from __future__ import annotations

import copy
import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fsspec
import pandas as pd

from .errors import ArchiveError, UsageError
from .records import COLUMNS
from .redact import redact_text
from .report import REQUIRED


@dataclass
class Collected:
    """The merged table and what happened on the way."""

    table: pd.DataFrame
    files: list[str] = field(default_factory=list)
    rows_read: int = 0
    duplicates: int = 0
    dropped_columns: dict[str, list[str]] = field(default_factory=dict)
    """File -> columns it had that schema v1 does not (not carried into the merge)."""


def csv_files(location: str, storage_options: dict[str, Any] | None = None) -> list[str]:
    """The CSV files at a location: a file, a folder (searched recursively) or a glob, local or remote."""
    fs, root = fsspec.core.url_to_fs(location, **copy.deepcopy(storage_options or {}))
    remote = "://" in location
    def name(p: str) -> str:
        return fs.unstrip_protocol(p) if remote else p

    if any(c in root for c in "*?["):
        return [name(p) for p in sorted(fs.glob(root)) if p.lower().endswith(".csv")]
    try:
        is_dir = fs.isdir(root)
    except Exception as exc:  # noqa: BLE001  (whatever the backend raises, one clear line)
        raise ArchiveError(f"Cannot list '{redact_text(location)}': {redact_text(exc)}") from None
    if is_dir:
        return [name(p) for p in sorted(fs.find(root)) if p.lower().endswith(".csv")]
    if not fs.exists(root):
        raise ArchiveError(f"Nothing found at '{redact_text(location)}'; give CSV files, folders or URLs of them.")
    return [location if remote else root]


def read_rows(url: str, storage_options: dict[str, Any] | None = None) -> tuple[pd.DataFrame, list[str]]:
    """One results file as text columns in schema v1 order; returns it and the columns left out."""
    try:
        options = (storage_options or {}) if "://" in url else {}
        with fsspec.open(url, "rb", **options) as f:
            data = f.read()
    except FileNotFoundError:
        raise ArchiveError(f"Results file '{redact_text(url)}' does not exist.") from None
    try:
        frame = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False, encoding="utf-8")
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise ArchiveError(f"'{redact_text(url)}' is not a CSV results file: {str(exc).splitlines()[0]}") from None
    frame = frame.loc[:, [c for c in frame.columns if not str(c).startswith("Unnamed:")]]
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise ArchiveError(f"'{redact_text(url)}' is not a throughput results file: missing column(s) {missing}; "
                           f"needs at least {list(REQUIRED)}.")
    for column in REQUIRED:
        text = frame[column].str.strip()
        bad = ~text.map(_is_number)
        if bad.any():
            row = int(bad.idxmax())
            raise ArchiveError(f"'{redact_text(url)}' row {row + 2}, column '{column}': got '{text[row][:40]}'; "
                               "must be a number.")
    _fill_seed_columns(frame, url)
    extra = [c for c in frame.columns if c not in COLUMNS]
    for column in COLUMNS:
        if column not in frame:
            frame[column] = ""
    return frame.loc[:, list(COLUMNS)], extra


def _is_number(text: str) -> bool:
    """Empty, or anything ``float`` reads (``nan`` included: failed runs have no runtime)."""
    if not text:
        return True
    try:
        float(text)
    except ValueError:
        return False
    return True


def _fill_seed_columns(frame: pd.DataFrame, origin: str) -> None:
    """Columns the seed's files lack but the reports need, derived as report.normalise does."""
    if "source" not in frame:
        stem = Path(origin.split("?")[0]).stem
        frame["source"] = frame.get("cloud", stem)
    if "status" not in frame:
        frame["status"] = "ok"  # the seed published only finished runs
    nbytes = pd.to_numeric(frame["nbytes"], errors="coerce")
    runtime = pd.to_numeric(frame["runtime"], errors="coerce")
    if "throughput_MBps" not in frame:
        frame["throughput_MBps"] = [_text(v) for v in nbytes / 1e6 / runtime.where(runtime > 0)]
    if "throughput_MBps_per_thread" not in frame:
        mbps = pd.to_numeric(frame["throughput_MBps"], errors="coerce")
        nthreads = pd.to_numeric(frame["nthreads"], errors="coerce")
        frame["throughput_MBps_per_thread"] = [_text(v) for v in mbps / nthreads.where(nthreads > 0)]


def _text(value: float) -> str:
    return "" if pd.isna(value) else repr(float(value))


def collect(locations: list[str], storage_options: dict[str, Any] | None = None) -> Collected:
    """Merge every CSV results file at ``locations`` into one schema-v1 table, identical rows once.

    Parameters
    ----------
    locations
        Files, folders (searched recursively for ``*.csv``), globs or fsspec URLs of them.
    storage_options
        Passed to fsspec for remote locations.
    """
    if not locations:
        raise UsageError("No locations to collect from. Give CSV files, folders or URLs.")
    result = Collected(table=pd.DataFrame(columns=list(COLUMNS)))
    frames = []
    for location in locations:
        files = csv_files(location, storage_options)
        if not files:
            raise ArchiveError(f"No CSV files found in '{redact_text(location)}'.")
        for url in files:
            frame, extra = read_rows(url, storage_options)
            result.files.append(url)
            result.rows_read += len(frame)
            if extra:
                result.dropped_columns[url] = extra
            frames.append(frame)
    merged = pd.concat(frames, ignore_index=True)
    unique = merged.drop_duplicates(ignore_index=True)
    result.duplicates = len(merged) - len(unique)
    result.table = unique
    return result


def write_table(table: pd.DataFrame, out: str | os.PathLike, storage_options: dict[str, Any] | None = None) -> str:
    """Write a merged table as CSV, whole or not at all (see :func:`throughput.upload.put_whole`)."""
    from .upload import put_whole

    out = str(out)
    data = table.to_csv(index=False, lineterminator="\n").encode("utf-8")
    try:
        put_whole(data, out if "://" in out else os.path.abspath(out), storage_options if "://" in out else None)
    except Exception as exc:  # noqa: BLE001  (whatever the backend raises, one clear line)
        from .sweep import one_line

        raise ArchiveError(f"Cannot write '{redact_text(out)}': {one_line(exc)}") from None
    return out
