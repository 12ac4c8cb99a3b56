"""throughput: how fast can dataset X be read from storage Y with N Dask workers?

>>> import throughput
>>> src = throughput.open_source("synthetic://temp?shape=4,10,20,30&chunks=1,5,20,30")
>>> src.nchunks
8
"""

from . import config  # noqa: F401  (merges package defaults into dask.config)
from .archive import ResultsFile, results_path
from .clusters import Cluster, open_cluster
from .errors import ThroughputError, UsageError
from .records import COLUMNS, Record
from .sink import NullStore
from .sources import Source, open_source, register_source_kind
from .sweep import run_sweep, sweep

__all__ = [
    "COLUMNS", "Cluster", "NullStore", "Record", "ResultsFile", "Source", "ThroughputError", "UsageError",
    "open_cluster", "open_source", "register_source_kind", "results_path", "run_sweep", "sweep",
]
