"""The two-layer model's torch backend against its NumPy backend, side by side, in one run.

Prints configuration-steps per second at the paper's size (d = 100, h = 50, n = 1000,
n_test = 10,000) for

* the NumPy backend on one core, 17 configurations (one δ row of a (seed, τ) slice, the CPU
  job's chunk), and twice that figure as the 2-core rate (an upper bound: two workers scale
  by 1.8× in ``bench/sweep_engine.py``);
* the torch backend on the CPU (one thread, 17 configurations: for the record) and, where a
  GPU is present, on the GPU with a whole seed's 17 × 17 (τ, δ) slice, 289 configurations, in
  float64 and float32;

then the projected wall time of the full Fig. 1b (``jobs/fig1b.toml``: 16 seeds × 289
configurations × 10⁶ steps, 7 checkpoints) on that device. Times are measured by two runs of
different lengths, so that fixed costs (set-up, checkpoints) and the per-step cost separate:
``T(S) = fixed + S · per_step``. Run: ``python bench/torch_backend.py [--quick]``.

``--steps-against REF`` measures instead the torch step on the CPU (one thread, the 17
configurations, the paper's size, float64 and float32) of three trees in one run, in
alternating rounds, with the load average: the base commit ``REF`` (checked out in a
temporary git worktree; by default the commit before the step was fused into preallocated
buffers), this tree's eager step (``implementation = torch``) and its compiled step
(``implementation = torch-compiled``, :class:`richlazy_cli.models.two_layer._torch.CompiledStep`;
the first compilation is left out of the timing). docs/performance.md quotes its figures.

``--seeds`` measures instead, on the CPU (one thread, the paper's size, float64), a chunk of
several seeds trained together (the torch implementations batch over the seed: each seed's
configurations multiplied with its own data) against the same configurations as one chunk
per seed, in alternating rounds, configuration-steps per second side by side with the load
average. It is the CPU's check that mixing seeds costs nothing; what it gains is on a GPU,
where one chunk of a whole job replaces one per seed (not measured here).
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
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from richlazy_cli.models.base import Batch
from richlazy_cli.models.two_layer.model import TwoLayer

PAPER = dict(d=100, h=50, k=3, n=1000, n_test=10000, lr=5e-3, seed=100)
ROOT = Path(__file__).resolve().parents[1]
UNFUSED = "9f16cd4"
"""The commit before the two-layer torch step was fused into preallocated buffers."""
FIG1B_STEPS = 1_000_000
FIG1B_SEEDS = 16


def grid(count: int) -> list[dict[str, float]]:
    taus = np.logspace(-1, 0.3, 17)
    deltas = np.linspace(-1, 1, 17)
    pts = [{"tau": float(t), "delta": float(d)} for t in taus for d in deltas]
    return pts[:count]


def timed_train(points: list[dict[str, float]], steps: int, sync: Any = None,
                **params: Any) -> float:
    values = [TwoLayer.resolve("train", {**PAPER, **params, **p, "steps": steps,
                                         "records": [0, steps // 2, steps]})
              for p in points]
    batch = Batch.from_points(TwoLayer, values)
    start = time.perf_counter()
    TwoLayer().train(batch)
    if sync is not None:
        sync()
    return time.perf_counter() - start


def per_step(points: list[dict[str, float]], s1: int, s2: int, sync: Any = None,
             **params: Any) -> tuple[float, float]:
    """(seconds per step of the whole batch, fixed seconds) from runs of s1 and s2 steps."""
    timed_train(points, max(2, s1 // 4), sync, **params)  # warm-up: compile, allocate
    t1 = timed_train(points, s1, sync, **params)
    t2 = timed_train(points, s2, sync, **params)
    step = max((t2 - t1) / (s2 - s1), 1e-12)
    return step, max(t1 - s1 * step, 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps (a smoke test)")
    parser.add_argument("--steps-against", metavar="REF", nargs="?", const=UNFUSED,
                        default=None, help="the CPU step of base commit REF against this "
                        f"tree's eager and compiled steps (default REF: {UNFUSED}, unfused)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of --steps-against or --seeds")
    parser.add_argument("--seeds", action="store_true", help="on the CPU: one chunk of "
                        "several seeds against one chunk per seed, the same configurations")
    args = parser.parse_args()
    if args.steps_against is not None:
        steps_against(args.steps_against, args.rounds, args.quick)
        return
    if args.seeds:
        seeds_side_by_side(args.rounds, args.quick)
        return
    import torch

    rows: list[tuple[str, float, float, float]] = []  # label, config-steps/s, step, fixed
    cpu_steps = (20, 60) if args.quick else (100, 300)
    with threadpool_limits(1):
        pts = grid(17)
        step, fixed = per_step(pts, *cpu_steps, implementation="numba")
        numpy_rate = len(pts) / step
        rows.append(("numpy, 1 core, float64, 17 configs", numpy_rate, step, fixed))
        rows.append(("numpy, 2 cores (2 x 1 core), float64", 2 * numpy_rate, step / 2, fixed))
        step, fixed = per_step(pts, *cpu_steps, implementation="torch", device="cpu")
        rows.append(("torch cpu, 1 thread, float64, 17 configs", len(pts) / step, step, fixed))
    gpu = torch.cuda.is_available()
    projections = []
    if gpu:
        name = torch.cuda.get_device_name(0)
        gpu_steps = (200, 600) if args.quick else (2000, 6000)
        pts = grid(289)
        for dtype in ("float64", "float32"):
            step, fixed = per_step(pts, *gpu_steps, sync=torch.cuda.synchronize,
                                   implementation="torch", device="cuda", dtype=dtype)
            rows.append((f"torch {name}, {dtype}, 289 configs", len(pts) / step, step, fixed))
            hours = FIG1B_SEEDS * (fixed + FIG1B_STEPS * step) / 3600
            projections.append((dtype, hours))
    print(f"{'backend':<48} {'config-steps/s':>15} {'s/step':>10} {'fixed s':>8}"
          f" {'vs numpy 2 cores':>17}")
    for label, rate, step, fixed in rows:
        print(f"{label:<48} {rate:>15,.0f} {step:>10.2e} {fixed:>8.2f}"
              f" {rate / (2 * numpy_rate):>16.2f}x")
    if gpu:
        for dtype, hours in projections:
            print(f"projected full Fig. 1b (jobs/fig1b-gpu.toml, {dtype}) on this GPU: "
                  f"{hours:.2f} h  (target <= 6 h in float64)")
    else:
        print("no GPU here: GPU rows and the Fig. 1b projection need one")
    days = FIG1B_SEEDS * 289 * FIG1B_STEPS / (2 * numpy_rate) / 86400
    print(f"full Fig. 1b on 2 cores with numpy: {days:.1f} days")
    if gpu:
        agreement(torch)
        hermite_on_gpu(torch, args.quick)


def agreement(torch: Any) -> None:
    """The GPU against the NumPy reference (float64, 200 steps, 6 configurations), and the
    GPU's own determinism: a rerun, and a configuration alone against in its batch."""
    names = ("train_loss", "test_loss", "kernel_distance", "hamming_distance",
             "param_distance")
    pts = [{"tau": t, "delta": d} for t in (0.1, 1.0) for d in (-1.0, 0.0, 1.0)]

    def run(points: list[dict[str, float]], **kw: Any) -> Any:
        values = [TwoLayer.resolve("train", {**PAPER, "steps": 200, "n_records": 8,
                                             **kw, **p}) for p in points]
        return TwoLayer().train(Batch.from_points(TwoLayer, values))

    with threadpool_limits(1):
        ref = run(pts)
    got = run(pts, implementation="torch", device="cuda")
    again = run(pts, implementation="torch", device="cuda")
    alone = run(pts[2:3], implementation="torch", device="cuda")
    for name in names:
        r, g = ref[name].values, got[name].values
        rel = np.nanmax(np.abs(g - r) / np.maximum(np.abs(r), 1e-12))
        print(f"GPU vs numpy float64, {name:<17} max relative difference {rel:.1e}; "
              f"rerun bitwise equal: {np.array_equal(g, again[name].values, equal_nan=True)}; "
              f"alone = in batch bitwise: "
              f"{np.array_equal(g[2], alone[name].values[0], equal_nan=True)}")


def hermite_on_gpu(torch: Any, quick: bool, device: str = "cuda") -> None:
    """The hermite flow on the GPU: agreement with the NumPy backend on the small Fig. 2 job,
    seconds per Dormand–Prince step at the full job's size for each width, and the projected
    wall time of jobs/ren-fig2.toml with early stop.

    Projection (as ``bench/hermite.py`` does for the CPU): with early stop a width's flow ends
    near the last greedy emergence time ``T_last(m)`` of the job's seed (+10% to settle), after
    ``nu · T_last`` gradient evaluations, ``nu`` = evaluations per unit time measured here on
    smaller instances of the same experiment (d = 8P); a step costs 6 evaluations.
    """
    import math
    import tomllib

    from richlazy_cli.models.hermite import _torch as HT
    from richlazy_cli.models.hermite import model as H

    small = dict(d=128, P=32, k=4, beta=0.8, sigma0=0.01, t_max=1000.0, decades=4.0,
                 n_records=200, seed=0, early_stop=True)
    for m in (8, 32):
        vals = [H.Hermite.resolve("solve", {**small, "m": m, "implementation": b, "device": dev})
                for b, dev in (("numpy", "cpu"), ("torch", device))]
        ref, got = (H.Hermite().solve(Batch.from_points(H.Hermite, [v])) for v in vals)
        r, g = ref.t_recover.values, got.t_recover.values
        rel = float(np.nanmax(np.abs(g - r) / r))
        print(f"hermite GPU vs numpy, ren-fig2-small m = {m}: t_recover max relative "
              f"difference {rel:.1e}, nfev {int(got.nfev.values[0])} vs "
              f"{int(ref.nfev.values[0])}")

    job = tomllib.loads((Path(__file__).resolve().parents[1] / "jobs/ren-fig2.toml").read_text())
    pj = job["params"]
    widths = [int(w) for w in str(job["grid"]["m"]).split(",")]
    dj, Pj = int(pj["d"]), int(pj["P"])
    c = H.hermite_coeffs(int(pj["k"]), None)
    rates = []
    for P in ((8,) if quick else (16, 32)):
        d, m = 8 * P, 2 * P
        v = H.Hermite.resolve("solve", dict(d=d, P=P, m=m, t_max=1e5, early_stop=True,
                                            n_records=50, implementation="torch", device=device))
        res = H.Hermite().solve(Batch.from_points(H.Hermite, [v]))
        rates.append(float(res.nfev.values[0]) / float(res.t_stop.values[0]))
        print(f"hermite GPU early stop, d = {d}, P = {P}, m = {m}: t_stop "
              f"{float(res.t_stop.values[0]):.4g}, {int(res.nfev.values[0])} evaluations "
              f"({rates[-1]:.2f} per unit time)")
    nu = max(rates)
    aj = H.teacher_weights(Pj, float(pj["beta"]))
    total = 0.0
    print(f"{'m':>6} {'s/step':>9} {'T_last':>9} {'steps':>10} {'projected':>10}")
    for m in widths:
        U0 = H.initial_directions(int(pj.get("seed", 0)), m, dj)
        V0 = float(pj["sigma0"]) * U0[None]
        atol = np.array([1e-3 * 1e-7 * float(pj["sigma0"]) / math.sqrt(dj)])
        y0 = torch.as_tensor(V0.reshape(1, -1), dtype=torch.float64, device=device)
        a_t = torch.as_tensor(aj[None], dtype=torch.float64, device=device)

        def fun(y: Any, idx: np.ndarray, m: int = m, a_t: Any = a_t) -> Any:
            grad = H.population_loss_grad(y.view(-1, m, dj), a_t, c)[1]
            return -grad.reshape(y.shape)

        solver = HT.BatchedRK45(torch, fun, y0, float(pj["t_max"]), 1e-7, atol)
        for _ in range(3):
            solver.step()
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        sync()
        n_steps = 5 if quick else 20
        start = time.perf_counter()
        for _ in range(n_steps):
            solver.step()
        sync()
        per_step = (time.perf_counter() - start) / n_steps
        T = H.greedy_recovery_times(U0[:, :Pj], aj, c)
        t_last = min(float(pj["t_max"]), 1.1 * float(np.nanmax(T)))
        steps = nu * t_last / 6
        total += steps * per_step
        print(f"{m:>6} {per_step:>9.2e} {t_last:>9.4g} {steps:>10.3g} "
              f"{steps * per_step / 60:>8.1f} min")
    print(f"projected jobs/ren-fig2.toml with early stop on this GPU (widths one after "
          f"another): {total / 3600:.2f} h  (target <= 2 h)")


SEEDS = (100, 101, 102, 103)
"""The seeds of ``--seeds``: four of Fig. 1b's."""


def seeds_side_by_side(rounds: int, quick: bool, per_seed: int = 8) -> None:
    """``per_seed`` (τ, δ) configurations of each of :data:`SEEDS` on the torch
    implementation (CPU, one thread, float64, the paper's size), trained as one chunk per
    seed and as one chunk of every seed, in ``rounds`` alternating rounds: configuration-steps
    per second of the step (two run lengths, set-up and checkpoints separated off), by the
    timing thread's CPU time (wall clock in brackets), with the load average. Each round
    checks that the two give the same bits."""
    steps = (6, 18) if quick else (20, 60)
    pts = grid(289)[:: 289 // per_seed][:per_seed]

    def values(seeds: tuple[int, ...], n_steps: int) -> list[dict[str, Any]]:
        return [TwoLayer.resolve("train", {**PAPER, **p, "seed": seed, "steps": n_steps,
                                           "records": [0, n_steps],
                                           "implementation": "torch", "device": "cpu"})
                for seed in seeds for p in pts]

    def timed(chunks: list[tuple[int, ...]], n_steps: int) -> tuple[float, float, list[Any]]:
        batches = [Batch.from_points(TwoLayer, values(c, n_steps)) for c in chunks]
        wall, cpu = time.perf_counter(), time.thread_time()
        out = [TwoLayer().train(b) for b in batches]
        return time.perf_counter() - wall, time.thread_time() - cpu, out

    layouts = {"one chunk per seed": [(s,) for s in SEEDS], "one chunk of every seed": [SEEDS]}
    B = len(SEEDS) * per_seed
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} cores); "
          f"two-layer torch on the CPU, one thread, float64, d = 100, h = 50, n = 1000, "
          f"{len(SEEDS)} seeds x {per_seed} configurations = {B}; steps {steps[0]} and "
          f"{steps[1]}; configuration-steps/s of CPU time (of the wall clock)")
    with threadpool_limits(1):
        timed(layouts["one chunk of every seed"], 2)  # warm-up: the exactness checks
        timed(layouts["one chunk per seed"], 2)
        seen: dict[str, list[float]] = {label: [] for label in layouts}
        for r in range(rounds):
            row, results = [], {}
            for label, chunks in layouts.items():
                w1, c1, _ = timed(chunks, steps[0])
                w2, c2, out = timed(chunks, steps[1])
                rate_cpu = B * (steps[1] - steps[0]) / max(c2 - c1, 1e-9)
                rate_wall = B * (steps[1] - steps[0]) / max(w2 - w1, 1e-9)
                seen[label].append(rate_cpu)
                results[label] = out
                row.append(f"{label} {rate_cpu:,.0f} ({rate_wall:,.0f})")
            per, every = results["one chunk per seed"], results["one chunk of every seed"][0]
            same = all(
                every[name].values[k * per_seed:(k + 1) * per_seed].tobytes()
                == per[k][name].values.tobytes()
                for k in range(len(SEEDS)) for name in per[k].data_vars)
            print(f"round {r + 1}: " + ", ".join(row)
                  + f"; same bits: {same}  (load {os.getloadavg()[0]:.2f})")
    med = {label: float(np.median(v)) for label, v in seen.items()}
    a, b = med["one chunk per seed"], med["one chunk of every seed"]
    print(f"median: one chunk per seed {a:,.0f}, one chunk of every seed {b:,.0f} "
          f"configuration-steps/s; every seed / per seed {b / a:.3f}x")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


STEP_CHILD = r"""
import json, sys, time
import numpy as np
import torch
torch.set_num_threads(1)
from richlazy_cli.models.base import Batch
from richlazy_cli.models.two_layer.model import TwoLayer
impl, dtype, s1, s2 = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
paper = json.loads(sys.argv[5])
taus, deltas = np.logspace(-1, 0.3, 17), np.linspace(-1, 1, 17)
points = [{"tau": float(taus[i]), "delta": float(deltas[8])} for i in range(17)]
def timed(steps):
    values = [TwoLayer.resolve("train", {**paper, **p, "implementation": impl, "dtype": dtype,
                                         "steps": steps, "records": [0, steps]})
              for p in points]
    wall, cpu = time.perf_counter(), time.thread_time()
    TwoLayer().train(Batch.from_points(TwoLayer, values))
    return time.perf_counter() - wall, time.thread_time() - cpu
timed(max(2, s1 // 4))  # warm-up: compilation, caches
(w1, c1), (w2, c2) = (min(timed(s), timed(s)) for s in (s1, s2))  # the less disturbed of two
print(json.dumps({"wall": (w2 - w1) / (s2 - s1), "cpu": (c2 - c1) / (s2 - s1)}))
"""


def step_time(tree: Path, implementation: str, dtype: str, steps: tuple[int, int]
              ) -> dict[str, float]:
    """Seconds per step of the 17 configurations on the CPU, one thread, in ``tree``: of the
    wall clock (``wall``) and of the thread's CPU time (``cpu``, which another process's load
    on the same cores disturbs far less)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    res = subprocess.run([sys.executable, "-c", STEP_CHILD, implementation, dtype,
                          str(steps[0]), str(steps[1]), json.dumps(PAPER)], env=env, cwd=tree,
                         capture_output=True, text=True, check=False)
    if res.returncode != 0:
        sys.exit(f"bench child failed in {tree}:\n{res.stderr[-2000:]}")
    return dict(json.loads(res.stdout.strip().splitlines()[-1]))


def steps_against(base: str, rounds: int, quick: bool) -> None:
    """The CPU step of ``base`` (unfused, by default), this tree's eager step and its
    compiled step, float64 and float32, in ``rounds`` alternating rounds (ms of CPU time per
    step of the 17 configurations, wall-clock ms in brackets; each round side by side)."""
    git = ["git", "-C", str(ROOT)]
    steps = (20, 60) if quick else (100, 300)
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} cores); "
          f"base {base}; two-layer torch on the CPU, one thread, 17 configurations, "
          f"d = 100, h = 50, n = 1000; CPU ms per step (wall ms)")
    trees = ("base " + base, "eager (this tree)", "compiled (this tree)")
    seen: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        wt = Path(tmp) / "base"
        subprocess.run([*git, "worktree", "add", "--detach", "-q", str(wt), base], check=True)
        try:
            for r in range(rounds):
                for dtype in ("float64", "float32"):
                    row = []
                    for label, tree, impl in zip(trees, (wt, ROOT, ROOT),
                                                 ("torch", "torch", "torch-compiled"),
                                                 strict=True):
                        t = step_time(tree, impl, dtype, steps)
                        ms = 1e3 * t["cpu"]
                        seen.setdefault((label, dtype), []).append(ms)
                        row.append(f"{label} {ms:6.1f} ({1e3 * t['wall']:.1f})")
                    print(f"round {r + 1} {dtype}: " + ", ".join(row)
                          + f"  (load {os.getloadavg()[0]:.2f})")
        finally:
            subprocess.run([*git, "worktree", "remove", "--force", str(wt)], check=False)
    for dtype in ("float64", "float32"):
        med = {label: float(np.median(seen[(label, dtype)])) for label in trees}
        b, e, c = (med[label] for label in trees)
        print(f"median {dtype}: base {b:.1f}, eager {e:.1f}, compiled {c:.1f} CPU ms/step; "
              f"eager/base {b / e:.2f}x, compiled/eager {e / c:.2f}x faster")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
