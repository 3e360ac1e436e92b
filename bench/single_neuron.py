"""Benchmark: exact batch evaluation of the single-neuron solution vs a per-configuration
``solve_ivp`` loop (target >= 100x), plus the 10,000-configuration exact evaluation.

Run: ``.venv/bin/python bench/single_neuron.py [--configs 1000] [--subset 50]``.

Setting: d = 2, beta* = (0, 1), eta_a = eta_w = 1, delta ~ U(-4, 4), beta0 ~ N(0, I), 201 times
uniform in [0, 20]. The ODE baseline is what a user would write without the closed form: one
``solve_ivp(method="DOP853", rtol=1e-10, atol=1e-12, t_eval=times)`` per configuration (the
model's default tolerances). It is timed on a subset and extrapolated linearly (the output says
so). The exact timings include the initialisation from (beta0, delta) and are the best of 5.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.integrate import solve_ivp

from richlazy_cli.models.single_neuron.model import (
    exact_trajectory,
    init_from_beta,
    numeric_trajectory,
)


def configs(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 2)), rng.uniform(-4.0, 4.0, n)


def exact_batch(beta0: np.ndarray, delta: np.ndarray, times: np.ndarray) -> np.ndarray:
    n = len(delta)
    one = np.ones(n)
    a0, w0 = init_from_beta(beta0, delta, one, one)
    a, w = exact_trajectory(a0, w0, delta, np.broadcast_to([0.0, 1.0], (n, 2)), one, one, times)
    return a[..., None] * w


def best_of(f: object, repeat: int = 5) -> float:
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()  # type: ignore[operator]
        best = min(best, time.perf_counter() - t0)
    return best


def ode_loop(
    beta0: np.ndarray, delta: np.ndarray, times: np.ndarray, rtol: float = 1e-10
) -> np.ndarray:
    """One solve_ivp per configuration (the baseline)."""
    bstar = np.array([0.0, 1.0])
    out = np.empty((len(delta), len(times), 2))
    a0s, w0s = init_from_beta(beta0, delta, np.ones(len(delta)), np.ones(len(delta)))

    def rhs(_t: float, s: np.ndarray) -> np.ndarray:
        a, w = s[0], s[1:]
        g = a * w - bstar
        return np.concatenate([[-(w @ g)], -a * g])

    for i in range(len(delta)):
        sol = solve_ivp(rhs, (0.0, times[-1]), np.concatenate([[a0s[i]], w0s[i]]),
                        method="DOP853", t_eval=times, rtol=rtol, atol=1e-12 * rtol / 1e-10)
        out[i] = (sol.y[0][:, None] * sol.y[1:].T)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=1000)
    parser.add_argument("--subset", type=int, default=50)
    args = parser.parse_args()
    times = np.linspace(0.0, 20.0, 201)
    beta0, delta = configs(args.configs)

    exact_batch(beta0, delta, times)  # warm-up
    t_exact = best_of(lambda: exact_batch(beta0, delta, times))

    k = min(args.subset, args.configs)
    t0 = time.perf_counter()
    ref = ode_loop(beta0[:k], delta[:k], times)
    t_sub = time.perf_counter() - t0
    t_loop = t_sub * args.configs / k
    errs = np.max(np.abs(exact_batch(beta0[:k], delta[:k], times) - ref), axis=(1, 2))
    err = float(errs.max())
    j = int(np.argmax(errs))  # the worst one again, with a much tighter ODE
    tight = ode_loop(beta0[j : j + 1], delta[j : j + 1], times, rtol=1e-13)
    ex_j = exact_batch(beta0[j : j + 1], delta[j : j + 1], times)
    err_tight = float(np.max(np.abs(ex_j - tight)))

    one = np.ones(args.configs)
    a0, w0 = init_from_beta(beta0, delta, one, one)
    t0 = time.perf_counter()
    numeric_trajectory(a0, w0, one, one, times, np.broadcast_to([0.0, 1.0], (args.configs, 2)))
    t_stacked = time.perf_counter() - t0

    beta_big, delta_big = configs(10_000, seed=1)
    exact_batch(beta_big, delta_big, times)
    t_big = best_of(lambda: exact_batch(beta_big, delta_big, times))

    n = args.configs
    print(f"single-neuron, d = 2, {len(times)} times in [0, 20], delta ~ U(-4, 4)")
    print(f"  exact batch, {n} configs:                  {t_exact * 1e3:9.2f} ms  (best of 5)")
    print(f"  solve_ivp loop, {n} configs (extrapolated from {k} timed: {t_sub:.2f} s): "
          f"{t_loop * 1e3:9.0f} ms")
    print(f"  ratio solve_ivp loop / exact batch:          {t_loop / t_exact:9.0f}x  "
          f"(target >= 100x)")
    print(f"  [context] one stacked solve_ivp, {n} configs: {t_stacked * 1e3:9.0f} ms  "
          f"(ratio to exact {t_stacked / t_exact:.0f}x)")
    print(f"  max |beta_exact - beta_ode| on the {k} timed configs: {err:.1e} at rtol 1e-10; "
          f"worst config re-integrated at rtol 1e-13: {err_tight:.1e} (the gap is ODE error)")
    print(f"  exact batch, 10,000 configs x {len(times)} times: {t_big * 1e3:9.2f} ms  "
          f"(best of 5)")


if __name__ == "__main__":
    main()
