"""The hermite model's PyTorch backend: the population gradient flow of a whole batch on a device.

Private helper of :mod:`richlazy_cli.models.hermite`; pure numerics, no I/O.

* :func:`population_loss_grad` is the closed-form population loss and gradient of
  docs/hermite.md for B configurations at once (batched products on the device), term for term
  the NumPy function of the same name.
* :func:`integrate_flow` integrates ``V̇ = −∇L(V)`` for the B configurations with the
  batched Dormand–Prince 5(4) solver of :mod:`richlazy_cli.solvers.runge_kutta` (SciPy's
  ``RK45`` carried over to batched device arrays): this module supplies the right-hand side
  and what to record. A configuration takes the steps SciPy takes for it alone, up to the
  rounding of the gradient, so its results agree with the NumPy backend to far below the
  tolerance. The states stay on the device; per step only the B error norms, times and the
  (B, P) teacher overlaps come back to the host, which records outputs from the dense output
  and locates recovery times by ``brentq`` on it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.optimize import brentq

from ..solvers.runge_kutta import BatchedRK45


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
