"""Benchmark of the hermite model (docs/hermite.md, docs/hermite-sgd.md): closed-form population
gradient vs Monte Carlo, the compiled online-SGD loop vs its NumPy reference, the flow's early
stop, and the projected wall time of jobs/ren-fig2.toml on this machine.

Run: ``.venv/bin/python bench/hermite.py [--quick]``. Prints side by side:

0. online-SGD steps per second at d = 64, m = 8, P = 1, batch 1: the compiled loop
   (``implementation = "numba"``) against the NumPy reference (target ≥ 10×);
0b. one task (P = 1, a = 1) at d = 256, m = 4, σ0 = 1e-2, t_max = 1e6 with ``early_stop``
   (measured) against without: the flow is integrated to t = 4000 and the evaluations and wall
   time of the rest are projected linearly from the last 2000 time units (the explicit
   integrator is stability-bound there, at a constant rate); target ≥ 50× fewer evaluations;

1. one closed-form population-gradient evaluation at d = 2048, P = 1024, m = 1024 (time, peak
   memory by tracemalloc) against a Monte Carlo gradient with 10^4 fresh samples (the online-SGD
   mini-batch gradient), and their ratio;
2. the projected wall time of the full Fig. 2 job, without and with ``early_stop``. The
   adaptive integrator's step is limited by stability once tasks are learned (restoring
   rates ~ a_1), so the number of gradient
   evaluations grows linearly with the horizon, at a rate nu = nfev / t_max that does not depend
   on d, P or m. nu is measured on two smaller instances of the same experiment (d = 8P,
   horizon ≈ 3 T_P); the projection is nu × t_max(job) × (time of one evaluation at the job's
   d, P and each width m), summed over the widths (one BLAS thread, as the engine runs it).
   With ``early_stop`` the flow ends near the last greedy emergence time T_last(m) of each
   width (computed from the job's own initial directions): the projection is
   nu_early × T_last(m) evaluations, nu_early = nfev/t_stop measured on the same smaller
   instances with ``early_stop``.
"""

from __future__ import annotations

import sys
import time
import tomllib
import tracemalloc
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from richlazy_cli.models.base import Batch, rng
from richlazy_cli.models.hermite.model import (
    Hermite,
    greedy_recovery_times,
    hermite_coeffs,
    hermite_eval,
    initial_directions,
    minibatch_grad,
    population_loss_grad,
    teacher_weights,
)

ROOT = Path(__file__).resolve().parent.parent


def timed(fn, repeat: int = 3) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """(best wall time in s, peak traced memory in MiB) of ``fn()``."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return best, peak


def fmt_time(s: float) -> str:
    if s < 120:
        return f"{s:.3g} s"
    if s < 7200:
        return f"{s / 60:.3g} min"
    if s < 3 * 86400:
        return f"{s / 3600:.3g} h"
    return f"{s / 86400:.3g} days"


def run_one(action: str, **given: object):  # type: ignore[no-untyped-def]
    vals = Hermite.resolve(action, given)
    t0 = time.perf_counter()
    with threadpool_limits(1):
        out = Hermite().run(action, Batch.from_points(Hermite, [vals])).isel(point=0)
    return out, time.perf_counter() - t0


def bench_sgd_loops(quick: bool) -> None:
    common = {"d": 64, "P": 1, "m": 8, "batch": 1, "n_records": 20, "seed": 0}
    run_one("train", **common, steps=100)  # compile (or load the cache)
    n_np, n_nb = (5_000, 100_000) if quick else (20_000, 1_000_000)
    _, w_np = run_one("train", **common, steps=n_np, implementation="numpy")
    _, w_nb = run_one("train", **common, steps=n_nb, implementation="numba")
    print("online SGD at d=64, m=8, P=1, batch 1 (one configuration)")
    print(f"  {'':10s}{'steps':>10s}{'wall':>10s}{'steps/s':>12s}")
    print(f"  {'numpy':10s}{n_np:>10d}{w_np:>9.2f}s{n_np / w_np:>12.3g}")
    print(f"  {'numba':10s}{n_nb:>10d}{w_nb:>9.2f}s{n_nb / w_nb:>12.3g}")
    print(f"  speed-up numba/numpy: {(n_nb / w_nb) / (n_np / w_np):.1f}x (target >= 10x)\n")


def bench_early_stop() -> None:
    common = {"d": 256, "P": 1, "m": 4, "sigma0": 0.01, "seed": 0, "n_records": 100}
    early, w_early = run_one("solve", **common, t_max=1e6, early_stop=True)
    part1, w1 = run_one("solve", **common, t_max=2000.0)
    part2, w2 = run_one("solve", **common, t_max=4000.0)
    rate_ev = (int(part2["nfev"]) - int(part1["nfev"])) / 2000.0
    rate_w = (w2 - w1) / 2000.0
    ev_full = int(part2["nfev"]) + rate_ev * (1e6 - 4000.0)
    w_full = w2 + rate_w * (1e6 - 4000.0)
    print("one task, d=256, m=4, sigma0=1e-2, t_max=1e6 (RK45, rtol 1e-7)")
    print(f"  recovered at t = {float(early['t_recover'][0]):.4g}; early stop at t = "
          f"{float(early['t_stop']):.4g}")
    print(f"  {'':28s}{'evaluations':>14s}{'wall':>12s}")
    print(f"  {'early_stop (measured)':28s}{int(early['nfev']):>14d}{w_early:>11.2f}s")
    print(f"  {'to t=4000 (measured)':28s}{int(part2['nfev']):>14d}{w2:>11.2f}s")
    print(f"  {'to t=1e6 (projected)':28s}{ev_full:>14.3g}{fmt_time(w_full):>12s}"
          f"   ({rate_ev:.2f} evaluations per time unit after recovery)")
    print(f"  ratio without/with: {ev_full / int(early['nfev']):.0f}x fewer evaluations "
          f"(target >= 50x), {w_full / w_early:.0f}x less wall time")
    bdf, w_bdf = run_one("solve", **common, t_max=1e6, method="BDF")
    print(f"  {'BDF to t=1e6 (measured)':28s}{int(bdf['nfev']):>14d}{w_bdf:>11.2f}s"
          f"   ({int(bdf['njev'])} Jacobians)\n")


def main() -> None:
    quick = "--quick" in sys.argv
    bench_sgd_loops(quick)
    bench_early_stop()
    c = hermite_coeffs(4, None)
    d, P, m = 2048, 1024, 1024
    a = teacher_weights(P, 0.8)
    V = 0.01 * initial_directions(0, m, d)
    x = rng(0, "bench").standard_normal((10_000, d))
    fstar = hermite_eval(x[:, :P], c)[0] @ a

    with threadpool_limits(1):
        t_pop, mem_pop = timed(lambda: population_loss_grad(V, a, c), 2 if quick else 3)
        t_mc, mem_mc = timed(lambda: minibatch_grad(V, x, fstar, c), 1 if quick else 2)
    print(f"gradient at d={d}, P={P}, m={m} (1 BLAS thread)")
    print(f"  {'':28s}{'closed form':>14s}{'Monte Carlo 1e4':>18s}{'ratio MC/closed':>18s}")
    print(f"  {'time per evaluation':28s}{t_pop:>12.3f} s{t_mc:>16.3f} s{t_mc / t_pop:>18.1f}")
    print(f"  {'peak memory (tracemalloc)':28s}{mem_pop:>10.1f} MiB{mem_mc:>14.1f} MiB"
          f"{mem_mc / mem_pop:>18.1f}")

    # -- nfev per unit time on smaller instances ------------------------------------------
    job = tomllib.loads((ROOT / "jobs" / "ren-fig2.toml").read_text())
    pj = job["params"]
    widths = [int(w) for w in str(job["grid"]["m"]).split(",")]
    rates = []
    rates_early = []
    print("\ngradient evaluations of the adaptive integrator on smaller instances (m = 2P, "
          "d = 8P, t_max = 3 d Z P^β / 8)")
    print(f"  {'P':>5s}{'d':>6s}{'m':>6s}{'t_max':>10s}{'nfev':>9s}{'nfev/t':>9s}{'wall':>9s}")
    for Ps in ((16, 32) if quick else (16, 32, 64)):
        ds_, ms = 8 * Ps, 2 * Ps
        Z = float(np.sqrt(np.sum(np.arange(1, Ps + 1) ** -1.6)))
        tmax = round(3 * ds_ * Z * Ps**0.8 / 8)
        vals = Hermite.resolve("solve", {"d": ds_, "P": Ps, "m": ms, "t_max": float(tmax),
                                         "n_records": 50, "sigma0": pj["sigma0"]})
        t0 = time.perf_counter()
        with threadpool_limits(1):
            out = Hermite().solve(Batch.from_points(Hermite, [vals]))
        wall = time.perf_counter() - t0
        nfev = int(out["nfev"].values[0])
        rates.append(nfev / tmax)
        print(f"  {Ps:>5d}{ds_:>6d}{ms:>6d}{tmax:>10d}{nfev:>9d}{nfev / tmax:>9.2f}"
              f"{wall:>8.1f}s")
        vals = {**vals, "early_stop": True}
        t0 = time.perf_counter()
        with threadpool_limits(1):
            out = Hermite().solve(Batch.from_points(Hermite, [vals]))
        wall = time.perf_counter() - t0
        nfev, t_stop = int(out["nfev"].values[0]), float(out["t_stop"].values[0])
        rates_early.append(nfev / t_stop)
        print(f"  {'':5s}{'early_stop':>12s}{t_stop:>10.0f}{nfev:>9d}{nfev / t_stop:>9.2f}"
              f"{wall:>8.1f}s")
    nu, nu_lo = max(rates), min(rates)  # nu falls slowly with size: max is conservative

    # -- projection -------------------------------------------------------------------------
    dj, Pj, tj = pj["d"], pj["P"], pj["t_max"]
    aj = teacher_weights(Pj, pj["beta"])
    print(f"\nprojected wall time of jobs/ren-fig2.toml (d={dj}, P={Pj}, t_max={tj:g}, "
          f"nu = {nu:.2f} evaluations per unit time)")
    print(f"  {'m':>6s}{'s/eval':>10s}{'evaluations':>14s}{'projected':>14s}")
    total = 0.0
    per_width = []
    for w in widths:
        Vw = 0.01 * initial_directions(1, w, dj)
        with threadpool_limits(1):
            te, _ = timed(lambda Vw=Vw: population_loss_grad(Vw, aj, c), 1)
        n_ev = nu * tj
        per_width.append(n_ev * te)
        total += n_ev * te
        print(f"  {w:>6d}{te:>10.3f}{n_ev:>14.3g}{fmt_time(n_ev * te):>14s}")
    print(f"  serial total: {fmt_time(total)};  with 2 workers (2 cores): "
          f"{fmt_time(max(total / 2, max(per_width)))} (bounded by the widest student)")
    print(f"  with the largest instance's rate nu = {nu_lo:.2f} instead: serial "
          f"{fmt_time(total * nu_lo / nu)}, 2 workers "
          f"{fmt_time(max(total / 2, max(per_width)) * nu_lo / nu)}")

    nu_e = max(rates_early)
    print(f"\nwith early_stop (nu_early = {nu_e:.2f} evaluations per unit time up to the stop; "
          "T_last = last greedy emergence of the job's seed, + 10% to settle)")
    print(f"  {'m':>6s}{'T_last':>10s}{'evaluations':>14s}{'projected':>14s}")
    total_e = 0.0
    per_e = []
    for w, pw in zip(widths, per_width, strict=True):
        U0 = initial_directions(int(pj.get("seed", 0)), w, dj)
        T = greedy_recovery_times(U0[:, :Pj], aj, c)
        t_last = min(tj, 1.1 * float(np.nanmax(T)))
        te = pw / (nu * tj)
        n_ev = nu_e * t_last
        per_e.append(n_ev * te)
        total_e += n_ev * te
        print(f"  {w:>6d}{t_last:>10.4g}{n_ev:>14.3g}{fmt_time(n_ev * te):>14s}")
    print(f"  serial total: {fmt_time(total_e)};  with 2 workers (2 cores): "
          f"{fmt_time(max(total_e / 2, max(per_e)))} (bounded by the widest student)")


if __name__ == "__main__":
    main()
