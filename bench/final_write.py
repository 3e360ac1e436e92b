"""The final write's price that a dry run adds to its estimate, measured: the constants
``WRITE_SECONDS`` and ``WRITE_BYTES_PER_SECOND`` of richlazy_cli/engine/startup.py beside what
this machine measures now.

    python bench/final_write.py                 # 7 runs of each size, 1 and 500 points
    python bench/final_write.py --runs 9 --points 1000

A single-neuron sweep over ``delta`` (the default method, both solutions; 38.6 kB a point) is
computed in a fresh interpreter, then assembled and written atomically as a run's last step
writes its result (``time_final_write``: the CF layer and its labels, h5netcdf and h5py in the
forked writer, zlib, the checksums read back, fsync), and only the write is timed; a fresh
interpreter each time, because a run pays the imports of what writes once. The fixed cost is
the fastest one-point write less its bytes' share; the throughput the slope between the
fastest one-point and many-point writes, in uncompressed bytes (what the dry run knows: the
result's declared size). The fastest of the runs, because other processes' load only
stretches a write (the medians' figures are printed beside them). Prints the load average
before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import json, resource, sys
import numpy as np
from richlazy_cli.engine.chunk import ChunkTask, compute_chunk
from richlazy_cli.engine.footprint import declared_size
from richlazy_cli.engine.job import Request, prepare_sweep
from richlazy_cli.engine.startup import time_final_write

points, folder = int(sys.argv[1]), sys.argv[2]
grid = [f"delta=linspace(-1,1,{points})" if points > 1 else "delta=1"]
request = Request("solve", "single-neuron", (), grid, None, {"output": folder + "/x.h5"})
job, _, _ = prepare_sweep(request, None, dry_run=True)
indices = np.arange(points)
task = ChunkTask(job.model.name, job.action, indices, [job.values(int(i)) for i in indices],
                 checked=True)
result = compute_chunk(task, job.base)
def cpu():
    own, forked = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                        resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + forked.ru_utime + forked.ru_stime
before = cpu()
seconds = time_final_write(job, result, folder)
size = declared_size(job, None)
print(json.dumps({"seconds": seconds, "cpu": cpu() - before,
                  "bytes": size.total if size else 0.0}))
"""


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def write_once(points: int) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, uncompressed bytes) of one final write of ``points`` points
    in a fresh process (the CPU time: the process's and its forked writer's)."""
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="richlazy-write-") as folder:
        proc = subprocess.run([sys.executable, "-c", CHILD, str(points), folder],
                              capture_output=True, text=True, cwd=root, check=False,
                              env={**os.environ, "PYTHONPATH": str(root)})
    if proc.returncode != 0:
        raise SystemExit(f"{points} points: exit {proc.returncode}: {proc.stderr.strip()}")
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    return float(row["seconds"]), float(row["cpu"]), float(row["bytes"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--points", type=int, default=500)
    args = parser.parse_args()
    from richlazy_cli.engine.startup import WRITE_BYTES_PER_SECOND, WRITE_SECONDS

    print(f"load average before: {load()}  ({os.cpu_count()} CPUs)")
    print(f"{'points':>7} {'MB':>7} {'runs':>4} {'min s':>7} {'median s':>9} {'CPU s':>7}")
    fastest: dict[int, tuple[float, float, float, float]] = {}  # (min, median, CPU, bytes)
    for points in (1, args.points):
        samples = [write_once(points) for _ in range(args.runs)]
        walls = sorted(s for s, _, _ in samples)
        cpu = statistics.median(c for _, c, _ in samples)
        nbytes = samples[0][2]
        fastest[points] = (walls[0], statistics.median(walls), cpu, nbytes)
        print(f"{points:>7} {nbytes / 1e6:>7.2f} {args.runs:>4} {walls[0]:>7.3f} "
              f"{statistics.median(walls):>9.3f} {cpu:>7.3f}")

    def fit(column: int) -> tuple[float, float]:
        """(fixed seconds, bytes per second) through the one-point and many-point times."""
        small, large = fastest[1], fastest[args.points]
        rise = large[column] - small[column]
        rate = (large[3] - small[3]) / rise if rise > 0 else float("inf")
        return small[column] - small[3] / rate, rate

    fits = [fit(column) for column in range(3)]
    print(f"{'':<24} {'constant':>10} {'min':>10} {'median':>10} {'CPU':>10}")
    print(f"{'WRITE_SECONDS':<24} {WRITE_SECONDS:>10.3f} "
          + " ".join(f"{fixed:>10.3f}" for fixed, _ in fits))
    print(f"{'WRITE_BYTES_PER_SECOND':<24} {WRITE_BYTES_PER_SECOND / 1e6:>8.1f}MB "
          + " ".join(f"{rate / 1e6:>8.1f}MB" for _, rate in fits))
    print(f"load average after:  {load()}")


if __name__ == "__main__":
    main()
