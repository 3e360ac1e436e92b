r"""A fully connected linear neuron in Azulay et al.'s (α, s, u) parametrisation (Thm 2, §7.2).

Mathematics: docs/azulay-theory.md §2 (Azulay et al. 2021, Thm 2, §7.2 and App. F, H;
Kunin et al. 2024, Thm 3.1 and App. A.4.3). The neuron is :math:`f(x) = a\,w^\top x` with
:math:`\tilde w = a w` and one learning rate (:math:`\eta_a = \eta_w = 1`); the gradient flow
itself is :mod:`richlazy_cli.models.single_neuron.model`'s.

* :func:`fc_init` (eq. 2.1): :math:`a_0 = \sqrt{\alpha(1+s)/(1-s)}`,
  :math:`w_0 = \sqrt{\alpha(1-s)/(1+s)}\,u`, so :math:`\alpha = |a_0|\|w_0\|` is the scale,
  :math:`s` the shape and :math:`\delta = a_0^2 - \|w_0\|^2 = 4\alpha s/(1-s^2)`.
* :func:`potential_psi` (eq. 2.2): Kunin's :math:`\Psi_\delta`, and Azulay's
  :math:`q_\delta = \tfrac{3}{2\sqrt2}\Psi_\delta` exactly (no additive constant).
* :func:`azulay_objective`, :func:`stationarity_residual` (eq. 2.3): Theorem 2's
  :math:`Q(\tilde w) = q_\delta(\|\tilde w\|) + z^\top\tilde w` with
  :math:`z = -\tfrac32\sqrt{\sqrt{\|\tilde w_0\|^2 + \delta^2/4} - \delta/2}\;\hat{\tilde w}_0`,
  and the norm of its gradient's null-space part.
* :func:`kernel_predictor` (eq. 2.4): the lazy (tangent-kernel) predictor :math:`\beta_K`.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def fc_init(alpha: float, s: float, u: Any) -> tuple[float, np.ndarray, float]:
    """``(a0, w0, delta)`` of Azulay's fully connected neuron (docs/azulay-theory.md eq. 2.1).

    ``u`` is the direction of ``w0`` (normalised here); ``0 < alpha``, ``0 <= s < 1``.
    """
    u = np.asarray(u, dtype=float)
    u = u / np.linalg.norm(u)
    a0 = float(np.sqrt(alpha * (1.0 + s) / (1.0 - s)))
    w0 = float(np.sqrt(alpha * (1.0 - s) / (1.0 + s))) * u
    return a0, w0, 4.0 * alpha * s / (1.0 - s * s)


def potential_psi(x: Any, delta: Any) -> np.ndarray:
    r"""Kunin's :math:`\Psi_\delta(x) = (\kappa - 2\delta)\sqrt{\kappa+\delta}/3`,
    :math:`\kappa = \sqrt{\delta^2 + 4x^2}` (:math:`\eta = 1`; docs/azulay-theory.md eq. 2.2),
    with :math:`\kappa + \delta = 4x^2/(\kappa - \delta)` for :math:`\delta < 0` (no
    cancellation)."""
    x = np.asarray(x, dtype=float)
    delta = np.asarray(delta, dtype=float)
    kappa = np.hypot(delta, 2.0 * x)
    with np.errstate(divide="ignore", invalid="ignore"):
        kp = np.where(delta >= 0, kappa + delta, 4.0 * x * x / (kappa - delta))
    return (kappa - 2.0 * delta) * np.sqrt(kp) / 3.0


def q_fc(x: Any, delta: Any) -> np.ndarray:
    r"""Azulay's :math:`q_\delta(x) = \tfrac{3}{2\sqrt2}\Psi_\delta(x)`, regular at ``x = 0``."""
    return 3.0 / (2.0 * np.sqrt(2.0)) * potential_psi(x, delta)


def q_fc_prime(x: Any, delta: Any) -> np.ndarray:
    r""":math:`q_\delta'(x) = \tfrac32\sqrt{\sqrt{x^2+\delta^2/4} - \delta/2}`, evaluated as
    :math:`\tfrac32 |x|/\sqrt{\sqrt{x^2+\delta^2/4} + \delta/2}` when :math:`\delta > 0`."""
    x = np.asarray(x, dtype=float)
    delta = np.asarray(delta, dtype=float)
    root = np.sqrt(x * x + 0.25 * delta * delta)
    with np.errstate(divide="ignore", invalid="ignore"):
        inner = np.where(delta > 0, x * x / (root + 0.5 * delta), root - 0.5 * delta)
    return 1.5 * np.sqrt(inner)


def azulay_z(w_tilde0: Any, delta: float) -> np.ndarray:
    r""":math:`z = -\tfrac32\sqrt{\sqrt{\|\tilde w_0\|^2 + \delta^2/4} - \delta/2}\,
    \hat{\tilde w}_0 = -q_\delta'(\|\tilde w_0\|)\hat{\tilde w}_0` (Azulay Thm 2)."""
    w_tilde0 = np.asarray(w_tilde0, dtype=float)
    n0 = float(np.linalg.norm(w_tilde0))
    return -q_fc_prime(n0, delta) * w_tilde0 / n0


def azulay_objective(beta: Any, w_tilde0: Any, delta: float) -> np.ndarray:
    r"""Theorem 2's :math:`Q(\tilde w) = q_\delta(\|\tilde w\|) + z^\top\tilde w` (last axis)."""
    beta = np.asarray(beta, dtype=float)
    return q_fc(np.linalg.norm(beta, axis=-1), delta) + beta @ azulay_z(w_tilde0, delta)


def stationarity_residual(X: Any, beta: Any, w_tilde0: Any, delta: float) -> float:
    r""":math:`\|P_{\mathrm{null}(X)}(q_\delta'(\|\beta\|)\hat\beta + z)\|`: zero exactly at the
    KKT point of :math:`\min_{X\beta = y} Q` (docs/azulay-theory.md eq. 2.3)."""
    X = np.asarray(X, dtype=float)
    beta = np.asarray(beta, dtype=float)
    nb = float(np.linalg.norm(beta))
    grad = q_fc_prime(nb, delta) * beta / nb + azulay_z(w_tilde0, delta)
    null_part = grad - X.T @ np.linalg.solve(X @ X.T, X @ grad)
    return float(np.linalg.norm(null_part))


def kernel_predictor(X: Any, y: Any, alpha: float, s: float, u: Any) -> np.ndarray:
    r"""The lazy predictor :math:`\beta_K` (docs/azulay-theory.md eq. 2.4): gradient flow of
    the model linearised at its initialisation, whose tangent kernel is
    :math:`K(x, x') = a_0^2\,x^\top B x'` with :math:`B = I + ((1-s)/(1+s))^2 uu^\top`, ends at

    .. math:: \beta_K = \tilde w_0 + BX^\top(XBX^\top)^{-1}(y - X\tilde w_0).
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    a0, w0, _ = fc_init(alpha, s, u)
    u = w0 / np.linalg.norm(w0)
    ratio = ((1.0 - s) / (1.0 + s)) ** 2
    w_tilde0 = a0 * w0
    BXt = X.T + ratio * np.outer(u, X @ u)
    return w_tilde0 + BXt @ np.linalg.solve(X @ BXt, y - X @ w_tilde0)
