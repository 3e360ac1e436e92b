"""Benchmark: the dry run's estimated wall time against the measured one, per job file.

For each job file: ``richlazy sweep -c JOB --dry-run --json --jobs 2`` (the estimate, the
compilation it reports apart), then the sweep itself with ``--jobs 2`` into a scratch folder,
timed, right after, so that both see the same load. The estimate compared is the wall
time the dry run expects (``wall_seconds``: the computation, plus the workers' start-up and
one-off compilation, which it reports apart). Job files whose estimate exceeds
``--limit`` seconds are listed with their estimate only. Prints one row per job file: the
estimate, the measured time, their ratio (target: within 2x either way) and the load average
before the run, so that a loaded machine's figures can be read as such (docs/estimates.md).

Run: ``.venv/bin/python bench/estimates.py [--limit 400] [--cheap] [--markdown] [JOB ...]``
where a JOB is a job file or the name of one in jobs/ (``fig8``); default: every job file in
jobs/, or with ``--cheap`` the set :data:`CHEAP` (about 10 minutes on a quiet 2-core machine).
``--markdown`` prints the rows of docs/estimates.md's table instead of the aligned columns.
``-g NAME=VALUES`` (repeatable) and ``--shard K/N`` measure a subset of a long job file's
points, the same for its dry run and its run (the row names the subset).
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
CHEAP = ("single-neuron-delta", "fig7", "fig8", "azulay-fc", "azulay-diagonal-small",
         "azulay-diagonal", "diagonal-k", "fig5a", "fig5b-small", "fig10-reduced", "fig1a",
         "demo-two-layer", "linear-delta", "linear-b1-narrowing", "linear-b1-expanding",
         "linear-b1-wide", "ren-fig2-small", "ren-unstable", "ren-heavy-tail")
"""The job files whose sweep takes under a minute or so on a quiet 2-core machine."""


def job_path(name: str) -> Path:
    """A job file given as a path or as its name in jobs/."""
    path = Path(name)
    if path.suffix == ".toml" or path.exists():
        return path
    return ROOT / "jobs" / f"{name}.toml"


def _richlazy(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "richlazy_cli", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def measure(job: Path, limit: float, folder: Path, subset: tuple[str, ...] = ()
            ) -> dict[str, object]:
    """One row: the dry run's estimate, then (below ``limit``) the sweep's measured wall time;
    ``subset`` (``-g NAME=VALUES``, ``--shard K/N``) restricts both to the same points."""
    out = folder / f"{job.stem}.h5"
    load = os.getloadavg()[0]  # before both: the bench's own previous run is in it too
    dry = _richlazy("sweep", "-c", str(job), "-o", str(out), *subset, "--dry-run", "--json",
                    "--jobs", "2", timeout=900)
    name = job.stem + (f" ({' '.join(subset)})" if subset else "")
    row: dict[str, object] = {"job": name, "load": load}
    if dry.returncode != 0:
        row["error"] = (dry.stderr.strip().splitlines() or ["?"])[-1]
        return row
    estimate = json.loads(dry.stdout)["estimate"]
    row["estimate"] = estimate["wall_seconds"]  # with the workers' start-up and compilation
    row["compile"] = estimate["compile_seconds"] + estimate["startup_seconds"]
    if estimate["wall_seconds"] > limit:
        return row
    start = time.perf_counter()
    run = _richlazy("sweep", "-c", str(job), "-o", str(out), *subset, "--jobs", "2", "-q",
                    "--force",
                    timeout=max(3 * limit, 900))
    row["measured"] = time.perf_counter() - start
    row["exit"] = run.returncode
    out.unlink(missing_ok=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jobs", nargs="*", help="job files, or their names in jobs/")
    parser.add_argument("--limit", type=float, default=400.0,
                        help="run only job files estimated below this many seconds")
    parser.add_argument("--cheap", action="store_true", help="the cheap set (CHEAP)")
    parser.add_argument("--markdown", action="store_true",
                        help="print markdown table rows (docs/estimates.md)")
    parser.add_argument("-g", "--grid", action="append", default=[], metavar="NAME=VALUES",
                        help="restrict every job file's grid the same way (a subset of its "
                        "points; the row says so)")
    parser.add_argument("--shard", metavar="K/N", help="run shard K of N of each job file")
    args = parser.parse_args()
    subset = tuple(x for g in args.grid for x in ("-g", g))
    subset += ("--shard", args.shard) if args.shard else ()
    names = args.jobs or (list(CHEAP) if args.cheap else [])
    jobs = [job_path(n) for n in names] or sorted((ROOT / "jobs").glob("*.toml"))
    if args.markdown:
        print("| job file | estimate (s) | measured (s) | estimate / measured "
              "| of which start-up, write + compilation (s) | load |")
        print("|---|---|---|---|---|---|")
    else:
        print(f"{'job':28} {'estimate':>10} {'measured':>10} {'ratio':>7} {'of which':>8} load")
        print(f"{'':28} {'s':>10} {'s':>10} {'':>7} {'start-up':>8}")
    with tempfile.TemporaryDirectory() as scratch:
        for job in jobs:
            row = measure(job, args.limit, Path(scratch), subset)
            if args.markdown:
                print(markdown_row(row), flush=True)
                continue
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
                  + ("" if row["exit"] == 0 else f"  (exit {row['exit']})"), flush=True)


def markdown_row(row: dict[str, object]) -> str:
    """One row of docs/estimates.md's table."""
    name, load = row["job"], f"{float(row['load']):.1f}"  # type: ignore[arg-type]
    if "error" in row:
        return f"| {name} | dry run failed: {row['error']} | | | | {load} |"
    est, fixed = float(row["estimate"]), float(row["compile"])  # type: ignore[arg-type]
    if "measured" not in row:
        return (f"| {name} | {est:.1f} | not run (estimate above the limit) | "
                f"| {fixed:.1f} | {load} |")
    got = float(row["measured"])  # type: ignore[arg-type]
    failed = "" if row["exit"] == 0 else f" (exit {row['exit']})"
    return (f"| {name} | {est:.1f} | {got:.1f}{failed} | {est / got:.2f} | {fixed:.1f} "
            f"| {load} |")


if __name__ == "__main__":
    main()
