"""Where does a worker's time go during a sweep? py-spy samples of every worker process, by library.

On one local S3 store (SeaweedFS on 127.0.0.1) holding a GFDL CM2.6-like Zarr array and
a LocalCluster, the script warms the workers up, then runs throughput's sweep again and
again while ``py-spy record`` samples each worker process (all threads) for
``--seconds``. Each busy sample is charged to the innermost frame that belongs to a
library (a frame of the standard library, say ``ssl`` or ``asyncio``, is charged to
the library that called it), and the shares are printed; samples whose innermost
frame is a wait (``select``, a lock, an idle pool thread) are counted apart, as idle.

The raw stacks are kept (``--out``, one ``stack count`` line each, the collapsed
format that flamegraph.pl and speedscope read) to draw a flame graph.

Needs py-spy (``pip install py-spy``) and the right to trace the workers (the same user;
on Linux, ptrace allowed). Run: ``.venv/bin/python benchmarks/bench_profile.py --help``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

BUCKET = "bench-profile"

#: innermost frame that waits: the thread is idle, not working
IDLE = re.compile(r"^(EpollSelector\.select|select|poll|Condition\.wait|Event\.wait|Thread\.join|_worker|"
                  r"SimpleQueue\.get|Queue\.get|sleep|acquire)\b")
#: library of a frame, from its file path (first match wins); stdlib frames match none
LIBRARIES = [
    ("storage client (s3fs, aiobotocore, aiohttp, obstore, ...)",
     re.compile(r"(aiobotocore|botocore|aiohttp|s3fs|fsspec|gcsfs|urllib3|obstore|yarl|multidict|aioitertools)[/.]")),
    ("decode (numcodecs)", re.compile(r"numcodecs[/.]")),
    ("zarr (store API, codec pipeline, sync)", re.compile(r"zarr[/.]")),
    ("throughput (sink, counting store)", re.compile(r"throughput[/.]")),
    ("dask (task execution)", re.compile(r"(?<!distributed/)dask[/.]")),
    ("distributed (worker loop, comms)", re.compile(r"(distributed|tornado|msgpack)[/.]")),
    ("numpy", re.compile(r"numpy[/.]")),
]
FRAME = re.compile(r"^(?P<name>.*) \((?P<file>[^()]*):\d+\)$")


def charge(stack: str) -> str:
    """The category of one sample: idle, a library, or the standard library alone."""
    frames = stack.split(";")
    if IDLE.match(frames[-1]):
        return "idle (waiting on a socket, a lock or a queue)"
    if frames[-1].startswith("_WorkItem.run "):  # a C call with the GIL released, run by a pool thread
        return "C code run in a pool thread (Zarr's decode: Blosc)"
    for frame in reversed(frames):
        match = FRAME.match(frame)
        path = match["file"] if match else frame
        for label, pattern in LIBRARIES:
            if pattern.search(path):
                return label
    return "Python standard library only (asyncio, threading, ...)"


def breakdown(files: list[Path]) -> tuple[Counter, int]:
    shares: Counter = Counter()
    for path in files:
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if stack and count.isdigit():
                shares[charge(stack)] += int(count)
    return shares, sum(shares.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="48,20,270,360", help="array shape (default: 192 chunks of 1.94 MB)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2), 1 thread each")
    parser.add_argument("--seconds", type=int, default=15, help="sampling time, whole seconds (default 15)")
    parser.add_argument("--rate", type=int, default=200, help="samples per second (default 200)")
    parser.add_argument("--blocks-per-task", type=int, default=1, help="throughput's blocks per task (default 1)")
    parser.add_argument("--option", "-O", action="append", default=[], metavar="KEY=VALUE",
                        help="source option, e.g. store=obstore (repeatable)")
    parser.add_argument("--out", default="profile-stacks", help="folder for the raw stacks (default profile-stacks)")
    args = parser.parse_args(argv)
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        print("bench_profile: py-spy not found; install it with: pip install py-spy", file=sys.stderr)
        return 2

    from throughput.clusters import open_cluster
    from throughput.datasets import gfdl_like, write_zarr
    from throughput.servers.s3 import SeaweedS3
    from throughput.sources import open_source
    from throughput.sweep import run_sweep

    options = dict(item.split("=", 1) for item in args.option)
    shape = tuple(int(v) for v in args.shape.split(","))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with SeaweedS3() as s3:
        s3.make_bucket(BUCKET)
        url = f"s3://{BUCKET}/gfdl_cm26_like/ocean.zarr"
        write_zarr(gfdl_like(shape), url, s3.storage_options, zarr_format=2)
        source = open_source(url, "temp", storage_options=s3.storage_options, name="bench-zarr", **options)
        with open_cluster("local", threads_per_worker=1) as cluster:
            run_sweep(source, cluster, [args.workers], 1, blocks_per_task=args.blocks_per_task)  # warm
            pids = cluster.client.run(os.getpid)
            files = [out / f"worker-{pid}.txt" for pid in pids.values()]
            spies = [subprocess.Popen([spy, "record", "-p", str(pid), "-d", str(args.seconds), "-r", str(args.rate),
                                       "-f", "raw", "-o", str(path), "--nonblocking"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                     for pid, path in zip(pids.values(), files)]
            runs, timed, began = [], 0.0, time.perf_counter()
            while any(p.poll() is None for p in spies):  # sweep for as long as py-spy samples
                (record,) = run_sweep(source, cluster, [args.workers], 1, warmup=False,
                                      blocks_per_task=args.blocks_per_task)
                runs.append(record.throughput_MBps)
                timed += record.runtime
            wall = time.perf_counter() - began
            failed = [p.stderr.read().strip() for p in spies if p.wait() != 0]
            if failed:
                print(f"bench_profile: py-spy failed: {(failed[0] or '?').splitlines()[0]}",
                      file=sys.stderr)
                return 1
    shares, total = breakdown(files)
    busy = total - shares["idle (waiting on a socket, a lock or a queue)"]
    print(f"{len(runs)} runs of {source.nbytes / 1e6:.1f} MB ({source.nchunks} chunks, blocks per task "
          f"{args.blocks_per_task}, options {options or 'default'}) on {args.workers} worker process(es) x 1 "
          f"thread in {wall:.1f} s, {timed:.1f} s of it timed; median {sorted(runs)[len(runs) // 2]:.0f} MB/s")
    print(f"{total} samples of {len(files)} worker processes (all threads), {busy} busy:")
    for label, count in shares.most_common():
        if not label.startswith("idle"):
            print(f"  {count / busy:6.1%} of busy  {label}")
    print(f"idle samples: {shares['idle (waiting on a socket, a lock or a queue)']} "
          f"({shares['idle (waiting on a socket, a lock or a queue)'] / total:.1%} of all)")
    print(f"raw stacks: {', '.join(str(f) for f in files)}")
    return 0


if __name__ == "__main__":
    from throughput.storage import quiet_exit_reports

    quiet_exit_reports()  # s3fs sessions closed at exit on a stopped loop: tracebacks after the results
    sys.exit(main())
