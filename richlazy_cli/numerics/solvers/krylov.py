"""A stiff integrator with a matrix-free linear solve: CVODE's BDF with GMRES on a
Jacobian–vector product (docs/hermite.md, "Integrators").

A gradient flow ``ẏ = f(y)`` whose converged modes are stiff (real eigenvalues of ``∂f/∂y``
far below ``−1/h``) holds an explicit Runge–Kutta step at the edge of its stability interval
long after the dynamics have slowed down. The backward differentiation formulas of order
1–5 are stable there, and each step solves ``(I − γ J) δ = r`` by Newton's method; with
GMRES on the products ``J v`` (scaled preconditioned GMRES, SPGMR) the Jacobian is never
formed, so the cost of a step is a few evaluations of ``f`` and of ``v ↦ J v`` whatever the
size of the state. SUNDIALS' CVODE (Hindmarsh et al., *SUNDIALS: Suite of nonlinear and
differential/algebraic equation solvers*, ACM TOMS 31, 2005) supplies the method, its
order and step selection and its dense output, through the ``scikit-sundae`` binding (its
wheels bundle SUNDIALS), imported when a solver is built.

The solvers are data: :data:`STEPPERS` names the step-by-step objects (the interface of
:class:`scipy.integrate.OdeSolver` that a model's stepping loop reads: ``step()``, ``t``,
``t_old``, ``y``, ``status``, ``dense_output()``, ``nfev``, ``njev``) and :data:`SOLVERS` the
functions that return the states at given times. A problem supplies ``fun(t, y)`` and
``linearise(t, y)``, which returns ``v ↦ J(y) v`` (so that what ``J v`` shares among the
directions at one ``y`` is computed once, when CVODE sets up its linear solve); ``nfev``
counts the calls of ``fun``, ``njev`` the products ``J v`` and ``nlin`` the calls of
``linearise``. A problem may also supply ``precondition(t, y)``, which returns
``(r, γ) ↦ z``, a cheap approximate solution of ``(I − γ J(y)) z = r``; GMRES then works on
the preconditioned system, and needs fewer products the more of ``J``'s spread of
eigenvalues the preconditioner takes away.

Pure numerics: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

Fun = Callable[[float, np.ndarray], np.ndarray]
"""The right-hand side ``f(t, y)``."""
Linearise = Callable[[float, np.ndarray], Callable[[np.ndarray], np.ndarray]]
"""``linearise(t, y)``: the map ``v ↦ ∂f/∂y(t, y) v``."""
Precondition = Callable[[float, np.ndarray], Callable[[np.ndarray, float], np.ndarray]]
"""``precondition(t, y)``: the map ``(r, γ) ↦ z``, an approximate solution of
``(I − γ ∂f/∂y(t, y)) z = r`` that is cheap to apply."""

KRYLOV_DIM = 10
"""Largest Krylov subspace of one GMRES solve (CVODE's default is 5; the flows of
docs/hermite.md need 1–10 iterations)."""


MAX_STALLED = 10
"""Consecutive steps that leave ``t`` unchanged (the step below the rounding of ``t``, as
CVODE's ``t + h = t`` warning) after which the solver reports failure."""


class _Dense:
    """CVODE's interpolant over its last internal step, as ``f(t)`` for ``t_old ≤ t ≤ t``."""

    def __init__(self, owner: CVODEKrylov) -> None:
        self.owner = owner
        self.t_old, self.t = owner.t_old, owner.t

    def __call__(self, t: float) -> np.ndarray:
        return self.owner._interpolate(float(t))


class CVODEKrylov:
    """CVODE's variable-order (1–5), variable-step BDF with a Newton–GMRES solve on
    ``linearise``'s products, stepped one internal step at a time towards ``t_bound``
    (never past it): the interface of :class:`scipy.integrate.OdeSolver` (``step``,
    ``t``, ``t_old``, ``y``, ``status``, ``dense_output``, ``nfev``, ``njev``).

    CVODE's local error test is scipy's: the weighted RMS norm with weights
    ``1 / (rtol |y_i| + atol)`` at most 1. The dense output is CVODE's own interpolating
    polynomial of the last step (its ``CVodeGetDky``), valid on ``[t_old, t]``.
    ``first_step`` is the size of the first step (0: CVODE's own estimate).

    ``precondition`` (optional, :data:`Precondition`) is set up where CVODE sets up its
    linear solve (the same states as ``linearise``) and applied on the right: GMRES solves
    ``(I − γJ) P⁻¹ x = r``, ``z = P⁻¹ x``, so its stopping test reads the true residual of
    the Newton system, not one scaled down by the preconditioner (on the left, the stiff
    components' residuals shrink by ``1/(1 + γλ)`` and the Newton iteration converged
    worse: on the hermite flow, more products and twice the linearisations). The map it
    returns receives CVODE's current ``γ`` at each solve, so one set-up serves as ``γ``
    changes between set-ups.
    """

    def __init__(self, fun: Fun, linearise: Linearise | None, t0: float, y0: np.ndarray,
                 t_bound: float, rtol: float, atol: float, max_order: int = 5,
                 krylov_dim: int = KRYLOV_DIM, first_step: float = 0.0,
                 precondition: Precondition | None = None) -> None:
        from sksundae.cvode import CVODE, CVODEJacTimes, CVODEPrecond

        self.fun, self.linearise = fun, linearise
        self.t = self.t_old = float(t0)
        self.t_bound = float(t_bound)
        self.y = np.array(y0, dtype=np.float64)
        self.nfev = 0
        self.njev = 0
        self.nlin = 0
        self.status = "running" if self.t_bound > self.t else "finished"
        self.message = ""
        self._stalled = 0
        self._jv: Callable[[np.ndarray], np.ndarray] | None = None

        def rhs(t: float, y: np.ndarray, yp: np.ndarray) -> None:
            self.nfev += 1
            yp[:] = fun(t, y)

        options: dict[str, Any] = {"method": "BDF", "rtol": rtol, "atol": atol,
                                   "linsolver": "gmres", "krylov_dim": krylov_dim,
                                   "max_order": max_order, "max_num_steps": 1_000_000,
                                   "first_step": float(first_step)}
        if linearise is not None:
            def setup(t: float, y: np.ndarray, yp: np.ndarray) -> None:
                self.nlin += 1
                self._jv = linearise(t, np.array(y))

            def times(t: float, y: np.ndarray, yp: np.ndarray, v: np.ndarray,
                      Jv: np.ndarray) -> None:
                jv = self._jv
                if jv is None:  # pragma: no cover - CVODE sets up before solving
                    setup(t, y, yp)
                    jv = self._jv
                    assert jv is not None
                self.njev += 1
                Jv[:] = jv(v)

            options["jactimes"] = CVODEJacTimes(setup, times)
        if precondition is not None:
            self._psolve: Callable[[np.ndarray, float], np.ndarray] | None = None

            def psetup(t: float, y: np.ndarray, yp: np.ndarray, jok: int, jnew: list[int],
                       gamma: float) -> None:
                self._psolve = precondition(t, np.array(y))
                jnew[0] = 1  # built at this state: CVODE need not ask again after a failure

            def psolve(t: float, y: np.ndarray, yp: np.ndarray, r: np.ndarray, z: np.ndarray,
                       gamma: float, delta: float, lr: int) -> None:
                solve = self._psolve
                if solve is None:  # pragma: no cover - CVODE sets up before solving
                    psetup(t, y, yp, 0, [0], gamma)
                    solve = self._psolve
                    assert solve is not None
                z[:] = solve(r, gamma)

            options["precond"] = CVODEPrecond(psetup, psolve, "right")
        self._cvode = CVODE(rhs, **options)
        if self.status == "running":
            self._cvode.init_step(self.t, self.y)

    def step(self) -> None:
        """One internal CVODE step (stopping at ``t_bound``)."""
        if self.status != "running":
            raise RuntimeError("the solver has finished")
        res = self._cvode.step(self.t_bound, method="onestep", tstop=self.t_bound)
        if not res.success:
            self._fail(str(res.message))
            return
        t = float(res.t)
        self._stalled = self._stalled + 1 if t <= self.t else 0
        self.t_old, self.t = self.t, t
        self.y = np.array(res.y, dtype=np.float64).reshape(-1)
        if not np.all(np.isfinite(self.y)):
            self._fail("the state is not finite")
        elif self._stalled >= MAX_STALLED:
            self._fail(f"the step no longer advances t = {self.t}")
        elif self.t >= self.t_bound:
            self.status = "finished"

    def _fail(self, message: str) -> None:
        self.status = "failed"
        self.message = message

    def dense_output(self) -> _Dense:
        """The interpolant of the last step."""
        return _Dense(self)

    def _interpolate(self, t: float) -> np.ndarray:
        if t == self.t:
            return self.y.copy()
        if not self.t_old <= t <= self.t:
            raise ValueError(f"t = {t} outside the last step [{self.t_old}, {self.t}]")
        res = self._cvode.step(t)  # behind CVODE's t: interpolated, the state is kept
        if not res.success:  # pragma: no cover - CVodeGetDky fails only outside the step
            raise RuntimeError(str(res.message))
        return np.array(res.y, dtype=np.float64).reshape(-1)


STEPPERS: dict[str, type[CVODEKrylov]] = {"CVODE": CVODEKrylov}
"""The step-by-step stiff solvers by ``method`` name."""


def solve_cvode(fun: Fun, linearise: Linearise | None, y0: np.ndarray, times: np.ndarray,
                rtol: float, atol: float,
                precondition: Precondition | None = None) -> dict[str, Any]:
    """The states at ``times`` (increasing, ``times[0]`` the initial time) of ``ẏ = f(t, y)``
    by :class:`CVODEKrylov`: ``{"y": (len(times), N), "nfev", "njev", "nlin", "status", "t"}``
    (``status`` ``"finished"`` or ``"failed"``; on failure the rows past ``t`` are NaN)."""
    times = np.asarray(times, dtype=np.float64)
    out = np.full((times.size, np.size(y0)), np.nan)
    solver = CVODEKrylov(fun, linearise, float(times[0]), y0, float(times[-1]), rtol, atol,
                         precondition=precondition)
    out[0] = solver.y
    i = 1
    while i < times.size and solver.status == "running":
        solver.step()
        if solver.status == "failed":
            break
        dense = solver.dense_output()
        while i < times.size and times[i] <= solver.t:
            out[i] = dense(times[i])
            i += 1
    return {"y": out, "nfev": solver.nfev, "njev": solver.njev, "nlin": solver.nlin,
            "status": "failed" if solver.status == "failed" else "finished", "t": solver.t}


SOLVERS: dict[str, Callable[..., dict[str, Any]]] = {"CVODE": solve_cvode}
"""The stiff solvers by ``method`` name, as functions of ``(fun, linearise, y0, times, rtol,
atol)``."""
