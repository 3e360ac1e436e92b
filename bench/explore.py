"""Page size and build time of the explorable phase diagrams (report/explore.py, docs/figures.md).

    python bench/explore.py                     # results of fig1b-gpu's and fig1b-small's shape
    python bench/explore.py results/fig1b-small.h5  # real result files as well

The paper-scale runs take hours to days on a CPU, so the first two pages are drawn from result
files of the same *shape* (the job file's grid and number of checkpoints, every variable the
two-layer family records) made by a tiny run of each (d = 5, n = 20, one step per checkpoint);
the page's size depends on the shape, not on the values. Prints, side by side, each page's size
against the 10 MB target, the seconds to gather and write it (in this process, Bokeh imported
once before), and the load average (the machine is shared: a loaded machine stretches every
time).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_MB = 10.0


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def shaped(job: str, out: Path) -> Path:
    """A two-layer result of the job file's grid and number of checkpoints, from a tiny run."""
    import richlazy

    spec = tomllib.loads((ROOT / "jobs" / job).read_text(encoding="utf-8"))
    params = spec["params"]
    listed = params.get("records", params.get("checkpoints"))  # older files: checkpoints
    count = len(listed) if listed else params.get("n_records", params.get("n_checkpoints"))
    path = out / f"{Path(job).stem}-shape.h5"
    richlazy.sweep("train", "two-layer", grid=spec["grid"], jobs=2, output=path,
                   params={"d": 5, "h": params["h"], "k": params["k"], "n": 20, "n_test": 20,
                           "steps": count - 1, "records": list(range(count))})
    return path


def main() -> int:
    from richlazy_cli.report.data import ResultFile
    from richlazy_cli.report.explore import write_explore

    out = Path(tempfile.mkdtemp(prefix="bench-explore-"))
    print(f"load average before: {load()}")
    start = time.perf_counter()
    files = [shaped(job, out) for job in ("fig1b-gpu.toml", "fig1b-small.toml")]
    print(f"result files of the jobs' shape: {time.perf_counter() - start:.0f} s")
    files += [Path(p) for p in sys.argv[1:]]
    import bokeh.plotting  # noqa: F401  (imported once, outside the timings)

    print(f"{'result':<28} {'grid':<22} {'page MB':>8} {'target':>7} {'build s':>8}")
    for path in files:
        rf = ResultFile.load(path)
        start = time.perf_counter()
        page = write_explore(rf, out)
        took = time.perf_counter() - start
        grid = " x ".join(str(rf.ds.sizes[d]) for d in rf.grid_dims)
        steps = next((rf.ds.sizes[d] for d in ("step", "time") if d in rf.ds.dims), 0)
        size = page.stat().st_size / 1e6 if page is not None else float("nan")
        print(f"{path.name:<28} {grid + f', {steps} ckpt':<22} {size:8.2f} {TARGET_MB:7.0f} "
              f"{took:8.2f}")
    print(f"load average after: {load()}; pages in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
