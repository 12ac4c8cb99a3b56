"""OPeNDAP: pydap's server on loopback serving the GFDL-like NetCDF file, read by the opendap source."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
import requests

import throughput
from throughput.errors import (
    SourceNotFoundError,
    StorageUnreachableError,
    UsageError,
    VariableNotFoundError,
)
from throughput.servers import free_port
from throughput.servers.opendap import OpendapServer, write_netcdf
from throughput.sources import guess_format
from throughput.sources.opendap import dap_url, request_chunks
from throughput.sweep import run_sweep

from .conftest import SMALL_SHAPE

NBYTES = int(np.prod(SMALL_SHAPE)) * 4
CHUNK_BYTES = 1 * 5 * SMALL_SHAPE[2] * SMALL_SHAPE[3] * 4


@pytest.fixture(scope="module")
def netcdf_file(small_dataset, tmp_path_factory):
    return write_netcdf(small_dataset, tmp_path_factory.mktemp("dap") / "ocean.nc")


@pytest.fixture(scope="module")
def opendap(netcdf_file):
    """pydap serving the small GFDL-like file on a free port of 127.0.0.1."""
    with OpendapServer([netcdf_file]) as server:
        yield server


@pytest.mark.parametrize("index", [
    (1, slice(2, 7), slice(3, 20), slice(5, 30)),
    (slice(1, 3), slice(0, 10, 3), slice(None), slice(35, 36)),
    (slice(None), slice(9, 10), slice(26, 27), slice(0, 36, 7)),
])
@pytest.mark.parametrize("protocol", ["dap2", "dap4"])
def test_server_subset_equals_numpy_slice(opendap, small_dataset, index, protocol):
    """A sliced request comes back whole and exact (pydap's NetCDF handler truncates it)."""
    from pydap.client import open_url

    remote = open_url(opendap.url(), protocol=protocol)
    got = np.asarray(remote["temp"][index].data)
    want = small_dataset.temp.values[index]
    np.testing.assert_array_equal(got.reshape(want.shape), want)


def test_server_dods_response_is_whole_and_exact(opendap, small_dataset):
    """The raw DAP2 body: DDS, 'Data:', the count twice, then big-endian values of the hyperslab."""
    r = requests.get(opendap.url() + ".dods?temp[1:1:2][2:1:6][3:2:19][5:1:29]", timeout=30)
    assert r.status_code == 200
    assert int(r.headers["Content-Length"]) == len(r.content)
    dds, _, data = r.content.partition(b"\nData:\n")
    assert b"Float32 temp[time = 2][st_ocean = 5][yt_ocean = 9][xt_ocean = 25]" in dds
    want = small_dataset.temp.values[1:3, 2:7, 3:20:2, 5:30]
    assert np.frombuffer(data[:8], ">u4").tolist() == [want.size, want.size]
    np.testing.assert_array_equal(np.frombuffer(data[8:], ">f4").reshape(want.shape), want)


def test_server_dap4_response(opendap, small_dataset):
    """DAP4 data: the subset's DMR in a first chunk, then little-endian values and their CRC32."""
    import zlib

    r = requests.get(opendap.url() + ".dap?dap4.ce=/temp[2][0:2:9][0:1:26][3:1:3]&dap4.checksum=true", timeout=30)
    assert r.status_code == 200 and int(r.headers["Content-Length"]) == len(r.content)
    header = int(np.frombuffer(r.content[:4], ">u4")[0])
    dmr = r.content[4:4 + (header & 0xFFFFFF)]
    assert header >> 24 == 0x04 and b'<Float32 name="temp"><Dim size="1"/><Dim size="5"/><Dim size="27"/><Dim size="1"/>' in dmr
    rest = r.content[4 + len(dmr):]
    header = int(np.frombuffer(rest[:4], ">u4")[0])
    assert header >> 24 == 0x05 and (header & 0xFFFFFF) == len(rest) - 4  # last chunk, little-endian
    want = small_dataset.temp.values[2:3, 0:10:2, :, 3:4]
    values = rest[4:-4]
    np.testing.assert_array_equal(np.frombuffer(values, "<f4").reshape(want.shape), want)
    assert int(np.frombuffer(rest[-4:], "<u4")[0]) == zlib.crc32(values)
    bad = requests.get(opendap.url() + ".dap?dap4.ce=/salt", timeout=30)
    assert bad.status_code == 400 and "salt" in bad.text


def test_server_metadata_and_unknown_dataset(opendap):
    das = requests.get(opendap.url() + ".das", timeout=30).text
    assert "_ChunkSizes 1, 5, 27, 36" in das and 'units "degrees C"' in das
    r = requests.get(opendap.endpoint_url + "/salt.nc.dds", timeout=30)
    assert r.status_code == 404 and "ocean.nc" in r.text


def test_opendap_source_geometry(opendap):
    src = throughput.open_source(opendap.url(), "temp", format="opendap")
    assert src.format == "opendap" and src.variable == "temp"
    assert src.storage_library == f"pydap {__import__('importlib.metadata').metadata.version('pydap')}"
    assert src.nbytes == NBYTES and src.shape == SMALL_SHAPE
    assert src.chunks == (1, 5, 27, 36) and src.chunksize == CHUNK_BYTES  # the file's own chunks
    assert src.nchunks == 8
    assert src.options == {"protocol": "dap2", "request_bytes": 50_000_000, "chunked_by": "_ChunkSizes"}
    assert src.dims == ("time", "st_ocean", "yt_ocean", "xt_ocean")


@pytest.mark.parametrize("protocol", ["dap2", "dap4"])
def test_one_request_per_chunk_and_exact_values(opendap, small_dataset, protocol):
    src = throughput.open_source(opendap.url(), "temp", format="opendap", request_bytes=4_000, protocol=protocol)
    assert src.chunks == (1, 1, 27, 36) and src.options["chunked_by"] == "request_bytes"
    assert src.options["protocol"] == protocol
    before = opendap.data_requests
    values = src.array.compute(scheduler="threads")
    assert opendap.data_requests - before == src.nchunks == 40
    np.testing.assert_array_equal(values, small_dataset.temp.values)


def test_user_chunks_override(opendap, small_dataset):
    src = throughput.open_source(opendap.url(), "temp", format="opendap", chunks={"time": 2, "st_ocean": 10})
    assert src.chunks == (2, 10, 27, 36) and src.options["chunked_by"] == "user"
    np.testing.assert_array_equal(src.array[1, 3:7].compute(), small_dataset.temp.values[1, 3:7])


def test_lazy_array_survives_pickle(opendap, small_dataset):
    src = throughput.open_source(opendap.url(), "temp", format="opendap")
    again = pickle.loads(pickle.dumps(src.array))
    np.testing.assert_array_equal(again[3].compute(scheduler="sync"), small_dataset.temp.values[3])


@pytest.mark.parametrize("protocol", ["dap2", "dap4"])
def test_sweep_reads_exactly_the_array_bytes(opendap, local_cluster, protocol):
    """End to end on a LocalCluster with worker processes, through the null sink."""
    src = throughput.open_source(opendap.url(), "temp", format="opendap", name="local-opendap", protocol=protocol)
    before = opendap.data_requests
    # no warm-up: it reads one chunk per worker thread before each point, outside the timed runs
    records = run_sweep(src, local_cluster, [2, 1], repeats=1, labels={"cloud": "local", "region": "loopback"},
                        warmup=False)
    assert [r.nworkers for r in records] == [2, 1]
    for r in records:
        assert r.status == "ok", r.error
        assert r.bytes_received == NBYTES == r.nbytes
        assert r.format == "opendap" and r.storage_library.startswith("pydap ")
        assert r.chunksize == CHUNK_BYTES and r.nchunks == 8
        assert f'"protocol": "{protocol}"' in r.options
    assert opendap.data_requests - before == 2 * 8


def test_token_never_reaches_the_source_record(opendap, local_cluster):
    src = throughput.open_source(opendap.url(), "temp", format="opendap",
                                 storage_options={"token": "s3cr3t-bearer-token", "timeout": 30})
    assert src.options["storage_options"] == {"token": "***", "timeout": 30}
    record = run_sweep(src, local_cluster, [1], repeats=1)[0]
    assert record.status == "ok" and "s3cr3t" not in repr(record)


def test_missing_variable_lists_variables(opendap):
    with pytest.raises(VariableNotFoundError, match=r"'salt' not found .* Variables: \[.*'temp'"):
        throughput.open_source(opendap.url(), "salt", format="opendap")


def test_unknown_dataset_is_not_found(opendap):
    with pytest.raises(SourceNotFoundError, match=r"No OPeNDAP dataset at 'http://127.0.0.1:\d+/nope.nc' \(HTTP 404"):
        throughput.open_source(opendap.endpoint_url + "/nope.nc", "temp", format="opendap")


def test_server_that_does_not_answer_names_host():
    port = free_port()
    with pytest.raises(StorageUnreachableError, match=f"OPeNDAP server 127.0.0.1:{port} did not answer"):
        throughput.open_source(f"http://127.0.0.1:{port}/ocean.nc", "temp", format="opendap",
                               storage_options={"timeout": 5})


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"protocol": "dap3"}, r"Unknown OPeNDAP protocol 'dap3'. Must be one of \['dap2', 'dap4'\]"),
    ({"storage_options": {"anon": True}}, r"Unknown storage option\(s\) for an OPeNDAP source: \['anon'\]"),
    ({"cache_type": "none"}, r"Unknown option\(s\) for opendap sources: \['cache_type'\]"),
    ({"request_bytes": 1}, r"request_bytes=1 is smaller than one element"),
])
def test_bad_options(opendap, kwargs, message):
    with pytest.raises(UsageError, match=message):
        throughput.open_source(opendap.url(), "temp", format="opendap", **kwargs)


def test_url_forms():
    assert dap_url("dap2://example.org/thredds/dodsC/x.nc") == ("https://example.org/thredds/dodsC/x.nc", "dap2")
    assert dap_url("dap4://example.org/x.nc") == ("https://example.org/x.nc", "dap4")
    assert dap_url("http://127.0.0.1:9/x.nc", "dap4") == ("http://127.0.0.1:9/x.nc", "dap4")
    assert dap_url("https://h/x.nc?dap4.ce=/temp") == ("https://h/x.nc?dap4.ce=/temp", "dap4")
    with pytest.raises(UsageError, match="Use dap2://, dap4://, http:// or https://"):
        dap_url("s3://bucket/x.nc")
    assert guess_format("dap2://example.org/data/x.nc") == "opendap"
    assert guess_format("dap4://example.org/data/x") == "opendap"
    assert guess_format("https://psl.noaa.gov/thredds/dodsC/Datasets/sst.nc") == "opendap"


def test_request_chunks():
    assert request_chunks((12, 20, 270, 360), 4, 50_000_000) == (6, 20, 270, 360)
    assert request_chunks((12, 20, 270, 360), 4, 1_000_000) == (1, 2, 270, 360)
    assert request_chunks((12, 20, 270, 360), 4, 50_000_000, natural=(1, 5, 270, 360)) == (1, 5, 270, 360)
    # a natural chunk larger than the limit is split into contiguous blocks instead
    assert request_chunks((4, 2700, 3600), 4, 10_000_000, natural=(1, 2700, 3600)) == (1, 694, 3600)
    assert request_chunks((10,), 8, 100) == (10,)


def test_embedded_opendap_source(small_dataset):
    from throughput.embedded import opendap_sources

    assert "THROUGHPUT_OPENDAP_URL" not in os.environ
    with opendap_sources(small_dataset) as sources:
        src = sources["local-opendap-netcdf"]
        assert os.environ["THROUGHPUT_OPENDAP_URL"] + "/ocean.nc" == src.url
        assert src.format == "opendap" and src.nbytes == NBYTES
        np.testing.assert_array_equal(src.array[0, :5].compute(), small_dataset.temp.values[0, :5])
    assert "THROUGHPUT_OPENDAP_URL" not in os.environ


def test_server_refuses_missing_file(tmp_path):
    with pytest.raises(SourceNotFoundError, match="No NetCDF file at"):
        OpendapServer([tmp_path / "missing.nc"])
