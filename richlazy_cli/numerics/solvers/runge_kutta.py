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
    flattened states (B, N), on any torch device, its step-size control decided there.

    ``fun(y, idx)`` returns ``ẏ`` (B, N) for the configurations ``idx`` (an autonomous flow;
    the solver always passes the whole batch, ``idx = arange(B)``); ``tableau`` is the pair
    (:data:`DOPRI5` by default). SciPy's step control, carried over to a batch: the same
    initial-step rule, RMS error norm, step-size factors (safety 0.9, within [0.2, 10], no
    growth right after a rejection) and minimum step, so each configuration takes the steps
    SciPy's solver of the same tableau takes for it alone.

    :meth:`step` reads nothing back to the host: every configuration's accept/reject and next
    step size are ``torch.where`` selections over the batch (docs/engine.md, "Solvers"), and
    finished configurations are carried along unchanged. The state of the last ``window``
    attempts stays on the device (slots ``0 … window − 1``, :attr:`slot` the latest), so a
    caller that synchronises once every ``window`` steps can still evaluate the dense output
    of each step it accepted (:meth:`dense`, :meth:`y_after`). Device tensors: ``t``,
    ``t_old``, ``h_abs`` (B,) float64; ``running``, ``failed``, ``rejected`` (B,) bool;
    ``nfev`` (B,) int64; per slot ``accepted`` (W, B), ``t_start``, ``t_end`` (W, B) and
    ``y_start`` (W, B, N), the time and state before the attempt and the time after it.
    """

    tableau: Tableau = None  # type: ignore[assignment]  # set by __init__ or a subclass

    def __init__(self, torch: Any, fun: Callable[[Any, Any], Any], y0: Any, t_bound: float,
                 rtol: float, atol: np.ndarray, tableau: Tableau | None = None,
                 window: int = 1) -> None:
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
        self.window = int(window)
        W = self.window
        self.t_bound = float(t_bound)
        self.rtol = float(rtol)
        self.atol_host = np.asarray(atol, dtype=np.float64)
        self.atol = torch.as_tensor(self.atol_host, dtype=dt, device=dev)[:, None]
        f64 = {"dtype": torch.float64, "device": dev}
        self.t = torch.zeros(B, **f64)
        self.t_old = torch.zeros(B, **f64)
        self._inf = torch.full((B,), np.inf, **f64)
        self.y = y0.clone()
        self.K = torch.empty((W, tab.n_stages + 1, B, N), dtype=dt, device=dev)
        self.y_start = torch.empty((W, B, N), dtype=dt, device=dev)
        self.t_start = torch.zeros((W, B), **f64)
        self.t_end = torch.zeros((W, B), **f64)
        self.accepted = torch.zeros((W, B), dtype=torch.bool, device=dev)
        self.slot = -1
        self.running = torch.ones(B, dtype=torch.bool, device=dev)
        self.failed = torch.zeros(B, dtype=torch.bool, device=dev)
        self.rejected = torch.zeros(B, dtype=torch.bool, device=dev)  # last attempt rejected
        self.nfev = torch.zeros(B, dtype=torch.int64, device=dev)
        self.all = np.arange(B)
        self.f = fun(self.y, self.all)
        self.nfev += 1
        self.h_abs = torch.as_tensor(self._initial_step(), **f64)

    def _initial_step(self) -> np.ndarray:
        """SciPy's ``select_initial_step`` for each configuration (on the host, once)."""
        torch = self.torch
        y0, f0 = self.y, self.f
        scale = self.atol + torch.abs(y0) * self.rtol
        d0 = _rms(y0 / scale).cpu().numpy()
        d1 = _rms(f0 / scale).cpu().numpy()
        interval = self.t_bound
        h0 = np.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / np.maximum(d1, 1e-300))
        h0 = np.minimum(h0, interval)
        h0_t = torch.as_tensor(h0, dtype=y0.dtype, device=y0.device)[:, None]
        f1 = self.fun(y0 + h0_t * f0, self.all)
        self.nfev += 1
        d2 = _rms((f1 - f0) / scale).cpu().numpy() / h0
        small = (d1 <= 1e-15) & (d2 <= 1e-15)
        power = 1.0 / (self.tableau.error_estimator_order + 1)
        with np.errstate(divide="ignore"):
            h1 = np.where(small, np.maximum(1e-6, h0 * 1e-3),
                          (0.01 / np.maximum(d1, d2)) ** power)
        return np.minimum.reduce([100 * h0, h1, np.full(self.B, interval)])

    def step(self) -> Any:
        """One attempt for every running configuration, decided on the device; returns the
        (B,) bool tensor of those that accepted a step (their ``t``, ``y``, ``f`` advanced;
        its dense output in slot :attr:`slot`). Never synchronises with the host."""
        torch = self.torch
        self.slot = w = (self.slot + 1) % self.window
        active = self.running.clone()
        t = self.t
        min_step = 10.0 * torch.abs(torch.nextafter(t, self._inf) - t)
        h_abs = torch.where(~self.rejected & (self.h_abs < min_step), min_step, self.h_abs)
        too_small = active & (h_abs < min_step)
        self.failed |= too_small
        self.running &= ~too_small
        active &= ~too_small
        t_new = torch.clamp(t + h_abs, max=self.t_bound)
        h = t_new - t
        y, f = self.y, self.f
        K = self.K[w]
        h_t = h.to(y.dtype)[:, None]
        K[0] = f
        for s in range(1, self.tableau.n_stages):
            dy = torch.einsum("snd,s->nd", K[:s], self.A[s, :s]) * h_t
            K[s] = self.fun(y + dy, self.all)
        y_new = y + h_t * torch.einsum("snd,s->nd", K[:-1], self.Bw)
        f_new = self.fun(y_new, self.all)
        K[-1] = f_new
        self.nfev += self.tableau.n_stages * active
        scale = self.atol + torch.maximum(torch.abs(y), torch.abs(y_new)) * self.rtol
        err = _rms(torch.einsum("snd,s->nd", K, self.E) * h_t / scale)
        ok = err < 1.0
        factor = SAFETY * self.power(err)
        grow = torch.where(err == 0, MAX_FACTOR, torch.clamp(factor, max=MAX_FACTOR))
        grow = torch.where(self.rejected, torch.clamp(grow, max=1.0), grow)
        shrink = torch.clamp(factor, min=MIN_FACTOR)
        self.h_abs = torch.where(active, h_abs * torch.where(ok, grow, shrink), self.h_abs)
        self.rejected = torch.where(active, ~ok, self.rejected)
        acc = active & ok
        self.y_start[w] = y
        self.t_start[w] = t
        self.y = torch.where(acc[:, None], y_new, y)
        self.f = torch.where(acc[:, None], f_new, f)
        self.t_old = torch.where(acc, t, self.t_old)
        self.t = torch.where(acc, t_new, t)
        self.t_end[w] = self.t
        self.running &= ~(acc & (self.t >= self.t_bound))
        self.accepted[w] = acc
        return acc

    def power(self, err: Any) -> Any:
        """``err^(-1/(order of the error estimate + 1))``, elementwise on the device (torch's
        power: on the CPU the C library's, SciPy's scalar rule)."""
        return err**self.error_exponent

    def dense(self, b: int, times: np.ndarray, slot: int | None = None,
              span: tuple[float, float] | None = None) -> Any:
        """States (len(times), N) of configuration ``b`` inside the step it accepted in
        ``slot`` (the latest attempt by default), from the tableau's interpolant
        ``y_old + h Q p(x)``, ``Q = Kᵀ P`` (SciPy's). ``span`` = (start, end) of that step
        when the caller has them on the host (else they are read back)."""
        torch = self.torch
        w = self.slot if slot is None else slot
        if span is None:
            span = (float(self.t_start[w, b]), float(self.t_end[w, b]))
        t_old, t = span
        h = t - t_old
        x = (np.asarray(times, dtype=np.float64) - t_old) / h
        p = np.cumprod(np.tile(x, (self.Pd.shape[1], 1)), axis=0)  # (order+1, T)
        Q = torch.einsum("sn,sk->nk", self.K[w, :, b], self.Pd)
        pt = torch.as_tensor(p, dtype=Q.dtype, device=Q.device)
        return (h * (Q @ pt)).T + self.y_start[w, b][None, :]

    def y_after(self, slot: int, b: int) -> Any:
        """The state (N,) of configuration ``b`` after the attempt in ``slot`` (of the
        current window)."""
        return self.y_start[slot + 1, b] if slot < self.slot else self.y[b]


class BatchedRK45(BatchedRungeKutta):
    """:class:`BatchedRungeKutta` with the Dormand–Prince 5(4) pair (SciPy's ``RK45``)."""

    tableau = DOPRI5
