"""Sweep files: a YAML description of an unattended sweep, checked before anything runs.

A sweep file names the sources to read, the worker counts, the repeats, the cluster,
labels for the records, where the results go and where they are uploaded::

    name: ocean-zarr-s3
    sources:
      - url: s3://bucket/ocean.zarr
        variable: temp
        storage_options:
          endpoint_url: https://object-store.example.org
          key: ${AWS_ACCESS_KEY_ID}
          secret: ${AWS_SECRET_ACCESS_KEY}
      - catalog: catalogs/pangeo.yaml:gfdl_cm26_ocean
        workers: [1, 2]
    workers: [1, 2, 4]
    repeats: 3
    cluster: {kind: local, threads_per_worker: 1}
    labels: {cloud: aws, region: us-west-2, tags: {campaign: spring}}
    output: results/
    upload: s3://team-archive/throughput/

The file is read with ``yaml.safe_load`` and nothing in it is evaluated. ``${NAME}``
in any string is replaced by the environment variable ``NAME`` (``$${`` stands for
a literal ``${``), so credentials need not sit in the file; every value taken from
the environment is treated as a secret and scrubbed from records, logs and messages.
Relative local paths are relative to the sweep file's folder.

:func:`load_sweep_file` checks the whole file and raises one :class:`SweepFileError`
listing every problem with its key path (``sources[1].workers[0]``) and what would be
accepted.
"""

from __future__ import annotations

import difflib
import hashlib
import inspect
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import config
from .errors import ThroughputError, UsageError
from .redact import is_secret_key, redact_text, secret_values

#: accepted keys, with what each takes (shown when a key is unknown)
TOP_KEYS = ("version", "name", "sources", "workers", "repeats", "threads_per_worker", "cluster",
            "labels", "retries", "warmup", "blocks_per_task", "output", "upload")
SOURCE_KEYS = ("url", "catalog", "name", "format", "variable", "storage_options", "options", "workers",
               "repeats", "labels")
CLUSTER_KEYS = ("kind", "options", "threads_per_worker", "wait_timeout")
LABEL_KEYS = ("cloud", "region", "tags")
UPLOAD_KEYS = ("url", "storage_options")
MAX_WORKERS = 100_000
MAX_REPEATS = 10_000
#: gcsfs ``token`` values that name a way to authenticate, not a credential
TOKEN_MODES = frozenset({"anon", "google_default", "cache", "cloud", "browser"})
_ENV_REF = re.compile(r"\$\$\{|\$\{([^}]*)\}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+-]*\Z")


class SweepFileError(UsageError):
    """A sweep file that cannot be run; :attr:`problems` lists every ``(key path, message)``."""

    def __init__(self, path: str, problems: list[tuple[str, str]]):
        self.path = path
        self.problems = problems
        items = [f"{where}: {what}" if where else what for where, what in problems]
        if len(items) == 1:  # one problem, one line
            message = f"Sweep file '{path}': {items[0]}"
        else:  # numbered, so the list still reads well if it is ever joined into one line
            listed = "\n".join(f"  [{i}] {item}" for i, item in enumerate(items, start=1))
            message = f"Sweep file '{path}' has {len(items)} problems:\n{listed}"
        super().__init__(message)


@dataclass(frozen=True)
class SourceSpec:
    """One source of a sweep file, checked, with its own worker counts and repeats."""

    name: str
    """Name in the records; unique in the sweep file (resume matches rows by it)."""
    where: str
    """Key path in the sweep file (``sources[1]``)."""
    url: str | list[str] | None = None
    """A URL, or a list of files of one source (NetCDF)."""
    catalog: str | None = None
    """``CATALOG:ENTRY`` (a catalog path or URL, then the entry name)."""
    format: str | None = None
    variable: str | None = None
    storage_options: dict[str, Any] = field(default_factory=dict, repr=False)
    options: dict[str, Any] = field(default_factory=dict)
    """Options of the source kind (``chunks``, NetCDF cache settings, OPeNDAP ``protocol``, ...)."""
    workers: tuple[int, ...] = ()
    repeats: int = 1
    top_labels: dict[str, Any] = field(default_factory=dict)
    """The sweep file's top-level ``labels``."""
    own_labels: dict[str, Any] = field(default_factory=dict)
    """This source's own ``labels`` (they win over every other)."""

    @property
    def labels(self) -> dict[str, Any]:
        """``cloud``, ``region`` and ``tags`` (a dict) for the records."""
        return merge_labels(self.top_labels, self.own_labels)

    def labels_with(self, found: dict[str, Any]) -> dict[str, Any]:
        """Labels when the source itself knows some (a catalog entry's cloud and region):
        the source's own labels win, then what was found, then the top-level ones."""
        return merge_labels(merge_labels(self.top_labels, {k: v for k, v in found.items() if v}), self.own_labels)

    @property
    def points(self) -> list[tuple[int, int]]:
        """``(nworkers, repeat)`` in the order they are measured."""
        return [(n, r) for n in self.workers for r in range(self.repeats)]


@dataclass(frozen=True)
class UploadTarget:
    """Where results go after a sweep: any fsspec URL, with its storage options."""

    url: str
    storage_options: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class SweepPlan:
    """A checked sweep file: everything ``throughput run`` needs, secrets already resolved."""

    path: Path
    name: str
    digest: str
    """Short hash of the file's content (before environment substitution): names its results."""
    sources: tuple[SourceSpec, ...]
    cluster_kind: str
    cluster_options: dict[str, Any] = field(default_factory=dict, repr=False)
    wait_timeout: float | None = None
    retries: int | None = None
    warmup: bool | None = None
    """Untimed read of one chunk per worker thread before each point (default: config)."""
    blocks_per_task: int | str | None = None
    """Chunks stored per task (default: config, 1 as the seed)."""
    output: Path = Path("results")
    upload: UploadTarget | None = None
    secrets: frozenset[str] = field(default_factory=frozenset, repr=False)
    """Every secret value in the plan (from the environment or secret-named options)."""
    warnings: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        """Timed runs in the whole sweep."""
        return sum(len(s.points) for s in self.sources)


# -- checking ---------------------------------------------------------------------------

class _Checker:
    """Collects every problem (key path, message) instead of stopping at the first."""

    def __init__(self, base: Path, environ: Mapping[str, str]):
        self.base = base
        self.environ = environ
        self.problems: list[tuple[str, str]] = []
        self.secrets: set[str] = set()
        self.from_env: set[str] = set()
        self.warnings: list[str] = []

    def problem(self, where: str, message: str) -> None:
        self.problems.append((where, message))

    def show(self, value: Any) -> str:
        """A bad value as shown in a message: short, credentials removed."""
        text = repr(value) if not isinstance(value, str) else f"'{value}'"
        text = redact_text(text, self.secrets)
        return text if len(text) <= 80 else text[:77] + "..."

    # environment references ------------------------------------------------------------
    def expand(self, value: Any, where: str) -> Any:
        """Replace ``${NAME}`` in every string with the environment variable (a secret)."""
        if isinstance(value, dict):
            return {k: self.expand(v, _join(where, k)) for k, v in value.items()}
        if isinstance(value, list):
            return [self.expand(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if not isinstance(value, str) or "$" not in value:
            return value

        def substitute(match: re.Match) -> str:
            if match.group(0) == "$${":
                return "${"
            name = match.group(1)
            if not _ENV_NAME.match(name):
                self.problem(where, f"bad environment reference '${{{name}}}': write ${{NAME}} with NAME made "
                                    "of letters, digits and underscores (or $${ for a literal '${').")
                return ""
            if name not in self.environ:
                self.problem(where, f"environment variable '{name}' is not set (referenced as ${{{name}}}); "
                                    "set it before running, or write the value in the file.")
                return ""
            found = self.environ[name]
            self.from_env.add(where)
            if len(found) >= 4:  # shorter values are not credentials, and would scrub too much text
                self.secrets.add(found)
            return found

        return _ENV_REF.sub(substitute, value)

    # scalar checks ----------------------------------------------------------------------
    def mapping(self, value: Any, where: str, accepted: tuple[str, ...] | None, what: str) -> dict | None:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.problem(where, f"got {self.show(value)}; must be a mapping of {what}.")
            return None
        for key in value:
            if not isinstance(key, str):
                self.problem(where, f"key {self.show(key)} is not a string; keys must be names.")
            elif accepted is not None and key not in accepted:
                close = difflib.get_close_matches(key, accepted, n=1)
                hint = f"did you mean '{close[0]}'? " if close else ""
                self.problem(_join(where, key), f"unknown key; {hint}Accepted: {', '.join(accepted)}.")
        return value

    def text(self, value: Any, where: str, what: str, required: bool = False) -> str | None:
        if value is None:
            if required:
                self.problem(where, f"missing; give {what}.")
            return None
        if isinstance(value, bool) or not isinstance(value, (str, int, float)) or not str(value).strip():
            self.problem(where, f"got {self.show(value)}; must be {what}.")
            return None
        return str(value).strip()

    def integer(self, value: Any, where: str, low: int, high: int, example: str) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            self.problem(where, f"got {self.show(value)}; must be an integer from {low} to {high}, like {example}.")
            return None
        return value

    def number(self, value: Any, where: str, low: float, high: float, example: str) -> float | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low < value <= high:
            self.problem(where, f"got {self.show(value)}; must be a number of seconds above {low:g} "
                                f"and at most {high:g}, like {example}.")
            return None
        return float(value)

    def workers(self, value: Any, where: str) -> tuple[int, ...] | None:
        accepted = f"a list of distinct positive integers (at most {MAX_WORKERS}), like [1, 2, 4] or '1,2,4'"
        if isinstance(value, str):
            parts = [p.strip() for p in value.split(",")]
            items = [int(p) if p.isdigit() else p for p in parts]
        elif isinstance(value, int) and not isinstance(value, bool):
            items = [value]
        elif isinstance(value, list):
            items = value
        else:
            self.problem(where, f"got {self.show(value)}; must be {accepted}.")
            return None
        if not items:
            self.problem(where, f"empty; must be {accepted}.")
            return None
        counts, ok = [], True
        for i, n in enumerate(items):
            spot = f"{where}[{i}]"
            if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_WORKERS:
                self.problem(spot, f"got {self.show(n)}; worker counts must be positive integers "
                                   f"(at most {MAX_WORKERS}), like 1, 2, 4.")
                ok = False
            elif n in counts:
                self.problem(spot, f"worker count {n} is listed twice; list each count once "
                                   "(use repeats for more runs).")
                ok = False
            else:
                counts.append(n)
        return tuple(counts) if ok else None

    def labels(self, value: Any, where: str) -> dict[str, Any]:
        found = self.mapping(value, where, LABEL_KEYS, "cloud, region and tags")
        if not found:
            return {}
        labels: dict[str, Any] = {}
        for key in ("cloud", "region"):
            if key in found:
                text = self.text(found[key], _join(where, key), "a short label, like 'aws' or 'us-west-2'")
                if text is not None:
                    labels[key] = text
        if "tags" in found:
            tags = found["tags"]
            spot = _join(where, "tags")
            if isinstance(tags, list) and all(isinstance(t, str) for t in tags):
                tags = dict(t.partition("=")[::2] for t in tags)
            if not isinstance(tags, dict):
                self.problem(spot, f"got {self.show(tags)}; must be a mapping of names to short values, "
                                   "like {campaign: spring, instance: m5.large}.")
            else:
                clean = {}
                for k, v in tags.items():
                    if not isinstance(v, (str, int, float, bool)) or any(c in f"{k}{v}" for c in ";=\n"):
                        self.problem(_join(spot, str(k)), f"got {self.show(v)}; tag values must be short text or "
                                                          "numbers without ';', '=' or line breaks.")
                    else:
                        clean[str(k)] = v
                labels["tags"] = clean
        return labels

    def storage_options(self, value: Any, where: str) -> dict[str, Any]:
        found = self.mapping(value, where, None, "options passed to fsspec (like endpoint_url, anon, key)")
        if not found:
            return {}
        literal = sorted(set(_secret_paths(found, where)) - self.from_env)
        for spot in literal:
            self.warnings.append(f"{spot} holds a credential written in the sweep file; "
                                 "consider ${ENV_VAR} so the file can be shared.")
        return found

    def local_path(self, text: str) -> str:
        """Relative local paths are relative to the sweep file's folder."""
        if "://" in text or text.startswith(("synthetic:", "/")) or re.match(r"^[A-Za-z]+::", text):
            return text
        path = Path(text).expanduser()
        return str(path) if path.is_absolute() else str((self.base / path).resolve())


def merge_labels(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` wins for cloud and region; tags are merged key by key."""
    merged = {**base, **{k: v for k, v in over.items() if k != "tags"}}
    if base.get("tags") or over.get("tags"):
        merged["tags"] = {**base.get("tags", {}), **over.get("tags", {})}
    return merged


def _join(where: str, key: Any) -> str:
    return f"{where}.{key}" if where else str(key)


def _secret_paths(options: Any, where: str) -> list[str]:
    """Key paths of secret-named options whose value is written out (not from the environment)."""
    found = []
    if isinstance(options, dict):
        for k, v in options.items():
            spot = _join(where, k)
            if isinstance(v, str) and is_secret_key(k) and v and v not in TOKEN_MODES:
                found.append(spot)
            else:
                found += _secret_paths(v, spot)
    return found


#: source kinds that read through fsspec: their URL protocol is checked before running
FSSPEC_KINDS = ("zarr", "netcdf")


def _check_format(checker: _Checker, fmt: str | None, url: str | list[str] | None, where: str) -> None:
    from .sources import guess_format, source_kinds

    kinds = source_kinds()
    if fmt is not None and fmt not in kinds:
        checker.problem(_join(where, "format"), f"unknown source format '{fmt}'; must be one of {sorted(kinds)}.")
        return
    listed = url if isinstance(url, list) else [url]
    for i, one in enumerate(listed):
        if one is None or "${" in one or (fmt or guess_format(one)) not in FSSPEC_KINDS:
            continue  # synthetic://, dap2://, llcreader://, plugins: the kind itself checks its URL
        from .storage import filesystem_class

        try:
            filesystem_class(one)
        except ThroughputError as exc:
            spot = _join(where, "url") + (f"[{i}]" if isinstance(url, list) else "")
            checker.problem(spot, redact_text(str(exc), checker.secrets))


def _check_cluster(checker: _Checker, value: Any, threads: int | None) -> tuple[str, dict, float | None]:
    from .clusters import CLUSTER_KINDS

    where = "cluster"
    # 'client' wraps a Python object (a notebook's Client): a YAML file cannot hold one
    kinds = sorted(k for k in CLUSTER_KINDS if k != "client")
    kind = config.get("cluster.kind", "local")
    options: dict[str, Any] = {}
    timeout = None
    if isinstance(value, str):
        value = {"kind": value}
    found = checker.mapping(value, where, CLUSTER_KEYS, "kind, options, threads_per_worker and wait_timeout")
    if found:
        if "kind" in found:
            kind = checker.text(found["kind"], "cluster.kind", f"a cluster kind, one of {kinds}") or kind
        raw = checker.mapping(found.get("options"), "cluster.options", None, "options for the cluster")
        options = dict(raw or {})
        for spot in sorted(set(_secret_paths(options, "cluster.options")) - checker.from_env):
            checker.warnings.append(f"{spot} holds a credential written in the sweep file; "
                                    "consider ${ENV_VAR} so the file can be shared.")
        if found.get("threads_per_worker") is not None:
            if threads is not None:
                checker.problem("cluster.threads_per_worker", "also given at the top level; give it once.")
            threads = checker.integer(found["threads_per_worker"], "cluster.threads_per_worker", 1, 1024, "1 or 2")
        if found.get("wait_timeout") is not None:
            timeout = checker.number(found["wait_timeout"], "cluster.wait_timeout", 0, 86_400, "120")
    if kind not in kinds:
        checker.problem("cluster.kind", f"unknown cluster kind '{kind}'; must be one of {kinds}"
                                        + (" (a running scheduler is kind 'address')." if kind == "client" else "."))
        return kind, options, timeout
    if timeout is not None:
        options["wait_timeout"] = timeout  # every provider takes it
    if threads is not None:
        if _takes(kind, "threads_per_worker"):
            options["threads_per_worker"] = threads
        else:
            checker.problem("threads_per_worker", f"the '{kind}' cluster does not set threads per worker; "
                                                  "leave it out, or set the worker size in cluster.options.")
    return kind, options, timeout


def _takes(kind: str, parameter: str) -> bool:
    """Whether a cluster provider's constructor names ``parameter`` (without starting anything)."""
    import importlib

    from .clusters import CLUSTER_KINDS

    module, cls = CLUSTER_KINDS[kind].split(":")
    try:
        provider = getattr(importlib.import_module(module), cls)
    except ImportError:
        return True  # the missing package is reported when the cluster is opened
    return parameter in inspect.signature(provider.__init__).parameters


def check_sweep(data: Any, path: str | os.PathLike = "<sweep>", environ: Mapping[str, str] | None = None,
                digest: str | None = None) -> SweepPlan:
    """Check a parsed sweep file; return the plan or raise :class:`SweepFileError` listing every problem.

    Parameters
    ----------
    data
        What ``yaml.safe_load`` returned.
    path
        The file it came from: names it in messages; relative paths are resolved from its folder.
    environ
        Where ``${NAME}`` references are looked up (default: ``os.environ``).
    digest
        Hash naming the results (default: computed from ``data``).
    """
    path = Path(path)
    checker = _Checker(path.parent.resolve(), os.environ if environ is None else environ)
    digest = digest or content_digest(data)
    if data is None:
        raise SweepFileError(str(path), [("", "the file is empty; it needs at least sources: and workers:.")])
    top = checker.mapping(data, "", TOP_KEYS, "sweep settings (sources, workers, repeats, cluster, ...)")
    if top is None:
        raise SweepFileError(str(path), checker.problems)
    top = checker.expand(top, "")

    if "version" in top and top["version"] != 1:
        checker.problem("version", f"got {checker.show(top['version'])}; this throughput reads sweep files of version 1.")
    name = checker.text(top.get("name"), "name", "a short name for the sweep, like ocean-zarr-s3") or path.stem
    if not _NAME.match(name):
        checker.problem("name", f"got {checker.show(name)}; use letters, digits and . _ - + @ (it names the results file).")
    default_workers = checker.workers(top["workers"], "workers") if "workers" in top else None
    default_repeats = config.get("sweep.repeats", 3)
    if "repeats" in top:
        default_repeats = checker.integer(top["repeats"], "repeats", 1, MAX_REPEATS, "3")
    threads = None
    if top.get("threads_per_worker") is not None:
        threads = checker.integer(top["threads_per_worker"], "threads_per_worker", 1, 1024, "1 or 2")
    retries = None
    if top.get("retries") is not None:
        retries = checker.integer(top["retries"], "retries", 0, 100, "5")
    warmup = top.get("warmup")
    if warmup is not None and not isinstance(warmup, bool):
        checker.problem("warmup", f"got {checker.show(warmup)}; must be true or false.")
        warmup = None
    blocks = None
    value = top.get("blocks_per_task")
    if value == "auto" or (not isinstance(value, bool) and isinstance(value, int) and 1 <= value <= 1_000_000):
        blocks = value
    elif value is not None:
        checker.problem("blocks_per_task", f"got {checker.show(value)}; must be auto or an integer from 1 to "
                                           "1000000, like 8.")
    labels = checker.labels(top.get("labels"), "labels")
    kind, cluster_options, timeout = _check_cluster(checker, top.get("cluster"), threads)

    sources: list[SourceSpec] = []
    raw_sources = top.get("sources")
    if raw_sources is None:
        checker.problem("sources", "missing; give a list of sources, each with url: or catalog: (CATALOG:ENTRY).")
    elif not isinstance(raw_sources, list) or not raw_sources:
        checker.problem("sources", f"got {checker.show(raw_sources)}; must be a non-empty list of sources, "
                                   "each with url: or catalog: (CATALOG:ENTRY).")
    else:
        names: dict[str, str] = {}
        for i, raw in enumerate(raw_sources):
            spec = _check_source(checker, raw, f"sources[{i}]", default_workers, default_repeats, labels,
                                 "workers" in top)
            if spec is None:
                continue
            if spec.name in names:
                checker.problem(_join(spec.where, "name"), f"'{spec.name}' is also the name of {names[spec.name]}; "
                                                           "give each source a distinct name: (rows are matched by it).")
            names.setdefault(spec.name, spec.where)
            sources.append(spec)

    output = checker.text(top.get("output"), "output", "a folder for the results, like results/") or "results"
    upload = None
    if top.get("upload") is not None:
        raw = top["upload"]
        if isinstance(raw, str):
            raw = {"url": raw}
        found = checker.mapping(raw, "upload", UPLOAD_KEYS, "url and storage_options")
        if found:
            url = checker.text(found.get("url"), "upload.url", "an fsspec URL or folder, like s3://bucket/prefix/",
                               required=True)
            options = checker.storage_options(found.get("storage_options"), "upload.storage_options")
            if url is not None:
                _check_upload_url(checker, url)
                upload = UploadTarget(checker.local_path(url), options)

    if checker.problems:
        raise SweepFileError(str(path), _in_file_order(checker.problems, list(top)))
    secrets = set(checker.secrets) | (secret_values(cluster_options) - TOKEN_MODES)
    for spec in sources:
        secrets |= secret_values(spec.storage_options) - TOKEN_MODES
    if upload is not None:
        secrets |= secret_values(upload.storage_options) - TOKEN_MODES
    return SweepPlan(path=path, name=name, digest=digest, sources=tuple(sources), cluster_kind=kind,
                     cluster_options=cluster_options, wait_timeout=timeout, retries=retries, warmup=warmup,
                     blocks_per_task=blocks,
                     output=Path(checker.local_path(output)), upload=upload, secrets=frozenset(secrets),
                     warnings=tuple(checker.warnings))


def _in_file_order(problems: list[tuple[str, str]], keys: list[str]) -> list[tuple[str, str]]:
    """Problems sorted as their places appear in the file (top-level key, then list index)."""
    def place(item: tuple[int, tuple[str, str]]) -> tuple[int, int, int]:
        number, (where, _) = item
        match = re.match(r"([^.\[]*)(?:\[(\d+)\])?", where)
        top, index = match.group(1), match.group(2)
        return (keys.index(top) if top in keys else -1, int(index) if index else -1, number)

    return [problem for _, problem in sorted(enumerate(problems), key=place)]


def _check_upload_url(checker: _Checker, url: str) -> None:
    from .storage import filesystem_class

    try:
        filesystem_class(url)
    except ThroughputError as exc:
        checker.problem("upload.url", redact_text(str(exc), checker.secrets))


def _check_source(checker: _Checker, raw: Any, where: str, default_workers: tuple[int, ...] | None,
                  default_repeats: int | None, labels: dict, top_workers: bool) -> SourceSpec | None:
    from .sources import default_name

    if isinstance(raw, str):
        raw = {"catalog": raw} if not _looks_like_url(raw) else {"url": raw}
    found = checker.mapping(raw, where, SOURCE_KEYS, "source settings (url or catalog, variable, ...)")
    if found is None:
        return None
    url: str | list[str] | None = None
    if isinstance(found.get("url"), list):  # many files of one source (NetCDF)
        url = [checker.text(u, f"{_join(where, 'url')}[{i}]", "a file URL, like s3://bucket/ocean_0001.nc",
                            required=True) for i, u in enumerate(found["url"])]
        if not url:
            checker.problem(_join(where, "url"), "empty list; give a URL or a list of file URLs.")
        url = None if (not url or None in url) else url
    else:
        url = checker.text(found.get("url"), _join(where, "url"), "a URL fsspec understands, like s3://bucket/x.zarr")
    catalog = checker.text(found.get("catalog"), _join(where, "catalog"),
                           "CATALOG:ENTRY, like catalogs/pangeo.yaml:gfdl_cm26_ocean")
    if ("url" in found) == ("catalog" in found):
        checker.problem(where, "give exactly one of url: (a URL fsspec understands) or catalog: (CATALOG:ENTRY).")
        return None
    if catalog is not None:
        cat, _, entry = catalog.rpartition(":")
        if not cat or not entry or entry.startswith("/"):
            checker.problem(_join(where, "catalog"), f"got {checker.show(catalog)}; must be CATALOG:ENTRY, "
                                                     "like catalogs/pangeo.yaml:gfdl_cm26_ocean.")
            return None
        catalog = f"{checker.local_path(cat)}:{entry}"
    fmt = checker.text(found.get("format"), _join(where, "format"), "a source format, like zarr")
    variable = checker.text(found.get("variable"), _join(where, "variable"), "the name of an array, like temp")
    options = checker.storage_options(found.get("storage_options"), _join(where, "storage_options"))
    kind_options = checker.mapping(found.get("options"), _join(where, "options"), None,
                                   "options of the source kind (like chunks)") or {}
    _check_format(checker, fmt, url, where)

    if "workers" in found:
        workers = checker.workers(found["workers"], _join(where, "workers"))
    elif not top_workers:
        checker.problem(_join(where, "workers"), "missing; give worker counts here or at the top level "
                                                 "(workers: [1, 2, 4]).")
        workers = None
    else:
        workers = default_workers
    repeats = default_repeats
    if "repeats" in found:
        repeats = checker.integer(found["repeats"], _join(where, "repeats"), 1, MAX_REPEATS, "3")
    own = checker.labels(found.get("labels"), _join(where, "labels"))

    name = checker.text(found.get("name"), _join(where, "name"), "a short name, like gcs-zarr")
    if name is None:
        first = url[0] if isinstance(url, list) else url
        name = default_name(first) if first is not None else (catalog or "").rpartition(":")[2]
    if workers is None or repeats is None:
        return None
    if isinstance(url, list):
        url = [checker.local_path(u) for u in url]
    elif url is not None:
        url = checker.local_path(url)
    return SourceSpec(name=name, where=where, url=url, catalog=catalog, format=fmt, variable=variable,
                      storage_options=options, options=dict(kind_options), workers=workers, repeats=repeats, top_labels=labels,
                      own_labels=own)


def _looks_like_url(text: str) -> bool:
    return "://" in text or text.startswith("synthetic:") or not re.search(r":[A-Za-z_][\w.-]*$", text)


def content_digest(data: Any) -> str:
    """12 hex digits of SHA-256 over the parsed file (comments and layout do not count)."""
    text = json.dumps(data, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def load_sweep_file(path: str | os.PathLike, environ: Mapping[str, str] | None = None) -> SweepPlan:
    """Read and check a sweep file (YAML, loaded with ``yaml.safe_load``).

    Raises
    ------
    SweepFileError
        Listing every problem, each with its key path and what would be accepted.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"Sweep file '{path}' does not exist. Give the path of a YAML sweep file.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"Cannot read sweep file '{path}': {getattr(exc, 'strerror', None) or exc}.") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SweepFileError(str(path), [(where, f"not valid YAML: {what}.")]) from None
    return check_sweep(data, path, environ)


# -- opening -------------------------------------------------------------------------------

def open_spec(spec: SourceSpec):
    """Open the lazy array a source spec names; returns it and the labels its records get.

    A ``catalog:`` source is resolved through :mod:`throughput.catalog` (intake), whose
    entry may know its ``cloud`` and ``region``; the source's own labels still win.
    """
    from .sources import open_source

    if spec.catalog is None:
        source = open_source(spec.url, spec.variable, format=spec.format, storage_options=spec.storage_options,
                             name=spec.name, **spec.options)
        return source, spec.labels
    entry = resolve_catalog_entry(spec.catalog)
    # storage_options of the sweep file reach the data (merged over the entry's), not the catalog file
    source = entry.open(spec.variable, format=spec.format, storage_options=spec.storage_options, name=spec.name,
                        **spec.options)
    return source, spec.labels_with(entry.labels)


def resolve_catalog_entry(ref: str):
    """``CATALOG:ENTRY`` -> :class:`throughput.catalog.CatalogEntry`: the one place sweep files meet catalogs."""
    try:
        from .catalog import resolve_entry
    except ModuleNotFoundError as exc:
        if exc.name not in ("throughput.catalog", "intake"):
            raise
        raise UsageError(f"Catalog entry '{redact_text(ref)}' cannot be opened: catalog support needs "
                         f"{exc.name}, which is not installed. Give the source as url: instead.") from None
    return resolve_entry(ref)
