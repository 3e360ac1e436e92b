"""Explicit where the flow is not stiff, stiff-stable where it is: Dormand–Prince 5(4) and
CVODE's BDF switched by a stiffness test (docs/hermite.md, "Integrators").

A gradient flow whose converged modes are stiff holds an explicit step at the edge of its
real stability interval long after the dynamics have slowed down, while its search and
escape phases are accuracy-limited, where the explicit pair is as cheap as anything. As
LSODA switches between Adams and BDF (Petzold, *Automatic selection of methods for solving
stiff and nonstiff systems of ordinary differential equations*, SIAM J. Sci. Stat. Comput.
4, 1983), :class:`SwitchingRK45CVODE` runs SciPy's ``RK45`` while its steps are set by
accuracy and hands the current time and state to :class:`.krylov.CVODEKrylov` once they are
set by stability; and back when CVODE's steps have become short enough for the explicit
pair to be stable on them.

**The stiffness test** compares the explicit pair's steps with its stability interval
``[−3.307, 0]`` on the real axis: every :data:`CHECK_EVERY` accepted steps, ``ρ``, the
largest ``|λ|`` of ``J = ∂f/∂y`` at the current state, is estimated by
:data:`POWER_ITERATIONS` power iterations on ``linearise``'s products (warm-started from the
previous check's vector; for a gradient flow ``J`` is minus a Hessian, symmetric, and the
estimate ``‖J v‖`` with ``‖v‖ = 1`` approaches ``ρ`` from below), and a window whose mean
step ``h̄`` has ``h̄ ρ ≥`` :data:`STIFF_EDGE` counts as stability-limited; :data:`STIFF_CHECKS`
such windows in a row switch to CVODE. Hairer's cost-free estimate from the last two
stages of a Dormand–Prince step (the test of the code DOPRI5, Hairer & Wanner, *Solving
Ordinary Differential Equations II*, Sec. IV.2) is not used: it measures ``f``'s rate along
the step's error, which on the hermite flow's first plateaus is the slow dynamics', not the
stiff mode's, so it saw the step pinned at the edge (``h ρ ≈ 3.3``) hundreds of time units
late (docs/hermite.md, "Integrators").

**Back to the explicit pair** by cost: once CVODE's step has grown past the explicit pair's
stable step ``z/ρ`` (``ρ`` the last estimate before the switch; its start-up from order 1 is
over), its cost per unit of time over the last :data:`BACK_STEPS` steps (evaluations plus
products at ``product_cost`` evaluations each) is compared with the least RK45 can spend
there, :data:`RK45_EVALUATIONS_PER_STEP` per stable step ``z/ρ``; more than
:data:`BACK_COST` times that (an escape, whose steps accuracy sets short) switches back. A
switch restarts the next method from the current state (RK45 pays two evaluations for its
first step and two windows of the stiffness test before it can hand over again, CVODE its
climb from order 1), hence the margin.

The stepper has the interface of :class:`scipy.integrate.OdeSolver` that a model's stepping
loop reads (``step``, ``t``, ``t_old``, ``y``, ``status``, ``dense_output``, ``nfev``,
``njev``); ``nfev``, ``njev`` and ``nlin`` add up both methods' counts and the stiffness
test's products (without ``linearise``, each product is a difference quotient of ``f`` and
counts in ``nfev``), ``switches`` counts the hand-overs and ``stiff_time`` the time
integrated by CVODE. The explicit pair runs at ``rtol``/``atol``, CVODE at
``stiff_rtol``/``stiff_atol`` (BDF's global error per unit of tolerance is larger than
Dormand–Prince's, so each method has its own), with ``precondition`` for its GMRES solves
where given (:class:`.krylov.CVODEKrylov`).

Pure numerics: no I/O.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.integrate import RK45

from .krylov import CVODEKrylov, Fun, Linearise, Precondition

STIFF_EDGE = 3.0
"""Mean ``h ρ`` over a window from which the explicit steps count as stability-limited
(about 0.9 of Dormand–Prince 5(4)'s real stability edge, 3.307: pinned there, its steps
oscillate about the edge, ``h ρ`` from 3.0 to 3.7 on the hermite flow)."""
CHECK_EVERY = 20
"""Accepted explicit steps between two estimates of ``ρ`` (a window)."""
POWER_ITERATIONS = 5
"""Products ``J v`` per estimate of ``ρ``: with 120–140 evaluations in a window, the test
costs about 4% of the explicit phase."""
STIFF_CHECKS = 2
"""Consecutive stability-limited windows that switch to CVODE."""
RK45_EVALUATIONS_PER_STEP = 7.0
"""RK45's evaluations per accepted step at its stability edge (six stages and one rejected
attempt in six steps)."""
BACK_STEPS = 20
"""CVODE steps over which its cost per unit of time is measured."""
BACK_COST = 2.0
"""CVODE's cost per unit of time, relative to RK45's least, that switches back."""


class SwitchingRK45CVODE:
    """RK45 while its steps are accuracy-limited, CVODE's BDF with Newton–GMRES on
    ``linearise``'s products while they are stability-limited (the module docstring), stepped
    one internal step at a time towards ``t_bound``: the interface of
    :class:`scipy.integrate.OdeSolver`. ``back`` allows the switch from CVODE back to RK45;
    ``product_cost`` is the price of one product ``J v`` in evaluations of ``f``.
    """

    def __init__(self, fun: Fun, linearise: Linearise | None, t0: float, y0: np.ndarray,
                 t_bound: float, rtol: float, atol: float, stiff_rtol: float | None = None,
                 stiff_atol: float | None = None, back: bool = True,
                 product_cost: float = 1.0, precondition: Precondition | None = None) -> None:
        self.fun, self.linearise, self.precondition = fun, linearise, precondition
        self.t_bound = float(t_bound)
        self.rtol, self.atol = float(rtol), float(atol)
        self.stiff_rtol = self.rtol if stiff_rtol is None else float(stiff_rtol)
        self.stiff_atol = self.atol if stiff_atol is None else float(stiff_atol)
        self.back = back
        self.product_cost = float(product_cost)
        self._spent: list[tuple[float, float]] = []
        self.switches = 0
        self.stiff_time = 0.0
        self._counts = {"nfev": 0, "njev": 0, "nlin": 0}
        self._tests = {"nfev": 0, "njev": 0, "nlin": 0}
        self._rho = 0.0
        self._v: np.ndarray | None = None
        self._window, self._in_window = 0.0, 0
        self._stiff = self._calm = 0
        self._climbed = self._pending = False
        self._solver: Any = self._explicit(float(t0), np.asarray(y0, dtype=np.float64))

    # -- the two methods ----------------------------------------------------------------------
    def _explicit(self, t: float, y: np.ndarray) -> RK45:
        self._stiff = self._calm = 0
        self._window, self._in_window = 0.0, 0
        return RK45(self.fun, t, y.copy(), self.t_bound, rtol=self.rtol, atol=self.atol)

    def _implicit(self, t: float, y: np.ndarray, h: float) -> CVODEKrylov:
        self._spent = []
        self._climbed = False
        return CVODEKrylov(self.fun, self.linearise, t, y, self.t_bound, self.stiff_rtol,
                           self.stiff_atol, first_step=h, precondition=self.precondition)

    @property
    def stiff(self) -> bool:
        """Whether CVODE takes the next step."""
        return isinstance(self._solver, CVODEKrylov)

    def _switch(self) -> None:
        old = self._solver
        for key in self._counts:
            self._counts[key] += int(getattr(old, key, 0))
        h = old.t - old.t_old
        if self.stiff:
            self._solver = self._explicit(old.t, old.y)
        else:
            self._solver = self._implicit(old.t, old.y, h)
        self.switches += 1
        self._pending = False

    # -- the OdeSolver interface ---------------------------------------------------------------
    @property
    def t(self) -> float:
        return float(self._solver.t)

    @property
    def t_old(self) -> float:
        t_old = self._solver.t_old
        return float(self._solver.t if t_old is None else t_old)

    @property
    def y(self) -> np.ndarray:
        return self._solver.y  # type: ignore[no-any-return]

    @property
    def status(self) -> str:
        return str(self._solver.status)

    @property
    def message(self) -> str:
        return str(getattr(self._solver, "message", "") or "")

    @property
    def f(self) -> np.ndarray | None:
        """``f(t, y)`` where the last step evaluated it (RK45's), else None."""
        return getattr(self._solver, "f", None)  # type: ignore[no-any-return]

    @property
    def nfev(self) -> int:
        return self._counts["nfev"] + self._tests["nfev"] + int(self._solver.nfev)

    @property
    def njev(self) -> int:
        return self._counts["njev"] + self._tests["njev"] + int(getattr(self._solver, "njev", 0))

    @property
    def nlin(self) -> int:
        return self._counts["nlin"] + self._tests["nlin"] + int(getattr(self._solver, "nlin", 0))

    def dense_output(self) -> Any:
        """The interpolant of the last step (of the method that took it)."""
        return self._solver.dense_output()

    def step(self) -> None:
        """One step of the current method; the stiffness test decides the next one's."""
        if self.status != "running":
            raise RuntimeError("the solver has finished")
        if self._pending:
            self._switch()
        solver = self._solver
        solver.step()
        if solver.status != "running":
            return
        h = solver.t - solver.t_old
        if self.stiff:
            self.stiff_time += h
            self._watch_implicit(solver, h)
        else:
            self._watch_explicit(solver, h)

    def _watch_explicit(self, solver: RK45, h: float) -> None:
        """Every :data:`CHECK_EVERY` accepted steps: the window's mean step against the
        stability edge (the module docstring)."""
        self._window += h
        self._in_window += 1
        if self._in_window < CHECK_EVERY:
            return
        h_mean = self._window / self._in_window
        self._window, self._in_window = 0.0, 0
        self._rho = self._spectral_radius(solver.t, solver.y, solver.f)
        if h_mean * self._rho >= STIFF_EDGE:
            self._stiff += 1
            if self._stiff >= STIFF_CHECKS:
                self._pending = True
        else:
            self._stiff = 0

    def _spectral_radius(self, t: float, y: np.ndarray, f: np.ndarray) -> float:
        """``ρ(∂f/∂y)`` at ``(t, y)`` by :data:`POWER_ITERATIONS` power iterations, ``f`` the
        right-hand side there (the difference quotients' base without ``linearise``)."""
        if self._v is None:
            self._v = np.random.default_rng(0).standard_normal(y.size)
        v = self._v / np.linalg.norm(self._v)
        if self.linearise is not None:
            jv = self.linearise(t, y)
            self._tests["nlin"] += 1
        else:
            scale = float(np.linalg.norm(y))
            eps = np.sqrt(np.finfo(float).eps) * max(scale, 1.0)

            def jv(u: np.ndarray) -> np.ndarray:
                self._tests["nfev"] += 1
                return (self.fun(t, y + eps * u) - f) / eps
        rho = 0.0
        for _ in range(POWER_ITERATIONS):
            w = jv(v)
            self._tests["njev"] += 1
            rho = float(np.linalg.norm(w))
            if not rho > 0.0 or not np.isfinite(rho):
                return 0.0
            v = w / rho
        self._v = v
        return rho

    def _watch_implicit(self, solver: CVODEKrylov, h: float) -> None:
        """CVODE's cost per unit of time against RK45's least (the module docstring)."""
        if not self.back or self._rho <= 0.0:
            return
        if h * self._rho >= STIFF_EDGE:
            self._climbed = True
        if not self._climbed:
            return
        self._spent.append((solver.t, solver.nfev + self.product_cost * solver.njev))
        if len(self._spent) <= BACK_STEPS:
            return
        (t0, cost0), (t1, cost1) = self._spent.pop(0), self._spent[-1]
        least = RK45_EVALUATIONS_PER_STEP * self._rho / STIFF_EDGE
        if cost1 - cost0 > BACK_COST * least * (t1 - t0):
            self._pending = True
