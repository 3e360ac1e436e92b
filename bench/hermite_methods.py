"""The hermite flow's integrators side by side: evaluations, wall time and accuracy.

Run: ``python bench/hermite_methods.py --quick [--jobs 2] [--methods RK45,CVODE,RK45+CVODE]``
(the three short flows below, seeds 0, 1 and 2: fifteen solves, a third of the time the
references; ``--jobs`` solves that many at once, in worker processes; ``--methods`` the
methods beside the reference, RK45 always among them). ``--ren-width`` runs the widths of
jobs/ren-width.toml (seed 0) instead, ``--medium`` those of jobs/ren-fig2-medium.toml, and
``--full`` all three sets (about 65 minutes with ``--jobs 2`` on two cores); each set ends
with a line of totals per method.

Each flow is ``solve hermite`` with d = 256, P = 128, k = 4, β = 0.8, σ0 = 0.01, m = 64,
t_max = 7000, decades = 4, n_records = 100 and one seed, integrated by RK45 and DOP853
(explicit), by CVODE (BDF with matrix-free Newton–GMRES on Hessian–vector products,
docs/hermite.md, "Integrators"), by RK45+CVODE (RK45 while its steps are set by accuracy,
CVODE while they are set by stability), each at the model's default tolerance for it, and by
LSODA/BDF only where ``m·d ≤ 4096`` (their dense Jacobian; not on these flows, where
``m·d = 16,384``). The reference is RK45 at rtol 1e-10.

Columns: counted gradient evaluations (``nfev``) and Hessian–vector products (``njev``);
``priced``, the evaluations with a product priced at its measured cost relative to a
gradient (and CVODE's right-hand side, which keeps what the product reuses, at its own
measured cost, plus the set-up of one linearisation per evaluation, an upper bound;
RK45+CVODE's evaluations, all by that right-hand side, at its cost and its counted
linearisations ``nlin`` at theirs; a dense Jacobian of BDF/LSODA at ``m·d`` products, its
factorisation unpriced; CVODE's preconditioner, ``O(m·d)`` per set-up and solve, unpriced);
``sw`` the hand-overs between RK45 and CVODE and ``t_stiff`` the time CVODE integrated; the
ratio of RK45's priced evaluations to the method's; wall seconds and their ratio; and
against the reference: the same set of recovered teachers, the largest relative error of a
recovery time and of the loss at an output time up to the earlier stop of the two, and
``ok`` when those are within 0.5% and
1e-3 with the same set (the accuracy asked of a method, docs/hermite.md).

Evaluation counts are the primary figure: wall times move with the machine's load, printed
first and last. ``cpu s`` is the solve's CPU time in its worker, which runs BLAS on one
thread (as the prices are measured), so it moves less with the load than the wall time.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHORT = {"d": 256, "P": 128, "k": 4, "beta": 0.8, "sigma0": 0.01, "m": 64, "t_max": 7000.0,
         "decades": 4.0, "n_records": 100}
"""The short flow (one seed each)."""
JOBS = Path(__file__).resolve().parents[1] / "jobs"
REFERENCE_RTOL = 1e-10
T_REC_TOL, LOSS_TOL = 5e-3, 1e-3


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def solve(values: dict[str, Any]) -> tuple[Any, float, float, float]:
    """The result of one ``solve``, its wall and CPU seconds and the rtol it ran at."""
    from richlazy_cli.models.base import Batch
    from richlazy_cli.models.hermite.model import Hermite

    resolved = Hermite.resolve("solve", values)
    start, cpu = time.perf_counter(), time.process_time()
    result = Hermite().solve(Batch.from_points(Hermite, [resolved]))
    return (result, time.perf_counter() - start, time.process_time() - cpu,
            float(resolved["rtol"]))


def job_flows(job: str, widths: list[int] | None = None,
              seed: int = 0) -> list[tuple[str, dict[str, Any]]]:
    """One flow per width of ``jobs/<job>.toml`` (its parameters, seed ``seed``), those in
    ``widths`` only where given."""
    with open(JOBS / f"{job}.toml", "rb") as f:
        spec = tomllib.load(f)
    params = {**spec["params"], "seed": seed}
    return [(f"m={m}", {**params, "m": int(m)}) for m in str(spec["grid"]["m"]).split(",")
            if widths is None or int(m) in widths]


def best_time(fn: Callable[[], Any], reps: int = 100, rounds: int = 5) -> float:
    best = np.inf
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter() - start) / reps)
    return float(best)


def prices(values: dict[str, Any]) -> dict[str, float]:
    """The cost, relative to one gradient evaluation (``population_loss_grad``), of CVODE's
    right-hand side, of one linearisation's set-up and of one product, at a state with half
    its neurons converged onto teachers (the plateau's)."""
    from richlazy_cli.models.hermite._linear import FlowOperators
    from richlazy_cli.models.hermite._population import R_FLOOR, population_loss_grad
    from richlazy_cli.models.hermite.model import hermite_coeffs, teacher_weights

    m, d, P = values["m"], values["d"], values["P"]
    rng = np.random.default_rng(0)
    a = teacher_weights(P, values["beta"])
    c = hermite_coeffs(values["k"], None)
    V = values["sigma0"] * rng.standard_normal((m, d)) / np.sqrt(d)
    half = m // 2
    V[np.arange(half), np.arange(half)] = np.sqrt(a[:half])
    y, v = V.ravel(), rng.standard_normal(m * d)
    ops = FlowOperators(m, d, a, c, R_FLOOR)
    reps = max(5, min(100, 2_000_000 // (m * d)))  # about 0.1 s a round at every shape
    grad = best_time(lambda: population_loss_grad(V, a, c), reps)
    rhs = best_time(lambda: ops.rhs(0.0, y), reps)
    ops.rhs(0.0, y)
    setup = best_time(lambda: ops.linearise(0.0, y), reps)
    jv = ops.linearise(0.0, y)
    product = best_time(lambda: jv(v), reps)
    return {"rhs": rhs / grad, "setup": setup / grad, "jv": product / grad}


def accuracy(res: dict[str, np.ndarray], ref: dict[str, np.ndarray]
             ) -> tuple[bool, float, float, int]:
    """Same recovered set, largest relative error of a recovery time and of the loss at an
    output time up to the earlier of the two runs' stops (``t_stop``: past its early stop a
    run holds the state of its own last step, which differs between methods by their last
    steps, not their accuracy), and the count recovered."""
    t, t_ref = res["t_recover"][0], ref["t_recover"][0]
    same = bool(np.array_equal(np.isfinite(t), np.isfinite(t_ref)))
    both = np.isfinite(t) & np.isfinite(t_ref)
    t_err = float(np.max(np.abs(t[both] / t_ref[both] - 1.0))) if both.any() else 0.0
    upto = res["time"] <= min(float(res["t_stop"][0]), float(ref["t_stop"][0]))
    loss, loss_ref = res["loss"][0][upto], ref["loss"][0][upto]
    loss_err = float(np.max(np.abs(loss / loss_ref - 1.0)))
    return same, t_err, loss_err, int(np.count_nonzero(np.isfinite(t)))


def methods_for(values: dict[str, Any]) -> list[str]:
    from richlazy_cli.models.hermite.model import JACOBIAN_LIMIT

    names = ["RK45", "DOP853", "CVODE", "RK45+CVODE"]
    if values["m"] * values["d"] <= JACOBIAN_LIMIT:
        names += ["LSODA", "BDF"]
    return names


def _run(task: tuple[str, dict[str, Any]]
         ) -> tuple[dict[str, np.ndarray], float, float, float]:
    """One solve in a worker (BLAS on one thread): the arrays the table reads, its wall and
    CPU seconds and its rtol."""
    from threadpoolctl import threadpool_limits

    _, values = task
    with threadpool_limits(1):
        res, wall, cpu, rtol = solve(values)
    keys = ("nfev", "njev", "t_recover", "loss", "switches", "nlin", "t_stiff", "t_stop", "time")
    return ({k: res[k].values for k in keys if k in res}, wall, cpu, rtol)


def bench(title: str, flows: list[tuple[str, dict[str, Any]]], jobs: int = 1,
          only: list[str] | None = None) -> None:
    """Print the table for ``flows`` (name, values), solving ``jobs`` flows at a time, with
    the methods ``only`` (all of :func:`methods_for` when None), and the totals per method."""
    def chosen(values: dict[str, Any]) -> list[str]:
        return [m for m in methods_for(values) if only is None or m in only or m == "RK45"]

    from concurrent.futures import ProcessPoolExecutor

    from threadpoolctl import threadpool_limits

    print(f"{title}: {load()}", flush=True)
    shapes: dict[tuple[int, int, int], dict[str, float]] = {}
    for _, values in flows:  # the prices at each shape
        shape = (values["d"], values["P"], values["m"])
        if shape not in shapes:  # on one BLAS thread, as the solves
            with threadpool_limits(1):
                shapes[shape] = price = prices(values)
            print(f"cost relative to a gradient (d={shape[0]}, m={shape[2]}): CVODE's "
                  f"right-hand side {price['rhs']:.2f}, a linearisation's set-up "
                  f"{price['setup']:.2f}, a Hessian-vector product {price['jv']:.2f}",
                  flush=True)
    tasks = []
    for name, values in flows:
        tasks.append((f"{name}|reference", {**values, "method": "RK45", "rtol": REFERENCE_RTOL}))
        tasks += [(f"{name}|{method}", {**values, "method": method})
                  for method in chosen(values)]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        done = dict(zip((key for key, _ in tasks), pool.map(_run, tasks), strict=True))
    header = (f"{'flow':<14}{'method':<11}{'rtol':>7}{'nfev':>8}{'njev':>8}{'priced':>9}"
              f"{'×RK45':>7}{'wall s':>8}{'cpu s':>8}{'×RK45':>7}{'rec':>5}{'same':>6}"
              f"{'t_rec err':>11}{'loss err':>10}{'ok':>4}{'sw':>4}{'t_stiff':>9}")
    totals: dict[str, list[float]] = {}  # method: priced, cpu, flows not ok
    for name, values in flows:
        price = shapes[(values["d"], values["P"], values["m"])]
        ref, ref_wall, _, _ = done[f"{name}|reference"]
        print(f"{name}: reference RK45 at rtol {REFERENCE_RTOL:g}: nfev "
              f"{int(ref['nfev'][0])}, {ref_wall:.0f} s")
        print(header)
        rk = done[f"{name}|RK45"]
        rk_priced, rk_cpu = float(rk[0]["nfev"][0]), rk[2]
        for method in chosen(values):
            res, wall, cpu, rtol = done[f"{name}|{method}"]
            nfev, njev = int(res["nfev"][0]), int(res["njev"][0])
            priced = float(nfev)
            switched = ""
            if method == "RK45+CVODE":
                priced = (price["rhs"] * nfev + price["setup"] * int(res["nlin"][0])
                          + price["jv"] * njev)
                switched = f"{int(res['switches'][0]):>4}{float(res['t_stiff'][0]):>9.0f}"
            elif method == "CVODE":
                priced = (price["rhs"] + price["setup"]) * nfev + price["jv"] * njev
            elif method in ("BDF", "LSODA"):  # a dense Jacobian: m·d products (its LU unpriced)
                priced += price["jv"] * njev * values["m"] * values["d"]
            same, t_err, loss_err, rec = accuracy(res, ref)
            ok = same and t_err <= T_REC_TOL and loss_err <= LOSS_TOL
            total = totals.setdefault(method, [0.0, 0.0, 0.0])
            total[0] += priced
            total[1] += cpu
            total[2] += not ok
            print(f"{name:<14}{method:<11}{rtol:>7.0e}{nfev:>8}{njev:>8}{priced:>9.0f}"
                  f"{rk_priced / priced:>7.2f}{wall:>8.1f}{cpu:>8.1f}{rk_cpu / cpu:>7.2f}"
                  f"{rec:>5}{'yes' if same else 'NO':>6}{t_err:>11.1e}{loss_err:>10.1e}"
                  f"{'yes' if ok else 'NO':>4}{switched}", flush=True)
    rk_total = totals["RK45"]
    for method, (priced, cpu, missed) in totals.items():
        print(f"{title} total, {method}: priced {priced:.0f} ({rk_total[0] / priced:.2f}x "
              f"fewer than RK45), cpu {cpu:.1f} s ({rk_total[1] / cpu:.2f}x less), "
              f"{len(flows) - int(missed)} of {len(flows)} flows ok", flush=True)
    print(load())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="the three short flows (seeds 0, 1, 2): what a change runs")
    parser.add_argument("--ren-width", action="store_true",
                        help="the widths of jobs/ren-width.toml, seed 0")
    parser.add_argument("--medium", action="store_true",
                        help="the widths of jobs/ren-fig2-medium.toml")
    parser.add_argument("--full", action="store_true", help="all three sets")
    parser.add_argument("--widths", default=None,
                        help="comma-separated widths m of the job files' sets (default: all)")
    parser.add_argument("--seeds", default="0,1,2", help="seeds of the short flow")
    parser.add_argument("--methods", default=None,
                        help="comma-separated methods beside the reference (default: all)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="solves at a time (worker processes); wall times then share cores")
    args = parser.parse_args()
    if not (args.quick or args.ren_width or args.medium or args.full):
        parser.error("choose --quick, --ren-width, --medium or --full")
    seeds = [int(s) for s in args.seeds.split(",")]
    only = None if args.methods is None else args.methods.split(",")
    widths = None if args.widths is None else [int(m) for m in args.widths.split(",")]
    if args.quick or args.full:
        bench("short flows", [(f"short seed {s}", {**SHORT, "seed": s}) for s in seeds],
              args.jobs, only)
    if args.ren_width or args.full:
        bench("ren-width", job_flows("ren-width", widths), args.jobs, only)
    if args.medium or args.full:
        bench("ren-fig2-medium", job_flows("ren-fig2-medium", widths), args.jobs, only)


if __name__ == "__main__":
    main()
