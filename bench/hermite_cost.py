"""The hermite flow's time per gradient evaluation against the dry run's work model.

Run: ``python bench/hermite_cost.py`` (about 10 minutes on one core).

The dry run prices a ``solve`` configuration at its expected evaluations times the work of one
evaluation, :func:`richlazy_cli.models.hermite.model.evaluation_work`
(``m² d + 160 m d + 1.3·10⁶``),
and calibrates the seconds per unit on one probe, the job's cheapest point (docs/estimates.md).
What matters is therefore the model's shape: whether a job's widths cost what the model says
relative to each other. For 15 shapes (the job files' d and P, widths from the narrowest to the
widest) this times RK45 solves at two horizons on one thread — the difference over the
difference in counted evaluations (``nfev``) is the time per evaluation, set-up cancelled — and
prints, per shape, the measured time, the model's prediction with its one scale set so that
the ratios' geometric mean is 1, and the ratio; beside it the same ratio for the
former model ``m (m + P) d``. Ratios within a job (a block of rows with one d and P) are what
the dry run's estimate inherits.

The load average is printed first and last: every time moves with it.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHAPES = ((128, 32, (4, 16, 64)), (256, 128, (8, 32, 128, 256)), (512, 256, (32, 128, 512)),
          (2048, 1024, (64, 256, 512, 1024, 2048)))
"""(d, P, widths): ren-fig2-small, ren-width, ren-fig2-medium and ren-fig2's shapes."""


def per_evaluation(d: int, P: int, m: int) -> tuple[float, int]:
    """Seconds per gradient evaluation of one RK45 solve at (d, P, m), and evaluations timed."""
    from richlazy_cli.models.base import Batch
    from richlazy_cli.models.hermite.model import Hermite

    base = {"k": 4, "beta": 0.8, "sigma0": 0.01, "decades": 5.0, "seed": 0, "n_records": 2,
            "early_stop": False, "d": d, "P": P, "m": m}

    def run(t_max: float) -> tuple[float, int]:
        values = Hermite.resolve("solve", {**base, "t_max": t_max})
        start = time.perf_counter()
        result = Hermite().solve(Batch.from_points(Hermite, [values]))
        return time.perf_counter() - start, int(result.nfev.values[0])

    run(1e-3)
    s1, e1 = run(1e-3)
    t_max = 1.0
    while True:  # long enough for 300 evaluations past the first step, or 10 s
        s2, e2 = run(t_max)
        if e2 - e1 >= 300 or s2 > 10:
            return (s2 - s1) / (e2 - e1), e2 - e1
        t_max *= 4


def main() -> None:
    from threadpoolctl import threadpool_limits

    from richlazy_cli.models.hermite.model import evaluation_work

    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; one thread")
    rows = []
    with threadpool_limits(limits=1):
        for d, P, widths in SHAPES:
            for m in widths:
                seconds, n = per_evaluation(d, P, m)
                rows.append((d, P, m, seconds, n))
                print(f"  timed d={d} P={P} m={m}: {seconds * 1e3:.3f} ms over {n} evaluations",
                      flush=True)
    measured = np.array([r[3] for r in rows])
    ratios = {}
    for name, work in (("now", lambda d, P, m: evaluation_work(m, d)),
                       ("former", lambda d, P, m: float(m) * (m + P) * d)):
        units = np.array([work(d, P, m) for d, P, m, _, _ in rows])
        ratio = units / measured
        ratios[name] = ratio / np.exp(np.mean(np.log(ratio)))  # one scale: geometric mean 1
    print(f"\n{'d':>5} {'P':>5} {'m':>5} {'ms/eval':>9} {'model ms':>9} {'model/measured':>15}"
          f" {'former m(m+P)d':>15}")
    for i, (d, P, m, seconds, _) in enumerate(rows):
        print(f"{d:>5} {P:>5} {m:>5} {seconds * 1e3:>9.3f} {ratios['now'][i] * seconds * 1e3:>9.3f}"
              f" {ratios['now'][i]:>15.2f} {ratios['former'][i]:>15.2f}")
    for name in ("now", "former"):
        spread = []
        for d, P, _ in SHAPES:
            r = np.array([x for row, x in zip(rows, ratios[name], strict=True)
                          if row[:2] == (d, P)])
            spread.append(f"d={d}: {r.max() / r.min():.2f}")
        print(f"{name}: ratios {ratios[name].min():.2f}-{ratios[name].max():.2f}; widest over "
              f"narrowest spread within a job: {', '.join(spread)}")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
