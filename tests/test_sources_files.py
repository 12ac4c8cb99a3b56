"""File-based sources against real servers on loopback: NetCDF/HDF5 and Zarr over S3
(SeaweedFS), plain HTTP (a threaded static server), gs:// (gcp-storage-emulator), and
S3-compatible options (endpoint, anonymous, requester pays)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid

import numpy as np
import pytest

import throughput
from throughput.cli import main
from throughput.errors import (
    MissingDependencyError,
    SourceNotFoundError,
    StorageUnreachableError,
    UsageError,
    VariableNotFoundError,
)
from throughput.servers import free_port
from throughput.servers.gcs import GCSEmulator
from throughput.servers.http import StaticHTTPServer
from throughput.sources.netcdf import DEFAULT_OPEN_OPTIONS
from throughput.sweep import run_sweep

from .conftest import SMALL_SHAPE
from .datasets_for_tests import packed_netcdf, split_netcdf

CHUNK_BYTES = 1 * 5 * SMALL_SHAPE[2] * SMALL_SHAPE[3] * 4
NBYTES = int(np.prod(SMALL_SHAPE)) * 4
NCHUNKS = SMALL_SHAPE[0] * SMALL_SHAPE[1] // 5


def read_on_cluster(src, cluster, workers=(2,)):
    """Sweep the source once per worker count; every run must read exactly its bytes."""
    records = run_sweep(src, cluster, list(workers), repeats=1, labels={"cloud": "local"})
    for r in records:
        assert r.status == "ok", r.error
        assert r.bytes_received == src.nbytes == r.nbytes  # the sinks saw every decoded byte once
        assert r.nworkers == r.requested_workers
    return records


# --- fixtures: the same small dataset on every server ---------------------------------


@pytest.fixture(scope="session")
def s3_netcdf(seaweed, small_dataset):
    """One NetCDF file, the same split in two files along time, and a packed (int16) file."""
    from throughput.datasets import write_netcdf

    bucket = f"nc-{uuid.uuid4().hex[:8]}"
    seaweed.make_bucket(bucket)
    urls = {"one": write_netcdf(small_dataset, f"s3://{bucket}/ocean.nc", seaweed.storage_options)}
    urls["parts"] = split_netcdf(small_dataset, f"s3://{bucket}/parts/ocean_{{:02d}}.nc", seaweed.storage_options)
    urls["bucket"] = bucket
    return urls


@pytest.fixture(scope="session")
def http_server(tmp_path_factory, small_dataset):
    """A static server (no directory listings) with Zarr v2 (consolidated or not), v3 and NetCDF."""
    from throughput.datasets import write_netcdf, write_zarr

    folder = tmp_path_factory.mktemp("www")
    write_zarr(small_dataset, str(folder / "consolidated.zarr"), zarr_format=2)
    write_zarr(small_dataset, str(folder / "plain_v2.zarr"), zarr_format=2, consolidated=False)
    write_zarr(small_dataset, str(folder / "plain_v3.zarr"), zarr_format=3)
    write_netcdf(small_dataset, str(folder / "ocean.nc"))
    with StaticHTTPServer(folder) as server:
        yield server


@pytest.fixture(scope="session")
def gcs(small_dataset):
    """gcp-storage-emulator with the dataset as Zarr and as NetCDF."""
    from throughput.datasets import write_netcdf, write_zarr

    with GCSEmulator() as server:
        server.make_bucket("ocean")
        write_zarr(small_dataset, "gs://ocean/temp.zarr", server.storage_options, zarr_format=2)
        write_netcdf(small_dataset, "gs://ocean/temp.nc", server.storage_options)
        yield server


# --- NetCDF over S3 --------------------------------------------------------------------


def test_netcdf_on_s3_geometry_follows_hdf5_chunks(seaweed, s3_netcdf, small_dataset):
    src = throughput.open_source(s3_netcdf["one"], "temp", storage_options=seaweed.storage_options)
    assert src.format == "netcdf"
    assert (src.nbytes, src.chunksize, src.nchunks) == (NBYTES, CHUNK_BYTES, NCHUNKS)
    assert src.chunks == (1, 5, 27, 36) and src.dtype == "float32"
    assert src.dims == ("time", "st_ocean", "yt_ocean", "xt_ocean")
    assert src.storage_library.startswith("s3fs ") and ", h5netcdf " in src.storage_library
    assert ", h5py " in src.storage_library
    assert src.options["open_options"] == DEFAULT_OPEN_OPTIONS and src.options["chunking"] == "file"
    assert seaweed.secret_key not in repr(src.options)
    np.testing.assert_array_equal(src.array[2, 5:10].compute(scheduler="threads"), small_dataset.temp.values[2, 5:10])


def test_netcdf_on_s3_reads_exact_bytes_on_process_workers(seaweed, s3_netcdf, local_cluster):
    src = throughput.open_source(s3_netcdf["one"], "temp", storage_options=seaweed.storage_options, name="nc")
    records = read_on_cluster(src, local_cluster, [2, 1])
    r = records[0]
    assert (r.format, r.nbytes, r.chunksize, r.nchunks, r.chunks) == ("netcdf", NBYTES, CHUNK_BYTES, NCHUNKS, "1x5x27x36")
    assert r.storage_library == src.storage_library
    options = json.loads(r.options)  # the cache settings are in the row
    assert options["open_options"] == {"cache_type": "first", "block_size": DEFAULT_OPEN_OPTIONS["block_size"]}
    assert seaweed.secret_key not in r.options


def test_netcdf_open_options_override_and_validation(seaweed, s3_netcdf, local_cluster):
    src = throughput.open_source(s3_netcdf["one"], "temp", storage_options=seaweed.storage_options,
                                 open_options={"cache_type": "none"})
    assert src.options["open_options"] == {"cache_type": "none", "block_size": DEFAULT_OPEN_OPTIONS["block_size"]}
    assert json.loads(read_on_cluster(src, local_cluster, [1])[0].options)["open_options"]["cache_type"] == "none"
    with pytest.raises(UsageError, match=r"Unknown cache_type 'huge' in open_options\. Must be one of \[.*'first'"):
        throughput.open_source(s3_netcdf["one"], storage_options=seaweed.storage_options,
                               open_options={"cache_type": "huge"})
    with pytest.raises(UsageError, match=r"Unknown option\(s\) for netcdf sources: \['cache'\]"):
        throughput.open_source(s3_netcdf["one"], storage_options=seaweed.storage_options, cache="none")


def test_netcdf_glob_and_list_concatenate_along_record_dim(seaweed, s3_netcdf, small_dataset, local_cluster):
    bucket, parts = s3_netcdf["bucket"], s3_netcdf["parts"]
    src = throughput.open_source(f"s3://{bucket}/parts/ocean_*.nc", "temp", storage_options=seaweed.storage_options)
    assert src.shape == SMALL_SHAPE and src.nchunks == NCHUNKS and src.chunks == (1, 5, 27, 36)
    assert src.options["nfiles"] == 2 and src.options["concat_dim"] == "time"  # the unlimited dimension
    assert src.url == f"s3://{bucket}/parts/ocean_*.nc"
    np.testing.assert_array_equal(src.array.compute(scheduler="threads"), small_dataset.temp.values)
    listed = throughput.open_source(parts, "temp", storage_options=seaweed.storage_options,
                                    chunks={"time": 2, "st_ocean": 10})
    assert listed.url == ",".join(parts) and listed.chunks == (2, 10, 27, 36)
    assert listed.options["chunking"] == "user"
    read_on_cluster(listed, local_cluster, [2])
    with pytest.raises(SourceNotFoundError, match=r"No files match 's3://.*/parts/nothing_\*\.nc'"):
        throughput.open_source(f"s3://{bucket}/parts/nothing_*.nc", storage_options=seaweed.storage_options)
    with pytest.raises(UsageError, match=r"Cannot concatenate along 'depth': 'temp' has dimensions"):
        throughput.open_source(parts, "temp", storage_options=seaweed.storage_options, concat_dim="depth")


def test_netcdf_packed_variable_counts_decoded_bytes(tmp_path, small_dataset, local_cluster):
    """int16 on disk, float32 in memory: nbytes and chunk bytes are the decoded ones."""
    path = packed_netcdf(small_dataset, tmp_path / "packed.nc")
    src = throughput.open_source(str(path), "temp")
    assert src.dtype == "float32" and src.nbytes == NBYTES and src.chunksize == CHUNK_BYTES
    assert src.storage_library.startswith("h5netcdf ") and "open_options" not in src.options
    np.testing.assert_allclose(src.array[0].compute(scheduler="threads"), small_dataset.temp.values[0], atol=0.006)
    read_on_cluster(src, local_cluster, [1])


def test_netcdf_contiguous_variable_gets_auto_chunks(tmp_path, small_dataset):
    ds = small_dataset.copy()
    ds["temp"].encoding = {}
    ds.to_netcdf(tmp_path / "flat.nc", engine="h5netcdf")  # no chunking: one contiguous block
    src = throughput.open_source(str(tmp_path / "flat.nc"), "temp")
    assert src.options["chunking"] == "auto (contiguous variable)" and src.nbytes == NBYTES


# --- Zarr and NetCDF over plain HTTP -------------------------------------------------


def test_http_server_answers_byte_ranges(http_server):
    url = f"{http_server.url}/ocean.nc"
    whole = urllib.request.urlopen(url).read()
    ranged = urllib.request.urlopen(urllib.request.Request(url, headers={"Range": "bytes=10-19"}))
    assert ranged.status == 206 and ranged.read() == whole[10:20]
    assert ranged.headers["Content-Range"] == f"bytes 10-19/{len(whole)}"
    tail = urllib.request.urlopen(urllib.request.Request(url, headers={"Range": "bytes=-8"})).read()
    assert tail == whole[-8:]
    with pytest.raises(urllib.error.HTTPError, match="416"):
        urllib.request.urlopen(urllib.request.Request(url, headers={"Range": f"bytes={len(whole)}-"}))
    with pytest.raises(urllib.error.HTTPError, match="404"):  # no directory listings
        urllib.request.urlopen(f"{http_server.url}/plain_v2.zarr/")


def test_zarr_over_http_consolidated_end_to_end(http_server, local_cluster):
    src = throughput.open_source(f"{http_server.url}/consolidated.zarr", "temp")
    assert src.format == "zarr" and (src.nbytes, src.chunksize) == (NBYTES, CHUNK_BYTES)
    assert src.storage_library.startswith("fsspec ") and "(http, aiohttp " in src.storage_library
    r = read_on_cluster(src, local_cluster, [2])[0]
    assert r.storage_library == src.storage_library and r.url == f"{http_server.url}/consolidated.zarr"


@pytest.mark.parametrize("store", ["plain_v2.zarr", "plain_v3.zarr"])
def test_zarr_over_http_without_consolidated_metadata_says_consolidate(http_server, store):
    url = f"{http_server.url}/{store}"
    with pytest.raises(SourceNotFoundError, match=r"lists no arrays.*cannot list folders: consolidate its metadata"):
        throughput.open_source(url, "temp")


def test_netcdf_over_http_end_to_end(http_server, local_cluster):
    src = throughput.open_source(f"{http_server.url}/ocean.nc", "temp")
    assert src.format == "netcdf" and src.chunks == (1, 5, 27, 36)
    assert "(http, aiohttp " in src.storage_library and "h5netcdf" in src.storage_library
    read_on_cluster(src, local_cluster, [2])


# --- gs:// through gcsfs ---------------------------------------------------------------


@pytest.mark.parametrize("key, fmt", [("temp.zarr", "zarr"), ("temp.nc", "netcdf")])
def test_gcs_emulator_end_to_end(gcs, local_cluster, key, fmt):
    src = throughput.open_source(f"gs://ocean/{key}", "temp", storage_options=gcs.storage_options)
    assert src.format == fmt and (src.nbytes, src.chunksize, src.nchunks) == (NBYTES, CHUNK_BYTES, NCHUNKS)
    assert src.storage_library.startswith("gcsfs ")
    r = read_on_cluster(src, local_cluster, [2])[0]
    assert r.url == f"gs://ocean/{key}" and json.loads(r.options)["storage_options"]["token"] == "***"


# --- S3-compatible providers: endpoint, anonymous, requester pays -----------------------


@pytest.mark.parametrize("which", ["one", "zarr"])
def test_s3_compatible_anonymous_read(seaweed, s3_netcdf, s3_zarr, local_cluster, which):
    """Public data on a non-AWS endpoint (OSN, Wasabi, Jetstream): anon=True plus endpoint_url."""
    import s3fs

    url = s3_netcdf["one"] if which == "one" else s3_zarr[2]
    public = {"anon": True, "endpoint_url": seaweed.endpoint_url, "requester_pays": True}
    src = throughput.open_source(url, "temp", storage_options=public)
    r = read_on_cluster(src, local_cluster, [1])[0]
    assert json.loads(r.options)["storage_options"] == public  # nothing secret here, kept as given
    fs = s3fs.S3FileSystem(**public)  # fsspec's instance cache: the very filesystem the source used
    assert fs.anon is True and fs.req_kw == {"RequestPayer": "requester"}
    assert fs.client_kwargs.get("endpoint_url", fs.endpoint_url) == seaweed.endpoint_url


# --- bad input: one clear line, via Python and via the CLI ----------------------------


def run_cli(capsys, *args: str) -> tuple[int, str]:
    code = main(["sweep", *args, "--workers", "1", "--repeats", "1", "--no-plot"])
    return code, capsys.readouterr().err.strip()


def test_protocol_without_backend_names_package(capsys):
    with pytest.raises(MissingDependencyError, match=r"URL protocol 'abfs' needs a package .*adlfs"):
        throughput.open_source("abfs://container/ocean.nc", "temp")
    code, err = run_cli(capsys, "abfs://container/ocean.nc", "-v", "temp")
    assert code == 1 and err.startswith("throughput: error: URL protocol 'abfs' needs") and "adlfs" in err
    assert len(err.splitlines()) == 1


def test_missing_variable_lists_variables(seaweed, s3_netcdf, capsys):
    with pytest.raises(VariableNotFoundError, match=r"Variable 'salt' not found in 's3://.*/ocean.nc'\. Variables: \['temp'\]"):
        throughput.open_source(s3_netcdf["one"], "salt", storage_options=seaweed.storage_options)
    options = [f"-s{k}={v}" for k, v in (("key", seaweed.access_key), ("secret", seaweed.secret_key),
                                          ("client_kwargs.endpoint_url", seaweed.endpoint_url))]
    code, err = run_cli(capsys, s3_netcdf["one"], "-v", "salt", *options)
    assert code == 2 and "Variable 'salt' not found" in err and "Variables: ['temp']" in err
    assert seaweed.secret_key not in err


# botocore retries a refused connection for ~11 s by default: one attempt keeps the test short.
# (gs:// is left out: gcsfs retries 6 times with exponential backoff, ~31 s, and has no option to shorten it.)
@pytest.mark.parametrize("url, options", [
    ("s3://bucket/ocean.nc", {"anon": True, "endpoint_url": "http://127.0.0.1:{port}",
                              "config_kwargs.retries.max_attempts": 1}),
    ("http://127.0.0.1:{port}/ocean.nc", {}),
])
def test_server_that_does_not_answer_names_host(url, options, capsys):
    from throughput.cli.common import parse_options

    port = free_port()  # nothing listens there
    url = url.format(port=port)
    flags = tuple(f"{k}={v}".format(port=port) for k, v in options.items())
    with pytest.raises(StorageUnreachableError, match=rf"Storage server 127\.0\.0\.1:{port} did not answer"):
        throughput.open_source(url, storage_options=parse_options(flags))
    code, err = run_cli(capsys, url, *(f"-s{f}" for f in flags))
    assert code == 1 and f"Storage server 127.0.0.1:{port} did not answer" in err


def test_missing_object_says_what_was_not_found(seaweed, s3_netcdf, http_server, capsys):
    bucket = s3_netcdf["bucket"]
    with pytest.raises(SourceNotFoundError, match=rf"Nothing found at 's3://{bucket}/nope\.nc'"):
        throughput.open_source(f"s3://{bucket}/nope.nc", storage_options=seaweed.storage_options)
    with pytest.raises(SourceNotFoundError, match=r"Nothing found at 'http://127\.0\.0\.1:\d+/nope\.nc'"):
        throughput.open_source(f"{http_server.url}/nope.nc")
    code, err = run_cli(capsys, f"{http_server.url}/nope.nc")
    assert code == 1 and f"Nothing found at '{http_server.url}/nope.nc'" in err


def test_not_a_netcdf_file(tmp_path):
    (tmp_path / "notes.nc").write_text("not HDF5 at all")
    with pytest.raises(UsageError, match=r"'.*notes\.nc' is not a NetCDF4/HDF5 file"):
        throughput.open_source(str(tmp_path / "notes.nc"))


def test_cli_passes_source_options(seaweed, s3_netcdf, capsys, tmp_path):
    options = [f"-s{k}={v}" for k, v in (("anon", "true"), ("endpoint_url", seaweed.endpoint_url))]
    code = main(["sweep", s3_netcdf["one"], "-v", "temp", *options, "-O", "open_options.cache_type=none",
                 "-O", "open_options.block_size=1048576", "--workers", "1", "--repeats", "1",
                 "--no-plot", "--out", str(tmp_path)])
    assert code == 0, capsys.readouterr().err
    import csv

    (path,) = tmp_path.glob("*.csv")
    (row,) = list(csv.DictReader(path.open()))
    assert row["status"] == "ok" and int(row["bytes_received"]) == NBYTES and row["format"] == "netcdf"
    assert json.loads(row["options"])["open_options"] == {"cache_type": "none", "block_size": 1048576}
