"""Numerical kernels of the two-layer teacher-student model (SPEC.md §A3).

Private helper of :mod:`richlazy_cli.models.two_layer`; pure NumPy, no I/O.

Conventions (SPEC §A3, "Fig. 1 / Appendix D.1 protocol"):

* student ``f(x) = Σ_k a_k σ(w_kᵀx)`` with ``σ(z) = max(z, γ z)`` (``γ`` = ``leak`` ∈ [0, 1])
  and ``σ'(0) = 1``;
* loss = mean squared error ``L = (1/n) Σ_i (f(x_i) − y_i)²`` (the authors' code; gradient
  factor ``2/n``), full-batch gradient descent ``θ ← θ − lr_eff ∇L``;
* with ``r = f(X) − y``, ``D = σ'(X Wᵀ)`` (n × h) and ``P = (D ∘ r 1ᵀ)ᵀ X`` (h × d, row ``k``
  is ``ξ_k = Xᵀ D_k r`` of SPEC §A3 "Dynamics")::

      ∂L/∂w_k = (2/n) a_k ξ_k,        ∂L/∂a_k = (2/n) Σ_i σ(w_kᵀx_i) r_i = (2/n) w_kᵀ ξ_k

  (the second form uses ``σ(z) = σ'(z) z``), so one step costs two matrix products
  (forward ``X Wᵀ``, backward ``(D∘r)ᵀ X``) plus O(n h) elementwise work.

Batching: configurations of one seed share ``X``. The matrix products are issued per
configuration, always with the same shapes and contiguous operands, because stacking the
weights of several configurations into one larger product is *not* bitwise safe: OpenBLAS
picks different micro-kernels (and, for the backward product, different reduction orders)
by shape and by column offset, which was measured to change the last bits of some
configurations. The O(n h) elementwise passes, which are what the per-configuration research
loop loses time on, run over a whole group (sized to stay in L2) into preallocated buffers.
The model's tests check alone-versus-batch bitwise identity for both dtypes and two sizes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .base import rng

# ----------------------------------------------------------------------------------------------
# Initialisation and data (SPEC §A3 protocol)
# ----------------------------------------------------------------------------------------------


def alpha_of(tau: np.ndarray | float, delta: np.ndarray | float) -> np.ndarray:
    """The layer-ratio ``α(τ, δ)`` of SPEC §A3: ``α² = ½(√(4 + q²) − q)``, ``q = δ/τ²``.

    With ``w = τα u`` and ``a = ±τ/α`` (``‖u‖ = 1``) this gives ``|a|‖w‖ = τ²`` and
    ``a² − ‖w‖² = τ²(α⁻² − α²) = δ``. For ``q > 0`` the algebraically equal form
    ``α² = 2/(√(4 + q²) + q)`` avoids cancellation.
    """
    tau = np.asarray(tau, dtype=np.float64)
    q = np.asarray(delta, dtype=np.float64) / tau**2
    root = np.sqrt(4.0 + q * q)
    alpha2 = np.where(q > 0, 2.0 / (root + np.abs(q)), 0.5 * (root + np.abs(q)))
    return np.sqrt(alpha2)


def sphere(gen: np.random.Generator, count: int, dim: int) -> np.ndarray:
    """``count`` points uniform on the unit sphere ``S^{dim−1}`` (normalised Gaussians)."""
    z = gen.standard_normal((count, dim))
    return z / np.linalg.norm(z, axis=1, keepdims=True)


def relu(z: np.ndarray) -> np.ndarray:
    return np.maximum(z, 0.0)


@dataclass(frozen=True)
class Problem:
    """Everything one seed shares: teacher, training set, test set and base initialisation."""

    teacher_w: np.ndarray  # (k, d), unit rows
    teacher_a: np.ndarray  # (k,), ±1
    X: np.ndarray  # (n, d)
    y: np.ndarray  # (n,)
    X_test: np.ndarray  # (n_test, d)
    y_test: np.ndarray  # (n_test,)
    base_w: np.ndarray  # (h, d), unit rows
    base_a: np.ndarray  # (h,), ±1


def make_problem(seed: int, d: int, h: int, k: int, n: int, n_test: int,
                 symmetrize: bool) -> Problem:
    """Teacher, data and base initialisation of one seed (SPEC §A3 recipe steps 1–2).

    Streams: ``rng(seed, "teacher")`` (``W*`` unit rows, ``a* = ±1``), ``rng(seed, "data")``
    (training inputs), ``rng(seed, "test")`` (test inputs), ``rng(seed, "init")`` (base
    directions ``u_k`` and signs ``ε_k``). Labels are the noiseless ReLU teacher
    ``y = relu(X W*ᵀ) a*``. With ``symmetrize`` (``h`` even) the base is ``W = [U; U]``,
    ``a = [ε; −ε]`` so that the student output is exactly 0 at initialisation; otherwise ``h``
    independent directions with random signs.
    """
    gt = rng(seed, "teacher")
    teacher_w = sphere(gt, k, d)
    teacher_a = gt.choice(np.array([-1.0, 1.0]), size=k)
    X = sphere(rng(seed, "data"), n, d)
    X_test = sphere(rng(seed, "test"), n_test, d)
    y = relu(X @ teacher_w.T) @ teacher_a
    y_test = relu(X_test @ teacher_w.T) @ teacher_a
    gi = rng(seed, "init")
    if symmetrize:
        u = sphere(gi, h // 2, d)
        eps = gi.choice(np.array([-1.0, 1.0]), size=h // 2)
        base_w = np.concatenate([u, u])
        base_a = np.concatenate([eps, -eps])
    else:
        base_w = sphere(gi, h, d)
        base_a = gi.choice(np.array([-1.0, 1.0]), size=h)
    return Problem(teacher_w, teacher_a, X, y, X_test, y_test, base_w, base_a)


def initial_params(problem: Problem, tau: np.ndarray, delta: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Scaled initialisations ``W0 = τα U`` (B, h, d) and ``a0 = (τ/α) ε`` (B, h)."""
    tau = np.asarray(tau, dtype=np.float64)
    alpha = alpha_of(tau, delta)
    w_scale = tau * alpha
    a_scale = tau / alpha
    W0 = w_scale[:, None, None] * problem.base_w[None]
    a0 = a_scale[:, None] * problem.base_a[None]
    return W0, a0


# ----------------------------------------------------------------------------------------------
# Training step on a group of configurations
# ----------------------------------------------------------------------------------------------


class GroupWorkspace:
    """Preallocated buffers for one group of ``g`` configurations (avoids temporaries).

    The n × h activations are stored transposed, neuron-major (``g × h × n``): the forward
    product ``W Xᵀ`` and the backward product ``(D∘r)ᵀ X`` are then faster in OpenBLAS
    than with the sample-major layout (measured 48 vs 42 GFLOP/s on one core for the
    forward product), and the residual broadcasts along the contiguous axis.
    """

    def __init__(self, n: int, h: int, d: int, g: int, dtype: np.dtype) -> None:
        self.g = g
        self.Z = np.empty((g, h, n), dtype)  # pre-activations Zᵀ, then σ(Z)ᵀ
        self.D = np.empty((g, h, n), dtype)  # σ'(Z)ᵀ, then (σ'(Z) ∘ r)ᵀ
        self.mask = np.empty((g, h, n), np.bool_)
        self.f = np.empty((g, n), dtype)
        self.P = np.empty((g, h, d), dtype)
        self.tmp = np.empty((g, h, d), dtype)


def group_gradients(X: np.ndarray, XT: np.ndarray, y: np.ndarray, W: np.ndarray,
                    a: np.ndarray, leak: np.ndarray, ws: GroupWorkspace
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Residuals and the two factors of the gradient for ``g`` configurations.

    ``X`` (n, d) and its contiguous transpose ``XT`` (d, n); ``W`` (g, h, d) and ``a`` (g, h)
    C-contiguous; ``leak`` (g,). Returns ``r`` (g, n), ``P`` (g, h, d) with rows
    ``ξ_k = Xᵀ D_k r`` and ``W·P`` (g, h) ``= w_kᵀ ξ_k``; the gradients are
    ``∇_W L = (2/n) a ∘ P`` and ``∇_a L = (2/n) W·P`` (module docstring). The arrays
    returned are views of the workspace.

    Matrix products are issued per configuration with identical shapes and contiguous
    operands (so their bits cannot depend on the batch); elementwise passes and the
    contiguous last-axis reductions run over the whole group at once.
    """
    g = W.shape[0]
    if ws.g != g:
        raise ValueError("workspace sized for a different group")
    Z, D, f, P = ws.Z, ws.D, ws.f, ws.P
    for b in range(g):
        np.matmul(W[b], XT, out=Z[b])  # forward product (W Xᵀ), h × n
    if not np.any(leak):
        np.greater_equal(Z, 0, out=D)  # σ' ∈ {0, 1}
    else:
        np.greater_equal(Z, 0, out=ws.mask)
        np.copyto(D, np.broadcast_to(leak.astype(D.dtype)[:, None, None], D.shape))
        np.copyto(D, 1, where=ws.mask)
    np.multiply(Z, D, out=Z)  # σ(z) = σ'(z) z
    for b in range(g):
        np.matmul(a[b], Z[b], out=f[b])
    r = np.subtract(f, y, out=f)
    np.multiply(D, r[:, None, :], out=D)
    for b in range(g):
        np.matmul(D[b], X, out=P[b])  # backward product ((D∘r)ᵀ X), h × d
    np.multiply(W, P, out=ws.tmp)
    wp = ws.tmp.sum(axis=2)
    return r, P, wp


# ----------------------------------------------------------------------------------------------
# Empirical NTK and kernel distance (SPEC §A3 "NTK"; issue item 5)
# ----------------------------------------------------------------------------------------------


def features(X: np.ndarray, W: np.ndarray, a: np.ndarray, leak: float
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``Z = X Wᵀ``, ``A = σ(Z)`` and ``G = σ'(Z) ∘ a`` (all n × h) for one configuration."""
    Z = X @ W.T
    Dp = np.where(Z >= 0, 1.0, leak)
    return Z, Z * Dp, Dp * a


def ntk_dense(X: np.ndarray, W: np.ndarray, a: np.ndarray, leak: float) -> np.ndarray:
    """Closed-form empirical NTK over both layers, ``η = 1`` (SPEC §A3, issue item 5):

    ``K = σ(XWᵀ) σ(XWᵀ)ᵀ + (X Xᵀ) ∘ (G Gᵀ)``, ``G_ik = a_k σ'(w_kᵀ x_i)``. Equals ``J Jᵀ``
    for the Jacobian ``J`` of ``f(X)`` with respect to ``(a, W)``.
    """
    _, A, G = features(X, W, a, leak)
    return A @ A.T + (X @ X.T) * (G @ G.T)


def _panel_rows(n: int) -> int:
    """Rows per upper-triangular panel: ~512 KiB panels (64 rows at n = 1000, the fastest of
    32…1000 measured: 4.6 ms against 5.8 ms at 32 rows and 7–10 ms at 128 or more)."""
    return int(max(16, min(n, 65536 // max(n, 1))))


def ntk_panels(A: np.ndarray, G: np.ndarray, C_panels: list[np.ndarray]
               ) -> Iterator[tuple[int, np.ndarray]]:
    """The upper-triangular row panels ``K[i0:i1, i0:]`` of the NTK, never the whole matrix.

    ``C_panels`` are the matching panels of ``X Xᵀ`` (see :func:`gram_panels`).
    """
    n = A.shape[0]
    nb = _panel_rows(n)
    for p, i0 in enumerate(range(0, n, nb)):
        i1 = min(i0 + nb, n)
        K = A[i0:i1] @ A[i0:].T
        GG = G[i0:i1] @ G[i0:].T
        GG *= C_panels[p]
        K += GG
        yield i0, K


def gram_panels(X: np.ndarray) -> list[np.ndarray]:
    """Upper-triangular row panels of ``X Xᵀ`` matching :func:`ntk_panels`."""
    n = X.shape[0]
    nb = _panel_rows(n)
    return [X[i0:min(i0 + nb, n)] @ X[i0:].T for i0 in range(0, n, nb)]


def panel_inner(P: np.ndarray, Q: np.ndarray, i0: int, i1: int) -> float:
    """``Σ`` over the full symmetric matrix of ``P∘Q`` from one upper panel (rows i0:i1).

    The panel holds the diagonal block (counted once) and the block right of it (counted
    twice, for its mirror image): ``2 ⟨P, Q⟩ − ⟨P_diag, Q_diag⟩``, with ``vdot`` on the
    contiguous panel (slicing off the diagonal block first would copy the panel).
    """
    m = i1 - i0
    full = float(np.vdot(P, Q))
    diag = float(np.vdot(P[:, :m], Q[:, :m]))
    return 2.0 * full - diag


def kernel_distance_from(inner: float, norm0_sq: float, normt_sq: float) -> float:
    """``S(0,t) = 1 − ⟨K0,Kt⟩_F / (‖K0‖_F ‖Kt‖_F)`` clipped to [0, 1] (rounding only).

    Written as ``1 − ⟨K0,Kt⟩ / √(‖K0‖²‖Kt‖²)`` so that ``S(0,0)`` is exactly 0 (IEEE:
    ``√(fl(x²)) = x``).
    """
    if not (np.isfinite(inner) and np.isfinite(norm0_sq) and np.isfinite(normt_sq)):
        return float("nan")
    denom = np.sqrt(norm0_sq * normt_sq)
    if denom == 0.0:
        return float("nan")
    return float(min(1.0, max(0.0, 1.0 - inner / denom)))
