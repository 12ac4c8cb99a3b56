"""A static file server on 127.0.0.1: a folder over plain HTTP, like a web server or a CDN.

Python's :class:`http.server.ThreadingHTTPServer` with byte-range support (HDF5 over
HTTP reads ranges) and, by default, no directory listings (like most static hosts,
which is why Zarr over HTTP needs consolidated metadata).
"""

from __future__ import annotations

import os
import re
import shutil
import threading
from functools import partial
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self

from . import stop_threaded_server

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


class RangeRequestHandler(SimpleHTTPRequestHandler):
    """Serves files with ``Range: bytes=a-b`` support (one range per request)."""

    list_directories = False
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers do

    def log_message(self, format, *args) -> None:  # quiet: tests and the demo print their own lines
        pass

    def list_directory(self, path):
        if self.list_directories:
            return super().list_directory(path)
        self.send_error(HTTPStatus.NOT_FOUND, "Directory listing not allowed")
        return None

    def send_head(self):
        header = self.headers.get("Range")
        path = self.translate_path(self.path)
        if not header or os.path.isdir(path):
            return super().send_head()
        match = _RANGE.match(header.strip())
        if not match or not os.path.isfile(path):
            return super().send_head()
        size = os.path.getsize(path)
        first, last = match.groups()
        if first:
            start, end = int(first), min(int(last), size - 1) if last else size - 1
        elif last:  # suffix range: the last N bytes
            start, end = max(size - int(last), 0), size - 1
        else:
            return super().send_head()
        if start >= size or start > end:
            self.send_response(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE)
            self.send_header("Content-Range", f"bytes */{size}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        f = open(path, "rb")  # noqa: SIM115 (the base handler copies then closes it)
        f.seek(start)
        self.send_response(HTTPStatus.PARTIAL_CONTENT)
        self.send_header("Content-Type", self.guess_type(path))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        self._remaining = end - start + 1
        return f

    def end_headers(self) -> None:
        if not self.headers.get("Range"):
            self.send_header("Accept-Ranges", "bytes")
        super().end_headers()

    def copyfile(self, source, outputfile) -> None:
        remaining = getattr(self, "_remaining", None)
        if remaining is None:
            return super().copyfile(source, outputfile)
        self._remaining = None
        while remaining > 0:
            block = source.read(min(remaining, 1 << 20))
            if not block:
                break
            outputfile.write(block)
            remaining -= len(block)


class StaticHTTPServer:
    """Serve ``folder`` over HTTP on 127.0.0.1 (a free port) until the context exits.

    Parameters
    ----------
    folder
        The folder to serve.
    list_directories
        Answer a folder's URL with an HTML index, as ``python -m http.server`` does.
        Off by default: static hosts and object-store websites do not list.

    Examples
    --------
    >>> import tempfile, urllib.request
    >>> with tempfile.TemporaryDirectory() as tmp, StaticHTTPServer(tmp) as server:
    ...     _ = (Path(tmp) / "a.txt").write_bytes(b"hello")
    ...     request = urllib.request.Request(server.url + "/a.txt", headers={"Range": "bytes=1-3"})
    ...     urllib.request.urlopen(request).read()
    b'ell'
    """

    def __init__(self, folder: str | os.PathLike, list_directories: bool = False) -> None:
        self.folder = Path(folder)
        self.list_directories = list_directories
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._server.server_address[1] if self._server else 0

    @property
    def url(self) -> str:
        """Base URL, without a trailing slash."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Self:
        handler = type("Handler", (RangeRequestHandler,), {"list_directories": self.list_directories})
        # port 0: the kernel picks a free port atomically (no race with other servers)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=str(self.folder)))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"http-{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        stop_threaded_server(self._server, self._thread, 5)
        self._server = self._thread = None

    def put(self, local: str | os.PathLike, key: str) -> str:
        """Copy a local file or folder under the served folder; returns its URL."""
        target = self.folder / key
        target.parent.mkdir(parents=True, exist_ok=True)
        if Path(local).is_dir():
            shutil.copytree(local, target, dirs_exist_ok=True)
        else:
            shutil.copyfile(local, target)
        return f"{self.url}/{key}"

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
