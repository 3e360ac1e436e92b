r"""Single hidden neuron :math:`f(x) = a\,w^\top x`: exact solutions, gradient flow, implicit bias.

Mathematics (Kunin et al. 2024, §3; docs/single-neuron.md). The end-to-end predictor is :math:`\beta
= a w \in \mathbb R^d` and the loss is :math:`L = \tfrac12\|X a w - y\|^2` (sum loss); without data
``X`` the data are whitened, :math:`X^\top X = I` and :math:`\beta^* =` ``beta_star``, so that
:math:`L = \tfrac12\|\beta - \beta^*\|^2` (up to a constant). Gradient flow with one learning rate
per layer, with :math:`g = \nabla_\beta L = X^\top(X\beta - y)`, is

.. math::  \dot a = -\eta_a\, w^\top g, \qquad \dot w = -\eta_w\, a\, g,

and conserves :math:`\delta = \eta_w a^2 - \eta_a \|w\|^2` (docs/single-neuron.md, eq. (2)).

* **Initialisation** (docs/single-neuron.md, eq. (3), for any :math:`\eta`): from a function-space
  start :math:`\beta_0` and :math:`\delta`, the unique :math:`a_0 > 0`, :math:`w_0 = \beta_0 / a_0`
  with :math:`\eta_w a_0^2 = (\delta + \kappa_0)/2`, :math:`\kappa_0 = \sqrt{\delta^2 + 4\gamma^2
  \|\beta_0\|^2}`, :math:`\gamma = \sqrt{\eta_a\eta_w}`; see :func:`init_from_beta`.
* **Exact solution** (docs/single-neuron.md, eqs. (5)–(7)): :func:`exact_trajectory`, written in a
  rescaled, cancellation-free form valid for every sign of :math:`\delta`, through a sign
  change of :math:`a`, for :math:`\delta = 0`, any :math:`\eta_a, \eta_w > 0` and any ``d``.
* **Numeric solution**: :func:`numeric_trajectory` integrates a stack of configurations as
  one ODE with ``solve_ivp`` (DOP853); the model calls it one configuration at a time so that
  each result is independent of the batch it is computed in (bitwise reproducibility).
* **NTK** (docs/single-neuron.md, eqs. (9)–(10)): :math:`K = X M X^\top` with
  :math:`M = \eta_w a^2 I + \eta_a w w^\top`; :func:`kernel_distance` gives
  :math:`S(0, t) = 1 - \langle K_0, K_t\rangle_F / (\|K_0\|_F\|K_t\|_F)`.
* **Implicit bias** (Kunin et al. 2024, Thm 3.1; docs/single-neuron.md, eqs. (11)–(14)):
  :func:`numeric_limit` integrates to convergence and :func:`implicit_interpolant` gives the
  predicted interpolator (closed form for a one-dimensional null space, eq. (13), otherwise the
  :math:`\lambda`-parametrisation of eq. (14)).

The array functions take a leading batch axis ``B`` and are independent of the model class, so
benchmarks and tests call them directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import xarray as xr

from ...errors import BadInput
from ...numerics.kernel_distance import kernel_distance as shared_kernel_distance
from ...numerics.records import record_grid
from ...params import Param
from ..base import Batch, Model, Progress, register, var
from ._extras import extra_outputs, hessian_map_defect  # noqa: F401 (re-export)
from ._halves import _halves

WHITENING_TOL = 1e-12
"""Largest entry of :math:`|X^\\top X - I|` for which the exact (whitened) solution is allowed."""

LIMIT_GRAD_TOL = 1e-10
"""``beta_inf`` is the state at which :math:`\\|X^\\top(X\\beta - y)\\|` first drops below this."""

LIMIT_T_CAP = 1e9
"""Largest gradient-flow time integrated when looking for ``beta_inf``."""


# ---------------------------------------------------------------------------------------------
# Pure array kernels (leading batch axis B)
# ---------------------------------------------------------------------------------------------
def init_from_beta(
    beta0: np.ndarray, delta: np.ndarray, eta_a: np.ndarray, eta_w: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    r"""The initial weights :math:`(a_0, w_0)` with :math:`a_0 > 0`, :math:`a_0 w_0 = \beta_0` and
    :math:`\eta_w a_0^2 - \eta_a\|w_0\|^2 = \delta` (docs/single-neuron.md, eq. (3), any
    :math:`\eta`).

    With :math:`p = \eta_w a_0^2` the constraints give :math:`p^2 - \delta p - \gamma^2
    \|\beta_0\|^2 = 0`, whose positive root is :math:`p = (\delta + \kappa_0)/2`; it is evaluated
    as :math:`\gamma^2\|\beta_0\|^2/q` with :math:`q = (\kappa_0 - \delta)/2` when
    :math:`\delta < 0` (no cancellation for :math:`|\delta|` large or :math:`\|\beta_0\|` small).
    Needs :math:`\delta > 0` when :math:`\beta_0 = 0`. Shapes: ``beta0`` (B, d), others (B,).
    """
    beta0 = np.asarray(beta0, dtype=float)
    eta_a = np.asarray(eta_a, dtype=float)
    eta_w = np.asarray(eta_w, dtype=float)
    r2 = np.sum(beta0 * beta0, axis=-1)
    _, p, _ = _halves(delta, eta_a * eta_w * r2)
    a0 = np.sqrt(p / eta_w)
    with np.errstate(divide="ignore", invalid="ignore"):
        w0 = beta0 / a0[..., None]
    return a0, w0


def exact_trajectory(
    a0: np.ndarray,
    w0: np.ndarray,
    delta: np.ndarray,
    beta_star: np.ndarray,
    eta_a: np.ndarray,
    eta_w: np.ndarray,
    times: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Exact gradient-flow trajectory for whitened data (docs/single-neuron.md, eqs. (5)–(7)).

    Shapes: ``a0``, ``delta``, ``eta_a``, ``eta_w`` (B,); ``w0``, ``beta_star`` (B, d);
    ``times`` (T,), all :math:`\ge 0`. Returns ``a`` (B, T) and ``w`` (B, T, d). ``delta`` must
    equal :math:`\eta_w a_0^2 - \eta_a\|w_0\|^2` and :math:`\beta^* \ne 0`.

    With :math:`b = \|\beta^*\|`, :math:`\kappa_* = \sqrt{\delta^2 + 4\gamma^2 b^2}`,
    :math:`\lambda_\pm = (\delta \pm \kappa_*)/2` (so :math:`\lambda_+ > 0 > \lambda_-`,
    :math:`\lambda_+\lambda_- = -\gamma^2 b^2`), :math:`z_0 = w_0^\top\beta^*`,
    :math:`P = (\eta_a z_0 + \lambda_+ a_0)/\kappa_*`, :math:`N = a_0 - P`, the closed form is
    :math:`\Phi = P e^{\lambda_+ t} + N e^{\lambda_- t}`, :math:`J = \int_0^t \Phi^2`,
    :math:`D = \sqrt{1 + 2\eta_w J}`, :math:`a = \Phi / D`,
    :math:`w^\top\beta^* = (\dot\Phi - \delta\Phi)/(\eta_a D)` and
    :math:`w = (w^\top\beta^*/b^2)\,\beta^* + w_\perp(0)/D`.

    Everything is multiplied by :math:`e^{-\lambda_+ t}` (no overflow for any ``t``), and the
    coefficients are regrouped so that no difference of nearly equal terms is formed
    (with :math:`u = e^{-\kappa_* t}` and :math:`m = -\operatorname{expm1}(-\kappa_* t)`):

    * :math:`\tilde\Phi = e^{-\lambda_+ t}\Phi = a_0 u + P m` (exact at ``t = 0``),
    * :math:`e^{-\lambda_+ t} D\, w^\top\beta^* = z_0 u + A m` with :math:`A = -P\lambda_-/\eta_a`
      (from :math:`\dot\Phi - \delta\Phi = -P\lambda_- e^{\lambda_+ t}
      - N\lambda_+ e^{\lambda_- t}`),
    * :math:`\tilde D^2 = e^{-2\lambda_+ t} D^2 = e^{-2\lambda_+ t} + 2\eta_w \tilde J`, where
      :math:`\tilde J = P^2 \frac{1 - e^{-2\lambda_+ t}}{2\lambda_+} + 2PN\,T_2 +
      N^2 e^{-2\lambda_+ t}\frac{\operatorname{expm1}(2\lambda_- t)}{2\lambda_-}` and
      :math:`T_2 = e^{-2\lambda_+t}\,\operatorname{expm1}(\delta t)/\delta`, evaluated as
      :math:`e^{-\kappa_* t}(-\operatorname{expm1}(-\delta t))/\delta` for :math:`\delta > 0`
      and as :math:`e^{-2\lambda_+ t}\,t` for :math:`\delta = 0`;
    * :math:`a = \tilde\Phi/\tilde D`, :math:`w = (\cdot)\beta^*/b^2 + w_\perp(0)\,
      e^{-\lambda_+ t}/\tilde D`.
    """
    a0 = np.asarray(a0, dtype=float)
    w0 = np.asarray(w0, dtype=float)
    delta = np.asarray(delta, dtype=float)
    bstar = np.asarray(beta_star, dtype=float)
    eta_a = np.asarray(eta_a, dtype=float)
    eta_w = np.asarray(eta_w, dtype=float)
    t = np.asarray(times, dtype=float)
    B, d = w0.shape
    a = np.empty((B, t.size))
    w = np.empty((B, t.size, d))
    # rows in cache-sized blocks (elementwise, so the result does not depend on the blocking)
    step = max(1, _BLOCK // max(t.size, 1))
    for lo in range(0, B, step):
        sl = slice(lo, lo + step)
        a[sl], w[sl] = _exact_block(a0[sl], w0[sl], delta[sl], bstar[sl], eta_a[sl], eta_w[sl], t)
    return a, w


_BLOCK = 32768
"""Elements (rows x times) per block of :func:`exact_trajectory`."""


def _exact_block(
    a0: np.ndarray,
    w0: np.ndarray,
    delta_b: np.ndarray,
    bstar: np.ndarray,
    eta_a: np.ndarray,
    eta_w: np.ndarray,
    times: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`exact_trajectory` for one block of rows."""
    t = times[None, :]
    b2 = np.sum(bstar * bstar, axis=-1)
    z0 = np.sum(w0 * bstar, axis=-1)
    w_perp0 = w0 - (z0 / b2)[:, None] * bstar
    kstar, lp, lm_abs = _halves(delta_b, eta_a * eta_w * b2)  # lambda_- = -lm_abs
    lm = -lm_abs
    P = (eta_a * z0 + lp * a0) / kstar
    N = a0 - P
    A = -P * lm / eta_a

    delta = delta_b[:, None]
    kstar, lp, lm = kstar[:, None], lp[:, None], lm[:, None]
    P, N, A, a0c = P[:, None], N[:, None], A[:, None], a0[:, None]

    u = np.exp(-kstar * t)
    m = -np.expm1(-kstar * t)
    v = np.exp(-lp * t)
    v2 = v * v
    phi_t = a0c * u + P * m
    z_t = z0[:, None] * u + A * m

    e1 = -np.expm1(-2.0 * lp * t) / (2.0 * lp)
    # T2 = e^{-2 lambda_+ t} expm1(delta t)/delta with one expm1(-|delta| t) =: e:
    # delta > 0: -u e / delta;  delta < 0: v^2 e / delta;  delta = 0: v^2 t.
    d_safe = np.where(delta != 0, delta, 1.0)
    e = np.expm1(-np.abs(delta) * t)
    t2 = np.where(delta > 0, -u, v2) * (e / d_safe)
    t2 = np.where(delta == 0, v2 * t, t2)
    t3 = v2 * np.expm1(2.0 * lm * t) / (2.0 * lm)
    j_t = P * P * e1 + 2.0 * P * N * t2 + N * N * t3
    d_t = np.sqrt(v2 + 2.0 * eta_w[:, None] * j_t)

    a = phi_t / d_t
    z = z_t / d_t
    w = (z / b2[:, None])[..., None] * bstar[:, None, :] + (v / d_t)[..., None] * w_perp0[
        :, None, :
    ]
    return a, w


def _gradient(beta: np.ndarray, G: np.ndarray | None, c: np.ndarray) -> np.ndarray:
    """:math:`g = G\\beta - c` over the last axis (:math:`G = X^\\top X`, :math:`c = X^\\top y`);
    ``G is None`` means :math:`G = I`."""
    if G is None:
        return beta - c
    return beta @ G - c  # G is symmetric


def numeric_trajectory(
    a0: np.ndarray,
    w0: np.ndarray,
    eta_a: np.ndarray,
    eta_w: np.ndarray,
    times: np.ndarray,
    c: np.ndarray,
    G: np.ndarray | None = None,
    rtol: float = 1e-10,
    atol: float = 1e-12,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Gradient flow :math:`\dot a = -\eta_a w^\top g`, :math:`\dot w = -\eta_w a g`,
    :math:`g = G(a w) - c`, integrated with ``solve_ivp`` (DOP853) for the whole batch as one
    stacked system of size :math:`B(1+d)`.

    ``G`` is :math:`X^\top X` (``None`` for the identity) and ``c`` (B, d) is :math:`X^\top y`
    (or :math:`\beta^*`). The step size is shared by the batch. ``solve_ivp`` controls the RMS
    of the scaled local error over all components, so the tolerances are divided by
    :math:`\sqrt{B(1+d)}`: every component then meets ``rtol``/``atol`` as if it were integrated
    alone. Returns ``a`` (B, T), ``w`` (B, T, d) at ``times``.
    """
    from scipy.integrate import solve_ivp  # here: the exact method never imports SciPy

    a0 = np.asarray(a0, dtype=float)
    w0 = np.asarray(w0, dtype=float)
    B, d = w0.shape
    ea = np.asarray(eta_a, dtype=float)
    ew = np.asarray(eta_w, dtype=float)[:, None]
    c = np.asarray(c, dtype=float)

    def rhs(_t: float, state: np.ndarray) -> np.ndarray:
        a = state[:B]
        w = state[B:].reshape(B, d)
        g = _gradient(a[:, None] * w, G, c)
        da = -ea * np.sum(w * g, axis=1)
        dw = -ew * a[:, None] * g
        return np.concatenate([da, dw.ravel()])

    scale = np.sqrt(B * (1 + d))
    times = np.asarray(times, dtype=float)
    sol = solve_ivp(
        rhs,
        (float(times[0]), float(times[-1])),
        np.concatenate([a0, w0.ravel()]),
        method="DOP853",
        t_eval=times,
        rtol=max(rtol / scale, 1e-13),
        atol=atol / scale,
    )
    if not sol.success:
        raise RuntimeError(f"solve_ivp failed: {sol.message}")
    y = sol.y
    a = y[:B].copy()
    w = y[B:].reshape(B, d, -1).transpose(0, 2, 1).copy()
    return a, w


def numeric_limit(
    a0: float,
    w0: np.ndarray,
    eta_a: float,
    eta_w: float,
    G: np.ndarray,
    c: np.ndarray,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    grad_tol: float = LIMIT_GRAD_TOL,
    t_cap: float = LIMIT_T_CAP,
) -> tuple[float, np.ndarray]:
    r"""One configuration's gradient-flow limit :math:`(a(\infty), w(\infty))`.

    Integrates (LSODA, which switches to BDF on the stiff late phase, with the analytic
    Jacobian) until :math:`\|g\| = \|G\beta - c\| < ` ``grad_tol`` (a terminal event); returns
    NaNs if that does not happen before ``t_cap``.
    """
    from scipy.integrate import solve_ivp

    w0 = np.asarray(w0, dtype=float)
    d = w0.size

    def rhs(_t: float, s: np.ndarray) -> np.ndarray:
        a, w = s[0], s[1:]
        g = G @ (a * w) - c
        return np.concatenate([[-eta_a * (w @ g)], -eta_w * a * g])

    def jac(_t: float, s: np.ndarray) -> np.ndarray:
        a, w = s[0], s[1:]
        g = G @ (a * w) - c
        Gw = G @ w
        out = np.empty((d + 1, d + 1))
        out[0, 0] = -eta_a * (w @ Gw)
        out[0, 1:] = -eta_a * (g + a * Gw)
        out[1:, 0] = -eta_w * (g + a * Gw)
        out[1:, 1:] = -eta_w * a * a * G
        return out

    def converged(_t: float, s: np.ndarray) -> float:
        return float(np.log(np.linalg.norm(G @ (s[0] * s[1:]) - c) / grad_tol))

    converged.terminal = True  # type: ignore[attr-defined]
    converged.direction = -1  # type: ignore[attr-defined]
    state0 = np.concatenate([[a0], w0])
    if converged(0.0, state0) < 0:
        return float(a0), w0.copy()
    sol = solve_ivp(
        rhs, (0.0, t_cap), state0, method="LSODA", jac=jac, events=converged,
        rtol=rtol, atol=atol,
    )
    if sol.status != 1 or not sol.y_events[0].size:
        return float("nan"), np.full(d, np.nan)
    end = sol.y_events[0][0]
    return float(end[0]), end[1:].copy()


def null_space(X: np.ndarray, rtol: float = 1e-12) -> np.ndarray:
    """Orthonormal basis (d, k) of :math:`\\mathrm{null}(X)` from the SVD."""
    _, s, vt = np.linalg.svd(X)
    rank = int(np.sum(s > rtol * max(s.max(initial=0.0), 1e-300)))
    return vt[rank:].T


def implicit_interpolant(
    X: np.ndarray,
    y: np.ndarray,
    w0: np.ndarray,
    delta: np.ndarray,
    eta_a: np.ndarray,
    eta_w: np.ndarray,
    sign_a_inf: np.ndarray,
) -> np.ndarray:
    r"""The interpolator predicted by Theorem 3.1 (docs/single-neuron.md, eq. (12)), per
    configuration.

    :math:`\beta(\infty) = \arg\min_{X\beta = \hat y} \Psi_\delta(\beta) -
    s\,\psi_\delta(\beta_0)^\top\beta` with :math:`s = \mathrm{sign}(a(\infty)a(0))` and
    :math:`\hat y = X X^+ y` (the reachable targets). Because
    :math:`\psi_\delta(\beta_0) = \sqrt{2\eta_a}\,\mathrm{sign}(a_0)\,w_0`, the linear term is
    :math:`s\,\psi_\delta(\beta_0) = \sqrt{2\eta_a}\,\varsigma\, w_0` with
    :math:`\varsigma = \mathrm{sign}\,a(\infty)` (``sign_a_inf``), well defined even for
    :math:`a_0 = 0`.

    * One-dimensional null space :math:`\mathrm{span}\{v\}` (docs/single-neuron.md, eq. (13)):
      :math:`\beta = X^+y + \alpha v`, :math:`k = \sqrt{2\eta_a}\varsigma\,w_0^\top v`,
      :math:`c = \|X^+y\|`, :math:`\alpha = \mathrm{sign}(k)\sqrt{k^2 [A + \sqrt{A^2 + 16\gamma^2
      c^2}]/(8\gamma^2)}` with :math:`A = 2\delta + k^2`; for :math:`A < 0` the bracket is
      evaluated as :math:`16\gamma^2c^2/(\sqrt{A^2+16\gamma^2c^2} - A)` (no cancellation).
    * Otherwise (docs/single-neuron.md, eq. (14)):
      :math:`w(\lambda) = P_{\mathrm{null}} w_0 + X^\top\lambda`,
      :math:`a(\lambda) = \varsigma\sqrt{(\delta + \eta_a\|w(\lambda)\|^2)/\eta_w}`, and
      :math:`X a(\lambda) w(\lambda) = \hat y` is solved by ``least_squares``, started from
      :math:`X^\top\lambda_0 = \varsigma\tau X^+ y` with :math:`|a(\lambda_0)|\tau = 1` (an
      interpolating point with the right :math:`\delta`; the start :math:`\tau = 1` can have
      :math:`\delta + \eta_a\|w\|^2 < 0`, where :math:`a(\lambda) = 0` and the solver stalls).

    Shapes: ``w0`` (B, d), the others (B,). Returns (B, d); NaN where ``sign_a_inf`` is 0 or NaN.
    """
    from scipy.optimize import least_squares

    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    w0 = np.asarray(w0, dtype=float)
    B, d = w0.shape
    delta = np.broadcast_to(np.asarray(delta, dtype=float), (B,))
    eta_a = np.broadcast_to(np.asarray(eta_a, dtype=float), (B,))
    eta_w = np.broadcast_to(np.asarray(eta_w, dtype=float), (B,))
    sig = np.broadcast_to(np.asarray(sign_a_inf, dtype=float), (B,))
    pinv = np.linalg.pinv(X)
    beta_ols = pinv @ y
    y_hat = X @ beta_ols
    V = null_space(X)
    out = np.full((B, d), np.nan)
    ok = np.isfinite(sig) & (sig != 0)
    if V.shape[1] == 0:
        out[ok] = beta_ols
        return out
    c2 = float(beta_ols @ beta_ols)
    if V.shape[1] == 1:
        v = V[:, 0]
        g2 = eta_a * eta_w
        k = np.sqrt(2.0 * eta_a) * sig * (w0 @ v)
        A = 2.0 * delta + k * k
        Bq = 16.0 * g2 * c2
        root = np.sqrt(A * A + Bq)
        with np.errstate(divide="ignore", invalid="ignore"):
            bracket = np.where(A >= 0, A + root, Bq / (root - np.minimum(A, 0.0)))
        alpha = np.sign(k) * np.sqrt(k * k * bracket / (8.0 * g2))
        res = beta_ols[None, :] + alpha[:, None] * v[None, :]
        out[ok] = res[ok]
        return out
    P_null = V @ V.T
    lam_dir = np.linalg.pinv(X @ X.T) @ y  # X^T lam_dir = X^+ y
    for i in np.flatnonzero(ok):
        wn = P_null @ w0[i]
        # start: w = wn + sig tau X^+ y with |a| tau = 1, i.e. an interpolating point on the
        # conserved-delta surface: eta_a c^2 tau^4 + Bq tau^2 - eta_w = 0, Bq = delta + eta_a|wn|^2
        bq = delta[i] + eta_a[i] * (wn @ wn)
        disc = np.sqrt(bq * bq + 4.0 * eta_a[i] * eta_w[i] * c2)
        if c2 == 0.0:
            tau2 = 0.0
        elif bq >= 0:
            tau2 = 2.0 * eta_w[i] / (bq + disc)
        else:
            tau2 = (disc - bq) / (2.0 * eta_a[i] * c2)
        lam0 = sig[i] * np.sqrt(tau2) * lam_dir

        def weights(lam: np.ndarray, i: np.intp = i,
                    wn: np.ndarray = wn) -> tuple[float, np.ndarray]:
            w = wn + X.T @ lam
            a = sig[i] * np.sqrt(max(delta[i] + eta_a[i] * (w @ w), 0.0) / eta_w[i])
            return a, w

        def resid(lam: np.ndarray, weights: Any = weights) -> np.ndarray:
            a, w = weights(lam)
            return X @ (a * w) - y_hat

        sol = least_squares(resid, lam0, xtol=1e-15, ftol=1e-15, gtol=1e-15)
        a, w = weights(sol.x)
        out[i] = a * w
    return out


def preconditioner(a: np.ndarray, w: np.ndarray, eta_a: Any, eta_w: Any) -> np.ndarray:
    r""":math:`M = \eta_w a^2 I + \eta_a w w^\top` (docs/single-neuron.md, eq. (9)), shape
    ``(..., d, d)`` for ``a`` (...) and ``w`` (..., d): :math:`\dot\beta = -M g`."""
    a = np.asarray(a, dtype=float)
    w = np.asarray(w, dtype=float)
    d = w.shape[-1]
    ea = np.asarray(eta_a, dtype=float)[..., None, None]
    ew = np.asarray(eta_w, dtype=float)[..., None, None]
    return ew * (a * a)[..., None, None] * np.eye(d) + ea * w[..., :, None] * w[..., None, :]


def _quad(G: np.ndarray | None, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """:math:`u^\\top G v` over the last axis (``G is None``: identity); no BLAS, so the result
    of one configuration does not depend on the batch it is computed in."""
    if G is None:
        return np.sum(u * v, axis=-1)
    return np.sum(np.einsum("...j,ij->...i", v, G) * u, axis=-1)


def kernel_distance(
    a: np.ndarray,
    w: np.ndarray,
    eta_a: np.ndarray,
    eta_w: np.ndarray,
    G: np.ndarray | None = None,
) -> np.ndarray:
    r"""Kernel distance :math:`S(0, t) = 1 - \langle K_0, K_t\rangle_F/(\|K_0\|_F\|K_t\|_F)` of
    the NTK :math:`K = X M X^\top`, :math:`M = \alpha I + \eta_a w w^\top`,
    :math:`\alpha = \eta_w a^2` (docs/single-neuron.md, eq. (10)).

    With :math:`G = X^\top X` (``None``: :math:`G = I`, i.e. :math:`K = M`),
    :math:`\langle K_s, K_t\rangle_F = \mathrm{tr}(G M_s G M_t) = \alpha_s\alpha_t\mathrm{tr}G^2 +
    \eta_a(\alpha_s w_t^\top G^2 w_t + \alpha_t w_s^\top G^2 w_s) + \eta_a^2 (w_s^\top G w_t)^2`.
    Shapes: ``a`` (B, ..., T), ``w`` (B, ..., T, d), ``eta_*`` (B,); time is the last axis of
    ``a``. Returns the shape of ``a``.
    """
    a = np.asarray(a, dtype=float)
    w = np.asarray(w, dtype=float)
    extra = (1,) * (a.ndim - 1)
    ea = np.asarray(eta_a, dtype=float).reshape(-1, *extra)
    ew = np.asarray(eta_w, dtype=float).reshape(-1, *extra)
    d = w.shape[-1]
    if G is None:
        tr_g2 = float(d)
        G2 = None
    else:
        G2 = np.einsum("ij,jk->ik", G, G)
        tr_g2 = float(np.trace(G2))
    alpha = ew * a * a
    q = _quad(G2, w, w)
    n = _quad(G, w, w)
    alpha0, q0, w0 = alpha[..., :1], q[..., :1], w[..., :1, :]
    cross = _quad(G, w0, w)
    inner = alpha0 * alpha * tr_g2 + ea * (alpha0 * q + alpha * q0) + ea * ea * cross * cross
    norm2 = alpha * alpha * tr_g2 + 2.0 * ea * alpha * q + ea * ea * n * n
    return shared_kernel_distance(inner, norm2[..., :1], norm2)


# ---------------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------------
def _given(value: Any) -> bool:
    """Whether an optional batchable value was given (the batch holds NaNs for 'not given')."""
    if value is None:
        return False
    arr = np.asarray(value, dtype=float)
    return not bool(np.all(np.isnan(arr)))


@register
class SingleNeuron(Model):
    r"""Single hidden neuron :math:`f(x) = a\,w^\top x` trained by gradient flow
    (docs/single-neuron.md).

    Initialisation: from ``beta0`` and ``delta`` (:func:`init_from_beta`: :math:`a_0 > 0`), or,
    when ``a0`` and ``w0`` are both given, from them directly; then ``delta`` and ``beta0`` are
    derived (:math:`\delta = \eta_w a_0^2 - \eta_a\|w_0\|^2`, :math:`\beta_0 = a_0 w_0`) and the
    given ``delta``/``beta0`` are ignored (:meth:`check` overwrites them with the derived values).

    Data: without ``X`` the data are whitened and :math:`\beta^* =` ``beta_star``. With ``X``
    and ``y`` the loss is :math:`\tfrac12\|X a w - y\|^2`, ``beta_star`` is ignored, the
    reference direction of ``phi`` is :math:`X^+ y`, and ``method=exact``/``both`` requires
    :math:`X^\top X = I` to 1e-12 (then :math:`\beta^* = X^\top y`). When :math:`X^\top X` is
    singular the output adds ``beta_inf`` and ``beta_implicit`` (Theorem 3.1).

    ``phi`` is NaN where :math:`w = 0` (e.g. at ``t = 0`` when ``beta0 = 0``, ``delta > 0``).

    Azulay et al.'s scale and shape: ``alpha`` and ``s`` (given together) set
    :math:`a_0 = \sqrt{\alpha(1+s)/(1-s)}`, :math:`w_0 = \sqrt{\alpha(1-s)/(1+s)}\,\hat\beta_0`
    (:func:`.fully_connected.fc_init`; docs/azulay-theory.md eq. 2.1).

    Leaky neuron: ``leak`` :math:`\rho < 1` trains :math:`f(x) = a\sigma(w^\top x)`,
    :math:`\sigma(z) = \max(z, \rho z)` (Azulay et al. 2021, Thm 4; docs/azulay-theory.md §1),
    with data ``X``, ``y`` of full row rank and ``method=numeric`` only; it adds ``beta_inf``,
    ``kkt_residual``, ``pattern_flips``, ``beta_implicit`` and ``implicit_converged``
    (:func:`_solve_leaky`). ``leak = 1`` is the linear neuron, unchanged.

    Both methods give a configuration the same bits alone and in any batch: ``exact`` is
    elementwise, and ``numeric`` integrates one configuration at a time.
    """

    name: ClassVar[str] = "single-neuron"
    summary: ClassVar[str] = (
        "single hidden neuron f(x) = a w^T x: exact gradient-flow solutions, NTK movement "
        "and implicit bias (Kunin et al. 2024)"
    )
    actions: ClassVar[tuple[str, ...]] = ("solve",)
    params: ClassVar[tuple[Param, ...]] = (
        Param("d", "int", 2, "input dimension (length of beta_star, beta0, w0)", low=1),
        Param(
            "beta_star", "vector", np.array([0.0, 1.0]),
            "target predictor beta* for whitened data (ignored when X and y are given); nonzero",
            batchable=True,
        ),
        Param(
            "beta0", "vector", np.array([-1.0, 0.0]),
            "initial end-to-end predictor beta0 = a0 w0 (ignored when a0 and w0 are given)",
            batchable=True,
        ),
        Param(
            "delta", "float", 0.0,
            "conserved relative scale delta = eta_w a^2 - eta_a |w|^2 (> 0 upstream/lazy-ish, "
            "< 0 downstream, 0 balanced); derived from a0, w0 when those are given",
            batchable=True,
        ),
        Param("eta_a", "float", 1.0, "learning rate of the output weight a", low=0.0,
              low_open=True, batchable=True),
        Param("eta_w", "float", 1.0, "learning rate of the first-layer weights w", low=0.0,
              low_open=True, batchable=True),
        Param("t_max", "float", 20.0, "final time of the output grid", unit="gradient-flow time",
              low=0.0, low_open=True),
        Param("n_records", "int", 201, "number of output times, uniform in [0, t_max], both "
              "ends included", low=2),
        Param("method", "str", "both",
              "exact closed form (whitened data only), numeric integration, or both",
              choices=("exact", "numeric", "both")),
        Param("X", "matrix", None,
              "optional data matrix (n x d); the loss is then 1/2 |X a w - y|^2", optional=True),
        Param("y", "vector", None, "optional targets (n values), given together with X",
              optional=True),
        Param("rtol", "float", 1e-10, "relative tolerance of the numeric integration",
              low=0.0, high=1.0, low_open=True, high_open=True),
        Param("atol", "float", 1e-12, "absolute tolerance of the numeric integration",
              low=0.0, low_open=True),
        Param("a0", "float", None,
              "optional initial output weight; with w0, replaces beta0 and delta",
              optional=True, batchable=True),
        Param("w0", "vector", None,
              "optional initial first-layer weights (d values); given together with a0",
              optional=True, batchable=True),
        Param("alpha", "float", None,
              "optional Azulay scale alpha = |a0| |w0|; with s, sets a0 and w0 (w0 along beta0)",
              optional=True, batchable=True, low=0.0, low_open=True),
        Param("s", "float", None,
              "optional Azulay shape s = (|a0| - |w0|)/(|a0| + |w0|) in (-1, 1); given with alpha",
              optional=True, batchable=True, low=-1.0, high=1.0, low_open=True, high_open=True),
        Param("leak", "float", 1.0,
              "slope rho of sigma(z) = max(z, rho z) for z < 0: 1 is the linear neuron; "
              "rho < 1 (Azulay Thm 4) needs X, y and method=numeric",
              low=0.0, high=1.0),
    )
    aliases: ClassVar[dict[str, dict[str, str]]] = {"n_times": {"solve": "n_records"}}
    """The older name of the record count (docs/engine.md, "Records")."""
    overrides: ClassVar[dict[str, tuple[str, ...]]] = {
        "a0": ("delta", "beta0"), "w0": ("delta", "beta0"), "alpha": ("delta",)}
    examples: ClassVar[dict[str, tuple[dict[str, Any], ...]]] = {
        "solve": (
            {"delta": 1.0, "t_max": 2.0, "n_records": 11},
            {"delta": -0.5, "beta0": [0.5, 0.5], "eta_a": 2.0, "t_max": 2.0, "n_records": 11},
            {"X": [[1.0, 0.0]], "y": [1.0], "a0": 0.3, "w0": [0.3, 0.4], "method": "numeric",
             "t_max": 2.0, "n_records": 11},
            {"alpha": 0.1, "s": 0.5, "t_max": 2.0, "n_records": 13},
            {"d": 3, "X": [[1.0, 0.0, 0.5], [0.0, 1.0, -0.5]], "y": [1.0, -1.0], "leak": 0.5,
             "beta0": [0.3, 0.2, 0.1], "beta_star": [1.0, 0.0, 0.0],
             "method": "numeric", "t_max": 2.0, "n_records": 11},
        ),
    }

    # -- validation ------------------------------------------------------------------------
    @classmethod
    def _output_bytes(cls, action: str, values: dict[str, Any]) -> float | None:
        """Whitened data without a leak: ten float64 trajectories over (method, time), two of
        them over ``dim`` too (a, mu, phi, loss, kernel_distance, delta_t, nu, upsilon; w,
        beta), and two scalars (basin_score, a_inf_sign). Other cases are not declared."""
        if values.get("X") is not None or float(values.get("leak", 1.0)) < 1.0:
            return None
        methods = 2 if values["method"] == "both" else 1
        per_time = 8 + 2 * int(values["d"])
        return 8.0 * (methods * int(values["n_records"]) * per_time + 2)

    @classmethod
    def _working_bytes(cls, action: str, values: dict[str, Any]) -> float | None:
        """Peak memory of one configuration besides its outputs, float64: per method (2 for
        ``both``) about four ``T × d`` trajectories (``T`` = ``n_records``: the integrator's
        or the closed form's states at the output times, the stacked ``w`` and the
        temporaries of the kernel distance and the extra outputs) and twenty ``d``-vectors;
        with data ``X`` (n × d), its Gram matrix ``XᵀX``, its square, the pseudo-inverse and
        the null space's SVD, ``4 d² + 4 n d``. Checked against the measured peak by
        tests/models/test_memory.py."""
        d, T = int(values["d"]), int(values["n_records"])
        methods = 2 if values["method"] == "both" else 1
        held = 4 * methods * T * d + 20 * d
        X = values.get("X")
        if X is not None:
            n = int(np.shape(X)[0])
            held += 4 * d * d + 4 * n * d
        return 8.0 * held

    @classmethod
    def derive(cls, action: str, values: dict[str, Any]) -> None:
        """Azulay's ``alpha`` and ``s`` (with ``beta0``'s direction) give ``a0`` and ``w0``
        (:func:`.fully_connected.fc_init`); ``a0`` and ``w0`` give ``delta``
        and ``beta0``. BadInput where the start is contradictory or incomplete."""
        d = int(values["d"])

        def length(name: str) -> None:
            n = np.asarray(values[name]).shape[0]
            if n != d:
                raise BadInput(f"parameter {name}: expected {d} values (d = {d}), got {n}")

        alpha, shape = values.get("alpha"), values.get("s")
        if (alpha is None) != (shape is None):
            raise BadInput("parameter alpha: Azulay's alpha and s must be given together")
        if alpha is not None and shape is not None:  # given together (checked above)
            if values.get("a0") is not None or values.get("w0") is not None:
                raise BadInput("parameter alpha: give either alpha and s, or a0 and w0")
            length("beta0")
            u = np.asarray(values["beta0"], dtype=float)
            if not np.any(u):
                raise BadInput("parameter beta0: with alpha and s, beta0 gives the direction of "
                               "w0 and must be nonzero")
            from .fully_connected import fc_init

            a_fc, w_fc, _ = fc_init(float(alpha), float(shape), u)
            values["a0"], values["w0"] = a_fc, w_fc
        a0, w0 = values.get("a0"), values.get("w0")
        if (a0 is None) != (w0 is None):
            raise BadInput(
                "parameter a0: a0 and w0 must be given together (or neither, to start from "
                "beta0 and delta)"
            )
        if a0 is not None:
            length("w0")
            w0 = np.asarray(w0, dtype=float)
            if a0 == 0 and not np.any(w0):
                raise BadInput(
                    "parameter w0: a0 = 0 with w0 = 0 is the saddle at the origin; give a nonzero"
                    " start"
                )
            values["delta"] = float(values["eta_w"] * a0 * a0 - values["eta_a"] * (w0 @ w0))
            values["beta0"] = a0 * w0

    @classmethod
    def check(cls, action: str, values: Mapping[str, Any]) -> None:
        d = int(values["d"])
        X, y = values.get("X"), values.get("y")
        method = values["method"]
        wants_exact = method in ("exact", "both")
        if values["t_max"] <= 0:
            raise BadInput(f"parameter t_max: must be > 0, got {values['t_max']:g}")
        if values["n_records"] < 2:
            raise BadInput(f"parameter n_records: must be >= 2, got {values['n_records']}")

        def length(name: str) -> None:
            n = np.asarray(values[name]).shape[0]
            if n != d:
                raise BadInput(f"parameter {name}: expected {d} values (d = {d}), got {n}")

        if (X is None) != (y is None):
            missing = "y" if y is None else "X"
            raise BadInput(f"parameter {missing}: X and y must be given together")
        leak = float(values.get("leak", 1.0))
        if leak < 1.0:
            if X is None:
                raise BadInput(
                    f"parameter leak: leak = {leak:g} < 1 needs data X and y (the whitened "
                    "beta_star form is the linear neuron's)"
                )
            if method != "numeric":
                raise BadInput(
                    f"parameter method: method={method} has a closed form for the linear neuron "
                    f"only; leak = {leak:g} < 1 needs method=numeric"
                )
            Xa = np.asarray(X, dtype=float)
            if Xa.shape[0] > Xa.shape[1] or np.linalg.matrix_rank(Xa) < Xa.shape[0]:
                raise BadInput(
                    f"parameter X: leak < 1 needs X of full row rank n <= d (here "
                    f"{Xa.shape[0]}x{Xa.shape[1]}), so that the neuron can interpolate"
                )
        if X is not None:
            X = np.asarray(X, dtype=float)
            y = np.asarray(y, dtype=float)
            if X.shape[1] != d:
                raise BadInput(
                    f"parameter X: expected {d} columns (d = {d}), got a {X.shape[0]}x{X.shape[1]}"
                    " matrix"
                )
            if y.shape[0] != X.shape[0]:
                raise BadInput(
                    f"parameter y: expected {X.shape[0]} values (one per row of X), got "
                    f"{y.shape[0]}"
                )
            if wants_exact:
                dev = float(np.max(np.abs(X.T @ X - np.eye(d))))
                if dev > WHITENING_TOL:
                    raise BadInput(
                        f"parameter method: method={method} needs whitened data (X^T X = I to "
                        f"1e-12, here off by {dev:.2g}); use method=numeric for this X"
                    )
                if not np.any(X.T @ y):
                    raise BadInput("parameter y: the exact solution needs X^T y != 0")
        else:
            length("beta_star")
            if not np.any(np.asarray(values["beta_star"])):
                raise BadInput("parameter beta_star: must be nonzero")

        if values.get("a0") is None:  # not derived from a0 and w0 (derive)
            length("beta0")
            if not np.any(np.asarray(values["beta0"])) and values["delta"] <= 0:
                raise BadInput(
                    f"parameter beta0: beta0 = 0 needs delta > 0 (got delta = "
                    f"{values['delta']:g}; the direction of w0 is undefined otherwise)"
                )

    @classmethod
    def _cost(cls, values: Any) -> float:
        if values["method"] == "exact":
            return 1.0
        if float(values.get("leak", 1.0)) < 1.0:
            return 100.0 + values["t_max"] * (1.0 + abs(values["delta"]))
        return 10.0 + values["t_max"] * (1.0 + abs(values["delta"]))

    # -- the action ------------------------------------------------------------------------
    def solve(self, batch: Batch, progress: Progress | None = None) -> xr.Dataset:
        B = batch.size
        d = int(batch["d"])
        eta_a = batch.column("eta_a").astype(float)
        eta_w = batch.column("eta_w").astype(float)
        if "a0" in batch and _given(batch["a0"]):
            a0 = batch.column("a0").astype(float).reshape(B)
            w0 = batch.column("w0").astype(float).reshape(B, d)
            delta = eta_w * a0 * a0 - eta_a * np.sum(w0 * w0, axis=-1)
        else:
            delta = batch.column("delta").astype(float)
            a0, w0 = init_from_beta(batch.column("beta0").reshape(B, d), delta, eta_a, eta_w)
        times = record_grid(float(batch["t_max"]), int(batch["n_records"]) - 1, spacing="linear")
        if float(batch.values.get("leak", 1.0)) < 1.0:
            return _solve_leaky(batch, a0, w0, delta, eta_a, eta_w, times, progress)
        X, y = batch["X"], batch["y"]
        if X is None:
            G = None
            c = batch.column("beta_star").astype(float).reshape(B, d)
            ref = c
        else:
            X = np.asarray(X, dtype=float)
            y = np.asarray(y, dtype=float)
            G = X.T @ X
            c = np.broadcast_to(X.T @ y, (B, d))
            ref = np.broadcast_to(np.linalg.pinv(X) @ y, (B, d))
        method = batch["method"]
        methods = ["exact", "numeric"] if method == "both" else [method]

        a_list, w_list = [], []
        for i, m in enumerate(methods):
            if m == "exact":
                a, w = exact_trajectory(a0, w0, delta, c, eta_a, eta_w, times)
            else:
                # One configuration at a time: a shared adaptive step would make each result
                # depend on its batch-mates, and results must not depend on the chunking.
                pieces = [
                    numeric_trajectory(
                        a0[j : j + 1], w0[j : j + 1], eta_a[j : j + 1], eta_w[j : j + 1],
                        times, c[j : j + 1], G, float(batch["rtol"]), float(batch["atol"]),
                    )
                    for j in range(B)
                ]
                a = np.concatenate([p[0] for p in pieces])
                w = np.concatenate([p[1] for p in pieces])
            a_list.append(a)
            w_list.append(w)
            if progress is not None:
                progress(0.8 * (i + 1) / len(methods))
        a = np.stack(a_list, axis=1)  # (B, M, T)
        w = np.stack(w_list, axis=1)  # (B, M, T, d)
        ds = self._dataset(a, w, eta_a, eta_w, G, X, y, c, ref, times, methods)
        # G is None exactly when X is
        whitened = G is None or float(np.max(np.abs(G - np.eye(d)))) <= WHITENING_TOL
        ds = ds.assign(extra_outputs(a, w, a0, w0, delta, eta_a, eta_w, ref, whitened))

        if X is not None and G is not None and null_space(X).shape[1] > 0:
            a_inf = np.empty(B)
            w_inf = np.empty((B, d))
            for i in range(B):
                a_inf[i], w_inf[i] = numeric_limit(
                    a0[i], w0[i], eta_a[i], eta_w[i], G, X.T @ y,
                    float(batch["rtol"]), float(batch["atol"]),
                )
            beta_imp = implicit_interpolant(X, y, w0, delta, eta_a, eta_w, np.sign(a_inf))
            ds["beta_inf"] = var(
                ("point", "dim"), a_inf[:, None] * w_inf,
                "gradient-flow limit of beta (numeric, |grad| < 1e-10)",
            )
            ds["beta_implicit"] = var(
                ("point", "dim"), beta_imp,
                "interpolator predicted by the implicit bias (Theorem 3.1)",
            )
        if progress is not None:
            progress(1.0)
        return ds

    @staticmethod
    def _dataset(
        a: np.ndarray,
        w: np.ndarray,
        eta_a: np.ndarray,
        eta_w: np.ndarray,
        G: np.ndarray | None,
        X: np.ndarray | None,
        y: np.ndarray | None,
        c: np.ndarray,
        ref: np.ndarray,
        times: np.ndarray,
        methods: list[str],
    ) -> xr.Dataset:
        """Derived outputs (docs/single-neuron.md, eqs. (4), (10)) from ``a`` (B, M, T) and ``w``
        (B, M, T, d)."""
        d = w.shape[-1]
        beta = a[..., None] * w
        wn = np.sqrt(np.sum(w * w, axis=-1))
        mu = a * wn
        ref_b = ref[:, None, None, :]
        ref_n = np.sqrt(np.sum(ref * ref, axis=-1))[:, None, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            phi = np.sum(w * ref_b, axis=-1) / (wn * ref_n)
        if X is None:
            r = beta - c[:, None, None, :]
            loss = 0.5 * np.sum(r * r, axis=-1)
        else:
            r = np.einsum("...j,ij->...i", beta, X) - y
            loss = 0.5 * np.sum(r * r, axis=-1)
        S = kernel_distance(a, w, eta_a, eta_w, G)
        ea = eta_a[:, None, None]
        ew = eta_w[:, None, None]
        delta_t = ew * a * a - ea * wn * wn
        dims = ("point", "method", "time")
        vdims = (*dims, "dim")
        coords = {
            "method": xr.Variable(("method",), np.array(methods),
                                  {"long_name": "solution method (exact closed form or ODE)"}),
            "time": xr.Variable(("time",), times,
                                {"long_name": "time", "units": "gradient-flow time"}),
            "dim": xr.Variable(("dim",), np.arange(d), {"long_name": "input coordinate index"}),
        }
        alignment = var(dims, phi, "alignment phi = cos(w, beta*)")
        # cos(w, β*) has no value where w = 0 (a start at beta0 = 0, which delta > 0 allows)
        # or β* = 0; a flow that diverges is marked so by its other outputs
        alignment.attrs["nan_meaning"] = "w = 0 (a start at beta0 = 0) or beta* = 0: no angle"
        return xr.Dataset(
            {
                "a": var(dims, a, "output weight a"),
                "w": var(vdims, w, "first-layer weights w"),
                "beta": var(vdims, beta, "end-to-end predictor beta = a w"),
                "mu": var(dims, mu, "signed magnitude mu = a |w|"),
                "phi": alignment,
                "loss": var(dims, loss, "training loss 1/2 |X beta - y|^2"),
                "kernel_distance": var(dims, S, "NTK kernel distance S(0, t)"),
                "delta_t": var(dims, delta_t, "conserved quantity eta_w a^2 - eta_a |w|^2"),
            },
            coords=coords,
        )


def _solve_leaky(
    batch: Batch,
    a0: np.ndarray,
    w0: np.ndarray,
    delta: np.ndarray,
    eta_a: np.ndarray,
    eta_w: np.ndarray,
    times: np.ndarray,
    progress: Progress | None,
) -> xr.Dataset:
    r"""``solve`` for ``leak`` :math:`\rho < 1`: the leaky neuron of Azulay et al. (2021), Thm 4.

    Integrates each configuration piecewise through its activation-pattern changes
    (:func:`~richlazy_cli.models.single_neuron.leaky.leaky_flow`; docs/azulay-theory.md §1) and adds
    the limit ``beta_inf``, ``kkt_residual`` (eq. 1.3, from :math:`\beta_\infty` and
    :math:`\beta_0` alone), ``pattern_flips``, ``beta_implicit`` (``least_squares`` on eq. 1.5,
    started from the linear neuron's prediction, then from the closed form eq. 1.4) and
    ``implicit_converged``. The sign :math:`\varsigma` is :math:`\mathrm{sgn}\,a_0` when
    :math:`\delta\ge0` (then :math:`a` never changes sign), otherwise that of the integrated
    :math:`a(\infty)`. For :math:`\rho = 0` (ReLU, outside Theorem 4) ``beta_implicit`` is NaN.
    """
    from . import leaky as lk

    B = batch.size
    d = w0.shape[1]
    rho = float(batch["leak"])
    X = np.asarray(batch["X"], dtype=float)
    y = np.asarray(batch["y"], dtype=float)
    rtol = min(float(batch["rtol"]), 1e-12)
    atol = min(float(batch["atol"]), 1e-14)
    T = times.size
    a = np.empty((B, 1, T))
    w = np.empty((B, 1, T, d))
    beta_inf = np.full((B, d), np.nan)
    beta_imp = np.full((B, d), np.nan)
    kkt = np.full(B, np.nan)
    flips = np.zeros(B, dtype=np.int64)
    conv = np.zeros(B, dtype=np.int8)
    for i in range(B):
        flow = lk.leaky_flow(a0[i], w0[i], X, y, rho, eta_a[i], eta_w[i], times, rtol=rtol,
                             atol=atol)
        a[i, 0], w[i, 0] = flow.a, flow.w
        if flow.converged or flow.stationary:
            beta_inf[i] = flow.a_inf * flow.w_inf
            flips[i] = int(np.sum(np.sign(X @ flow.w_inf) != np.sign(X @ w0[i])))
            sign_inf = float(np.sign(flow.a_inf))
            kkt[i] = lk.kkt_residual(X, beta_inf[i], a0[i] * w0[i], delta[i], eta_a[i],
                                     eta_w[i], float(np.sign(a0[i])), sign_inf)
        sign = float(np.sign(a0[i])) if delta[i] >= 0 else float(np.sign(flow.a_inf))
        if rho > 0 and np.isfinite(sign) and sign != 0:
            lin = implicit_interpolant(X, y, w0[i : i + 1], delta[i : i + 1], eta_a[i : i + 1],
                                       eta_w[i : i + 1], np.array([sign]))[0]
            # the linear neuron's prediction, as weights with a = sign |a|, then as lambda
            a_lin, _ = init_from_beta(lin[None, :], delta[i : i + 1], eta_a[i : i + 1],
                                      eta_w[i : i + 1])
            lam0 = np.linalg.solve(X @ X.T, X @ (lin / (sign * a_lin[0])))
            ai, wi, ok = lk.implicit_least_squares(X, y, w0[i], delta[i], rho, eta_a[i],
                                                   eta_w[i], sign, lam0)
            if not ok:  # restart from the closed form (eq. 1.4)
                _, wc = lk.implicit_closed_form(X, y, w0[i], delta[i], rho, eta_a[i],
                                                eta_w[i], sign)
                ai, wi, ok = lk.implicit_least_squares(
                    X, y, w0[i], delta[i], rho, eta_a[i], eta_w[i], sign,
                    np.linalg.solve(X @ X.T, X @ wc))
            beta_imp[i] = ai * wi
            conv[i] = int(ok)
        if progress is not None:
            progress((i + 1) / B)
    G = X.T @ X
    c = np.broadcast_to(X.T @ y, (B, d))
    ref = np.broadcast_to(np.linalg.pinv(X) @ y, (B, d))
    ds = SingleNeuron._dataset(a, w, eta_a, eta_w, G, X, y, c, ref, times, ["numeric"])
    z = np.einsum("bmtd,nd->bmtn", w, X)
    r = a[..., None] * lk.leaky(z, rho) - y
    ds["loss"] = var(("point", "method", "time"), 0.5 * np.sum(r * r, axis=-1),
                     "training loss 1/2 |a sigma(X w) - y|^2")
    ds["kernel_distance"] = var(("point", "method", "time"),
                                _leaky_kernel_distance(a, w, z, X, rho, eta_a, eta_w),
                                "NTK kernel distance S(0, t)")
    ds["kernel_distance"].attrs["nan_meaning"] = (
        "the tangent kernel is zero (leak = 0 and every sample on its dead side)")
    ds["beta"].attrs["long_name"] = "beta = a w (a sigma(w^T x) = sigma'(w^T x) beta^T x)"
    ds["beta_inf"] = var(("point", "dim"), beta_inf,
                         "gradient-flow limit of beta = a w (|a sigma(Xw) - y| < 1e-11, or an "
                         "equilibrium that does not interpolate: see loss)")
    ds["beta_inf"].attrs["nan_meaning"] = "no limit reached before t = 1e8"
    ds["kkt_residual"] = var(("point",), kkt,
                             "|P_null(X) grad Q(beta_inf)| / sqrt(2 eta_a) (Azulay Thm 4 KKT)")
    ds["kkt_residual"].attrs["nan_meaning"] = "no limit reached before t = 1e8"
    ds["pattern_flips"] = var(("point",), flips,
                              "samples whose activation sign differs between w0 and w_inf")
    ds["beta_implicit"] = var(("point", "dim"), beta_imp,
                              "Theorem 4 prediction (least_squares on the invariants)")
    ds["beta_implicit"].attrs["nan_meaning"] = "leak = 0 (ReLU): no prediction"
    ds["implicit_converged"] = var(("point",), conv,
                                   "1 if the least_squares solve of beta_implicit converged")
    if progress is not None:
        progress(1.0)
    return ds


def _leaky_kernel_distance(
    a: np.ndarray, w: np.ndarray, z: np.ndarray, X: np.ndarray, rho: float,
    eta_a: np.ndarray, eta_w: np.ndarray,
) -> np.ndarray:
    r"""Kernel distance of the leaky neuron's training-set NTK
    :math:`K = D X (\eta_w a^2 I + \eta_a w w^\top) X^\top D`, :math:`D = \mathrm{diag}
    (\sigma'(Xw))` (per-sample gradients :math:`\partial_a f = \sigma(z_n)`,
    :math:`\partial_w f = a\sigma'(z_n)x_n`). Shapes: ``a`` (B, M, T), ``w`` (B, M, T, d),
    ``z`` (B, M, T, n)."""
    from .leaky import leaky_slope

    ea = eta_a[:, None, None, None, None]
    ew = eta_w[:, None, None, None, None]
    D = leaky_slope(z, rho)
    gram = X @ X.T
    K = D[..., :, None] * D[..., None, :] * (
        ew * (a * a)[..., None, None] * gram + ea * z[..., :, None] * z[..., None, :])
    K0 = K[:, :, :1]
    inner = np.sum(K0 * K, axis=(-2, -1))
    norm2 = np.sum(K * K, axis=(-2, -1))
    return shared_kernel_distance(inner, norm2[..., :1], norm2)
