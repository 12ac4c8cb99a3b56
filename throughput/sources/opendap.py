"""OPeNDAP endpoints (DAP2, and DAP4 where the server offers it), read with xarray's pydap engine.

URL forms:

- ``dap2://host/path`` and ``dap4://host/path``: pydap's own convention, meaning
  ``https://host/path`` spoken in that protocol (pydap retries over ``http://`` when
  https fails, which is slow: give plain-http servers as ``http://``);
- ``http(s)://host/path`` with ``format="opendap"`` (or a THREDDS ``/dodsC/`` path):
  DAP2 unless ``protocol="dap4"`` is given or the query holds ``dap4.ce``.

Each dask chunk is read by one request (one hyperslab): by default the variable's own
chunk shape when the server publishes it (``_ChunkSizes``, as THREDDS and
:mod:`throughput.servers.opendap` do) and it fits in ``request_bytes``, otherwise
C-ordered blocks of at most ``request_bytes`` (whole trailing dimensions first, so one
block is one contiguous run of the array).
"""

from __future__ import annotations

import math
from importlib.metadata import version
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import xarray as xr
from xarray.backends import BackendArray
from xarray.core import indexing

from .. import config
from ..errors import (
    SourceNotFoundError,
    StorageUnreachableError,
    UsageError,
    missing_dependency,
)
from ..redact import redact_text, redact_url
from . import Source, choose_variable, default_name

PROTOCOLS = ("dap2", "dap4")
#: session settings an OPeNDAP source accepts through ``storage_options``
SESSION_OPTIONS = ("token", "headers", "verify", "timeout")
DEFAULT_REQUEST_BYTES = 50_000_000


def dap_url(url: str, protocol: str | None = None) -> tuple[str, str]:
    """The ``http(s)://`` URL to request and the DAP protocol to speak.

    >>> dap_url("dap4://example.org/data/ocean.nc")
    ('https://example.org/data/ocean.nc', 'dap4')
    >>> dap_url("http://127.0.0.1:8080/ocean.nc")
    ('http://127.0.0.1:8080/ocean.nc', 'dap2')
    """
    if protocol is not None and protocol not in PROTOCOLS:
        raise UsageError(f"Unknown OPeNDAP protocol '{protocol}'. Must be one of {list(PROTOCOLS)}.")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme in PROTOCOLS:
        if protocol and protocol != scheme:
            raise UsageError(f"URL '{redact_url(url)}' says {scheme} but protocol='{protocol}' was asked for.")
        return urlunsplit(("https",) + tuple(parts[1:])), scheme
    if scheme not in ("http", "https"):
        msg = (f"Unsupported URL scheme '{parts.scheme}' for an OPeNDAP source '{redact_url(url)}'. "
               "Use dap2://, dap4://, http:// or https://.")
        raise UsageError(msg)
    return url, protocol or ("dap4" if "dap4.ce" in parts.query else "dap2")


def request_chunks(shape: tuple[int, ...], itemsize: int, limit: int,
                   natural: tuple[int, ...] | None = None) -> tuple[int, ...]:
    """Chunk shape whose blocks are each one bounded OPeNDAP request.

    The server's own chunk shape when it is known and fits in ``limit`` bytes;
    otherwise C-ordered blocks: whole trailing dimensions while they fit, then as many
    rows of the next one as fit (at least one).

    >>> request_chunks((12, 20, 270, 360), 4, 50_000_000)
    (6, 20, 270, 360)
    >>> request_chunks((12, 20, 270, 360), 4, 5_000_000, natural=(1, 5, 270, 360))
    (1, 5, 270, 360)
    >>> request_chunks((100, 1000), 8, 16_000)
    (2, 1000)
    """
    if limit < itemsize:
        raise UsageError(f"request_bytes={limit} is smaller than one element ({itemsize} bytes).")
    if natural and len(natural) == len(shape) and all(c > 0 for c in natural):
        natural = tuple(min(int(c), int(s)) for c, s in zip(natural, shape))
        if math.prod(natural) * itemsize <= limit:
            return natural
    chunks = [1] * len(shape)
    block = itemsize
    for axis in reversed(range(len(shape))):
        if block * shape[axis] <= limit:
            chunks[axis] = int(shape[axis])
            block *= shape[axis]
        else:
            chunks[axis] = max(1, limit // block)
            break
    return tuple(chunks)


def _session(storage_options: dict[str, Any]):
    from pydap.net import create_session

    unknown = set(storage_options) - set(SESSION_OPTIONS)
    if unknown:
        msg = (f"Unknown storage option(s) for an OPeNDAP source: {sorted(unknown)}. "
               f"Accepted: {list(SESSION_OPTIONS)}.")
        raise UsageError(msg)
    session_kwargs = {"token": storage_options["token"]} if storage_options.get("token") else {}
    session = create_session(session_kwargs=session_kwargs)
    session.headers.update(storage_options.get("headers") or {})
    return session


def _open_dataset(url: str, protocol: str, storage_options: dict[str, Any]):
    import requests
    from pydap.client import open_url
    from xarray.backends import PydapDataStore

    host = urlsplit(url).netloc.rsplit("@", 1)[-1]
    try:
        dataset = open_url(url, session=_session(storage_options), protocol=protocol,
                           timeout=storage_options.get("timeout", 120),
                           verify=storage_options.get("verify", True))
    except requests.ConnectionError:
        raise StorageUnreachableError(
            f"OPeNDAP server {host} did not answer while opening '{redact_url(url)}'. "
            "Is the URL right and the server up?") from None
    except requests.HTTPError as exc:
        # pydap re-raises requests' HTTPError without the response; the original is the cause
        response = exc.response if exc.response is not None else getattr(exc.__cause__, "response", None)
        status = response.status_code if response is not None else "?"
        if status in (401, 403):
            raise SourceNotFoundError(f"Access denied (HTTP {status}) to '{redact_url(url)}'. "
                                      "Give a token in storage_options.") from None
        raise SourceNotFoundError(f"No OPeNDAP dataset at '{redact_url(url)}' (HTTP {status} from {host}).") from None
    # the store of xarray's pydap engine, given the protocol we chose (xarray would guess dap2 from http)
    store = PydapDataStore(dataset, protocol=protocol)
    ds = xr.open_dataset(store, mask_and_scale=False, decode_times=False, decode_timedelta=False,
                         decode_coords=False)
    return dataset, ds


class DapRequestArray(BackendArray):
    """A variable's data as pydap's request proxy: each (basic) index is one OPeNDAP request.

    xarray's pydap engine wraps the pydap ``BaseType``, which does not survive a pickle
    round trip in pydap 3.5.9 (its ``__getattr__`` recurses while unpickling), so a
    graph holding it fails on a distributed cluster with processes. The proxy under it
    (``BaseProxyDap2``/``BaseProxyDap4``: URL, variable id, shape, dtype and a requests
    session) pickles, and is all a task needs.
    """

    def __init__(self, proxy) -> None:
        self.proxy = proxy
        self.shape = tuple(int(n) for n in proxy.shape)
        self.dtype = np.dtype(proxy.dtype)

    def __getitem__(self, key):
        return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.BASIC, self._getitem)

    def _getitem(self, key: tuple) -> np.ndarray:
        result = np.asarray(self.proxy[key], dtype=self.dtype)
        # an integer index drops its axis in numpy; the proxy keeps it as length 1
        axes = tuple(n for n, k in enumerate(key) if isinstance(k, (int, np.integer)))
        if axes and result.ndim == len(self.shape):
            result = np.squeeze(result, axes)
        return result


def data_variables(ds) -> list[str]:
    """Variables worth measuring: not 1-D coordinates."""
    names = [str(n) for n in ds.data_vars]
    return [n for n in names if ds[n].ndim >= 2] or names


def open_opendap(
    url: str,
    variable: str | None,
    *,
    storage_options: dict[str, Any],
    chunks: Any = None,
    protocol: str | None = None,
    request_bytes: int | None = None,
    **options: Any,
) -> Source:
    """Open one variable of an OPeNDAP dataset lazily; each dask chunk is one request.

    Parameters
    ----------
    url
        ``dap2://``, ``dap4://``, ``http://`` or ``https://`` URL of the dataset (no suffix).
    variable
        The array to read; optional when the dataset has one data variable.
    storage_options
        ``token`` (bearer token), ``headers``, ``verify``, ``timeout`` for the HTTP session.
    chunks
        Dask chunks (anything ``xarray.Variable.chunk`` accepts); overrides the default.
    protocol
        ``dap2`` or ``dap4``; from the URL when omitted (``http(s)://`` means DAP2).
    request_bytes
        Largest request (bytes of one chunk) for the default chunks; default from
        ``throughput.sources.opendap.request-bytes`` (50 MB).
    """
    if options:
        msg = (f"Unknown option(s) for opendap sources: {sorted(options)}. "
               "Accepted: chunks, protocol, request_bytes, storage_options.")
        raise UsageError(msg)
    try:
        import pydap  # noqa: F401
    except ImportError:
        raise missing_dependency("pydap", "OPeNDAP sources", "opendap") from None
    http_url, protocol = dap_url(url, protocol)
    limit = int(request_bytes or config.get("sources.opendap.request-bytes", DEFAULT_REQUEST_BYTES))
    if limit <= 0:
        raise UsageError(f"Bad request_bytes {request_bytes!r}: must be a positive number of bytes.")
    dataset, ds = _open_dataset(http_url, protocol, storage_options)
    names = data_variables(ds)
    variable = choose_variable(variable, names, ds.variables, url)
    var = ds[variable].variable
    # same metadata, data behind pydap's own (picklable) request proxy
    var = xr.Variable(var.dims, indexing.LazilyIndexedArray(DapRequestArray(dataset[variable].data)), var.attrs)
    natural = var.attrs.get("_ChunkSizes")  # a number, a list or an array, as servers publish it
    natural = tuple(int(c) for c in np.atleast_1d(natural).tolist()) if natural is not None else ()
    if chunks is None:
        chunks = request_chunks(var.shape, var.dtype.itemsize, limit, natural or None)
        chunked_by = "_ChunkSizes" if chunks == tuple(min(c, s) for c, s in zip(natural, var.shape)) else "request_bytes"
    else:
        chunked_by = "user"
    try:
        lazy = var.chunk(chunks).data
    except (ValueError, TypeError) as exc:
        raise UsageError(f"Bad chunks {chunks!r} for '{variable}' {var.shape}: {redact_text(str(exc))}") from None
    return Source(
        name=default_name(url), format="opendap", url=url, variable=variable, array=lazy,
        storage_library=f"pydap {version('pydap')}", dims=tuple(map(str, var.dims)), attrs=dict(var.attrs),
        options={"protocol": protocol, "request_bytes": limit, "chunked_by": chunked_by},
    )
