"""Zarr stores read through obstore (Rust ``object_store``) instead of fsspec.

The ``store=obstore`` option of Zarr sources reads chunks with obstore's Rust HTTP
client, which costs a fraction of s3fs/aiobotocore's CPU per request (see the README's
"Measurement fidelity" section). Users keep writing the s3fs/gcsfs-style
``storage_options`` the rest of throughput accepts; :func:`obstore_options` translates
them, and refuses, naming it, any option that has no obstore equivalent.
"""

from __future__ import annotations

import json
import os
from importlib.metadata import PackageNotFoundError, version
from typing import Any
from urllib.parse import urlsplit

from .errors import MissingDependencyError, SourceNotFoundError, UsageError
from .redact import redact_url
from .storage import protocol_of

#: protocols (fsspec names) that ``store=obstore`` reads, and the obstore store class for each
OBSTORE_PROTOCOLS = {"s3": "S3Store", "s3a": "S3Store", "gs": "GCSStore", "gcs": "GCSStore",
                     "http": "HTTPStore", "https": "HTTPStore", "file": "LocalStore"}

#: storage_options translated per store class (dotted: inside ``client_kwargs``)
ACCEPTED = {
    "S3Store": ("anon", "key", "secret", "token", "endpoint_url", "client_kwargs.endpoint_url",
                "region", "client_kwargs.region_name", "requester_pays"),
    "GCSStore": ("token", "endpoint_url"),
    "HTTPStore": ("headers",),
    "LocalStore": (),
}


def obstore_version() -> str:
    """``"obstore <version>"``, or a clear error when obstore is not installed."""
    try:
        return f"obstore {version('obstore')}"
    except PackageNotFoundError:
        raise MissingDependencyError("Missing package 'obstore' required for store=obstore. Install it with: "
                                     "pip install obstore (or pip install 'throughput[obstore]').") from None


def _flag(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise UsageError(f"Storage option {name}={value!r} must be true or false.")


def _endpoint(name: str, value: Any, config: dict[str, Any], client: dict[str, Any], key: str) -> None:
    parts = urlsplit(str(value))
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"Storage option {name}={redact_url(str(value))!r} must be a URL like https://host:port.")
    config[key] = str(value).rstrip("/")
    if parts.scheme == "http":  # obstore refuses plain HTTP unless told
        client["allow_http"] = True


def _flatten(storage_options: dict[str, Any]) -> dict[str, Any]:
    """Options with ``client_kwargs`` entries spelled ``client_kwargs.<name>``."""
    flat = {k: v for k, v in storage_options.items() if k != "client_kwargs"}
    kwargs = storage_options.get("client_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise UsageError(f"Storage option client_kwargs must be a mapping, got {type(kwargs).__name__}.")
    flat.update({f"client_kwargs.{k}": v for k, v in kwargs.items()})
    return flat


def obstore_options(url: str, storage_options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Translate a URL and s3fs/gcsfs-style ``storage_options`` into an obstore store's arguments.

    Parameters
    ----------
    url
        ``s3://bucket/path``, ``gs://bucket/path``, ``http(s)://host/path`` or a local path.
    storage_options
        For S3: ``key``, ``secret``, ``token`` (session token), ``anon``,
        ``endpoint_url`` (or ``client_kwargs.endpoint_url``), ``region`` (or
        ``client_kwargs.region_name``), ``requester_pays``. For GCS: ``token``
        (``"anon"``, ``"google_default"``, a credentials file or a service-account
        dict) and ``endpoint_url``. For HTTP: ``headers``. None for local paths.

    Returns
    -------
    tuple
        The obstore store class name and the keyword arguments of its constructor.

    Raises
    ------
    UsageError
        For a protocol obstore does not read here, or an option with no obstore
        equivalent (the message names it and lists the accepted ones).

    Examples
    --------
    >>> obstore_options("s3://bucket/run/ocean.zarr", {"anon": True, "endpoint_url": "http://127.0.0.1:8333"})
    ('S3Store', {'bucket': 'bucket', 'prefix': 'run/ocean.zarr', 'config': {'skip_signature': True, \
'endpoint': 'http://127.0.0.1:8333', 'region': 'us-east-1'}, 'client_options': {'allow_http': True}})
    """
    proto = protocol_of(url)
    kind = OBSTORE_PROTOCOLS.get(proto)
    if kind is None:
        raise UsageError(f"store=obstore reads s3://, gs://, http(s):// URLs and local paths, not {proto}:// "
                         f"('{redact_url(url)}'); use store=fsspec for it.")
    flat = _flatten(storage_options)
    unknown = sorted(k for k in flat if k not in ACCEPTED[kind])
    if unknown:
        accepted = ", ".join(ACCEPTED[kind]) or "none"
        raise UsageError(f"Storage option(s) {unknown} cannot be passed to obstore ({kind}) for "
                         f"'{redact_url(url)}'. Accepted with store=obstore: {accepted}; or use store=fsspec.")
    config: dict[str, Any] = {}
    client: dict[str, Any] = {}
    if kind == "LocalStore":
        path = os.path.abspath(os.path.expanduser(url.split("://", 1)[1] if "://" in url else url))
        if not os.path.isdir(path):  # obstore would say "Unable to canonicalize filesystem root"
            raise SourceNotFoundError(f"Nothing found at '{redact_url(url)}': no such folder.")
        return kind, {"prefix": path}
    if kind == "HTTPStore":
        if "headers" in flat:
            if not isinstance(flat["headers"], dict):
                raise UsageError("Storage option headers must be a mapping of header names to values.")
            client["default_headers"] = {str(k): str(v) for k, v in flat["headers"].items()}
        if url.startswith("http://"):
            client["allow_http"] = True
        return kind, {"url": url, "client_options": client}
    parts = urlsplit(url)
    bucket, prefix = parts.netloc, parts.path.strip("/")
    if not bucket:
        raise UsageError(f"No bucket in '{redact_url(url)}': write it as {proto}://bucket/path.")
    if kind == "S3Store":
        for name, key in (("key", "access_key_id"), ("secret", "secret_access_key"), ("token", "session_token")):
            if flat.get(name) is not None:
                config[key] = str(flat[name])
        if "anon" in flat and _flag("anon", flat["anon"]):
            config["skip_signature"] = True
        endpoint = flat.get("client_kwargs.endpoint_url") or flat.get("endpoint_url")
        if endpoint:
            _endpoint("endpoint_url", endpoint, config, client, "endpoint")
        region = flat.get("client_kwargs.region_name") or flat.get("region")
        if region or endpoint:  # S3-compatible servers sign with some region; us-east-1 is the convention
            config["region"] = str(region or "us-east-1")
        if "requester_pays" in flat and _flag("requester_pays", flat["requester_pays"]):
            config["request_payer"] = True
    else:  # GCSStore
        token = flat.get("token")
        if token == "anon":
            config["skip_signature"] = True
        elif isinstance(token, dict):
            config["service_account_key"] = json.dumps(token)
        elif isinstance(token, str) and token not in ("google_default", "") and os.path.isfile(token):
            config["application_credentials"] = token
        elif token not in (None, "google_default"):
            raise UsageError("Storage option token for store=obstore on gs:// must be 'anon', 'google_default', "
                             "the path of a credentials JSON file, or a service-account dict.")
        if flat.get("endpoint_url"):
            _endpoint("endpoint_url", flat["endpoint_url"], config, client, "base_url")
    args: dict[str, Any] = {"bucket": bucket, "prefix": prefix or None, "config": config}
    if client:
        args["client_options"] = client
    return kind, args


def obstore_zarr_store(url: str, storage_options: dict[str, Any]):
    """A read-only ``zarr.storage.ObjectStore`` over the obstore store for ``url``.

    Nothing is read: obstore connects on the first request. Zarr's ``ObjectStore``
    pickles its obstore store (which pickles its configuration), so an array opened on
    it can be shipped to Dask worker processes.
    """
    obstore_version()  # the install hint, before anything imports obstore
    kind, args = obstore_options(url, storage_options)
    import obstore.store
    from zarr.storage import ObjectStore

    return ObjectStore(getattr(obstore.store, kind)(**args), read_only=True)
