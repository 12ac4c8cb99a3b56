"""What fsspec backend serves a URL, and turning storage failures into clear errors."""

from __future__ import annotations

import contextlib
import logging
import re
import socket
import sys
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version
from urllib.parse import urlsplit

import fsspec
from fsspec.registry import known_implementations

from .errors import (
    MissingDependencyError,
    SourceNotFoundError,
    StorageUnreachableError,
    ThroughputError,
    UsageError,
)
from .redact import redact_text, secret_values


def protocol_of(url: str) -> str:
    """The fsspec protocol of a URL (``file`` for plain paths)."""
    proto = fsspec.utils.get_protocol(url)
    return "file" if proto in ("file", "local") else proto


def filesystem_class(url: str) -> type[fsspec.AbstractFileSystem]:
    """The fsspec filesystem class for a URL, or a clear error naming what to install."""
    proto = protocol_of(url)
    if proto not in fsspec.available_protocols() and proto not in fsspec.registry:
        known = sorted(p for p in known_implementations if len(p) > 1)
        msg = f"Unknown URL protocol '{proto}' in '{redact_text(url)}'. Must be one of {known} or a local path."
        raise UsageError(msg)
    try:
        return fsspec.get_filesystem_class(proto)
    except ImportError as exc:
        hint = known_implementations.get(proto, {}).get("err", str(exc))
        msg = f"URL protocol '{proto}' needs a package that is not installed: {hint}"
        raise MissingDependencyError(msg) from None


def storage_library(url: str, client: str = "fsspec") -> str:
    """``"<package> <version>"`` of the library that reads this URL.

    ``client`` is ``"fsspec"`` (the fsspec backend of the URL's protocol: s3fs, gcsfs,
    ...) or ``"obstore"`` (Zarr's ``ObjectStore`` over obstore, whatever the protocol).
    """
    if client == "obstore":
        from .obstores import obstore_version

        return obstore_version()
    cls = filesystem_class(url)
    package = cls.__module__.split(".")[0]
    try:
        found = f"{package} {version(package)}"
    except PackageNotFoundError:
        found = package
    if protocol_of(url) in ("http", "https"):  # fsspec's own HTTPFileSystem moves bytes with aiohttp
        with contextlib.suppress(PackageNotFoundError):
            found += f" (http, aiohttp {version('aiohttp')})"
    return found


def host_of(url: str) -> str:
    """Host (and port) a URL reaches, for error messages."""
    return urlsplit(url).netloc.rsplit("@", 1)[-1] or url


def endpoint_host(url: str, storage_options: dict | None = None) -> str:
    """The host a read of ``url`` talks to: the ``endpoint_url`` option's, else the URL's."""
    opts = storage_options or {}
    endpoint = opts.get("endpoint_url") or (opts.get("client_kwargs") or {}).get("endpoint_url")
    return host_of(endpoint) if endpoint else host_of(url)


_UNREACHABLE = ("Could not connect", "Connection refused", "ConnectTimeout", "Cannot connect",
                "Name or service not known", "EndpointConnectionError", "ConnectionError",
                "nodename nor servname", "Temporary failure in name resolution",
                "error sending request", "dns error")  # the last two: obstore (reqwest)


def _refused(exc: BaseException) -> bool:
    """True when a connection failure is somewhere in the chain of causes of ``exc``."""
    seen = exc.__cause__ or exc.__context__
    while seen is not None:
        text = f"{type(seen).__name__}: {seen}"
        if isinstance(seen, (ConnectionError, TimeoutError)) or any(s in text for s in _UNREACHABLE):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def is_unreachable(exc: BaseException) -> bool:
    """True when an error says the storage server could not be reached at all."""
    text = f"{type(exc).__name__}: {exc}"
    return isinstance(exc, ConnectionRefusedError) or any(s in text for s in _UNREACHABLE)


#: where a protocol's requests go when no endpoint_url is given
DEFAULT_ENDPOINTS = {"s3": "https://s3.amazonaws.com", "s3a": "https://s3.amazonaws.com",
                     "gs": "https://storage.googleapis.com", "gcs": "https://storage.googleapis.com"}


def check_reachable(url: str, storage_options: dict | None = None, timeout: float = 10) -> None:
    """Connect once to the storage server of ``url`` before any reader does.

    A refused connection or an unknown host is then one clear error naming the host,
    at once: storage clients would retry it for many seconds, and libraries that fan
    out requests concurrently (zarr) would leave half-run requests behind. Only a TCP
    connection is made; nothing is read.
    """
    opts = storage_options or {}
    endpoint = (opts.get("endpoint_url") or (opts.get("client_kwargs") or {}).get("endpoint_url")
                or DEFAULT_ENDPOINTS.get(protocol_of(url), url))
    parts = urlsplit(str(endpoint))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        socket.create_connection((parts.hostname, port), timeout=timeout).close()
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or type(exc).__name__
        raise StorageUnreachableError(
            f"Storage server {host_of(str(endpoint))} did not answer ({reason}) while opening "
            f"'{redact_text(url)}'. Is the URL or endpoint_url right and the server up?") from None


def short_reason(exc: BaseException, storage_options: dict | None = None) -> str:
    """One line of an error's text, secrets scrubbed.

    obstore's messages run over many lines (the server's XML answer, a Rust debug dump):
    keep the first line up to the XML, plus the S3 error code when there is one.
    """
    text = redact_text(str(exc), secret_values(storage_options or {}))
    first = text.strip().splitlines()[0] if text.strip() else ""
    first = first.split(": <?xml", 1)[0].strip()
    code = re.search(r"<Code>([^<]+)</Code>", text)
    return f"{first} ({code.group(1)})" if code and code.group(1) not in first else first


def _is_obstore(exc: BaseException, *names: str) -> bool:
    return type(exc).__module__.startswith("obstore") and (not names or type(exc).__name__ in names)


def _unreachable(url: str, storage_options: dict | None) -> StorageUnreachableError:
    return StorageUnreachableError(f"Storage server {endpoint_host(url, storage_options)} did not answer while "
                                   f"opening '{redact_text(url)}'. Is the URL or endpoint_url right and the server up?")


def _denied(url: str, reason: str) -> SourceNotFoundError:
    return SourceNotFoundError(f"Access denied to '{redact_text(url)}': {reason}. Check credentials in "
                               "storage_options (key/secret, token, anon=true for public data).")


@contextlib.contextmanager
def storage_errors(url: str, storage_options: dict | None = None) -> Iterator[None]:
    """Translate what storage libraries raise into one-line throughput errors."""
    try:
        yield
    except ThroughputError:
        raise
    except FileNotFoundError as exc:
        if _refused(exc):  # fsspec's HTTP filesystem reports a refused connection as a missing file
            raise _unreachable(url, storage_options) from exc
        raise SourceNotFoundError(f"Nothing found at '{redact_text(url)}': {short_reason(exc, storage_options) or 'no such object or bucket'}") from exc
    except PermissionError as exc:
        raise _denied(url, redact_text(exc)) from exc
    except (OSError, Exception) as exc:
        if _is_obstore(exc, "PermissionDeniedError", "UnauthenticatedError"):
            raise _denied(url, short_reason(exc, storage_options)) from exc
        if _is_obstore(exc) and "PROPFIND" in str(exc):  # obstore lists an HTTP folder with WebDAV
            raise SourceNotFoundError(f"The server of '{redact_text(url)}' cannot list folders (it refused WebDAV "
                                      "PROPFIND): consolidate the store's metadata (zarr.consolidate_metadata) "
                                      "or name the array's own URL.") from exc
        # botocore's, or obstore falling back to the EC2 metadata service for credentials
        if type(exc).__name__ == "NoCredentialsError" or (_is_obstore(exc) and "169.254.169.254" in str(exc)):
            raise UsageError(f"No credentials found for '{redact_text(url)}'. Give them with --storage-option "
                             "key=... --storage-option secret=..., or anon=true for public data.") from exc
        if isinstance(exc, ConnectionError) or is_unreachable(exc):
            raise _unreachable(url, storage_options) from exc
        if _is_obstore(exc):  # its messages span many lines: keep one
            raise ThroughputError(f"Could not read '{redact_text(url)}' with obstore: {short_reason(exc, storage_options)}") from exc
        raise


def _drop_unraisable(unraisable) -> None:
    """Drop Python's 'Exception ignored in ...' report (see :func:`quiet_exit_reports`)."""


def quiet_exit_reports() -> None:
    """Hide what storage clients report while the interpreter exits (the CLI and benchmarks call it).

    After a failure, or simply at exit, s3fs/aiobotocore sessions are closed by
    finalizers on an event loop that has stopped; they say so through
    ``sys.unraisablehook`` and asyncio's logger, as tracebacks printed after the
    results, about nothing the user can act on. ``--debug`` in the CLI keeps them.
    """
    sys.unraisablehook = _drop_unraisable
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
