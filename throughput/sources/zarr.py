"""Zarr stores (v2 with or without consolidated metadata, and v3) on any fsspec URL.

Chunks are read through fsspec (``store="fsspec"``, the default: s3fs, gcsfs, aiohttp
...) or, opt-in, through obstore's Rust client (``store="obstore"``: s3://, gs://,
http(s):// and local paths; see :mod:`throughput.obstores`).
"""

from __future__ import annotations

import math
import uuid
from typing import Any

import dask.array as da
import zarr
from zarr.storage import FsspecStore

from ..errors import SourceNotFoundError, UsageError, VariableNotFoundError
from ..instrument import CountingStore
from ..obstores import obstore_zarr_store
from ..redact import redact_url
from ..storage import (
    check_reachable,
    filesystem_class,
    protocol_of,
    storage_errors,
    storage_library,
)
from . import Source, choose_variable, default_name

#: the clients a Zarr source can read its chunks with (the ``store`` option)
STORE_CLIENTS = ("fsspec", "obstore")

#: s3fs reads objects larger than this (its ``default_block_size``) as concurrent ranged GETs
S3FS_SPLIT_BYTES = 50 * 2**20


def _store(url: str, storage_options: dict[str, Any], client: str = "fsspec") -> CountingStore:
    if client == "obstore":
        store = obstore_zarr_store(url, storage_options)  # options translated (or refused) first, no I/O
        check_reachable(url, storage_options)
        return CountingStore(store)
    filesystem_class(url)  # clear error for an unknown protocol or a missing backend
    check_reachable(url, storage_options)
    if "://" not in url:
        url = "file://" + url
    fs_opts = {"asynchronous": True, **storage_options} if not url.startswith("file://") else storage_options
    # counted: requests, bytes as stored and latency of every chunk read (throughput.instrument)
    return CountingStore(FsspecStore.from_url(url, storage_options=fs_opts, read_only=True))


def lean_s3_options(url: str, storage_options: dict[str, Any], chunk_bytes: int) -> dict[str, Any]:
    """s3fs options that drop a wasted request per chunk, when the user has not chosen.

    With its default ``max_concurrency`` (10), s3fs starts every whole-object read with a
    HEAD request, to decide whether the object is large enough (> 50 MiB) to fetch as
    concurrent ranged GETs. A Zarr chunk no larger than that is always one GET, so the
    HEAD only doubles the requests (and, on loopback, costs about a third of the read
    time). Returns ``storage_options`` plus ``max_concurrency=1`` in that case, else
    unchanged. The choice is recorded in the source's options.
    """
    if protocol_of(url) not in ("s3", "s3a") or "max_concurrency" in storage_options:
        return storage_options
    if chunk_bytes * 1.01 + 4096 > S3FS_SPLIT_BYTES:  # a stored chunk might be split: keep s3fs's way
        return storage_options
    return {**storage_options, "max_concurrency": 1}


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
    lean_s3: bool = True,
    store: str = "fsspec",
    **options: Any,
) -> Source:
    """Open one array of a Zarr store lazily; its dask chunks are the store's chunks.

    ``store`` picks the client that reads the chunks: ``"fsspec"`` (default) or
    ``"obstore"`` (Rust, s3://, gs://, http(s):// and local paths; ``storage_options``
    in s3fs/gcsfs style are translated by :func:`throughput.obstores.obstore_options`).
    ``lean_s3`` (default true, fsspec only) lets :func:`lean_s3_options` drop s3fs's HEAD
    request per chunk when the user's ``storage_options`` do not set ``max_concurrency``.
    """
    if options:
        raise UsageError(f"Unknown option(s) for zarr sources: {sorted(options)}. "
                         "Accepted: chunks, lean_s3, storage_options, store.")
    if store not in STORE_CLIENTS:
        raise UsageError(f"Unknown store {store!r} for zarr sources. Must be one of: {', '.join(STORE_CLIENTS)}.")
    array, variable = _open_array(url, variable, storage_options, store)
    extra: dict[str, Any] = {"store": store} if store != "fsspec" else {}
    if lean_s3 and store == "fsspec":
        stored_chunk = getattr(array, "shards", None) or array.chunks  # the object s3fs reads whole
        lean = lean_s3_options(url, storage_options, int(array.dtype.itemsize * math.prod(stored_chunk)))
        if lean is not storage_options:
            array, variable = _open_array(url, variable, lean)
            extra["s3fs_max_concurrency"] = 1
    try:
        lazy = da.from_zarr(array, chunks=chunks, name=f"zarr-{variable}-{uuid.uuid4().hex[:8]}")
    except (ValueError, TypeError) as exc:  # dask's own check of the chunks option
        raise UsageError(f"Bad chunks {chunks!r} for '{redact_url(url)}' ({str(exc).splitlines()[0]}): give "
                         "elements per dimension like 1,5,270,360, 'auto', or a size like 100MB.") from None
    return Source(
        name=default_name(url), format="zarr", url=url, variable=variable, array=lazy,
        storage_library=storage_library(url, store), dims=_dims(array), attrs=dict(array.attrs),
        options={"zarr_format": array.metadata.zarr_format, **extra},
    )


def _open_array(url: str, variable: str | None, storage_options: dict[str, Any],
                client: str = "fsspec") -> tuple[zarr.Array, str]:
    with storage_errors(url, storage_options):
        store = _store(url, storage_options, client)
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
            arrays = list(node.array_keys())
            if variable is not None and variable not in arrays and variable in node.group_keys():
                raise VariableNotFoundError(f"'{variable}' in '{redact_url(url)}' is a group, not an array. "
                                            f"Arrays: {sorted(arrays)}.")
            variable = choose_variable(variable, names, arrays, url)
            array = node[variable]
        else:
            array = node
            variable = variable or default_name(url)
    return array, variable
