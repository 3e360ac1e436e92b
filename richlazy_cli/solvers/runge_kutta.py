"""Batched embedded Runge–Kutta solvers on torch devices: the tableau as data, the algorithm once.

SciPy's explicit solvers (:class:`scipy.integrate.RK45`, ``RK23``) integrate one state; the
flows of a batch of configurations on a GPU are better integrated together, each with its own
adaptive step (docs/engine.md, "Solvers"). :class:`Tableau` holds a pair's coefficients —
read from SciPy's solver class itself, so both integrate with the same numbers — and
:class:`BatchedRungeKutta` is the step-size control and dense output, written once for any
such pair. A model supplies only the right-hand side ``fun(y, idx)`` and decides what to
record from :meth:`BatchedRungeKutta.dense`.

Pure numerics: no I/O; torch is passed in (never imported here).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.integrate import RK23, RK45

SAFETY, MIN_FACTOR, MAX_FACTOR = 0.9, 0.2, 10.0
"""Step-size control constants of SciPy's explicit Runge–Kutta solvers."""


@dataclass(frozen=True)
class Tableau:
    """An embedded explicit Runge–Kutta pair with a dense output: Butcher matrix ``A``
    (n_stages, n_stages), weights ``B`` and nodes ``C`` (n_stages,), error weights ``E``
    (n_stages + 1,), interpolant ``P`` (n_stages + 1, interpolant order), the ``order`` of the
    propagated solution and that of the error estimate."""

    name: str
    A: np.ndarray
    B: np.ndarray
    C: np.ndarray
    E: np.ndarray
    P: np.ndarray
    order: int
    error_estimator_order: int

    @property
    def n_stages(self) -> int:
        return int(self.B.shape[0])

    @classmethod
    def of(cls, solver: Any) -> Tableau:
        """The tableau of one of SciPy's explicit Runge–Kutta classes."""
        return cls(solver.__name__, solver.A, solver.B, solver.C, solver.E, solver.P,
                   int(solver.order), int(solver.error_estimator_order))


DOPRI5 = Tableau.of(RK45)
"""Dormand–Prince 5(4) (SciPy's ``RK45``)."""
BOGACKI_SHAMPINE3 = Tableau.of(RK23)
"""Bogacki–Shampine 3(2) (SciPy's ``RK23``)."""
TABLEAUS: dict[str, Tableau] = {"RK45": DOPRI5, "RK23": BOGACKI_SHAMPINE3}
"""The batched solvers by SciPy's method name: the ``method`` a model may pass."""


def _rms(x: Any) -> Any:
    """SciPy's RMS norm per configuration: ``‖x_b‖ / √N``."""
    return torch_norm(x) / float(x.shape[1]) ** 0.5


def torch_norm(x: Any) -> Any:
    """The Euclidean norm of each row of ``x`` (B, N)."""
    return (x * x).sum(dim=1).sqrt()


class BatchedRungeKutta:
    """An embedded explicit Runge–Kutta pair with per-configuration adaptive steps on
    flattened states (B, N), on any torch device.

    ``fun(y, idx)`` returns ``ẏ`` (B', N) for the configurations ``idx`` (an autonomous
    flow); ``tableau`` is the pair (:data:`DOPRI5` by default). SciPy's step control, carried
    over to a batch: the same initial-step rule, RMS error norm, step-size factors (safety
    0.9, within [0.2, 10], no growth right after a rejection) and minimum step, so each
    configuration takes the steps SciPy's solver of the same tableau takes for it alone.
    """

    tableau: Tableau = None  # type: ignore[assignment]  # set by __init__ or a subclass

    def __init__(self, torch: Any, fun: Callable[[Any, Any], Any], y0: Any, t_bound: float,
                 rtol: float, atol: np.ndarray, tableau: Tableau | None = None) -> None:
        tab = tableau or self.tableau or DOPRI5
        self.tableau = tab
        self.error_exponent = -1.0 / (tab.error_estimator_order + 1)
        self.torch = torch
        self.fun = fun
        dev, dt = y0.device, y0.dtype
        self.A = torch.as_tensor(tab.A, dtype=dt, device=dev)
        self.Bw = torch.as_tensor(tab.B, dtype=dt, device=dev)
        self.E = torch.as_tensor(tab.E, dtype=dt, device=dev)
        self.Pd = torch.as_tensor(tab.P, dtype=dt, device=dev)
        self.C = tab.C
        B, N = y0.shape
        self.B = B
        self.t_bound = float(t_bound)
        self.rtol = float(rtol)
        self.atol_host = np.asarray(atol, dtype=np.float64)
        self.atol = torch.as_tensor(self.atol_host, dtype=dt, device=dev)[:, None]
        self.t = np.zeros(B)
        self.t_old = np.zeros(B)
        self.y = y0.clone()
        self.y_old = y0.clone()
        self.K = torch.empty((self.tableau.n_stages + 1, B, N), dtype=dt, device=dev)
        self.running = np.ones(B, dtype=bool)
        self.failed = np.zeros(B, dtype=bool)
        self.rejected = np.zeros(B, dtype=bool)  # the current step has been rejected before
        self.nfev = np.zeros(B, dtype=np.int64)
        all_ = np.arange(B)
        self.f = fun(self.y, all_)
        self.nfev += 1
        self.h_abs = self._initial_step()

    def _initial_step(self) -> np.ndarray:
        """SciPy's ``select_initial_step`` for each configuration."""
        torch = self.torch
        y0, f0 = self.y, self.f
        scale = self.atol + torch.abs(y0) * self.rtol
        d0 = _rms(y0 / scale).cpu().numpy()
        d1 = _rms(f0 / scale).cpu().numpy()
        interval = self.t_bound
        h0 = np.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / np.maximum(d1, 1e-300))
        h0 = np.minimum(h0, interval)
        h0_t = torch.as_tensor(h0, dtype=y0.dtype, device=y0.device)[:, None]
        f1 = self.fun(y0 + h0_t * f0, np.arange(self.B))
        self.nfev += 1
        d2 = _rms((f1 - f0) / scale).cpu().numpy() / h0
        small = (d1 <= 1e-15) & (d2 <= 1e-15)
        power = 1.0 / (self.tableau.error_estimator_order + 1)
        with np.errstate(divide="ignore"):
            h1 = np.where(small, np.maximum(1e-6, h0 * 1e-3),
                          (0.01 / np.maximum(d1, d2)) ** power)
        return np.minimum.reduce([100 * h0, h1, np.full(self.B, interval)])

    def step(self) -> np.ndarray:
        """One attempt for every running configuration; returns the indices that accepted
        a step (their ``t``, ``y``, ``f`` advanced; dense output available)."""
        torch = self.torch
        idx = np.flatnonzero(self.running)
        t = self.t[idx]
        min_step = 10.0 * np.abs(np.nextafter(t, np.inf) - t)
        h_abs = self.h_abs[idx].copy()
        fresh = ~self.rejected[idx]
        h_abs = np.where(fresh & (h_abs < min_step), min_step, h_abs)
        too_small = h_abs < min_step
        if too_small.any():
            self.failed[idx[too_small]] = True
            self.running[idx[too_small]] = False
            keep = ~too_small
            idx, t, h_abs = idx[keep], t[keep], h_abs[keep]
            if idx.size == 0:
                return idx
        t_new = np.minimum(t + h_abs, self.t_bound)
        h = t_new - t
        full = idx.size == self.B
        sel = slice(None) if full else torch.as_tensor(idx, device=self.y.device)
        y, f = self.y[sel], self.f[sel]
        K = self.K[:, sel] if full else self.K[:, sel].clone()
        h_t = torch.as_tensor(h, dtype=y.dtype, device=y.device)[:, None]
        K[0] = f
        for s in range(1, self.tableau.n_stages):
            dy = torch.einsum("snd,s->nd", K[:s], self.A[s, :s]) * h_t
            K[s] = self.fun(y + dy, idx)
        y_new = y + h_t * torch.einsum("snd,s->nd", K[:-1], self.Bw)
        f_new = self.fun(y_new, idx)
        K[-1] = f_new
        self.nfev[idx] += self.tableau.n_stages
        scale = self.atol[sel] + torch.maximum(torch.abs(y), torch.abs(y_new)) * self.rtol
        err = _rms(torch.einsum("snd,s->nd", K, self.E) * h_t / scale).cpu().numpy()
        ok = err < 1.0
        with np.errstate(divide="ignore"):
            grow = np.where(err == 0, MAX_FACTOR,
                            np.minimum(MAX_FACTOR, SAFETY * err**self.error_exponent))
            shrink = np.maximum(MIN_FACTOR, SAFETY * err**self.error_exponent)
        grow = np.where(self.rejected[idx], np.minimum(1.0, grow), grow)
        self.h_abs[idx] = h_abs * np.where(ok, grow, shrink)
        self.rejected[idx] = ~ok
        acc = idx[ok]
        if acc.size:
            rows = torch.as_tensor(np.flatnonzero(ok), device=self.y.device)
            dest = torch.as_tensor(acc, device=self.y.device)
            self.y_old[dest] = y[rows]
            self.y[dest] = y_new[rows]
            self.f[dest] = f_new[rows]
            if not full:
                self.K[:, dest] = K[:, rows]
            self.t_old[acc] = t[ok]
            self.t[acc] = t_new[ok]
            self.running[acc] = self.t[acc] < self.t_bound
        return acc

    def dense(self, b: int, times: np.ndarray) -> Any:
        """States (len(times), N) of configuration ``b`` inside its last accepted step, from
        the tableau's interpolant ``y_old + h Q p(x)``, ``Q = Kᵀ P`` (SciPy's)."""
        torch = self.torch
        h = self.t[b] - self.t_old[b]
        x = (np.asarray(times, dtype=np.float64) - self.t_old[b]) / h
        p = np.cumprod(np.tile(x, (self.Pd.shape[1], 1)), axis=0)  # (order+1, T)
        Q = torch.einsum("sn,sk->nk", self.K[:, b], self.Pd)
        pt = torch.as_tensor(p, dtype=Q.dtype, device=Q.device)
        return (h * (Q @ pt)).T + self.y_old[b][None, :]


class BatchedRK45(BatchedRungeKutta):
    """:class:`BatchedRungeKutta` with the Dormand–Prince 5(4) pair (SciPy's ``RK45``)."""

    tableau = DOPRI5
