"""How a read is cut into tasks: the seed's one task per chunk, or several chunks per task.

The seed stored every chunk with its own task (``dask.array.store(array, sink,
lock=False, compute=False)``). On arrays of 10^5 chunks and more, the scheduler's cost
per task becomes the measurement (the seed's knee near 150 cores). Grouping
``blocks_per_task`` chunks into one task keeps every chunk's read, decode and store
exactly as ``dask.array.store`` does them (the same fused store tasks, run in order
inside one task) while paying the scheduler once per group.
"""

from __future__ import annotations

import math
import pickle
from typing import Any

import cloudpickle
import dask.array as dsa
from dask._task_spec import DataNode, Task, TaskRef, convert_legacy_graph
from dask.base import tokenize
from dask.core import flatten
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph

from .errors import UsageError

#: let the array and the cluster choose: one task per chunk, grouped only when each thread would get very many
AUTO = "auto"


def check_blocks_per_task(value: Any) -> int | str:
    if value == AUTO:
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"Bad blocks per task {value!r}: must be a positive integer, like 1 or 100, or auto.")
    return value


def resolve_blocks_per_task(value: Any, nchunks: int, nthreads: int, tasks_per_thread: int = 100) -> int:
    """Chunks per task for an array of ``nchunks`` chunks read by ``nthreads`` worker threads.

    ``auto`` is the seed's one task per chunk while the array has at most
    ``tasks_per_thread`` chunks per thread, and beyond that just enough chunks a task
    to give each thread about ``tasks_per_thread`` tasks: plenty to balance the load,
    few enough that the scheduler's cost per task does not become the measurement
    (5.75 ms a chunk at 10^4 one-chunk tasks on 2 workers here; README).
    """
    value = check_blocks_per_task(value)
    if value == AUTO:
        return max(1, math.ceil(nchunks / (tasks_per_thread * max(nthreads, 1))))
    return value


def _store_group(blob: bytes, keys: list) -> int:
    """Run the store tasks of one group, chunk after chunk; returns how many chunks were stored.

    ``blob`` is the group's part of the graph, pickled once when the plan was built
    (so the scheduler passes bytes along instead of unpickling and re-pickling every
    chunk's tasks). Each chunk's own tasks run depth-first; only values several of them
    share (the opened Zarr array, say) are kept, so a group holds one chunk at a time.
    """
    graph = pickle.loads(blob)
    dependents: dict = {}
    for node in graph.values():
        for dep in node.dependencies:
            dependents[dep] = dependents.get(dep, 0) + 1
    shared: dict = {}

    def run(key):
        node = graph[key]
        values = {}
        for dep in node.dependencies:
            if dep in shared:
                values[dep] = shared[dep]
            else:
                values[dep] = run(dep)
                if dependents.get(dep, 0) > 1:
                    shared[dep] = values[dep]
        return node(values)

    for key in keys:
        run(key)
    return len(keys)


def _needed(graph: dict, keys: list) -> dict:
    """The part of ``graph`` that computing ``keys`` needs (a walk from the keys, not a scan)."""
    sub: dict = {}
    todo = list(keys)
    while todo:
        key = todo.pop()
        if key in sub:
            continue
        node = graph[key]
        sub[key] = node
        todo.extend(dep for dep in node.dependencies if dep not in sub)
    return sub


def _count(*counts: int) -> int:
    return sum(counts)


def null_store(array: dsa.Array, sink: Any, blocks_per_task: int = 1) -> tuple[Any, int]:
    """A lazy store of ``array`` into ``sink``, and the number of tasks that will store it.

    ``blocks_per_task=1`` returns exactly the seed's ``dask.array.store(array, sink,
    lock=False, compute=False)``. Larger values return a :class:`~dask.delayed.Delayed`
    whose tasks each run the store tasks of that many consecutive chunks, plus one
    task counting the chunks stored (its result equals ``array.npartitions``).
    """
    blocks_per_task = check_blocks_per_task(blocks_per_task)
    if blocks_per_task == AUTO:
        raise UsageError("null_store needs a number of blocks per task; resolve 'auto' first (resolve_blocks_per_task).")
    stored = dsa.store(array, sink, lock=False, compute=False)
    nchunks = math.prod(array.numblocks)
    if blocks_per_task == 1:
        return stored, nchunks
    # unfused on purpose: a fused task runs its own tiny graph through dask.order (~0.3 ms a chunk)
    graph = convert_legacy_graph(dict(stored.__dask_graph__()))
    keys = list(flatten(stored.__dask_keys__()))
    name = f"null-store-groups-{tokenize(stored, blocks_per_task)}"
    layer: dict = {}
    groups = []
    for i, first in enumerate(range(0, len(keys), blocks_per_task)):
        group = keys[first:first + blocks_per_task]
        sub = _needed(graph, group)
        key = (name, i)
        layer[key] = Task(key, _store_group, DataNode(None, cloudpickle.dumps(sub)), group)
        groups.append(key)
    total = f"{name}-count"
    layer[total] = Task(total, _count, *(TaskRef(k) for k in groups))
    return Delayed(total, HighLevelGraph.from_collections(total, layer, dependencies=())), len(groups)
