"""Harness cost per chunk: what throughput itself costs when storage costs nothing.

The synthetic source makes each chunk on the worker (``dask.array.ones``), with no
storage I/O, so a run's whole runtime is harness: graph submission, scheduling,
running the store tasks and the null sink. Harness cost per chunk is ``runtime /
nchunks``. This script measures it on a distributed LocalCluster for tiny chunks (so
making them is negligible), for the seed's one task per chunk and for several chunks
per task (``blocks_per_task``), side by side, repeated; it prints medians.

Run: ``.venv/bin/python benchmarks/bench_harness.py`` (``--help`` for options).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000, help="chunks in the array (default 10^5)")
    parser.add_argument("--chunk-elements", type=int, default=64, help="float32 elements per chunk (default 64)")
    parser.add_argument("--blocks-per-task", default="100,1000,10000", help="values to compare (default 100,1000,10000)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes, 1 thread each (default 2)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats per setting (default 3)")
    args = parser.parse_args(argv)

    from throughput.clusters import open_cluster
    from throughput.sources import open_source
    from throughput.sweep import run_sweep

    url = f"synthetic://harness?shape={args.chunks},{args.chunk_elements}&chunks=1,{args.chunk_elements}"
    source = open_source(url)
    settings = [int(v) for v in args.blocks_per_task.split(",")]
    print(f"synthetic array: {source.nchunks} chunks of {source.chunksize} bytes ({source.nbytes / 1e6:.1f} MB)")
    with open_cluster("local") as cluster:
        cluster.scale(args.workers)
        cluster.wait_for_workers(args.workers, 120)
        counts = cluster.counts()
        print(f"cluster: LocalCluster {counts['nworkers']} worker process(es) x 1 thread, "
              f"{counts['host_cpus']} host CPUs (shared with other work on this machine)", flush=True)
        results: dict[int, list] = {b: [] for b in settings}
        for r in range(args.repeats):
            for b in settings:
                began = time.perf_counter()
                (record,) = run_sweep(source, cluster, [args.workers], 1, blocks_per_task=b, warmup=r == 0)
                wall = time.perf_counter() - began
                if record.status != "ok" or record.bytes_received != source.nbytes:
                    raise RuntimeError(f"blocks_per_task={b}: {record.status} {record.error} {record.note}")
                results[b].append((record.runtime, wall, record.tasks))
                print(f"repeat {r + 1}: blocks_per_task={b:<6d} tasks {record.tasks:<7d} runtime "
                      f"{record.runtime:7.2f} s  -> {record.runtime / source.nchunks * 1e3:.3f} ms/chunk "
                      f"(wall with graph building {wall:.2f} s)", flush=True)
        print(f"\nharness cost per chunk, median of {args.repeats} ({source.nchunks} chunks, "
              f"{counts['nworkers']} workers x 1 thread):")
        for b in settings:
            runtime = statistics.median(x[0] for x in results[b])
            wall = statistics.median(x[1] for x in results[b])
            print(f"  blocks_per_task={b:<6d} {runtime / source.nchunks * 1e3:7.3f} ms/chunk timed "
                  f"({runtime:.2f} s; {wall / source.nchunks * 1e3:.3f} ms/chunk with graph building outside the timer)")
    return 0


if __name__ == "__main__":
    from throughput.storage import quiet_exit_reports

    quiet_exit_reports()  # s3fs sessions closed at exit on a stopped loop: tracebacks after the results
    sys.exit(main())
