"""Benchmark: the dry run's estimated wall time against the measured one, per job file.

For each job file: ``richlazy sweep -c JOB --dry-run --json --jobs 2`` (the estimate, the
compilation it reports apart), then the sweep itself with ``--jobs 2`` into a scratch folder,
timed, right after, so that both see the same load. The estimate compared is the wall
time the dry run expects (``wall_seconds``: the computation, plus the workers' start-up and
one-off compilation, which it reports apart). Job files whose estimate exceeds
``--limit`` seconds are listed with their estimate only. Prints one row per job file: the
estimate, the measured time, their ratio (target: within 2x either way) and the load average
before the run, so that a loaded machine's figures can be read as such (docs/estimates.md).

Run: ``.venv/bin/python bench/estimates.py [--limit 400] [JOB.toml ...]`` (default: every
job file in jobs/).
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


def _richlazy(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "richlazy_cli", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def measure(job: Path, limit: float, folder: Path) -> dict[str, object]:
    out = folder / f"{job.stem}.h5"
    load = os.getloadavg()[0]
    dry = _richlazy("sweep", "-c", str(job), "-o", str(out), "--dry-run", "--json",
                    "--jobs", "2", timeout=900)
    row: dict[str, object] = {"job": job.stem, "load": load}
    if dry.returncode != 0:
        row["error"] = (dry.stderr.strip().splitlines() or ["?"])[-1]
        return row
    estimate = json.loads(dry.stdout)["estimate"]
    row["estimate"] = estimate["wall_seconds"]  # with the workers' start-up and compilation
    row["compile"] = estimate["compile_seconds"] + estimate["startup_seconds"]
    if estimate["wall_seconds"] > limit:
        return row
    start = time.perf_counter()
    run = _richlazy("sweep", "-c", str(job), "-o", str(out), "--jobs", "2", "-q", "--force",
                    timeout=max(3 * limit, 900))
    row["measured"] = time.perf_counter() - start
    row["exit"] = run.returncode
    out.unlink(missing_ok=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jobs", nargs="*", type=Path)
    parser.add_argument("--limit", type=float, default=400.0,
                        help="run only job files estimated below this many seconds")
    args = parser.parse_args()
    jobs = args.jobs or sorted((ROOT / "jobs").glob("*.toml"))
    print(f"{'job':28} {'estimate':>10} {'measured':>10} {'ratio':>7} {'of which':>8} load")
    print(f"{'':28} {'s':>10} {'s':>10} {'':>7} {'start-up':>8}")
    with tempfile.TemporaryDirectory() as scratch:
        for job in jobs:
            row = measure(job, args.limit, Path(scratch))
            if "error" in row:
                print(f"{row['job']:28} dry run failed: {row['error']}")
                continue
            est = float(row["estimate"])  # type: ignore[arg-type]
            if "measured" not in row:
                print(f"{row['job']:28} {est:10.1f} {'not run':>10} {'':>7} "
                      f"{float(row['compile']):8.1f} {float(row['load']):.1f}")
                continue
            got = float(row["measured"])  # type: ignore[arg-type]
            print(f"{row['job']:28} {est:10.1f} {got:10.1f} {est / got:7.2f} "
                  f"{float(row['compile']):8.1f} {float(row['load']):.1f}"
                  + ("" if row["exit"] == 0 else f"  (exit {row['exit']})"))


if __name__ == "__main__":
    main()
