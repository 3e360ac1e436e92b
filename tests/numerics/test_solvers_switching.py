"""RK45 and CVODE switched by stiffness (richlazy_cli/numerics/solvers/switching.py) against
closed forms: a linear system ``ẏ = A y`` whose fast modes make it stiff once they have
decayed (``y(t) = Q e^{Λt} Qᵀ y0``), the same system without them, and a stiff system driven
by a fast oscillation, ``ẏ = A (y − g) + ġ`` with ``y(t) = g(t) + Q e^{Λt} Qᵀ (y0 − g(0))``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from scipy.integrate import RK45

from richlazy_cli.numerics.solvers import switching
from richlazy_cli.numerics.solvers.switching import SwitchingRK45CVODE

pytest.importorskip("sksundae")

N = 12


def _system(rates: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    Q, _ = np.linalg.qr(rng.standard_normal((N, N)))
    return Q @ np.diag(rates) @ Q.T, Q, rng.standard_normal(N)


STIFF = -np.logspace(-1.0, 2.0, N)
"""Three decades: once the modes near −100 have decayed, RK45's step is held at 3.3/100."""
CALM = -np.logspace(-1.0, 0.0, N)
"""One decade: RK45's step is set by accuracy throughout."""


class Counting:
    """``f(t, y) = A y + b(t)`` and its linearisation, counting their calls."""

    def __init__(self, A: np.ndarray, b: Callable[[float], np.ndarray] | None = None) -> None:
        self.A, self.b = A, b
        self.fun_calls = self.jv_calls = self.lin_calls = 0

    def fun(self, t: float, y: np.ndarray) -> np.ndarray:
        self.fun_calls += 1
        return self.A @ y + (0.0 if self.b is None else self.b(t))

    def linearise(self, t: float, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        self.lin_calls += 1

        def jv(v: np.ndarray) -> np.ndarray:
            self.jv_calls += 1
            return self.A @ v

        return jv


def _run(solver: SwitchingRK45CVODE, times: np.ndarray) -> np.ndarray:
    """The states at ``times`` (increasing, after ``solver.t``) from the dense output."""
    out = np.empty((times.size, solver.y.size))
    i = 0
    while solver.status == "running":
        solver.step()
        dense = solver.dense_output()
        while i < times.size and times[i] <= solver.t:
            out[i] = dense(times[i])
            i += 1
    assert solver.status == "finished" and i == times.size
    return out


def test_a_stiff_system_switches_to_cvode_and_stays_within_tolerance() -> None:
    A, Q, y0 = _system(STIFF)
    f = Counting(A)
    t_end = 40.0
    solver = SwitchingRK45CVODE(f.fun, f.linearise, 0.0, y0, t_end, 1e-7, 1e-10, 1e-8, 1e-11)
    times = np.linspace(0.5, t_end, 80)
    got = _run(solver, times)
    want = (np.exp(np.outer(times, STIFF)) * (Q.T @ y0)[None, :]) @ Q.T
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6 * np.abs(y0).max())
    assert solver.switches == 1
    assert solver.stiff_time > 0.9 * t_end  # the modes faster than −2 decay by t ≈ 3
    assert (solver.nfev, solver.njev, solver.nlin) == (f.fun_calls, f.jv_calls, f.lin_calls)
    alone = RK45(Counting(A).fun, 0.0, y0, t_end, rtol=1e-7, atol=1e-10)
    while alone.status == "running":
        alone.step()
    assert solver.nfev + solver.njev < alone.nfev / 3  # RK45 held at h = 3.3/100 to the end


def test_a_system_that_never_turns_stiff_is_integrated_by_rk45_alone() -> None:
    """The same steps as SciPy's RK45, bitwise; the stiffness test's products only added."""
    A, _, y0 = _system(CALM)
    f = Counting(A)
    solver = SwitchingRK45CVODE(f.fun, f.linearise, 0.0, y0, 30.0, 1e-7, 1e-10, 1e-8, 1e-11)
    alone = RK45(Counting(A).fun, 0.0, y0, 30.0, rtol=1e-7, atol=1e-10)
    steps = 0
    while solver.status == "running":
        solver.step()
        alone.step()
        steps += 1
        assert solver.t == alone.t
        np.testing.assert_array_equal(solver.y, alone.y)
    assert alone.status == "finished" and steps > 2 * switching.CHECK_EVERY
    assert solver.switches == 0 and solver.stiff_time == 0.0
    assert solver.nfev == alone.nfev == f.fun_calls
    assert solver.njev == f.jv_calls == switching.POWER_ITERATIONS * (steps
                                                                      // switching.CHECK_EVERY)


def test_a_fast_oscillation_on_a_stiff_system_switches_back_to_rk45() -> None:
    """``g(t) = sin(φ(t))`` whose frequency ``φ'`` rises from 0 to 400 about t = 12: CVODE's
    steps shorten until it costs more per unit of time than RK45 at its stable step, and the
    stepper hands back; the solution stays within tolerance throughout."""
    A, Q, y0 = _system(STIFF)
    omega, t_on, width = 400.0, 12.0, 0.5

    def phase(t: float) -> float:  # ∫ ω σ((s − t_on)/width) ds
        return omega * width * float(np.logaddexp(0.0, (t - t_on) / width))

    def rate(t: float) -> float:
        return omega / (1.0 + np.exp(-(t - t_on) / width))

    u = np.ones(N) / np.sqrt(N)

    def g(t: float) -> np.ndarray:
        return np.sin(phase(t)) * u

    def b(t: float) -> np.ndarray:  # ẏ = A (y − g) + ġ
        return -A @ g(t) + np.cos(phase(t)) * rate(t) * u

    f = Counting(A, b)
    y_start = y0 + g(0.0)
    t_end = 14.0
    solver = SwitchingRK45CVODE(f.fun, f.linearise, 0.0, y_start, t_end, 1e-7, 1e-10, 1e-8,
                                1e-11)
    times = np.linspace(0.5, t_end, 60)
    got = _run(solver, times)
    want = ((np.exp(np.outer(times, STIFF)) * (Q.T @ y0)[None, :]) @ Q.T
            + np.array([g(t) for t in times]))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    assert solver.switches >= 2
    assert not solver.stiff  # RK45 follows the oscillation to the end
