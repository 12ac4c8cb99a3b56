"""store=obstore: Zarr chunks read by obstore's Rust client, counted and recorded like s3fs's.

Real SeaweedFS (fixture ``seaweed``), a real LocalCluster of worker processes (the
ObjectStore-backed array is pickled to them), the real command line.
"""

from __future__ import annotations

import csv
import json
import math
import uuid
from importlib.metadata import version

import numpy as np
import pytest

import throughput
from throughput.cli import main
from throughput.errors import SourceNotFoundError, UsageError
from throughput.obstores import obstore_options
from throughput.servers import free_port
from throughput.servers.http import StaticHTTPServer

from .conftest import SMALL_SHAPE

NCHUNKS = 8  # SMALL_SHAPE (4, 10, 27, 36) in chunks of (1, 5, 27, 36)
NBYTES = math.prod(SMALL_SHAPE) * 4
SECRET = "obstore-test-Secret-9f3c"


def s3_args(seaweed, **extra: str) -> list[str]:
    opts = {"key": seaweed.access_key, "secret": seaweed.secret_key,
            "client_kwargs.endpoint_url": seaweed.endpoint_url, **extra}
    return [arg for k, v in opts.items() for arg in ("-s", f"{k}={v}")]


def stored_chunk_bytes(seaweed, url: str) -> list[int]:
    """Sizes of the chunk objects of array ``temp`` (Zarr v2: ``temp/0.0.0.0`` ...), from an S3 listing."""
    found = seaweed.filesystem().find(url.removeprefix("s3://") + "/temp/", detail=True)
    return [info["size"] for path, info in found.items() if not path.rsplit("/", 1)[-1].startswith(".")]


def test_cli_sweep_with_obstore_reads_every_chunk_once(seaweed, s3_zarr, local_cluster, tmp_path, capsys):
    client = local_cluster.start()
    local_cluster.scale(2)
    local_cluster.wait_for_workers(2, 60)
    out = tmp_path / "rows.csv"
    code = main(["sweep", s3_zarr[2], "-v", "temp", "-O", "store=obstore", *s3_args(seaweed),
                 "--cluster", "address", "--cluster-option", f"address={client.scheduler.address}",
                 "-w", "2", "-r", "2", "--no-plot", "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    rows = list(csv.DictReader(out.open()))
    assert [r["status"] for r in rows] == ["ok", "ok"], [r["error"] for r in rows]
    chunks = stored_chunk_bytes(seaweed, s3_zarr[2])
    assert len(chunks) == NCHUNKS and sum(chunks) != NBYTES  # compressed objects
    for row in rows:
        assert int(row["bytes_received"]) == NBYTES and int(row["nworkers"]) == 2
        assert int(row["requests"]) == NCHUNKS  # one GET per chunk: no HEAD, no metadata re-reads
        assert int(row["wire_bytes"]) == sum(chunks)  # bytes as stored = the objects' sizes in the listing
        assert row["storage_library"] == f"obstore {version('obstore')}"
        options = json.loads(row["options"])
        assert options["store"] == "obstore" and "s3fs_max_concurrency" not in options
        assert options["storage_options"]["secret"] == "***"
    assert seaweed.secret_key not in out.read_text()


def test_obstore_anonymous_read_of_a_public_bucket(seaweed, s3_zarr, small_dataset):
    """OSN-style public data: anon=true and an endpoint, no credentials (SeaweedFS grants anonymous reads)."""
    public = {"anon": True, "endpoint_url": seaweed.endpoint_url}
    src = throughput.open_source(s3_zarr[3], "temp", storage_options=public, store="obstore")
    assert (src.nbytes, src.nchunks, src.options["store"]) == (NBYTES, NCHUNKS, "obstore")
    np.testing.assert_array_equal(src.array.compute(scheduler="sync"), small_dataset["temp"].values)


def test_obstore_local_folder_and_plain_http(tmp_path, small_dataset):
    from throughput.datasets import write_zarr

    write_zarr(small_dataset, str(tmp_path / "ocean.zarr"), zarr_format=2)  # consolidated
    expected = small_dataset["temp"].values
    local = throughput.open_source(str(tmp_path / "ocean.zarr"), "temp", store="obstore")
    np.testing.assert_array_equal(local.array.compute(scheduler="sync"), expected)
    with StaticHTTPServer(tmp_path) as server:
        web = throughput.open_source(f"{server.url}/ocean.zarr", "temp", store="obstore",
                                     storage_options={"headers": {"User-Agent": "throughput-test"}})
        np.testing.assert_array_equal(web.array.compute(scheduler="sync"), expected)
    assert web.storage_library == local.storage_library == f"obstore {version('obstore')}"
    with pytest.raises(SourceNotFoundError, match=r"^Nothing found at '.*/nope\.zarr': no such folder\.$"):
        throughput.open_source(str(tmp_path / "nope.zarr"), "temp", store="obstore")


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("case", ["bucket", "key", "endpoint"])
def test_obstore_storage_errors_are_one_clear_line(case, seaweed, s3_zarr, tmp_path, capsys):
    bucket = f"no-such-bucket-{uuid.uuid4().hex[:6]}"
    args = {
        "bucket": [f"s3://{bucket}/ocean.zarr", *s3_args(seaweed)],
        "key": [s3_zarr[2], *s3_args(seaweed, key="NOSUCHKEY", secret=SECRET)],
        "endpoint": [s3_zarr[2], "-s", "anon=true", "-s", f"endpoint_url=http://127.0.0.1:{free_port()}"],
    }[case]
    code = main(["sweep", *args, "-v", "temp", "-O", "store=obstore", "-w", "1", "-r", "1", "--no-plot",
                 "-o", str(tmp_path)])
    err = _one_line(capsys)
    assert code == 1 and not list(tmp_path.iterdir())  # fails at open, before any cluster or file
    assert SECRET not in err and seaweed.secret_key not in err
    if case == "bucket":
        assert f"No Zarr store at 's3://{bucket}/ocean.zarr'" in err
    elif case == "key":
        assert err.startswith(f"throughput: error: Access denied to '{s3_zarr[2]}': ")
        assert "403 Forbidden (InvalidAccessKeyId)" in err and "Check credentials in storage_options" in err
    else:
        assert "did not answer (Connection refused) while opening" in err


@pytest.mark.parametrize("args, says", [
    (["-O", "store=boto"], "Unknown store 'boto' for zarr sources. Must be one of: fsspec, obstore."),
    (["-O", "store=obstore", "-s", "max_concurrency=4"],
     ("Storage option(s) ['max_concurrency'] cannot be passed to obstore (S3Store) for 's3://bucket/x.zarr'. "
      "Accepted with store=obstore: anon, key, secret, token, endpoint_url, client_kwargs.endpoint_url, region, "
      "client_kwargs.region_name, requester_pays; or use store=fsspec.")),
    (["-O", "store=obstore", "-s", "anon=yes please"], "Storage option anon='yes please' must be true or false."),
])
def test_obstore_bad_options_exit_2(args, says, capsys):
    assert main(["sweep", "s3://bucket/x.zarr", *args, "--no-plot"]) == 2
    assert _one_line(capsys) == f"throughput: error: {says}"


def test_obstore_options_translate_fsspec_style_options():
    s3 = obstore_options("s3a://bucket/a/b.zarr/", {
        "key": "AK", "secret": "SK", "token": "ST", "requester_pays": True,
        "client_kwargs": {"endpoint_url": "https://s3.example.org:8001/", "region_name": "eu-west-2"}})
    assert s3 == ("S3Store", {"bucket": "bucket", "prefix": "a/b.zarr", "config": {  # https: no allow_http
        "access_key_id": "AK", "secret_access_key": "SK", "session_token": "ST", "request_payer": True,
        "endpoint": "https://s3.example.org:8001", "region": "eu-west-2"}})
    assert obstore_options("s3://bucket/x.zarr", {"region": "us-west-2", "anon": False})[1]["config"] == {
        "region": "us-west-2"}
    assert obstore_options("gs://bucket/x.zarr", {"token": "anon", "endpoint_url": "http://127.0.0.1:9"}) == (
        "GCSStore", {"bucket": "bucket", "prefix": "x.zarr", "config": {
            "skip_signature": True, "base_url": "http://127.0.0.1:9"}, "client_options": {"allow_http": True}})
    sa = {"type": "service_account", "client_email": "a@b"}
    assert json.loads(obstore_options("gs://b/x", {"token": sa})[1]["config"]["service_account_key"]) == sa
    with pytest.raises(UsageError, match=r"^Storage option\(s\) \['project', 'requester_pays'\] cannot be passed "
                                         r"to obstore \(GCSStore\) .* Accepted with store=obstore: token, endpoint_url;"):
        obstore_options("gs://b/x.zarr", {"requester_pays": True, "project": "p"})
    with pytest.raises(UsageError, match=r"^store=obstore reads s3://, gs://, http\(s\):// URLs and local paths, "
                                         r"not memory:// \('memory://x.zarr'\); use store=fsspec for it\.$"):
        obstore_options("memory://x.zarr", {})
    with pytest.raises(UsageError, match=r"^Storage option\(s\) \['key'\] cannot be passed to obstore \(LocalStore\)"
                                         r" .* Accepted with store=obstore: none;"):
        obstore_options("/tmp", {"key": "k"})


def test_obstore_store_going_away_mid_sweep_stops_the_sweep_naming_the_host(seaweed, s3_zarr, local_cluster):
    """obstore's 'error sending request' counts as unreachable: the sweep keeps its rows and stops."""
    from throughput.errors import StorageUnreachableError
    from throughput.servers.faults import FaultyProxy
    from throughput.sweep import sweep

    with FaultyProxy(seaweed.endpoint_url) as proxy:  # forwards everything; stopping it is the store going away
        options = {**seaweed.storage_options, "client_kwargs": {"endpoint_url": proxy.endpoint_url}}
        src = throughput.open_source(s3_zarr[2], "temp", storage_options=options, store="obstore")
        host = proxy.endpoint_url.removeprefix("http://")
        records = []
        with pytest.raises(StorageUnreachableError) as caught:
            for record in sweep(src, local_cluster, [1], repeats=20, retries=0, warmup=False):
                records.append(record)
                if len(records) == 2:
                    proxy.stop()
    assert [r.status for r in records] == ["ok", "ok", "error"]
    assert "error sending request" in records[2].error and "\n" not in records[2].error
    message = str(caught.value)
    assert f"Storage server {host} stopped answering" in message and "\n" not in message
    assert seaweed.secret_key not in message
