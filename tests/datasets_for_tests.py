"""Small NetCDF layouts the file-source tests need beyond throughput.datasets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from throughput.datasets import write_netcdf


def split_netcdf(ds: xr.Dataset, pattern: str, storage_options: dict[str, Any], nfiles: int = 2) -> list[str]:
    """Write ``ds`` as ``nfiles`` files along time (like one file per model year); returns their URLs."""
    step = ds.sizes["time"] // nfiles
    urls = []
    for i in range(nfiles):
        part = ds.isel(time=slice(i * step, (i + 1) * step))
        part["temp"].encoding = dict(ds["temp"].encoding)
        urls.append(write_netcdf(part, pattern.format(i), storage_options))
    return urls


def packed_netcdf(ds: xr.Dataset, path: Path) -> Path:
    """``temp`` stored as int16 with scale_factor/add_offset (CF packing), HDF5 chunks as in ``ds``."""
    encoding = {"temp": {"dtype": "int16", "scale_factor": np.float32(0.01), "add_offset": np.float32(10.0),
                         "_FillValue": np.int16(-32767), "chunksizes": ds["temp"].encoding["chunks"]}}
    ds.to_netcdf(path, engine="h5netcdf", encoding=encoding, unlimited_dims=["time"])
    return path
