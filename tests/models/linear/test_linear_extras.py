"""Kunin et al. (2024), App. B: Lemmas B.8/B.9 of the deep isotropic initialisation, the
Gaussian-versus-isotropic question of Def. B.7, and App. B.1.1's Riccati system
(docs/azulay-theory.md §5). Each identity is checked along an integrated parameter flow."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from richlazy_cli.models.linear.model import (
    Linear,
    _flatten,
    _unflatten,
    end_to_end,
    gaussian_init,
    gradients,
    make_data,
)


def parameter_flow(d: int, h: int, c: int, depth: int, delta: float, scale: float, seed: int,
                   times: np.ndarray, aligned: bool = False):
    """Weights along the gradient flow of the model's isotropic init (η = 1, whitened)."""
    v = dict(depth=depth, d=d, h=h, c=c, n=d, delta=delta, scale=scale, seed=seed,
             aligned=aligned)
    pt = Linear.resolve("solve", v)
    data = make_data(pt)
    Ws, A = Linear._init(pt, data)

    def rhs(_t: float, theta: np.ndarray) -> np.ndarray:
        Wt, At = _unflatten(theta, d, h, c, depth)
        G = data.Sigma @ end_to_end(Wt, At) - data.b
        dW, dA = gradients(Wt, At, G)
        return -_flatten(dW, dA)

    sol = solve_ivp(rhs, (0.0, times[-1]), _flatten(Ws, A), method="DOP853", t_eval=times,
                    rtol=1e-12, atol=1e-14)
    return [_unflatten(sol.y[:, j], d, h, c, depth) for j in range(times.size)], data


@pytest.mark.parametrize("depth", [2, 3])
@pytest.mark.parametrize("delta", [-0.5, 0.0])
def test_lemmas_b8_b9_along_the_flow(depth: int, delta: float) -> None:
    """‖β‖² = aᵀ(aaᵀ − δI)^L a and ββᵀ = (W₁ᵀW₁)^{L+1} + δ(W₁ᵀW₁)^L to 1e-8 relative at every
    time (the second by telescoping W_{l+1}ᵀW_{l+1} = W_lW_lᵀ and aaᵀ = W_LW_Lᵀ + δI)."""
    d = h = 4
    states, _ = parameter_flow(d, h, 1, depth, delta, 0.5, 3, np.linspace(0, 10, 21))
    for Ws, A in states:
        a = A[:, 0]
        beta = end_to_end(Ws, A)[:, 0]
        lhs = beta @ beta
        rhs = a @ np.linalg.matrix_power(np.outer(a, a) - delta * np.eye(h), depth) @ a
        assert abs(lhs - rhs) <= 1e-8 * lhs
        C = Ws[0].T @ Ws[0]
        outer = np.linalg.matrix_power(C, depth + 1) + delta * np.linalg.matrix_power(C, depth)
        bb = np.outer(beta, beta)
        assert np.max(np.abs(bb - outer)) <= 1e-8 * np.max(np.abs(bb))


def test_gaussian_init_is_not_isotropic_off_the_diagonal() -> None:
    """Def. B.7 states that the Gaussian init (variance ∝ 1/width) approaches the isotropic
    init as the width grows. For square d = h = c, A ~ N(0, σ_a²/c), W ~ N(0, σ_w²/d),
    Δ = AAᵀ − WWᵀ: the diagonal concentrates on δ = σ_a² − σ_w² (RMS error ∝ h^{−1/2}: shrinks
    ≥ 2.5× from h = 64 to 1024), but the off-diagonal part does not vanish in operator norm
    (Marchenko–Pastur: ‖Δ − δI‖_op stays O(σ_a² + σ_w²), changing < 30% over the same range).
    So the claim holds per neuron, not for Δ = δI as a matrix. Measured (σ_a = 1, σ_w = 0.5,
    one seed per h): RMS 0.205, 0.089, 0.044 (ratio 4.6); operator norm 3.08, 2.89, 3.01; max
    diagonal error 0.56, 0.24, 0.14 (ratio 3.9, predicted ≈ 3.1 from √(log h/h))."""
    sa, sw = 1.0, 0.5
    delta = sa * sa - sw * sw
    rms, op, mx = [], [], []
    for h in (64, 256, 1024):
        Ws, A = gaussian_init(h, h, h, 1, sa, sw, np.random.default_rng(h))
        D = A @ A.T - Ws[0] @ Ws[0].T
        diag = np.diag(D) - delta
        rms.append(float(np.sqrt(np.mean(diag**2))))
        mx.append(float(np.max(np.abs(diag))))
        op.append(float(np.max(np.abs(np.linalg.eigvalsh(D - delta * np.eye(h))))))
    assert rms[0] / rms[2] >= 2.5, rms
    assert abs(op[2] / op[0] - 1.0) < 0.3, op
    assert op[2] >= 0.5 * (sa * sa + sw * sw)
    # the max diagonal error shrinks with h at about the √(log h/h) rate (predicted ratio
    # ≈ 3.1 from 64 to 1024, measured 3.9 for these seeds): asserted ≥ 2 and decreasing
    assert mx[0] > mx[1] > mx[2] and mx[0] / mx[2] >= 2.0, mx


def test_appendix_b11_riccati_system() -> None:
    """Whitened, η = 1, c = h, Δ = δI, A invertible: ν = A⁻¹Wβ* and C = AᵀA obey
    ν̇ = β*ᵀβ* − δν − ν² and Ċ = 2δC − 2C² + Cν + νᵀC; integrating (ν, C) on their own matches
    the parameter flow to 1e-8 (d = c = h = 3)."""
    d = c = h = 3
    delta = 0.7
    times = np.linspace(0.0, 5.0, 11)
    states, data = parameter_flow(d, h, c, 1, delta, 0.3, 2, times)
    bstar = data.b  # X^T y = beta* for whitened noiseless data
    Ws, A = states[0]
    nu0 = np.linalg.solve(A, Ws[0] @ bstar)
    C0 = A.T @ A
    BB = bstar.T @ bstar

    def rhs(_t: float, x: np.ndarray) -> np.ndarray:
        nu, C = x[:9].reshape(3, 3), x[9:].reshape(3, 3)
        dnu = BB - delta * nu - nu @ nu
        dC = 2 * delta * C - 2 * C @ C + C @ nu + nu.T @ C
        return np.concatenate([dnu.ravel(), dC.ravel()])

    sol = solve_ivp(rhs, (0, times[-1]), np.concatenate([nu0.ravel(), C0.ravel()]),
                    method="DOP853", t_eval=times, rtol=1e-12, atol=1e-14)
    for j, (Wt, At) in enumerate(states):
        nu = np.linalg.solve(At, Wt[0] @ bstar)
        np.testing.assert_allclose(sol.y[:9, j].reshape(3, 3), nu, atol=1e-8)
        np.testing.assert_allclose(sol.y[9:, j].reshape(3, 3), At.T @ At, atol=1e-8)


def test_appendix_b11_per_neuron_system_for_one_output() -> None:
    """Whitened, η = 1, c = 1: with μ_k = a_k‖w_k‖, ŵ_k = (cos φ_k, sin φ_k) (d = 2), the
    conserved δ_k = a_k² − ‖w_k‖², κ_k = √(δ_k² + 4μ_k²) and the residual r = β* − Σ_j μ_j ŵ_j,

        μ̇_k = κ_k ŵ_kᵀr,        φ̇_k = (κ_k + δ_k)/(2μ_k) · ŵ_k^⊥ᵀ r,   ŵ_k^⊥ = (−sin φ_k, cos φ_k)

    (docs/azulay-theory.md §5). Integrating the 2h numbers (μ, φ) on their own matches the
    model's parameter flow (`linear.gradients`, h = 4 neurons with δ_k from −1.23 to 1.75, none
    aligned with β* at the start, so the directions turn) to 1e-8, and each δ_k is conserved."""
    d, h = 2, 4
    W0 = np.array([[0.3, 0.4], [-0.2, 1.2], [0.5, 0.1], [-0.1, -0.45]])
    A0 = np.array([[1.3], [-0.5], [0.9], [-1.4]])
    bstar = np.array([[1.0], [-0.6]])
    delta = A0[:, 0] ** 2 - np.sum(W0**2, axis=1)
    assert delta.min() < -0.5 and delta.max() > 1.0, delta  # both signs, far apart
    times = np.linspace(0.0, 6.0, 13)

    def params(t: float, theta: np.ndarray) -> np.ndarray:
        Ws, A = _unflatten(theta, d, h, 1, 1)
        dW, dA = gradients(Ws, A, end_to_end(Ws, A) - bstar)
        return -_flatten(dW, dA)

    flow = solve_ivp(params, (0.0, times[-1]), _flatten([W0], A0), method="DOP853",
                     t_eval=times, rtol=1e-12, atol=1e-14)

    def per_neuron(t: float, x: np.ndarray) -> np.ndarray:
        mu, phi = x[:h], x[h:]
        u = np.stack([np.cos(phi), np.sin(phi)], axis=1)
        perp = np.stack([-np.sin(phi), np.cos(phi)], axis=1)
        r = bstar[:, 0] - u.T @ mu
        kappa = np.sqrt(delta**2 + 4 * mu**2)
        return np.concatenate([kappa * (u @ r), (kappa + delta) / (2 * mu) * (perp @ r)])

    mu0 = A0[:, 0] * np.linalg.norm(W0, axis=1)
    phi0 = np.arctan2(W0[:, 1], W0[:, 0])
    mine = solve_ivp(per_neuron, (0.0, times[-1]), np.concatenate([mu0, phi0]),
                     method="DOP853", t_eval=times, rtol=1e-12, atol=1e-14)
    turned = 0.0
    for j in range(times.size):
        (Wt,), At = _unflatten(flow.y[:, j], d, h, 1, 1)
        a = At[:, 0]
        mu = a * np.linalg.norm(Wt, axis=1)
        assert np.min(np.abs(mu)) > 1e-2  # the angle stays defined along the whole run
        np.testing.assert_allclose(mine.y[:h, j], mu, atol=1e-8)
        phi = mine.y[h:, j]
        np.testing.assert_allclose(np.cos(phi) * np.linalg.norm(Wt, axis=1), Wt[:, 0],
                                   atol=1e-8)
        np.testing.assert_allclose(np.sin(phi) * np.linalg.norm(Wt, axis=1), Wt[:, 1],
                                   atol=1e-8)
        np.testing.assert_allclose(a**2 - np.sum(Wt**2, axis=1), delta, atol=1e-9)
        turned = max(turned, float(np.max(np.abs(phi - phi0))))
    assert turned >= 0.3, turned  # the directions move (0.41 rad): the φ equation acts
    residual = np.linalg.norm(end_to_end(*_unflatten(flow.y[:, -1], d, h, 1, 1)) - bstar)
    assert residual <= 0.1 * np.linalg.norm(bstar), residual  # and the run fits β*
