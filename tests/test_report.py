"""Reports from CSV rows: the seed's Zenodo layout, the published archive, numbers, figures, HTML, CLI."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pandas as pd
import pytest

from throughput import report
from throughput.cli import main
from throughput.errors import ArchiveError, UsageError
from throughput.records import COLUMNS
from throughput.servers import free_port

PUBLISHED = Path(__file__).resolve().parents[1] / "results" / "published"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

#: the first rows of the seed's OSN-test-2.csv as printed in the seed notebook, in its Zenodo layout
SEED_OSN_CSV = """\
,operation,nbytes,cloud,region,nthreads,ncores,nworkers,runtime,throughput_MBps
0,load,466560000000,OSN,ncsa,52,52,26,81.508533,5724.063287
1,load,466560000000,OSN,ncsa,56,56,28,74.447608,6266.957584
2,load,466560000000,OSN,ncsa,56,56,28,76.227204,6120.649557
"""
#: the seed's own GCS sweep as its DiagnosticTimer wrote it: no throughput column
SEED_GCS_CSV = """\
,nthreads,ncores,nworkers,nbytes,chunksize,cloud,format,runtime
0,60,60,30,466560000000,194400000,gcloud,zarr,117.696347
1,40,40,20,466560000000,194400000,gcloud,zarr,156.934256
"""


def ours(rows: list[dict]) -> pd.DataFrame:
    """A results table in schema v1 built from a few given values."""
    base = {c: "" for c in COLUMNS}
    base.update(run_id="r1", status="ok", nbytes=10**9, chunksize=10**8)
    frame = pd.DataFrame([{**base, **row} for row in rows])
    return frame


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_seed_zenodo_layout_loads_unchanged(tmp_path):
    write(tmp_path / "zenodo" / "OSN-test-2.csv", SEED_OSN_CSV)
    write(tmp_path / "zenodo" / "gcloud-test-1.csv", SEED_GCS_CSV)
    rows = report.load_results(tmp_path / "zenodo")
    assert len(rows) == 5
    assert not [c for c in rows.columns if c.startswith("Unnamed")]
    # no source column: the seed's cloud label names the source; no status: ok
    assert sorted(rows.source.unique()) == ["OSN", "gcloud"]
    assert set(rows.status) == {"ok"}
    osn = rows[rows.source == "OSN"].iloc[0]
    assert osn.operation == "load" and osn.region == "ncsa"
    # 466560000000 bytes in 81.508533 s is 5724.06 MB/s (the seed printed 5724.063287)
    assert osn.throughput_MBps == pytest.approx(5724.063287, abs=1e-6)
    assert osn.throughput_MBps_per_thread == pytest.approx(5724.063287 / 52)
    # the GCS file has no throughput column: computed as nbytes / 1e6 / runtime
    gcs = rows[rows.source == "gcloud"].sort_values("nworkers")
    assert gcs.throughput_MBps.tolist() == pytest.approx([466560000000 / 1e6 / 156.934256,
                                                         466560000000 / 1e6 / 117.696347])
    assert gcs.throughput_MBps.round(2).tolist() == [2972.96, 3964.10]


def test_named_sources_like_the_seed_files_dict(tmp_path):
    osn = write(tmp_path / "OSN-test-2.csv", SEED_OSN_CSV)
    rows = report.load_results({"OSN Zarr": [osn], "GCS Zarr": write(tmp_path / "g.csv", SEED_GCS_CSV)})
    assert rows.groupby("source").size().to_dict() == {"GCS Zarr": 2, "OSN Zarr": 3}
    assert set(rows.origin) == {str(osn), str(tmp_path / "g.csv")}


def test_results_from_an_s3_url(moto_s3, tmp_path):
    bucket = f"reports-{uuid.uuid4().hex[:8]}"
    moto_s3.make_bucket(bucket)
    fs = moto_s3.filesystem()
    fs.pipe(f"{bucket}/archive/OSN-test-2.csv", SEED_OSN_CSV.encode())
    fs.pipe(f"{bucket}/archive/notes.txt", b"not a results file")
    rows = report.load_results(f"s3://{bucket}/archive", storage_options=moto_s3.storage_options)
    assert len(rows) == 3 and set(rows.origin) == {f"s3://{bucket}/archive/OSN-test-2.csv"}
    with pytest.raises(ArchiveError, match=rf"No CSV files found in 's3://{bucket}/empty/'"):
        fs.pipe(f"{bucket}/empty/readme.txt", b"x")
        report.load_results(f"s3://{bucket}/empty/", storage_options=moto_s3.storage_options)


def test_published_archive_is_the_printed_tables():
    rows = report.load_results(PUBLISHED)
    assert rows.groupby("source").size().to_dict() == {"GCS Zarr": 4, "OSN Zarr": 25}
    published = list(pd.read_csv(next(PUBLISHED.glob("*osn*.csv"))).columns)
    assert set(rows.schema_version) == {1} and published == [c for c in COLUMNS if c in published]
    # columns added to schema v1 after the archive was written; the seed counted no retries
    assert set(COLUMNS) - set(published) == {"request_retries", "task_retries"}
    # every published throughput is nbytes / 1e6 / runtime (the seed rounded runtimes to 6 decimals)
    computed = rows["nbytes"] / 1e6 / rows["runtime"]
    assert ((rows.throughput_MBps - computed) / computed).abs().max() < 2e-8
    first = rows[rows.run_id == "zenodo3829032-OSN-test-1"].iloc[0]
    assert (first["nbytes"], first.nworkers, first.nthreads, first.runtime) == (466560000000, 26, 52, 81.508533)
    assert round(first.throughput_MBps, 2) == 5724.06
    gcs = rows[rows.source == "GCS Zarr"].sort_values("nworkers")
    assert gcs.runtime.tolist() == [414.379612, 211.342585, 156.934256, 117.696347]
    assert gcs.nworkers.tolist() == [5, 10, 20, 30] and gcs.nthreads.tolist() == [10, 20, 40, 60]
    assert set(gcs.chunksize) == {194400000} and set(gcs.cloud) == {"gcloud"}
    assert rows.note.str.contains("doi:10.5281/zenodo.3829032").all()
    assert set(rows[rows.source == "OSN Zarr"].tags.str.extract(r"seed_file=([^;]+)")[0]) == {
        "OSN-test-1.csv", "OSN-test-2.csv"}


def test_published_archive_is_tracked_by_git():
    import subprocess

    root = PUBLISHED.parents[1]
    for path in PUBLISHED.glob("*.csv"):
        ignored = subprocess.run(["git", "check-ignore", "-q", str(path)], check=False, cwd=root)
        assert ignored.returncode == 1, f"{path.name} is ignored by .gitignore"


def test_points_are_medians_and_quartiles_of_the_repeats():
    rows = report.normalise(ours([
        {"source": "a", "nworkers": 1, "nthreads": 2, "ncores": 2, "runtime": 10.0, "repeat": 0},
        {"source": "a", "nworkers": 1, "nthreads": 2, "ncores": 2, "runtime": 4.0, "repeat": 1},
        {"source": "a", "nworkers": 1, "nthreads": 2, "ncores": 2, "runtime": 2.0, "repeat": 2},
        {"source": "a", "nworkers": 2, "nthreads": 4, "ncores": 4, "runtime": 1.0, "repeat": 0},
        {"source": "b", "nworkers": 1, "nthreads": 2, "ncores": 2, "runtime": 8.0, "repeat": 0},
        {"source": "a", "nworkers": 2, "nthreads": 4, "ncores": 4, "runtime": "", "repeat": 1,
         "status": "error", "error": "OSError: chunk (1, 0) unreadable"},
    ]))
    pts = report.points(rows)
    assert pts[["source", "nworkers", "nthreads", "repeats"]].values.tolist() == [
        ["a", 1, 2, 3], ["a", 2, 4, 1], ["b", 1, 2, 1]]
    a1 = pts.iloc[0]
    # throughputs 100, 250, 500 MB/s: median 250, quartiles 175 and 375 (linear interpolation)
    assert (a1.runtime_median, a1.throughput_median) == (4.0, 250.0)
    assert (a1.throughput_q25, a1.throughput_q75, a1.throughput_iqr) == (175.0, 375.0, 200.0)
    assert a1.per_thread_median == 125.0
    assert pts.iloc[1].throughput_median == 1000.0 and pts.iloc[1].throughput_iqr == 0.0
    failed = report.failures(rows)
    assert failed[["source", "nworkers", "error"]].values.tolist() == [["a", 2, "OSError: chunk (1, 0) unreadable"]]


def test_report_html_and_pngs(tmp_path):
    local = ours([{"source": "local-s3-zarr", "nworkers": n, "nthreads": n, "ncores": n, "runtime": rt,
                   "repeat": r, "host": "laptop", "dask_version": "2099.1.0", "run_id": "abc123"}
                  for n, r, rt in ((1, 0, 2.0), (1, 1, 2.5), (2, 0, 1.2), (2, 1, 1.0))]
                 + [{"source": "local-s3-zarr", "nworkers": 2, "nthreads": 2, "ncores": 2, "repeat": 2,
                     "status": "error", "error": "TimeoutError: <read> timed out & gave up", "run_id": "abc123"}])
    write(tmp_path / "ours" / "run.csv", local.to_csv(index=False))
    rows = report.load_results([tmp_path / "ours", PUBLISHED])
    made = report.write_report(rows, tmp_path / "report.html", png_dir=tmp_path / "png", title="Ours & theirs")
    assert [p.name for p in made["pngs"]] == [f"report_{name}.png" for name in report.FIGURES]
    for png in made["pngs"]:
        data = png.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 10_000, png
    page = made["html"].read_text()
    # self-contained: every src= is an embedded image, nothing to fetch
    sources = re.findall(r'src="([^"]*)"', page)
    assert len(sources) == len(report.FIGURES)
    assert all(s.startswith("data:image/png;base64,") for s in sources)
    assert not re.search(r"<(script|link)\b", page)
    assert "<title>Ours &amp; theirs</title>" in page
    # the table of points carries the published numbers, and ours
    assert "5,724.063" in page and "OSN Zarr" in page and "GCS Zarr" in page
    assert "3,964.099" in page  # GCS at 30 workers: 466560000000 / 1e6 / 117.696347
    assert "450.000" in page  # ours at 1 worker: median of 500 and 400 MB/s
    # the failed run is listed apart, escaped, and not counted as a repeat
    failed_section = page.split("<h2>Failed runs</h2>")[1].split("<h2>")[0]
    assert "TimeoutError: &lt;read&gt; timed out &amp; gave up" in failed_section
    assert made["points"].query("source == 'local-s3-zarr' and nworkers == 2").repeats.item() == 2
    provenance = page.split("<h2>Provenance</h2>")[1]
    assert "abc123" in provenance and "laptop" in provenance and "2099.1.0" in provenance
    assert "zenodo3829032-OSN-test-1" in provenance and "big-arrays-fast_osn-zarr.csv" in provenance


def test_figures_on_shared_scales_and_log_when_wide():
    rows = report.load_results(PUBLISHED)
    figures = report.draw_figures(rows, ["comparison", "comparison_panels", "per_thread"])
    try:
        panels = [ax for ax in figures["comparison_panels"].axes if ax.get_visible()]
        assert [ax.get_title() for ax in panels] == ["GCS Zarr", "OSN Zarr"]
        assert panels[0].get_ylim() == panels[1].get_ylim() and panels[0].get_xlim() == panels[1].get_xlim()
        comparison = figures["comparison"].axes[0]
        # 2 to 176 cores: log scale; 380 to 6300 MB/s spans less than 20x: linear from 0
        assert comparison.get_xscale() == "log" and comparison.get_yscale() == "linear"
        assert comparison.get_ylim()[0] == 0
        assert comparison.get_xlabel() == "Cores (Dask worker threads)"
        assert comparison.get_ylabel() == "Throughput (MB/s, 1 MB = 10⁶ bytes)"
        assert [t.get_text() for t in comparison.get_legend().get_texts()] == ["GCS Zarr", "OSN Zarr"]
        per_thread = figures["per_thread"].axes[0]
        assert per_thread.get_yscale() == "linear" and per_thread.get_ylim()[0] == 0
        assert per_thread.get_ylabel() == "Throughput per thread (MB/s)"
    finally:
        report.close_figures(figures)


def test_bad_archives_say_what_is_wrong(tmp_path):
    with pytest.raises(ArchiveError, match=r"Results file '.*nope.csv' does not exist\."):
        report.load_results(tmp_path / "nope.csv")
    write(tmp_path / "bad.csv", "a,b\n1,2\n")
    with pytest.raises(ArchiveError, match=r"missing column\(s\) \['nbytes', 'nthreads', 'ncores', 'nworkers', "
                                           r"'runtime'\]; needs at least"):
        report.load_results(tmp_path / "bad.csv")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ArchiveError, match=r"No CSV files found in '.*empty'"):
        report.load_results(tmp_path / "empty")
    failed = report.normalise(ours([{"source": "x", "nworkers": 1, "nthreads": 1, "ncores": 1, "status": "error",
                                     "error": "boom"}]))
    with pytest.raises(UsageError, match="No successful runs to plot"):
        report.draw_figures(failed)


def test_cli_report(tmp_path, capsys):
    write(tmp_path / "zenodo" / "OSN-test-2.csv", SEED_OSN_CSV)
    out = tmp_path / "site" / "seed.html"
    code = main(["report", str(tmp_path / "zenodo"), str(PUBLISHED), "-o", str(out), "--png-dir",
                 str(tmp_path / "png"), "--title", "Seed"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert out.stat().st_size > 50_000
    assert sorted(p.name for p in (tmp_path / "png").iterdir()) == sorted(f"seed_{n}.png" for n in report.FIGURES)
    assert "32 row(s), 20 point(s), 0 failed run(s)" in captured.err
    assert re.search(r"OSN\s+│\s+26 │\s+52 │\s+1 │\s+81\.509 │\s+5,724\.1", captured.out)


def test_cli_report_errors(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing.csv"), "-o", str(tmp_path / "r.html")]) == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [f"throughput: error: Results file '{tmp_path / 'missing.csv'}' does not exist."]
    assert main(["report"]) == 2
    assert "Missing argument 'RESULTS...'" in capsys.readouterr().err
    # an unreachable archive: one line, credentials of the URL never shown
    port = free_port()
    assert main(["report", f"http://alice:s3cret@127.0.0.1:{port}/results/run.csv", "-o", str(tmp_path / "r.html")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"throughput: error: Cannot read results from 'http://127.0.0.1:{port}/results/run.csv': ")
    assert len(err.strip().splitlines()) == 1 and "s3cret" not in err and "alice" not in err
