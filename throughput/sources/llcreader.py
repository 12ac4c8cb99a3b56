"""MITgcm LLC model output through xmitgcm's ``llcreader`` (the NASA ECCO data portal, the seed's source).

This module is the example of a source kind that is a plugin around another reader:
one function that returns a :class:`~throughput.sources.Source`, and one line in
:data:`~throughput.sources.SOURCE_KINDS` (or an entry point in the
``throughput.sources`` group, for a kind that lives in another package). xmitgcm is
optional: without it, opening fails with the install hint.

URL form: ``llcreader://MODEL`` where ``MODEL`` is a class of ``xmitgcm.llcreader``,
for example ``llcreader://ECCOPortalLLC2160Model`` (the portal the seed read). A model
class without its own store (``LLC90Model``, ``LLC2160Model`` ...) reads a copy of the
MDS files at ``base_path`` (any fsspec URL, with ``storage_options``).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any
from urllib.parse import urlsplit

from ..errors import ThroughputError, UsageError, VariableNotFoundError, missing_dependency
from ..redact import redact_url
from ..storage import storage_errors, storage_library
from . import Source

#: options passed to ``model.get_dataset``
DATASET_OPTIONS = ("iters", "iter_start", "iter_stop", "iter_step", "k_levels", "k_chunksize", "type")


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return ""


def _llcreader():
    try:
        from xmitgcm import llcreader
    except ImportError as exc:
        if exc.name and exc.name.split(".")[0] != "xmitgcm":
            raise missing_dependency(exc.name, "llcreader sources (needed by xmitgcm)") from None
        raise missing_dependency("xmitgcm", "llcreader sources (MITgcm LLC output, the ECCO data portal)") from None
    return llcreader


def _model(llcreader, name: str, base_path: str | None, storage_options: dict[str, Any], shrunk: bool):
    models = sorted(n for n in dir(llcreader) if n.endswith("Model") and not n.startswith("Base"))
    cls = getattr(llcreader, name, None)
    if name not in models or cls is None:
        raise UsageError(f"Unknown llcreader model '{name}'. Must be one of {models}.")
    if base_path is None:
        try:
            return cls()  # portal and cluster models know where their files are
        except TypeError:
            raise UsageError(f"llcreader model '{name}' needs base_path: the URL of its MDS files.") from None
    import fsspec

    fs, path = fsspec.core.url_to_fs(base_path, **storage_options)
    store = llcreader.stores.BaseStore(fs, base_path=path if fs.protocol in ("file", "local") else base_path,
                                       shrunk=shrunk)
    return cls(store)


def open_llcreader(
    url: str,
    variable: str | None,
    *,
    storage_options: dict[str, Any],
    base_path: str | None = None,
    shrunk: bool = False,
    read_grid: bool = False,
    chunks: Any = None,
    **options: Any,
) -> Source:
    """Open one variable of an LLC model run lazily with ``xmitgcm.llcreader``.

    Parameters
    ----------
    url
        ``llcreader://MODEL``, a model class of ``xmitgcm.llcreader``.
    variable
        The model variable (``Theta``, ``Salt``, ``Eta`` ...).
    base_path, storage_options, shrunk
        Where a model class without its own store finds its MDS files.
    read_grid
        Read the grid too (off: only the variable's bytes are measured).
    chunks
        Rechunk the dask array (default: llcreader's own chunks).
    **options
        Passed to ``model.get_dataset``: iters, iter_start, iter_stop, iter_step,
        k_levels, k_chunksize, type.
    """
    unknown = set(options) - set(DATASET_OPTIONS)
    if unknown:
        raise UsageError(f"Unknown option(s) for llcreader sources: {sorted(unknown)}. "
                         f"Accepted: {', '.join(DATASET_OPTIONS)}, base_path, shrunk, read_grid, chunks.")
    llcreader = _llcreader()
    parts = urlsplit(url)
    if parts.scheme != "llcreader" or not parts.netloc:
        raise UsageError(f"Bad llcreader URL '{redact_url(url)}': write it as llcreader://MODEL, "
                         "like llcreader://ECCOPortalLLC2160Model.")
    if not variable:
        raise UsageError(f"Name a variable to read from '{url}' (for example Theta, Salt or Eta).")
    with storage_errors(base_path or url, storage_options):
        model = _model(llcreader, parts.netloc, base_path, storage_options, shrunk)
        known = list(getattr(model, "varnames", []))
        if known and variable not in known:
            raise VariableNotFoundError(f"Variable '{variable}' not found in {parts.netloc}. Variables: {sorted(known)}.")
        ds = model.get_dataset(varnames=[variable], read_grid=read_grid, **options)
    if ds is None:
        # xmitgcm 0.5.2 (its last release on PyPI) ends get_dataset with `ds = ds.update(...)`,
        # and current xarray's Dataset.update returns None: nothing to read, so say why
        import xarray

        raise ThroughputError(
            f"xmitgcm {_version('xmitgcm')} returned no dataset for '{url}' with xarray {xarray.__version__} "
            "(its get_dataset relies on Dataset.update returning the dataset, which this xarray does not). "
            "Use an xmitgcm release that supports this xarray, or an older xarray.")
    array = ds[variable].data
    if chunks is not None:
        array = array.rechunk(chunks)
    fs = getattr(model.store, "fs", None)
    moved_by = storage_library(base_path) if base_path else (
        f"fsspec {version('fsspec')}" if fs is not None else "")
    reader = f"xmitgcm {_version('xmitgcm')}".strip()
    recorded = {k: v for k, v in options.items() if v is not None}
    if base_path:
        recorded["base_path"] = redact_url(base_path)
    return Source(
        name=f"{parts.netloc}-{variable}", format="llcreader", url=url, variable=variable, array=array,
        storage_library=", ".join(filter(None, [reader, moved_by])), options=recorded,
        dims=tuple(str(d) for d in ds[variable].dims), attrs=dict(ds[variable].attrs),
    )
