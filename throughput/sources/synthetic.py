"""Synthetic arrays made on the workers: no storage I/O, so they measure the harness alone.

URL form: ``synthetic://NAME?shape=240,50,270,360&chunks=1,5,270,360&dtype=float32``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import dask.array as da
import numpy as np

from ..errors import UsageError
from . import Source

DEFAULTS = {"shape": "12,20,270,360", "chunks": "1,5,270,360", "dtype": "float32"}


def _ints(text: str, what: str, url: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        values = ()
    if not values or any(v <= 0 for v in values):
        raise UsageError(f"Bad {what} '{text}' in '{url}': must be positive integers separated by commas, like 12,20,270,360.")
    return values


def open_synthetic(url: str, variable: str | None, *, storage_options: dict[str, Any], **options: Any) -> Source:
    """A dask array of ones whose chunks are made where the task runs (nearly free)."""
    if options:
        raise UsageError(f"Unknown option(s) {sorted(options)} for synthetic sources: they take none; "
                         f"set {sorted(DEFAULTS)} in the URL, like synthetic://t?shape=4,4&chunks=2,2.")
    parts = urlsplit(url)
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    unknown = set(query) - set(DEFAULTS)
    if unknown:
        raise UsageError(f"Unknown parameter(s) {sorted(unknown)} in '{url}'. Accepted: {sorted(DEFAULTS)}.")
    params = {**DEFAULTS, **query}
    shape = _ints(params["shape"], "shape", url)
    chunks = _ints(params["chunks"], "chunks", url)
    if len(chunks) != len(shape):
        raise UsageError(f"chunks {chunks} and shape {shape} in '{url}' must have the same number of dimensions.")
    try:
        dtype = np.dtype(params["dtype"])
    except TypeError:
        raise UsageError(f"Unknown dtype '{params['dtype']}' in '{url}'. Use a numpy dtype such as float32.") from None
    name = variable or parts.netloc or "synthetic"
    array = da.ones(shape, chunks=chunks, dtype=dtype, name=f"synthetic-{name}")
    return Source(name=name, format="synthetic", url=url, variable=name, array=array,
                  storage_library="none", options={})
