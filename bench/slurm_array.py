"""SLURM benchmark: a 4-task array sweep against the same sweep run locally, and the SLURM tier.

1. Array overhead: one sweep (the `toy` test model with CPU work per point) run
   (a) locally, ``richlazy sweep --jobs 2`` in one process, and
   (b) as ``jobs/slurm/submit.sh`` with N=4 (four array tasks of one CPU each, then the merge),
   timed from submission until the merge job has left the queue.
   Target: array / local <= 1.5 on the larger of the grids. The small grid shows the fixed cost
   (SLURM's scheduling passes, four interpreter start-ups, the merge job) that a grid of seconds
   cannot amortise. Each data set is checked equal to the local one.
2. SLURM tier: ``scripts/slurm-down.sh``, ``scripts/slurm-up.sh`` and
   ``pytest tests/slurm/test_slurm.py``, wall time of the three (target <= 3 min).

Needs a running single-node SLURM (``scripts/slurm-up.sh``, root); without one it says so and
exits 0. The load average is printed beside the figures: other processes on the machine slow
both routes. Run: .venv/bin/python bench/slurm_array.py [--no-tier]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import xarray as xr

ROOT = Path(__file__).resolve().parents[1]
ENV = {
    **os.environ,
    "RICHLAZY_MODELS": "tests.engine_models",
    "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
}
GRIDS = {  # name: (slope values, work: matrix size per point)
    "small": (32, 0),
    "larger": (32, 600),
}


def slurm_up() -> bool:
    if shutil.which("sinfo") is None:
        return False
    probe = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True)
    return probe.returncode == 0 and bool(re.search(r"idle|mix", probe.stdout))


def job_file(folder: Path, points: int, work: int) -> Path:
    path = folder / f"toy-{points}-{work}.toml"
    path.write_text(f'action = "solve"\nmodel = "toy"\n[params]\nwork = {work}\n'
                    f'[grid]\nslope = "linspace(0,1,{points})"\nseed = "range(2)"\n')
    return path


def local(job: Path, out: Path) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "richlazy_cli", "sweep", "-c", str(job), "-o",
                    str(out), "--jobs", "2", "-q"], env=ENV, check=True)
    return time.perf_counter() - start


def queued(*jobs: str) -> bool:
    out = subprocess.run(["squeue", "-h", "-j", ",".join(jobs), "-o", "%i"],
                         capture_output=True, text=True).stdout
    return bool(out.strip())


def array(job: Path, stem: Path) -> float:
    console = Path(sys.executable).parent / "richlazy"
    env = {**ENV, "N": "4", "JOB": str(job), "OUT": str(stem), "LOGS": str(stem.parent / "logs"),
           "RICHLAZY": str(console)}
    start = time.perf_counter()
    proc = subprocess.run(["bash", str(ROOT / "jobs" / "slurm" / "submit.sh"),
                           "--cpus-per-task=1", "--mem=500M", "--time=30"],
                          env=env, capture_output=True, text=True, check=True)
    ids = re.fullmatch(r"array (\d+), merge (\d+)\s*", proc.stdout)
    assert ids, proc.stdout
    while queued(ids.group(1), ids.group(2)):
        time.sleep(0.2)
    return time.perf_counter() - start


def same_data(a: Path, b: Path) -> bool:
    with xr.open_dataset(a, engine="h5netcdf") as da, xr.open_dataset(b, engine="h5netcdf") as db:
        return da.drop_vars("elapsed").drop_attrs().identical(db.drop_vars("elapsed").drop_attrs())


def tier() -> float:
    start = time.perf_counter()
    subprocess.run(["bash", str(ROOT / "scripts" / "slurm-down.sh")], check=True,
                   capture_output=True)
    subprocess.run(["bash", str(ROOT / "scripts" / "slurm-up.sh")], check=True)
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    str(ROOT / "tests" / "test_slurm.py")], env=ENV, check=True, cwd=ROOT)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-tier", action="store_true", help="skip timing the SLURM tier")
    args = parser.parse_args()
    if not slurm_up():
        print("slurm_array: skipped: SLURM is not running (start it with scripts/slurm-up.sh)")
        return
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, (points, work) in GRIDS.items():
            job = job_file(folder, points, work)
            t_local = local(job, folder / f"{name}-local.h5")
            t_array = array(job, folder / f"{name}-array")
            same = same_data(folder / f"{name}-local.h5", folder / f"{name}-array.h5")
            print(f"{name:>6} grid ({2 * points} points, work {work}): local --jobs 2 "
                  f"{t_local:6.1f} s | 4-task array + merge {t_array:6.1f} s | "
                  f"array/local {t_array / t_local:5.2f} (target <= 1.5) | same data: {same} | "
                  f"load {os.getloadavg()[0]:.2f}")
    if not args.no_tier:
        t = tier()
        print(f"SLURM tier (slurm-down, slurm-up, pytest tests/slurm/test_slurm.py): {t:.0f} s "
              f"(target <= 180) | load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
