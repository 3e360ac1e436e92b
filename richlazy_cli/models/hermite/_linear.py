"""The gradient flow's right-hand side ``−∇L`` and its Jacobian–vector product, sharing the
work at one state: what a matrix-free stiff integrator asks of the flow.

A leaf module of :mod:`richlazy_cli.models.hermite.model` (docs/hermite.md, eqs. (4)–(5) and
"Integrators"). CVODE's Newton–GMRES solve (:mod:`richlazy_cli.numerics.solvers.krylov`)
evaluates ``f = −∇L(V)`` at a state and then asks, at that same state, for products
``J δV`` with ``J = ∂f/∂V = −∂(∇L)/∂V`` (the Hessian of ``L``, negated). The product is the
forward-mode tangent of eq. (5), the same algebra as
:func:`richlazy_cli.models.hermite.model.population_grad_jacobian` for one direction: with
``φ = 2g − s g'`` (``φ' = g' − s g''``), ``H_k = A_k v̄_k + Σ_l r_l² g'(G_kl) v̄_l −
Σ_p a_p g'(M_kp) e_p`` and ``∇_k L = r_k H_k``, a tangent ``δV`` gives ``δ(r²)_k =
2⟨v_k, δv_k⟩``, ``δr_k = δ(r²)_k/(2 r_k)``, ``δv̄_k = δv_k/r_k − v̄_k δr_k/r_k``,
``δG_kl = ⟨δv̄_k, v̄_l⟩ + ⟨v̄_k, δv̄_l⟩``, ``δM_kp = (δv̄_k)_p``,
``δA_k = Σ_l [δ(r²)_l φ(G_kl) + r_l² φ'(G_kl) δG_kl] − Σ_p a_p φ'(M_kp) δM_kp``,
``δH_k = δA_k v̄_k + A_k δv̄_k + Σ_l [δ(r²)_l g'(G_kl) + r_l² g''(G_kl) δG_kl] v̄_l
+ Σ_l r_l² g'(G_kl) δv̄_l − Σ_p a_p g''(M_kp) δM_kp e_p`` and
``δ(∇_k L) = δr_k H_k + r_k δH_k``. One product costs three (m, m)·(m, d) products, about
0.9 of a gradient evaluation; what it shares with the gradient (``U``, ``G``, ``g`` and its
derivatives, ``A``, ``H``) is kept from the evaluation of ``f`` at the same state.

Pure numerics: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ._population import poly_g


def _poly_ddg(s: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``g''(s) = Σ_j j (j − 1) q_j s^{j−2}`` by Horner, elementwise."""
    K = len(q) - 1
    out = np.zeros_like(s)
    for j in range(K, 1, -1):
        out = out * s + float(j * (j - 1) * q[j])
    return out


class FlowOperators:
    """``f(t, y) = −∇L(V)`` (:meth:`rhs`) and ``linearise(t, y)``, the map ``δV ↦ J δV``
    (:meth:`linearise`), for one configuration: weights ``V = y.reshape(m, d)``, teacher
    weights ``a`` (P,), Hermite coefficients ``c``; ``r_floor`` guards ``‖v_k‖ → 0``.

    :meth:`rhs` keeps what the product reuses; :meth:`linearise` at the state of the last
    :meth:`rhs` call reuses it (CVODE evaluates ``f`` at a state before it linearises there),
    and otherwise evaluates ``f`` first (counted in :attr:`extra`)."""

    def __init__(self, m: int, d: int, a: np.ndarray, c: np.ndarray, r_floor: float) -> None:
        self.m, self.d = m, d
        self.a = np.asarray(a, dtype=np.float64)
        self.q = np.asarray(c, dtype=np.float64) ** 2
        self.r_floor = r_floor
        self.extra = 0
        self._state: dict[str, Any] = {}

    def rhs(self, t: float, y: np.ndarray) -> np.ndarray:
        """``−∇L(V)`` (docs/hermite.md, eq. (5)), flattened."""
        m, d, a, q = self.m, self.d, self.a, self.q
        P = a.shape[0]
        V = np.array(y, dtype=np.float64).reshape(m, d)
        r2 = np.einsum("kd,kd->k", V, V)
        r = np.maximum(np.sqrt(r2), self.r_floor)
        U = V / r[:, None]
        G = U @ U.T
        M = U[:, :P]
        gG, dgG = poly_g(G, q, np)
        gM, dgM = poly_g(M, q, np)
        phiG, phiM = 2.0 * gG - G * dgG, 2.0 * gM - M * dgM
        A = phiG @ r2 - phiM @ a
        Wg = dgG * r2[None, :]
        H = A[:, None] * U + Wg @ U
        H[:, :P] -= dgM * a[None, :]
        self._state = {"V": V, "r2": r2, "r": r, "U": U, "G": G, "M": M, "dgG": dgG,
                       "dgM": dgM, "phiG": phiG, "A": A, "Wg": Wg, "H": H}
        return -(r[:, None] * H).ravel()

    def linearise(self, t: float, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        """The product ``δV ↦ J δV`` at ``y`` (the module docstring's tangent, negated)."""
        s = self._state
        if not s or not np.array_equal(s["V"].ravel(), y):
            self.rhs(t, y)
            self.extra += 1
            s = self._state
        m, d, a, q = self.m, self.d, self.a, self.q
        P = a.shape[0]
        V, r2, r, U, G, M = s["V"], s["r2"], s["r"], s["U"], s["G"], s["M"]
        dgG, dgM, phiG, A, Wg, H = s["dgG"], s["dgM"], s["phiG"], s["A"], s["Wg"], s["H"]
        ddgG, ddgM = _poly_ddg(G, q), _poly_ddg(M, q)
        dphiG_r2 = (dgG - G * ddgG) * r2[None, :]
        dphiM_a = (dgM - M * ddgM) * a[None, :]
        ddgG_r2 = ddgG * r2[None, :]
        ddgM_a = ddgM * a[None, :]

        def jv(v: np.ndarray) -> np.ndarray:
            dV = v.reshape(m, d)
            dr2 = 2.0 * np.einsum("kd,kd->k", V, dV)
            dr = dr2 / (2.0 * r)
            dU = dV / r[:, None] - U * (dr / r)[:, None]
            dUU = dU @ U.T  # <δv̄_k, v̄_l>
            dG = dUU + dUU.T
            dM = dU[:, :P]
            dA = (phiG @ dr2 + np.einsum("kl,kl->k", dG, dphiG_r2)
                  - np.einsum("kp,kp->k", dM, dphiM_a))
            W1 = dgG * dr2[None, :] + ddgG_r2 * dG
            dH = dA[:, None] * U + A[:, None] * dU + W1 @ U + Wg @ dU
            dH[:, :P] -= ddgM_a * dM
            return -(dr[:, None] * H + r[:, None] * dH).ravel()

        return jv
