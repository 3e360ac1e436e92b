"""The hermite model's PyTorch backend: the population gradient flow of a whole batch on a device.

Private helper of :mod:`richlazy_cli.models.hermite`; pure numerics, no I/O.

* :func:`population_loss_grad` is the closed-form population loss and gradient of
  docs/hermite.md for B configurations at once (batched products on the device), term for term
  the NumPy function of the same name.
* :class:`BatchedRK45` integrates ``V̇ = −∇L(V)`` for the B configurations with the
  Dormand–Prince 5(4) pair, each configuration with its own adaptive step. It is SciPy's
  ``RK45`` carried over to batched device arrays: the same tableau and dense-output matrix
  (read from :class:`scipy.integrate.RK45` itself), the same initial-step rule, RMS error
  norm, step-size factors (safety 0.9, within [0.2, 10], no growth right after a rejection)
  and minimum step. A configuration therefore takes the steps SciPy takes for it alone, up to
  the rounding of the gradient, and its results agree with the NumPy backend to far below the
  tolerance. The states stay on the device; per step only the B error norms, times and the
  (B, P) teacher overlaps come back to the host, which decides acceptance, records outputs
  from the dense output and locates recovery times by ``brentq`` on it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.integrate import RK45
from scipy.optimize import brentq

SAFETY, MIN_FACTOR, MAX_FACTOR = 0.9, 0.2, 10.0
"""Step-size control constants of SciPy's explicit Runge–Kutta solvers."""

ERROR_EXPONENT = -1.0 / (RK45.error_estimator_order + 1)


def population_loss_grad(torch: Any, V: Any, a: Any, q: np.ndarray, r_floor: float,
                         need_grad: bool = True) -> tuple[Any, Any]:
    """Loss (B,) and gradient (B, m, d) of ``L(V) = ½E(f − f*)²`` (docs/hermite.md).

    ``V`` (B, m, d) and ``a`` (B, P) are device tensors; ``q`` the squared Hermite
    coefficients ``c_j²`` of σ; ``r_floor`` the smallest neuron norm used to normalise.
    """
    P = a.shape[1]
    r2 = (V * V).sum(dim=2)
    r = torch.clamp(torch.sqrt(r2), min=r_floor)
    U = V / r[:, :, None]
    G = torch.matmul(U, U.transpose(1, 2))
    M = U[:, :, :P]
    gG, dgG = _poly_g(G, q)
    gM, dgM = _poly_g(M, q)
    const = q[0] * a.sum(dim=1) ** 2 + float(np.sum(q[1:])) * (a * a).sum(dim=1)
    gM_a = torch.matmul(gM, a[:, :, None])[:, :, 0]
    quad = torch.matmul(torch.matmul(r2[:, None, :], gG), r2[:, :, None])[:, 0, 0]
    loss = 0.5 * (quad - 2.0 * (r2 * gM_a).sum(dim=1) + const)
    if not need_grad:
        return loss, None
    A = (torch.matmul(2.0 * gG - G * dgG, r2[:, :, None])
         - torch.matmul(2.0 * gM - M * dgM, a[:, :, None]))[:, :, 0]
    grad = A[:, :, None] * U + torch.matmul(dgG * r2[:, None, :], U)
    grad[:, :, :P] -= dgM * a[:, None, :]
    return loss, grad * r[:, :, None]


def _poly_g(s: Any, q: np.ndarray) -> tuple[Any, Any]:
    """``g(s) = Σ_j q_j s^j`` and ``g'(s)`` by Horner, as the NumPy backend."""
    K = len(q) - 1
    g = s.new_full(s.shape, float(q[K]))
    dg = s.new_zeros(s.shape)
    for j in range(K - 1, -1, -1):
        dg = dg * s + g
        g = g * s + float(q[j])
    return g, dg


def overlap_stats(torch: Any, V: Any, P: int, r_floor: float) -> tuple[Any, Any]:
    """(overlap, norm) per teacher, (B, P) each: ``max_k ⟨v̄_k, e_p⟩²`` and ``‖v_k‖²`` of
    that neuron (the NumPy backend's ``_overlap_stats``)."""
    r2 = (V * V).sum(dim=2)
    cos2 = V[:, :, :P] ** 2 / torch.clamp(r2, min=r_floor**2)[:, :, None]
    best, arg = cos2.max(dim=1)
    return best, torch.gather(r2, 1, arg)


def best_neurons(torch: Any, V: Any, P: int, r_floor: float) -> tuple[Any, Any]:
    """(best squared cosine, its neuron) per teacher, (B, P) each."""
    r2 = (V * V).sum(dim=2)
    cos2 = V[:, :, :P] ** 2 / torch.clamp(r2, min=r_floor**2)[:, :, None]
    return cos2.max(dim=1)


def _rms(x: Any) -> Any:
    """SciPy's RMS norm per configuration: ``‖x_b‖ / √N``."""
    return torch_norm(x) / float(x.shape[1]) ** 0.5


def torch_norm(x: Any) -> Any:
    return (x * x).sum(dim=1).sqrt()


class BatchedRK45:
    """Dormand–Prince 5(4) with per-configuration adaptive steps on flattened states (B, N).

    ``fun(y)`` returns ``ẏ`` (B, N) for a subset of configurations (the autonomous flow).
    """

    def __init__(self, torch: Any, fun: Callable[[Any, Any], Any], y0: Any, t_bound: float,
                 rtol: float, atol: np.ndarray) -> None:
        self.torch = torch
        self.fun = fun
        dev, dt = y0.device, y0.dtype
        self.A = torch.as_tensor(RK45.A, dtype=dt, device=dev)
        self.Bw = torch.as_tensor(RK45.B, dtype=dt, device=dev)
        self.E = torch.as_tensor(RK45.E, dtype=dt, device=dev)
        self.Pd = torch.as_tensor(RK45.P, dtype=dt, device=dev)
        self.C = RK45.C
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
        self.K = torch.empty((RK45.n_stages + 1, B, N), dtype=dt, device=dev)
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
        with np.errstate(divide="ignore"):
            h1 = np.where(small, np.maximum(1e-6, h0 * 1e-3),
                          (0.01 / np.maximum(d1, d2)) ** (1.0 / (RK45.error_estimator_order + 1)))
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
        for s in range(1, RK45.n_stages):
            dy = torch.einsum("snd,s->nd", K[:s], self.A[s, :s]) * h_t
            K[s] = self.fun(y + dy, idx)
        y_new = y + h_t * torch.einsum("snd,s->nd", K[:-1], self.Bw)
        f_new = self.fun(y_new, idx)
        K[-1] = f_new
        self.nfev[idx] += RK45.n_stages
        scale = self.atol[sel] + torch.maximum(torch.abs(y), torch.abs(y_new)) * self.rtol
        err = _rms(torch.einsum("snd,s->nd", K, self.E) * h_t / scale).cpu().numpy()
        ok = err < 1.0
        with np.errstate(divide="ignore"):
            grow = np.where(err == 0, MAX_FACTOR,
                            np.minimum(MAX_FACTOR, SAFETY * err**ERROR_EXPONENT))
            shrink = np.maximum(MIN_FACTOR, SAFETY * err**ERROR_EXPONENT)
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
        SciPy's RK45 interpolant ``y_old + h Q p(x)``, ``Q = Kᵀ P``."""
        torch = self.torch
        h = self.t[b] - self.t_old[b]
        x = (np.asarray(times, dtype=np.float64) - self.t_old[b]) / h
        p = np.cumprod(np.tile(x, (self.Pd.shape[1], 1)), axis=0)  # (order+1, T)
        Q = torch.einsum("sn,sk->nk", self.K[:, b], self.Pd)
        pt = torch.as_tensor(p, dtype=Q.dtype, device=Q.device)
        return (h * (Q @ pt)).T + self.y_old[b][None, :]


def integrate_flow(torch: Any, V0: np.ndarray, a: np.ndarray, c: np.ndarray,
                   times: np.ndarray, rtol: float, atol: np.ndarray, r_floor: float,
                   recovery: float, device: str, save_params: bool,
                   progress: Callable[[float], None] | None = None,
                   early_stop: bool = False, recoverable: np.ndarray | None = None,
                   settle_tol: float = 0.0) -> dict[str, np.ndarray]:
    """Integrate ``V̇ = −∇L(V)`` for B configurations over ``[0, times[-1]]`` on ``device``.

    ``V0`` (B, m, d) and ``a`` (B, P); ``atol`` (B,). Returns ``loss`` (B, T), ``overlap``
    and ``norm`` (B, T, P), ``t_recover`` (B, P; the first time the overlap reaches
    ``recovery``, by ``brentq`` on the dense output), ``status`` (B,; diverged where the state
    becomes non-finite or the step underflows), ``nfev`` (B,) and, with ``save_params``,
    ``V`` (B, T, m, d) — the NumPy backend's outputs for the same flow — and ``winner``
    (B, P), the neuron of largest overlap where each teacher is recovered, and ``t_stop`` (B,).

    ``early_stop`` (with ``recoverable`` (B, P), the teachers with a finite greedy time) ends a
    configuration at the first accepted step where as many teachers are recovered as are
    learnable and ``‖∇L‖² t ≤ settle_tol · L(0)``; its remaining outputs receive the state
    at the stop (the NumPy backend's rule, docs/hermite-sgd.md).

    On the CPU each configuration is integrated alone, with one intra-op thread, so that its
    bits do not depend on the batch (nothing is gained from batching there); on a GPU the
    whole batch is one computation.
    """
    B = V0.shape[0]
    rec = np.zeros(a.shape, bool) if recoverable is None else np.asarray(recoverable, bool)
    from ..compute import session

    if device != "cpu":
        with session():  # deterministic algorithms
            return _integrate(torch, V0, a, c, times, rtol, np.asarray(atol), r_floor,
                              recovery, device, save_params, progress, early_stop, rec,
                              settle_tol)
    with session():  # one intra-op thread, deterministic algorithms
        parts = []
        for b in range(B):
            def part_progress(f: float, b: int = b) -> None:
                if progress is not None:
                    progress((b + min(f, 1.0)) / B)

            parts.append(_integrate(torch, V0[b:b + 1], a[b:b + 1], c, times, rtol,
                                    np.asarray(atol)[b:b + 1], r_floor, recovery, "cpu",
                                    save_params, part_progress, early_stop, rec[b:b + 1],
                                    settle_tol))
    return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}


def _integrate(torch: Any, V0: np.ndarray, a: np.ndarray, c: np.ndarray, times: np.ndarray,
               rtol: float, atol: np.ndarray, r_floor: float, recovery: float, device: str,
               save_params: bool, progress: Callable[[float], None] | None, early_stop: bool,
               recoverable: np.ndarray, settle_tol: float) -> dict[str, np.ndarray]:
    """:func:`integrate_flow` of a batch as one computation on ``device``."""
    from ..errors import Status

    B, m, d = V0.shape
    P = a.shape[1]
    T = len(times)
    dev = torch.device(device)
    q = np.asarray(c, dtype=np.float64) ** 2
    a_t = torch.as_tensor(a, dtype=torch.float64, device=dev)
    out = {
        "loss": np.full((B, T), np.nan),
        "overlap": np.full((B, T, P), np.nan),
        "norm": np.full((B, T, P), np.nan),
        "t_recover": np.full((B, P), np.nan),
        "status": np.full(B, int(Status.OK), dtype=np.int8),
        "winner": np.full((B, P), -1, dtype=np.int64),
    }
    need = recoverable
    if save_params:
        out["V"] = np.full((B, T, m, d), np.nan)

    def fun(y: Any, idx: np.ndarray) -> Any:
        sel = a_t if idx.size == B else a_t[torch.as_tensor(idx, device=dev)]
        grad = population_loss_grad(torch, y.view(-1, m, d), sel, q, r_floor)[1]
        return -grad.reshape(y.shape)

    def record(b: int, i0: int, states: Any) -> None:
        """Outputs ``i0, i0+1, …`` of configuration ``b`` from its states (k, N)."""
        k = states.shape[0]
        V = states.view(k, m, d)
        ab = a_t[b:b + 1].expand(k, P)
        loss = population_loss_grad(torch, V, ab, q, r_floor, need_grad=False)[0]
        ov, nm = overlap_stats(torch, V, P, r_floor)
        out["loss"][b, i0:i0 + k] = loss.cpu().numpy()
        out["overlap"][b, i0:i0 + k] = ov.cpu().numpy()
        out["norm"][b, i0:i0 + k] = nm.cpu().numpy()
        if save_params:
            out["V"][b, i0:i0 + k] = V.cpu().numpy()

    with torch.no_grad():
        y0 = torch.as_tensor(V0.reshape(B, m * d), dtype=torch.float64, device=dev)
        solver = BatchedRK45(torch, fun, y0, float(times[-1]), rtol, atol)
        for b in range(B):
            record(b, 0, y0[b:b + 1])
        prev_t, prev_arg = best_neurons(torch, y0.view(B, m, d), P, r_floor)
        prev = prev_t.cpu().numpy()
        out["t_recover"][prev >= recovery] = 0.0
        out["winner"][prev >= recovery] = prev_arg.cpu().numpy()[prev >= recovery]
        L0 = population_loss_grad(torch, y0.view(B, m, d), a_t, q, r_floor,
                                   need_grad=False)[0].cpu().numpy()
        next_out = np.ones(B, dtype=np.int64)
        n_steps = 0
        while solver.running.any():
            acc = solver.step()
            n_steps += 1
            if acc.size == 0:
                continue
            acc_t = torch.as_tensor(acc, device=dev)
            finite = torch.isfinite(solver.y[acc_t]).all(dim=1).cpu().numpy()
            for b in acc[~finite]:
                out["status"][b] = int(Status.DIVERGED)
                solver.running[b] = False
            acc = acc[finite]
            if acc.size == 0:
                continue
            for b in acc:
                j = next_out[b]
                k = int(np.searchsorted(times, solver.t[b], side="right")) - j
                if k > 0:
                    when = times[j:j + k]
                    states = solver.dense(b, when)
                    exact = when == solver.t[b]
                    if exact.any():
                        states[torch.as_tensor(np.flatnonzero(exact), device=dev)] = \
                            solver.y[b]
                    record(b, j, states)
                    next_out[b] = j + k
            acc_t = torch.as_tensor(acc, device=dev)
            now = overlap_stats(torch, solver.y[acc_t].view(-1, m, d), P,
                                r_floor)[0].cpu().numpy()
            for row, b in enumerate(acc):
                new = np.flatnonzero(np.isnan(out["t_recover"][b]) & (now[row] >= recovery))
                for p in new:
                    def gap(t: float, b: int = b, p: int = int(p)) -> float:
                        s = solver.dense(b, np.array([t]))
                        ov = overlap_stats(torch, s.view(1, m, d), P, r_floor)[0]
                        return float(ov[0, p]) - recovery

                    t_hit = brentq(gap, solver.t_old[b], solver.t[b],
                                   xtol=1e-12 * max(1.0, solver.t[b]))
                    out["t_recover"][b, p] = t_hit
                    s_hit = solver.dense(b, np.array([t_hit])).view(1, m, d)
                    out["winner"][b, p] = int(best_neurons(torch, s_hit, P, r_floor)[1][0, p])
            if early_stop:
                for b in acc:
                    if (next_out[b] < T and solver.running[b]
                            and np.count_nonzero(~np.isnan(out["t_recover"][b]))
                            >= np.count_nonzero(need[b])):
                        f = solver.f[b]
                        if float((f * f).sum()) * solver.t[b] <= settle_tol * L0[b]:
                            j = next_out[b]
                            record(b, j, solver.y[b:b + 1].expand(T - j, -1))
                            next_out[b] = T
                            solver.running[b] = False
            if progress is not None and n_steps % 200 == 0:
                progress(float(np.mean(solver.t)) / float(times[-1]))
        out["status"][solver.failed] = int(Status.DIVERGED)
    out["nfev"] = solver.nfev.copy()
    out["t_stop"] = solver.t.copy()
    return out
