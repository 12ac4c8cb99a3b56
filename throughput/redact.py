"""Keep credentials out of records, file names, logs and messages."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

#: storage_options keys (at any depth) whose values are secrets
SECRET_KEYS = re.compile(
    r"(^|_)(key|secret|token|password|passwd|pass|session|credential|credentials|auth|"
    r"signature|sig|apikey|api_key|access_key_id|secret_access_key|private)($|_)",
    re.IGNORECASE,
)
MASK = "***"


def is_secret_key(name: str) -> bool:
    """Return True when an option of this name holds a secret."""
    return bool(SECRET_KEYS.search(str(name)))


def redact_url(url: str) -> str:
    """Remove userinfo and secret query parameters from a URL.

    >>> redact_url("s3://AKIA:SeCrEt@bucket/x.zarr?X-Amz-Signature=abc&v=1")
    's3://bucket/x.zarr?X-Amz-Signature=***&v=1'
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc.rsplit("@", 1)[-1] if "@" in parts.netloc else parts.netloc
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(is_secret_key(k) for k, _ in pairs):
            query = urlencode([(k, MASK if is_secret_key(k) else v) for k, v in pairs], safe="*,")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_options(options: Any) -> Any:
    """Return a copy of storage_options with secret values masked (recursively)."""
    if isinstance(options, dict):
        return {
            k: (MASK if is_secret_key(k) and v not in (None, False, "") and not isinstance(v, dict)
                else redact_options(v))
            for k, v in options.items()
        }
    if isinstance(options, (list, tuple)):
        return type(options)(redact_options(v) for v in options)
    return options


def secret_values(options: Any) -> set[str]:
    """Collect every secret string in storage_options (to scrub them from free text)."""
    found: set[str] = set()
    if isinstance(options, dict):
        for k, v in options.items():
            if isinstance(v, str) and is_secret_key(k) and len(v) >= 4:
                found.add(v)
            else:
                found |= secret_values(v)
    elif isinstance(options, (list, tuple)):
        for v in options:
            found |= secret_values(v)
    return found


_URL_IN_TEXT = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+")


def redact_text(text: str, secrets: set[str] | frozenset[str] = frozenset()) -> str:
    """Scrub URLs with credentials and known secret values out of free text."""
    text = _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), str(text))
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text
