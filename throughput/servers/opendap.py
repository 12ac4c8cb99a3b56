"""An OPeNDAP (DAP2) server on 127.0.0.1: pydap's own WSGI handler over NetCDF4/HDF5 files.

Why not pydap's ``NetCDFHandler`` (pydap 3.5.9)? Its ``LazyVariable.__getitem__``
reshapes every slice it reads to the variable's *full* shape
(``.reshape(self._reshape)``). A subset request (``temp.dods?temp[0:1:0][0:1:4]...``)
therefore raises ``ValueError`` inside the streamed body, after the ``200 OK`` status
and a ``Content-Length`` for the subset were sent: the client gets a truncated body
and ``IncompleteRead`` (pydap issues 130, 184, 217). Without the optional ``netCDF4``
package the handler falls back to ``scipy.io.netcdf_file``, which cannot open
NetCDF4/HDF5 files at all. pydap's server also has no DAP4 data (``.dap``) response.

Here each variable of the file is a :class:`H5NetCDFArray` that reads exactly the
slice asked for with h5netcdf (h5py), and pydap's ``BaseHandler`` (the generic
handler every pydap handler builds on) turns it into DDS, DAS and DODS responses. The
dataset also carries the file's chunk shape as ``_ChunkSizes`` (as THREDDS does), so
clients can align their requests with it. DAP4 data requests (``.dap?dap4.ce=...``)
are answered by :func:`dap4_data_response`, so both protocols can be measured.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Self

import numpy as np

from ..errors import SourceNotFoundError, missing_dependency
from . import free_port, port_open, stop_threaded_server, wait_until


class H5NetCDFArray:
    """One variable of a NetCDF4/HDF5 file; indexing reads that slice from the file.

    The file is opened per read, so the server holds no HDF5 handle between requests
    and concurrent requests never share one.
    """

    def __init__(self, path: Path, name: str, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.path = Path(path)
        self.name = name
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.ndim = len(self.shape)
        self.size = int(np.prod(self.shape)) if self.shape else 1

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __getitem__(self, key: Any) -> np.ndarray:
        import h5netcdf

        with h5netcdf.File(self.path, "r") as f:
            return np.asarray(f.variables[self.name][key], dtype=self.dtype)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        data = self[...]
        return data if dtype is None else data.astype(dtype)

    def __repr__(self) -> str:
        return f"<H5NetCDFArray {self.path.name}:{self.name} {self.shape} {self.dtype}>"


def _attribute(value: Any) -> Any:
    """HDF5 attribute values as types pydap's DAS writer knows (str, numbers, lists)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray):
        return value.tolist() if value.size != 1 else value.reshape(()).item()
    if isinstance(value, np.generic):
        return value.item()
    return value


def netcdf_dataset(path: Path):
    """A pydap ``DatasetType`` for a NetCDF4/HDF5 file, every variable lazily read by h5netcdf."""
    try:
        import h5netcdf
        from pydap.model import BaseType, DatasetType
    except ImportError as exc:
        raise missing_dependency(exc.name or "pydap", "the OPeNDAP test server", "servers") from None

    path = Path(path)
    with h5netcdf.File(path, "r") as f:
        dims = {name: int(dim.size) for name, dim in f.dimensions.items()}
        dataset = DatasetType(path.name, dimensions=dims,
                              attributes={k: _attribute(v) for k, v in f.attrs.items()})
        for name, var in f.variables.items():
            attrs = {k: _attribute(v) for k, v in var.attrs.items() if k != "_FillValue"}
            if var.attrs.get("_FillValue") is not None:
                attrs["_FillValue"] = _attribute(var.attrs["_FillValue"])
            if var.chunks:
                attrs["_ChunkSizes"] = [int(c) for c in var.chunks]
            data = H5NetCDFArray(path, name, var.shape, var.dtype)
            dataset[name] = BaseType(name, data, dims=[f"/{d}" for d in var.dimensions], attributes=attrs)
    return dataset


#: numpy dtype kind+size -> DAP4 atomic type
DAP4_TYPES = {"f4": "Float32", "f8": "Float64", "i1": "Int8", "u1": "UInt8", "i2": "Int16", "u2": "UInt16",
              "i4": "Int32", "u4": "UInt32", "i8": "Int64", "u8": "UInt64"}
_HYPERSLAB = re.compile(r"\[(\d+)(?::(\d+))?(?::(\d+))?\]")
_CHUNK = 1 << 23  # DAP4 chunk lengths have 24 bits; 8 MiB chunks stay well inside


def parse_dap4_ce(ce: str) -> list[tuple[str, tuple[slice, ...]]]:
    """``"/temp[0:1:0][0:1:4];/time"`` -> ``[("temp", (slice(0, 1), slice(0, 5))), ("time", ())]``.

    A hyperslab is ``[start:stride:stop]`` with an inclusive stop (``[i]`` and
    ``[start:stop]`` too), as pydap and the DAP4 specification write them.
    """
    projections = []
    for part in filter(None, (p.strip() for p in ce.split(";"))):
        name = part.split("[", 1)[0].strip().lstrip("/")
        slices = []
        for start, second, third in _HYPERSLAB.findall(part[len(part.split("[", 1)[0]):]):
            if third:  # start:stride:stop
                slices.append(slice(int(start), int(third) + 1, int(second)))
            elif second:  # start:stop
                slices.append(slice(int(start), int(second) + 1))
            else:  # one index, keeping its axis
                slices.append(slice(int(start), int(start) + 1))
        projections.append((name, tuple(slices)))
    return projections


def dap4_data_response(dataset, ce: str, checksums: bool) -> bytes:
    """A DAP4 data response (``.dap``): the DMR of the subset, then its values in chunks.

    Each chunk starts with a big-endian 32-bit header: flags in the top byte (0x04
    little-endian data, 0x01 last chunk) and the length in the low 24 bits. Each
    variable's little-endian values are followed by their CRC32 when checksums are
    asked for.
    """
    import zlib
    from xml.sax.saxutils import quoteattr

    from pydap.model import BaseType

    projections = parse_dap4_ce(ce) or [(v.name, ()) for v in dataset.children() if isinstance(v, BaseType)]
    declarations, payload = [], bytearray()
    for name, slices in projections:
        var = dataset[name]  # KeyError for an unknown variable: a 400 answer
        index = tuple(slice(s.start, min(s.stop, n), s.step) for s, n in zip(slices, var.shape))
        data = np.asarray(var.data[index + (slice(None),) * (len(var.shape) - len(index))])
        data = np.ascontiguousarray(data, dtype=data.dtype.newbyteorder("<"))
        dap_type = DAP4_TYPES[f"{data.dtype.kind}{data.dtype.itemsize}"]
        dims = "".join(f'<Dim size="{n}"/>' for n in data.shape)
        declarations.append(f"<{dap_type} name={quoteattr(name)}>{dims}</{dap_type}>")
        payload += data.tobytes()
        if checksums:
            payload += np.array([zlib.crc32(data.tobytes())], dtype="<u4").tobytes()
    dmr = ('<?xml version="1.0" encoding="UTF-8"?>\n<Dataset xmlns="http://xml.opendap.org/ns/DAP/4.0#" '
           f'dapVersion="4.0" dmrVersion="1.0" name={quoteattr(dataset.name)}>'
           + "".join(declarations) + "</Dataset>\r\n").encode()

    def chunk(body: bytes, last: bool) -> bytes:
        return np.array([(0x04 | (0x01 if last else 0)) << 24 | len(body)], dtype=">u4").tobytes() + body

    pieces = [bytes(payload[i:i + _CHUNK]) for i in range(0, len(payload), _CHUNK)] or [b""]
    return chunk(dmr, False) + b"".join(chunk(p, i == len(pieces) - 1) for i, p in enumerate(pieces))


class OpendapApp:
    """WSGI app: ``/<file name>.<dds|das|dods|...>`` served by pydap's ``BaseHandler``.

    Counts the data (``.dods``) requests it answers, so tests can check that one dask
    task is one request.
    """

    def __init__(self, files: Iterable[Path]) -> None:
        from pydap.handlers.lib import BaseHandler

        self.handlers = {Path(p).name: BaseHandler(netcdf_dataset(Path(p))) for p in files}
        self.data_requests = 0
        self._lock = threading.Lock()

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "").lstrip("/")
        name, _, response = path.rpartition(".")
        handler = self.handlers.get(name)
        if handler is None:
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [f"No dataset '{name}' here. Datasets: {sorted(self.handlers)}\n".encode()]
        if response in ("dods", "dap"):
            with self._lock:
                self.data_requests += 1
        if response == "dap":  # DAP4 data: pydap's server has no response for it
            return self._dap4(handler.dataset, environ, start_response)
        return handler(environ, start_response)

    @staticmethod
    def _dap4(dataset, environ, start_response):
        from urllib.parse import parse_qs

        query = parse_qs(environ.get("QUERY_STRING", ""))
        ce = query.get("dap4.ce", [""])[0]
        try:
            body = dap4_data_response(dataset, ce, query.get("dap4.checksum", ["false"])[0] == "true")
        except (KeyError, ValueError, IndexError) as exc:
            start_response("400 Bad Request", [("Content-Type", "text/plain")])
            return [f"Bad DAP4 constraint '{ce}': {exc!r}\n".encode()]
        start_response("200 OK", [("Content-Type", "application/vnd.opendap.dap4.data"),
                                  ("Content-Length", str(len(body)))])
        return [body]


class OpendapServer:
    """pydap serving NetCDF4/HDF5 files on ``http://127.0.0.1:<free port>/<file name>``.

    A context manager: starts on enter (waits until the port answers), stops on exit.

    Examples
    --------
    >>> with OpendapServer(["ocean.nc"]) as server:  # doctest: +SKIP
    ...     server.url("ocean.nc")
    'http://127.0.0.1:43121/ocean.nc'
    """

    kind = "pydap"

    def __init__(self, files: Iterable[str | Path], start_timeout: float = 30) -> None:
        self.files = [Path(f) for f in files]
        for f in self.files:
            if not f.is_file():
                raise SourceNotFoundError(f"No NetCDF file at '{f}' to serve over OPeNDAP.")
        self.start_timeout = start_timeout
        self.port = 0
        self.app: OpendapApp | None = None
        self._server = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, name: str | None = None) -> str:
        """The OPeNDAP URL of a served file (the first one by default)."""
        return f"{self.endpoint_url}/{name or self.files[0].name}"

    @property
    def data_requests(self) -> int:
        """How many data (``.dods``) requests the server answered so far."""
        return self.app.data_requests if self.app else 0

    def start(self) -> Self:
        try:
            from werkzeug.serving import WSGIRequestHandler, make_server
        except ImportError:
            raise missing_dependency("werkzeug", "the OPeNDAP test server", "servers") from None

        class QuietHandler(WSGIRequestHandler):
            def log_request(self, *args, **kwargs) -> None:  # one line per chunk is noise
                pass

        self.app = OpendapApp(self.files)
        self.port = free_port()
        self._server = make_server("127.0.0.1", self.port, self.app, threaded=True, request_handler=QuietHandler)
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"opendap-{self.port}", daemon=True)
        self._thread.start()
        wait_until(lambda: port_open(self.port), self.start_timeout, f"OPeNDAP server on port {self.port}")
        return self

    def stop(self) -> None:
        stop_threaded_server(self._server, self._thread, 10)
        self._server = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def write_netcdf(ds, path: str | Path) -> Path:
    """Write a dataset as a NetCDF4 (HDF5) file with h5netcdf, keeping each variable's chunk shape."""
    try:
        import h5netcdf  # noqa: F401
    except ImportError:
        raise missing_dependency("h5netcdf", "writing NetCDF files", "netcdf") from None
    encoding = {name: {"chunksizes": var.encoding["chunks"]} for name, var in ds.data_vars.items()
                if "chunks" in var.encoding}
    ds.to_netcdf(path, engine="h5netcdf", encoding=encoding)
    return Path(path)


