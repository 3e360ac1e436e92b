"""Sweep-engine benchmark (issue 3): overhead, parallel speed-up and parent memory, in one run.

1. Overhead: 20,000 points of a cheap model (single-neuron, exact solution, 101 times) run
   through the engine (validation, chunking, parts folder, assembly, atomic final write) against
   the same work as one vectorised call (stack the 20,000 configurations, call the model once).
   Target: engine / vectorised <= 1.25.
2. Speed-up: a CPU-bound sweep (two-layer GD, 32 configurations in chunks of 2) with --jobs 2
   against --jobs 1, worker start-up included. Target >= 1.8 on 2 cores.
3. Memory: peak resident memory (VmHWM) of the parent process of a --jobs 2 sweep of 20,000
   points x 201 times (a ~320 MB file) against the size of the file it writes. Target <= 2.
   The parent holds the assembled result once (1x) plus the chunks in flight and the
   interpreter itself (~90-130 MB, reported separately).

Run: .venv/bin/python bench/sweep_engine.py [--points N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from richlazy_cli.engine.job import Job  # noqa: E402
from richlazy_cli.engine.run import RunOptions, execute, release_freed_arrays  # noqa: E402
from richlazy_cli.models.base import Batch, get_model  # noqa: E402


def overhead(points: int, folder: Path) -> tuple[float, float]:
    side = round(float(np.sqrt(points)))
    grid = [("delta", f"linspace(-4,4,{side})"), ("eta_a", f"linspace(0.5,2,{points // side})")]
    params = {"method": "exact", "n_times": 101}
    model = get_model("single-neuron")

    start = time.perf_counter()
    job = Job.build("single-neuron", "solve", params, grid)
    out = folder / "overhead.h5"
    result = execute(job, out, RunOptions(jobs=1, quiet=True), ["bench"])
    engine = time.perf_counter() - start
    assert result.exit_code == 0

    values = [job.values(i) for i in range(job.grid.size)]
    start = time.perf_counter()
    with threadpool_limits(1):
        model().solve(Batch.from_points(model, values))
    vectorised = time.perf_counter() - start
    return engine, vectorised


def speedup(folder: Path) -> tuple[float, float]:
    """A CPU-bound sweep (two-layer GD, 32 configurations) with one worker, then two."""
    grid = [("seed", "range(2)"), ("tau", "logspace(-1,0.3,4)"), ("delta", "linspace(-1,1,4)")]
    params = {"d": 50, "h": 50, "n": 500, "n_test": 500, "steps": 5000, "n_checkpoints": 5}
    times = []
    for jobs in (1, 2):
        job = Job.build("two-layer", "train", params, grid)
        out = folder / f"speedup{jobs}.h5"
        start = time.perf_counter()
        result = execute(job, out, RunOptions(jobs=jobs, chunk_size=2, quiet=True), ["bench"])
        times.append(time.perf_counter() - start)
        assert result.exit_code == 0
    return times[0], times[1]


MEMORY_SCRIPT = """
import sys, json
sys.path.insert(0, {root!r})


def hwm():  # peak resident set of this process image (ru_maxrss survives exec on Linux)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])

from richlazy_cli.engine.job import Job
from richlazy_cli.engine.run import RunOptions, execute, release_freed_arrays
release_freed_arrays()  # as the richlazy command does when it starts
base = hwm()
job = Job.build("single-neuron", "solve", {{"method": "exact", "n_times": 201}},
                [("delta", "linspace(-4,4,125)"), ("eta_a", "linspace(0.5,2,160)")])
execute(job, {out!r}, RunOptions(jobs=2, quiet=True), ["bench"])
peak = hwm()
print(json.dumps({{"baseline_kb": base, "peak_kb": peak}}))
"""


def memory(folder: Path) -> tuple[float, float, float]:
    out = folder / "memory.h5"
    script = MEMORY_SCRIPT.format(root=str(ROOT), out=str(out))
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    size = out.stat().st_size
    return info["peak_kb"] * 1024, info["baseline_kb"] * 1024, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=20_000)
    args = parser.parse_args()
    release_freed_arrays()  # as the richlazy command does when it starts
    print(f"machine: {os.cpu_count()} CPUs; numpy {np.__version__}")
    with tempfile.TemporaryDirectory(dir=ROOT / "results") as tmp:
        folder = Path(tmp)
        engine, vectorised = overhead(args.points, folder)
        t1, t2 = speedup(folder)
        peak, baseline, size = memory(folder)
    print()
    print(f"{'measure':52s} {'value':>12s} {'target':>10s}")
    print(f"{'overhead: engine, ' + str(args.points) + ' points [s]':52s} {engine:12.2f}")
    print(f"{'overhead: one vectorised call [s]':52s} {vectorised:12.2f}")
    print(f"{'  ratio engine / vectorised':52s} {engine / vectorised:12.2f} {'<= 1.25':>10s}")
    per_point = (engine - vectorised) / args.points * 1e6
    print(f"{'  engine cost per point [us] (validation, parts, file)':52s} {per_point:12.1f}")
    print(f"{'speed-up: --jobs 1 [s]':52s} {t1:12.2f}")
    print(f"{'speed-up: --jobs 2 [s]':52s} {t2:12.2f}")
    print(f"{'  ratio jobs1 / jobs2':52s} {t1 / t2:12.2f} {'>= 1.8':>10s}")
    print(f"{'memory: final file size [MB]':52s} {size / 1e6:12.1f}")
    print(f"{'memory: parent peak RSS [MB]':52s} {peak / 1e6:12.1f}")
    print(f"{'memory: parent RSS before the sweep [MB]':52s} {baseline / 1e6:12.1f}")
    print(f"{'  ratio peak / file size':52s} {peak / size:12.2f} {'<= 2':>10s}")
    print(f"{'  ratio (peak - baseline) / file size':52s} {(peak - baseline) / size:12.2f}")


if __name__ == "__main__":
    main()
