"""Uploading results files to a shared archive on any fsspec URL (s3://, gs://, a folder).

The uploaded object is always the complete file: readers of the archive see the old
object, or none, or the whole new one, never a part. A failed upload never touches
the local file, and the error says where that file is and the exact command to retry.
"""

from __future__ import annotations

import contextlib
import copy
import os
import shlex
import uuid
from pathlib import Path
from typing import Any

import fsspec

from .errors import ArchiveError, UsageError
from .redact import redact_options, redact_text, secret_values

#: protocols whose single write (PUT) is atomic: the object appears whole when the
#: write completes, or not at all. For S3 a put_object (and a completed multipart
#: upload) replaces the object atomically; GCS and Azure finalize uploads the same way;
#: memory:// assigns a dict entry. Writing to a temporary name and renaming would, on
#: these stores, be a copy plus a delete: two requests and a window with two objects.
ATOMIC_PUT = frozenset({"s3", "s3a", "gs", "gcs", "abfs", "abfss", "az", "adl", "oss", "memory"})


class UploadError(ArchiveError):
    """An upload failed; the local files are untouched and :attr:`retry` says how to try again."""

    def __init__(self, message: str, retry: str, files: list[Path]):
        super().__init__(message)
        self.retry = retry
        self.files = files


def destination(target: str, filename: str) -> str:
    """The URL a file is uploaded to: ``target`` itself when it names a ``.csv``, else
    ``target`` taken as a folder (prefix) holding ``filename``."""
    if target.lower().endswith(".csv"):
        return target
    return target.rstrip("/") + "/" + filename


def _protocol(url: str) -> str:
    proto = fsspec.utils.get_protocol(url)
    return "file" if proto == "local" else proto


def put_whole(data: bytes, url: str, storage_options: dict[str, Any] | None = None) -> None:
    """Write ``data`` to ``url`` so that the object there is either absent, the old one,
    or exactly ``data``: one PUT on object stores, write-then-rename elsewhere.

    The size is checked after writing: a store that silently truncated is an error.
    """
    # a deep copy: botocore rewrites config_kwargs in place, and the caller's options
    # must stay as given (they are shown in the retry command)
    fs, path = fsspec.core.url_to_fs(url, **copy.deepcopy(storage_options or {}))
    parent = path.rsplit("/", 1)[0] if "/" in path else ""
    if _protocol(url) in ATOMIC_PUT:
        fs.pipe_file(path, data)
    else:
        if parent:
            fs.makedirs(parent, exist_ok=True)
        # a hidden temporary name in the same folder, so the rename stays on one filesystem
        name = path.rsplit("/", 1)[-1]
        temp = f"{parent}/.{name}.{uuid.uuid4().hex[:8]}.part" if parent else f".{name}.part"
        try:
            fs.pipe_file(temp, data)
            if _protocol(url) == "file":
                os.replace(temp, path)  # atomic on POSIX, and replaces an older upload
            else:
                fs.mv(temp, path)
        except BaseException:
            with contextlib.suppress(Exception):  # best effort: the error that matters is being raised
                if fs.exists(temp):
                    fs.rm(temp)
            raise
    size = fs.size(path)
    if size != len(data):
        raise OSError(f"the uploaded object has {size} bytes, the file {len(data)}")


def check_target(target: str, storage_options: dict[str, Any] | None = None,
                 secrets: set[str] | frozenset[str] = frozenset()) -> str | None:
    """Why an upload to ``target`` would fail now, or None if nothing is known to be wrong.

    Run before a long sweep so that a mistyped bucket or a server that is down is
    reported at the start; nothing is written.
    """
    from .sweep import one_line

    try:
        fs, path = fsspec.core.url_to_fs(target, **copy.deepcopy(storage_options or {}))
        if _protocol(target) == "file":
            folder = Path(path if not path.lower().endswith(".csv") else os.path.dirname(path))
            while not folder.exists() and folder != folder.parent:
                folder = folder.parent
            if not folder.is_dir():
                return f"'{folder}' is a file, not a folder"
            if not os.access(folder, os.W_OK):
                return f"folder '{folder}' is not writable"
            return None
        if _protocol(target) in ATOMIC_PUT:
            bucket = path.split("/", 1)[0]
            if not fs.exists(bucket):
                return f"bucket '{bucket}' does not exist (or cannot be seen with these credentials)"
            return None
        fs.exists(path)
    except Exception as exc:  # noqa: BLE001  (a warning: whatever the backend raises, say it)
        return one_line(exc, set(secrets) | secret_values(storage_options or {}))
    return None


def retry_command(files: list[Path], target: str, storage_options: dict[str, Any] | None = None,
                  sweep_file: str | os.PathLike | None = None) -> str:
    """The exact command that retries an upload, with no secret in it.

    With a sweep file, options (and their credentials) are read from it again;
    otherwise non-secret options are spelled out and secret ones shown as ``***``.
    """
    words = ["throughput", "upload", *(str(f) for f in files), redact_text(target)]
    if sweep_file is not None:
        words += ["--sweep", str(sweep_file)]
    else:
        for key, value in _flatten(redact_options(storage_options or {})):
            words += ["--storage-option", f"{key}={_scalar(value)}"]
    return shlex.join(words)


def _flatten(options: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    pairs = []
    for key, value in options.items():
        if isinstance(value, dict):
            pairs += _flatten(value, f"{prefix}{key}.")
        else:
            pairs.append((f"{prefix}{key}", value))
    return pairs


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def upload_files(files: list[str | os.PathLike], target: str, storage_options: dict[str, Any] | None = None, *,
                 secrets: set[str] | frozenset[str] = frozenset(),
                 sweep_file: str | os.PathLike | None = None) -> list[str]:
    """Upload results files to ``target`` (a folder/prefix URL, or one ``.csv`` URL).

    Every file is tried; the URLs written are returned. If any upload fails the local
    files stay as they are and :class:`UploadError` names each file that was not
    uploaded and gives the command that retries them.
    """
    paths = [Path(f) for f in files]
    if not paths:
        raise UsageError("No files to upload. Give one or more results CSV files, then the target URL.")
    if target.lower().endswith(".csv") and len(paths) > 1:
        raise UsageError(f"Target '{redact_text(target)}' names one file but {len(paths)} files were given; "
                         "give a folder or prefix URL ending in '/' instead.")
    for path in paths:
        if not path.is_file():
            raise UsageError(f"Results file '{path}' does not exist; give the path of a CSV file to upload.")
    secrets = set(secrets) | secret_values(storage_options or {})
    done, failed = [], []
    for path in paths:
        url = destination(target, path.name)
        try:
            put_whole(path.read_bytes(), url, storage_options)
        except Exception as exc:  # noqa: BLE001  (any failure: report it, keep the file, go on)
            from .sweep import one_line

            failed.append((path, redact_text(url, secrets), one_line(exc, secrets)))
        else:
            done.append(url)
    if failed:
        kept = [p.resolve() for p, _, _ in failed]
        retry = retry_command(kept, target, storage_options, sweep_file)
        lines = [f"upload to {url} failed: {why}" for _, url, why in failed]
        where = ", ".join(f"'{p}'" for p in kept)
        message = (f"{'; '.join(lines)}. The results are kept locally in {where}. "
                   f"Retry with: {retry}")
        raise UploadError(redact_text(message, secrets), retry, kept)
    return [redact_text(u, secrets) for u in done]


__all__ = ["ATOMIC_PUT", "UploadError", "check_target", "destination", "put_whole", "retry_command",
           "upload_files"]
