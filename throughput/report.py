"""Reports: the seed's figures, a table of points and an HTML page, drawn from results archives.

The report reads only CSV rows (ours, schema v1, or the seed study's Zenodo files);
it knows nothing of Dask, sources or clusters. The flow is

``load_results`` (rows) -> ``points`` (median and spread of the repeats at each
source + worker count) -> ``draw_figures`` (seaborn) -> ``write_report`` (one
self-contained HTML file, PNGs embedded as base64).

>>> import pandas as pd
>>> rows = normalise(pd.DataFrame({"source": ["a", "a"], "nbytes": [10**9, 10**9],
...     "nworkers": [1, 1], "nthreads": [2, 2], "ncores": [2, 2], "runtime": [2.0, 4.0]}))
>>> points(rows)[["source", "nworkers", "repeats", "runtime_median", "throughput_median"]]
  source  nworkers  repeats  runtime_median  throughput_median
0      a         1        2             3.0              375.0
"""

from __future__ import annotations

import base64
import html
import io
import math
import os
import sys
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from .errors import ArchiveError, UsageError, missing_dependency
from .records import throughput_mbps
from .redact import redact_text, redact_url

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: columns every archive must have to be plotted (the seed's own Zenodo CSVs have them)
REQUIRED = ("nbytes", "nthreads", "ncores", "nworkers", "runtime")
#: the repeats of one point share these values
POINT_KEYS = ("source", "nworkers", "nthreads")
#: columns read as numbers
NUMERIC = REQUIRED + ("throughput_MBps", "throughput_MBps_per_thread", "chunksize", "nchunks", "repeat",
                      "host_cpus", "requested_workers", "bytes_received", "scale_seconds")
#: columns that say where a row comes from, summarised per source in the report
PROVENANCE = ("cloud", "region", "format", "cluster", "host", "storage_library", "throughput_version",
              "dask_version", "distributed_version", "zarr_version", "xarray_version", "fsspec_version")
#: the figures :func:`draw_figures` makes, in order
FIGURES = ("runtime", "throughput", "per_thread", "comparison", "comparison_panels")
CORES_LABEL = "Cores (Dask worker threads)"
THROUGHPUT_LABEL = "Throughput (MB/s, 1 MB = 10⁶ bytes)"
#: a log axis when the values span at least this ratio (the seed's sources span 20 MB/s to 20 GB/s)
LOG_RATIO = 20


# --------------------------------------------------------------------------- loading rows


def _csv_files(path: str, storage_options: dict | None) -> list[str]:
    import fsspec

    if "://" not in path:
        if os.path.isdir(path):
            return sorted(str(p) for p in Path(path).glob("*.csv"))
        return [path]
    if path.endswith(".csv"):
        return [path]
    try:
        fs, root = fsspec.core.url_to_fs(path, **(storage_options or {}))
        if not fs.isdir(root):
            return [path]
        return [fs.unstrip_protocol(p) for p in sorted(fs.glob(root.rstrip("/") + "/*.csv"))]
    except (FileNotFoundError, NotImplementedError):
        return [path]


def _read_csv(name: str, storage_options: dict | None) -> pd.DataFrame:
    shown = redact_url(name)
    try:
        return pd.read_csv(name, storage_options=storage_options if "://" in name else None,
                           keep_default_na=True, dtype={"run_id": str, "status": str, "error": str})
    except FileNotFoundError:
        raise ArchiveError(f"Results file '{shown}' does not exist.") from None
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise ArchiveError(f"'{shown}' is not a CSV results file: {str(exc).splitlines()[0]}") from None
    except OSError as exc:  # unreachable server, permission denied, ...
        detail = redact_text(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
        raise ArchiveError(f"Cannot read results from '{shown}': {detail}") from None


def load_results(
    paths: str | os.PathLike | Iterable[str | os.PathLike] | Mapping[str, Any],
    storage_options: dict | None = None,
) -> pd.DataFrame:
    """Load one or many results archives into one table of rows (schema v1 names).

    Parameters
    ----------
    paths
        A folder (every ``*.csv`` in it), a CSV file, an fsspec URL of either, or a
        list of those. A mapping ``{source name: path or list of paths}`` names the
        source of files that have no ``source`` column, as the seed notebook did
        with its Zenodo files (``{"OSN Zarr": ["OSN-test-1.csv", ...]}``).
    storage_options
        Passed to fsspec for URLs.

    Returns
    -------
    pandas.DataFrame
        One row per timed run, with an ``origin`` column (the file it came from,
        credentials removed). Files in the seed study's layout (a leading unnamed
        index column, no ``source`` or ``status``) load unchanged; derived columns
        are filled in when missing.
    """
    if isinstance(paths, Mapping):
        named = [(str(name), value) for name, value in paths.items()]
    else:
        named = [(None, paths)]
    frames = []
    for name, group in named:
        if isinstance(group, (str, os.PathLike)):
            group = [group]
        group = list(group)
        if not group:
            raise UsageError("No results given: pass folders, CSV files or fsspec URLs of CSV files.")
        for path in group:
            files = _csv_files(str(path), storage_options)
            if not files:
                raise ArchiveError(f"No CSV files found in '{redact_url(str(path))}'.")
            for file in files:
                frame = _read_csv(file, storage_options)
                if name is not None:
                    frame["source"] = name
                frames.append(normalise(frame, origin=file))
    return pd.concat(frames, ignore_index=True)


def normalise(frame: pd.DataFrame, origin: str = "") -> pd.DataFrame:
    """Bring a results table (ours or the seed's) to schema v1 names and types.

    Drops pandas' unnamed index columns, reads numbers as numbers, names the source
    after ``cloud`` (or the file) when there is no ``source`` column, marks rows
    without a ``status`` as ``ok``, and computes ``throughput_MBps`` (``nbytes / 1e6
    / runtime``) and ``throughput_MBps_per_thread`` where they are missing.
    """
    frame = frame.loc[:, [c for c in frame.columns if not str(c).startswith("Unnamed:")]].copy()
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise ArchiveError(f"'{redact_url(origin)}' is not a throughput results file: missing column(s) "
                           f"{missing}; needs at least {list(REQUIRED)}.")
    for column in NUMERIC:
        if column in frame:
            numbers = pd.to_numeric(frame[column], errors="coerce")
            if column in REQUIRED:  # garbage where a number belongs is refused, never plotted as NaN
                text = frame[column].astype(str).str.strip().str.lower()
                bad = numbers.isna() & frame[column].notna() & ~text.isin(["", "nan", "na", "none", "null"])
                if bad.any():
                    row = int(bad.to_numpy().nonzero()[0][0])
                    raise ArchiveError(f"'{redact_url(origin)}' row {row + 1}: column '{column}' holds "
                                       f"{str(frame[column].iloc[row])[:40]!r}, not a number.")
            frame[column] = numbers
    if "source" not in frame:
        fallback = Path(origin).stem or "results"
        frame["source"] = frame["cloud"].fillna(fallback) if "cloud" in frame else fallback
    frame["source"] = frame["source"].astype(str)
    frame["status"] = frame["status"].fillna("ok").astype(str) if "status" in frame else "ok"
    computed = pd.Series([throughput_mbps(b, r) for b, r in zip(frame.nbytes, frame.runtime)],
                         index=frame.index, dtype=float)
    if "throughput_MBps" not in frame:
        frame["throughput_MBps"] = computed
    else:
        frame["throughput_MBps"] = frame["throughput_MBps"].fillna(computed)
    per_thread = frame["throughput_MBps"] / frame["nthreads"]
    if "throughput_MBps_per_thread" not in frame:
        frame["throughput_MBps_per_thread"] = per_thread
    else:
        frame["throughput_MBps_per_thread"] = frame["throughput_MBps_per_thread"].fillna(per_thread)
    frame["origin"] = redact_url(str(origin)) if origin else ""
    return frame


# --------------------------------------------------------------------------- tables


def ok_rows(results: pd.DataFrame) -> pd.DataFrame:
    """The rows of successful runs (``status == "ok"``) with a runtime."""
    return results[(results["status"] == "ok") & results["runtime"].notna()]


def points(results: pd.DataFrame) -> pd.DataFrame:
    """The median and spread of the repeats at each point (source, nworkers, nthreads).

    Returns one row per point, sorted by source then threads, with ``repeats`` and,
    for ``runtime`` (s), ``throughput`` (MB/s) and ``per_thread`` (MB/s per thread):
    ``_median``, ``_q25``, ``_q75`` (quartiles, linear interpolation) and ``_iqr``.
    ``ncores`` is the median of the points' rows. Failed runs are left out (see
    :func:`failures`).
    """
    ok = ok_rows(results)
    grouped = ok.groupby(list(POINT_KEYS), sort=True, dropna=False)
    table = grouped.size().rename("repeats").to_frame()
    table["ncores"] = grouped["ncores"].median()
    for name, column in (("runtime", "runtime"), ("throughput", "throughput_MBps"),
                         ("per_thread", "throughput_MBps_per_thread")):
        table[f"{name}_median"] = grouped[column].median()
        table[f"{name}_q25"] = grouped[column].quantile(0.25)
        table[f"{name}_q75"] = grouped[column].quantile(0.75)
        table[f"{name}_iqr"] = table[f"{name}_q75"] - table[f"{name}_q25"]
    table = table.reset_index()
    for column in ("nworkers", "nthreads", "repeats"):
        table[column] = table[column].astype(int)
    if table["ncores"].notna().all() and (table["ncores"] % 1 == 0).all():
        table["ncores"] = table["ncores"].astype(int)
    return table.sort_values(["source", "nthreads", "nworkers"], ignore_index=True)


def failures(results: pd.DataFrame) -> pd.DataFrame:
    """The rows of failed runs (``status != "ok"``): where, when and the one-line error."""
    failed = results[results["status"] != "ok"]
    columns = [c for c in ("source", "nworkers", "nthreads", "repeat", "timestamp", "run_id", "error", "origin")
               if c in failed]
    return failed.loc[:, columns].reset_index(drop=True)


def _distinct(values: pd.Series) -> str:
    seen = [str(v) for v in values.dropna().unique() if str(v).strip() not in ("", "nan")]
    return ", ".join(sorted(seen))


def provenance(results: pd.DataFrame) -> pd.DataFrame:
    """Where each source's rows come from: files, run ids, hosts, labels and library versions."""
    rows = []
    for source, group in results.groupby("source", sort=True):
        row = {"source": source, "rows": len(group), "ok": int((group["status"] == "ok").sum()),
               "files": _distinct(group["origin"].map(lambda o: Path(str(o)).name)) if "origin" in group else ""}
        for column in ("run_id", *PROVENANCE):
            row[column] = _distinct(group[column]) if column in group else ""
        if "timestamp" in group and group["timestamp"].notna().any():
            stamps = group["timestamp"].dropna().astype(str)
            row["first run"], row["last run"] = stamps.min(), stamps.max()
        rows.append(row)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- figures


def _plotting():
    try:
        import matplotlib

        if "matplotlib.pyplot" not in sys.modules and not os.environ.get("MPLBACKEND"):
            # files, never a window, from scripts and the CLI; a notebook's own backend
            # (Jupyter sets MPLBACKEND to its inline one) is left alone so figures show
            matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import seaborn as sns
    except ImportError as exc:
        raise missing_dependency(exc.name or "seaborn", "report figures", "report") from None
    return plt, sns


def _set_scale(ax, axis: str, values: Iterable[float], from_zero: bool) -> None:
    """A log axis when the values span a wide range (several sources), else linear from 0."""
    from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

    values = [v for v in values if v is not None and math.isfinite(v)]
    positive = [v for v in values if v > 0]
    wide = bool(positive) and len(positive) == len(values) and max(positive) / min(positive) >= LOG_RATIO
    if wide:
        getattr(ax, f"set_{axis}scale")("log")
        # plain numbers at 1-2-5 steps (1, 2, 5, 10, ...) read better than powers of ten
        scale = getattr(ax, f"{axis}axis")
        scale.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        scale.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        scale.set_minor_formatter(NullFormatter())
    elif from_zero and axis == "x":
        ax.set_xlim(left=0)
    elif from_zero:
        ax.set_ylim(bottom=0)
    if not wide and values and all(float(v).is_integer() for v in values):
        # counts of cores or threads: no ticks at 0.25 of a core
        getattr(ax, f"{axis}axis").set_major_locator(MaxNLocator(integer=True))


def _palette(sources: list[str]) -> dict[str, Any]:
    _, sns = _plotting()
    return dict(zip(sources, sns.color_palette("colorblind", len(sources))))


MARKERS = ("o", "s", "D", "^", "v", "P", "X", "*", "<", ">")


def _draw_points(ax, ok: pd.DataFrame, pts: pd.DataFrame, x: str, name: str, column: str,
                 palette: dict, markers: dict, sources: list[str], legend: bool) -> None:
    """Raw repeats as faint dots, the median per point as a line with markers, the IQR as bars."""
    _, sns = _plotting()
    sns.scatterplot(data=ok, x=x, y=column, hue="source", hue_order=sources, palette=palette, s=14,
                    alpha=0.35, linewidth=0, legend=False, ax=ax)
    for source in sources:
        mine = pts[pts["source"] == source].sort_values(x)
        if mine.empty:
            continue
        ax.errorbar(mine[x], mine[f"{name}_median"],
                    yerr=[mine[f"{name}_median"] - mine[f"{name}_q25"], mine[f"{name}_q75"] - mine[f"{name}_median"]],
                    fmt="none", ecolor=palette[source], elinewidth=1.2, capsize=3, alpha=0.9)
    sns.lineplot(data=pts, x=x, y=f"{name}_median", hue="source", hue_order=sources, palette=palette,
                 style="source", style_order=sources, markers=markers, dashes=False, markersize=7,
                 markeredgecolor="k", markeredgewidth=0.5, legend=legend, ax=ax, sort=True)


def draw_figures(results: pd.DataFrame, which: Iterable[str] = FIGURES) -> dict[str, Figure]:
    """Draw the report's figures with seaborn, one colour-blind-safe colour and marker per source.

    Every point shows the median of its repeats (line and markers), their
    interquartile range (bars) and the repeats themselves (faint dots).

    - ``runtime``: runtime (s) vs cores;
    - ``throughput``: throughput (MB/s) vs cores;
    - ``per_thread``: throughput per thread (MB/s) vs worker threads;
    - ``comparison``: the seed's comparison, throughput vs cores of every source on one axis;
    - ``comparison_panels``: one panel per source on shared scales (the other sources
      in grey behind), so panels can be compared by eye.

    Axes switch to log scale when their values span a factor of 20 or more.
    """
    plt, sns = _plotting()
    which = list(which)
    unknown = [w for w in which if w not in FIGURES]
    if unknown:
        raise UsageError(f"Unknown figure(s) {unknown}. Must be among {list(FIGURES)}.")
    ok = ok_rows(results)
    if ok.empty:
        raise UsageError("No successful runs to plot (every row has status=error, or there are no rows).")
    pts = points(results)
    sources = sorted(pts["source"].unique())
    palette = _palette(sources)
    markers = {s: MARKERS[i % len(MARKERS)] for i, s in enumerate(sources)}
    legend_title = "source (median, IQR)"
    specs = {
        "runtime": ("ncores", "runtime", "runtime", "Runtime (s)", CORES_LABEL, "Runtime vs cores"),
        "throughput": ("ncores", "throughput", "throughput_MBps", THROUGHPUT_LABEL, CORES_LABEL,
                       "Throughput vs cores"),
        "per_thread": ("nthreads", "per_thread", "throughput_MBps_per_thread", "Throughput per thread (MB/s)",
                       "Worker threads", "Throughput per thread vs threads"),
        "comparison": ("ncores", "throughput", "throughput_MBps", THROUGHPUT_LABEL, CORES_LABEL,
                       "All sources: throughput vs cores"),
    }
    figures: dict[str, Figure] = {}
    with sns.axes_style("whitegrid"):
        for key in which:
            if key == "comparison_panels":
                figures[key] = _panels(ok, pts, sources, palette, markers, plt)
                continue
            x, name, column, ylabel, xlabel, title = specs[key]
            fig, ax = plt.subplots(figsize=(8.4, 4.8) if key == "comparison" else (7.8, 4.4))
            _draw_points(ax, ok, pts, x, name, column, palette, markers, sources, legend="auto")
            ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
            _set_scale(ax, "x", ok[x], from_zero=True)
            _set_scale(ax, "y", ok[column], from_zero=True)
            # outside the axes, so that no point hides behind it whatever the data
            ax.legend(title=legend_title, fontsize="small", title_fontsize="small",
                      loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
            fig.tight_layout()
            figures[key] = fig
    return figures


def _panels(ok, pts, sources, palette, markers, plt) -> Figure:
    ncols = min(4, len(sources))
    nrows = math.ceil(len(sources) / ncols)
    fig, axes = plt.subplots(nrows=nrows, ncols=ncols, figsize=(max(6.4, 3.9 * ncols + 0.6), 3.3 * nrows + 0.8),
                             sharex=True, sharey=True, squeeze=False)
    for ax, source in zip(axes.flat, sources):
        ax.scatter(ok["ncores"], ok["throughput_MBps"], s=10, color="0.82", linewidth=0, zorder=0)
        _draw_points(ax, ok[ok["source"] == source], pts[pts["source"] == source], "ncores", "throughput",
                     "throughput_MBps", palette, markers, [source], legend=False)
        ax.set_title(source, fontsize="medium", color=palette[source], fontweight="bold")
        ax.set(xlabel="", ylabel="")
    for ax in list(axes.flat)[len(sources):]:
        ax.set_visible(False)
    # shared axes: one scale decision from every source's values
    _set_scale(axes.flat[0], "x", ok["ncores"], from_zero=True)
    _set_scale(axes.flat[0], "y", ok["throughput_MBps"], from_zero=True)
    fig.supxlabel(CORES_LABEL)
    fig.supylabel(THROUGHPUT_LABEL)
    fig.suptitle("Throughput vs cores, one panel per source\n(shared scales; grey: the other sources)",
                 fontsize="medium")
    fig.tight_layout()
    return fig


def save_figures(figures: Mapping[str, Figure], out_dir: str | os.PathLike, stem: str = "report",
                 dpi: int = 110) -> list[Path]:
    """Write figures as ``<out_dir>/<stem>_<name>.png``; returns the paths."""
    _plotting()
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ArchiveError(f"Cannot write figures to '{out_dir}': {exc.strerror or exc}.") from None
    paths = []
    for name, fig in figures.items():
        path = out_dir / f"{stem}_{name}.png"
        fig.savefig(path, dpi=dpi)
        paths.append(path)
    return paths


def close_figures(figures: Mapping[str, Figure]) -> None:
    """Free the figures' memory (pyplot keeps every open figure alive)."""
    plt, _ = _plotting()
    for fig in figures.values():
        plt.close(fig)


def scaling_figures(results: pd.DataFrame, out_dir: str | os.PathLike, stem: str = "scaling") -> list[Path]:
    """Draw and save the seed's three figures (runtime vs cores, throughput vs cores,
    per-thread throughput vs threads) as PNGs; returns their paths."""
    figures = draw_figures(results, ("runtime", "throughput", "per_thread"))
    try:
        return save_figures(figures, out_dir, stem)
    finally:
        close_figures(figures)


# --------------------------------------------------------------------------- HTML


POINT_COLUMNS = {
    "source": "source", "nworkers": "nworkers", "nthreads": "nthreads", "ncores": "ncores", "repeats": "n repeats",
    "runtime_median": "median runtime (s)", "runtime_iqr": "runtime IQR (s)",
    "throughput_median": "median throughput (MB/s)", "throughput_q25": "throughput q25 (MB/s)",
    "throughput_q75": "throughput q75 (MB/s)", "throughput_iqr": "throughput IQR (MB/s)",
    "per_thread_median": "median per thread (MB/s)",
}

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 70em;
       padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; } th { background: #f4f4f4; }
td { text-align: right; } td:first-child { text-align: left; }
figure { margin: 1em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.9em; color: #555; } .note { color: #555; font-size: 0.9em; }
"""


def figure_png(fig: Figure, dpi: int = 110) -> bytes:
    """A figure as PNG bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def _table(frame: pd.DataFrame, floats: str = "{:,.3f}") -> str:
    if frame.empty:
        return '<p class="note">None.</p>'
    return frame.to_html(index=False, border=0, na_rep="", escape=True,
                         float_format=lambda v: floats.format(v))


CAPTIONS = {
    "runtime": "Runtime of the read (seconds, wall clock of the store into the null sink) vs cores.",
    "throughput": "Throughput (decoded bytes / 10⁶ / runtime) vs cores.",
    "per_thread": "Throughput per worker thread vs worker threads: flat means perfect scaling.",
    "comparison": "The seed study's comparison: every source's throughput on one axis.",
    "comparison_panels": "One panel per source, on shared scales, so that sources can be compared by eye.",
}


def render_html(results: pd.DataFrame, title: str = "throughput report",
                figures: Mapping[str, Figure] | None = None) -> str:
    """The report as one self-contained HTML page (figures embedded as base64 PNG, no external links
    to load), with the table of points, provenance and the failed runs."""
    if figures is None:
        figures = draw_figures(results)
    pts = points(results).rename(columns=POINT_COLUMNS).loc[:, list(POINT_COLUMNS.values())]
    failed = failures(results)
    ok = ok_rows(results)
    nfiles = results["origin"].nunique() if "origin" in results else 1
    esc = html.escape
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        (f'<p class="note">{len(results)} row(s) from {nfiles} file(s): {len(ok)} successful run(s) at '
         f'{len(pts)} point(s) of {results["source"].nunique()} source(s); {len(failed)} failed run(s). '
         f'Made {datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")} by throughput. '
         "Throughput is <code>nbytes / 10⁶ / runtime</code> (MB/s), as in the seed study; each point is "
         "the median of its repeats (same source, workers and threads); the bars, and the IQR column, give "
         "their interquartile range.</p>"),
        "<h2>Figures</h2>",
    ]
    for name, fig in figures.items():
        data = base64.b64encode(figure_png(fig)).decode("ascii")
        parts.append(f'<figure><img alt="{esc(name)}" src="data:image/png;base64,{data}">'
                     f"<figcaption>{esc(CAPTIONS.get(name, name))}</figcaption></figure>")
    parts += ["<h2>Points</h2>", _table(pts),
              "<h2>Failed runs</h2>", _table(failed),
              "<h2>Provenance</h2>", _table(provenance(results)),
              ('<h2>Method</h2><p>Each row is one timed read of a lazy Dask array stored into a null sink that '
               'discards every chunk, after Abernathey et al., <em>Big Arrays, Fast: Profiling Cloud Storage Read '
               'Throughput</em> (EarthCube 2020), <a href="https://doi.org/10.5281/zenodo.3829032">'
               "doi:10.5281/zenodo.3829032</a>.</p>"),
              "</body></html>"]
    return "\n".join(parts)


def write_report(results: pd.DataFrame, path: str | os.PathLike, *, title: str = "throughput report",
                 png_dir: str | os.PathLike | None = None, stem: str = "report") -> dict[str, Any]:
    """Write the HTML report (and, with ``png_dir``, every figure as a PNG).

    Returns ``{"html": Path, "pngs": [Path, ...], "points": DataFrame, "failures": DataFrame}``.
    """
    path = Path(path)
    figures = draw_figures(results)
    try:
        page = render_html(results, title, figures)
        pngs = save_figures(figures, png_dir, stem) if png_dir is not None else []
    finally:
        close_figures(figures)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise ArchiveError(f"Cannot write the report to '{path}': {exc.strerror or exc}.") from None
    return {"html": path, "pngs": pngs, "points": points(results), "failures": failures(results)}


__all__ = [
    "FIGURES", "close_figures", "draw_figures", "failures", "load_results", "normalise", "ok_rows", "points",
    "provenance", "render_html", "save_figures", "scaling_figures", "write_report",
]
