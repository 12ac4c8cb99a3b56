"""Bad-input matrix (issue 8): one table over the CLI and the Python API.

Every case must give exactly one line on stderr (CLI) or a one-line ThroughputError
(API) that names the bad value and what would be accepted; exit code 2 for usage
errors and 1 for runtime failures; no traceback; and nothing lost (a results file
already in the out folder is untouched, no new or half-written file appears).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

import throughput
from throughput.cli import main
from throughput.errors import ThroughputError
from throughput.report import load_results

OUT = "{out}"  # replaced by the case's out folder


@dataclass
class Case:
    id: str
    args: list[str] | None = None
    """CLI arguments (``{s3}`` expands to the options reaching the local S3 server, ``{...}`` to paths)."""
    code: int = 2
    says: tuple[str, ...] = field(default_factory=tuple)
    """Texts the one line must contain (the bad value, what is accepted)."""
    call: Any = None
    """Python API call: ``call(ctx)`` must raise."""


SYN = "synthetic://t?shape=4,4&chunks=2,2"

CASES = [
    # worker counts
    Case("workers-zero", ["sweep", SYN, "-w", "0"], 2, ("'0'", "positive integers")),
    Case("workers-negative", ["sweep", SYN, "--workers=-1"], 2, ("'-1'", "positive integers")),
    Case("workers-letter", ["sweep", SYN, "-w", "a"], 2, ("'a'", "like 1,2,4")),
    Case("workers-empty-item", ["sweep", SYN, "-w", "1,,2"], 2, ("''", "'1,,2'", "positive integers")),
    Case("workers-empty", ["sweep", SYN, "-w", ""], 2, ("positive integers",)),
    Case("workers-fraction", ["sweep", SYN, "-w", "1.5"], 2, ("'1.5'",)),
    Case("workers-non-ascii-digit", ["sweep", SYN, "-w", "\u0663"], 2, ("positive integers",)),
    Case("workers-huge", ["sweep", SYN, "-w", str(10**9)], 2, (str(10**9), "at most 100000")),
    # repeats
    Case("repeats-zero", ["sweep", SYN, "-r", "0"], 2, ("repeats 0", "from 1 to 10000")),
    Case("repeats-negative", ["sweep", SYN, "-r", "-3"], 2, ("repeats -3", "from 1 to 10000")),
    Case("repeats-huge", ["sweep", SYN, "-r", str(10**9)], 2, (str(10**9), "from 1 to 10000")),
    Case("repeats-text", ["sweep", SYN, "-r", "x"], 2, ("'x'", "integer", "--repeats")),
    # click's own usage errors
    Case("missing-url", ["sweep"], 2, ("Missing argument 'URL'", "throughput sweep --help")),
    Case("unknown-option", ["sweep", SYN, "--bogus"], 2, ("--bogus",)),
    Case("unknown-command", ["swep"], 2, ("'swep'",)),
    Case("threads-zero", ["sweep", SYN, "--threads-per-worker", "0"], 2, ("0", "1<=x<=1024")),
    # options
    Case("cluster-kind", ["sweep", SYN, "--cluster", "bogus"], 2, ("'bogus'", "'local'", "'gateway'")),
    Case("storage-option-no-equals", ["sweep", SYN, "-s", "anon"], 2, ("'anon=...'", "key=value")),
    Case("cluster-option-no-key", ["sweep", SYN, "--cluster-option", "=1"], 2, ("--cluster-option", "key=value")),
    Case("storage-option-yaml-tag", ["sweep", SYN, "-s", "anon=!!python/object/apply:os.system ['echo pwned']"], 2,
         ("'anon'", "YAML tags", "plain value")),
    Case("format-unknown", ["sweep", SYN, "--format", "bogus"], 2, ("'bogus'", "'zarr'")),
    # URLs, protocols and what they point at
    Case("protocol-unknown", ["sweep", "nosuch://bucket/x.zarr"], 2, ("'nosuch'", "'s3'", "local path")),
    Case("protocol-not-installed", ["sweep", "abfs://container/x.zarr"], 1, ("'abfs'", "adlfs")),
    Case("synthetic-bad-shape", ["sweep", "synthetic://t?shape=a,b"], 2, ("'a,b'", "positive integers")),
    Case("synthetic-unknown-param", ["sweep", "synthetic://t?shap=4"], 2, ("'shap'", "'shape'")),
    Case("shape-too-many-chunks", ["sweep", "synthetic://t?shape=100000,100000,100000&chunks=1,1,1"], 2,
         ("1000000000000000 chunks", "at most 1000000", "larger chunks")),
    Case("chunk-too-big", ["sweep", "synthetic://t?shape=1000000,1000000&chunks=1000000,1000000"], 2,
         ("4000000000000 bytes", "at most 17179869184", "smaller chunks")),
    Case("local-path-missing", ["sweep", "/nonexistent/throughput/x.zarr"], 1, ("/nonexistent/throughput/x.zarr",)),
    Case("bucket-missing", ["sweep", "s3://no-such-bucket-{uid}/x.zarr", "{s3}"], 1,
         ("s3://no-such-bucket-", "No Zarr store")),
    Case("object-missing", ["sweep", "s3://{bucket}/missing.zarr", "{s3}"], 1,
         ("s3://{bucket}/missing.zarr", "No Zarr store")),
    Case("variable-missing", ["sweep", "s3://{bucket}/group.zarr", "-v", "salt", "{s3}"], 2,
         ("'salt' not found", "Variables: ['temp']")),
    Case("variable-is-a-group", ["sweep", "s3://{bucket}/group.zarr", "-v", "sub", "{s3}"], 2,
         ("'sub'", "is a group, not an array", "Arrays: ['temp']")),
    Case("variable-ambiguous", ["sweep", "s3://{bucket}/two.zarr", "{s3}"], 2, ("Name a variable", "['a', 'b']")),
    Case("array-empty", ["sweep", "s3://{bucket}/empty.zarr", "{s3}"], 2, ("is empty", "(0, 10)")),
    Case("array-object-dtype", ["sweep", "s3://{bucket}/strings.zarr", "{s3}"], 2, ("object dtype", "numeric")),
    Case("store-unreachable", ["sweep", "s3://b/x.zarr", "-s", "endpoint_url=http://127.0.0.1:{dead}",
                               "-s", "anon=true"], 1, ("127.0.0.1:{dead}", "did not answer")),
    Case("source-option-unknown", ["sweep", "s3://{bucket}/group.zarr", "-v", "temp", "--option", "bogus=1", "{s3}"],
         2, ("['bogus']", "Accepted: chunks")),
    Case("synthetic-option-unknown", ["sweep", SYN, "--option", "bogus=1"], 2, ("['bogus']", "in the URL")),
    Case("zarr-bad-chunks", ["sweep", "s3://{bucket}/group.zarr", "-v", "temp", "--option", "chunks=abc", "{s3}"],
         2, ("'abc'", "like 1,5,270,360")),
    Case("netcdf-not-netcdf", ["sweep", "{tmp}/garbage.nc"], 2, ("garbage.nc", "not a NetCDF4/HDF5 file")),
    Case("netcdf-missing", ["sweep", "/nonexistent/throughput/x.nc"], 1, ("/nonexistent/throughput/x.nc",)),
    Case("demo-unknown-source", ["demo", "--sources", "nosuch", "-o", "{out}"], 2, ("['nosuch']", "'local-s3-zarr'")),
    # catalogs
    Case("catalog-missing-file", ["sweep", "{tmp}/nocatalog.yaml:x"], 2, ("nocatalog.yaml", "not found")),
    Case("catalog-malformed-yaml", ["sweep", "{tmp}/broken.yaml:x"], 2, ("broken.yaml", "not valid YAML", "line")),
    Case("catalog-python-tag", ["sweep", "{tmp}/evil.yaml:x"], 2, ("evil.yaml", "not valid YAML", "python/object")),
    Case("catalog-not-a-catalog", ["sweep", "{tmp}/list.yaml:x"], 2, ("list.yaml", "'sources:'")),
    Case("catalog-unknown-entry", ["sweep", "catalogs/local_demo.yaml:nosuch"], 2, ("'nosuch'", "Entries: [")),
    Case("catalog-no-entry-named", ["sweep", "catalogs/local_demo.yaml"], 2, ("CATALOG:ENTRY", "Entries: [")),
    Case("catalog-list-python-tag", ["sources", "{tmp}/evil.yaml"], 2, ("evil.yaml", "python/object")),
    # results folder
    Case("out-under-a-file", ["sweep", SYN, "-o", "{tmp}/afile/results"], 1, ("{tmp}/afile", "writable folder")),
    # archives (reports)
    Case("archive-binary-garbage", ["report", "{tmp}/garbage.csv", "-o", "{tmp}/r.html"], 1,
         ("garbage.csv",)),
    Case("archive-missing-columns", ["report", "{tmp}/columns.csv", "-o", "{tmp}/r.html"], 1,
         ("columns.csv", "missing column(s)", "'runtime'")),
    Case("archive-not-numbers", ["report", "{tmp}/words.csv", "-o", "{tmp}/r.html"], 1,
         ("words.csv", "row 2", "'runtime'", "'fast'", "not a number")),
    Case("archive-empty-file", ["report", "{tmp}/empty.csv", "-o", "{tmp}/r.html"], 1, ("empty.csv",)),
    Case("archive-missing", ["report", "{tmp}/nothere.csv", "-o", "{tmp}/r.html"], 1, ("nothere.csv",)),
    # the Python API
    Case("api-url-none", call=lambda c: throughput.open_source(None), says=("non-empty string", "None")),
    Case("api-url-empty", call=lambda c: throughput.open_source("  "), says=("non-empty string",)),
    Case("api-format-unknown", call=lambda c: throughput.open_source(SYN, format="tiff"), says=("'tiff'", "'zarr'")),
    Case("api-workers-empty", call=lambda c: list(throughput.sweep(c["syn"], c["cluster"], [], 1)),
         says=("No worker counts", "1,2,4")),
    Case("api-workers-bool", call=lambda c: list(throughput.sweep(c["syn"], c["cluster"], [True], 1)),
         says=("True", "positive integer")),
    Case("api-workers-huge", call=lambda c: list(throughput.sweep(c["syn"], c["cluster"], [10**9], 1)),
         says=(str(10**9), "at most 100000")),
    Case("api-repeats-text", call=lambda c: list(throughput.sweep(c["syn"], c["cluster"], [1], "3")),
         says=("'3'", "from 1 to 10000")),
    Case("api-cluster-kind", call=lambda c: throughput.open_cluster("kubernetes"), says=("'kubernetes'", "'local'")),
    Case("api-archive-garbage", call=lambda c: load_results(c["tmp"] / "words.csv"), code=1,
         says=("'runtime'", "'fast'", "not a number")),
    Case("api-results-unwritable", call=lambda c: throughput.ResultsFile(c["tmp"] / "afile" / "x.csv"), code=1,
         says=("afile", "writable folder")),
]


@pytest.fixture(scope="module")
def bad_stores(seaweed):
    """A bucket of awkward Zarr stores: a group with a subgroup, two arrays, an empty and a string array."""
    bucket = f"bad-{uuid.uuid4().hex[:8]}"
    seaweed.make_bucket(bucket)
    opts = seaweed.storage_options

    def store(name):
        return zarr.storage.FsspecStore.from_url(f"s3://{bucket}/{name}", storage_options=opts)

    group = zarr.open_group(store("group.zarr"), mode="w")
    group.create_array("temp", shape=(4, 4), chunks=(2, 2), dtype="f4")[:] = 1
    group.create_group("sub").create_array("inner", shape=(2,), dtype="i4")
    two = zarr.open_group(store("two.zarr"), mode="w")
    for name in ("a", "b"):
        two.create_array(name, shape=(4, 4), dtype="f4")
    zarr.create_array(store("empty.zarr"), shape=(0, 10), chunks=(1, 10), dtype="f4")
    strings = zarr.create_array(store("strings.zarr"), shape=(4,), dtype=str, zarr_format=2)
    strings[:] = np.array(["a", "b", "c", "d"])
    return bucket


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Bad files: catalogs and archives."""
    tmp = tmp_path_factory.mktemp("bad-input")
    (tmp / "broken.yaml").write_text("sources:\n  x: {driver: throughput\n  y: [\n")
    (tmp / "evil.yaml").write_text("sources:\n  x: !!python/object/apply:os.system ['echo pwned > "
                                   f"{tmp}/pwned']\n")
    (tmp / "list.yaml").write_text("- a\n- b\n")
    (tmp / "afile").write_text("a file where a folder should be\n")
    (tmp / "garbage.csv").write_bytes(bytes(range(256)) * 8)
    (tmp / "columns.csv").write_text("a,b\n1,2\n")
    (tmp / "words.csv").write_text("nbytes,nthreads,ncores,nworkers,runtime\n100,1,1,1,0.5\n100,1,1,1,fast\n")
    (tmp / "empty.csv").write_text("")
    (tmp / "garbage.nc").write_text("not a netcdf file\n")
    return tmp


def _expand(text: str, ctx: dict) -> str:
    for key, value in ctx.items():
        text = text.replace("{" + key + "}", str(value))
    return text


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case, seaweed, bad_stores, inputs, tmp_path, capfd, monkeypatch):
    from throughput.servers import free_port

    ctx = {"bucket": bad_stores, "tmp": inputs, "uid": uuid.uuid4().hex[:8], "dead": free_port()}
    s3 = ["-s", f"key={seaweed.access_key}", "-s", f"secret={seaweed.secret_key}",
          "-s", f"client_kwargs.endpoint_url={seaweed.endpoint_url}"]
    if case.call is not None:
        ctx.update(syn=throughput.open_source(SYN), cluster=throughput.open_cluster("local"))  # never started
        with pytest.raises(ThroughputError) as caught:
            case.call({**ctx, "tmp": Path(inputs)})
        message, code = str(caught.value), caught.value.exit_code
        assert "\n" not in message
    else:
        # an earlier sweep's results in the out folder: nothing may happen to them
        out = tmp_path / "out"
        out.mkdir()
        kept = out / "earlier.csv"
        kept.write_text("run_id,runtime\nabc,1.0\n")
        ctx["out"] = out
        args = []
        for arg in case.args:
            args += s3 if arg == "{s3}" else [_expand(arg, ctx)]
        if case.args[0] == "sweep" and "-o" not in args:
            args += ["-o", str(out)]
        monkeypatch.chdir(Path(throughput.__file__).parent.parent)  # catalogs/ is relative to the repo
        code = main(args)
        captured = capfd.readouterr()
        lines = captured.err.splitlines()
        assert len(lines) == 1, captured.err
        assert lines[0].startswith("throughput: error: ")
        assert "Traceback" not in captured.err + captured.out
        message = lines[0]
        assert sorted(p.name for p in out.iterdir()) == ["earlier.csv"]  # nothing new, nothing lost
        assert kept.read_text() == "run_id,runtime\nabc,1.0\n"
        assert seaweed.secret_key not in captured.err + captured.out
    assert code == case.code, message
    for text in case.says:
        assert _expand(text, ctx) in message, message
    assert not (inputs / "pwned").exists()  # nothing from a YAML file was ever evaluated


def test_the_table_is_big_enough():
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)


def test_debug_flag_shows_the_traceback(capfd):
    with pytest.raises(ThroughputError):
        main(["--debug", "sweep", SYN, "--format", "bogus"])
    with pytest.raises(ThroughputError):
        main(["--debug", "sweep", "nosuch://x"])
