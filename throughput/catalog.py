"""Sources listed in intake catalogs: open a catalog, list its entries, resolve ``CATALOG:ENTRY``.

The catalogs are intake's YAML catalogs (``metadata.version: 1`` files, which intake 2
still opens with :func:`intake.open_catalog`). An entry names its data the way
intake-xarray does (``args.urlpath``, ``args.storage_options``, ``consolidated``,
``chunks``), so the same file serves Pangeo users; what ``throughput`` needs beyond
that lives in the entry's ``metadata``:

.. code-block:: yaml

    sources:
      GFDL_CM2_6_control_ocean:
        driver: [throughput.catalog.ArraySource, zarr]
        args:
          urlpath: gs://cmip6/GFDL_CM2_6/control/ocean
          consolidated: true
          storage_options: {requester_pays: true}
        metadata:
          format: zarr          # a throughput source kind (default: from the driver or URL)
          variable: temp        # the array to read
          cloud: gcloud         # labels for the records
          region: us-central1
          options: {}           # kind options (chunks, protocol, request_bytes, ...)

``driver`` lists :class:`ArraySource` first: intake instantiates it with the entry's
arguments after rendering its user parameters (``{{ name }}`` templates, with
defaults such as ``env(THROUGHPUT_S3_ENDPOINT)``), and with intake-xarray installed the
``zarr``/``netcdf``/``opendap`` driver that follows still loads the entry as xarray.
Entries of other catalogs (a Pangeo catalog with ``driver: zarr`` only) are read from
their description, without templates.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

import yaml

from .errors import SourceNotFoundError, UsageError, missing_dependency
from .redact import redact_options, redact_text, redact_url
from .sources import Source, guess_format, open_source

#: intake-xarray driver names -> throughput source kinds
DRIVER_FORMATS = {"zarr": "zarr", "netcdf": "netcdf", "opendap": "opendap", "ndzarr": "zarr"}
#: intake-xarray arguments with no meaning for throughput (zarr opens consolidated metadata by itself)
IGNORED_ARGS = frozenset({"consolidated", "engine", "xarray_kwargs", "combine", "concat_dim", "path_as_pattern"})
_SPEC = re.compile(r"^(?P<catalog>.+\.ya?ml):(?P<entry>[^:/\\]+)$", re.IGNORECASE)


class CatalogError(UsageError):
    """A catalog file that is missing, not YAML, or not an intake catalog; or an unknown entry."""


class CatalogNotFoundError(CatalogError, FileNotFoundError):
    """No catalog file at the path or URL given."""


@dataclass(frozen=True)
class CatalogEntry:
    """One source of a catalog, with its templates rendered."""

    catalog: str
    """Path or URL of the catalog file."""
    name: str
    url: str
    """Where the data is (as given in the catalog; credentials never come from it)."""
    format: str
    variable: str | None = None
    description: str = ""
    cloud: str = ""
    region: str = ""
    storage_options: dict[str, Any] = field(default_factory=dict, repr=False)
    options: dict[str, Any] = field(default_factory=dict)
    """Kind options passed to the opener (``chunks``, ``protocol``, ``request_bytes``, ...)."""
    missing: tuple[str, ...] = ()
    """Settings the entry needs and did not get: ``param (set ENV_VAR)``."""

    @property
    def labels(self) -> dict[str, str]:
        """``cloud`` and ``region`` labels for the records."""
        return {"cloud": self.cloud, "region": self.region}

    def open(self, variable: str | None = None, *, format: str | None = None,
             storage_options: dict[str, Any] | None = None, name: str | None = None,
             **options: Any) -> Source:
        """Open the entry as a lazy :class:`~throughput.sources.Source` (reads metadata only).

        Arguments override the catalog's; ``storage_options`` and kind ``options`` are
        merged over the entry's.
        """
        if self.missing:
            msg = (f"Catalog entry '{self.name}' of '{redact_text(self.catalog)}' needs "
                   f"{', '.join(self.missing)}: its location depends on them.")
            raise CatalogError(msg)
        merged = {**self.storage_options, **(storage_options or {})}
        return open_source(self.url, variable or self.variable, format=format or self.format,
                           storage_options=merged, name=name or self.name, **{**self.options, **options})

    def describe(self) -> dict[str, Any]:
        """Plain values for listings (storage options with secrets masked)."""
        row = dataclasses.asdict(self)
        row["url"] = redact_url(self.url)
        row["storage_options"] = redact_options(self.storage_options)
        return row


def _intake():
    try:
        import intake
    except ImportError:
        raise missing_dependency("intake", "catalogs", "catalog") from None
    return intake


try:  # the intake (v1 API) driver, when intake is installed
    from intake.source.base import DataSource as _DataSource
except ImportError:  # pragma: no cover - intake is an optional dependency
    _DataSource = object


class ArraySource(_DataSource):
    """intake driver for catalog entries that throughput reads.

    ``intake.open_catalog(path)[name]`` returns one of these with the entry's
    arguments rendered; :meth:`to_source` gives the throughput source and
    :meth:`to_dask` an xarray Dataset holding the lazy array.
    """

    name = "throughput"
    version = "1"
    container = "xarray"
    partition_access = False

    def __init__(self, urlpath: str, storage_options: dict[str, Any] | None = None,
                 metadata: dict[str, Any] | None = None, chunks: Any = None, **kwargs: Any) -> None:
        super().__init__(storage_options=storage_options, metadata=metadata)
        self.urlpath = urlpath
        self.storage_options = dict(storage_options or {})
        self.chunks = chunks
        self.kwargs = {k: v for k, v in kwargs.items() if k not in IGNORED_ARGS}

    def to_source(self, name: str | None = None) -> Source:
        """The lazy throughput source of this entry."""
        return entry_from_source(self, catalog="", name=name or self.name or "").open()

    def to_dask(self):
        """An xarray Dataset with the entry's one variable, backed by the lazy dask array."""
        import xarray as xr

        source = self.to_source()
        dims = source.dims if len(source.dims) == source.array.ndim else None
        return xr.DataArray(source.array, dims=dims, name=source.variable, attrs=source.attrs).to_dataset()

    def _get_schema(self):
        from intake.source.base import Schema

        return Schema(datashape=None, dtype=None, shape=None, npartitions=1, extra_metadata={})

    def _close(self) -> None:
        pass


def entry_from_source(source: ArraySource, catalog: str, name: str, description: str = "") -> CatalogEntry:
    """A :class:`CatalogEntry` from an instantiated :class:`ArraySource`."""
    md = dict(source.metadata or {})
    options = dict(md.get("options") or {})
    options.update(source.kwargs)
    if source.chunks not in (None, {}, "auto"):  # intake-xarray's "chunks: {}" means the stored chunks
        options["chunks"] = source.chunks
    url = str(source.urlpath)
    return CatalogEntry(
        catalog=catalog, name=name, url=url, format=str(md.get("format") or guess_format(url)),
        variable=md.get("variable"), description=description or str(source.description or ""),
        cloud=str(md.get("cloud") or ""), region=str(md.get("region") or ""),
        storage_options=dict(source.storage_options or {}), options=options,
    )


def _entry_from_description(desc: dict[str, Any], catalog: str) -> CatalogEntry:
    """Entries whose driver is not throughput's (e.g. a Pangeo catalog): read as written."""
    args = dict(desc.get("args") or {})
    md = dict(desc.get("metadata") or {})
    drivers = desc.get("driver") or []
    drivers = [drivers] if isinstance(drivers, str) else list(drivers)
    url = str(args.pop("urlpath", args.pop("url", "")))
    fmt = md.get("format") or next((DRIVER_FORMATS[d] for d in drivers if d in DRIVER_FORMATS), None) or guess_format(url)
    options = dict(md.get("options") or {})
    options.update({k: v for k, v in args.items() if k not in IGNORED_ARGS and k != "storage_options"})
    if options.get("chunks") in (None, {}, "auto"):
        options.pop("chunks", None)
    return CatalogEntry(
        catalog=catalog, name=desc["name"], url=url, format=str(fmt), variable=md.get("variable"),
        description=str(desc.get("description") or ""), cloud=str(md.get("cloud") or ""),
        region=str(md.get("region") or ""), storage_options=dict(args.get("storage_options") or {}),
        options=options,
    )


def _read_text(uri: str, storage_options: dict[str, Any] | None) -> str:
    import fsspec

    try:
        with fsspec.open(uri, "rt", encoding="utf-8", **(storage_options or {})) as f:
            return f.read()
    except FileNotFoundError:
        raise CatalogNotFoundError(f"Catalog file '{redact_text(uri)}' not found.") from None
    except IsADirectoryError:
        raise CatalogError(f"Catalog '{redact_text(uri)}' is a folder; give a catalog YAML file.") from None
    except UnicodeDecodeError:
        raise CatalogError(f"Catalog file '{redact_text(uri)}' is not valid YAML (not UTF-8 text).") from None


def check_catalog_text(text: str, uri: str) -> dict[str, Any]:
    """Parse a catalog file's text; a clear error when it is not YAML or not an intake catalog."""
    try:
        spec = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or "cannot be parsed"
        raise CatalogError(f"Catalog file '{redact_text(uri)}' is not valid YAML{where}: {problem}.") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("sources"), dict):
        found = sorted(map(str, spec)) if isinstance(spec, dict) else type(spec).__name__
        msg = (f"'{redact_text(uri)}' is not an intake catalog: it needs a 'sources:' mapping of "
               f"entries (found {found}).")
        raise CatalogError(msg)
    return spec


def load_catalog(uri: str, storage_options: dict[str, Any] | None = None):
    """Open an intake YAML catalog from a local path or any fsspec URL, checking it first.

    Returns the intake catalog object.
    """
    uri = str(uri)
    check_catalog_text(_read_text(uri, storage_options), uri)
    intake = _intake()
    kwargs = {"storage_options": storage_options} if storage_options else {}
    try:
        return intake.open_catalog(uri, **kwargs)
    except Exception as exc:  # noqa: BLE001  intake's own validation (bad entry layout, duplicate keys, ...)
        detail = "; ".join(line.strip(" -:") for line in redact_text(str(exc)).splitlines() if line.strip())
        raise CatalogError(f"'{redact_text(uri)}' is not a usable intake catalog: {detail}") from None


@contextlib.contextmanager
def _quiet_intake():
    # intake 2.0.9 warns "Shell command not executed" for every templated default, shell or not
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Shell command not executed", category=UserWarning)
        yield


_ENV_DEFAULT = re.compile(r"^env\((?P<name>[^),]+)\)$")


def _missing_parameters(desc: dict[str, Any], params: dict[str, Any]) -> tuple[str, ...]:
    """User parameters left without a value (an unset ``env(NAME)`` default renders as "")."""
    missing = []
    for p in desc.get("user_parameters") or []:
        if params.get(p["name"]) not in (None, ""):
            continue
        default = str(p.get("default") if p.get("default") is not None else "")
        env = _ENV_DEFAULT.match(default.strip())
        if env and not os.environ.get(env["name"].strip()):
            missing.append(f"{p['name']}=... (or ${env['name'].strip()})")
        elif not default:
            missing.append(f"{p['name']}=...")
    return tuple(missing)


def catalog_entry(cat, name: str, uri: str, **params: Any) -> CatalogEntry:
    """Resolve one entry of an opened catalog (templates rendered with ``params``)."""
    known = list(cat)
    if name not in known:
        raise CatalogError(f"Unknown catalog entry '{name}' in '{redact_text(uri)}'. Entries: {known}.")
    raw = cat._entries[name]  # intake v1 keeps entries here; describe() reads, never opens
    desc = raw.describe()
    drivers = desc.get("driver") or []
    if "throughput" not in (drivers if isinstance(drivers, list) else [drivers]):
        return _entry_from_description(desc, uri)
    declared = {p["name"] for p in desc.get("user_parameters") or []}
    params = {k: v for k, v in params.items() if k in declared}  # others would become driver arguments
    try:
        with _quiet_intake():
            source = raw.get(**params)
    except (ValueError, TypeError) as exc:  # a bad parameter value, or args the driver does not take
        raise CatalogError(f"Entry '{name}' of '{redact_text(uri)}': {redact_text(str(exc)).splitlines()[0]}") from None
    entry = entry_from_source(source, uri, name, desc.get("description") or "")
    missing = _missing_parameters(desc, params) or (() if entry.url else ("an urlpath",))
    return dataclasses.replace(entry, missing=missing)


def catalog_entries(uri: str, storage_options: dict[str, Any] | None = None, **params: Any) -> list[CatalogEntry]:
    """Every entry of a catalog, templates rendered (nothing is opened)."""
    cat = load_catalog(uri, storage_options)
    return [catalog_entry(cat, name, str(uri), **params) for name in cat]


def split_catalog_spec(text: str) -> tuple[str, str] | None:
    """``"catalogs/seed.yaml:GCS_Zarr"`` -> ``("catalogs/seed.yaml", "GCS_Zarr")``; None if not that form.

    >>> split_catalog_spec("s3://bucket/cat.yml:ocean")
    ('s3://bucket/cat.yml', 'ocean')
    >>> split_catalog_spec("s3://bucket/ocean.zarr") is None
    True
    """
    match = _SPEC.match(str(text))
    return (match["catalog"], match["entry"]) if match else None


def resolve_entry(spec: str, storage_options: dict[str, Any] | None = None, **params: Any) -> CatalogEntry:
    """Resolve ``CATALOG:ENTRY`` (catalog: local path or fsspec URL) to a :class:`CatalogEntry`.

    ``storage_options`` reach the catalog file; ``params`` set the entry's user parameters.
    """
    parts = split_catalog_spec(spec)
    if parts is None:
        if str(spec).lower().endswith((".yaml", ".yml")):
            names = list(load_catalog(spec, storage_options))
            raise CatalogError(f"Name an entry of '{redact_text(spec)}' as CATALOG:ENTRY. Entries: {names}.")
        raise CatalogError(f"'{redact_text(spec)}' is not CATALOG:ENTRY (a .yaml or .yml catalog, a colon, an entry name).")
    uri, name = parts
    return catalog_entry(load_catalog(uri, storage_options), name, uri, **params)


def entry_size(entry: CatalogEntry) -> int:
    """Decoded bytes of the entry's array: opens it (metadata reads only)."""
    return entry.open().nbytes


__all__ = [
    "ArraySource", "CatalogEntry", "CatalogError", "CatalogNotFoundError", "SourceNotFoundError",
    "catalog_entries", "catalog_entry", "entry_size", "load_catalog", "resolve_entry", "split_catalog_spec",
]
