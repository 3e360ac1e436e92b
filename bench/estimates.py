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

``--markdown`` keeps the measured rows: each replaces the row of the same job in
``bench/estimates.json`` (with its date, machine and load average), and the generated tables
are written again from that file: docs/estimates.md's table (its dates and machines in one
header line) and the README's table of the papers' figures (:data:`FIGURES`). ``--render``
writes the two tables from ``bench/estimates.json`` without measuring anything. Run it when
the figures change, not on every change.
``-g NAME=VALUES`` (repeatable) and ``--shard K/N`` measure a subset of a long job file's
points, the same for its dry run and its run (the row names the subset).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
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
                        help="keep the rows in bench/estimates.json and write docs/estimates.md's "
                        "and the README's tables from it")
    parser.add_argument("--render", action="store_true",
                        help="only write the generated tables from bench/estimates.json")
    parser.add_argument("-g", "--grid", action="append", default=[], metavar="NAME=VALUES",
                        help="restrict every job file's grid the same way (a subset of its "
                        "points; the row says so)")
    parser.add_argument("--shard", metavar="K/N", help="run shard K of N of each job file")
    args = parser.parse_args()
    if args.render:
        write_pages(load_rows())
        return
    subset = tuple(x for g in args.grid for x in ("-g", g))
    subset += ("--shard", args.shard) if args.shard else ()
    names = args.jobs or (list(CHEAP) if args.cheap else [])
    jobs = [job_path(n) for n in names] or sorted((ROOT / "jobs").glob("*.toml"))
    print(f"{'job':28} {'estimate':>10} {'measured':>10} {'ratio':>7} {'of which':>8} load")
    print(f"{'':28} {'s':>10} {'s':>10} {'':>7} {'start-up':>8}")
    kept = load_rows() if args.markdown else []
    with tempfile.TemporaryDirectory() as scratch:
        for job in jobs:
            row = measure(job, args.limit, Path(scratch), subset)
            print(text_row(row), flush=True)
            if args.markdown and "error" not in row:
                kept = [r for r in kept if r["job"] != job_name(job)] + [stored_row(job, row)]
                save_rows(kept)
    if args.markdown:
        write_pages(kept)


def text_row(row: dict[str, object]) -> str:
    """One aligned row of the printed table."""
    if "error" in row:
        return f"{row['job']:28} dry run failed: {row['error']}"
    est = float(row["estimate"])  # type: ignore[arg-type]
    if "measured" not in row:
        return (f"{row['job']:28} {est:10.1f} {'not run':>10} {'':>7} "
                f"{float(row['compile']):8.1f} {float(row['load']):.1f}")  # type: ignore[arg-type]
    got = float(row["measured"])  # type: ignore[arg-type]
    return (f"{row['job']:28} {est:10.1f} {got:10.1f} {est / got:7.2f} "
            f"{float(row['compile']):8.1f} {float(row['load']):.1f}"  # type: ignore[arg-type]
            + ("" if row["exit"] == 0 else f"  (exit {row['exit']})"))


# -- the generated tables -------------------------------------------------------------------

STORE = ROOT / "bench" / "estimates.json"
"""The measured rows, one per job file (or subset), each with its date, machine and load."""
PAGE = ROOT / "docs" / "estimates.md"
README = ROOT / "README.md"

def _sweep(job: str) -> str:
    return f"`richlazy sweep -c jobs/{job}.toml -o results/{job}.h5`"


FIGURES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("Kunin Fig. 2–3, single neuron across δ", "`make fig3`", ("single-neuron-delta",)),
    ("Kunin Fig. 1a, neuron trajectories", "`make fig1a`", ("fig1a",)),
    ("Kunin Fig. 1b, (τ, δ) phase diagram, reduced", "`make fig1b-small`", ("fig1b-small",)),
    ("Kunin Fig. 1b, full size", _sweep("fig1b"), ("fig1b",)),
    ("Kunin Fig. 5a, XOR partitions", "`make fig5a`", ("fig5a",)),
    ("Kunin Fig. 5b, reduced", "`make fig5b-small`", ("fig5b-small",)),
    ("Kunin Fig. 7, basins", "`make fig7`", ("fig7",)),
    ("Kunin Fig. 8, Riccati variables", "`make fig8`", ("fig8",)),
    ("Kunin Fig. 10, reduced", "`make fig10`", ("fig10-reduced",)),
    ("Kunin Theorem B.1, three shapes", "`make linear-b1`",
     ("linear-b1-narrowing", "linear-b1-expanding", "linear-b1-wide")),
    ("Kunin Fig. 6a, CNN distances, reduced", "`make fig6a-small`", ("cnn-digits-alpha-small",)),
    ("Kunin Fig. 6a, full size", _sweep("cnn-digits-alpha"), ("cnn-digits-alpha",)),
    ("Kunin Fig. 6b, filter smoothness, reduced", "`make fig6b-small`",
     ("filters-digits24-small",)),
    ("Kunin Fig. 6b, full size", _sweep("filters-digits24"), ("filters-digits24",)),
    ("Kunin Fig. 6c, random hierarchy model, reduced", "`make fig6c-small`",
     ("rhm-alpha-small",)),
    ("Kunin Fig. 6c, full size", _sweep("rhm-alpha"), ("rhm-alpha",)),
    ("Kunin Fig. 6d, grokking, reduced", "`make fig6d-reduced`", ("grokking-reduced",)),
    ("Kunin Fig. 6d, full size", _sweep("grokking-alpha"), ("grokking-alpha",)),
    ("Azulay, diagonal networks, reduced", "`make azulay-small`", ("azulay-diagonal-small",)),
    ("Ren Fig. 2b, widths", "`make ren-width`", ("ren-width",)),
    ("Ren Fig. 2, full size", _sweep("ren-fig2"), ("ren-fig2",)),
    ("Ren, sample complexity of online SGD", "`make ren-sgd-dscaling`", ("ren-sgd-dscaling",)),
)
"""The README's table: a figure, the command that makes it, the job files its time sums."""


def job_name(job: Path) -> str:
    """A job file's row name: its path under jobs/ without the suffix (``paper/kunin-fig3``)."""
    try:
        return str(job.resolve().relative_to(ROOT / "jobs").with_suffix(""))
    except ValueError:
        return job.stem


def machine() -> str:
    """This machine's kind, as the rows name it: ``2-core AMD EPYC``."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()}-core {model}"


def stored_row(job: Path, row: dict[str, object]) -> dict[str, object]:
    """A measured row as bench/estimates.json keeps it."""
    name = job_name(job) + str(row["job"])[len(job.stem):]  # the subset, if any
    est = float(row["estimate"])  # type: ignore[arg-type]
    got = float(row["measured"]) if "measured" in row else None  # type: ignore[arg-type]
    kept: dict[str, object] = {
        "job": name, "estimate_s": round(est, 1),
        "measured_s": None if got is None else round(got, 1),
        "ratio": None if got is None else round(est / got, 2),
        "load": round(float(row["load"]), 1),  # type: ignore[arg-type]
        "date": datetime.now(UTC).date().isoformat(), "machine": machine()}
    if got is None:
        kept["note"] = "not run: the estimate is above the limit"
    elif row["exit"] != 0:
        kept["note"] = f"exit {row['exit']}"
    return kept


def load_rows(path: Path = STORE) -> list[dict[str, object]]:
    return list(json.loads(path.read_text())["rows"]) if path.exists() else []


def save_rows(rows: list[dict[str, object]], path: Path = STORE) -> None:
    """One row a line, written whole and then renamed (a crash leaves the old file)."""
    lines = ",\n".join("  " + json.dumps(r, ensure_ascii=False) for r in rows)
    tmp = path.with_suffix(".tmp")
    tmp.write_text('{"rows": [\n' + lines + "\n]}\n")
    tmp.replace(path)


def duration(seconds: float) -> str:
    """A wall time as the tables print it: ``4 s``, ``3.9 min``, ``33 h``, ``9.8 days``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.1f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.1f} days"


def estimates_table(rows: list[dict[str, object]]) -> str:
    """docs/estimates.md's generated table, its dates and machines in its one header line."""
    dates = sorted({str(r["date"]) for r in rows})
    machines = sorted({str(r["machine"]) for r in rows})
    when = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
    out = [f"Measured {when} on {' and '.join(machines)} machines by `python bench/estimates.py "
           "--markdown`, `--jobs 2`; the last column is the load average when the dry run "
           "started.", "",
           "| job file | dry run said | measured | said / measured | note | load |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        measured = r["measured_s"]
        got = "not run" if measured is None else duration(float(measured))  # type: ignore[arg-type]
        ratio = "" if r["ratio"] is None else f"{float(r['ratio']):.2f}"  # type: ignore[arg-type]
        out.append(f"| `{r['job']}` | {duration(float(r['estimate_s']))} | {got} | "  # type: ignore[arg-type]
                   f"{ratio} | {r.get('note', '')} | {r['load']} |")
    return "\n".join(out)


def _seconds(row: dict[str, object], key: str) -> float:
    value = row[key]
    assert isinstance(value, int | float), (key, value)
    return float(value)


def figures_table(rows: list[dict[str, object]]) -> str:
    """The README's table of the papers' figures: the sweeps' summed wall times on 2 cores."""
    by_job = {str(r["job"]): r for r in rows}
    out = ["| figure | command | wall time, 2 cores | wall time, one GPU |", "|---|---|---|---|"]
    for figure, command, jobs in FIGURES:
        found = [by_job[j] for j in jobs if j in by_job]
        if len(found) < len(jobs):
            cpu = "not measured"
        elif any(r["measured_s"] is None for r in found):
            said = sum(_seconds(r, "estimate_s") for r in found)
            cpu = f"not run (the dry run says {duration(said)})"
        else:
            cpu = duration(sum(_seconds(r, "measured_s") for r in found))
        gpu = [r for r in found if r.get("gpu_measured_s") is not None]
        gpu_time = (duration(sum(_seconds(r, "gpu_measured_s") for r in gpu))
                    if gpu and len(gpu) == len(jobs) else "not measured")
        out.append(f"| {figure} | {command} | {cpu} | {gpu_time} |")
    return "\n".join(out)


def replace_block(text: str, name: str, body: str) -> str:
    """``text`` with the block between ``<!-- NAME: generated by bench/estimates.py -->`` and
    ``<!-- end NAME -->`` replaced by ``body``."""
    begin, end = f"<!-- {name}: generated by bench/estimates.py -->", f"<!-- end {name} -->"
    pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise SystemExit(f"no block {begin} ... {end} to write")
    return pattern.sub(lambda _: f"{begin}\n{body}\n{end}", text)


def write_pages(rows: list[dict[str, object]], page: Path = PAGE, readme: Path = README) -> None:
    """Write the two generated tables into docs/estimates.md and the README."""
    page.write_text(replace_block(page.read_text(), "estimates", estimates_table(rows)))
    readme.write_text(replace_block(readme.read_text(), "figures", figures_table(rows)))


if __name__ == "__main__":
    main()
