"""``throughput run``, ``throughput upload`` and ``throughput collect``: unattended sweeps and the archive."""

from __future__ import annotations

import contextlib
import dataclasses
import shlex
import time
from collections.abc import Iterator
from pathlib import Path

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import Interrupted, cli
from .common import err_console, out_console, parse_options


def scrub(record, secrets):
    """A record with every known secret value removed from its text fields."""
    from ..redact import redact_text

    if not secrets:
        return record
    changes = {f.name: redact_text(getattr(record, f.name), secrets) for f in dataclasses.fields(record)
               if isinstance(getattr(record, f.name), str)}
    return dataclasses.replace(record, **changes)


@contextlib.contextmanager
def scrubbed_errors(secrets: set[str]) -> Iterator[None]:
    """Whatever goes wrong, the message that reaches the user carries no known secret value."""
    from ..redact import redact_text

    try:
        yield
    except Exception as exc:
        if secrets:
            exc.args = (redact_text(str(exc), secrets),)
        raise


@cli.command()
@click.argument("sweep_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--resume", is_flag=True, help="Continue this sweep file's latest results file: skip points it holds.")
@click.option("--retry-failed", is_flag=True, help="With --resume, measure again points that only have error rows.")
@click.option("--results", "results_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Results CSV to write (default: <output>/<UTC time>_<name>_<content hash>.csv).")
@click.option("--out", "--output", "-o", "output", help="Folder for the results (overrides the sweep file's output:).")
@click.option("--upload", "upload_url", help="Upload the results here at the end (overrides the sweep file's upload:).")
@click.option("--upload-option", multiple=True, metavar="KEY=VALUE", help="fsspec option for --upload (repeatable).")
@click.option("--no-upload", is_flag=True, help="Do not upload, even if the sweep file says where.")
@click.option("--check", is_flag=True, help="Check the sweep file and show its points; run nothing.")
def run(sweep_file, resume, retry_failed, results_file, output, upload_url, upload_option, no_upload, check):
    """Run the sweep described by SWEEP_FILE (YAML) unattended; write one results CSV; upload it."""
    from ..sweepfile import load_sweep_file

    plan = load_sweep_file(sweep_file)
    for warning in plan.warnings:
        err_console.print(f"warning: {warning}", markup=False)
    secrets = set(plan.secrets)
    with scrubbed_errors(secrets):
        run_plan(plan, sweep_file, secrets, resume=resume, retry_failed=retry_failed, results_file=results_file,
                 output=output, upload_url=upload_url, upload_option=upload_option, no_upload=no_upload,
                 check=check)


def run_plan(plan, sweep_file: Path, secrets: set[str], *, resume, retry_failed, results_file, output,
             upload_url, upload_option, no_upload, check) -> None:
    """Everything ``throughput run`` does once the sweep file is checked."""
    from ..redact import redact_text
    from ..resume import choose_results_path, recorded_points
    from ..sweepfile import UploadTarget

    target = None if no_upload else plan.upload
    if upload_url:
        target = UploadTarget(upload_url, parse_options(upload_option, "--upload-option"))
    elif upload_option and target is not None:
        target = UploadTarget(target.url, {**target.storage_options, **parse_options(upload_option, "--upload-option")})
    if target is not None:
        from ..redact import secret_values
        from ..storage import filesystem_class

        filesystem_class(target.url)  # an unknown protocol is a usage error now, not after the sweep
        secrets |= secret_values(target.storage_options)
    out_dir = Path(output) if output else plan.output
    path, existing = choose_results_path(out_dir, plan.name, plan.digest, results=results_file, resume=resume)
    done = recorded_points(path, retry_failed) if existing else set()
    todo = [(spec, n, r) for spec in plan.sources for n, r in spec.points if (spec.name, n, r) not in done]
    if check:
        show_plan(plan, path, todo, target)
        return
    if target is not None and todo:
        from ..upload import check_target

        problem = check_target(target.url, target.storage_options, secrets)
        if problem:
            err_console.print(f"warning: uploading to {redact_text(target.url, secrets)} would fail now: "
                              f"{redact_text(problem, secrets)}. The sweep runs; the upload is tried at the end.",
                              markup=False)
    if existing:
        err_console.print(f"resuming {path}: {plan.total - len(todo)} of {plan.total} point(s) already recorded, "
                          f"{len(todo)} to measure", markup=False)
    records = measure(plan, path, todo, secrets, sweep_file) if todo else []
    if not todo:
        err_console.print(f"nothing to measure: every point of {sweep_file} is in {path}", markup=False)
    show_summary(path)
    if target is not None:
        from ..upload import upload_files

        # the sweep file holds the target and its credentials, unless the command line changed them
        sweep_arg = sweep_file.resolve() if not (upload_url or upload_option) else None
        for url in upload_files([path], target.url, target.storage_options, secrets=secrets, sweep_file=sweep_arg):
            err_console.print(f"uploaded: {url}", markup=False)
    failed = sum(r.status != "ok" for r in records)
    if failed:
        err_console.print(f"{failed} of {len(records)} run(s) failed; see the 'error' column of {path}", markup=False)
        if failed == len(records):
            raise SystemExit(1)


def measure(plan, path: Path, todo: list, secrets: set[str], sweep_file: Path) -> list:
    """Open the sources, start the cluster, measure the points in ``todo``; rows go to ``path`` as they end.

    The results file is opened first (a preflight: an unwritable folder or a full disk
    is found before any data is read or any cluster starts); a new file that got no row
    is removed again, so a sweep that could not start leaves nothing behind.
    """
    from ..archive import ResultsFile

    records: list = []
    new = not path.exists() or path.stat().st_size == 0
    results = ResultsFile(path)
    try:
        with results:
            err_console.print(f"results: {path}", markup=False)
            _measure_into(results, plan, todo, secrets, records)
    except (Exception, KeyboardInterrupt, Interrupted):
        if new and not records:
            with contextlib.suppress(OSError):
                path.unlink()
        elif records:
            again = shlex.join(["throughput", "run", str(sweep_file.resolve()), "--resume"])
            err_console.print(f"{len(records)} row(s) written to {path}; measure the rest with: {again}", markup=False)
        raise
    return records


def _measure_into(results, plan, todo: list, secrets: set[str], records: list) -> None:
    from ..clusters import open_cluster
    from ..sweep import new_run_id, sweep
    from ..sweepfile import open_spec

    wanted = {spec.name for spec, _, _ in todo}
    todo_set = {(spec.name, n, r) for spec, n, r in todo}
    sources, labels = {}, {}
    for spec in plan.sources:  # all opened before the cluster starts: a bad source fails fast
        if spec.name in wanted:
            sources[spec.name], labels[spec.name] = open_spec(spec)
    run_id = new_run_id()
    started = time.monotonic()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with open_cluster(plan.cluster_kind, **plan.cluster_options) as cluster, \
            Progress(*columns, console=err_console) as progress:
        task = progress.add_task("starting", total=len(todo))
        for spec in plan.sources:
            if spec.name not in wanted:
                continue

            def skip(n, r, name=spec.name):
                return (name, n, r) not in todo_set

            def on_start(n, r, spec=spec):
                progress.update(task, description=f"{spec.name}: {n} worker(s), repeat {r + 1}/{spec.repeats}")

            for record in sweep(sources[spec.name], cluster, spec.workers, spec.repeats, labels=labels[spec.name],
                                run_id=run_id, retries=plan.retries, warmup=plan.warmup,
                                blocks_per_task=plan.blocks_per_task,
                                secrets=frozenset(secrets), skip=skip, on_start=on_start):
                record = scrub(record, secrets)
                results.append(record)
                records.append(record)
                progress.advance(task)
                line = point_line(record, spec.repeats, len(records), len(todo), started)
                progress.console.print(line, markup=False)


def point_line(record, repeats: int, done: int, total: int, started: float) -> str:
    """One line per finished point, for logs of unattended runs: [done/total elapsed] point: result."""
    elapsed = time.strftime("%H:%M:%S", time.gmtime(time.monotonic() - started))
    head = (f"[{done}/{total} {elapsed}] {record.source}: {record.requested_workers} worker(s), "
            f"repeat {record.repeat + 1}/{repeats}")
    if record.status == "ok":
        return (f"{head}: {record.runtime:.3f} s, {record.throughput_MBps:.1f} MB/s "
                f"(nworkers={record.nworkers}, nthreads={record.nthreads})")
    return f"{head}: error: {record.error}"


def show_plan(plan, path: Path, todo: list, target) -> None:
    """What ``--check`` prints: the sources and their points, and where results go."""
    from ..redact import redact_text

    table = Table(title=f"Sweep '{plan.name}' ({plan.path}): {plan.total} point(s), {len(todo)} to measure")
    for column in ("source", "url or catalog entry", "workers", "repeats", "labels"):
        table.add_column(column)
    for spec in plan.sources:
        labels = ", ".join(f"{k}={';'.join(f'{a}={b}' for a, b in v.items()) if isinstance(v, dict) else v}"
                           for k, v in spec.labels.items())
        where = spec.catalog or (", ".join(spec.url) if isinstance(spec.url, list) else spec.url)
        table.add_row(spec.name, redact_text(where, plan.secrets),
                      ",".join(map(str, spec.workers)), str(spec.repeats), redact_text(labels, plan.secrets))
    out_console.print(table)
    out_console.print(f"cluster: {plan.cluster_kind}  results: {path}"
                      + (f"  upload: {redact_text(target.url, plan.secrets)}" if target else ""), markup=False)


def show_summary(path: Path) -> None:
    """Median runtime and throughput per source and worker count, from the results file itself."""
    import pandas as pd

    rows = pd.read_csv(path)
    if rows.empty:
        return
    table = Table(title=f"Summary of {path.name}")
    for column in ("source", "workers", "threads", "runs ok", "errors", "median runtime (s)", "median MB/s", "best MB/s"):
        table.add_column(column, justify="left" if column == "source" else "right")
    for (source, workers), group in rows.groupby(["source", "requested_workers"], sort=False):
        ok = group[group["status"] == "ok"]
        table.add_row(str(source), str(workers), str(int(ok["nthreads"].median())) if len(ok) else "-",
                      str(len(ok)), str(len(group) - len(ok)),
                      f"{ok['runtime'].median():.3f}" if len(ok) else "-",
                      f"{ok['throughput_MBps'].median():.1f}" if len(ok) else "-",
                      f"{ok['throughput_MBps'].max():.1f}" if len(ok) else "-")
    out_console.print(table)


@cli.command()
@click.argument("items", nargs=-1, required=True, metavar="FILES... [URL]")
@click.option("--sweep", "sweep_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Take the target URL (if not given) and its storage options from this sweep file's upload:.")
@click.option("--storage-option", "-s", multiple=True, metavar="KEY=VALUE", help="fsspec option for URL (repeatable).")
def upload(items, sweep_file, storage_option):
    """Upload results FILES to URL (a folder or prefix such as s3://bucket/prefix/, or one .csv URL).

    Each uploaded object is complete: one atomic PUT on object stores, write then
    rename on file systems. If an upload fails the local files stay and the exit
    code is 1.
    """
    from ..errors import UsageError
    from ..redact import secret_values
    from ..upload import upload_files

    options = {}
    secrets: set[str] = set()
    items = list(items)
    url = None
    if sweep_file is not None:
        from ..sweepfile import load_sweep_file

        plan = load_sweep_file(sweep_file)
        secrets |= set(plan.secrets)
        if plan.upload is None:
            raise UsageError(f"Sweep file '{sweep_file}' has no upload: section; give the target URL instead.")
        if len(items) > 1 and not Path(items[-1]).is_file():
            url = items.pop()
        else:
            url = plan.upload.url
        options = dict(plan.upload.storage_options)
    elif len(items) < 2:
        raise UsageError("Give one or more results files, then the target URL, like: "
                         "throughput upload results/run.csv s3://bucket/prefix/")
    else:
        url = items.pop()
    options.update(parse_options(storage_option))
    with scrubbed_errors(secrets | secret_values(options)):
        for uploaded in upload_files(items, url, options, secrets=secrets, sweep_file=sweep_file):
            err_console.print(f"uploaded: {uploaded}", markup=False)


@cli.command()
@click.argument("locations", nargs=-1, required=True)
@click.option("--out", "-o", required=True, help="The merged CSV to write (a path or an fsspec URL).")
@click.option("--storage-option", "-s", multiple=True, metavar="KEY=VALUE", help="fsspec option for remote locations.")
def collect(locations, out, storage_option):
    """Merge the results CSVs at LOCATIONS (files, folders, URLs; ours or the seed's layout)
    into one schema-v1 file, identical rows kept once."""
    from ..collect import collect as collect_rows
    from ..collect import write_table
    from ..redact import redact_text, secret_values

    options = parse_options(storage_option)
    with scrubbed_errors(secret_values(options)):
        merged = collect_rows(list(locations), options)
        for name, columns in merged.dropped_columns.items():
            err_console.print(f"note: {redact_text(name)}: column(s) {columns} are not in schema v1 and were left out",
                              markup=False)
        write_table(merged.table, out, options)
    err_console.print(f"{len(merged.table)} row(s) from {len(merged.files)} file(s) "
                      f"({merged.duplicates} duplicate(s) dropped) -> {redact_text(out)}", markup=False)
