"""The hermite model's population loss and gradient, written once for NumPy and torch.

A leaf module of :mod:`richlazy_cli.models.hermite.model` (its docstring and docs/hermite.md, eqs.
(4)–(5), state the mathematics). :func:`population_loss_grad` takes one configuration ``V``
(m, d) or a stack (…, m, d) of them, as NumPy arrays (the reference flow and the online-SGD
diagnostics) or torch tensors on any device (the batched flow); the arithmetic is written
against the inputs' array namespace (:func:`richlazy_cli.numerics.arrays.array_namespace`,
docs/engine.md, "One array namespace"), so one definition serves both. Pure numerics.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...numerics.arrays import array_namespace

R_FLOOR = 1e-150
"""Smallest neuron norm ``r_k`` used to normalise (guards ``r_k → 0``)."""


def poly_g(s: Any, q: np.ndarray, xp: Any = None) -> tuple[Any, Any]:
    """``g(s) = Σ_j q_j s^j`` and ``g'(s)`` by Horner (``q_j = c_j²``), elementwise."""
    xp = array_namespace(s) if xp is None else xp
    K = len(q) - 1
    g = xp.full_like(s, float(q[K]))
    dg = xp.zeros_like(s)
    for j in range(K - 1, -1, -1):
        dg = dg * s + g
        g = g * s + float(q[j])
    return g, dg


def population_loss_grad(V: Any, a: Any, c: np.ndarray, need_grad: bool = True,
                         r_floor: float = R_FLOOR) -> tuple[Any, Any]:
    """Closed-form ``L(V) = ½E(f - f*)²`` and ``∇_V L`` (docs/hermite.md, eqs. (4)–(5)).

    ``V`` (…, m, d) and teacher weights ``a`` (…, P) with P ≤ d, NumPy arrays or torch
    tensors; ``c`` the Hermite coefficients of σ (host array). Returns the loss (…) — a float
    for one NumPy configuration — and the gradient (…, m, d), or ``None`` without
    ``need_grad``.
    """
    xp = array_namespace(V, a)
    q = np.asarray(c, dtype=np.float64) ** 2
    P = a.shape[-1]
    r2 = xp.squared_norm(V)
    r = xp.clamp_min(xp.sqrt(r2), r_floor)
    U = V / r[..., :, None]
    mm = xp.matmul
    G = mm(U, U.mT)
    M = U[..., :P]
    gG, dgG = poly_g(G, q, xp)
    gM, dgM = poly_g(M, q, xp)
    const = float(q[0]) * xp.sum_last(a) ** 2 + float(np.sum(q[1:])) * xp.vecdot(a, a)
    quad = mm(mm(r2[..., None, :], gG), r2[..., :, None])[..., 0, 0]
    lin = xp.vecdot(r2, mm(gM, a[..., :, None])[..., 0])
    loss = 0.5 * (quad - 2.0 * lin + const)
    if not need_grad:
        return loss, None
    A = (mm(2.0 * gG - G * dgG, r2[..., :, None]) - mm(2.0 * gM - M * dgM, a[..., :, None]))[..., 0]
    grad = A[..., :, None] * U + mm(dgG * r2[..., None, :], U)
    grad[..., :P] -= dgM * a[..., None, :]
    return loss, grad * r[..., :, None]
