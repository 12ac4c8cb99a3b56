"""Zarr stores (v2 with or without consolidated metadata, and v3) on any fsspec URL."""

from __future__ import annotations

import uuid
from typing import Any

import dask.array as da
import zarr
from zarr.storage import FsspecStore

from ..errors import SourceNotFoundError, UsageError, VariableNotFoundError
from ..redact import redact_url
from ..storage import filesystem_class, storage_errors, storage_library
from . import Source, default_name


def _store(url: str, storage_options: dict[str, Any]) -> FsspecStore:
    filesystem_class(url)  # clear error for an unknown protocol or a missing backend
    if "://" not in url:
        url = "file://" + url
    fs_opts = {"asynchronous": True, **storage_options} if not url.startswith("file://") else storage_options
    return FsspecStore.from_url(url, storage_options=fs_opts, read_only=True)


def data_variables(group: zarr.Group) -> list[str]:
    """Arrays of a group that are not 1-D coordinates (the ones worth measuring)."""
    names = sorted(group.array_keys())
    coords = {n for n in names if group[n].ndim <= 1}
    return [n for n in names if n not in coords] or names


def _dims(array: zarr.Array) -> tuple[str, ...]:
    names = getattr(array.metadata, "dimension_names", None)
    if names:
        return tuple(str(n) for n in names)
    return tuple(array.attrs.get("_ARRAY_DIMENSIONS", ()))


def open_zarr(
    url: str,
    variable: str | None,
    *,
    storage_options: dict[str, Any],
    chunks: Any = None,
    **options: Any,
) -> Source:
    """Open one array of a Zarr store lazily; its dask chunks are the store's chunks."""
    if options:
        raise UsageError(f"Unknown option(s) for zarr sources: {sorted(options)}. Accepted: chunks, storage_options.")
    with storage_errors(url, storage_options):
        store = _store(url, storage_options)
        try:
            node = zarr.open(store=store, mode="r")
        except FileNotFoundError:
            raise SourceNotFoundError(
                f"No Zarr store at '{redact_url(url)}' (no zarr.json, .zgroup or .zarray found)."
            ) from None
        if isinstance(node, zarr.Group):
            names = data_variables(node)
            if not names:
                msg = (f"The Zarr group at '{redact_url(url)}' lists no arrays. If it is served over plain "
                       "HTTP, the server cannot list folders: consolidate its metadata "
                       "(zarr.consolidate_metadata) or name the array's own URL.")
                raise SourceNotFoundError(msg)
            if variable is None:
                if len(names) != 1:
                    raise UsageError(f"Name a variable to read from '{redact_url(url)}'; it has {names}.")
                variable = names[0]
            if variable not in node.array_keys():
                raise VariableNotFoundError(
                    f"Variable '{variable}' not found in '{redact_url(url)}'. Variables: {sorted(node.array_keys())}."
                )
            array = node[variable]
        else:
            array = node
            variable = variable or default_name(url)
    lazy = da.from_zarr(array, chunks=chunks, name=f"zarr-{variable}-{uuid.uuid4().hex[:8]}")
    return Source(
        name=default_name(url), format="zarr", url=url, variable=variable, array=lazy,
        storage_library=storage_library(url), dims=_dims(array), attrs=dict(array.attrs),
        options={"zarr_format": array.metadata.zarr_format},
    )
