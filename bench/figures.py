"""Time of ``richlazy figure`` per registered figure, and of ``make paper`` (docs/figures.md).

    python bench/figures.py                 # each figure from results/paper (make paper first)
    python bench/figures.py --make-paper    # also time `make paper` from a clean results/paper

Prints, side by side in one run, the seconds of each figure drawn in-process, the seconds of one
``richlazy figure`` command (a fresh process: imports included), against the 10 s target, and the
load average (the machine is shared: a loaded machine stretches every time).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 10.0


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    from richlazy_cli.figures import gallery
    from richlazy_cli.figures.registry import REGISTRY

    results = ROOT / "results"
    if "--make-paper" in sys.argv:
        shutil.rmtree(results / "paper", ignore_errors=True)
        start = time.perf_counter()
        subprocess.run(["make", "paper"], cwd=ROOT, check=True)
        print(f"make paper: {time.perf_counter() - start:.0f} s wall (target 1800 s), "
              f"load {load()}")
    print(f"load average before: {load()}")
    out = Path(tempfile.mkdtemp(prefix="bench-figures-"))
    print(f"{'figure':<24} {'in-process s':>12} {'target s':>9}")
    worst = 0.0
    for f in REGISTRY:
        paths = [gallery.result_path(results, j) for j in f.jobs]
        if not all(p.exists() for p in paths):
            print(f"{f.name:<24} {'no result':>12}")
            continue
        start = time.perf_counter()
        gallery.write_figure(f.name, paths, out)
        took = time.perf_counter() - start
        worst = max(worst, took)
        print(f"{f.name:<24} {took:12.2f} {TARGET_S:9.0f}")
    first = REGISTRY[3]
    paths = [str(gallery.result_path(results, j)) for j in first.jobs]
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "richlazy_cli", "figure", first.name, *paths,
                    "-o", str(out / "cli"), "-q"], check=True, cwd=ROOT)
    print(f"richlazy figure {first.name} (a fresh process): "
          f"{time.perf_counter() - start:.2f} s against {TARGET_S:.0f} s")
    print(f"slowest figure in-process: {worst:.2f} s; load average after: {load()}")
    shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
