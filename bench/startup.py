"""Start-up time of the ``richlazy`` command: ``--version``, ``--help``, one tab completion and a
one-point dry run, each a fresh process, against the targets: 0.2 s for the first three (the
command line imports no numerical library before it parses, tests/cli/test_startup_imports.py),
1 s for the dry run (which writes nothing and imports nothing that writes: it prices the final
write by the result's bytes, bench/final_write.py). Then the one-point run itself, timed, beside
what the dry runs estimated it would take (their median ``wall_seconds``: the command's start,
the one-off compilation, the probe's time and the final write's price), the check that the
estimate's "to start up and compile" stays honest.

    python bench/startup.py             # 10 runs of each (3 of the dry run)
    python bench/startup.py --runs 20

Prints, per command, the minimum and the median wall time over the runs and the CPU time
(user + system) of the median run, beside a bare ``python -c pass`` (the interpreter's own
start on this machine), and the load average before and after: the machine may be shared, and
a loaded machine stretches wall times (the CPU times stretch less). The command is the
``richlazy`` console script of this interpreter's environment. Each command runs once untimed
first, which warms the file cache and, even where ``PYTHONDONTWRITEBYTECODE`` is set, writes
the bytecode of modules edited since their last import (as Python does by default on a
user's machine): the timed runs compile no source.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGETS = {"--version": 0.2, "--help": 0.2, "completion": 0.2, "one-point dry run": 1.0}


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """(wall, CPU) seconds of one run of ``cmd``, which must exit 0, and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {proc.returncode}: {proc.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    script = Path(sys.executable).with_name("richlazy")
    if not script.exists():
        raise SystemExit(f"no richlazy console script beside {sys.executable}: pip install .")
    base = dict(os.environ)
    complete = {**base, "_RICHLAZY_COMPLETE": "complete_bash", "COMP_WORDS": "richlazy sw",
                "COMP_CWORD": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        one_point = [str(script), "sweep", "solve", "single-neuron", "-g", "delta=1"]
        cases = [
            ("python -c pass", [sys.executable, "-c", "pass"], base, args.runs),
            ("--version", [str(script), "--version"], base, args.runs),
            ("--help", [str(script), "--help"], base, args.runs),
            ("completion", [str(script)], complete, args.runs),
            ("one-point dry run", [*one_point, "-o", str(folder / "x.h5"), "--dry-run",
                                   "--json"], base, max(3, args.runs // 3)),
            ("one-point run", [*one_point, "-o", str(folder / "run.h5"), "-q", "--force"],
             base, max(3, args.runs // 3)),
        ]
        estimates: list[float] = []  # the dry runs' estimates of the run's wall time
        print(f"load average before: {load()}  ({os.cpu_count()} CPUs)")
        print(f"{'command':<20} {'runs':>4} {'min s':>7} {'median s':>9} {'CPU s':>7} "
              f"{'target s':>9}")
        for name, cmd, env, runs in cases:
            warm = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
            timed(cmd, warm, folder)  # warm the file cache and the bytecode cache
            samples = [timed(cmd, env, folder) for _ in range(runs)]
            walls = sorted(w for w, _, _ in samples)
            median = statistics.median(walls)
            cpu = statistics.median(c for _, c, _ in samples)
            if name == "one-point dry run":
                estimates = [json.loads(out)["estimate"]["wall_seconds"] for _, _, out in samples]
            target = TARGETS.get(name)
            mark = "" if target is None else f"{target:>9.1f}" + (
                "  met" if walls[0] <= target else "  not met")
            print(f"{name:<20} {runs:>4} {walls[0]:>7.3f} {median:>9.3f} {cpu:>7.3f} {mark}")
            if name == "one-point run":
                print(f"{'  its dry run said':<20} {runs:>4} {min(estimates):>7.3f} "
                      f"{statistics.median(estimates):>9.3f}   (estimated wall_seconds)")
        print(f"load average after:  {load()}")


if __name__ == "__main__":
    main()
