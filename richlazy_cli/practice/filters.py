"""Roughness of convolution filters: the normalised Laplacian energy (docs/cnn.md §5).

For a filter w (k×k, or k in 1-D) and the discrete Laplacian Λ (5-point stencil in 2-D,
[1, −2, 1] in 1-D) applied as a *valid* convolution,

    R(w) = ‖Λ ∗ w‖²_F / ‖w‖²_F,

a scale-free number, small for smooth filters and large for rough ones. R is a Rayleigh
quotient R(w) = wᵀQw / wᵀw with Q = LᵀL, L the matrix of the valid convolution. For i.i.d.
Gaussian entries w/‖w‖ is uniform on the sphere of dimension N = k² (or k), hence

    E R = tr Q / N,   Var R = 2 [tr(Q²)/N − (tr Q/N)²] / (N + 2),

and tr Q = ‖L‖²_F = (k − 2)² · 20 in 2-D (stencil energy 1 + 1 + 16 + 1 + 1 per valid
position) and (k − 2) · 6 in 1-D: E R = 20 (k − 2)²/k² and 6 (k − 2)/k. These are the
reference levels of an untrained filter bank; learning that makes filters smoother lowers R.
Kunin et al. (2024, Fig. 6b, App. D.3) compare this smoothness across relative scales α.
"""

from __future__ import annotations

import numpy as np

STENCIL_2D = np.array([[0.0, 1.0, 0.0], [1.0, -4.0, 1.0], [0.0, 1.0, 0.0]])
STENCIL_1D = np.array([1.0, -2.0, 1.0])


def laplacian(w: np.ndarray, dims: int) -> np.ndarray:
    """Λ ∗ w over the last ``dims`` (1 or 2) axes, valid part only (Λ is symmetric, so
    convolution and correlation agree)."""
    w = np.asarray(w, dtype=np.float64)
    if dims == 1:
        return w[..., :-2] - 2.0 * w[..., 1:-1] + w[..., 2:]
    return (w[..., :-2, 1:-1] + w[..., 2:, 1:-1] + w[..., 1:-1, :-2] + w[..., 1:-1, 2:]
            - 4.0 * w[..., 1:-1, 1:-1])


def roughness(w: np.ndarray, dims: int) -> np.ndarray:
    """R of every filter in ``w`` (filters along the leading axes, the last ``dims`` axes
    spatial): ‖Λ ∗ w‖² / ‖w‖²; NaN for an all-zero filter."""
    w = np.asarray(w, dtype=np.float64)
    axes = tuple(range(-dims, 0))
    num = np.sum(laplacian(w, dims) ** 2, axis=axes)
    den = np.sum(w**2, axis=axes)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def mean_roughness(w: np.ndarray, dims: int) -> float:
    """R̄: the mean of R over every (output, input channel) filter of a conv weight."""
    return float(np.mean(roughness(w, dims)))


def operator(k: int, dims: int) -> np.ndarray:
    """The matrix L of the valid Laplacian on k (1-D) or k×k (2-D, row-major) filters."""
    n = k**dims
    basis = np.eye(n).reshape((n,) + (k,) * dims)
    return laplacian(basis, dims).reshape(n, -1).T


def expected_roughness(k: int, dims: int) -> float:
    """E R of a filter with i.i.d. Gaussian entries: 20 (k−2)²/k² (2-D), 6 (k−2)/k (1-D)."""
    return 20.0 * (k - 2) ** 2 / k**2 if dims == 2 else 6.0 * (k - 2) / k


def roughness_rel_sd(k: int, dims: int) -> float:
    """Relative standard deviation √Var R / E R of one i.i.d. Gaussian filter (module
    docstring), from the spectrum of Q = LᵀL."""
    L = operator(k, dims)
    Q = L.T @ L
    n = Q.shape[0]
    mean = np.trace(Q) / n
    var = 2.0 * (np.trace(Q @ Q) / n - mean**2) / (n + 2)
    return float(np.sqrt(var) / mean)
