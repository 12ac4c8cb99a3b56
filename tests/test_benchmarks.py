"""The benchmarks run end to end on tiny inputs and print the figures the README quotes (not their values)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def bench(script: str, *args: str, timeout: float = 240) -> str:
    done = subprocess.run([sys.executable, str(BENCHMARKS / script), *args], capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]  # not even the storage clients' at exit
    return done.stdout


def test_ceiling_smoke_prints_every_method_ratio_and_the_evidence():
    out = bench("bench_ceiling.py", "--smoke")
    for method in ("a1 urllib3", "a2 s3fs", "a3 obstore", "b seed's code", r"c1 throughput \(s3fs\)",
                   r"c2 throughput \(obstore\)"):
        assert re.search(rf"^  {method}.*median +\d+\.\d", out, re.MULTILINE), (method, out)
    for ratio in ("c1/a1", "c1/a2", "c1/b", "c2/a1", "c2/a3", "c2/b"):
        assert re.search(rf"^  {ratio} +median of per-round ratios \d+\.\d{{3}}", out, re.MULTILINE), (ratio, out)
    # the smoke array is 4 x 10 x 27 x 36 in chunks of 1 x 5 x 27 x 36: 8 chunks, each read once per run
    assert out.count("store reads 8 per run for 8 chunks") == 2, out  # c1 and c2
    overhead = re.search(r"sweep overhead: .* ratio (\d+\.\d+)", out)
    assert overhead and float(overhead[1]) >= 1.0, out


def test_profile_charges_worker_samples_to_libraries(tmp_path):
    if shutil.which("py-spy") is None and not Path(sys.executable).with_name("py-spy").exists():
        pytest.skip("py-spy is not installed (pip install py-spy)")
    out = bench("bench_profile.py", "--shape", "8,10,27,36", "--seconds", "3", "--out", str(tmp_path))
    busy = re.search(r"(\d+) samples of 2 worker processes \(all threads\), (\d+) busy", out)
    assert busy and 0 < int(busy[2]) <= int(busy[1]), out
    shares = {m[2]: float(m[1]) for m in re.finditer(r"^ +(\d+\.\d)% of busy  (.+)$", out, re.MULTILINE)}
    assert any(label.startswith("storage client") for label in shares), out
    assert sum(shares.values()) == pytest.approx(100, abs=0.5)
    assert len(list(tmp_path.glob("worker-*.txt"))) == 2


def test_harness_smoke_prints_cost_per_chunk_for_each_grouping():
    out = bench("bench_harness.py", "--chunks", "400", "--blocks-per-task", "1,100", "--repeats", "1")
    costs = dict(re.findall(r"^  blocks_per_task=(\d+) +(\d+\.\d+) ms/chunk timed", out, re.MULTILINE))
    assert set(costs) == {"1", "100"} and all(float(v) > 0 for v in costs.values()), out
    assert "tasks 400" in out and "tasks 4 " in out, out  # 400 one-chunk tasks, then 4 of 100
