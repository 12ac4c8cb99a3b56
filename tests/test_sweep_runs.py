"""Scripted sweeps: sweep files, `throughput run`, resume after a kill, upload, collect."""

from __future__ import annotations

import csv
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from throughput.cli import main
from throughput.errors import ArchiveError
from throughput.records import COLUMNS
from throughput.servers.s3 import MotoS3
from throughput.sweepfile import SweepFileError, check_sweep, load_sweep_file

from .conftest import SMALL_SHAPE

NBYTES = 1
for _n in SMALL_SHAPE:
    NBYTES *= _n
NBYTES *= 4  # float32


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def rows_of(path: Path) -> list[dict]:
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames) == COLUMNS
        rows = list(reader)
    for row in rows:  # every row whole: no missing or extra fields
        assert None not in row and None not in row.values(), row
    return rows


def only_csv(folder: Path) -> Path:
    found = sorted(folder.glob("*.csv"))
    assert len(found) == 1, found
    return found[0]


# -- the sweep file ---------------------------------------------------------------------------

def test_every_problem_reported_with_key_paths(tmp_path, capfd):
    sweep = write(tmp_path / "bad.yaml", """\
        name: "bad name!"
        sources:
          - url: synthetic://a?shape=4,4&chunks=2,2
            workers: [0, 2, 2, x]
            varible: temp
          - catalog: "no-entry-here"
          - url: s3://bucket/x.zarr
            storage_options: {key: "${TP_UNSET_VARIABLE}"}
          - url: zz://foo
            repeats: 0
        workers: "1,,2"
        cluster: {kind: kube}
        labels: {cloud: [1]}
        upload: {url: "s3://b/p/", extra: 1}
        """)
    assert main(["run", str(sweep)]) == 2
    err = capfd.readouterr().err
    expected = [
        "has 13 problems:",
        "[1] name: got 'bad name!'; use letters, digits and . _ - + @ (it names the results file).",
        "[2] sources[0].varible: unknown key; did you mean 'variable'? Accepted: url, catalog, name,",
        "[3] sources[0].workers[0]: got 0; worker counts must be positive integers (at most 100000), like 1, 2, 4.",
        "[4] sources[0].workers[2]: worker count 2 is listed twice; list each count once (use repeats for more runs).",
        "[5] sources[0].workers[3]: got 'x'; worker counts must be positive integers",
        "[6] sources[1].catalog: got 'no-entry-here'; must be CATALOG:ENTRY, like catalogs/pangeo.yaml:gfdl_cm26_ocean.",
        "[7] sources[2].storage_options.key: environment variable 'TP_UNSET_VARIABLE' is not set",
        "[8] sources[3].url: Unknown URL protocol 'zz' in 'zz://foo'.",
        "[9] sources[3].repeats: got 0; must be an integer from 1 to 10000, like 3.",
        "[10] workers[1]: got ''; worker counts must be positive integers",
        "[11] cluster.kind: unknown cluster kind 'kube'; must be one of [",
        "[12] labels.cloud: got [1]; must be a short label, like 'aws' or 'us-west-2'.",
        "[13] upload.extra: unknown key; Accepted: url, storage_options.",
    ]
    for line in expected:
        assert line in err, line
    assert "Traceback" not in err
    assert not (tmp_path / "results").exists()  # nothing ran, nothing written


@pytest.mark.parametrize("text, where, message", [
    ("", "", "the file is empty"),
    ("- just\n- a list\n", "", "got ['just', 'a list']; must be a mapping of sweep settings"),
    ("sources: [\n", "line 2, column 1", "not valid YAML"),
    ("workers: [1]\n", "sources", "missing; give a list of sources"),
    ("sources: []\nworkers: [1]\n", "sources", "must be a non-empty list of sources"),
    ("sources: [{url: 'synthetic://a', catalog: 'c.yaml:e'}]\nworkers: [1]\n", "sources[0]",
     "give exactly one of url:"),
    ("sources: [{url: 'synthetic://a'}]\n", "sources[0].workers", "missing; give worker counts here or at the top level"),
    ("sources: [{url: 'synthetic://a'}, {url: 'synthetic://b?x=1', name: a}]\nworkers: [1]\n", "sources[1].name",
     "'a' is also the name of sources[0]"),
    ("sources: [synthetic://a]\nworkers: [1]\nrepeats: true\n", "repeats", "got True; must be an integer from 1"),
    ("sources: [synthetic://a]\nworkers: [1]\nthreads_per_worker: 0\n", "threads_per_worker", "got 0; must be an integer"),
    ("sources: [synthetic://a]\nworkers: [1]\ncluster: {wait_timeout: -1}\n", "cluster.wait_timeout",
     "must be a number of seconds above 0"),
    ("sources: [synthetic://a]\nworkers: [1]\nversion: 2\n", "version", "reads sweep files of version 1"),
    ("sources: [{url: 'synthetic://a', format: tiledb}]\nworkers: [1]\n", "sources[0].format",
     "unknown source format 'tiledb'; must be one of"),
    ("sources: [synthetic://a]\nworkers: [1]\nlabels: {tags: {a: 'x;y'}}\n", "labels.tags.a", "without ';'"),
    ("sources: [synthetic://a]\nworkers: [1]\nupload: {storage_options: {}}\n", "upload.url", "missing; give an fsspec URL"),
    ("sources: [{url: ['s3://b/f1.nc', 'zz://b/f2.nc'], name: many}]\nworkers: [1]\n", "sources[0].url[1]",
     "Unknown URL protocol 'zz' in 'zz://b/f2.nc'."),
    ("sources: [{url: [], name: none}]\nworkers: [1]\n", "sources[0].url", "empty list; give a URL or a list"),
    ("sources: [{url: 'synthetic://a', options: [chunks]}]\nworkers: [1]\n", "sources[0].options",
     "must be a mapping of options of the source kind"),
    ("sources: [synthetic://a]\nworkers: [1]\nwarmup: 'no'\n", "warmup", "got 'no'; must be true or false."),
    ("sources: [synthetic://a]\nworkers: [1]\nblocks_per_task: 0\n", "blocks_per_task", "got 0; must be auto or an integer"),
    ("sources: [synthetic://a]\nworkers: [1]\nblocks_per_task: many\n", "blocks_per_task", "got 'many'; must be auto or an integer"),
    ("sources: [synthetic://a]\nworkers: [1]\ncluster: client\n", "cluster.kind",
     "unknown cluster kind 'client'; must be one of ['address', 'gateway', 'jobqueue', 'local'] (a running"),
    ("sources: [synthetic://a]\nworkers: [1]\nthreads_per_worker: 2\ncluster: {kind: gateway}\n", "threads_per_worker",
     "the 'gateway' cluster does not set threads per worker; leave it out, or set the worker size in cluster.options."),
    ("sources: [{url: 'synthetic://a', storage_options: {key: '${1BAD}'}}]\nworkers: [1]\n",
     "sources[0].storage_options.key", "bad environment reference '${1BAD}'"),
])
def test_single_problems(tmp_path, text, where, message):
    path = write(tmp_path / "s.yaml", text)
    with pytest.raises(SweepFileError) as info:
        load_sweep_file(path)
    assert [w for w, _ in info.value.problems] == [where], info.value.problems
    assert message in info.value.problems[0][1]
    assert "\n" not in str(info.value)  # one problem, one line


def test_environment_references_are_used_and_secret(tmp_path):
    data = {
        "sources": [{"url": "s3://bucket/x.zarr", "name": "x",
                     "storage_options": {"key": "${TP_KEY}", "secret": "${TP_SECRET}", "anon": False,
                                         "client_kwargs": {"endpoint_url": "http://127.0.0.1:9"}}},
                    {"url": "synthetic://b", "storage_options": {"token": "written-in-file"}}],
        "workers": "4,1", "repeats": 2, "labels": {"cloud": "aws", "tags": {"run": "$${literal}"}},
        "upload": {"url": "s3://archive/prefix/", "storage_options": {"secret": "${TP_SECRET}"}},
        "cluster": "local", "threads_per_worker": 2,
    }
    plan = check_sweep(data, tmp_path / "s.yaml", environ={"TP_KEY": "AKIA-key-id", "TP_SECRET": "s3cr3t-value"})
    # URLs that are not fsspec's are left to their source kind: no false problems
    others = check_sweep({"sources": ["dap2://host/ocean.nc", {"url": "llcreader://ECCOPortalLLC2160Model/SSS"},
                                      {"url": ["s3://b/a.nc", "s3://b/b.nc"], "name": "files"}], "workers": [1]},
                         tmp_path / "o.yaml")
    assert [s.url for s in others.sources][2] == ["s3://b/a.nc", "s3://b/b.nc"]
    first = plan.sources[0]
    assert first.storage_options["key"] == "AKIA-key-id" and first.storage_options["secret"] == "s3cr3t-value"
    assert first.workers == (4, 1) and first.repeats == 2 and plan.total == 8
    assert first.labels == {"cloud": "aws", "tags": {"run": "${literal}"}}
    assert plan.upload.storage_options == {"secret": "s3cr3t-value"}
    assert plan.cluster_kind == "local" and plan.cluster_options == {"threads_per_worker": 2}
    assert {"AKIA-key-id", "s3cr3t-value", "written-in-file"} <= plan.secrets
    warning = ("sources[1].storage_options.token holds a credential written in the sweep file; "
               "consider ${ENV_VAR} so the file can be shared.")
    assert plan.warnings == (warning,)
    assert "s3cr3t" not in repr(plan)
    gateway = check_sweep({**data, "threads_per_worker": None,
                           "cluster": {"kind": "gateway", "wait_timeout": 30,
                                       "options": {"address": "http://127.0.0.1:1", "password": "gateway-pass"}}},
                          tmp_path / "s.yaml", environ={"TP_KEY": "AKIA-key-id", "TP_SECRET": "s3cr3t-value"})
    assert gateway.cluster_options == {"address": "http://127.0.0.1:1", "password": "gateway-pass", "wait_timeout": 30.0}
    assert "gateway-pass" in gateway.secrets
    assert "cluster.options.password holds a credential written in the sweep file" in gateway.warnings[0]
    # the digest names the results: same content, same digest, whatever the environment holds
    again = check_sweep(data, tmp_path / "s.yaml", environ={"TP_KEY": "other", "TP_SECRET": "other-secret"})
    assert again.digest == plan.digest and len(plan.digest) == 12


# -- end to end against the local S3 server ------------------------------------------------------

@pytest.fixture()
def s3_env(seaweed, monkeypatch):
    """Credentials for the local S3 server, offered only through the environment."""
    monkeypatch.setenv("TP_TEST_KEY", seaweed.access_key)
    monkeypatch.setenv("TP_TEST_SECRET", seaweed.secret_key)
    return seaweed


def two_source_sweep(path: Path, seaweed, s3_zarr, upload: str | None, first: str, second: str) -> Path:
    """Zarr v2 and v3 of the small dataset on the local S3 server, credentials from the environment.

    ``first`` and ``second`` are each source's own ``workers``/``repeats`` settings: the
    second source starts at the worker count the first ends with, so no rescaling is spent.
    """
    endpoint = f'client_kwargs: {{endpoint_url: "{seaweed.endpoint_url}"}}'
    options = f'{{key: "${{TP_TEST_KEY}}", secret: "${{TP_TEST_SECRET}}", {endpoint}}}'
    text = f"""\
        name: two-zarr
        sources:
          - {{url: "{s3_zarr[2]}", name: zarr-v2, variable: temp, storage_options: {options}, {first}}}
          - {{url: "{s3_zarr[3]}", name: zarr-v3, variable: temp, storage_options: {options}, {second},
              options: {{chunks: [2, 10, 27, 36]}},
              labels: {{tags: {{layout: v3}}}}}}
        labels: {{cloud: local, region: loopback, tags: {{campaign: test}}}}
        output: out
        """
    text = textwrap.dedent(text)
    if upload:
        text += f"upload:\n  url: {upload}\n  storage_options: {options}\n"
    return write(path, text)


def test_two_source_sweep_uploads_the_whole_file(s3_env, s3_zarr, bucket, tmp_path, capfd):
    seaweed = s3_env
    sweep = two_source_sweep(tmp_path / "sweep.yaml", seaweed, s3_zarr, f"s3://{bucket}/archive/",
                             "workers: [2, 1], repeats: 1", "workers: 1, repeats: 2")
    assert main(["run", str(sweep)]) == 0
    out, err = capfd.readouterr()
    local = only_csv(tmp_path / "out")
    assert local.name.endswith("_two-zarr_" + load_sweep_file(sweep).digest + ".csv")
    rows = rows_of(local)
    assert [(r["source"], r["requested_workers"], r["repeat"]) for r in rows] == [
        ("zarr-v2", "2", "0"), ("zarr-v2", "1", "0"), ("zarr-v3", "1", "0"), ("zarr-v3", "1", "1")]
    for row in rows:
        assert row["status"] == "ok", row["error"]
        assert int(row["bytes_received"]) == int(row["nbytes"]) == NBYTES
        assert row["nworkers"] == row["requested_workers"] and row["cloud"] == "local"
    assert rows[0]["tags"] == "campaign=test" and rows[2]["tags"] == "campaign=test;layout=v3"
    assert (rows[0]["chunks"], rows[2]["chunks"]) == ("1x5x27x36", "2x10x27x36")  # kind options reach the source
    assert rows[0]["options"].count('"***"') == 2  # key and secret masked, endpoint kept
    assert len({r["run_id"] for r in rows}) == 1
    # progress and summary
    assert "[4/4 " in err and "zarr-v3: 1 worker(s), repeat 2/2:" in err
    assert "Summary of" in out and "zarr-v2" in out and "median" in out
    # the uploaded object is the local file, byte for byte and row for row
    remote = f"s3://{bucket}/archive/{local.name}"
    assert f"uploaded: {remote}" in err
    fs = seaweed.filesystem()
    assert fs.cat(remote) == local.read_bytes()
    with fs.open(remote, "r") as f:
        assert list(csv.DictReader(f)) == rows
    # credentials from the environment were used, and written nowhere
    for text in (local.read_text(), fs.cat(remote).decode(), out, err):
        assert seaweed.secret_key not in text and seaweed.access_key not in text


def test_resume_after_sigterm_between_points(s3_env, s3_zarr, tmp_path, capfd):
    seaweed = s3_env
    # 24 points: zarr-v2 at 1 worker (x2), then at 2 workers (x2), then zarr-v3 at 2 workers (x20).
    # The signal goes once the first two rows are in; the 22 runs left (a few seconds, even with
    # workers that start in 0.1 s) keep it from arriving after the end.
    total = 24
    sweep = two_source_sweep(tmp_path / "sweep.yaml", seaweed, s3_zarr, None,
                             "workers: [1, 2], repeats: 2", "workers: [2], repeats: 20")
    command = [str(Path(sys.executable).parent / "throughput"), "run", str(sweep)]
    proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        results = None
        while time.monotonic() < deadline and proc.poll() is None:  # poll the file, never a fixed wait
            found = list((tmp_path / "out").glob("*.csv"))
            if found and found[0].read_text().count("\n") >= 1 + 2:
                results = found[0]
                break
            time.sleep(0.02)
        assert results is not None, proc.communicate(timeout=60)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "throughput: interrupted" in err
    assert f"measure the rest with: throughput run {sweep.resolve()} --resume" in err
    before = results.read_bytes()
    first = rows_of(results)  # parses, every row whole
    assert 2 <= len(first) < total, "the signal came too late to test resuming"
    assert before.endswith(b"\n") and all(r["status"] == "ok" for r in first)

    # resume: the same file, the missing points only, nothing duplicated or lost
    assert main(["run", str(sweep), "--resume"]) == 0
    out, err = capfd.readouterr()
    assert f"resuming {results}: {len(first)} of {total} point(s) already recorded, {total - len(first)} to measure" \
        in err
    assert only_csv(tmp_path / "out") == results
    assert results.read_bytes().startswith(before)  # earlier rows untouched
    rows = rows_of(results)
    points = [(r["source"], int(r["requested_workers"]), int(r["repeat"])) for r in rows]
    expected = {("zarr-v2", n, r) for n in (1, 2) for r in range(2)} | {("zarr-v3", 2, r) for r in range(20)}
    assert len(points) == len(set(points)) == total and set(points) == expected
    assert all(r["status"] == "ok" for r in rows)
    assert len({r["run_id"] for r in rows[len(first):]}) == 1 and rows[-1]["run_id"] != first[0]["run_id"]
    for text in (results.read_text(), out, err):
        assert seaweed.secret_key not in text and seaweed.access_key not in text


def test_resume_refuses_a_foreign_file_and_plain_run_never_appends(tmp_path, capfd):
    sweep = write(tmp_path / "s.yaml", "sources: [synthetic://a]\nworkers: [1]\nrepeats: 1\n")
    other = write(tmp_path / "other.csv", "a,b\n1,2\n")
    assert main(["run", str(sweep), "--results", str(other)]) == 2
    assert f"Results file '{other}' already exists. Add --resume to continue it" in capfd.readouterr().err
    assert main(["run", str(sweep), "--results", str(other), "--resume"]) == 1
    assert "its header is not this version's results schema" in capfd.readouterr().err
    assert other.read_text() == "a,b\n1,2\n"
    with pytest.raises(ArchiveError, match="header is not this version's results schema"):
        from throughput.archive import ResultsFile

        ResultsFile(other)


# -- upload failures ------------------------------------------------------------------------------

def test_upload_to_a_stopped_server_keeps_the_file_and_says_how_to_retry(tmp_path, capfd):
    results = write(tmp_path / "results.csv", ",".join(COLUMNS) + "\n")
    server = MotoS3().start()
    server.make_bucket("archive-bucket")
    endpoint = server.endpoint_url
    server.stop()
    url = "s3://archive-bucket/team/"
    args = ["upload", str(results), url, "-s", f"key={server.access_key}", "-s", f"secret={server.secret_key}",
            "-s", f"client_kwargs.endpoint_url={endpoint}", "-s", "config_kwargs.retries.max_attempts=1"]
    before = results.read_bytes()
    assert main(args) == 1
    err = capfd.readouterr().err.strip().splitlines()[-1]  # one line (moto logs its requests above)
    retry = (f"throughput upload {results} {url} --storage-option 'key=***' --storage-option 'secret=***' "
             f"--storage-option client_kwargs.endpoint_url={endpoint} --storage-option config_kwargs.retries.max_attempts=1")
    assert err.startswith(f"throughput: error: upload to {url}results.csv failed: EndpointConnectionError: "), err
    assert f"The results are kept locally in '{results}'. Retry with: {retry}" in err
    assert server.secret_key not in err and server.access_key not in err
    assert results.read_bytes() == before


def test_failed_run_upload_gives_a_retry_command_that_works(tmp_path, capfd):
    blocker = write(tmp_path / "archive", "a file where the archive folder should be\n")
    sweep = write(tmp_path / "s.yaml", """\
        name: tiny
        sources: ["synthetic://t?shape=4,8&chunks=2,8"]
        workers: [1]
        repeats: 2
        cluster: {kind: local, options: {processes: false}}   # one worker: threads start faster
        warmup: false
        blocks_per_task: 2
        upload: archive/sub/
        """)
    assert main(["run", str(sweep)]) == 1
    err = capfd.readouterr().err
    assert (f"warning: uploading to {tmp_path / 'archive/sub'} would fail now: '{blocker}' is a file, not a folder. "
            "The sweep runs; the upload is tried at the end.") in err
    local = only_csv(tmp_path / "results")
    assert len(rows_of(local)) == 2
    retry = f"throughput upload {local} {tmp_path / 'archive/sub/'} --sweep {sweep.resolve()}"
    assert f"The results are kept locally in '{local}'. Retry with: {retry}" in err
    # once the target is fixed, the command given retries the upload
    blocker.unlink()
    assert main(shlex.split(retry)[1:]) == 0
    assert (tmp_path / "archive" / "sub" / local.name).read_bytes() == local.read_bytes()
    assert not [p for p in (tmp_path / "archive" / "sub").iterdir() if p.name != local.name]  # no temp files


def test_upload_replaces_an_object_whole(moto_s3, tmp_path):
    from throughput.upload import upload_files

    moto_s3.make_bucket("replace-bucket")
    first = write(tmp_path / "r.csv", "x\n" * 10)
    assert upload_files([first], "s3://replace-bucket/p/", moto_s3.storage_options) == ["s3://replace-bucket/p/r.csv"]
    first.write_text("y\n" * 3)
    upload_files([first], "s3://replace-bucket/p/", moto_s3.storage_options)
    assert moto_s3.filesystem().cat("s3://replace-bucket/p/r.csv") == b"y\n" * 3


# -- collect ---------------------------------------------------------------------------------------

SEED_CSV = """\
,operation,nbytes,cloud,region,nthreads,ncores,nworkers,runtime,throughput_MBps
0,load,466560000000,OSN,ncsa,52,52,26,81.508533,5724.063287
1,load,466560000000,OSN,ncsa,56,56,28,74.447608,6266.957584
"""


def test_collect_merges_layouts_and_drops_duplicates(seaweed, bucket, tmp_path, capfd):
    from throughput.archive import ResultsFile
    from throughput.records import Record

    ours = tmp_path / "results" / "ours.csv"
    with ResultsFile(ours) as results:
        for repeat in range(2):
            results.append(Record(run_id="r1", timestamp=f"2026-01-01T00:00:0{repeat}+00:00", source="s", nbytes=64,
                                  nworkers=1, nthreads=1, ncores=1, runtime=0.1 + repeat / 3,
                                  throughput_MBps=64e-6 / (0.1 + repeat / 3), repeat=repeat))
    (tmp_path / "seed").mkdir()
    seed = write(tmp_path / "seed" / "OSN-test-1.csv", SEED_CSV)
    fs = seaweed.filesystem()
    fs.put_file(str(ours), f"{bucket}/copy/{ours.name}")  # the same rows again, from a bucket
    opts = [f"key={seaweed.access_key}", f"secret={seaweed.secret_key}",
            f"client_kwargs.endpoint_url={seaweed.endpoint_url}"]
    merged = tmp_path / "merged.csv"
    args = ["collect", str(tmp_path / "results"), str(seed.parent), f"s3://{bucket}/copy/", "-o", str(merged)]
    assert main(args + [a for o in opts for a in ("-s", o)]) == 0
    err = capfd.readouterr().err
    assert f"4 row(s) from 3 file(s) (2 duplicate(s) dropped) -> {merged}" in err
    rows = rows_of(merged)
    assert rows[:2] == rows_of(ours)  # our rows unchanged, text for text
    osn = rows[2:]
    assert [r["runtime"] for r in osn] == ["81.508533", "74.447608"]
    assert osn[0]["source"] == "OSN" and osn[0]["status"] == "ok" and osn[0]["run_id"] == ""
    assert float(osn[0]["throughput_MBps_per_thread"]) == pytest.approx(5724.063287 / 52)
    assert not list(tmp_path.glob(".merged.csv.*"))  # written whole, no temporary left


def test_collect_names_a_garbage_file(tmp_path, capfd):
    write(tmp_path / "good.csv", SEED_CSV)
    bad = write(tmp_path / "bad.csv", SEED_CSV.replace("81.508533", "fast"))
    assert main(["collect", str(tmp_path), "-o", str(tmp_path / "m.csv")]) == 1
    assert f"'{bad}' row 2, column 'runtime': got 'fast'; must be a number." in capfd.readouterr().err
    bad.write_bytes(b"\x00\xff\xfe garbage")
    assert main(["collect", str(bad), "-o", str(tmp_path / "m.csv")]) == 1
    assert f"'{bad}' is not" in capfd.readouterr().err
    assert not (tmp_path / "m.csv").exists()


def test_run_check_shows_points_without_running(tmp_path, capfd):
    sweep = write(tmp_path / "s.yaml", "sources: [synthetic://a, synthetic://b]\nworkers: [1, 2]\nrepeats: 3\n")
    assert main(["run", str(sweep), "--check"]) == 0
    out = capfd.readouterr().out
    assert "12 point(s), 12 to measure" in out
    assert not (tmp_path / "results").exists()


def test_catalog_source_in_a_sweep_file(small_dataset, tmp_path, capfd):
    from throughput.datasets import write_zarr

    write_zarr(small_dataset, str(tmp_path / "ocean.zarr"), zarr_format=2)
    write(tmp_path / "cat.yaml", """\
        metadata: {version: 1}
        sources:
          ocean:
            driver: [throughput.catalog.ArraySource, zarr]
            args: {urlpath: "{{ CATALOG_DIR }}/ocean.zarr", consolidated: true}
            metadata: {format: zarr, variable: temp, cloud: disk, region: here}
        """)
    sweep = write(tmp_path / "s.yaml", """\
        sources:
          - catalog: cat.yaml:ocean
          - {catalog: "cat.yaml:ocean", name: ocean-relabelled, labels: {region: elsewhere}}
        workers: [1]
        repeats: 1
        cluster: {kind: local, options: {processes: false}}
        labels: {cloud: top, tags: {via: catalog}}
        """)
    assert main(["run", str(sweep)]) == 0, capfd.readouterr().err
    rows = rows_of(only_csv(tmp_path / "results"))
    assert [(r["source"], r["cloud"], r["region"], r["variable"], r["tags"]) for r in rows] == [
        ("ocean", "disk", "here", "temp", "via=catalog"), ("ocean-relabelled", "disk", "elsewhere", "temp", "via=catalog")]
    assert all(int(r["bytes_received"]) == NBYTES for r in rows)


def test_errors_shown_to_the_user_carry_no_secret(tmp_path, capfd, monkeypatch):
    monkeypatch.setenv("TP_HIDDEN", "hidden-value-1234")
    sweep = write(tmp_path / "s.yaml", """\
        sources: ["synthetic://t?shape=4,4&chunks=2,2&dtype=${TP_HIDDEN}"]
        workers: [1]
        """)
    assert main(["run", str(sweep)]) == 2
    err = capfd.readouterr().err
    assert "Unknown dtype '***'" in err and "hidden-value-1234" not in err
    # the results file was opened first (preflight), and removed again: no row, no file
    assert not list((tmp_path / "results").glob("*"))



def test_collect_keeps_error_rows(tmp_path):
    from throughput.archive import ResultsFile
    from throughput.collect import collect
    from throughput.records import Record

    with ResultsFile(tmp_path / "a.csv") as results:
        results.append(Record(run_id="r1", timestamp="2026-01-01T00:00:00+00:00", source="s", status="error",
                              error="OSError: unreadable", requested_workers=2))
    merged = collect([str(tmp_path / "a.csv"), str(tmp_path)])
    assert merged.rows_read == 2 and merged.duplicates == 1 and len(merged.table) == 1
    row = merged.table.iloc[0]
    assert (row["status"], row["runtime"], row["error"]) == ("error", "nan", "OSError: unreadable")


def test_upload_refused_by_the_store(seaweed, bucket, tmp_path, capfd):
    results = write(tmp_path / "results.csv", ",".join(COLUMNS) + "\n")
    url = f"s3://{bucket}/team/"
    args = ["upload", str(results), url, "-s", f"key={seaweed.access_key}", "-s", "secret=wrong-secret-123",
            "-s", f"client_kwargs.endpoint_url={seaweed.endpoint_url}"]
    assert main(args) == 1
    err = capfd.readouterr().err
    assert f"throughput: error: upload to {url}results.csv failed: PermissionError: " in err
    assert f"The results are kept locally in '{results}'. Retry with: throughput upload {results} {url} " in err
    assert "wrong-secret-123" not in err and seaweed.access_key not in err
    assert not seaweed.filesystem().exists(f"{bucket}/team/results.csv")


def test_upload_target_checked_before_the_sweep(moto_s3, tmp_path):
    from throughput.upload import check_target

    moto_s3.make_bucket("present-bucket")
    assert check_target("s3://present-bucket/team/", moto_s3.storage_options) is None
    assert check_target("s3://absent-bucket/team/", moto_s3.storage_options) == (
        "bucket 'absent-bucket' does not exist (or cannot be seen with these credentials)")
    assert check_target(str(tmp_path / "new" / "folder"), None) is None  # made when uploading


def test_recorded_points_and_retry_failed(tmp_path):
    from throughput.archive import ResultsFile
    from throughput.records import Record
    from throughput.resume import choose_results_path, recorded_points

    path = tmp_path / "out" / "20260101T000000Z_s_abc.csv"
    with ResultsFile(path) as results:
        for n, r, status in [(1, 0, "ok"), (1, 1, "error"), (2, 0, "error"), (2, 0, "ok")]:
            results.append(Record(run_id="x", timestamp="t", source="s", requested_workers=n, repeat=r, status=status))
    assert recorded_points(path) == {("s", 1, 0), ("s", 1, 1), ("s", 2, 0)}
    assert recorded_points(path, retry_failed=True) == {("s", 1, 0), ("s", 2, 0)}
    # --resume finds the newest file of the same name and content hash; a plain run starts a new one
    older = tmp_path / "out" / "20250101T000000Z_s_abc.csv"
    older.write_text("")
    assert choose_results_path(tmp_path / "out", "s", "abc", resume=True) == (path, True)
    fresh, existing = choose_results_path(tmp_path / "out", "s", "abc")
    assert not existing and fresh.name.endswith("_s_abc.csv") and fresh != path
    assert choose_results_path(tmp_path / "out", "s", "other", resume=True)[1] is False


def test_collect_the_published_archive(tmp_path, capfd):
    published = Path(__file__).resolve().parents[1] / "results" / "published"
    seed = write(tmp_path / "OSN-test-1.csv", SEED_CSV)  # the same two OSN rows, in the Zenodo layout
    merged = tmp_path / "merged.csv"
    assert main(["collect", str(published), str(seed), "-o", str(merged)]) == 0
    rows = rows_of(merged)
    # the published files predate the request_retries/task_retries columns: count their rows as they are
    published_rows = sum(len(list(csv.DictReader(p.open(newline="")))) for p in published.glob("*.csv"))
    assert len(rows) == published_rows + 2  # the Zenodo rows carry no run_id, note or tags: not identical
    assert {r["source"] for r in rows} == {"GCS Zarr", "OSN Zarr", "OSN"}
    assert f"{published_rows + 2} row(s) from 3 file(s) (0 duplicate(s) dropped)" in capfd.readouterr().err
