"""Storage servers on 127.0.0.1 for the embedded default, the tests and the benchmarks.

Each server is a context manager: it starts on free ports, waits until it answers
(with a timeout, never a fixed sleep) and stops everything it started on exit.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
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
        except Exception as exc:  # noqa: BLE001 - any failure of the check means "not ready yet"
            last = exc
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)
    raise TimeoutError(f"{what} not ready after {timeout:g} s" + (f" (last error: {last})" if last else ""))


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def stop_process_group(process: subprocess.Popen | None, timeout: float) -> None:
    """SIGTERM a server's process group, then SIGKILL it if it has not exited after ``timeout`` s."""
    if process is None or process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(5)
    except ProcessLookupError:
        pass


def remove_workdir(path: Path | None) -> None:
    """Delete a server's temporary folder (data, config, logs)."""
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)


def stop_threaded_server(server, thread: threading.Thread | None, timeout: float = 5) -> None:
    """Shut down a ``socketserver`` serving in ``thread`` and wait for the thread to end."""
    if server is not None:
        server.shutdown()
        server.server_close()
    if thread is not None:
        thread.join(timeout)
