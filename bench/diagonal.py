"""Benchmark: the ``diagonal`` model's ``solve`` against the original study's fixed-step GD.

Setting (Azulay et al. 2021, §9; docs/diagonal.md): d = 1000, N = 100, a 5-sparse teacher with
entries 1/√5, label-noise variance 0.01, unbiased symmetric initialisation with alpha = 1e-3 and
shape s = 0. Both runs stop once the train MSE (1/N)‖Xw − y‖² falls below 1e-4, as the study did.

* reference: the study's full-batch GD on u±, v± with step 1e-3, as many steps as it takes,
  a plain numpy loop for one configuration (gradient of ‖Xw − y‖²/(2N));
* richlazy: ``DiagonalModel.solve`` (the Theorem 1 mirror flow with LSODA), timed both as the
  integration alone and as the whole action (which also computes w_implicit by Newton).

Prints wall times side by side, the speed-up, and the relative distance between the end points.
Targets: speed-up ≥ 20×, distance ≤ 1e-3.

Run: ``.venv/bin/python bench/diagonal.py``
"""

from __future__ import annotations

import time

import numpy as np
from threadpoolctl import threadpool_limits

from richlazy_cli.models.base import Batch
from richlazy_cli.models.diagonal.model import (
    DiagonalModel,
    init_scale_shape,
    make_data,
    record_times,
    solve_flow,
    sqrt_k_symmetric,
)

ALPHA, SHAPE, TOL, LR = 1e-3, 0.0, 1e-4, 1e-3
SETTING = {"d": 1000, "N": 100, "r": 5, "noise": 0.01, "seed": 1993, "alpha": ALPHA, "s": SHAPE,
           "tol": TOL}


def study_gd(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, int]:
    """Fixed-step GD on u±, v± (step LR) until the train MSE is below TOL, as in the study."""
    n, d = X.shape
    u0, v0 = init_scale_shape(ALPHA, SHAPE)
    up, vp = np.full(d, float(u0)), np.full(d, float(v0))
    um, vm = up.copy(), vp.copy()
    steps = 0
    while True:
        w = up * vp - um * vm
        res = X @ w - y
        if res @ res / n < TOL:
            return w, steps
        g = X.T @ res / n
        up, vp, um, vm = up - LR * g * vp, vp - LR * g * up, um + LR * g * vm, vm + LR * g * um
        steps += 1


def best_of(repeats: int, fn):
    best, out = np.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    values = DiagonalModel.resolve("solve", SETTING)
    X, y, _ = make_data(values)
    t_gd_mt, (w_gd, steps) = best_of(1, lambda: study_gd(X, y))
    with threadpool_limits(limits=1, user_api="blas"):
        t_gd, _ = best_of(1, lambda: study_gd(X, y))
        rk = float(sqrt_k_symmetric(ALPHA, SHAPE))
        times = record_times(values["t_min"], values["t_max"], values["n_records"])
        t_flow, flow = best_of(5, lambda: solve_flow(
            X, y, rk, TOL, times, values["t_max"], rtol=values["rtol"],
            atol=1e-2 * values["rtol"]))
    batch = Batch.from_points(DiagonalModel, [values])
    t_solve, ds = best_of(5, lambda: DiagonalModel().solve(batch))  # single-threaded inside
    w_solve = ds.w.values[0]
    dist = np.linalg.norm(w_solve - w_gd) / np.linalg.norm(w_gd)
    print(f"diagonal bench: d=1000 N=100 r=5 noise=0.01 alpha={ALPHA:g} s={SHAPE:g}, "
          f"stop at train MSE < {TOL:g}")
    print(f"{'':40s}{'wall [s]':>10s}{'speed-up':>10s}  detail")
    print(f"{'study GD (numpy, lr 1e-3, 1 thread)':40s}{t_gd:10.3f}{1.0:10.1f}  {steps} steps, "
          f"t = {steps * LR:.3f}")
    print(f"{'study GD (numpy, lr 1e-3, default BLAS)':40s}{t_gd_mt:10.3f}{t_gd / t_gd_mt:10.1f}")
    print(f"{'solve: mirror flow (LSODA) only':40s}{t_flow:10.4f}{t_gd / t_flow:10.1f}  "
          f"{flow['nfev']} evaluations, t = {flow['time_to_tol']:.3f}")
    print(f"{'solve: whole action (+w_implicit)':40s}{t_solve:10.4f}{t_gd / t_solve:10.1f}")
    print(f"relative distance |w_solve - w_GD| / |w_GD| = {dist:.2e}   (target <= 1e-3)")
    best_gd = min(t_gd, t_gd_mt)
    print(f"speed-up of the whole solve action over the faster GD = {best_gd / t_solve:.1f}x   "
          f"(target >= 20x)")


if __name__ == "__main__":
    main()
