"""How close does throughput measure to the storage's own limit? Side by side, in one run.

On one local S3 store (SeaweedFS on 127.0.0.1) holding a GFDL CM2.6-like Zarr array,
and one LocalCluster, each round measures in turn (the order rotates every round):

(a) the raw ceiling: hand-written GET + decode of every chunk with as many Python
    threads as the cluster has worker threads: (a1) plain HTTP with urllib3 (the
    fastest Python client here; the server allows anonymous reads), (a2) s3fs
    ``cat_file`` (max_concurrency=1), the library throughput reads through by default,
    (a3) obstore ``get``, the Rust client of throughput's ``store=obstore`` (when installed);
(b) the seed notebook's own code: ``xarray.open_zarr(...).temp.data``, its
    ``DevNullStore``, ``dsa.store(data, null_store, lock=False, compute=False)`` and
    ``dask.compute(future, retries=5)`` on the cluster (the seed's storage defaults);
(c) throughput's sweep (``run_sweep`` at the same worker count, one repeat a round):
    (c1) with the default Zarr store (fsspec, s3fs), (c2) with ``store=obstore``.

A first round warms every method up and is not counted. It prints the medians, the
ratio of each c to each a and b (medians of the per-round ratios), what throughput's
workers measured (requests, bytes on the wire, latency, per-task and per-thread
MB/s), and the sweep overhead: the wall time of a whole sweep (scaling, waiting,
warm-up and bookkeeping included) over the sum of its timed runs.

All methods share one LocalCluster; throughput tunes its workers' allocator
(:mod:`throughput.allocator`) when its sweep first runs, so b runs on tuned workers too
(after the uncounted first round).

Run: ``make bench`` or ``.venv/bin/python benchmarks/bench_ceiling.py --help``.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import dask
import dask.array as dsa
import numpy as np

BUCKET = "bench-ceiling"


class DevNullStore:
    """The seed notebook's sink, verbatim."""

    def __init__(self):
        pass

    def __setitem__(*args, **kwargs):
        pass


def rate(nbytes: int, seconds: float) -> float:
    return nbytes / 1e6 / seconds


def iqr_over_median(values: list[float]) -> float:
    q1, med, q3 = np.percentile(values, (25, 50, 75))
    return float((q3 - q1) / med) if med else float("nan")


def chunk_keys(zarray) -> list[str]:
    sep = getattr(zarray.metadata, "dimension_separator", ".") or "."
    return [sep.join(map(str, idx)) for idx in itertools.product(*(range(n) for n in zarray.cdata_shape))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="48,20,270,360",
                        help="array shape (time, level, y, x); chunks are (1, 5, y, x) (default: 192 chunks, 373 MB)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--threads-per-worker", type=int, default=1, help="threads per worker (default 1)")
    parser.add_argument("--threads", action="store_true", help="workers as threads of one process (processes=False)")
    parser.add_argument("--rounds", type=int, default=7, help="counted rounds (default 7)")
    parser.add_argument("--blocks-per-task", type=int, default=1, help="throughput's blocks per task (default 1)")
    parser.add_argument("--dask-chunks", default=None,
                        help="throughput's dask chunks, e.g. 4,20,270,360: each task then reads several stored "
                             "chunks concurrently through Zarr's async store (default: the stored chunks)")
    parser.add_argument("--smoke", action="store_true", help="tiny array, 2 rounds: checks the script runs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.shape, args.rounds = "4,10,27,36", 2

    import s3fs
    import urllib3
    import xarray as xr
    import zarr

    from throughput.clusters import open_cluster
    from throughput.datasets import gfdl_like, write_zarr
    from throughput.servers.s3 import SeaweedS3
    from throughput.sources import open_source
    from throughput.sweep import run_sweep

    shape = tuple(int(v) for v in args.shape.split(","))
    with SeaweedS3() as s3:
        s3.make_bucket(BUCKET)
        url = f"s3://{BUCKET}/gfdl_cm26_like/ocean.zarr"
        print(f"writing a GFDL-like temp array {shape} to {s3.endpoint_url} ...", flush=True)
        write_zarr(gfdl_like(shape), url, s3.storage_options, zarr_format=2)
        dask_chunks = tuple(int(v) for v in args.dask_chunks.split(",")) if args.dask_chunks else None
        source = open_source(url, "temp", storage_options=s3.storage_options, name="bench-zarr", chunks=dask_chunks)
        nbytes = source.nbytes
        raw_array = zarr.open_array(store=f"{url}/temp", mode="r",
                                    storage_options={**s3.storage_options, "max_concurrency": 1})
        compressor, dtype = raw_array.metadata.compressor, raw_array.dtype
        keys = chunk_keys(raw_array)
        print(f"{len(keys)} chunks of {raw_array.nbytes / len(keys) / 1e6:.3f} MB ({compressor}), "
              f"{nbytes / 1e6:.1f} MB decoded; throughput's tasks read {source.nchunks} dask chunks of "
              f"{source.chunksize / 1e6:.3f} MB, blocks per task {args.blocks_per_task}")

        with open_cluster("local", threads_per_worker=args.threads_per_worker,
                          processes=not args.threads) as cluster:
            cluster.start()
            cluster.scale(args.workers)
            cluster.wait_for_workers(args.workers, 120)
            counts = cluster.counts()
            nthreads = counts["nthreads"]
            shape_text = (f"LocalCluster {counts['nworkers']} worker(s) x {args.threads_per_worker} thread(s), "
                          f"{'threads' if args.threads else 'processes'}; {counts['host_cpus']} host CPUs, "
                          f"shared with the SeaweedFS server")
            print(f"cluster: {shape_text}", flush=True)

            pool = urllib3.PoolManager(maxsize=max(nthreads, 1))
            base = f"{s3.endpoint_url}/{BUCKET}/gfdl_cm26_like/ocean.zarr/temp/"
            fs = s3fs.S3FileSystem(**s3.storage_options, max_concurrency=1, skip_instance_cache=True)
            prefix = f"{BUCKET}/gfdl_cm26_like/ocean.zarr/temp/"

            def decode(raw: bytes) -> int:
                return np.frombuffer(compressor.decode(raw), dtype=dtype).nbytes

            def get_urllib3(key: str) -> int:
                response = pool.request("GET", base + key)
                if response.status != 200:
                    raise RuntimeError(f"GET {key}: HTTP {response.status}")
                return decode(response.data)

            def get_s3fs(key: str) -> int:
                return decode(fs.cat_file(prefix + key))

            try:  # the Rust client zarr's ObjectStore uses (throughput's store=obstore), when installed
                import obstore
                from obstore.store import S3Store

                rust = S3Store(BUCKET, endpoint=s3.endpoint_url, region="us-east-1", skip_signature=True,
                               client_options={"allow_http": True})
            except ImportError:
                rust = None

            def get_obstore(key: str) -> int:
                return decode(obstore.get(rust, prefix.split("/", 1)[1] + key).bytes())

            def hand_written(get) -> float:
                with ThreadPoolExecutor(nthreads) as threads:
                    start = time.perf_counter()
                    total = sum(threads.map(get, keys))
                    seconds = time.perf_counter() - start
                assert total == nbytes, (total, nbytes)
                return rate(nbytes, seconds)

            seed_data = xr.open_zarr(url, storage_options=s3.storage_options, decode_times=False).temp.data

            def seed() -> float:
                null_store = DevNullStore()
                tic = time.time()  # the seed's DiagnosticTimer
                future = dsa.store(seed_data, null_store, lock=False, compute=False)
                dask.compute(future, retries=5)
                return rate(nbytes, time.time() - tic)

            records: dict[str, list] = {}

            def ours(variant: str, src) -> Callable[[], float]:
                def run() -> float:
                    (record,) = run_sweep(src, cluster, [args.workers], 1, warmup=False,
                                          blocks_per_task=args.blocks_per_task)
                    if record.status != "ok":
                        raise RuntimeError(record.error)
                    records.setdefault(variant, []).append(record)
                    return record.throughput_MBps
                return run

            methods = {"a1 urllib3 GET+decode": lambda: hand_written(get_urllib3),
                       "a2 s3fs GET+decode": lambda: hand_written(get_s3fs),
                       "b seed's code": seed, "c1 throughput (s3fs)": ours("c1 throughput (s3fs)", source)}
            if rust is not None:
                methods["a3 obstore GET+decode"] = lambda: hand_written(get_obstore)
                fast = open_source(url, "temp", storage_options=s3.storage_options, name="bench-zarr",
                                   chunks=dask_chunks, store="obstore")
                methods["c2 throughput (obstore)"] = ours("c2 throughput (obstore)", fast)
            names = sorted(methods)
            results: dict[str, list[float]] = {n: [] for n in names}
            for name in names:  # warm-up round, not counted
                methods[name]()
            records.clear()
            for r in range(args.rounds):
                order = names[r % len(names):] + names[:r % len(names)]
                for name in order:
                    results[name].append(methods[name]())
                print(f"round {r + 1}: " + ", ".join(f"{n.split()[0]} {results[n][-1]:.0f}" for n in names), flush=True)

            print(f"\nMB/s over {args.rounds} rounds ({shape_text}; array {nbytes / 1e6:.1f} MB, {len(keys)} chunks):")
            for name in names:
                values = results[name]
                print(f"  {name:24s} median {statistics.median(values):7.1f}   IQR/median {iqr_over_median(values):6.1%}")
            for ours_name in (n for n in names if n[0] == "c"):
                for other in (n for n in names if n[0] in "ab"):
                    label = f"{ours_name.split()[0]}/{other.split()[0]}"
                    ratios = [x / y for x, y in zip(results[ours_name], results[other])]
                    print(f"  {label:5s} median of per-round ratios {statistics.median(ratios):.3f}"
                          f"  (min {min(ratios):.3f}, max {max(ratios):.3f})")

            print("\nthroughput's own evidence (medians over its counted runs):")
            for variant, runs in records.items():
                def med(field: str, runs=runs) -> float:
                    return statistics.median(getattr(rec, field) for rec in runs)

                print(f"  {variant}: store reads {med('requests'):.0f} per run for {len(keys)} chunks; "
                      f"{med('wire_bytes') / 1e6:.1f} MB on the wire for {nbytes / 1e6:.1f} MB decoded; "
                      f"read latency p50 {med('request_ms_p50'):.1f} ms, p90 {med('request_ms_p90'):.1f} ms, "
                      f"p99 {med('request_ms_p99'):.1f} ms")
                print(f"    tasks {med('tasks'):.0f}; per-task MB/s p10 {med('task_MBps_p10'):.1f}, median "
                      f"{med('task_MBps_median'):.1f}, p90 {med('task_MBps_p90'):.1f}; busy fraction "
                      f"{med('busy_fraction'):.2f}; per-thread MB/s measured min {med('thread_MBps_min'):.1f} / "
                      f"median {med('thread_MBps_median'):.1f} / max {med('thread_MBps_max'):.1f}, nominal "
                      f"(throughput_MBps / nthreads) {med('throughput_MBps_per_thread'):.1f}")

            # sweep overhead: a whole sweep, scaling and warm-up included, against its timed runs
            counts_seq = [args.workers, 1] if args.workers > 1 else [1]  # descending, as the seed went
            cluster.scale(0)
            cluster.wait_for_workers(0, 60)
            start = time.perf_counter()
            sweep_records = run_sweep(source, cluster, counts_seq, 3, blocks_per_task=args.blocks_per_task)
            wall = time.perf_counter() - start
            timed = sum(rec.runtime for rec in sweep_records if rec.status == "ok")
            spreads = [f"{rec.nworkers}w {rec.point_spread:.1%}" for rec in sweep_records if rec.repeat == 2]
            print(f"\nsweep overhead: workers {counts_seq} x 3 repeats from 0 workers: wall {wall:.2f} s, "
                  f"timed runs {timed:.2f} s, ratio {wall / timed:.3f} (scaling "
                  f"{sum({rec.requested_workers: rec.scale_seconds for rec in sweep_records}.values()):.2f} s, warm-up "
                  f"{sum({rec.requested_workers: rec.warmup_seconds for rec in sweep_records}.values()):.2f} s); "
                  f"point spread (IQR/median) {', '.join(spreads)}")
    return 0


if __name__ == "__main__":
    from throughput.storage import quiet_exit_reports

    quiet_exit_reports()  # s3fs sessions closed at exit on a stopped loop: tracebacks after the results
    sys.exit(main())
