r"""Single-neuron extras: the two basins, the Riccati variable :math:`\nu`, Hessian maps.

Mathematics: Kunin et al. 2024, App. A.2.3–A.2.6 and A.4.2; docs/single-neuron.md,
eqs. (15)–(18).
Whitened data, :math:`b = \|\beta^*\|`, :math:`\gamma^2 = \eta_a\eta_w`,
:math:`\kappa_* = \sqrt{\delta^2 + 4\gamma^2 b^2}`, :math:`\lambda_\pm = (\delta \pm \kappa_*)/2`.

* **Basin** (docs/single-neuron.md, eqs. (8) and (15)): :func:`basin_score`
  :math:`s = \eta_a\beta^{*\top}w_0 + \lambda_+ a_0`; :math:`\operatorname{sign} a(\infty) =
  \operatorname{sign} s`, and inits with :math:`s = 0` go to the saddle at the origin.
* **Riccati variable** (docs/single-neuron.md, eq. (16)): :math:`\nu = w^\top\beta^*/a` obeys
  :math:`\dot\nu = \eta_w b^2 - \delta\nu - \eta_a\nu^2` while :math:`a \ne 0`;
  :func:`nu_closed_form` gives its solution with the tanh/coth branch rule.
* **Hessian maps** (Gunasekar et al. 2021; docs/single-neuron.md, eq. (17)):
  :func:`hessian_map_defect` measures by central differences how far a matrix field
  :math:`H(\beta)` is from being the Hessian of some potential;
  :func:`preconditioner_inverse` is the single neuron's :math:`M^{-1}(\beta;\delta)` and
  :func:`g_delta` the time warp that makes :math:`g_\delta(\|\beta\|^2)M^{-1} = \nabla^2\Psi_\delta`
  at :math:`\gamma = 1`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ._halves import _halves

if TYPE_CHECKING:
    import xarray as xr


def basin_score(a0: np.ndarray, w0: np.ndarray, delta: np.ndarray, beta_star: np.ndarray,
                eta_a: np.ndarray, eta_w: np.ndarray) -> np.ndarray:
    r"""The basin score :math:`s = \eta_a\beta^{*\top}w_0 + \lambda_+ a_0` (docs/single-neuron.md,
    eq. (15)), ``(B,)`` from ``a0``, ``delta``, ``eta_*`` ``(B,)`` and ``w0``, ``beta_star``
    ``(B, d)``. :math:`\lambda_+ = (\delta + \kappa_*)/2 > 0` is evaluated without cancellation
    (as :math:`\gamma^2 b^2/((\kappa_* - \delta)/2)` for :math:`\delta < 0`).

    :math:`\kappa_* s` is the coefficient :math:`P` of the growing mode :math:`e^{\lambda_+ t}` in
    the exact solution (eq. (5)), so :math:`\operatorname{sign} a(\infty) = \operatorname{sign} s`
    wherever :math:`s \ne 0`. For :math:`\delta > 0` and :math:`a_0 > 0` the score is positive
    (the separating surface :math:`s = 0` needs :math:`\delta \le 0`).
    """

    a0 = np.asarray(a0, dtype=float)
    w0 = np.asarray(w0, dtype=float)
    bstar = np.asarray(beta_star, dtype=float)
    eta_a = np.asarray(eta_a, dtype=float)
    eta_w = np.asarray(eta_w, dtype=float)
    b2 = np.sum(bstar * bstar, axis=-1)
    _, lp, _ = _halves(delta, eta_a * eta_w * b2)
    return eta_a * np.sum(w0 * bstar, axis=-1) + lp * a0


def nu_upsilon(a: np.ndarray, w: np.ndarray, beta_star: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    r""":math:`\nu = w^\top\beta^*/a` and :math:`\upsilon = a/w^\top\beta^*` (Kunin et al. 2024,
    Fig. 8), NaN where the denominator is 0. Shapes: ``a`` (B, ..., T), ``w`` (B, ..., T, d),
    ``beta_star`` (B, d)."""
    a = np.asarray(a, dtype=float)
    bs = np.asarray(beta_star, dtype=float).reshape(a.shape[0], *(1,) * (a.ndim - 1), -1)
    z = np.sum(np.asarray(w, dtype=float) * bs, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        nu = np.where(a != 0, z / np.where(a != 0, a, 1.0), np.nan)
        upsilon = np.where(z != 0, a / np.where(z != 0, z, 1.0), np.nan)
    return nu, upsilon


def nu_closed_form(nu0: float, delta: float, b: float, eta_a: float, eta_w: float,
                   t: np.ndarray) -> np.ndarray:
    r"""Solution of the Riccati equation :math:`\dot\nu = \eta_w b^2 - \delta\nu - \eta_a\nu^2`
    (docs/single-neuron.md, eq. (16)), valid while :math:`a` keeps its sign.

    With :math:`x = (\delta + 2\eta_a\nu_0)/\kappa_*`:
    :math:`\nu = (-\delta + \kappa_*\tanh(\kappa_* t/2 + \operatorname{artanh} x))/(2\eta_a)` for
    :math:`|x| < 1`, the same with :math:`\coth(\kappa_* t/2 + \operatorname{artanh}(1/x))` for
    :math:`|x| > 1`, and the fixed point :math:`(-\delta + \kappa_*)/(2\eta_a)` when
    :math:`|1 - |x|| < 10^{-12}` (there :math:`x = -1` is the unstable fixed point, returned as
    :math:`(-\delta - \kappa_*)/(2\eta_a)`).
    """
    t = np.asarray(t, dtype=float)
    kstar = float(np.hypot(delta, 2.0 * np.sqrt(eta_a * eta_w) * b))
    x = (delta + 2.0 * eta_a * nu0) / kstar
    if abs(1.0 - abs(x)) < 1e-12:
        return np.full(t.shape, (-delta + np.sign(x) * kstar) / (2.0 * eta_a))
    if abs(x) < 1.0:
        th = np.tanh(0.5 * kstar * t + np.arctanh(x))
    else:
        th = 1.0 / np.tanh(0.5 * kstar * t + np.arctanh(1.0 / x))
    return (-delta + kstar * th) / (2.0 * eta_a)


def g_delta(x: np.ndarray | float, delta: float) -> np.ndarray:
    r""":math:`g_\delta(x) = \sqrt{\sqrt{\delta^2 + 4x} + \delta}` (Kunin et al. 2024, App. A.4.2),
    the factor that turns :math:`M^{-1}` into a Hessian map (:math:`\gamma = 1`)."""
    return np.sqrt(np.sqrt(delta * delta + 4.0 * np.asarray(x, dtype=float)) + delta)


def preconditioner_inverse(beta: np.ndarray, delta: float, eta_a: float = 1.0,
                           eta_w: float = 1.0) -> np.ndarray:
    r"""The single neuron's :math:`M^{-1}` as a function of :math:`\beta` (and the conserved
    :math:`\delta`), :math:`M = \eta_w a^2 I + \eta_a w w^\top` (docs/single-neuron.md, eq. (9)).

    On the branch :math:`a > 0`: :math:`\eta_w a^2 = p = (\delta + \kappa)/2`,
    :math:`\kappa = \sqrt{\delta^2 + 4\gamma^2\|\beta\|^2}`, :math:`w = \beta/a`, so
    :math:`M = pI + (\eta_a\eta_w/p)\beta\beta^\top` and, by Sherman–Morrison,
    :math:`M^{-1} = p^{-1}\big(I - \gamma^2\beta\beta^\top/(p^2 + \gamma^2\|\beta\|^2)\big)`.
    ``beta`` (d,); returns (d, d).
    """

    beta = np.asarray(beta, dtype=float)
    g2 = eta_a * eta_w
    r2 = float(beta @ beta)
    _, p_arr, _ = _halves(np.asarray(delta, dtype=float), g2 * r2)
    p = float(p_arr)
    d = beta.size
    return (np.eye(d) - g2 * np.outer(beta, beta) / (p * p + g2 * r2)) / p


def hessian_map_defect(H: Callable[[np.ndarray], np.ndarray], beta: np.ndarray,
                       h: float = 1e-5) -> float:
    r""":math:`\max_{ijk}|\partial_k H_{ij} - \partial_j H_{ik}|` at ``beta``, by central
    differences with step ``h`` (docs/single-neuron.md, eq. (17)).

    A symmetric matrix field is (locally) the Hessian of a potential exactly when
    :math:`\partial_k H_{ij} = \partial_j H_{ik}` (Gunasekar et al. 2021; Kunin et al. 2024,
    App. A.4.2); the defect is 0 up to the :math:`O(h^2)` truncation and :math:`O(\epsilon/h)`
    rounding of the differences.
    """
    beta = np.asarray(beta, dtype=float)
    d = beta.size
    dH = np.empty((d, d, d))  # dH[k] = ∂_k H
    for k in range(d):
        e = np.zeros(d)
        e[k] = h
        dH[k] = (np.asarray(H(beta + e)) - np.asarray(H(beta - e))) / (2.0 * h)
    # ∂_k H_ij = dH[k, i, j]; ∂_j H_ik = dH[j, i, k]
    return float(np.max(np.abs(dH - dH.transpose(2, 1, 0))))


def psi_delta(beta: np.ndarray, delta: float) -> float:
    r""":math:`\Psi_\delta(\beta) = (\kappa - 2\delta)\sqrt{\kappa + \delta}/3` at
    :math:`\gamma = 1` (docs/single-neuron.md, eq. (11))."""
    beta = np.asarray(beta, dtype=float)
    kappa = float(np.sqrt(delta * delta + 4.0 * float(beta @ beta)))
    return (kappa - 2.0 * delta) * np.sqrt(kappa + delta) / 3.0


def extra_outputs(a: np.ndarray, w: np.ndarray, a0: np.ndarray, w0: np.ndarray,
                  delta: np.ndarray, eta_a: np.ndarray, eta_w: np.ndarray, ref: np.ndarray,
                  whitened: bool) -> dict[str, xr.Variable]:
    r"""The variables ``nu``, ``upsilon`` (over ``point, method, time``), ``basin_score`` and
    ``a_inf_sign`` (over ``point``) of the ``single-neuron`` model, from ``a`` (B, M, T), ``w``
    (B, M, T, d), the initial weights and the reference predictor ``ref`` (B, d) (:math:`\beta^*`
    for whitened data, :math:`X^+y` otherwise). The basin outputs are NaN unless the data are
    whitened."""
    from ..base import var

    nu, upsilon = nu_upsilon(a, w, ref)
    if whitened:
        score = basin_score(a0, w0, delta, ref, eta_a, eta_w)
        sign = np.sign(score)
    else:
        score = np.full(a0.shape, np.nan)
        sign = score.copy()
    dims = ("point", "method", "time")
    out = {
        "nu": var(dims, nu, "Riccati variable nu = w^T beta* / a"),
        "upsilon": var(dims, upsilon, "reciprocal upsilon = a / w^T beta*"),
        "basin_score": var(("point",), score,
                           "basin score eta_a beta*^T w0 + lambda_+ a0 (sign of a(inf))"),
        "a_inf_sign": var(("point",), sign, "predicted sign of a(inf): sign(basin_score)"),
    }
    out["nu"].attrs["nan_meaning"] = "a = 0 at this time"
    out["upsilon"].attrs["nan_meaning"] = "w^T beta* = 0 at this time"
    for name in ("basin_score", "a_inf_sign"):
        out[name].attrs["nan_meaning"] = "the data are not whitened (X^T X != I)"
    return out
