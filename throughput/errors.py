"""Errors raised by throughput.

Every error derives from :class:`ThroughputError` and from the matching built-in, so
callers can catch either. Messages name the bad value and what would be accepted.
The CLI turns a ``UsageError`` into exit code 2 and any other ``ThroughputError``
into exit code 1, with one line on stderr.
"""

from __future__ import annotations


class ThroughputError(Exception):
    """Base class of every error throughput raises on purpose."""

    exit_code = 1


class UsageError(ThroughputError, ValueError):
    """The user asked for something that cannot be (bad option, bad file, bad URL)."""

    exit_code = 2


class SourceNotFoundError(ThroughputError, FileNotFoundError):
    """The data (bucket, object, store, catalog entry) does not exist."""


class VariableNotFoundError(UsageError, KeyError):
    """The variable asked for is not in the dataset."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class MissingDependencyError(ThroughputError, ImportError):
    """An optional package needed for this feature is not installed."""


class StorageUnreachableError(ThroughputError, ConnectionError):
    """A storage server did not answer."""


class ClusterError(ThroughputError, RuntimeError):
    """The Dask cluster could not be started, scaled or reached."""


class ArchiveError(ThroughputError, OSError):
    """A results file cannot be written, read or uploaded."""


def missing_dependency(package: str, feature: str, extra: str | None = None) -> MissingDependencyError:
    """Build the error for an optional package that is not installed, with the install hint."""
    hint = f"pip install {package}"
    if extra:
        hint += f"  (or: pip install 'throughput[{extra}]')"
    return MissingDependencyError(f"Missing package '{package}' required for {feature}. Install it with: {hint}")
