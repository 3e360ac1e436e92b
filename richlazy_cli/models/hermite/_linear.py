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
``δ(∇_k L) = δr_k H_k + r_k δH_k``. One product costs three ``m²d`` multiply–adds where
``f`` costs one and a half (``G = ŪŪᵀ`` is symmetric); what it shares with the gradient
(``Ū``, ``G``, the powers of ``G`` and ``M``, ``A``, ``H``) is kept from the evaluation of
``f`` at the same state. The product serves only the Newton iteration's linear solve, and
that iteration converges to the same solution of the BDF equations with an approximate
Jacobian (its residual is ``f``, in double precision; CVODE's direct solvers reuse one
Jacobian over many steps), so by default it runs in single precision, at about half the
time of the double one: about 0.9 of ``f``'s time at m = 256 and 0.8 at m = 512 (d = 512,
one core), against 1.5 in double precision.

GMRES is preconditioned by each neuron's two curvatures, radial and across its direction
(:meth:`FlowOperators.curvatures`, :meth:`FlowOperators.precondition`): the converged
neurons' stiff modes, which otherwise cost GMRES one Krylov vector per distinct rate.

Pure numerics: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def _series(powers: list[np.ndarray], b: np.ndarray, w: np.ndarray | None = None,
            out: np.ndarray | None = None) -> np.ndarray:
    """``Σ_j b_j s^j``, each column scaled by ``w`` when given, from ``powers = [s⁰, s¹, …]``
    (``s⁰`` an array of ones is never read: a constant term is broadcast): one pass over
    ``s`` per nonzero ``b_j``, where Horner's rule makes two per degree."""
    shape = powers[1].shape
    if out is None:
        out = np.empty(shape)
    first = True
    for j in np.flatnonzero(b):
        coef = float(b[j]) if w is None else float(b[j]) * w
        if first:
            if j == 0:
                out[...] = coef
            else:
                np.multiply(powers[j], coef, out=out)
            first = False
        elif j == 0:
            out += coef
        else:
            out += powers[j] * coef
    if first:
        out[...] = 0.0
    return out


def _powers(s: np.ndarray, degree: int) -> list[np.ndarray]:
    """``[s⁰ (not formed: s itself stands in), s, s², …, s^degree]`` by repeated products."""
    powers = [s, s]
    for _ in range(2, degree + 1):
        powers.append(powers[-1] * s)
    return powers


class FlowOperators:
    """``f(t, y) = −∇L(V)`` (:meth:`rhs`), ``linearise(t, y)``, the map ``δV ↦ J δV``
    (:meth:`linearise`), and ``precondition(t, y)``, an approximate ``(I − γJ)⁻¹``
    (:meth:`precondition`), for one configuration: weights ``V = y.reshape(m, d)``, teacher
    weights ``a`` (P,), Hermite coefficients ``c``; ``r_floor`` guards ``‖v_k‖ → 0``.

    :meth:`rhs` keeps what the product reuses; :meth:`linearise` at the state of the last
    :meth:`rhs` call reuses it (CVODE evaluates ``f`` at a state before it linearises there),
    and otherwise evaluates ``f`` first (counted in :attr:`extra`).

    The arithmetic is arranged for few passes over memory (the mathematics is the module
    docstring's): ``g'``, ``φ``, ``g''`` and ``φ'`` are sums of powers of ``G`` and ``M``
    formed once per state (``g = Σ_j q_j s^j`` has one term for a pure ``h_k``, where
    Horner's rule spends two passes per degree); the diagonal terms ``A_k v̄_k`` and
    ``δA_k v̄_k + A_k δv̄_k`` join the matrix products as ``diag(A)`` and ``diag(δA)``, so
    that ``H = (W_g + diag A) Ū − (a_p g'(M_kp))`` is one ``(m, m)·(m, d)`` product and
    ``δH = [W_1 + diag δA | W_g + diag A] · [Ū; δŪ] − (a_p g''(M_kp) δM_kp)`` one
    ``(m, 2m)·(2m, d)`` product (``W_g = (r_l² g'(G_kl))``, ``W_1 = (δ(r²)_l g'(G_kl) +
    r_l² g''(G_kl) δG_kl)``, ``Ū`` the rows ``v̄_k``). A product then costs its three
    ``m²d`` multiply–adds and few passes besides. The product's work arrays belong to the
    state and are reused by every product there: one product at a time.

    ``product_dtype``: the precision of the product's matrix algebra (float32 by default,
    :meth:`linearise`); ``f`` is always computed in double precision."""

    def __init__(self, m: int, d: int, a: np.ndarray, c: np.ndarray, r_floor: float,
                 product_dtype: type = np.float32) -> None:
        self.m, self.d = m, d
        self.product_dtype = np.dtype(product_dtype).type
        self.a = np.asarray(a, dtype=np.float64)
        q = np.asarray(c, dtype=np.float64) ** 2
        nonzero = np.flatnonzero(q)
        self.degree = int(nonzero[-1]) if nonzero.size else 0
        q = q[: self.degree + 1]
        j = np.arange(q.size, dtype=np.float64)
        # coefficients of s^i: g' = Σ j q_j s^{j-1}, φ = 2g − s g' = Σ (2 − j) q_j s^j,
        # g'' = Σ j (j − 1) q_j s^{j-2}, φ' = g' − s g'' = Σ j (2 − j) q_j s^{j-1}
        self._dg = (j * q)[1:]
        self._phi = (2.0 - j) * q
        self._ddg = (j * (j - 1.0) * q)[2:]
        self._dphi = (j * (2.0 - j) * q)[1:]
        self._g1 = float(np.sum(q))  # g(1)
        self._dg1 = float(np.sum(j * q))  # g'(1)
        self.r_floor = r_floor
        self.extra = 0
        self._state: dict[str, Any] = {}

    def rhs(self, t: float, y: np.ndarray) -> np.ndarray:
        """``−∇L(V)`` (docs/hermite.md, eq. (5)), flattened."""
        m, d, a = self.m, self.d, self.a
        P = a.shape[0]
        V = np.array(y, dtype=np.float64).reshape(m, d)
        r2 = np.einsum("kd,kd->k", V, V)
        r = np.maximum(np.sqrt(r2), self.r_floor)
        S = np.empty((2 * m, d))  # [Ū; δŪ], the right factor of δH
        U = np.divide(V, r[:, None], out=S[:m])
        G = U @ U.T
        M = U[:, :P]
        pG = _powers(G, max(self.degree, 1))
        pM = _powers(M, max(self.degree, 1))
        phiG = _series(pG, self._phi)
        A = phiG @ r2 - _series(pM, self._phi) @ a
        B = np.empty((m, 2 * m))  # [W_1 + diag δA | W_g + diag A], the left factor of δH
        Wg = _series(pG, self._dg, r2, out=B[:, m:])
        diag = np.arange(m)
        Wg[diag, diag] += A
        H = Wg @ U
        H[:, :P] -= _series(pM, self._dg, a)
        self._state = {"V": V, "r2": r2, "r": r, "S": S, "B": B, "pG": pG, "pM": pM,
                       "phiG": phiG, "A": A, "H": H}
        return (H * -r[:, None]).ravel()

    def linearise(self, t: float, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        """The product ``δV ↦ J δV`` at ``y`` (the module docstring's tangent, negated).

        With :attr:`product_dtype` float32 the ``(m, m)`` and ``(m, d)`` factors (``Ū``,
        ``G``'s functions, ``W_g``, ``δŪ``, ``δG``, ``δH``) are rounded to single precision
        and the norms' scalings (``r``, ``δr``, ``1/r``) stay double: a product then carries
        a relative error of about 1e-7 (it serves the Newton iteration's linear solve, whose
        residual is ``f`` in double precision), at half the time of the double one."""
        s = self._state_at(t, y)
        m, d, a = self.m, self.d, self.a
        P = a.shape[0]
        dt = self.product_dtype
        V, r2, r, pG, pM = s["V"], s["r2"], s["r"], s["pG"], s["pM"]
        H, U = s["H"], s["S"][:m]
        if dt == np.float64:
            S, B, phiG = s["S"], s["B"], s["phiG"]
        else:
            S = np.empty((2 * m, d), dt)
            S[:m] = U
            B = np.empty((m, 2 * m), dt)
            B[:, m:] = s["B"][:, m:]
            phiG = s["phiG"].astype(dt)
        U_, dU, W1 = S[:m], S[m:], B[:, :m]
        dgG = _series(pG, self._dg).astype(dt, copy=False)
        dphiG_r2 = _series(pG, self._dphi, r2).astype(dt, copy=False)
        ddgG_r2 = _series(pG, self._ddg, r2).astype(dt, copy=False)
        dphiM_a = _series(pM, self._dphi, a).astype(dt, copy=False)
        ddgM_a = _series(pM, self._ddg, a).astype(dt, copy=False)
        inv_r = 1.0 / r
        diag = np.arange(m)

        def jv(v: np.ndarray) -> np.ndarray:
            dV = v.reshape(m, d)
            dr = np.einsum("kd,kd->k", V, dV) * inv_r  # δr = ⟨v_k, δv_k⟩ / r_k
            dr2 = (2.0 * r * dr).astype(dt, copy=False)  # δ(r²)_k
            w = dV - U * dr[:, None]
            np.multiply(w, inv_r[:, None], out=dU, casting="same_kind")  # δv̄_k
            dUU = dU @ U_.T
            dG = dUU + dUU.T
            dM = dU[:, :P]
            dA = (phiG @ dr2 + np.einsum("kl,kl->k", dG, dphiG_r2)
                  - np.einsum("kp,kp->k", dM, dphiM_a))
            np.multiply(ddgG_r2, dG, out=W1)
            np.multiply(dgG, dr2, out=dG)
            np.add(W1, dG, out=W1)
            W1[diag, diag] += dA
            dH = B @ S
            dH[:, :P] -= ddgM_a * dM
            out = np.multiply(dH, -r[:, None], dtype=np.float64)
            out -= H * dr[:, None]
            return out.ravel()

        return jv

    def _state_at(self, t: float, y: np.ndarray) -> dict[str, Any]:
        """What :meth:`rhs` keeps, at ``y`` (evaluating ``f`` there unless it was the last
        state, counted in :attr:`extra`)."""
        if not self._state or not np.array_equal(self._state["V"].ravel(), y):
            self.rhs(t, y)
            self.extra += 1
        return self._state

    def curvatures(self, t: float, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each neuron's curvatures of the loss (4) in its own weights at ``y``: radial,
        ``λʳ_k = ⟨H_k, v̄_k⟩ + 4 r_k² g(1)``, and across ``v̄_k``, ``λᵗ_k = A_k + r_k² g'(1)``
        (docs/hermite.md, "Integrators").

        Along ``v̄_k`` the loss is a quartic in ``r_k``: ``∂L/∂r_k = r_k ⟨H_k, v̄_k⟩`` and
        ``∂²L/∂r_k² = (∂L/∂r_k)/r_k + 4 r_k² g(1)``, the exact ``v̄_kᵀ ∇²_{v_k} L v̄_k``.
        Across it, the tangent of eq. (5) with ``δv_k ⊥ v_k`` is ``(A_k + r_k² g'(1)) δv_k``
        plus terms along ``v̄_k``, the other neurons' ``v̄_l`` and the teachers' ``e_p``:
        ``λᵗ_k`` is the curvature in every direction orthogonal to all of those. A neuron
        converged onto teacher ``p`` alone has ``λʳ = 4 a_p g(1)`` and ``λᵗ = a_p g'(1)``
        (both ``4 a_p`` for ``σ = h_4``): the stiff modes that hold an explicit step."""
        s = self._state_at(t, y)
        U, r2 = s["S"][: self.m], s["r2"]
        radial = np.einsum("kd,kd->k", s["H"], U) + 4.0 * self._g1 * r2
        return radial, s["A"] + self._dg1 * r2

    def precondition(self, t: float, y: np.ndarray) -> Callable[[np.ndarray, float], np.ndarray]:
        """``(ρ, γ) ↦ z ≈ (I − γ J)⁻¹ ρ`` at ``y``: per neuron, ``−J``'s diagonal block (the
        Hessian of (4) in ``v_k``) kept as its two :meth:`curvatures`,
        ``λᵗ (I − v̄v̄ᵀ) + λʳ v̄v̄ᵀ``, and inverted in closed form,
        ``z_k = (I − v̄v̄ᵀ) ρ_k/(1 + γλᵗ) + v̄v̄ᵀ ρ_k/(1 + γλʳ)`` (``O(md)`` per solve; GMRES
        does the rest: the blocks between neurons and the terms along the teachers). A
        negative curvature (a saddle's escape) counts as zero, so no block is singular."""
        m, d = self.m, self.d
        radial, across = (np.maximum(x, 0.0) for x in self.curvatures(t, y))
        U = self._state["S"][:m]  # products write only the state's other half

        def solve(rho: np.ndarray, gamma: float) -> np.ndarray:
            R = rho.reshape(m, d)
            inv_across = 1.0 / (1.0 + gamma * across)
            along = np.einsum("kd,kd->k", R, U) * (1.0 / (1.0 + gamma * radial) - inv_across)
            return (R * inv_across[:, None] + U * along[:, None]).ravel()

        return solve
