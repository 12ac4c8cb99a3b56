"""NetCDF4/HDF5 files on any fsspec URL, read lazily with h5netcdf/h5py over fsspec file objects.

One file, a glob (``s3://bucket/run/ocean_*.nc``) or a list of files concatenated
along a dimension (by default the record, i.e. unlimited, dimension). Each remote
file is opened with ``fs.open(path, cache_type=..., block_size=...)`` and handed to
xarray's h5netcdf engine, which wraps it in a file manager that pickles by reopening
the file: every Dask worker opens its own copy with the same cache settings.

Dask chunks follow the file's own HDF5 chunks unless ``chunks`` is given, so each
task reads one HDF5 chunk with one ranged request.
"""

from __future__ import annotations

import atexit
import contextlib
import re
import threading
import uuid
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import dask.array as da
import fsspec
import numpy as np

from .. import config
from ..errors import SourceNotFoundError, UsageError, missing_dependency
from ..redact import redact_text, redact_url
from ..storage import filesystem_class, protocol_of, storage_errors, storage_library
from . import Source, choose_variable, default_name

#: fs.open options for remote files, measured on a real S3 store (see README, "NetCDF/HDF5").
#: "first" keeps the file's first block (superblock, object headers and, for files
#: written in one go, most of the chunk index) and fetches each chunk with one
#: request of exactly its size; "readahead" (s3fs's default, 50 MiB blocks) fetches
#: far beyond every chunk and was several times slower.
DEFAULT_OPEN_OPTIONS: dict[str, Any] = {"cache_type": "first", "block_size": 2**20}

_GLOB = re.compile(r"[*?\[]")
_OPTIONS = ("chunks", "concat_dim", "open_options")


def _libraries(url: str) -> str:
    names = [] if protocol_of(url) == "file" else [storage_library(url)]
    for package in ("h5netcdf", "h5py"):
        try:
            names.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            names.append(package)
    return ", ".join(names)


def open_options_for(url: str, open_options: dict[str, Any] | None) -> dict[str, Any]:
    """The ``fs.open`` options for a remote file: defaults (config), then the user's."""
    chosen = {**config.get("sources.netcdf.open-options", DEFAULT_OPEN_OPTIONS), **(open_options or {})}
    chosen = {k.replace("-", "_"): v for k, v in chosen.items()}
    cache_type = chosen.get("cache_type")
    if cache_type is not None and cache_type not in fsspec.caching.caches:
        known = sorted(k for k in fsspec.caching.caches if k)
        raise UsageError(f"Unknown cache_type '{cache_type}' in open_options. Must be one of {known}.")
    block = chosen.get("block_size")
    if block is not None and (isinstance(block, bool) or not isinstance(block, int) or block < 1):
        raise UsageError(f"Bad block_size {block!r} in open_options: must be a positive number of bytes, like 4194304.")
    return chosen


def _expand(urls: Sequence[str], storage_options: dict[str, Any]) -> tuple[fsspec.AbstractFileSystem, list[str]]:
    """The filesystem and the (sorted, expanded) paths of every file, or a clear error."""
    protocols = {protocol_of(u) for u in urls}
    if len(protocols) > 1:
        raise UsageError(f"All NetCDF files of one source must use one protocol; got {sorted(protocols)}.")
    filesystem_class(urls[0])  # clear error for an unknown protocol or a missing backend
    fs, _ = fsspec.core.url_to_fs(urls[0], **storage_options)
    paths: list[str] = []
    for url in urls:
        path = fs._strip_protocol(url)
        if _GLOB.search(path):
            found = sorted(fs.glob(path))
            if not found:
                raise SourceNotFoundError(f"No files match '{redact_url(url)}'.")
            paths += found
        else:
            paths.append(path)
    return fs, paths


def _open_dataset(fs: fsspec.AbstractFileSystem, path: str, url: str, open_kwargs: dict[str, Any] | None):
    import xarray as xr

    # local files go to h5py's own POSIX driver; remote ones through an fsspec file object
    target = path if open_kwargs is None else fs.open(path, mode="rb", **open_kwargs)
    try:
        # times and coordinates are not what is measured: skip decoding them (no cftime needed)
        return xr.open_dataset(target, engine="h5netcdf", chunks=None, decode_times=False,
                               decode_timedelta=False, decode_coords=False)
    except (OSError, ValueError) as exc:
        if isinstance(exc, FileNotFoundError) or "signature" not in str(exc) and "HDF5" not in str(exc):
            raise
        msg = (f"'{redact_url(url)}' is not a NetCDF4/HDF5 file ({redact_text(exc)}). "
               "netCDF3 (classic) files cannot be read with h5netcdf.")
        raise UsageError(msg) from None


_opened: dict[tuple, Any] = {}
_opened_lock = threading.Lock()


@atexit.register
def _close_opened() -> None:
    """Close cached files before interpreter teardown (h5py cannot close them after)."""
    with _opened_lock:
        for ds in _opened.values():
            with contextlib.suppress(Exception):
                ds.close()
        _opened.clear()


class FileVariable:
    """One variable of one file, opened in the process that reads it (once per process).

    xarray's own file managers reopen a file whenever they are unpickled, and the
    distributed scheduler unpickles every graph it receives: the scheduler would
    open every remote file of every run. This reader pickles as a few strings and
    opens the file on first read, in the worker; xarray still decodes the values.
    """

    def __init__(self, fs, path: str, open_kwargs: dict[str, Any] | None, variable: str, shape, dtype):
        self.fs, self.path, self.open_kwargs, self.variable = fs, path, open_kwargs, variable
        self.shape, self.dtype, self.ndim = tuple(shape), np.dtype(dtype), len(shape)

    def _dataset(self):
        key = (self.fs._fs_token, self.path, repr(sorted((self.open_kwargs or {}).items())))
        with _opened_lock:
            if key not in _opened:
                _opened[key] = _open_dataset(self.fs, self.path, self.fs.unstrip_protocol(self.path),
                                             self.open_kwargs)
            return _opened[key]

    def __getitem__(self, key) -> np.ndarray:
        return np.asarray(self._dataset()[self.variable].variable[key].values)


def _lazy(fs, path: str, open_kwargs, variable: str, var, spec) -> da.Array:
    """The variable as a dask array read by :class:`FileVariable` in the dask chunks ``spec``."""
    chunks = var.chunk(spec).chunks  # chunk shapes only; nothing of the open file enters the graph
    reader = FileVariable(fs, path, open_kwargs, variable, var.shape, var.dtype)
    return da.from_array(reader, chunks=chunks, lock=False, asarray=False,
                         meta=np.empty((0,) * var.ndim, dtype=var.dtype),
                         name=f"netcdf-{variable}-{uuid.uuid4().hex[:8]}")


def _data_variables(ds) -> list[str]:
    names = [str(n) for n in ds.data_vars]
    return sorted(n for n in names if ds[n].ndim > 1) or sorted(names)


def _chunk_spec(var, chunks: Any) -> tuple[Any, str]:
    """The dask chunks for one variable and how they were chosen."""
    if chunks is not None:
        return chunks, "user"
    sizes = var.encoding.get("chunksizes")
    if sizes:
        return dict(zip(var.dims, sizes)), "file"
    return "auto", "auto (contiguous variable)"  # dask's array.chunk-size


def _record_dim(ds, dims: tuple[str, ...]) -> str:
    unlimited = [d for d in ds.encoding.get("unlimited_dims", ()) if d in dims]
    if unlimited:
        return unlimited[0]
    return "time" if "time" in dims else dims[0]


def _url_label(urls: list[str], paths: list[str], fs) -> str:
    if len(urls) == 1:
        return redact_url(urls[0])
    full = [redact_url(fs.unstrip_protocol(p)) for p in paths]
    return ",".join(full) if len(full) <= 3 else f"{full[0]},...,{full[-1]}"


def open_netcdf(
    url: str | Sequence[str],
    variable: str | None,
    *,
    storage_options: dict[str, Any],
    chunks: Any = None,
    concat_dim: str | None = None,
    open_options: dict[str, Any] | None = None,
    **options: Any,
) -> Source:
    """Open one variable of one or many NetCDF4/HDF5 files lazily.

    Parameters
    ----------
    url
        A file URL, a glob of files, or a list of them (any fsspec protocol).
    variable
        The variable to read; optional when the files hold one data variable.
    storage_options
        Passed untouched to fsspec (``anon``, ``endpoint_url``, ``requester_pays``, ``token`` ...).
    chunks
        Dask chunks (anything ``xarray.DataArray.chunk`` accepts); default: the file's
        own HDF5 chunks, or dask's ``"auto"`` for a contiguous variable.
    concat_dim
        Dimension along which many files are concatenated; default: the record
        (unlimited) dimension, else ``time``, else the variable's first dimension.
    open_options
        Options of ``fs.open`` for remote files, such as ``cache_type`` and
        ``block_size``; they override :data:`DEFAULT_OPEN_OPTIONS` (or the config
        key ``throughput.sources.netcdf.open-options``) and are recorded in the row.
    """
    if options:
        raise UsageError(f"Unknown option(s) for netcdf sources: {sorted(options)}. "
                         f"Accepted: {', '.join(_OPTIONS)}, storage_options.")
    try:
        import h5netcdf  # noqa: F401
    except ImportError:
        raise missing_dependency("h5netcdf", "netcdf sources", "netcdf") from None
    urls = [url] if isinstance(url, str) else list(url)
    if not urls or not all(isinstance(u, str) and u.strip() for u in urls):
        raise UsageError(f"NetCDF source URLs must be non-empty strings, got {url!r}.")
    remote = protocol_of(urls[0]) != "file"
    open_kwargs = open_options_for(urls[0], open_options) if remote else None
    if not remote and open_options:
        raise UsageError("open_options apply to remote files only; local files are read with h5py directly.")

    with storage_errors(urls[0], storage_options):
        fs, paths = _expand(urls, storage_options)
        first = _open_dataset(fs, paths[0], fs.unstrip_protocol(paths[0]) if remote else paths[0], open_kwargs)
        names = _data_variables(first)
        where = urls[0] if variable is None else fs.unstrip_protocol(paths[0])
        variable = choose_variable(variable, names, first.variables, where, listed=first.data_vars)
        var = first[variable]
        dims = tuple(str(d) for d in var.dims)
        spec, chunking = _chunk_spec(var, chunks)
        dim = None
        if len(paths) > 1:
            dim = concat_dim or _record_dim(first, dims)
            if dim not in dims:
                raise UsageError(f"Cannot concatenate along '{dim}': '{variable}' has dimensions {list(dims)}.")
        parts = [_lazy(fs, paths[0], open_kwargs, variable, var, spec)]
        for path in paths[1:]:
            ds = _open_dataset(fs, path, fs.unstrip_protocol(path), open_kwargs)
            if variable not in ds.variables or tuple(map(str, ds[variable].dims)) != dims:
                raise UsageError(f"'{redact_url(fs.unstrip_protocol(path))}' has no variable '{variable}' with "
                                 f"dimensions {list(dims)}; every file must hold it to be concatenated.")
            parts.append(_lazy(fs, path, open_kwargs, variable, ds[variable], _chunk_spec(ds[variable], chunks)[0]))
    arrays = parts
    try:
        array = arrays[0] if len(arrays) == 1 else da.concatenate(arrays, axis=dims.index(dim))
    except ValueError as exc:
        raise UsageError(f"The files of '{redact_url(urls[0])}' cannot be concatenated along '{dim}': {exc}") from None
    recorded: dict[str, Any] = {"chunking": chunking, "nfiles": len(paths)}
    if dim:
        recorded["concat_dim"] = dim
    if remote:
        recorded["open_options"] = open_kwargs
    return Source(
        name=default_name(urls[0]), format="netcdf", url=_url_label(urls, paths, fs), variable=variable,
        array=array, storage_library=_libraries(urls[0]), options=recorded, dims=dims,
        attrs={k: v for k, v in var.attrs.items() if isinstance(v, (str, int, float))},
    )
