"""Sweep-engine benchmark: overhead, parallel speed-up and parent memory, in one run.

1. Overhead: 20,000 points of a cheap model (single-neuron, exact solution, 101 times) run
   through the engine (validation, chunking, parts folder, assembly, atomic final write) against
   the same work as one vectorised call: stack the 20,000 configurations, call the model once,
   write the result file. Target: engine / vectorised <= 1.25. The ratio against the call
   without its file is printed too. Each route runs in fresh processes (best of --repeats),
   after a three-point warm-up that imports what xarray, h5py and the engine load on first use;
   the engine route also validates every point, the vectorised one gets them validated.
2. Speed-up: a CPU-bound sweep (two-layer GD, 32 configurations in chunks of 2) with --jobs 2
   against --jobs 1, worker start-up included. Target >= 1.8 on 2 cores.
3. Memory: peak resident memory (VmHWM) of the parent process of a --jobs 2 sweep of 20,000
   points x 201 times (~320 MB of data) against the result's data bytes (the sum of its
   variables' sizes, what the parent must hold once). Target <= 2. The parent holds the
   assembled result once (1x) plus the chunks in flight and the interpreter itself (~90-130 MB,
   reported separately). The file on disk is smaller than the data, being compressed; the
   ratio to it is printed too. The final write runs in a forked child (engine/store.py), whose
   pages are the parent's until written, and which is not counted.
4. Compression: that result written with and without compression (engine/store.py's
   COMPRESSION), file size and write time side by side, and the same for one shard of 8, which
   holds only its own points (an eighth of the data).
5. Dry run of 10^6 points: `richlazy sweep solve single-neuron` over a 1000 x 1000 grid with
   --dry-run (validation, plan, cost and output-size estimates, one probe), wall time and peak
   resident memory of the process, beside a one-point dry run (the same imports and probe).
   Target: under 2 s, and the 10^6-point grid adding under 0.5 s and 50 MB to a one-point
   dry run (engine/validate.py's CaseTree: one check, cost and size per distinct case, no
   per-point dictionaries); the rest is what any dry run takes (the interpreter, numpy,
   xarray, SciPy and the models, the probe: about 160 MB).

Lock and fingerprints are in place in every route (they cost one lock file and one hash of the
parameters per run, and a fingerprint string per part).

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

from richlazy_cli.engine.job import Job  # noqa: E402
from richlazy_cli.engine.run import RunOptions, execute  # noqa: E402

OVERHEAD_SCRIPT = """
import sys, json, time, tempfile
sys.path.insert(0, {root!r})
from pathlib import Path
from threadpoolctl import threadpool_limits
from richlazy_cli.engine.job import Job
from richlazy_cli.engine.run import RunOptions, execute
from richlazy_cli.engine.store import write_result
from richlazy_cli.models.base import Batch, get_model

model = get_model("single-neuron")
params = {{"method": "exact", "n_records": 101}}
folder = Path({folder!r})


def vectorised(grid, out):
    # the same work as one call: the configurations stacked, the model called once, the
    # result written to a file (every configuration was validated beforehand, untimed)
    job = Job.build("single-neuron", "solve", params, grid)
    values = [job.values(i) for i in range(job.grid.size)]
    start = time.perf_counter()
    with threadpool_limits(1):
        ds = model().solve(Batch.from_points(model, values))
    computed = time.perf_counter() - start
    write_result(ds, out)
    return [computed, time.perf_counter() - start]


def engine(grid, out):
    start = time.perf_counter()
    job = Job.build("single-neuron", "solve", params, grid)
    assert execute(job, out, RunOptions(jobs=1, quiet=True), ["bench"]).exit_code == 0
    return [time.perf_counter() - start]


# warm-up: import what xarray, h5py and the engine load on first use, in both routes
{which}([("delta", "linspace(-1,1,3)")], folder / "warm.h5")
best = None
for _ in range({repeats}):  # the best of a few runs in a row, each output deleted after it
    value = {which}({grid!r}, folder / "out.h5")
    (folder / "out.h5").unlink()
    best = value if best is None or value[-1] < best[-1] else best
print(json.dumps(best))
"""


def overhead(points: int, folder: Path, repeats: int) -> tuple[float, float, float]:
    """Engine, vectorised compute, vectorised compute + write: the best of two rounds of fresh
    processes, one per route, each the best of ``repeats`` runs in a row."""
    side = round(float(np.sqrt(points)))
    grid = [("delta", f"linspace(-4,4,{side})"), ("eta_a", f"linspace(0.5,2,{points // side})")]
    found: dict[str, list[float]] = {}
    for r in range(2):
        for which in ("engine", "vectorised"):
            sub = folder / f"overhead-{which}-{r}"
            sub.mkdir()
            script = OVERHEAD_SCRIPT.format(
                root=str(ROOT), folder=str(sub), which=which, grid=grid, repeats=repeats
            )
            proc = subprocess.run(
                [sys.executable, "-c", script], capture_output=True, text=True, check=True
            )
            value = json.loads(proc.stdout.strip().splitlines()[-1])
            if which not in found or value[-1] < found[which][-1]:
                found[which] = value
    (engine,), (computed, written) = found["engine"], found["vectorised"]
    return engine, computed, written


def speedup(folder: Path) -> tuple[float, float]:
    """A CPU-bound sweep (two-layer GD, 32 configurations) with one worker, then two."""
    grid = [("seed", "range(2)"), ("tau", "logspace(-1,0.3,4)"), ("delta", "linspace(-1,1,4)")]
    params = {"d": 50, "h": 50, "n": 500, "n_test": 500, "steps": 5000, "n_records": 5}
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
from richlazy_cli.engine.run import RunOptions, execute
base = hwm()
job = Job.build("single-neuron", "solve", {{"method": "exact", "n_records": 201}},
                [("delta", "linspace(-4,4,125)"), ("eta_a", "linspace(0.5,2,160)")])
execute(job, {out!r}, RunOptions(jobs=2, quiet=True), ["bench"])
peak = hwm()
print(json.dumps({{"baseline_kb": base, "peak_kb": peak}}))
"""

COMPRESSION_SCRIPT = """
import sys, json, os, time
sys.path.insert(0, {root!r})
import xarray as xr
from richlazy_cli.engine.grid import Shard
from richlazy_cli.engine.job import Job
from richlazy_cli.engine.run import RunOptions, execute
from richlazy_cli.engine.store import write_result

folder = {folder!r}
grid = [("delta", "linspace(-4,4,125)"), ("eta_a", "linspace(0.5,2,160)")]
job = Job.build("single-neuron", "solve", {{"method": "exact", "n_records": 201}}, grid)
execute(job, folder + "/shard.h5", RunOptions(jobs=1, shard=Shard(1, 8), quiet=True), ["bench"])
found = {{}}
for name in ("memory", "shard"):
    ds = xr.open_dataset({memory!r} if name == "memory" else folder + "/shard.h5",
                         engine="h5netcdf").load()
    for compress in (False, True):
        best = None
        for _ in range(2):
            out = folder + f"/{{name}}-{{compress}}.h5"
            start = time.perf_counter()
            write_result(ds, out, force=True, compress=compress)
            took = time.perf_counter() - start
            best = took if best is None else min(best, took)
        found[f"{{name}}-{{compress}}"] = [os.path.getsize(out), best]
print(json.dumps(found))
"""


def memory(folder: Path) -> tuple[float, float, float]:
    out = folder / "memory.h5"
    script = MEMORY_SCRIPT.format(root=str(ROOT), out=str(out))
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    size = out.stat().st_size
    import xarray as xr

    with xr.open_dataset(out, engine="h5netcdf") as ds:
        data = sum(item.nbytes for item in ds.variables.values())
    return info["peak_kb"] * 1024, info["baseline_kb"] * 1024, size, data


def compression(folder: Path) -> dict[str, list[float]]:
    """Sizes and write times of the memory run's result and of a shard, with/without zlib."""
    script = COMPRESSION_SCRIPT.format(
        root=str(ROOT), folder=str(folder), memory=str(folder / "memory.h5")
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


DRY_RUN_SCRIPT = """
import json, resource, runpy, sys, time
sys.path.insert(0, {root!r})
sys.argv = ["richlazy", "sweep", "solve", "single-neuron", "-g", "delta=linspace(-1,1,{n})",
            "-g", "eta_a=linspace(0.5,1,{n})", "-p", "n_records=3", "-p", "method=exact",
            "-o", {out!r}, "--dry-run", "-q"]
start = time.perf_counter()
try:
    runpy.run_module("richlazy_cli", run_name="__main__")
except SystemExit:
    pass
took = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"seconds": took, "peak_kb": peak}}))
"""


def dry_run(folder: Path, side: int) -> tuple[float, float]:
    """Wall time (from the interpreter's start) and peak RSS of a side x side dry run."""
    script = DRY_RUN_SCRIPT.format(root=str(ROOT), n=side, out=str(folder / "dry.h5"))
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    wall = time.perf_counter() - start
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    return wall, info["peak_kb"] * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=4, help="runs in a row per route")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs; numpy {np.__version__}")
    with tempfile.TemporaryDirectory(dir=ROOT / "results") as tmp:
        folder = Path(tmp)
        dry_one, dry_one_rss = dry_run(folder, 1)
        dry_big, dry_big_rss = dry_run(folder, 1000)
        engine, computed, written = overhead(args.points, folder, args.repeats)
        t1, t2 = speedup(folder)
        peak, baseline, size, data = memory(folder)
        sizes = compression(folder)
    print()
    print(f"{'measure':52s} {'value':>12s} {'target':>10s}")
    print(f"{'overhead: engine, ' + str(args.points) + ' points [s]':52s} {engine:12.2f}")
    print(f"{'overhead: one vectorised call, computing [s]':52s} {computed:12.2f}")
    print(f"{'overhead: one vectorised call, computing + file [s]':52s} {written:12.2f}")
    ratio = engine / written
    print(f"{'  ratio engine / (vectorised call + file)':52s} {ratio:12.2f} {'<= 1.25':>10s}")
    print(f"{'  ratio engine / vectorised call without its file':52s} {engine / computed:12.2f}")
    per_point = (engine - written) / args.points * 1e6
    print(f"{'  engine cost per point [us] (validation, parts)':52s} {per_point:12.1f}")
    print(f"{'speed-up: --jobs 1 [s]':52s} {t1:12.2f}")
    print(f"{'speed-up: --jobs 2 [s]':52s} {t2:12.2f}")
    print(f"{'  ratio jobs1 / jobs2':52s} {t1 / t2:12.2f} {'>= 1.8':>10s}")
    print(f"{'memory: result data bytes [MB]':52s} {data / 1e6:12.1f}")
    print(f"{'memory: final file size (compressed) [MB]':52s} {size / 1e6:12.1f}")
    print(f"{'memory: parent peak RSS [MB]':52s} {peak / 1e6:12.1f}")
    print(f"{'memory: parent RSS before the sweep [MB]':52s} {baseline / 1e6:12.1f}")
    print(f"{'  ratio peak / result data bytes':52s} {peak / data:12.2f} {'<= 2':>10s}")
    print(f"{'  ratio (peak - baseline) / result data bytes':52s} {(peak - baseline) / data:12.2f}")
    print(f"{'  ratio peak / file size':52s} {peak / size:12.2f}")
    print(f"{'dry run of 10^6 points [s]':52s} {dry_big:12.2f} {'< 2':>10s}")
    print(f"{'dry run of 10^6 points, peak RSS [MB]':52s} {dry_big_rss / 1e6:12.1f}")
    print(f"{'  dry run of 1 point (imports, probe) [s]':52s} {dry_one:12.2f}")
    print(f"{'  dry run of 1 point, peak RSS [MB]':52s} {dry_one_rss / 1e6:12.1f}")
    print(f"{'  what the 10^6-point grid adds [s]':52s} {dry_big - dry_one:12.2f} "
          f"{'< 0.5':>10s}")
    print(f"{'  what the 10^6-point grid adds [MB]':52s} {(dry_big_rss - dry_one_rss) / 1e6:12.1f} "
          f"{'< 50':>10s}")
    print(f"dry run of 10^6 points: {dry_big:.2f} s, {dry_big_rss / 1e6:.0f} MB "
          f"(1 point: {dry_one:.2f} s, {dry_one_rss / 1e6:.0f} MB)")
    print()
    print(f"{'compression':32s} {'raw MB':>9s} {'zlib MB':>9s} {'size':>7s} "
          f"{'raw s':>7s} {'zlib s':>7s} {'time':>7s}")
    for name, label in (("memory", "20,000 points x 201 times"), ("shard", "  its shard 1/8")):
        (raw, t_raw), (packed, t_packed) = sizes[f"{name}-False"], sizes[f"{name}-True"]
        print(f"{label:32s} {raw / 1e6:9.1f} {packed / 1e6:9.1f} {packed / raw:7.2f} "
              f"{t_raw:7.2f} {t_packed:7.2f} {t_packed / t_raw:7.2f}")


if __name__ == "__main__":
    main()
