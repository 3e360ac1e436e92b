"""Additive Hermite model: emergence and scaling laws in shallow networks (Ren et al. 2025;
docs/hermite.md, docs/hermite-sgd.md).

**Teacher.** ``f*(x) = Σ_p a_p σ(⟨x, e_p⟩)`` with ``x ~ N(0, I_d)`` and the teacher directions
the first ``P`` standard basis vectors (no loss of generality: the loss and both algorithms are
rotation invariant, and the overlaps with the teachers become coordinates of ``v``). The weights
are ``a_p = p^(-β)/Z`` with ``Z² = Σ_{p≤P} p^(-2β)`` (so ``Σ a_p² = 1``), or the explicit vector
``a`` (used as given, not renormalised; every ``a_p ≥ 0``).

**Activation.** ``σ = Σ_j c_j h_j`` with ``h_j = He_j/√(j!)`` the normalised Hermite
polynomials. ``σ = h_k`` (``k`` even, ≥ 4) by default, or the coefficients ``c_0..c_K`` in
``sigma_coeffs``; these are *validated*, not repaired: σ must be even (``c_j = 0`` for odd
``j``), have information exponent ``k* = min{j ≥ 1: c_j ≠ 0} > 2`` (so ``c_1 = c_2 = 0``;
``c_0`` is allowed) and unit norm ``Σ c_j² = 1`` (to 1e-9).

**Student.** ``f(x) = Σ_k ‖v_k‖² σ(⟨v̄_k, x⟩)``, ``v̄ = v/‖v‖``, with ``m`` neurons
``v_k(0) = σ0 u_k``, ``u_k ~ Unif(S^{d-1})`` drawn from ``rng(seed, "init")`` (the same
directions for every configuration of one seed).

**Population loss** (tensor-decomposition form, docs/hermite.md, eq. (4)). With ``r_k = ‖v_k‖``,
``G_kl = ⟨v̄_k, v̄_l⟩``, ``M_kp = ⟨v̄_k, e_p⟩`` and ``g(s) = Σ_j c_j² s^j`` (``s⁰ = 1``)::

    L(V) = ½ E(f - f*)² = ½ [Σ_kl r_k² r_l² g(G_kl) - 2 Σ_kp a_p r_k² g(M_kp)
                              + c_0² (Σ_p a_p)² + (Σ_{j≥1} c_j²) Σ_p a_p²].

Its gradient (docs/hermite.md, eq. (5), derived from ``∇_v[‖v‖^{2-j} ⟨v^{⊗j}, T⟩]``)::

    ∇_{v_k} L = r_k [A_k v̄_k + Σ_l r_l² g'(G_kl) v̄_l - Σ_p a_p g'(M_kp) e_p],
    A_k = Σ_l r_l² (2g - s g')(G_kl) - Σ_p a_p (2g - s g')(M_kp).

One evaluation costs O(m² d + m P) (never Monte Carlo).

**Actions.**

* ``solve``: gradient flow ``V̇ = -∇L(V)`` in gradient-flow time ``t`` (no learning rate; one h4
  task is recovered near ``t = 1/(8 a v̄²(0))``), integrated step by step by scipy's adaptive
  integrator (``method``: ``RK45``/``DOP853`` explicit, ``BDF``/``LSODA`` stiff with the
  analytic Jacobian, ``CVODE`` stiff with matrix-free Newton–GMRES on the Hessian–vector
  product, see :func:`_integrate_one` for when to use which; tolerance ``rtol`` (by default
  :data:`DEFAULT_RTOL` of the method), ``atol = 1e-3 rtol σ0/√d``) on the flattened ``V``, one
  configuration at a time so that its adaptive steps -- and so its result -- do not depend on
  the batch. Outputs on ``time`` = 0 and ``n_records`` log-spaced times over the ``decades``
  decades below ``t_max`` (taken from the solver's dense output). The explicit step is set by
  stability once tasks are learned (restoring rates ~ a_1), about one time unit, so their work
  grows linearly with ``t_max``; ``early_stop`` ends the flow once the learnable tasks are
  recovered and the loss has settled (docs/hermite-sgd.md §4).
* ``train``: online SGD, ``v_k ← v_k - lr · mean_i (f(x_i) - f*(x_i)) [2 v_k σ(z_ki) +
  r_k σ'(z_ki)(x_i - z_ki v̄_k)]`` with ``z_ki = ⟨v̄_k, x_i⟩`` and ``batch`` fresh samples per
  step from ``rng(seed, "sgd")`` (docs/hermite-sgd.md, eq. (2); Ren et al. 2025, §2.1), by the
  compiled loop (implementation ``numba``) or its bitwise-identical NumPy reference
  (:mod:`._sgd`). Since the mean per-sample gradient is
  ``∇L``, SGD follows the flow in the rescaled time ``time = lr × step`` (a variable over
  ``(point, step)``, since ``lr`` is batchable). The *population* loss is reported at 0 and
  ``n_records`` log-spaced steps. Default ``lr = 0.1/d²`` (filled in by
  :meth:`Hermite.check`): the step must scale as ``d^-2`` for the search-phase drift
  ``4 a m³`` (``m² ~ 1/d``) to beat the noise; at ``c/d²`` the noise relative to the drift is
  ≈ ``4.5 a c/c_m²`` whatever ``d`` (docs/hermite-sgd.md, eq. (6)), so SGD tracks the flow to
  ~10% only for ``c ≈ 1e-3``. ``stop_on_recovery`` stops a configuration 10% after its last
  learnable teacher is recovered.

**Outputs.** ``loss``; ``overlap`` (time, teacher) ``= max_k ⟨v̄_k, e_p⟩²``; ``norm`` (time,
teacher) ``= ‖v_k‖²`` of that best neuron; ``t_recover`` (teacher), the first time the overlap
reaches 0.9 (NaN if never; ``solve``: root of the solver's dense output within the step where
it happens, independent of the output grid; ``train``: ``lr × steps_recover``, the first step
after which it holds, checked after every step); ``t_recover_theory`` and ``winner_theory``
(teacher), see :func:`greedy_pairs`; ``winner`` (the argmax neuron at recovery) and
``winner_overlap0`` (its initial squared overlap); ``loss_theory`` (time), the idealised curve
``½ (Σ_{j≥1} c_j²) Σ_{p: t < T_p} a_p²`` (docs/hermite.md; Ren et al. 2025, §2.4, with
``T_p = t_recover_theory``); ``solve``: ``nfev``, ``njev``, ``t_stop``; ``train``:
``steps_recover``, ``steps_run``; with ``save_params``, ``v`` (time, neuron, dim).

The overlap is the *squared* cosine, so recovery means ``cos² ≥ 0.9``; the theory times use
the same threshold.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np
import xarray as xr
from scipy.integrate import BDF, DOP853, LSODA, RK45, OdeSolver, quad
from scipy.interpolate import CubicSpline
from scipy.optimize import brentq

from ...errors import BadInput, Status
from ...numerics import compute
from ...numerics.compute import Implementation
from ...numerics.records import record_grid
from ...numerics.solvers import switching
from ...numerics.solvers.krylov import STEPPERS as KRYLOV_STEPPERS
from ...numerics.solvers.switching import SwitchingRK45CVODE
from ...params import Param
from ..base import Batch, Model, Progress, register, rng, var
from . import _sgd
from ._flow import HermiteFlowProblem
from ._linear import FlowOperators
from ._poly import hermite_eval
from ._population import R_FLOOR, population_loss_grad

RECOVERY = 0.9
"""Recovery threshold on the squared overlap ``⟨v̄_k, e_p⟩²``."""

_R_FLOOR = R_FLOOR  # guard r_k -> 0


# -- Hermite algebra --------------------------------------------------------------------------
def hermite_coeffs(k: int | None, sigma_coeffs: np.ndarray | None) -> np.ndarray:
    """The Hermite coefficients ``c_0..c_K`` of σ: ``sigma_coeffs`` if given, else ``e_k``."""
    if sigma_coeffs is not None:
        return np.asarray(sigma_coeffs, dtype=float)
    assert k is not None
    c = np.zeros(k + 1)
    c[k] = 1.0
    return c


def validate_coeffs(c: np.ndarray) -> None:
    """Raise BadInput unless σ is even, has information exponent > 2 and unit norm."""
    c = np.asarray(c, dtype=float)
    odd = c[1::2]
    if np.any(odd != 0):
        raise BadInput("parameter sigma_coeffs: σ must be even (every odd coefficient c_1, c_3, "
                       "... must be 0)")
    if c.size > 2 and c[2] != 0:
        raise BadInput("parameter sigma_coeffs: the information exponent must exceed 2 "
                       "(c_1 = c_2 = 0)")
    if not np.any(c[3:] != 0):
        raise BadInput("parameter sigma_coeffs: σ needs a non-zero coefficient c_j with j ≥ 4")
    norm2 = float(np.sum(c * c))
    if abs(norm2 - 1.0) > 1e-9:
        raise BadInput(f"parameter sigma_coeffs: Σ c_j² must be 1 (unit-norm σ), got {norm2:.6g}")


def info_exponent(c: np.ndarray) -> int:
    """``k* = min{j ≥ 1 : c_j ≠ 0}``."""
    nz = np.flatnonzero(np.asarray(c)[1:] != 0)
    return int(nz[0]) + 1


def _poly_g2(s: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``g(s)``, ``g'(s)`` and ``g''(s)`` by Horner (``q_j = c_j²``)."""
    K = len(q) - 1
    g = np.full_like(s, q[K])
    dg = np.zeros_like(s)
    ddg = np.zeros_like(s)
    for j in range(K - 1, -1, -1):
        ddg = ddg * s + 2.0 * dg
        dg = dg * s + g
        g = g * s + q[j]
    return g, dg, ddg


def teacher_weights(P: int, beta: float, a: np.ndarray | None = None) -> np.ndarray:
    """``a_p = p^(-β)/Z`` with ``Σ a_p² = 1`` (docs/hermite.md, eq. (2)), or the explicit ``a``."""
    if a is not None:
        return np.asarray(a, dtype=float)
    w = np.arange(1, P + 1, dtype=float) ** (-beta)
    return w / np.sqrt(np.sum(w * w))


def initial_directions(seed: int, m: int, d: int) -> np.ndarray:
    """``u_k ~ Unif(S^{d-1})``, shape (m, d), from ``rng(seed, "init")``."""
    u = rng(seed, "init").standard_normal((m, d))
    return u / np.linalg.norm(u, axis=1, keepdims=True)


OVERLAP_BLOCK = 2**21
"""Values drawn at a time by :func:`initial_overlaps` (16 MiB of float64)."""


def initial_overlaps(seed: int, m: int, d: int, P: int) -> np.ndarray:
    """The first ``P`` columns of :func:`initial_directions` (the initial overlaps with the
    teachers ``e_1..e_P``), bit for bit, drawn a block of rows at a time so that no
    ``m × d`` matrix is held: the stream fills the rows in order, and each row's norm is
    its own."""
    gen = rng(seed, "init")
    rows = max(1, OVERLAP_BLOCK // max(d, 1))
    out = np.empty((m, P))
    for i in range(0, m, rows):
        u = gen.standard_normal((min(rows, m - i), d))
        out[i:i + u.shape[0]] = (u / np.linalg.norm(u, axis=1, keepdims=True))[:, :P]
    return out


# -- population loss and gradient -------------------------------------------------------------
# population_loss_grad (module docstring), written once for NumPy and torch in
# ._population.


JACOBIAN_LIMIT = 4096
"""Largest state ``m·d`` for which the stiff methods (BDF, LSODA) build the dense Jacobian
(4096² float64 = 128 MiB, plus its LU factors)."""


def population_grad_jacobian(V: np.ndarray, a: np.ndarray, c: np.ndarray,
                             block: int = 256) -> np.ndarray:
    """The Hessian ``∂(∇L)/∂V`` of the population loss, (m d, m d) in row-major ``V`` order.

    Forward-mode differentiation of :func:`population_loss_grad` (docs/hermite-sgd.md,
    eq. (10)), ``block`` tangent directions at a time. With ``φ = 2g − s g'``
    (``φ' = g' − s g''``), ``H_k = A_k v̄_k + Σ_l r_l² g'(G_kl) v̄_l − Σ_p a_p g'(M_kp) e_p``
    and ``∇_k L = r_k H_k``, a tangent ``δV`` gives ``δ(r²)_k = 2⟨v_k, δv_k⟩``,
    ``δr_k = δ(r²)_k/(2 r_k)``, ``δv̄_k = δv_k/r_k − v̄_k δr_k/r_k``,
    ``δG_kl = ⟨δv̄_k, v̄_l⟩ + ⟨v̄_k, δv̄_l⟩``, ``δM_kp = (δv̄_k)_p``,
    ``δA_k = Σ_l [δ(r²)_l φ(G_kl) + r_l² φ'(G_kl) δG_kl] − Σ_p a_p φ'(M_kp) δM_kp``,
    ``δH_k = δA_k v̄_k + A_k δv̄_k + Σ_l [δ(r²)_l g'(G_kl) + r_l² g''(G_kl) δG_kl] v̄_l
    + Σ_l r_l² g'(G_kl) δv̄_l − Σ_p a_p g''(M_kp) δM_kp e_p`` and
    ``δ(∇_k L) = δr_k H_k + r_k δH_k``. The gradient-flow right-hand side ``−∇L`` has the
    Jacobian ``−`` this.
    """
    q = np.asarray(c, dtype=float) ** 2
    m, d = V.shape
    P = a.shape[0]
    N = m * d
    r2 = np.einsum("kd,kd->k", V, V)
    r = np.maximum(np.sqrt(r2), _R_FLOOR)
    U = V / r[:, None]
    G = U @ U.T
    M = U[:, :P]
    gG, dgG, ddgG = _poly_g2(G, q)
    gM, dgM, ddgM = _poly_g2(M, q)
    phiG, dphiG = 2.0 * gG - G * dgG, dgG - G * ddgG
    phiM, dphiM = 2.0 * gM - M * dgM, dgM - M * ddgM
    A = phiG @ r2 - phiM @ a
    Wg = dgG * r2[None, :]
    H = A[:, None] * U + Wg @ U
    H[:, :P] -= dgM * a[None, :]
    J = np.empty((N, N))
    for start in range(0, N, block):
        idx = np.arange(start, min(N, start + block))
        T = idx.size
        dV = np.zeros((T, m, d))
        dV.reshape(T, N)[np.arange(T), idx] = 1.0
        dr2 = 2.0 * np.einsum("kd,tkd->tk", V, dV)
        dr = dr2 / (2.0 * r)[None, :]
        dU = dV / r[None, :, None] - U[None, :, :] * (dr / r[None, :])[:, :, None]
        dUU = dU @ U.T  # (T, m, m): <δv̄_k, v̄_l>
        dG = dUU + dUU.transpose(0, 2, 1)
        dM = dU[:, :, :P]
        dA = (dr2 @ phiG.T + np.einsum("tkl,kl->tk", dG, dphiG * r2[None, :])
              - np.einsum("tkp,kp->tk", dM, dphiM * a[None, :]))
        W1 = dr2[:, None, :] * dgG[None, :, :] + (ddgG * r2[None, :])[None] * dG
        dH = dA[:, :, None] * U[None] + A[None, :, None] * dU + W1 @ U + Wg[None] @ dU
        dH[:, :, :P] -= ddgM[None] * a[None, None, :] * dM
        dgrad = dr[:, :, None] * H[None] + r[None, :, None] * dH
        J[:, idx] = dgrad.reshape(T, N).T
    return J


# -- emergence-time theory --------------------------------------------------------------------
def emergence_time_h4(m0: float, m1: float, a: float, eta: float = 1.0) -> float:
    """Exact h4 time for the cosine to go from ``m0`` to ``m1`` under ``ṁ = 4ηa m³(1-m²)``."""
    return (
        0.5 / m0**2 - 0.5 / m1**2 + 0.5 * math.log(m1**2 * (1 - m0**2) / (m0**2 * (1 - m1**2)))
    ) / (4.0 * eta * a)


def emergence_time(m0: float, m1: float, a: float, c: np.ndarray, eta: float = 1.0) -> float:
    """``∫_{m0}^{m1} dm / (η a Σ_j c_j² j m^{j-1} (1-m²))`` (docs/hermite.md, eq. (8))."""
    q = np.asarray(c, dtype=float) ** 2

    def integrand(lm: float) -> float:  # substitution m = e^lm
        mm = math.exp(lm)
        rate = sum(q[j] * j * mm ** (j - 1) for j in range(1, len(q)))
        return mm / (rate * (1.0 - mm * mm))

    val, _ = quad(integrand, math.log(m0), math.log(m1), epsabs=0, epsrel=1e-12, limit=200)
    return val / (eta * a)


def _time_table(c: np.ndarray, m1: float) -> Callable[[np.ndarray], np.ndarray]:
    """``F(m0) = a·T(m0 → m1)`` for any |m0| < m1, tabulated in log-log and interpolated."""
    q = np.asarray(c, dtype=float) ** 2
    if np.count_nonzero(q[1:]) == 1 and info_exponent(c) == 4:
        s = q[4]

        def exact(m0: np.ndarray) -> np.ndarray:
            m02 = m0 * m0
            return (0.5 / m02 - 0.5 / m1**2
                    + 0.5 * np.log(m1**2 * (1 - m02) / (m02 * (1 - m1**2)))) / (4.0 * s)

        return exact
    nodes = np.geomspace(1e-8, m1, 1201)
    seg = np.array([emergence_time(nodes[i], nodes[i + 1], 1.0, c) for i in range(len(nodes) - 1)])
    F = np.cumsum(seg[::-1])[::-1]  # F at nodes[:-1]
    spline = CubicSpline(np.log(nodes[:-1]), np.log(F))

    def table(m0: np.ndarray) -> np.ndarray:
        lm = np.clip(np.log(np.maximum(m0, nodes[0])), math.log(nodes[0]), math.log(nodes[-2]))
        return np.where(m0 >= m1, 0.0, np.exp(spline(lm)))

    return table


def greedy_pairs(M0: np.ndarray, a: np.ndarray, c: np.ndarray,
                 threshold: float = RECOVERY) -> tuple[np.ndarray, np.ndarray]:
    """Greedy maximum-selection prediction of each teacher's recovery (docs/hermite.md; Ren et al.
    2025, §3.2, Eq. 5): ``(times, neurons)`` over the teachers.

    ``M0`` (m, P) holds the initial cosines ``⟨v̄_k(0), e_p⟩``. Each pair (k, p) has the
    single-neuron time ``τ_kp`` for ``|cos|`` to grow from ``|M0_kp|`` to ``√threshold`` under
    ``ṁ = a_p Σ_j c_j² j m^{j-1}(1-m²)`` (for h4 the exact closed form, whose leading term is
    ``1/(8 a_p M0_kp²)``). The rule: sort all pairs by ``τ``; scan them in increasing order and
    accept a pair when neither its neuron nor its teacher has been claimed yet (the earliest
    emergence happens first and commits that neuron). So at most ``min(m, P)`` teachers get a
    finite time and a neuron; the others (and those with ``a_p = 0``) get NaN and −1.
    Ranking by ``τ`` is the paper's ranking by ``a_p M0_kp^{2I−2}`` at leading order.
    """
    m, P = M0.shape
    m1 = math.sqrt(threshold)
    F = _time_table(c, m1)
    absm = np.minimum(np.abs(M0), m1)
    with np.errstate(divide="ignore"):
        tau = F(np.maximum(absm, 1e-300)) / a[None, :]
    tau = np.where(a[None, :] > 0, tau, np.inf)
    order = np.argsort(tau, axis=None, kind="stable")
    out = np.full(P, np.nan)
    who = np.full(P, -1, np.int64)
    neuron_used = np.zeros(m, bool)
    teacher_used = np.zeros(P, bool)
    n_left = min(m, int(np.count_nonzero(a > 0)))
    for flat in order:
        if n_left == 0:
            break
        k, p = divmod(int(flat), P)
        if neuron_used[k] or teacher_used[p] or not np.isfinite(tau[k, p]):
            continue
        neuron_used[k] = teacher_used[p] = True
        out[p] = tau[k, p]
        who[p] = k
        n_left -= 1
    return out, who


def greedy_recovery_times(M0: np.ndarray, a: np.ndarray, c: np.ndarray,
                          threshold: float = RECOVERY) -> np.ndarray:
    """The times of :func:`greedy_pairs` (NaN: not learnable)."""
    return greedy_pairs(M0, a, c, threshold)[0]


def first_crossing(times: np.ndarray, y: np.ndarray, level: float = RECOVERY) -> np.ndarray:
    """First time each column of ``y`` (time, ...) reaches ``level``; linear interpolation."""
    y = np.asarray(y)
    flat = y.reshape(y.shape[0], -1)
    out = np.full(flat.shape[1], np.nan)
    hit = flat >= level
    for j in np.flatnonzero(hit.any(axis=0)):
        i = int(np.argmax(hit[:, j]))
        if i == 0:
            out[j] = times[0]
            continue
        y0, y1 = flat[i - 1, j], flat[i, j]
        t0, t1 = times[i - 1], times[i]
        out[j] = t0 + (level - y0) / (y1 - y0) * (t1 - t0) if y1 != y0 else t1
    return out.reshape(y.shape[1:])


def idealised_loss(times: np.ndarray, T: np.ndarray, a: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``½ (Σ_{j≥1} c_j²) Σ_p a_p² 1[t < T_p]`` (NaN ``T_p``: never learned)."""
    Tf = np.where(np.isnan(T), np.inf, T)
    scale = 0.5 * float(np.sum(np.asarray(c)[1:] ** 2))
    return scale * ((times[:, None] < Tf[None, :]) * a[None, :] ** 2).sum(axis=1)


def _overlap_stats(V: np.ndarray, P: int) -> tuple[np.ndarray, np.ndarray]:
    """(overlap, norm) per teacher: ``max_k ⟨v̄_k, e_p⟩²`` and ``‖v_k‖²`` of that neuron."""
    r2 = np.einsum("kd,kd->k", V, V)
    cos2 = V[:, :P] ** 2 / np.maximum(r2, _R_FLOOR**2)[:, None]
    best = np.argmax(cos2, axis=0)
    return cos2[best, np.arange(P)], r2[best]


def reduced_basis(U0: np.ndarray, P: int) -> np.ndarray:
    """An orthonormal basis ``Q`` (d, r) of ``span(e_1 … e_P) + rowspace(U0)``, its first
    ``P`` columns ``e_1 … e_P`` (docs/hermite.md, "The reduced state").

    The gradient (5) of each neuron is a combination of the neurons' directions ``v̄_l`` and
    the teachers' ``e_p``, so the rows of ``V(t)`` stay in that span; with ``W = V Q`` the flow
    of ``W`` is the same flow in ``r`` coordinates (``G = Ū Ūᵀ``, the norms and the overlaps
    ``⟨v̄_k, e_p⟩``, the first ``P`` coordinates, are unchanged), and ``V = W Qᵀ``. The other
    columns span the rows of ``U0`` outside the teachers' coordinates (an SVD, directions
    below ``1e-12`` of the largest singular value dropped)."""
    d = U0.shape[1]
    rest = U0[:, P:]
    _, sv, vt = np.linalg.svd(rest, full_matrices=False)
    keep = vt[sv > 1e-12 * max(float(sv[0]) if sv.size else 0.0, 1e-300)]
    Q = np.zeros((d, P + keep.shape[0]))
    Q[:P, :P] = np.eye(P)
    Q[P:, P:] = keep.T
    return Q


def reduced_size(values: Mapping[str, Any]) -> int:
    """The coordinates a ``solve`` integrates: ``P + m`` with ``reduce = "auto"`` where that
    is below ``d`` (:func:`reduced_basis`), else ``d``."""
    d, P, m = int(values["d"]), int(values["P"]), int(values["m"])
    if values.get("reduce", "off") == "auto" and P + m < d:
        return P + m
    return d


def log_times(t_max: float, n: int, decades: float = 4.0) -> np.ndarray:
    """0 followed by ``n`` log-spaced times over the ``decades`` decades up to ``t_max``."""
    return record_grid(float(t_max), n, first=t_max * 10.0**-decades)


STOP_MARGIN = 1.1
"""``stop_on_recovery`` stops 10% after the last learnable teacher is recovered."""


GREEDY_DRAW_LIMIT = 2.5e8
"""The most initial values (``m·d``) the dry run's estimate draws for the greedy theory
(about two seconds); above it the estimate prices the whole budget."""


def _greedy_times(values: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """The greedy theory's recovery time of each teacher (:func:`greedy_pairs`, from the
    configuration's own initial overlaps, :func:`initial_overlaps`, which hold no ``m × d``
    matrix) and the teacher weights, or None where they cannot be computed (an estimate
    only) or where drawing the ``m·d`` initial values would exceed :data:`GREEDY_DRAW_LIMIT`
    (a configuration of that size is priced by its budget, and refused by the memory check
    where it does not fit)."""
    m, d, P = int(values["m"]), int(values["d"]), int(values["P"])
    if m * d > GREEDY_DRAW_LIMIT:
        return None
    try:
        c = hermite_coeffs(values["k"], values.get("sigma_coeffs"))
        a = teacher_weights(P, float(values["beta"]), values.get("a"))
        return greedy_pairs(initial_overlaps(int(values["seed"]), m, d, P), a, c)[0], a
    except (ValueError, ArithmeticError):
        return None


def expected_steps(values: Mapping[str, Any]) -> float:
    """The SGD steps a ``train`` configuration runs: ``steps``, or with ``stop_on_recovery``
    the greedy prediction of the last learnable teacher's recovery time (:func:`greedy_pairs`,
    from the configuration's own initial directions) over ``lr``, plus the 10% margin, capped
    at ``steps``. Online SGD at the default step follows the flow closely enough for a time
    estimate (jobs/ren-sgd-dscaling.toml measures the exponent: 2.71 against the flow's 3)."""
    steps = float(values["steps"])
    lr = values.get("lr")
    if not values.get("stop_on_recovery") or lr is None or not lr > 0:
        return steps
    greedy = _greedy_times(values)
    if greedy is None or not np.any(np.isfinite(greedy[0])):  # price the whole budget
        return steps
    return min(steps, STOP_MARGIN * float(np.nanmax(greedy[0])) / float(lr))


STABILITY_INTERVAL = {"RK45": 3.307, "DOP853": 6.394}
"""``h λ`` at the edge of the real stability interval of scipy's explicit integrators
(Dormand–Prince 5(4) and 8(5,3): the first ``z < 0`` with ``|R(z)| > 1`` for their
stability functions ``R``)."""
EVALUATIONS_PER_STEP = {"RK45": 7.0, "DOP853": 14.0}
"""Gradient evaluations per accepted step at the stability limit: the stages of one attempt
(6 and 12) and the rejected attempts of a step-size controller hovering at the limit
(RK45: 7.0 measured on jobs/ren-width.toml's and jobs/ren-fig2-small.toml's flows, one
rejection in six steps; DOP853 assumed alike, not measured)."""
SEARCH_EVALUATIONS = 1500.0
"""Gradient evaluations of the search and escape phase above the stable rate (at
``rtol = 1e-7``): the escapes from the saddles are accuracy-bound, with steps of 0.15–0.7
time units against the stable 1.2–2.9. Measured 1000–2100 over widths 4–256, ``d`` 128–256
and ``P`` 32–128 (the full flow's evaluations less the stable rate times its length)."""
SETTLE_AFTER_GREEDY = 2.4
"""``early_stop`` ends a flow at about this many times the greedy theory's last recovery
time: measured 2.45 and 2.37 on jobs/ren-width.toml (m = 8 and 256; the flow's own last
recovery comes at about twice the greedy time, and settling adds a tenth)."""

EVALUATION_FIXED = 1.3e6
"""The fixed work of one evaluation of the flow's right-hand side and its solver step (the
array calls' overhead), in the units of :func:`evaluation_work` (fitted, see there)."""
EVALUATION_PER_COORDINATE = 160.0
"""The work per neuron and coordinate of one evaluation (normalising ``V``, scaling the
gradient, the solver's stage arithmetic), in the units of :func:`evaluation_work`."""


def evaluation_work(m: int, d: int) -> float:
    """One gradient evaluation of a ``solve`` flow, in units of ``m² d`` multiply-adds (the
    Gram product ``U Uᵀ`` and the product back onto ``U``, docs/hermite.md, eq. (5)):
    ``m² d + 160 m d + 1.3·10⁶``.

    The lower-order terms are fitted (``bench/hermite_cost.py``, docs/estimates.md): the
    per-evaluation times of RK45 solves at 15 shapes (d = 128–2048, P = 32–1024, m = 4–2048,
    one core) lie within 0.81–1.16 of this model, and terms in ``m P`` (the overlaps with the
    teachers) and ``m²`` add nothing. The former ``m (m + P) d`` priced a job's widths against
    each other wrongly: per unit it ran 3.6× slower at m = 2048 than at m = 64 (d = 2048,
    P = 1024; the dry run calibrates on the narrowest width, so it priced the widest 3.6× too
    cheap) and 19× faster at m = 64 than at m = 4 (d = 128, P = 32).
    """
    return float(m) * m * d + EVALUATION_PER_COORDINATE * m * d + EVALUATION_FIXED


def _flow_end(values: Mapping[str, Any], times: np.ndarray, a: np.ndarray) -> float:
    """Where a flow ends (:func:`expected_evaluations`): ``t_max``, or with ``early_stop``
    :data:`SETTLE_AFTER_GREEDY` times the greedy theory's last recovery time ``times`` when
    every teacher of positive weight ``a`` has two neurons to compete for it."""
    t_max = float(values["t_max"])
    if (values.get("early_stop") and np.any(np.isfinite(times))
            and int(values["m"]) >= 2 * int(np.count_nonzero(a > 0))):
        return min(t_max, SETTLE_AFTER_GREEDY * float(np.nanmax(times)))
    return t_max


def _stiffest_rate(values: Mapping[str, Any], weights: np.ndarray) -> float:
    """The flow's stiffest rate once the teachers of ``weights`` are recovered: the radial
    mode of a neuron converged onto the largest, ``λ = 4 a_max Σ_{j≥1} c_j²``
    (:func:`expected_evaluations`)."""
    c = hermite_coeffs(values["k"], values.get("sigma_coeffs"))
    return 4.0 * float(np.max(weights)) * float(np.sum(c[1:] ** 2))


def expected_evaluations(values: Mapping[str, Any]) -> float:
    """The gradient evaluations of a ``solve`` configuration's explicit integrator (RK45,
    DOP853): the step-count model of docs/estimates.md ("The solver's step count").

    Once a neuron has converged onto teacher ``p`` (``r² = a_p``) the flow's stiffest mode
    is its radial one, ``λ = 4 a_p Σ_{j≥1} c_j²`` (the second derivative of
    ``½(r⁴ - 2 a_p r²)`` in ``r``), and the explicit step is held at the edge of the
    integrator's real stability interval, ``h = z_s / λ`` (:data:`STABILITY_INTERVAL`), for
    the rest of the flow: the evaluations grow at ``e_s λ / z_s`` per unit of time
    (:data:`EVALUATIONS_PER_STEP`), with ``λ`` from the largest weight among the teachers
    the greedy theory recovers before the flow ends. The search and escape phase adds
    :data:`SEARCH_EVALUATIONS` (its steps are set by the tolerance, so scaled by
    ``(1e-7/rtol)^{1/5}``, the fifth-order error per step). The flow ends at ``t_max``, or
    with ``early_stop`` at :data:`SETTLE_AFTER_GREEDY` times the greedy theory's last
    recovery time when every teacher has two neurons to compete for it (``m ≥ 2P``); with
    fewer, the flow may recover another set than the greedy rule's and then never stops
    (jobs/ren-width.toml at m = 16–128: 14 of 16 … 101 of 128 recovered, run to t_max).
    """
    method = str(values.get("method", "RK45"))
    t_max = float(values["t_max"])
    search = SEARCH_EVALUATIONS * (1e-7 / float(values.get("rtol") or 1e-7)) ** 0.2
    greedy = _greedy_times(values)
    if greedy is None:
        return search + 7.0 * t_max
    times, a = greedy
    t_end = _flow_end(values, times, a)
    learnable = np.isfinite(times)
    learned = learnable & (times <= t_end)
    rate = 0.0
    if np.any(learned):
        lam = _stiffest_rate(values, a[learned])
        rate = EVALUATIONS_PER_STEP.get(method, 7.0) * lam / STABILITY_INTERVAL.get(method, 3.307)
    first = float(np.nanmin(times)) if np.any(learnable) else math.inf
    return search * min(1.0, t_end / first) + rate * t_end


CVODE_FIXED, CVODE_PER_TEACHER = 1500.0, 65.0
"""CVODE's gradient evaluations at ``rtol = 1e-8`` for the search and the escapes: a fixed
part and a part per isolated escape of the teachers the greedy theory recovers before the
flow ends (:func:`expected_cvode_evaluations`, :func:`shared_escapes`)."""
JVP_COST = 0.8
"""One Hessian–vector product of :class:`._linear.FlowOperators` in gradient evaluations
(bench/hermite_methods.py measures 0.6–0.9 at d = 256–2048, m = 64–256, one thread); CVODE
needs about 1.2 per gradient evaluation in the search and the escapes."""
CVODE_PRODUCTS_PER_EVALUATION = 1.2
CVODE_PLATEAU_RATE = 0.01
"""CVODE's evaluations (a product at :data:`JVP_COST`) per unit of time on the plateaus, at
``rtol = 1e-8``: its step there is bounded by the slow drift of the neurons still searching,
not by the stiff modes, which the preconditioner takes out of GMRES's way. Measured on
jobs/ren-fig2.toml's m = 128 (t = 3·10⁴–3·10⁵) 0.008 and on its m = 64 (t = 10⁴–3·10⁵)
0.0006; on d = 128, P = 32, m = 16 run to 3·10⁵, whose neurons still searching escape late,
0.003–0.017 between its escapes (docs/hermite.md, "The dry run's model")."""
CVODE_CALL_PER_COORDINATE, CVODE_CALL_FIXED = 260.0, 6.5e5
"""CVODE's own work per call of the right-hand side or of a product, in the units of
:func:`evaluation_work`: ``260 m d + 6.5·10⁵`` (its BDF history, GMRES's orthogonalisation,
the preconditioner, its error test, the callbacks' copies on the ``m d``-long state and the
stepping loop's work per step). Measured 2.5 ms per call at m d = 131,072 (d = 2048, m = 64)
and 5.1 ms at 262,144 (d = 2048, m = 128), where an RK45 evaluation costs 2.2 and 5.5 ms, and
0.06–0.08 ms at 2,048 (d = 128, m = 16), one thread."""
CVODE_CALLS_PER_EVALUATION = 1.17
"""Calls (right-hand sides and products) per evaluation priced at :data:`JVP_COST`:
``(1 + q)/(1 + 0.8 q)`` for ``q`` products per evaluation, measured 1.16–1.2 on the flows of
:data:`CVODE_CALL_PER_COORDINATE` and on d = 128, P = 32, m = 16."""


ESCAPE_WINDOW = 0.055
"""The width of an escape's window, relative to its recovery time ``t_p``, over which CVODE's
steps are set by that escape's accuracy (:func:`shared_escapes`): fitted on
jobs/ren-fig2-medium.toml's m = 512 (d = 512, P = 256), whose 216 escapes in
``t = 200–2400`` cost CVODE about 20 priced evaluations each, a sixth of an isolated one's,
on the greedy theory's times (docs/hermite.md, "The dry run's model")."""


def shared_escapes(times: np.ndarray, after: float) -> float:
    """The escapes after ``after`` counted in isolated ones: with ``t_1 ≤ t_2 ≤ …`` the finite
    recovery times, each counts ``min(1, (t_i − t_{i−1}) / (β t_i))``, ``β`` =
    :data:`ESCAPE_WINDOW` (the first counts 1). An escape's steps are set by accuracy over a
    window of about ``β t_i``, the escape's own time scale (the overlap's blow-up and the
    convergence after it both scale as ``1/a_p``, as ``t_i`` does); escapes closer together
    than that share CVODE's steps, so a dense stretch costs about ``1/β`` isolated escapes per
    e-fold of time, whatever the count in it."""
    order = np.sort(np.asarray(times, dtype=float)[np.isfinite(times)])
    if order.size == 0:
        return 0.0
    gaps = np.diff(order, prepend=-np.inf)
    window = ESCAPE_WINDOW * np.maximum(order, np.finfo(float).tiny)
    share = np.minimum(1.0, gaps / window)
    return float(share[order > after].sum())


def cvode_call_work(m: int, d: int) -> float:
    """CVODE's own work per call, in gradient evaluations of the same shape:
    ``(260 m d + 6.5·10⁵) / evaluation_work(m, d)`` (:data:`CVODE_CALL_PER_COORDINATE`);
    1.13 at d = 2048, m = 64, 0.62 at d = 512, m = 256, 0.99 at d = 256, m = 64."""
    return (CVODE_CALL_PER_COORDINATE * m * d + CVODE_CALL_FIXED) / evaluation_work(m, d)


def expected_cvode_evaluations(values: Mapping[str, Any]) -> float:
    """CVODE's work on a ``solve`` configuration in gradient evaluations (:func:`_cvode_work`)
    from ``t = 0`` to the flow's end, with ``n`` the escapes of the teachers the greedy
    theory recovers by then, counted in isolated ones (:func:`shared_escapes`)."""
    greedy = _greedy_times(values)
    rtol = float(values.get("rtol") or DEFAULT_RTOL["CVODE"])
    if greedy is None:
        return _cvode_work(values, 0, float(values["t_max"]), rtol)
    times, a = greedy
    t_end = _flow_end(values, times, a)
    return _cvode_work(values, shared_escapes(times[times <= t_end], 0.0), t_end, rtol)


def _cvode_work(values: Mapping[str, Any], escapes: float, duration: float,
                rtol: float) -> float:
    """CVODE's evaluations over ``duration`` units of time with ``n = escapes``, the escapes
    counted in isolated ones (:func:`shared_escapes`), a product priced at :data:`JVP_COST`
    and CVODE's own work per call at :func:`cvode_call_work`::

        [(1 + 1.2 · 0.8)(1500 + 65 n) + 0.01 T] (1e-8/rtol)^{1/5} (1 + 1.17 w)

    with ``w`` the call's work in gradient evaluations. The search is priced once and the
    escapes per isolated one (:data:`CVODE_FIXED`), the plateaus per unit of time
    (:data:`CVODE_PLATEAU_RATE`)."""
    scale = (1e-8 / rtol) ** 0.2
    priced = ((1.0 + CVODE_PRODUCTS_PER_EVALUATION * JVP_COST)
              * (CVODE_FIXED + CVODE_PER_TEACHER * escapes) + CVODE_PLATEAU_RATE * duration)
    own = cvode_call_work(int(values["m"]), reduced_size(values))
    return priced * scale * (1.0 + CVODE_CALLS_PER_EVALUATION * own)


def expected_switched_evaluations(values: Mapping[str, Any]) -> float:
    """RK45+CVODE's work on a ``solve`` configuration in gradient evaluations, a product
    priced at :data:`JVP_COST`: RK45's (:func:`expected_evaluations`) up to the hand-over
    and CVODE's (:func:`_cvode_work`, at CVODE's tolerance, a tenth of ``rtol``) after it.

    RK45 hands over once its steps have been held at the stability edge for two windows of
    the stiffness test, ``τ = 2 · 20 · 3.0/λ`` time units (``λ`` the stiffest rate of
    :func:`expected_evaluations`): at ``t_s = t_i + τ``, ``t_i`` the first of the greedy
    theory's recovery times (sorted) followed by a gap longer than ``τ``. RK45's part is its
    own model over ``[0, t_s]`` plus the test's products (5 per 20 steps of 7 evaluations);
    CVODE's is :func:`_cvode_work` over ``[t_s, t_end]`` with ``n`` the escapes of the teachers
    the greedy theory recovers after ``t_s``, counted in isolated ones
    (:func:`shared_escapes`). Measured against it (docs/hermite.md, "The dry run's
    model"): the short flows of bench/hermite_methods.py (d = 256, P = 128, m = 64,
    t_max = 7000; hand-over at t ≈ 373–409 by this rule, measured 409–592), whose late
    escapes the greedy theory does not foresee, and the job files' widths. Where escapes
    come closer than ``τ`` for thousands of time units (m = 2P at d ≥ 512) the rule hands
    over late, on the expensive side: at t ≈ 1,196 and 3,170 where the solver does at 201
    and 326 (d = 512 and 1024); at d = 2048 early, at 182 where the solver does at 284,
    and there too the model prices that stretch above its measured cost."""
    greedy = _greedy_times(values)
    stiff_rtol = STIFF_TOLERANCE * float(values.get("rtol") or DEFAULT_RTOL[SWITCHED])
    if greedy is None:
        return _cvode_work(values, 0, float(values["t_max"]), stiff_rtol)
    times, a = greedy
    t_end = _flow_end(values, times, a)
    learned = np.isfinite(times) & (times <= t_end)
    explicit = {**values, "method": "RK45", "early_stop": False}
    test = 1.0 + switching.POWER_ITERATIONS * JVP_COST / (
        switching.CHECK_EVERY * switching.RK45_EVALUATIONS_PER_STEP)
    if not np.any(learned):  # never stiff: RK45 throughout
        return test * expected_evaluations({**explicit, "t_max": t_end})
    lam = _stiffest_rate(values, a[learned])
    tau = switching.STIFF_CHECKS * switching.CHECK_EVERY * switching.STIFF_EDGE / lam
    order = np.sort(times[learned])
    gaps = np.flatnonzero(np.diff(order) > tau)
    t_switch = min(t_end, float(order[gaps[0] if gaps.size else -1]) + tau)
    cost = test * expected_evaluations({**explicit, "t_max": t_switch})
    if t_switch < t_end:
        cost += _cvode_work(values, shared_escapes(order, t_switch), t_end - t_switch,
                            stiff_rtol)
    return cost


def log_steps(steps: int, n: int) -> np.ndarray:
    """0 followed by up to ``n`` distinct log-spaced integer steps from 1 to ``steps``."""
    return record_grid(int(steps), n)


SETTLE_TOL = 1e-4
"""Early stop of ``solve``: the loss has settled when ``‖∇L‖² t ≤ SETTLE_TOL · L(0)``."""

_SOLVERS: dict[str, type[OdeSolver]] = {"RK45": RK45, "DOP853": DOP853, "BDF": BDF,
                                        "LSODA": LSODA}
STIFF_METHODS = ("BDF", "LSODA")
"""The methods that build the dense Jacobian (:data:`JACOBIAN_LIMIT`)."""
SWITCHED = "RK45+CVODE"
"""RK45 while its steps are set by accuracy, CVODE while they are set by stability
(:mod:`richlazy_cli.numerics.solvers.switching`)."""
KRYLOV_METHODS = (*KRYLOV_STEPPERS, SWITCHED)
"""The methods with a matrix-free stiff solve (:mod:`richlazy_cli.numerics.solvers.krylov`):
``CVODE`` and ``RK45+CVODE``; they need scikit-sundae."""
DEFAULT_RTOL: dict[str, float] = {"RK45": 1e-7, "DOP853": 1e-7, "BDF": 1e-7, "LSODA": 1e-7,
                                  "CVODE": 2e-9, SWITCHED: 1e-7}
"""``rtol`` when not given, by method. CVODE's 2e-9 is measured (bench/hermite_methods.py
``--full``) against RK45 at 1e-10 on its fourteen flows (the short flow's three seeds and
the widths of jobs/ren-width.toml and jobs/ren-fig2-medium.toml): the same teachers
recovered, recovery times within 0.5% and the loss at every output time within 10⁻³
relative. At 1e-8 a recovery time of ren-fig2-medium's m = 64 misses by 0.60% and the loss
of ren-width's m = 128 by 2.9·10⁻³; at 5·10⁻⁹ the latter still misses, by a hair.
``RK45+CVODE``'s ``rtol`` is its RK45's; its CVODE runs at :data:`STIFF_TOLERANCE` times
``rtol`` and ``atol``."""
STIFF_TOLERANCE = 0.1
"""CVODE's tolerances in ``RK45+CVODE``, relative to RK45's: at the default, 1e-8, with which
``RK45+CVODE`` meets the accuracy asked on all fourteen flows of bench/hermite_methods.py
``--full``, the two where CVODE alone at 1e-8 misses included."""


def _integrate_flow(problem: HermiteFlowProblem) -> dict[str, np.ndarray]:
    """Integrate ``V̇ = -∇L(V)`` of each configuration of ``problem`` alone, step by step
    (scipy's ``problem.method``) over ``[0, times[-1]]``: the NumPy implementation of the
    flow, whose adaptive steps -- and so whose results -- do not depend on the batch.

    Returns the arrays of :meth:`HermiteFlowProblem.outputs`, filled by
    :func:`_integrate_one`; ``problem.progress`` receives the fraction of the batch done.
    """
    out = problem.outputs()
    B, times = problem.size, problem.times
    for b in range(B):

        def frac(t: float, b: int = b) -> None:
            if problem.progress is not None:
                problem.progress(min(1.0, (b + t / times[-1]) / B))

        _integrate_one(problem, b, out, frac)
    return out


def _integrate_one(problem: HermiteFlowProblem, b: int, out: dict[str, np.ndarray],
                   progress: Callable[[float], None]) -> None:
    """Integrate configuration ``b`` of ``problem`` into its rows of ``out``.

    The outputs at ``times`` are taken from the solver's dense output; ``t_recover[p]``
    receives the first time ``max_k ⟨v̄_k, e_p⟩²`` reaches :data:`RECOVERY`, located by
    ``brentq`` on the dense output of the step in which it happens (so it is accurate to the
    integrator's tolerance, whatever the output grid), and ``winner[p]`` the argmax neuron
    there.

    ``method``: the explicit RK45/DOP853 need one gradient per stage and nothing else; once a
    neuron has converged its restoring rate (≈ 8 a_p) bounds their step (about one time unit
    at ``a ≈ 1``), so a long horizon after the last emergence costs ≈ 7 evaluations per unit
    of time. BDF/LSODA are implicit (stiff) methods with the analytic Jacobian
    :func:`population_grad_jacobian`: their step is not stability-bound, but each Jacobian
    costs O((m d)² m) and each factorisation O((m d)³), so they are offered for
    ``m d ≤ JACOBIAN_LIMIT`` only. CVODE (:mod:`richlazy_cli.numerics.solvers.krylov`) is
    implicit too, its Newton systems solved by GMRES on Hessian–vector products
    (:class:`._linear.FlowOperators`, about 0.9 of a gradient each) preconditioned by each
    neuron's radial and cross curvatures (:meth:`._linear.FlowOperators.precondition`), so
    its step is not stability-bound either and it works at any size: ``nfev`` counts its
    gradients and ``njev`` its products. Use RK45/DOP853 when the search phase dominates;
    CVODE for long flows whose plateaus (converged neurons held at the explicit stability
    edge) dominate (docs/hermite.md, "Integrators"); BDF/LSODA for small states only.

    ``early_stop`` (with ``recoverable``, the teachers with a finite greedy time): stop at the
    first solver step where as many teachers are recovered as are learnable (the count of
    ``recoverable``: when neurons compete, the flow may learn another set than the greedy
    rule's) and the loss has settled,
    ``‖∇L‖² t ≤ SETTLE_TOL · L(0)`` (``dL/dt = −‖∇L‖²``: at this rate the loss would change by
    at most ``SETTLE_TOL · L(0)`` over the next doubling of time, one step of a log-time
    axis). The remaining output times then receive the state at the stop. Fills status,
    ``nfev`` (gradient evaluations, those of the stopping test included), ``njev`` and
    ``t_stop`` (where the integration ended).
    """
    V0, a, c, times = problem.V0[b], problem.a[b], problem.c, problem.times
    method = problem.method
    m, d = V0.shape
    P = a.shape[0]
    t_rec, winner = out["t_recover"][b], out["winner"][b]
    Vs = out.get("V")
    extra = 0
    L0 = population_loss_grad(V0, a, c, need_grad=False)[0]

    def record(i: int, Vi: np.ndarray) -> None:
        out["loss"][b, i] = population_loss_grad(Vi, a, c, need_grad=False)[0]
        out["overlap"][b, i], out["norm"][b, i] = _overlap_stats(Vi, P)
        if Vs is not None:
            Vs[b, i] = Vi

    def rhs(t: float, y: np.ndarray) -> np.ndarray:
        g = population_loss_grad(y.reshape(m, d), a, c)[1]
        assert g is not None
        return -g.ravel()

    def jac(t: float, y: np.ndarray) -> np.ndarray:
        return -population_grad_jacobian(y.reshape(m, d), a, c)

    def cos2(y: np.ndarray) -> np.ndarray:
        Vy = y.reshape(m, d)
        r2 = np.einsum("kd,kd->k", Vy, Vy)
        return Vy[:, :P] ** 2 / np.maximum(r2, problem.r_floor**2)[:, None]

    def best(y: np.ndarray) -> np.ndarray:
        return cos2(y).max(axis=0)

    ops = FlowOperators(m, d, a, c, problem.r_floor)
    solver: Any
    if method == SWITCHED:
        solver = SwitchingRK45CVODE(ops.rhs, ops.linearise, 0.0, V0.ravel(), times[-1],
                                    problem.rtol, float(problem.atol[b]),
                                    STIFF_TOLERANCE * problem.rtol,
                                    STIFF_TOLERANCE * float(problem.atol[b]),
                                    precondition=ops.precondition)
    elif method in KRYLOV_STEPPERS:
        solver = KRYLOV_STEPPERS[method](ops.rhs, ops.linearise, 0.0, V0.ravel(), times[-1],
                                         problem.rtol, float(problem.atol[b]),
                                         precondition=ops.precondition)
    else:
        kwargs: dict[str, Any] = {"rtol": problem.rtol, "atol": problem.atol[b]}
        if method in STIFF_METHODS:
            kwargs["jac"] = jac
        solver = _SOLVERS[method](rhs, 0.0, V0.ravel().copy(), times[-1], **kwargs)
    record(0, V0)
    i = 1
    prev = best(solver.y)
    t_rec[prev >= problem.recovery] = 0.0
    winner[prev >= problem.recovery] = np.argmax(cos2(solver.y), axis=0)[prev >= problem.recovery]
    n_steps = 0
    status = Status.OK
    need = problem.learnable[b]
    with np.errstate(over="ignore", invalid="ignore"):
        while solver.status == "running" and i < len(times):
            solver.step()
            if solver.status == "failed" or not np.all(np.isfinite(solver.y)):
                status = Status.DIVERGED
                break
            n_steps += 1
            dense = None
            while i < len(times) and times[i] <= solver.t:
                dense = dense or solver.dense_output()
                record(i, solver.y.reshape(m, d) if times[i] == solver.t
                       else dense(times[i]).reshape(m, d))
                i += 1
            now = best(solver.y)
            for p in np.flatnonzero(np.isnan(t_rec) & (now >= problem.recovery)):
                dense = dense or solver.dense_output()
                t_rec[p] = brentq(lambda t, p=p, f=dense: best(f(t))[p] - problem.recovery,
                                  solver.t_old, solver.t, xtol=1e-12 * max(1.0, solver.t))
                winner[p] = int(np.argmax(cos2(dense(t_rec[p]))[:, p]))
            if n_steps % 200 == 0:
                progress(solver.t)
            if (problem.early_stop and i < len(times)
                    and np.count_nonzero(~np.isnan(t_rec)) >= np.count_nonzero(need)):
                f = getattr(solver, "f", None)
                if f is None:
                    f = rhs(solver.t, solver.y)
                    extra += 1
                if float(f @ f) * solver.t <= problem.settle_tol * L0:
                    while i < len(times):
                        record(i, solver.y.reshape(m, d))
                        i += 1
                    break
    out["status"][b], out["nfev"][b] = status, solver.nfev + extra + ops.extra
    out["njev"][b], out["t_stop"][b] = getattr(solver, "njev", 0), solver.t
    if isinstance(solver, SwitchingRK45CVODE):
        B = problem.size
        out.setdefault("switches", np.zeros(B, np.int64))[b] = solver.switches
        out.setdefault("nlin", np.zeros(B, np.int64))[b] = solver.nlin
        out.setdefault("t_stiff", np.zeros(B))[b] = solver.stiff_time


def minibatch_grad(V: np.ndarray, x: np.ndarray, fstar: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Mini-batch gradient of ``½ mean_i (f(x_i) - f*(x_i))²`` (docs/hermite.md, eq. (7)).

    ``∇_{v_k} = mean_i e_i [2 v_k σ(z_ki) + r_k σ'(z_ki)(x_i - z_ki v̄_k)]``, ``e_i = f - f*``.
    """
    n = x.shape[0]
    r2 = np.einsum("kd,kd->k", V, V)
    r = np.maximum(np.sqrt(r2), _R_FLOOR)
    U = V / r[:, None]
    z = U @ x.T  # (m, n)
    sig, dsig = hermite_eval(z, c)
    err = r2 @ sig - fstar  # (n,)
    es = sig @ err  # (m,)
    ed = dsig * err[None, :]
    grad = (2.0 / n) * es[:, None] * V
    grad += (r / n)[:, None] * (ed @ x - np.einsum("kn,kn->k", ed, z)[:, None] * U)
    return grad


# -- the model --------------------------------------------------------------------------------
IMPLEMENTATIONS: tuple[Implementation, ...] = (
    Implementation("numba", "train: the compiled SGD loop", ("train",), tolerance=0.0,
                   run="_train_numba"),
    Implementation("numpy", "the reference: solve with SciPy's integrators, train with the "
                   "NumPy SGD loop", ("solve", "train"), reference=True,
                   run={"solve": "_solve_scipy", "train": "_train_numpy"}),
    Implementation("torch", "solve: the batch's flows at once on a device, Dormand-Prince "
                   "5(4)", ("solve",), devices=("cpu", "cuda"), methods=("RK45",),
                   requires=("torch",), tolerance=1e-6, run="_solve_torch"),
)
"""Where hermite computes (docs/hermite.md): in this order of preference per action. Each
row names the method that computes on it (the model's dispatch calls it): the flow by
:func:`_integrate_flow` or :func:`._torch.integrate_flow`, SGD by the compiled or the NumPy
loop of :mod:`._sgd`."""
SGD_WORK_PER_SAMPLE: dict[str, float] = {"numba": 4.0, "numpy": 60.0}
"""The work of one sample of one SGD step per neuron and coordinate, by the implementation
that trains (:meth:`Hermite._cost`): the NumPy loop's sequential sums cost fifteen times the
compiled loop's."""


@register
class Hermite(Model):
    """Additive Hermite single-index tasks learned by a 2-homogeneous student (docs/hermite.md)."""

    name: ClassVar[str] = "hermite"
    summary: ClassVar[str] = (
        "Additive model of P Hermite single-index tasks: population gradient flow and online "
        "SGD, emergence times and scaling laws (Ren et al. 2025)"
    )
    actions: ClassVar[tuple[str, ...]] = ("solve", "train")
    params: ClassVar[tuple[Param, ...]] = (
        Param("d", "int", 256, "input dimension", low=2),
        Param("P", "int", 16, "number of teacher tasks (directions e_1..e_P), P ≤ d", low=1),
        Param("m", "int", 32, "number of student neurons", low=1),
        Param("beta", "float", 0.8, "power-law exponent of the teacher weights a_p ∝ p^-beta",
              low=0.0, batchable=True),
        Param("a", "vector", None, "explicit teacher weights a_1..a_P (≥ 0, used as given; "
              "overrides beta)", low=0.0, optional=True),
        Param("k", "int", 4, "σ = h_k, the normalised Hermite polynomial of even degree k ≥ 4",
              low=4, high=30),
        Param("sigma_coeffs", "vector", None, "Hermite coefficients c_0..c_K of σ (even, "
              "c_1 = c_2 = 0, Σ c_j² = 1); overrides k", optional=True),
        Param("sigma0", "float", 1e-2, "initial neuron norm (radius of the initial sphere)",
              low=0.0, low_open=True, batchable=True),
        Param("t_max", "float", 2000.0, "solve: gradient-flow time horizon", unit="time",
              low=0.0, low_open=True),
        Param("decades", "float", 4.0, "solve: output times span this many decades below "
              "t_max", low=0.5, high=12.0),
        Param("rtol", "float", None, "solve: relative tolerance of the adaptive integrator "
              "(default 1e-7; CVODE 2e-9; RK45+CVODE 1e-7, its CVODE at a tenth)", low=1e-13,
              high=1e-2, optional=True),
        Param("method", "str", "RK45", "solve: integrator (RK45, DOP853 explicit; BDF, LSODA "
              "stiff, with the analytic Jacobian, for m·d ≤ 4096; CVODE stiff, matrix-free, "
              "needs scikit-sundae; RK45+CVODE switches from one to the other where the "
              "flow turns stiff)",
              choices=("RK45", "DOP853", "BDF", "LSODA", "CVODE", SWITCHED)),
        Param("reduce", "str", "off", "solve: auto integrates in an orthonormal basis of "
              "span(e_1…e_P) + rowspace(V(0)) where P + m < d (the flow stays there; outputs "
              "in the original coordinates); off integrates all d coordinates",
              choices=("off", "auto")),
        Param("early_stop", "bool", False, "solve: stop once every learnable teacher is "
              "recovered and the loss has settled; later output times hold that state"),
        Param("lr", "float", None, "train: online-SGD step (default 0.1/d²); time = lr × step",
              low=0.0, low_open=True, batchable=True, optional=True),
        Param("steps", "int", 100000, "train: number of online-SGD steps (= samples / batch)",
              low=1),
        Param("batch", "int", 1, "train: fresh Gaussian samples per SGD step", low=1),
        Param("stop_on_recovery", "bool", False, "train: stop once every learnable teacher is "
              "recovered, plus 10% more steps"),
        Param("n_records", "int", 200, "how many log-spaced output times/steps a run records "
              "after 0", low=1),
        Param("seed", "int", 0, "random seed (initial directions; SGD samples)", low=0),
        Param("save_params", "bool", False, "also store the weights v over (time, neuron, dim)"),
        compute.implementation_param(IMPLEMENTATIONS),
        compute.device_param(),
    )
    implementations: ClassVar[tuple[Implementation, ...]] = IMPLEMENTATIONS
    implementation_aliases: ClassVar[dict[str, dict[str, dict[str, tuple[str, ...]]]]] = {
        "solve": {"backend": {"numpy": ("numpy",), "torch": ("torch",)}},
        "train": {"backend": {"numpy": ("numba", "numpy"), "torch": ("torch",)},
                  "loop": {"numba": ("numba",), "numpy": ("numpy",)}},
    }
    """The older, deprecated parameters that chose the implementation (docs/usage.md, "Older
    parameter names")."""
    aliases: ClassVar[dict[str, dict[str, str]]] = {
        "checkpoints": {"solve": "n_records", "train": "n_records"},
    }
    """The older name of the record count (docs/engine.md, "Records")."""
    overrides: ClassVar[dict[str, tuple[str, ...]]] = {"a": ("beta",)}
    examples: ClassVar[dict[str, tuple[dict[str, Any], ...]]] = {
        "solve": (
            {"d": 10, "P": 3, "m": 4, "t_max": 30.0, "n_records": 15, "sigma0": 0.05},
            {"d": 10, "P": 3, "m": 4, "t_max": 30.0, "n_records": 15, "sigma0": 0.01,
             "beta": 1.2},
            {"d": 10, "P": 3, "m": 4, "t_max": 30.0, "n_records": 15, "seed": 1},
        ),
        "train": (
            {"d": 10, "P": 3, "m": 4, "steps": 300, "n_records": 10, "batch": 3},
            {"d": 10, "P": 3, "m": 4, "steps": 300, "n_records": 10, "batch": 3,
             "sigma0": 0.05, "lr": 0.002},
            {"d": 10, "P": 3, "m": 4, "steps": 300, "n_records": 10, "batch": 3, "seed": 1,
             "save_params": True},
        ),
    }

    @classmethod
    def derive(cls, action: str, values: dict[str, Any]) -> None:
        """SGD's learning rate, when not given: ``0.1 / d²``; the flow's ``rtol``, when not
        given: :data:`DEFAULT_RTOL` of the method."""
        if action == "train" and values["lr"] is None:
            values["lr"] = 0.1 / values["d"] ** 2
        if values.get("rtol") is None:
            values["rtol"] = DEFAULT_RTOL.get(str(values.get("method")), 1e-7)

    @classmethod
    def check(cls, action: str, values: Mapping[str, Any]) -> None:
        d, P = values["d"], values["P"]
        if P > d:
            raise BadInput(f"parameter P: {P} teachers need P ≤ d = {d}")
        if values["a"] is not None:
            a = np.asarray(values["a"], dtype=float)
            if a.shape != (P,):
                raise BadInput(f"parameter a: expected {P} weights (one per teacher), "
                               f"got {a.size}")
            if not np.any(a > 0):
                raise BadInput("parameter a: at least one weight must be positive")
        if values["sigma_coeffs"] is not None:
            validate_coeffs(values["sigma_coeffs"])
        elif values["k"] % 2:
            raise BadInput(f"parameter k: σ = h_k must be even with k ≥ 4, got {values['k']}")
        if values["a"] is None and P > 1 and values["beta"] <= 0:
            raise BadInput(f"parameter beta: the power law a_p ∝ p^-beta needs beta > 0 with "
                           f"P = {P} teachers (beta = {values['beta']:g} gives no order of "
                           "emergence); give the weights in a to choose them freely")
        if action == "solve" and values["stop_on_recovery"]:
            raise BadInput("parameter stop_on_recovery: only for train (online SGD); solve "
                           "has early_stop")
        if action == "train" and values["reduce"] != "off":
            raise BadInput("parameter reduce: only for solve (the flow)")
        if action == "train" and values["early_stop"]:
            raise BadInput("parameter early_stop: only for solve (the flow); train has "
                           "stop_on_recovery")
        if (action == "solve" and values["method"] in KRYLOV_METHODS
                and importlib.util.find_spec("sksundae") is None):
            raise BadInput(f"parameter method: {values['method']} needs the package "
                           "scikit-sundae (pip install scikit-sundae; wheels for Linux x86_64, "
                           "macOS and Windows amd64)")
        if action == "solve" and values["method"] in STIFF_METHODS:
            n = values["m"] * d
            if n > JACOBIAN_LIMIT:
                raise BadInput(
                    f"parameter method: {values['method']} needs the dense Jacobian of the "
                    f"m·d = {n} weights ({n}² values, {n * n * 8 / 2**20:.0f} MiB); the limit "
                    f"is m·d ≤ {JACOBIAN_LIMIT}: use RK45 or DOP853")

    @classmethod
    def _probe(cls, values: Mapping[str, Any]) -> dict[str, Any]:
        """The same configuration over a shorter horizon (solve: t_max ≤ 20; train: about
        5·10⁷/(m·d·batch) steps, between 2,000 and 200,000, so that the per-step work, not the
        set-up and the checkpoints' population losses, dominates the timing), without stopping
        early: the cost is linear in either."""
        short = dict(values)
        short["t_max"] = min(float(values["t_max"]), 20.0)
        work = max(int(values["m"]) * int(values["d"]) * int(values["batch"]), 1)
        short["steps"] = min(int(values["steps"]), int(np.clip(5e7 / work, 2000, 200_000)))
        short["early_stop"] = short["stop_on_recovery"] = False
        return short

    @classmethod
    def _cost(cls, values: Mapping[str, Any], action: str) -> float:
        """Flops-like estimate of ``action`` (which :meth:`Model.footprint` passes to a cost
        that declares it). solve: gradient evaluations of
        :func:`evaluation_work` each, the integrator's evaluations
        (:func:`expected_evaluations`; CVODE :func:`expected_cvode_evaluations`; RK45+CVODE
        :func:`expected_switched_evaluations`; the implicit
        BDF/LSODA ~7 per unit of GF time) and one
        per output time (its loss and overlaps); train: O(batch·m·d) per SGD step
        (:func:`expected_steps`), :data:`SGD_WORK_PER_SAMPLE` of the implementation that
        trains."""
        m, d = values["m"], values["d"]
        if action == "solve":
            if values.get("method", "RK45") in STABILITY_INTERVAL:
                evaluations = expected_evaluations(values)
            elif values.get("method") == SWITCHED:
                evaluations = expected_switched_evaluations(values)
            elif values.get("method") in KRYLOV_METHODS:
                evaluations = expected_cvode_evaluations(values)
            else:
                evaluations = 7.0 * float(values["t_max"])
            evaluations += int(values["n_records"]) + 1
            return evaluations * evaluation_work(m, reduced_size(values)) * 1e-9
        impl = cls.implementation(values, action)
        assert impl is not None
        per_sample = SGD_WORK_PER_SAMPLE[impl.name]
        return float(expected_steps(values)) * values["batch"] * m * d * per_sample * 1e-9

    @classmethod
    def _working_bytes(cls, action: str, values: Mapping[str, Any]) -> float | None:
        """Peak memory of one configuration, float64, from the ``m × d`` weights ``V``:
        ``solve``, about nineteen copies (the initial directions, the integrator's state and
        its seven Runge–Kutta stages, the dense output's interpolant, the gradient's
        normalised ``U`` and its temporaries) and the ``m × m`` Gram matrix with its
        temporaries (``4 m²``); ``train``, four copies with the compiled loop and eight with
        the NumPy loop (the weights, the initial ones, the gradient and the step's
        temporaries), and a batch of samples with their projections, ``2·batch·d +
        3·batch·m``. The outputs are :meth:`_output_bytes`. Checked against the measured peak
        by tests/models/test_memory.py."""
        m, d, batch = int(values["m"]), int(values["d"]), int(values["batch"])
        if action == "solve":
            return 8.0 * (19 * m * d + 4 * m * m)
        impl = cls.implementation(values, action)
        copies = 4 if impl is not None and impl.name == "numba" else 8
        return 8.0 * (copies * m * d + 2 * batch * d + 3 * batch * m)

    @classmethod
    def _result_cost(cls, values: Mapping[str, Any], data: xr.Dataset) -> float | None:
        """The cost (units of :meth:`_cost`) of the work a computed solve actually did: its
        counted gradient evaluations (``nfev``, summed over the points; CVODE's Hessian–vector
        products ``njev`` at :data:`JVP_COST` each, and CVODE's own work per call at
        :func:`cvode_call_work`: on every call of ``CVODE``, on the products of ``RK45+CVODE``,
        whose counts do not say which evaluations were CVODE's) and output times; None for
        train, whose results count none. The dry run prices its probe by this
        (docs/estimates.md)."""
        if "nfev" not in data:
            return None
        m, size = values["m"], reduced_size(values)
        points = int(data.sizes.get("point", 1))
        nfev = float(np.sum(data["nfev"].values))
        evaluations = nfev + points * (int(values["n_records"]) + 1)
        method = values.get("method")
        if method in KRYLOV_METHODS and "njev" in data:
            njev = float(np.sum(data["njev"].values))
            calls = njev if method == SWITCHED else nfev + njev
            evaluations += JVP_COST * njev + calls * cvode_call_work(m, size)
        return evaluations * evaluation_work(m, size) * 1e-9

    @classmethod
    def _output_bytes(cls, action: str, values: Mapping[str, Any]) -> float | None:
        """Over the ``T`` output times (solve: ``n_records + 1``; train: the distinct steps
        of :func:`log_steps`), float64 ``loss`` and ``loss_theory`` (time), ``overlap`` and
        ``norm`` (time, teacher), with ``save_params`` ``v`` (time, neuron, dim); per teacher
        float64 ``t_recover``, ``t_recover_theory``, ``winner_overlap0`` and int64
        ``winner``, ``winner_theory``; solve: int64 ``nfev``, ``njev`` and float64
        ``t_stop``; train: float64 ``time`` (time) and ``steps_recover`` (teacher), int64
        ``steps_run``. Every case is declared: a configuration that stops early
        (``early_stop``, ``stop_on_recovery``) or diverges keeps every output time (holding
        its last state, or NaN), whatever the backend."""
        P, m, d = int(values["P"]), int(values["m"]), int(values["d"])
        if action == "solve":
            T = int(values["n_records"]) + 1
            per_time, per_teacher, scalars = 2 + 2 * P, 5, 3
        else:
            T = log_steps(int(values["steps"]), int(values["n_records"])).size
            per_time, per_teacher, scalars = 3 + 2 * P, 6, 1
        if values["save_params"]:
            per_time += m * d
        return 8.0 * (T * per_time + per_teacher * P + scalars)

    # -- helpers ----------------------------------------------------------------------------
    @staticmethod
    def _setup(batch: Batch) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(c, a (B,P), U0 (m,d), sigma0 (B,))."""
        c = hermite_coeffs(batch["k"], batch["sigma_coeffs"])
        P = batch["P"]
        beta = batch.column("beta")
        a = np.stack([teacher_weights(P, float(b), batch["a"]) for b in beta])
        U0 = initial_directions(batch["seed"], batch["m"], batch["d"])
        return c, a, U0, batch.column("sigma0").astype(float)

    @staticmethod
    def _dataset(batch: Batch, axis: str, axis_coord: xr.Variable, loss: np.ndarray,
                 overlap: np.ndarray, norm: np.ndarray, t_rec: np.ndarray, t_th: np.ndarray,
                 loss_th: np.ndarray, status: np.ndarray, Vs: np.ndarray | None,
                 extra: dict[str, xr.Variable]) -> xr.Dataset:
        P, m, d = batch["P"], batch["m"], batch["d"]
        data = {
            "loss": var(("point", axis), loss, "population loss ½E(f - f*)²"),
            "overlap": var(("point", axis, "teacher"), overlap,
                           "best squared overlap max_k <v̄_k, e_p>²"),
            "norm": var(("point", axis, "teacher"), norm, "squared norm ‖v_k‖² of the best neuron"),
            "t_recover": var(("point", "teacher"), t_rec,
                             "first time the overlap reaches 0.9", "time"),
            "t_recover_theory": var(("point", "teacher"), t_th,
                                    "greedy single-neuron prediction of t_recover", "time"),
            "loss_theory": var(("point", axis), loss_th,
                               "idealised loss ½ Σ_{unlearned p} a_p²"),
            "status": var(("point",), status, "0 ok, 1 diverged"),
            **extra,
        }
        data["t_recover"].attrs["nan_meaning"] = "the overlap never reached 0.9"
        if axis == "step":
            data["t_recover"].attrs["long_name"] = "lr × the first step with overlap ≥ 0.9"
        data["t_recover_theory"].attrs["nan_meaning"] = (
            "not learnable: more teachers than neurons (greedy rule) or a_p = 0")
        if Vs is not None:
            data["v"] = var(("point", axis, "neuron", "dim"), Vs, "student weights v_k")
        coords = {
            axis: axis_coord,
            "teacher": var(("teacher",), np.arange(1, P + 1), "teacher index p"),
        }
        if Vs is not None:
            coords["neuron"] = var(("neuron",), np.arange(m), "student neuron index")
            coords["dim"] = var(("dim",), np.arange(d), "input coordinate")
        return xr.Dataset(data, coords=coords)

    @staticmethod
    def _winner_vars(winner: np.ndarray, w_th: np.ndarray, U0: np.ndarray
                     ) -> dict[str, xr.Variable]:
        """``winner``, ``winner_theory`` and ``winner_overlap0`` (docs/hermite-sgd.md §3)."""
        P = winner.shape[1]
        cos2 = U0[:, :P] ** 2  # (m, P)
        ov0 = np.where(winner >= 0, cos2[np.maximum(winner, 0), np.arange(P)[None, :]], np.nan)
        out = {
            "winner": var(("point", "teacher"), winner,
                          "neuron with the largest overlap when the teacher is recovered "
                          "(-1: never recovered)"),
            "winner_theory": var(("point", "teacher"), w_th,
                                 "neuron the greedy rule pairs with the teacher (-1: none)"),
            "winner_overlap0": var(("point", "teacher"), ov0,
                                   "initial squared overlap <v̄_k(0), e_p>² of the winner"),
        }
        out["winner_overlap0"].attrs["nan_meaning"] = "the teacher was never recovered"
        return out

    # -- gradient flow ----------------------------------------------------------------------
    def _solve_scipy(self, batch: Batch, progress: Progress | None,
                     placement: compute.Placement) -> xr.Dataset:
        """The flow by SciPy's integrators, one configuration at a time (the reference)."""
        return self._solve(batch, progress, _integrate_flow)

    def _solve_torch(self, batch: Batch, progress: Progress | None,
                     placement: compute.Placement) -> xr.Dataset:
        """The batch's flows on ``placement``'s device (:mod:`._torch`)."""
        from ._torch import integrate_flow

        return self._solve(batch, progress,
                           lambda problem: integrate_flow(problem, placement.device))

    def _solve(self, batch: Batch, progress: Progress | None,
               integrate: Callable[[HermiteFlowProblem], dict[str, np.ndarray]]
               ) -> xr.Dataset:
        """The batch's :class:`HermiteFlowProblem`, integrated by ``integrate``, and the
        dataset of its outputs with the greedy theory's beside them."""
        c, a, U0, sigma0 = self._setup(batch)
        B, d, P = batch.size, batch["d"], batch["P"]
        times = log_times(batch["t_max"], batch["n_records"], batch["decades"])
        pairs = [greedy_pairs(U0[:, :P], a[b], c) for b in range(B)]
        t_th = np.stack([tp[0] for tp in pairs])
        w_th = np.stack([tp[1] for tp in pairs])
        atol = 1e-3 * batch["rtol"] * sigma0 / math.sqrt(d)
        Q = None
        if reduced_size({"d": d, "P": P, "m": batch["m"], "reduce": batch["reduce"]}) < d:
            Q = reduced_basis(U0, P)
        res = integrate(HermiteFlowProblem(
            V0=sigma0[:, None, None] * (U0 if Q is None else U0 @ Q)[None], a=a, c=c,
            times=times,
            method=batch["method"], rtol=batch["rtol"], atol=atol, recovery=RECOVERY,
            r_floor=_R_FLOOR, early_stop=batch["early_stop"], recoverable=np.isfinite(t_th),
            settle_tol=SETTLE_TOL, save_params=batch["save_params"], progress=progress))
        if progress is not None:
            progress(1.0)
        if Q is not None and "V" in res:  # back to the original coordinates
            res["V"] = res["V"] @ Q.T
        loss_th = np.stack([idealised_loss(times, t_th[b], a[b], c) for b in range(B)])
        coord = var(("time",), times, "gradient-flow time t", "time")
        extra = {"nfev": var(("point",), res["nfev"], "right-hand-side (gradient) evaluations"),
                 "njev": var(("point",), res["njev"], "Jacobian evaluations (BDF, LSODA); "
                             "Hessian-vector products (CVODE, RK45+CVODE)"),
                 "t_stop": var(("point",), res["t_stop"], "time at which the integration ended "
                               "(t_max unless early_stop or divergence); later output times "
                               "hold the state there", "time"),
                 **self._winner_vars(res["winner"], w_th, U0)}
        if "switches" in res:  # RK45+CVODE
            extra["switches"] = var(("point",), res["switches"], "hand-overs between RK45 and "
                                    "CVODE")
            extra["nlin"] = var(("point",), res["nlin"], "linearisations (set-ups of the "
                                "Hessian-vector product)")
            extra["t_stiff"] = var(("point",), res["t_stiff"], "time integrated by CVODE",
                                   "time")
        return self._dataset(batch, "time", coord, res["loss"], res["overlap"], res["norm"],
                             res["t_recover"], t_th, loss_th, res["status"], res.get("V"),
                             extra)

    # -- online SGD -------------------------------------------------------------------------
    def _train_numba(self, batch: Batch, progress: Progress | None,
                     placement: compute.Placement) -> xr.Dataset:
        """Online SGD by the compiled loop (:mod:`._jit`)."""
        return self._train(batch, progress, _sgd.compiled_blocks)

    def _train_numpy(self, batch: Batch, progress: Progress | None,
                     placement: compute.Placement) -> xr.Dataset:
        """Online SGD by the NumPy loop (the compiled loop's bitwise-identical reference)."""
        return self._train(batch, progress, _sgd.numpy_blocks)

    def _train(self, batch: Batch, progress: Progress | None, blocks: _sgd.Blocks
               ) -> xr.Dataset:
        """Online SGD of the batch, its steps taken in ``blocks`` (:func:`._sgd.run_online_sgd`)."""
        c, a, U0, sigma0 = self._setup(batch)
        B, m, d, P = batch.size, batch["m"], batch["d"], batch["P"]
        lr = np.ascontiguousarray(batch.column("lr"), dtype=float)
        grid = log_steps(batch["steps"], batch["n_records"])
        S = len(grid)
        loss = np.full((B, S), np.nan)
        overlap = np.full((B, S, P), np.nan)
        norm = np.full((B, S, P), np.nan)
        Vs = np.full((B, S, m, d), np.nan) if batch["save_params"] else None
        V = np.ascontiguousarray(sigma0[:, None, None] * U0[None, :, :])
        pairs = [greedy_pairs(U0[:, :P], a[b], c) for b in range(B)]
        t_th = np.stack([tp[0] for tp in pairs])
        w_th = np.stack([tp[1] for tp in pairs])

        def record(i: int, b: int) -> None:
            loss[b, i] = population_loss_grad(V[b], a[b], c, need_grad=False)[0]
            overlap[b, i], norm[b, i] = _overlap_stats(V[b], P)
            if Vs is not None:
                Vs[b, i] = V[b]

        res = _sgd.run_online_sgd(V, np.ascontiguousarray(a), c, lr, batch["batch"], grid,
                                  rng(batch["seed"], "sgd"), np.isfinite(t_th),
                                  batch["stop_on_recovery"], blocks, _R_FLOOR, RECOVERY,
                                  record, progress)
        steps_rec = np.where(res["rec_step"] >= 0, res["rec_step"], np.nan)
        timev = lr[:, None] * grid[None, :].astype(float)
        t_rec = lr[:, None] * steps_rec
        loss_th = np.stack([idealised_loss(timev[b], t_th[b], a[b], c) for b in range(B)])
        coord = var(("step",), grid, "online-SGD step (samples / batch)")
        extra = {
            "time": var(("point", "step"), timev, "rescaled time lr × step", "time"),
            "steps_recover": var(("point", "teacher"), steps_rec,
                                 "first SGD step after which the overlap is ≥ 0.9", "steps"),
            "steps_run": var(("point",), res["last_step"], "SGD steps taken (fewer than steps "
                             "with stop_on_recovery)", "steps"),
            **self._winner_vars(res["winner"], w_th, U0),
        }
        extra["steps_recover"].attrs["nan_meaning"] = "the overlap never reached 0.9"
        ds = self._dataset(batch, "step", coord, loss, overlap, norm, t_rec, t_th, loss_th,
                           res["status"], Vs, extra)
        for name in ("loss", "overlap", "norm"):
            ds[name].attrs["nan_meaning"] = ("after the configuration stopped "
                                             "(stop_on_recovery) or diverged")
        return ds
