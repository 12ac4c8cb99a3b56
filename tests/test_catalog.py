"""intake catalogs: the seed study's sources and the local demo's, listed, resolved and swept."""

from __future__ import annotations

import csv
from pathlib import Path

import fsspec
import intake
import numpy as np
import pytest

from throughput.catalog import (
    ArraySource,
    CatalogError,
    CatalogNotFoundError,
    catalog_entries,
    resolve_entry,
    split_catalog_spec,
)
from throughput.cli import main
from throughput.datasets import write_zarr
from throughput.servers.opendap import OpendapServer, write_netcdf

from .conftest import SMALL_SHAPE

CATALOGS = Path(__file__).resolve().parents[1] / "catalogs"
SEED = str(CATALOGS / "seed_study.yaml")
LOCAL = str(CATALOGS / "local_demo.yaml")
NBYTES = int(np.prod(SMALL_SHAPE)) * 4


@pytest.fixture(scope="module")
def opendap(small_dataset, tmp_path_factory):
    path = write_netcdf(small_dataset, tmp_path_factory.mktemp("catdap") / "ocean.nc")
    with OpendapServer([path]) as server:
        yield server


@pytest.fixture(scope="module")
def demo_bucket(seaweed, small_dataset):
    """The small dataset where catalogs/local_demo.yaml expects the demo's Zarr store."""
    fs = seaweed.filesystem()
    if not fs.exists("throughput-demo/gfdl_cm26_like/ocean.zarr/.zmetadata"):
        seaweed.make_bucket("throughput-demo")
        write_zarr(small_dataset, "s3://throughput-demo/gfdl_cm26_like/ocean.zarr", seaweed.storage_options)
    return "throughput-demo"


def test_seed_catalog_has_the_eight_sources_with_labels():
    entries = {e.name: e for e in catalog_entries(SEED)}
    assert len(entries) == 8
    assert sorted((e.format, e.cloud) for e in entries.values()) == sorted([
        ("zarr", "gcloud"), ("netcdf", "gcloud"), ("zarr", "wasabi"), ("zarr", "jetstream"), ("zarr", "OSN"),
        ("llcreader", "nasa"), ("opendap", "ucar"), ("opendap", "noaa")])
    gfdl = entries["GFDL_CM2_6_control_ocean"]
    assert gfdl.url == "gs://cmip6/GFDL_CM2_6/control/ocean" and gfdl.variable == "temp"
    assert gfdl.storage_options == {"requester_pays": True} and gfdl.options == {}  # consolidated: zarr's default
    assert gfdl.labels == {"cloud": "gcloud", "region": "us-central1"}
    assert entries["osn_zarr"].labels == {"cloud": "OSN", "region": "ncsa"}  # as in the seed's CSVs
    assert entries["osn_zarr"].storage_options["client_kwargs"]["endpoint_url"] == "https://ncsa.osn.xsede.org"
    assert all(e.region and e.variable and not e.missing for e in entries.values())


@pytest.mark.filterwarnings("ignore:Shell command not executed")  # intake 2.0.9 warns on any templated default
def test_seed_catalog_is_plain_intake():
    """The file is an intake catalog as Pangeo's: intake opens it and renders its parameters."""
    cat = intake.open_catalog(SEED)
    desc = cat._entries["GFDL_CM2_6_control_ocean"].describe()
    assert desc["args"] == {"urlpath": "gs://cmip6/GFDL_CM2_6/control/ocean", "consolidated": True,
                            "storage_options": {"requester_pays": True}}
    source = cat["noaa_esrl_psl_opendap"](year=2019)
    assert isinstance(source, ArraySource)
    assert source.urlpath.endswith("/sst.day.mean.2019.nc") and source.metadata["variable"] == "sst"


def test_catalog_parameters_render():
    entry = resolve_entry(f"{SEED}:noaa_esrl_psl_opendap", year=2018)
    assert entry.url == "dap2://psl.noaa.gov/thredds/dodsC/Datasets/noaa.oisst.v2.highres/sst.day.mean.2018.nc"
    assert entry.format == "opendap"


def test_local_catalog_needs_its_server_settings(monkeypatch):
    monkeypatch.delenv("THROUGHPUT_OPENDAP_URL", raising=False)
    entry = resolve_entry(f"{LOCAL}:local-opendap-netcdf")
    assert entry.missing == ("opendap_url=... (or $THROUGHPUT_OPENDAP_URL)",)
    with pytest.raises(CatalogError, match=r"'local-opendap-netcdf' .* needs opendap_url=\.\.\. \(or \$THROUGHPUT_OPENDAP_URL\)"):
        entry.open()


@pytest.mark.filterwarnings("ignore:Shell command not executed")
def test_local_catalog_opendap_entry_through_intake_and_env(opendap, small_dataset, monkeypatch):
    monkeypatch.setenv("THROUGHPUT_OPENDAP_URL", opendap.endpoint_url)
    entry = resolve_entry(f"{LOCAL}:local-opendap-netcdf")
    assert entry.url == opendap.url("ocean.nc") and entry.options == {"protocol": "dap2"}
    src = entry.open()
    assert (src.name, src.format, src.variable, src.nbytes) == ("local-opendap-netcdf", "opendap", "temp", NBYTES)
    # the same entry as an intake data source gives an xarray Dataset over the lazy array
    ds = intake.open_catalog(LOCAL)["local-opendap-netcdf"].to_dask()
    np.testing.assert_array_equal(ds.temp[2, 4:6].values, small_dataset.temp.values[2, 4:6])


def test_catalog_from_an_fsspec_url(opendap):
    with fsspec.open("memory://catalogs/local.yaml", "wb") as f:
        f.write(Path(LOCAL).read_bytes())
    entry = resolve_entry("memory://catalogs/local.yaml:local-opendap-netcdf", opendap_url=opendap.endpoint_url)
    assert entry.catalog == "memory://catalogs/local.yaml" and entry.open().nbytes == NBYTES


def test_split_catalog_spec():
    assert split_catalog_spec("catalogs/seed_study.yaml:osn_zarr") == ("catalogs/seed_study.yaml", "osn_zarr")
    assert split_catalog_spec("s3://b/c.YML:x") == ("s3://b/c.YML", "x")
    assert split_catalog_spec("s3://bucket/ocean.zarr") is None
    assert split_catalog_spec("catalogs/seed_study.yaml") is None


def test_unknown_entry_lists_known_ones():
    with pytest.raises(CatalogError, match=r"Unknown catalog entry 'nope' in '.*seed_study.yaml'. Entries: \['GFDL_CM2_6_control_ocean', "):
        resolve_entry(f"{SEED}:nope")


def test_missing_catalog(tmp_path):
    with pytest.raises(CatalogNotFoundError, match="Catalog file '.*missing.yaml' not found."):
        catalog_entries(str(tmp_path / "missing.yaml"))


# --- the CLI: one line, an exit code --------------------------------------------------------

def test_cli_lists_sources(capsys):
    assert main(["sources", SEED]) == 0
    out = capsys.readouterr().out
    for name in ("GFDL_CM2_6_control_ocean", "osn_zarr", "ecco_data_portal", "noaa_esrl_psl_opendap"):
        assert name in out
    assert "8 source(s)" in out


def test_cli_lists_sizes_when_asked(opendap, capsys):
    assert main(["sources", LOCAL, "--size", "-p", f"opendap_url={opendap.endpoint_url}"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "local-opendap-netcdf" in line)
    assert "opendap" in row and f"{NBYTES / 1e3:.1f}" in row  # 155.5 kB (the unit may wrap)


@pytest.mark.parametrize(("text", "message"), [
    ("sources:\n  a: [1, 2\n", r"is not valid YAML \(line 3, column 1\)"),
    ("- just\n- a list\n", r"is not an intake catalog: it needs a 'sources:' mapping of entries \(found list\)"),
    ("metadata:\n  version: 1\n", r"is not an intake catalog: it needs a 'sources:' mapping of entries \(found \['metadata'\]\)"),
    ("sources:\n  a: 3\n", r"is not a usable intake catalog: .*value of key 'a' must be a dictionary"),
    ("sources:\n  a:\n    driver: [throughput.catalog.ArraySource]\n    args: {path: x}\n",
     r"Entry 'a' of '.*bad.yaml': ArraySource.__init__\(\) missing 1 required positional argument: 'urlpath'"),
])
def test_cli_bad_catalog_files(tmp_path, capsys, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    assert main(["sources", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("throughput: error: ")
    assert __import__("re").search(message, err), err


def test_cli_missing_catalog(tmp_path, capsys):
    assert main(["sources", str(tmp_path / "nowhere.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"throughput: error: Catalog file '{tmp_path / 'nowhere.yaml'}' not found."


def test_cli_sweep_unknown_entry(capsys):
    assert main(["sweep", f"{SEED}:GFDL", "--out", "/nonexistent-never-written"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("throughput: error: Unknown catalog entry 'GFDL' in ")
    assert "Entries: ['GFDL_CM2_6_control_ocean', 'GFDL_CM2_6_control_ocean_netcdf', 'wasabi_zarr'" in err


def test_cli_sweep_catalog_without_entry(capsys):
    assert main(["sweep", SEED]) == 2
    err = capsys.readouterr().err.strip()
    assert "Name an entry of " in err and "as CATALOG:ENTRY. Entries: ['GFDL_CM2_6_control_ocean'" in err


def test_cli_sweep_local_catalog_entry(seaweed, demo_bucket, monkeypatch, tmp_path, capsys):
    """`throughput sweep CATALOG:ENTRY` against the real S3 server; labels come from the catalog."""
    monkeypatch.setenv("THROUGHPUT_S3_ENDPOINT", seaweed.endpoint_url)
    out = tmp_path / "rows.csv"
    code = main(["sweep", f"{LOCAL}:local-s3-zarr", "--workers", "1", "--repeats", "1", "--out", str(out),
                 "--no-plot", "--region", "rack-7"])
    assert code == 0, capsys.readouterr().err
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 1
    row = rows[0]
    assert row["status"] == "ok" and row["source"] == "local-s3-zarr" and row["format"] == "zarr"
    assert row["url"] == "s3://throughput-demo/gfdl_cm26_like/ocean.zarr" and row["variable"] == "temp"
    assert int(row["nbytes"]) == NBYTES == int(row["bytes_received"])
    assert row["cloud"] == "local" and row["region"] == "rack-7"  # the command line wins over the catalog
