"""A fault-injecting HTTP reverse proxy on 127.0.0.1, for testing how reads survive a bad store.

Put it in front of any local HTTP server (the SeaweedFS S3 endpoint, a plain HTTP
server) and point clients at :attr:`FaultyProxy.endpoint_url`. Requests are forwarded
unchanged, the ``Host`` header included, so S3 signatures made for the proxy's
address still verify upstream. Every ``fail_every``-th matching request is answered
by the proxy itself with a throttling or server error (``503 SlowDown``,
``500 InternalError``) instead: a deterministic fraction of failures.
"""

from __future__ import annotations

import http.client
import itertools
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self
from urllib.parse import urlsplit

from . import free_port, stop_threaded_server

#: what a throttled or failing S3 store answers (status, S3 error code, message)
S3_FAULTS: tuple[tuple[int, str, str], ...] = (
    (503, "SlowDown", "Please reduce your request rate."),
    (500, "InternalError", "We encountered an internal error. Please try again."),
)

#: headers that belong to one connection and are not forwarded (RFC 9110 section 7.6.1)
_HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
               "trailer", "transfer-encoding", "upgrade", "proxy-connection"}


class FaultyProxy:
    """Forward HTTP requests to ``upstream``, failing every ``fail_every``-th matching one.

    Parameters
    ----------
    upstream
        Base URL of the real server, e.g. ``http://127.0.0.1:8333``.
    fail_every
        Answer every n-th matching request with a fault (0: never).
    methods
        HTTP methods whose requests may be failed (reads by default).
    faults
        ``(status, code, message)`` tuples, used in turn.

    Attributes
    ----------
    requests, injected, retried
        Requests seen, faults injected, and requests that repeated a failed one
        (same method, path and range): the retries the clients really made.
    """

    def __init__(self, upstream: str, fail_every: int = 0, methods: Sequence[str] = ("GET",),
                 faults: Sequence[tuple[int, str, str]] = S3_FAULTS):
        parts = urlsplit(upstream)
        self.upstream_host, self.upstream_port = parts.hostname or "127.0.0.1", parts.port or 80
        self.fail_every = fail_every
        self.methods = {m.upper() for m in methods}
        self.faults = tuple(faults)
        self.port = 0
        self.requests = self.injected = self.retried = 0
        self._matching = 0
        self._failed: set[tuple[str, str, str]] = set()
        self._fault_cycle = itertools.cycle(self.faults)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def reset_counts(self) -> None:
        with self._lock:
            self.requests = self.injected = self.retried = 0
            self._failed.clear()

    def _decide(self, method: str, path: str, byte_range: str) -> tuple[int, str, str] | None:
        """Count the request; return the fault to answer with, or None to forward it."""
        with self._lock:
            self.requests += 1
            signature = (method, path, byte_range)
            if signature in self._failed:
                self._failed.discard(signature)
                self.retried += 1
            if not self.fail_every or method not in self.methods:
                return None
            self._matching += 1
            if self._matching % self.fail_every:
                return None
            self.injected += 1
            self._failed.add(signature)
            return next(self._fault_cycle)

    def start(self) -> Self:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real stores speak

            def log_message(self, format, *args):  # quiet: tests read the counters instead
                pass

            def _body(self) -> bytes | None:
                if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else None

            def _handle(self) -> None:
                body = self._body()
                fault = proxy._decide(self.command, self.path, self.headers.get("Range", ""))
                if fault is not None:
                    status, code, message = fault
                    xml = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
                           f"<Message>{message}</Message><Resource>{self.path.split('?')[0]}</Resource>"
                           f"<RequestId>throughput-fault-{proxy.injected}</RequestId></Error>").encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(xml)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(xml)
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                if body is not None:
                    headers["Content-Length"] = str(len(body))
                conn = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port, timeout=60)
                try:
                    # skip_host: forward the client's own Host header (it is part of the S3 signature)
                    conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                    for key, value in headers.items():
                        conn.putheader(key, value)
                    conn.endheaders(body)
                    response = conn.getresponse()
                    data = response.read()
                except OSError:
                    self.send_error(502, "upstream unreachable")
                    return
                finally:
                    conn.close()
                self.send_response_only(response.status, response.reason)
                for key, value in response.getheaders():
                    if key.lower() not in _HOP_BY_HOP and key.lower() != "content-length":
                        self.send_header(key, value)
                # HEAD answers carry the object's length but no body
                length = response.getheader("Content-Length") if self.command == "HEAD" else str(len(data))
                self.send_header("Content-Length", length or "0")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _handle

        self.port = free_port()
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="faulty-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        stop_threaded_server(self._server, self._thread, 5)
        self._server = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
