"""The plugin route: source kinds added by name or by an installed package's entry point,
the llcreader example and its install hint, and the embedded demo sources."""

from __future__ import annotations

import importlib.metadata
import uuid
from pathlib import Path

import numpy as np
import pytest

import throughput
from throughput.cli import main
from throughput.embedded import EMBEDDED_SOURCES, check_names, embedded_sources
from throughput.errors import MissingDependencyError, UsageError
from throughput.sources import SOURCE_KINDS, source_kinds
from throughput.sweep import run_sweep

from .conftest import SMALL_SHAPE

RAW_SHAPE = (6, 20, 30)
CATALOGS = Path(__file__).resolve().parents[1] / "catalogs"


@pytest.fixture(scope="module")
def raw_object(seaweed):
    """A raw big-endian float32 array (MITgcm MDS style) as one object on SeaweedFS."""
    bucket = f"raw-{uuid.uuid4().hex[:8]}"
    seaweed.make_bucket(bucket)
    values = np.arange(np.prod(RAW_SHAPE), dtype=">f4").reshape(RAW_SHAPE)
    seaweed.filesystem().pipe(f"{bucket}/Eta.data", values.tobytes())
    return f"s3://{bucket}/Eta.data", values


@pytest.fixture()
def registered():
    """Register the test plugin by name; unregister afterwards."""
    throughput.register_source_kind("rawbinary", "tests.plugin_rawbinary:open_rawbinary")
    yield "rawbinary"
    SOURCE_KINDS.pop("rawbinary", None)


def test_kind_registered_by_name_end_to_end(registered, raw_object, seaweed, local_cluster):
    url, values = raw_object
    src = throughput.open_source(url, "Eta", format=registered, storage_options=seaweed.storage_options,
                                 shape=RAW_SHAPE)
    assert src.format == "rawbinary" and src.nbytes == values.nbytes and src.nchunks == RAW_SHAPE[0]
    assert src.storage_library.startswith("s3fs ")
    np.testing.assert_array_equal(src.array.compute(scheduler="threads"), values)
    (record,) = run_sweep(src, local_cluster, [1], repeats=1)  # a worker process imports the plugin
    assert record.status == "ok" and record.bytes_received == values.nbytes
    assert record.format == "rawbinary" and record.chunksize == values.nbytes // RAW_SHAPE[0]
    # a URL whose scheme names a kind reaches it without format=
    same = throughput.open_source(url.replace("s3://", "rawbinary://"), storage_options=seaweed.storage_options,
                                  shape=RAW_SHAPE)
    assert same.format == "rawbinary" and same.nbytes == values.nbytes


def test_kind_from_an_installed_package_entry_point(tmp_path, monkeypatch, raw_object, seaweed):
    """An installed distribution that declares ``[throughput.sources]`` adds a kind, no code needed."""
    dist = tmp_path / "throughput_rawbinary-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: throughput-rawbinary\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[throughput.sources]\nmds = tests.plugin_rawbinary:open_rawbinary\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    assert source_kinds()["mds"] == "tests.plugin_rawbinary:open_rawbinary"
    url, values = raw_object
    src = throughput.open_source(url, "Eta", format="mds", storage_options=seaweed.storage_options,
                                 shape=RAW_SHAPE)
    assert src.nbytes == values.nbytes and float(src.array.sum().compute(scheduler="threads")) == float(values.sum())
    with pytest.raises(UsageError, match=r"Unknown source format 'nope'\. Must be one of \[.*'mds'.*'netcdf'"):
        throughput.open_source(url, format="nope")


def test_bad_registration_and_missing_plugin_module():
    with pytest.raises(UsageError, match=r"give a name and 'module:function'"):
        throughput.register_source_kind("broken", "no_colon_here")
    throughput.register_source_kind("needsfoo", "throughput_foo_reader_xyz.source:open_foo")
    try:
        with pytest.raises(MissingDependencyError, match=r"Missing package 'throughput_foo_reader_xyz' required "
                                                         r"for needsfoo sources\. Install it with: pip install"):
            throughput.open_source("s3://bucket/x", format="needsfoo")
    finally:
        SOURCE_KINDS.pop("needsfoo")


def test_llcreader_without_xmitgcm_gives_install_hint(capsys):
    pytest.importorskip("xarray")
    try:
        import xmitgcm  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("xmitgcm is installed here")
    expected = ("Missing package 'xmitgcm' required for llcreader sources (MITgcm LLC output, the ECCO data "
                "portal). Install it with: pip install xmitgcm")
    with pytest.raises(MissingDependencyError) as info:
        throughput.open_source("llcreader://ECCOPortalLLC2160Model", "Theta")
    assert str(info.value) == expected
    code = main(["sweep", "llcreader://ECCOPortalLLC2160Model", "-v", "Theta", "--no-plot"])
    assert code == 1 and capsys.readouterr().err.strip() == f"throughput: error: {expected}"


# --- the embedded demo sources ------------------------------------------------------------


def test_embedded_sources_compare_formats_on_one_machine(seaweed, local_cluster):
    names = ["local-s3-netcdf", "local-http-zarr"]
    with embedded_sources(SMALL_SHAPE, sources=names, s3=seaweed) as sources:
        assert list(sources) == names
        nbytes = int(np.prod(SMALL_SHAPE)) * 4
        for name, src in sources.items():
            (record,) = run_sweep(src, local_cluster, [1], repeats=1)
            assert record.status == "ok" and record.bytes_received == nbytes == record.nbytes, name
            assert record.source == name
        assert sources["local-s3-netcdf"].format == "netcdf" and sources["local-http-zarr"].format == "zarr"
        # while the servers run, the demo catalog's entries reach them (anonymous read on S3)
        from throughput.catalog import resolve_entry

        for name in names:
            entry = resolve_entry(str(CATALOGS / f"local_demo.yaml:{name}"))
            opened = entry.open()
            assert (opened.url, opened.nbytes, opened.chunks) == (sources[name].url, nbytes, sources[name].chunks)


def test_embedded_source_names(capsys):
    assert check_names(None) == ["local-s3-zarr", "local-s3-netcdf"]
    assert check_names(["all"]) == list(EMBEDDED_SOURCES)
    with pytest.raises(UsageError, match=r"Unknown embedded source\(s\) \['ftp'\]\. Must be 'all' or some of"):
        check_names(["ftp"])
    assert main(["demo", "--sources", "local-s3-zarr,ftp"]) == 2
    assert "Unknown embedded source(s) ['ftp']" in capsys.readouterr().err
