"""Package defaults (config.yaml beside this file) merged into ``dask.config``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dask.config
import yaml

_DEFAULTS = yaml.safe_load((Path(__file__).with_name("config.yaml")).read_text())
dask.config.update_defaults(_DEFAULTS)


def get(key: str, default: Any = None) -> Any:
    """A setting under ``throughput.``, e.g. ``get("cluster.wait-timeout")``."""
    return dask.config.get(f"throughput.{key}", default=default)
