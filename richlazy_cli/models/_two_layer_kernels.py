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

Batching: configurations of one seed share ``X``. Each group of configurations issues its two
matrix products *stacked* (all the group's neurons in one product, which runs near the
machine's GEMM rate where per-configuration products of this shape reach 80-90% of it), but
only where that is bitwise safe: OpenBLAS picks micro-kernels and reduction orders by shape,
and for some shapes a configuration's block of a stacked product differs in its last bits
from the product of that configuration alone. :func:`stacking_is_exact` checks this once per
shape (n, d, h, group size, dtype) on random data, before training; where it fails the group
issues one product per configuration, always with the same shapes and contiguous operands.
The O(n h) elementwise work between the products is two fused passes compiled by numba
(:func:`forward_output`, :func:`backward_factor`), each configuration's numbers computed in
the same order whatever the group. The model's tests check alone-versus-batch bitwise
identity for both dtypes and two sizes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

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


def _forward_output(Z: np.ndarray, a: np.ndarray, leak: np.ndarray, f: np.ndarray) -> None:
    """``f[c, i] = Σ_k a[c, k] σ(Z[c, k, i])`` with ``σ(z) = z`` for ``z ≥ 0``, else ``γ z``.

    One pass over the pre-activations (neuron-major), accumulating over neurons in order.
    """
    g, h, n = Z.shape
    for c in range(g):
        gam = leak[c]
        for i in range(n):
            f[c, i] = 0.0
        for k in range(h):
            ak = a[c, k]
            for i in range(n):
                z = Z[c, k, i]
                f[c, i] += ak * (z if z >= 0 else gam * z)


def _backward_factor(Z: np.ndarray, r: np.ndarray, leak: np.ndarray, Dr: np.ndarray) -> None:
    """``Dr[c, k, i] = σ'(Z[c, k, i]) r[c, i]`` with ``σ'(z) = 1`` for ``z ≥ 0``, else ``γ``."""
    g, h, n = Z.shape
    for c in range(g):
        gam = leak[c]
        for k in range(h):
            for i in range(n):
                Dr[c, k, i] = r[c, i] if Z[c, k, i] >= 0 else gam * r[c, i]


def _descend(W: np.ndarray, a: np.ndarray, P: np.ndarray, coef: np.ndarray,
             keep: np.ndarray) -> None:
    """One GD step in place for the configurations ``c`` with ``keep[c]``:
    ``a_k ← a_k − coef_c (w_k·ξ_k)`` and ``w_k ← w_k − (coef_c a_k) ξ_k`` (old ``a_k``, old
    ``w_k``), with ``ξ_k`` the rows of ``P`` and ``coef_c = lr_eff 2/n``."""
    g, h, d = W.shape
    for c in range(g):
        if not keep[c]:
            continue
        for k in range(h):
            wp = W[c, k, 0] * P[c, k, 0]
            for j in range(1, d):
                wp += W[c, k, j] * P[c, k, j]
            cak = coef[c] * a[c, k]
            a[c, k] -= coef[c] * wp
            for j in range(d):
                W[c, k, j] -= P[c, k, j] * cak


_COMPILED: dict[str, Any] = {}


def _compiled(name: str) -> Any:
    """The numba-compiled version of a kernel above (compiled on first use, cached on disk:
    numba is imported only by runs that train)."""
    if name not in _COMPILED:
        from numba import njit

        _COMPILED[name] = njit(cache=True, nogil=True)(globals()[name])
    return _COMPILED[name]


def forward_output(Z: np.ndarray, a: np.ndarray, leak: np.ndarray, f: np.ndarray) -> None:
    _compiled("_forward_output")(Z, a, leak, f)


def backward_factor(Z: np.ndarray, r: np.ndarray, leak: np.ndarray, Dr: np.ndarray) -> None:
    _compiled("_backward_factor")(Z, r, leak, Dr)


def descend(W: np.ndarray, a: np.ndarray, P: np.ndarray, coef: np.ndarray,
            keep: np.ndarray) -> None:
    _compiled("_descend")(W, a, P, coef, keep)


descend.__doc__ = _descend.__doc__
forward_output.__doc__ = _forward_output.__doc__
backward_factor.__doc__ = _backward_factor.__doc__

_STACKING_EXACT: dict[tuple[int, int, int, int, str], bool] = {}


def stacking_is_exact(n: int, d: int, h: int, g: int, dtype: np.dtype) -> bool:
    """Whether stacking ``g`` configurations into one product changes no bit of any of them.

    Compares, on random data of the training shapes, each configuration's block of the two
    stacked products (``W Xᵀ`` with ``W`` of ``g h`` rows; ``(D∘r)ᵀ X`` likewise) with the
    product of that block alone. BLAS chooses kernels by shape, not by values, so the answer
    holds for these shapes, under the one BLAS thread that training runs with (the check holds
    BLAS at one thread itself: with two, OpenBLAS splits the products differently).
    """
    key = (n, d, h, g, np.dtype(dtype).str)
    if key not in _STACKING_EXACT:
        with threadpool_limits(limits=1, user_api="blas"):
            _STACKING_EXACT[key] = _stacking_is_exact(n, d, h, g, np.dtype(dtype))
    return _STACKING_EXACT[key]


def _stacking_is_exact(n: int, d: int, h: int, g: int, dtype: np.dtype) -> bool:
    gen = np.random.default_rng(20240229)
    X = gen.standard_normal((n, d)).astype(dtype)
    XT = np.ascontiguousarray(X.T)
    W = gen.standard_normal((g * h, d)).astype(dtype)
    Dr = gen.standard_normal((g * h, n)).astype(dtype)
    Z, P = W @ XT, Dr @ X
    return g == 1 or all(
        np.array_equal(Z[c * h : (c + 1) * h], W[c * h : (c + 1) * h] @ XT)
        and np.array_equal(P[c * h : (c + 1) * h], Dr[c * h : (c + 1) * h] @ X)
        for c in range(g)
    )


class GroupWorkspace:
    """Preallocated buffers for one group of ``g`` configurations (avoids temporaries).

    The n × h activations are stored transposed, neuron-major (``g × h × n``): the forward
    product ``W Xᵀ`` and the backward product ``(D∘r)ᵀ X`` are then faster in OpenBLAS
    than with the sample-major layout, the fused passes run along the contiguous axis, and
    the group's blocks stack into one ``g h × n`` matrix. ``stacked`` says whether the group
    issues its products stacked (:func:`stacking_is_exact`).
    """

    def __init__(self, n: int, h: int, d: int, g: int, dtype: np.dtype) -> None:
        self.g = g
        self.Z = np.empty((g, h, n), dtype)  # pre-activations Zᵀ
        self.D = np.empty((g, h, n), dtype)  # (σ'(Z) ∘ r)ᵀ
        self.f = np.empty((g, n), dtype)
        self.P = np.empty((g, h, d), dtype)
        self.stacked = g > 1 and stacking_is_exact(n, d, h, g, np.dtype(dtype))


def group_gradients(X: np.ndarray, XT: np.ndarray, y: np.ndarray, W: np.ndarray,
                    a: np.ndarray, leak: np.ndarray, ws: GroupWorkspace
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Residuals and the gradient factor for ``g`` configurations.

    ``X`` (n, d) and its contiguous transpose ``XT`` (d, n); ``W`` (g, h, d) and ``a`` (g, h)
    C-contiguous; ``leak`` (g,) in the dtype of ``W``. Returns ``r`` (g, n) and ``P``
    (g, h, d) with rows ``ξ_k = Xᵀ D_k r``; the gradients are ``∇_W L = (2/n) a ∘ P`` and
    ``∇_a L = (2/n) W·P`` (module docstring; :func:`descend` applies them). The arrays
    returned are views of the workspace.
    """
    g, h, d = W.shape
    n = X.shape[0]
    if ws.g != g:
        raise ValueError("workspace sized for a different group")
    Z, Dr, f, P = ws.Z, ws.D, ws.f, ws.P
    if ws.stacked:
        np.matmul(W.reshape(g * h, d), XT, out=Z.reshape(g * h, n))  # forward, all at once
    else:
        for b in range(g):
            np.matmul(W[b], XT, out=Z[b])  # forward product (W Xᵀ), h × n
    forward_output(Z, a, leak, f)
    r = np.subtract(f, y, out=f)
    backward_factor(Z, r, leak, Dr)
    if ws.stacked:
        np.matmul(Dr.reshape(g * h, n), X, out=P.reshape(g * h, d))
    else:
        for b in range(g):
            np.matmul(Dr[b], X, out=P[b])  # backward product ((D∘r)ᵀ X), h × d
    return r, P


# ----------------------------------------------------------------------------------------------
# Empirical NTK and kernel distance (SPEC §A3 "NTK"; issue item 5)
# ----------------------------------------------------------------------------------------------


def features(X: np.ndarray, W: np.ndarray, a: np.ndarray, leak: float
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``Z = X Wᵀ``, ``A = σ(Z)`` and ``G = σ'(Z) ∘ a`` (all n × h, in the dtype of ``X``
    and ``W``) for one configuration."""
    Z = X @ W.T
    one = Z.dtype.type
    Dp = np.where(Z >= 0, one(1), one(leak))
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
