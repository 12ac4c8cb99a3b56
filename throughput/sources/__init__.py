"""Sources: a lazy dask array that references stored data, plus what a record needs to know of it.

A source kind is a module with an ``open(url, variable, storage_options, **options)``
function returning a :class:`Source`; :data:`SOURCE_KINDS` maps a kind name to it.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import dask.array as da
import fsspec

from .. import config
from ..errors import MissingDependencyError, UsageError, VariableNotFoundError
from ..redact import redact_options, redact_url

#: kind name -> "module:function" (imported lazily) and the extra that installs its needs
SOURCE_KINDS: dict[str, str] = {
    "zarr": "throughput.sources.zarr:open_zarr",
    "synthetic": "throughput.sources.synthetic:open_synthetic",
    "opendap": "throughput.sources.opendap:open_opendap",
    "netcdf": "throughput.sources.netcdf:open_netcdf",
    "llcreader": "throughput.sources.llcreader:open_llcreader",
}

#: entry-point group through which an installed package adds source kinds
#: (``[project.entry-points."throughput.sources"] mykind = "mypkg.source:open_mykind"``)
ENTRY_POINT_GROUP = "throughput.sources"


@dataclass(frozen=True, eq=False)
class Source:
    """A lazy array to be read, and what is known about where it lives."""

    name: str
    """Short name used in records (catalog entry or given name)."""
    format: str
    """``zarr``, ``netcdf``, ``opendap``, ``synthetic``, ..."""
    url: str
    """Where the data is, credentials removed."""
    variable: str
    """Name of the array read."""
    array: da.Array = field(repr=False)
    """The lazy dask array; computing it reads every byte."""
    storage_library: str = ""
    """``"<package> <version>"`` of the library that moves the bytes (s3fs, gcsfs, pydap ...)."""
    options: dict[str, Any] = field(default_factory=dict)
    """Options that shape the read (storage_options redacted, cache settings, ...)."""
    dims: tuple[str, ...] = ()
    attrs: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def nbytes(self) -> int:
        """In-memory (decoded) bytes of the whole array."""
        return int(self.array.nbytes)

    @property
    def chunksize(self) -> int:
        """In-memory bytes of one (the largest) chunk."""
        return int(math.prod(self.array.chunksize) * self.array.dtype.itemsize)

    @property
    def nchunks(self) -> int:
        return int(math.prod(self.array.numblocks))

    @property
    def dtype(self) -> str:
        return str(self.array.dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(s) for s in self.array.shape)

    @property
    def chunks(self) -> tuple[int, ...]:
        """Shape of one (the largest) chunk."""
        return tuple(int(c) for c in self.array.chunksize)

    def describe(self) -> dict[str, Any]:
        """The geometry and provenance, as record columns."""
        return {
            "source": self.name, "format": self.format, "url": self.url, "variable": self.variable,
            "nbytes": self.nbytes, "chunksize": self.chunksize, "nchunks": self.nchunks,
            "dtype": self.dtype, "shape": "x".join(map(str, self.shape)),
            "chunks": "x".join(map(str, self.chunks)), "storage_library": self.storage_library,
        }


def register_source_kind(kind: str, target: str) -> None:
    """Register a source kind: ``target`` is ``"module:function"``, imported on first use.

    The function is called as ``function(url, variable, storage_options=..., **options)``
    and returns a :class:`Source`. An installed package can do the same without code,
    with an entry point in the ``throughput.sources`` group.

    >>> register_source_kind("ones", "throughput.sources.synthetic:open_synthetic")
    >>> open_source("synthetic://t?shape=4,4&chunks=2,2", format="ones").nchunks
    4
    >>> del SOURCE_KINDS["ones"]
    """
    module, sep, func = str(target).partition(":")
    if not isinstance(kind, str) or not kind.strip() or not sep or not module or not func.isidentifier():
        raise UsageError(f"Bad source kind {kind!r} -> {target!r}: give a name and 'module:function', "
                         "like register_source_kind('mykind', 'mypackage.source:open_mykind').")
    SOURCE_KINDS[kind] = target


def plugin_kinds() -> dict[str, str]:
    """Source kinds that installed packages declare in the ``throughput.sources`` entry-point group."""
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def source_kinds() -> dict[str, str]:
    """Every known kind: plugins first, so a registered or built-in kind of the same name wins."""
    return {**plugin_kinds(), **SOURCE_KINDS}


def _opener(kind: str) -> Callable[..., Source]:
    kinds = SOURCE_KINDS if kind in SOURCE_KINDS else source_kinds()
    try:
        target = kinds[kind]
    except KeyError:
        msg = f"Unknown source format '{kind}'. Must be one of {sorted(kinds)}."
        raise UsageError(msg) from None
    module, _, func = target.partition(":")
    try:
        return getattr(importlib.import_module(module), func)
    except ImportError as exc:
        if isinstance(exc, MissingDependencyError):
            raise
        msg = f"Missing package '{exc.name}' required for {kind} sources. Install it with: pip install {exc.name}"
        raise MissingDependencyError(msg) from None


def guess_format(url: str) -> str:
    """Guess the source kind from a URL; Zarr when nothing else fits."""
    lower = url.lower().split("?")[0].rstrip("/")
    if lower.startswith("synthetic:"):
        return "synthetic"
    # before file suffixes: an OPeNDAP URL often ends in .nc (THREDDS serves files under /dodsC/)
    if lower.startswith(("dap2://", "dap4://")) or "/dodsc/" in lower:
        return "opendap"
    scheme = lower.split("://", 1)[0] if "://" in lower else ""
    if scheme and scheme not in fsspec.available_protocols() and scheme in source_kinds():
        return scheme  # a kind named by its URL scheme: llcreader://..., or a plugin's
    for kind, suffixes in {"netcdf": (".nc", ".nc4", ".h5", ".hdf5", ".he5", ".cdf")}.items():
        if lower.endswith(suffixes) and kind in SOURCE_KINDS:
            return kind
    return "zarr"


def open_source(
    url: str | list[str],
    variable: str | None = None,
    *,
    format: str | None = None,
    storage_options: dict[str, Any] | None = None,
    name: str | None = None,
    **options: Any,
) -> Source:
    """Open a lazy array from storage, without reading its data.

    Parameters
    ----------
    url
        Any URL fsspec understands (``s3://``, ``gs://``, ``https://``, a local path,
        ``memory://``) or ``synthetic://``; for NetCDF, also a glob or a list of files.
    variable
        The array to read; optional when the store holds one data array.
    format
        Source kind (one of :data:`SOURCE_KINDS`); guessed from the URL when omitted.
    storage_options
        Passed untouched to fsspec. Secrets in them never reach a record.
    name
        Name in records; defaults to the last part of the URL.
    **options
        Kind-specific options (for example ``chunks``).

    Examples
    --------
    >>> src = open_source("synthetic://temp?shape=4,10,20,30&chunks=1,5,20,30")
    >>> src.nbytes, src.chunksize, src.nchunks
    (96000, 12000, 8)
    """
    if isinstance(url, (list, tuple)) and url and all(isinstance(u, str) and u.strip() for u in url):
        url = list(url)  # many files of one source (netcdf)
    elif not isinstance(url, str) or not url.strip():
        raise UsageError(f"Source URL must be a non-empty string (or a list of them), got {url!r}.")
    kind = format or guess_format(url if isinstance(url, str) else url[0])
    source = _opener(kind)(url, variable, storage_options=dict(storage_options or {}), **options)
    changes: dict[str, Any] = {"url": redact_url(source.url)}
    if name:
        changes["name"] = name
    if storage_options:
        changes["options"] = {**source.options, "storage_options": redact_options(storage_options)}
    check_readable(source.array, source.url)
    return _replace(source, **changes)


def choose_variable(variable: str | None, candidates: list[str], available, url: str,
                    listed=None) -> str:
    """The variable to read: the one asked for, or the only candidate; else a one-line error.

    ``candidates`` are the data variables worth measuring, ``available`` every name that
    may be asked for, ``listed`` what the not-found message lists (default ``available``).
    """
    if variable is None:
        if len(candidates) != 1:
            raise UsageError(f"Name a variable to read from '{redact_url(url)}'; it has {candidates}.")
        return candidates[0]
    if variable not in available:
        names = sorted(map(str, available if listed is None else listed))
        raise VariableNotFoundError(f"Variable '{variable}' not found in '{redact_url(url)}'. Variables: {names}.")
    return variable


def check_readable(array: da.Array, url: str) -> None:
    """Refuse arrays a throughput run cannot mean anything for."""
    if array.size == 0:
        raise UsageError(f"The array at '{redact_url(url)}' is empty (shape {array.shape}); nothing to read.")
    max_chunks = config.get("sweep.max-chunks", 1_000_000)
    nchunks = math.prod(array.numblocks)
    if nchunks > max_chunks:
        raise UsageError(f"The array at '{redact_url(url)}' has {nchunks} chunks (shape {array.shape}, chunks "
                         f"{array.chunksize}); at most {max_chunks} can be scheduled: use larger chunks.")
    max_chunk = config.get("sweep.max-chunk-bytes", 2**34)
    chunk_bytes = math.prod(array.chunksize) * array.dtype.itemsize
    if chunk_bytes > max_chunk:
        raise UsageError(f"One chunk of the array at '{redact_url(url)}' is {chunk_bytes} bytes (chunks "
                         f"{array.chunksize}); at most {max_chunk} bytes fit a worker: use smaller chunks.")
    if array.dtype.kind in ("O", "T"):  # Python objects, variable-width strings
        raise UsageError(f"The array at '{redact_url(url)}' has object dtype ({array.dtype}); only fixed-size "
                         "numeric arrays can be measured.")


def _replace(source: Source, **changes: Any) -> Source:
    import dataclasses

    return dataclasses.replace(source, **changes)


def default_name(url: str) -> str:
    """A short name for a source: the last non-empty part of its path."""
    path = redact_url(url).split("?")[0].rstrip("/")
    return path.rsplit("/", 1)[-1] or path
