"""A source kind that lives outside throughput: raw big-endian binary files (like MITgcm's MDS).

Used by the plugin tests, registered by name (``register_source_kind``) and through
an entry point. Each dask block is one ranged read of the file through fsspec.
"""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import urlsplit

import dask.array as da
import fsspec
import numpy as np

from throughput.sources import Source, default_name
from throughput.storage import storage_errors, storage_library


def read_block(fs: fsspec.AbstractFileSystem, path: str, dtype: str, shape: tuple[int, ...], index: int) -> np.ndarray:
    """Read one leading-axis slab: one ranged GET."""
    nbytes = math.prod(shape[1:]) * np.dtype(dtype).itemsize
    data = fs.cat_file(path, start=index * nbytes, end=(index + 1) * nbytes)
    return np.frombuffer(data, dtype=dtype).reshape((1, *shape[1:]))


def open_rawbinary(url: str, variable: str | None, *, storage_options: dict[str, Any],
                   shape: tuple[int, ...], dtype: str = ">f4") -> Source:
    """``rawbinary://BUCKET/KEY`` on S3 (or any fsspec URL) holding a C-ordered array."""
    real = "s3://" + url.split("://", 1)[1] if url.startswith("rawbinary://") else url
    shape = tuple(int(s) for s in shape)
    with storage_errors(real, storage_options):
        fs, path = fsspec.core.url_to_fs(real, **storage_options)
        size = fs.size(path)
    expected = math.prod(shape) * np.dtype(dtype).itemsize
    if size != expected:
        raise ValueError(f"{real} holds {size} bytes, not {expected} for shape {shape} {dtype}")
    blocks = [da.from_delayed(_delayed(fs, path, dtype, shape, i), (1, *shape[1:]), dtype=np.dtype(dtype))
              for i in range(shape[0])]
    array = da.concatenate(blocks, axis=0)
    name = variable or urlsplit(real).path.rsplit("/", 1)[-1]
    return Source(name=default_name(real), format="rawbinary", url=real, variable=name, array=array,
                  storage_library=storage_library(real), options={"dtype": dtype})


def _delayed(fs, path, dtype, shape, index):
    import dask

    return dask.delayed(read_block, pure=True)(fs, path, dtype, shape, index)
