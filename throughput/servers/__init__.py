"""Storage servers on 127.0.0.1 for the embedded default, the tests and the benchmarks.

Each server is a context manager: it starts on free ports, waits until it answers
(with a timeout, never a fixed sleep) and stops everything it started on exit.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(check: Callable[[], T], timeout: float, what: str) -> T:
    """Call ``check`` until it returns a true value or raises nothing, up to ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    delay = 0.02
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as exc:  # not ready yet
            last = exc
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)
    raise TimeoutError(f"{what} not ready after {timeout:g} s" + (f" (last error: {last})" if last else ""))


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0
