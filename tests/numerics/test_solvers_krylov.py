"""The matrix-free BDF solver (richlazy_cli/numerics/solvers/krylov.py) against closed forms:
a stiff linear system ``ẏ = A y`` (``y(t) = Q e^{Λt} Qᵀ y0``) and ``ẏ = y²`` (blow-up at
``t = 1/y0``)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from richlazy_cli.numerics.solvers.krylov import SOLVERS, STEPPERS, CVODEKrylov, solve_cvode

pytest.importorskip("sksundae")

N = 20
RATES = -np.logspace(-1.0, 3.0, N)
"""Eigenvalues of ``A``: four decades of stiffness, the slowest mode 0.1."""


def _system() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    Q, _ = np.linalg.qr(rng.standard_normal((N, N)))
    return Q @ np.diag(RATES) @ Q.T, Q, rng.standard_normal(N)


A, Q, Y0 = _system()


def exact(t: np.ndarray) -> np.ndarray:
    """``y(t)`` for each ``t``, (len(t), N)."""
    return (np.exp(np.outer(t, RATES)) * (Q.T @ Y0)[None, :]) @ Q.T


class Counting:
    """``f(t, y) = A y`` and its linearisation, counting their calls independently."""

    def __init__(self) -> None:
        self.fun_calls = self.jv_calls = self.lin_calls = 0

    def fun(self, t: float, y: np.ndarray) -> np.ndarray:
        self.fun_calls += 1
        return A @ y

    def linearise(self, t: float, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        self.lin_calls += 1

        def jv(v: np.ndarray) -> np.ndarray:
            self.jv_calls += 1
            return A @ v

        return jv


def test_the_tables_name_the_solver() -> None:
    assert SOLVERS["CVODE"] is solve_cvode
    assert STEPPERS["CVODE"] is CVODEKrylov


@pytest.mark.parametrize("rtol", [1e-6, 1e-9])
def test_a_stiff_linear_system_within_its_tolerance(rtol: float) -> None:
    """The global error stays within 10·rtol of the initial size at every output time, and
    the counts are the calls the problem saw: far fewer than an explicit method needs at the
    edge of its stability interval (Dormand–Prince: ``h |λ_max| ≤ 3.3``, 6 evaluations a
    step, over the whole horizon)."""
    prob = Counting()
    times = np.linspace(0.0, 10.0, 11)
    res = solve_cvode(prob.fun, prob.linearise, Y0, times, rtol, 1e-12)
    assert res["status"] == "finished" and res["t"] == 10.0
    err = np.max(np.abs(res["y"] - exact(times)))
    assert err <= 10.0 * rtol * np.max(np.abs(Y0)), err
    assert (res["nfev"], res["njev"], res["nlin"]) == (prob.fun_calls, prob.jv_calls,
                                                      prob.lin_calls)
    assert res["njev"] > 0 and res["nlin"] > 0
    explicit = 6.0 * 10.0 * np.max(np.abs(RATES)) / 3.3
    assert res["nfev"] + res["njev"] < explicit / 4.0


def test_a_tighter_tolerance_costs_more_and_errs_less() -> None:
    times = np.linspace(0.0, 10.0, 3)
    loose, tight = (solve_cvode(Counting().fun, Counting().linearise, Y0, times, rtol, 1e-12)
                    for rtol in (1e-5, 1e-9))
    errs = [np.max(np.abs(r["y"] - exact(times))) for r in (loose, tight)]
    assert errs[1] < errs[0] / 100.0
    assert tight["nfev"] > loose["nfev"]


def test_an_exact_preconditioner_leaves_gmres_one_product_per_newton_iteration() -> None:
    """With ``z = (I − γA)⁻¹ r`` as the preconditioner, each linear solve converges in one
    GMRES iteration: at most one product per Newton iteration (an evaluation of ``f`` past
    each step's first), far fewer than without it, and the same accuracy."""
    def precondition(t: float, y: np.ndarray) -> Callable[[np.ndarray, float], np.ndarray]:
        calls.append(t)
        return lambda r, gamma: Q @ ((Q.T @ r) / (1.0 - gamma * RATES))

    calls: list[float] = []
    times = np.linspace(0.0, 10.0, 11)
    plain = solve_cvode(Counting().fun, Counting().linearise, Y0, times, 1e-8, 1e-12)
    prob = Counting()
    pre = solve_cvode(prob.fun, prob.linearise, Y0, times, 1e-8, 1e-12, precondition=precondition)
    assert pre["njev"] < 0.5 * plain["njev"], (pre["njev"], plain["njev"])
    assert pre["njev"] <= pre["nfev"] and len(calls) > 0
    for res in (plain, pre):
        assert np.max(np.abs(res["y"] - exact(times))) <= 1e-7 * np.max(np.abs(Y0))


def test_without_a_linearisation_cvode_differences_the_right_hand_side() -> None:
    prob = Counting()
    res = solve_cvode(prob.fun, None, Y0, np.array([0.0, 5.0]), 1e-8, 1e-12)
    assert res["njev"] == 0 and prob.jv_calls == 0 and res["nfev"] == prob.fun_calls
    np.testing.assert_allclose(res["y"][-1], exact(np.array([5.0]))[0], atol=1e-7)


def test_the_stepper_stops_at_the_bound_and_interpolates_its_last_step() -> None:
    prob = Counting()
    solver = CVODEKrylov(prob.fun, prob.linearise, 0.0, Y0, 2.5, 1e-10, 1e-13)
    while solver.status == "running":
        t_before = solver.t
        solver.step()
        assert solver.t_old == t_before < solver.t <= 2.5
        if solver.t > 1.0:
            break
    dense = solver.dense_output()
    mid = 0.5 * (solver.t_old + solver.t)
    for t in (solver.t_old, mid, solver.t):
        np.testing.assert_allclose(dense(t), exact(np.array([t]))[0], atol=1e-8)
    with pytest.raises(ValueError, match="outside the last step"):
        dense(solver.t + 1.0)
    solver.step()  # interpolating left the state alone: the next step carries on
    np.testing.assert_allclose(solver.y, exact(np.array([solver.t]))[0], atol=1e-8)
    while solver.status == "running":
        solver.step()
    assert solver.status == "finished" and solver.t == 2.5
    with pytest.raises(RuntimeError, match="finished"):
        solver.step()


def test_a_blow_up_is_reported_as_a_failure() -> None:
    """``ẏ = y²``, ``y(0) = 1``: ``y = 1/(1 − t)`` blows up at ``t = 1``; asked for ``t = 2``
    the solver fails before it, the outputs it reached exact and the rest NaN."""
    times = np.array([0.0, 0.5, 1.5, 2.0])
    res = solve_cvode(lambda t, y: y * y, None, np.ones(2), times, 1e-8, 1e-12)
    assert res["status"] == "failed" and 0.5 < res["t"] < 1.0
    np.testing.assert_allclose(res["y"][1], 2.0, rtol=1e-6)
    assert np.all(np.isnan(res["y"][2:]))
