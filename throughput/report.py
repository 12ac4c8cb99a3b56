"""Reports: the seed's figures drawn from results archives (CSV rows only, no Dask)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from .errors import ArchiveError, UsageError
from .records import throughput_mbps

#: columns every archive must have to be plotted (the seed's own Zenodo CSVs have them)
REQUIRED = ("nbytes", "nthreads", "ncores", "nworkers", "runtime")


def _csv_files(path: str) -> list[str]:
    import fsspec

    if "://" not in path and os.path.isdir(path):
        return sorted(str(p) for p in Path(path).glob("*.csv"))
    if "://" in path and not path.endswith(".csv"):
        fs, root = fsspec.core.url_to_fs(path)
        return [fs.unstrip_protocol(p) for p in sorted(fs.glob(root.rstrip("/") + "/*.csv"))]
    return [path]


def load_results(paths: str | os.PathLike | Iterable[str | os.PathLike], storage_options: dict | None = None) -> pd.DataFrame:
    """Load one or many results archives (folders, files or fsspec URLs of CSV files).

    Files in the seed study's layout (leading unnamed index column, no ``source`` or
    ``status``) load unchanged; derived columns are filled in when missing.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    frames = []
    for path in paths:
        files = _csv_files(str(path))
        if not files:
            raise ArchiveError(f"No CSV files found in '{path}'.")
        for name in files:
            try:
                frame = pd.read_csv(name, storage_options=storage_options if "://" in name else None)
            except FileNotFoundError:
                raise ArchiveError(f"Results file '{name}' does not exist.") from None
            except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
                raise ArchiveError(f"'{name}' is not a CSV results file: {str(exc).splitlines()[0]}") from None
            frames.append(normalise(frame, origin=name))
    return pd.concat(frames, ignore_index=True)


def normalise(frame: pd.DataFrame, origin: str = "") -> pd.DataFrame:
    """Bring a results table (ours or the seed's) to schema v1 names and types."""
    frame = frame.loc[:, [c for c in frame.columns if not str(c).startswith("Unnamed:")]].copy()
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise ArchiveError(f"'{origin}' is not a throughput results file: missing column(s) {missing}; "
                           f"needs at least {list(REQUIRED)}.")
    for column in REQUIRED + ("throughput_MBps",):
        if column in frame:
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
    if "source" not in frame:
        frame["source"] = frame.get("cloud", pd.Series([Path(origin).stem] * len(frame))).astype(str)
    if "status" not in frame:
        frame["status"] = "ok"
    frame["status"] = frame["status"].fillna("ok")
    if "throughput_MBps" not in frame or frame["throughput_MBps"].isna().all():
        frame["throughput_MBps"] = [throughput_mbps(b, r) for b, r in zip(frame.nbytes, frame.runtime)]
    frame["throughput_MBps_per_thread"] = frame["throughput_MBps"] / frame["nthreads"]
    return frame


def scaling_figures(results: pd.DataFrame, out_dir: str | os.PathLike, stem: str = "scaling") -> list[Path]:
    """Draw the seed's three figures (runtime vs cores, throughput vs cores, per-thread
    throughput vs threads), median and interquartile range of repeats per point, one
    colour-blind-safe colour per source. Returns the PNG paths."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import seaborn as sns
    except ImportError as exc:
        raise ArchiveError(f"Missing package '{exc.name}' required for figures. Install it with: pip install 'throughput[report]'") from None
    ok = results[results["status"] == "ok"]
    if ok.empty:
        raise UsageError("No successful runs to plot (every row has status=error).")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = [
        ("runtime", "ncores", "runtime", "Runtime (s)", "Cores (Dask worker threads)"),
        ("throughput", "ncores", "throughput_MBps", "Throughput (MB/s)", "Cores (Dask worker threads)"),
        ("per_thread", "nthreads", "throughput_MBps_per_thread", "Throughput per thread (MB/s)", "Threads"),
    ]
    sources = sorted(ok["source"].astype(str).unique())
    palette = dict(zip(sources, sns.color_palette("colorblind", len(sources))))
    paths = []
    for name, x, y, ylabel, xlabel in figures:
        fig, ax = plt.subplots(figsize=(6.4, 4.4))
        sns.lineplot(data=ok, x=x, y=y, hue="source", hue_order=sources, palette=palette, estimator="median",
                     errorbar=("pi", 50), marker="o", ax=ax)
        sns.scatterplot(data=ok, x=x, y=y, hue="source", hue_order=sources, palette=palette, s=18,
                        alpha=0.5, edgecolor="k", legend=False, ax=ax)
        ax.set(xlabel=xlabel, ylabel=ylabel, title=f"{ylabel} vs {xlabel.split(' (')[0].lower()}")
        ax.set_ylim(bottom=0)
        ax.set_xlim(left=0)
        ax.grid(True, alpha=0.4)
        ax.legend(title="source (median, IQR band)", fontsize="small")
        fig.tight_layout()
        path = out_dir / f"{stem}_{name}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths
