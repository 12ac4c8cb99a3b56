"""Small datasets shaped like the seed's GFDL CM2.6 ocean ``temp`` array, made on the spot.

The seed's array is float32 (time=240, st_ocean=50, yt_ocean=2700, xt_ocean=3600) in
chunks of (1, 5, 2700, 3600) = 194.4 MB. The default here keeps the layout (4-D,
one time step and five levels per chunk, whole horizontal planes) at a tenth of
the horizontal size: (12, 20, 270, 360) in chunks of 1.944 MB, 48 chunks, 93.3 MB.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

DEFAULT_SHAPE = (12, 20, 270, 360)


def gfdl_like(shape: tuple[int, int, int, int] = DEFAULT_SHAPE, levels_per_chunk: int = 5, seed: int = 0) -> xr.Dataset:
    """A dataset with a ``temp`` variable like GFDL CM2.6's: smooth field plus noise, CF attributes."""
    nt, nz, ny, nx = shape
    rng = np.random.default_rng(seed)
    lat = np.linspace(-81.1, 89.98, ny)
    lon = np.linspace(-279.95, 79.95, nx)
    depth = np.geomspace(5.03, 5395.0, nz)
    surface = 28 * np.cos(np.deg2rad(lat))[:, None] - 2 + 0 * lon[None, :]
    profile = np.exp(-depth / 800.0)[:, None, None]
    season = 1.5 * np.sin(2 * np.pi * np.arange(nt) / 12.0)[:, None, None, None]
    temp = (profile * surface[None] + season + rng.normal(0, 0.05, (nt, nz, ny, nx))).astype("float32")
    chunks = (1, min(levels_per_chunk, nz), ny, nx)
    ds = xr.Dataset(
        {"temp": (("time", "st_ocean", "yt_ocean", "xt_ocean"), temp, {
            "long_name": "Potential temperature", "standard_name": "sea_water_potential_temperature",
            "units": "degrees C", "cell_methods": "time: mean", "valid_range": [-10.0, 500.0]})},
        coords={
            "time": ("time", 181 * 365.25 + 30.4375 * np.arange(nt) + 15,
                     {"units": "days since 0001-01-01 00:00:00", "calendar": "julian", "long_name": "time"}),
            "st_ocean": ("st_ocean", depth, {"long_name": "tcell zstar depth", "units": "meters", "positive": "down"}),
            "yt_ocean": ("yt_ocean", lat, {"long_name": "tcell latitude", "units": "degrees_N"}),
            "xt_ocean": ("xt_ocean", lon, {"long_name": "tcell longitude", "units": "degrees_E"}),
        },
        attrs={"title": "GFDL CM2.6-like ocean temperature (synthetic, made by throughput)",
               "source": "throughput.datasets.gfdl_like"},
    )
    ds["temp"].encoding["chunks"] = chunks
    return ds


def write_zarr(ds: xr.Dataset, url: str, storage_options: dict[str, Any] | None = None,
               zarr_format: int = 2, consolidated: bool | None = None) -> str:
    """Write a dataset as a Zarr store (v2 or v3) to any fsspec URL; returns the URL.

    Metadata is consolidated by default for v2 (as Pangeo stores are) and not for v3,
    where consolidation is not part of the specification.
    """
    if consolidated is None:
        consolidated = zarr_format == 2
    encoding = {name: {"chunks": var.encoding["chunks"]} for name, var in ds.data_vars.items()
                if "chunks" in var.encoding}
    ds.to_zarr(url, mode="w", storage_options=storage_options or None, zarr_format=zarr_format,
               consolidated=consolidated, encoding=encoding, compute=True)
    return url


def write_netcdf(ds: xr.Dataset, url: str, storage_options: dict[str, Any] | None = None,
                 compression: str | None = "zlib", complevel: int = 1,
                 unlimited_dims: tuple[str, ...] = ("time",)) -> str:
    """Write a dataset as one NetCDF4/HDF5 file to any fsspec URL; returns the URL.

    Each variable keeps the HDF5 chunking in its ``encoding["chunks"]`` (the same
    chunks the Zarr copy has), compressed with ``compression`` (``None`` for raw
    chunks) and byte shuffle, like most model output. ``time`` is the record
    (unlimited) dimension, as in files written by climate models.
    HDF5 needs a seekable local file to write, so the file is written to a temporary
    folder and then copied to ``url`` with fsspec.
    """
    import os
    import tempfile

    import fsspec

    encoding: dict[str, dict[str, Any]] = {}
    for name, var in ds.data_vars.items():
        enc: dict[str, Any] = {}
        if "chunks" in var.encoding:
            enc["chunksizes"] = var.encoding["chunks"]
        if compression:
            enc.update(compression=compression, compression_opts=complevel, shuffle=True)
        encoding[name] = enc
    unlimited = [d for d in unlimited_dims if d in ds.dims]
    with tempfile.TemporaryDirectory(prefix="throughput-nc-") as tmp:
        local = os.path.join(tmp, "data.nc")
        ds.to_netcdf(local, engine="h5netcdf", encoding=encoding, unlimited_dims=unlimited)
        fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
        if "file" in fs.protocol:  # object stores have no folders to make
            fs.makedirs(fs._parent(path), exist_ok=True)
        fs.put_file(local, path)
    return url
