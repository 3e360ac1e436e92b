"""The hermite model's PyTorch backend: the population gradient flow of a whole batch on a device.

Private helper of :mod:`richlazy_cli.models.hermite.model`; pure numerics, no I/O.

* The right-hand side is :func:`._population.population_loss_grad`, the one
  definition of the population loss and gradient (docs/hermite.md), written against the
  array namespace and so the same function the NumPy backend uses.
* :func:`integrate_flow` integrates ``V̇ = −∇L(V)`` for the B configurations with the
  batched Dormand–Prince 5(4) solver of :mod:`richlazy_cli.numerics.solvers.runge_kutta` (SciPy's
  ``RK45`` carried over to batched device arrays): this module supplies the right-hand side
  and what to record. A configuration takes the steps SciPy takes for it alone, up to the
  rounding of the gradient, so its results agree with the NumPy backend to far below the
  tolerance.

Step control, divergence, recovery detection and the early stop are decided on the device
for every attempt; the host synchronises once every :data:`SYNC_EVERY` attempts (one
transfer of that window's accept flags, step ends and teacher overlaps), then records the
outputs of the window's accepted steps from their dense output and locates recovery times
by ``brentq`` on it (docs/performance.md, "Hermite on a GPU").
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from scipy.optimize import brentq

from ...numerics.compute import import_torch
from ...numerics.solvers.runge_kutta import BatchedRK45
from ._flow import HermiteFlowProblem
from ._population import population_loss_grad

SYNC_EVERY = 16
"""Attempts per host synchronisation of the torch flow (the solver keeps that many steps' dense
outputs on the device)."""


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


def integrate_flow(problem: HermiteFlowProblem, device: str,
                   sync_every: int | None = None) -> dict[str, np.ndarray]:
    """Integrate ``V̇ = −∇L(V)`` for the B configurations of ``problem`` over
    ``[0, times[-1]]`` on ``device``, with the Dormand–Prince 5(4) pair (``problem.method``
    is RK45, the only method of the torch row).

    Returns the arrays of :meth:`HermiteFlowProblem.outputs` (the NumPy implementation's):
    ``loss`` (B, T), ``overlap`` and ``norm`` (B, T, P), ``t_recover`` (B, P; the first time
    the overlap reaches ``problem.recovery``, by ``brentq`` on the dense output), ``winner``
    (B, P), the neuron of largest overlap where each teacher is recovered, ``status`` (B,;
    diverged where the state becomes non-finite or the step underflows), ``nfev``, ``njev``
    (none: no Jacobian) and ``t_stop`` (B,) and, with ``save_params``, ``V`` (B, T, m, d).

    ``early_stop`` ends a configuration at the first accepted step where as many teachers are
    recovered as ``problem.recoverable`` marks learnable and
    ``‖∇L‖² t ≤ settle_tol · L(0)``; its remaining outputs receive the state at the stop (the
    NumPy implementation's rule, docs/hermite-sgd.md).

    The host reads the device's decisions once every ``sync_every`` attempts (default
    :data:`SYNC_EVERY`) and at records; the cadence changes no result.

    Called inside the torch session of the model's dispatch
    (:func:`richlazy_cli.numerics.compute.placed`: one intra-op thread, deterministic
    algorithms). On the CPU each configuration is integrated alone, so that its bits do not
    depend on the batch (nothing is gained from batching there); on a GPU the whole batch is
    one computation.
    """
    torch = import_torch()
    B = problem.size
    sync_every = SYNC_EVERY if sync_every is None else sync_every
    if device != "cpu":
        out = _integrate(torch, problem, device, sync_every)
    else:
        parts = []
        progress = problem.progress
        for b in range(B):
            def part_progress(f: float, b: int = b) -> None:
                if progress is not None:
                    progress((b + min(f, 1.0)) / B)

            part = dataclasses.replace(
                problem, V0=problem.V0[b:b + 1], a=problem.a[b:b + 1],
                atol=np.asarray(problem.atol)[b:b + 1],
                recoverable=problem.learnable[b:b + 1], progress=part_progress)
            parts.append(_integrate(torch, part, "cpu", sync_every))
        out = {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}
    out["njev"] = np.zeros(B, np.int64)
    return out


def _integrate(torch: Any, problem: HermiteFlowProblem, device: str,
               sync_every: int) -> dict[str, np.ndarray]:
    """:func:`integrate_flow` of a batch as one computation on ``device``.

    Each attempt, on the device: the solver's step (accept/reject, next step size); a
    configuration whose accepted state is not finite stops (diverged); the teachers whose
    overlap reached ``recovery`` join the recovered set; with ``early_stop``, a configuration
    with as many recovered teachers as learnable ones and ``‖∇L‖² t ≤ settle_tol · L(0)``
    stops. Every ``sync_every`` attempts one transfer brings the window's flags, step ends
    and overlaps to the host, which then, step by step in order, records the outputs that
    fall in each accepted step and locates each new recovery time within it.
    """
    V0, a, c, times = problem.V0, problem.a, problem.c, problem.times
    rtol, atol, r_floor = problem.rtol, np.asarray(problem.atol), problem.r_floor
    recovery, save_params, progress = problem.recovery, problem.save_params, problem.progress
    early_stop, recoverable, settle_tol = (problem.early_stop, problem.learnable,
                                           problem.settle_tol)
    from ...errors import Status

    B, m, d = V0.shape
    P = a.shape[1]
    T = len(times)
    W = max(1, int(sync_every))
    dev = torch.device(device)
    a_t = torch.as_tensor(a, dtype=torch.float64, device=dev)
    out = {
        "loss": np.full((B, T), np.nan),
        "overlap": np.full((B, T, P), np.nan),
        "norm": np.full((B, T, P), np.nan),
        "t_recover": np.full((B, P), np.nan),
        "status": np.full(B, int(Status.OK), dtype=np.int8),
        "winner": np.full((B, P), -1, dtype=np.int64),
    }
    if save_params:
        out["V"] = np.full((B, T, m, d), np.nan)

    def fun(y: Any, idx: np.ndarray) -> Any:
        grad = population_loss_grad(y.view(-1, m, d), a_t, c, r_floor=r_floor)[1]
        return -grad.reshape(y.shape)

    pending: list[tuple[int, int, list[Any]]] = []

    def record(b: int, i0: int, states: Any) -> None:
        """Outputs ``i0, i0+1, …`` of configuration ``b`` from its states (k, N): computed on
        the device now, read back with the window's others at the next :func:`flush`."""
        k = states.shape[0]
        V = states.view(k, m, d)
        ab = a_t[b:b + 1].expand(k, P)
        loss = population_loss_grad(V, ab, c, need_grad=False, r_floor=r_floor)[0]
        ov, nm = overlap_stats(torch, V, P, r_floor)
        pending.append((b, i0, [loss, ov, nm, *([V] if save_params else [])]))

    def flush() -> None:
        """The pending records to the host, in one transfer."""
        if not pending:
            return
        flat = torch.cat([x.reshape(-1) for _, _, xs in pending for x in xs]).cpu().numpy()
        i = 0
        for b, i0, xs in pending:
            for key, x in zip(("loss", "overlap", "norm", "V"), xs, strict=False):
                n = x.numel()
                k = x.shape[0]
                out[key][b, i0:i0 + k] = flat[i:i + n].reshape(tuple(x.shape))
                i += n
        pending.clear()

    with torch.no_grad():
        y0 = torch.as_tensor(V0.reshape(B, m * d), dtype=torch.float64, device=dev)
        solver = BatchedRK45(torch, fun, y0, float(times[-1]), rtol, atol, window=W)
        for b in range(B):
            record(b, 0, y0[b:b + 1])
        flush()
        prev_t, prev_arg = best_neurons(torch, y0.view(B, m, d), P, r_floor)
        prev = prev_t.cpu().numpy()
        out["t_recover"][prev >= recovery] = 0.0
        out["winner"][prev >= recovery] = prev_arg.cpu().numpy()[prev >= recovery]
        L0 = population_loss_grad(y0.view(B, m, d), a_t, c, need_grad=False,
                                  r_floor=r_floor)[0]
        settled = settle_tol * L0
        recovered = torch.as_tensor(prev >= recovery, device=dev)
        learnable = torch.as_tensor(np.count_nonzero(recoverable, axis=1), device=dev)
        bad = torch.zeros((W, B), dtype=torch.bool, device=dev)
        stop = torch.zeros((W, B), dtype=torch.bool, device=dev)
        now = torch.zeros((W, B, P), dtype=torch.float64, device=dev)
        next_out = np.ones(B, dtype=np.int64)
        n_steps = 0
        running = True
        while running:
            for w in range(W):  # on the device: no host synchronisation
                acc = solver.step()
                bad[w] = acc & ~torch.isfinite(solver.y).all(dim=1)
                solver.running &= ~bad[w]
                good = acc & ~bad[w]
                now[w] = overlap_stats(torch, solver.y.view(B, m, d), P, r_floor)[0]
                recovered |= good[:, None] & (now[w] >= recovery)
                if early_stop:
                    f = solver.f
                    stop[w] = (good & solver.running & (recovered.sum(dim=1) >= learnable)
                               & ((f * f).sum(dim=1) * solver.t <= settled))
                    solver.running &= ~stop[w]
            n_steps += W
            host = _window_to_host(torch, solver, bad, stop, now)
            running = bool(host["running"].any())
            for w in range(W):  # on the host: the window's records, step by step
                for b in map(int, np.flatnonzero(host["accepted"][w])):
                    if host["bad"][w, b]:
                        out["status"][b] = int(Status.DIVERGED)
                        continue
                    span = (float(host["t_start"][w, b]), float(host["t_end"][w, b]))
                    j = next_out[b]
                    k = int(np.searchsorted(times, span[1], side="right")) - j
                    if k > 0:
                        when = times[j:j + k]
                        states = solver.dense(b, when, w, span)
                        exact = when == span[1]
                        if exact.any():
                            states[torch.as_tensor(np.flatnonzero(exact), device=dev)] = \
                                solver.y_after(w, b)
                        record(b, j, states)
                        next_out[b] = j + k
                    new = np.flatnonzero(np.isnan(out["t_recover"][b])
                                         & (host["now"][w, b] >= recovery))
                    for p in new:
                        def gap(t: float, b: int = b, p: int = int(p), w: int = w,
                                span: tuple[float, float] = span) -> float:
                            s = solver.dense(b, np.array([t]), w, span)
                            ov = overlap_stats(torch, s.view(1, m, d), P, r_floor)[0]
                            return float(ov[0, p]) - recovery

                        t_hit = brentq(gap, span[0], span[1], xtol=1e-12 * max(1.0, span[1]))
                        out["t_recover"][b, p] = t_hit
                        s_hit = solver.dense(b, np.array([t_hit]), w, span).view(1, m, d)
                        out["winner"][b, p] = int(best_neurons(torch, s_hit, P, r_floor)[1][0, p])
                    if host["stop"][w, b]:
                        j = next_out[b]
                        record(b, j, solver.y_after(w, b)[None].expand(T - j, -1))
                        next_out[b] = T
            flush()
            if progress is not None and n_steps % 200 < W:
                progress(float(np.mean(host["t_end"][-1])) / float(times[-1]))
        failed = solver.failed.cpu().numpy()
        out["status"][failed] = int(Status.DIVERGED)
    out["nfev"] = solver.nfev.cpu().numpy()
    out["t_stop"] = solver.t.cpu().numpy()
    return out


def _window_to_host(torch: Any, solver: BatchedRK45, bad: Any, stop: Any, now: Any
                    ) -> dict[str, np.ndarray]:
    """The window's device decisions on the host, in one transfer: per slot ``accepted``,
    ``bad``, ``stop`` (W, B) bool, ``t_start``, ``t_end`` (W, B) and ``now`` (W, B, P), and
    ``running`` (B,)."""
    parts = {"accepted": solver.accepted, "bad": bad, "stop": stop, "t_start": solver.t_start,
             "t_end": solver.t_end, "now": now, "running": solver.running}
    flat = torch.cat([x.reshape(-1).to(torch.float64) for x in parts.values()]).cpu().numpy()
    host, i = {}, 0
    for key, x in parts.items():
        n = x.numel()
        host[key] = flat[i:i + n].reshape(tuple(x.shape))
        if x.dtype == torch.bool:
            host[key] = host[key] != 0
        i += n
    return host
