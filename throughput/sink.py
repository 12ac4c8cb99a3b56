"""The null sink: where the read data goes to be forgotten.

``dask.array.store(array, NullStore(), lock=False)`` forces every chunk to be read and
decoded and keeps nothing. Each worker process counts what its sink received, so a
run can check it read exactly the array's bytes.
"""

from __future__ import annotations

import threading

_lock = threading.Lock()
_received = {"bytes": 0, "chunks": 0}


class NullStore:
    """A store that discards every chunk written to it (like piping to /dev/null)."""

    def __setitem__(self, key, value) -> None:
        nbytes = int(getattr(value, "nbytes", 0))
        with _lock:
            _received["bytes"] += nbytes
            _received["chunks"] += 1

    def __repr__(self) -> str:
        return "NullStore()"


def received() -> dict[str, int]:
    """Bytes and chunks the sinks of this process have received since the last reset."""
    with _lock:
        return dict(_received)


def reset_received() -> dict[str, int]:
    """Reset this process's counters; returns what they held."""
    with _lock:
        before = dict(_received)
        _received.update(bytes=0, chunks=0)
    return before
