"""Numerical kernels of the two-layer teacher-student model (docs/two-layer.md).

Private helper of :mod:`richlazy_cli.models.two_layer.model`; pure numerics, no I/O. The training
loop itself is compiled by numba in :mod:`._jit`.

Conventions (Kunin et al. 2024, App. D.1; docs/two-layer.md, eqs. (1)–(4)):

* student ``f(x) = Σ_k a_k σ(w_kᵀx)`` with ``σ(z) = max(z, γ z)`` (``γ`` = ``leak`` ∈ [0, 1])
  and ``σ'(0) = 1``;
* loss = mean squared error ``L = (1/n) Σ_i (f(x_i) − y_i)²`` (the authors' code; gradient
  factor ``2/n``), full-batch gradient descent ``θ ← θ − lr_eff ∇L``;
* with ``r = f(X) − y``, ``D = σ'(X Wᵀ)`` (n × h) and ``ξ_k = Xᵀ D_k r``
  (docs/two-layer.md, eq. (4))::

      ∂L/∂w_k = (2/n) a_k ξ_k,        ∂L/∂a_k = (2/n) Σ_i σ(w_kᵀx_i) r_i = (2/n) w_kᵀ ξ_k

  (the second form uses ``σ(z) = σ'(z) z``), so one step costs two matrix products
  (forward ``W Xᵀ``, backward ``(D∘r)ᵀ X``) plus O(n h) elementwise work.

Batching: configurations of one seed share ``X``. Each group of configurations issues its two
matrix products *stacked* (all the group's neurons in one product, which runs near the
machine's GEMM rate where per-configuration products of this shape reach 80-90% of it), but
only where that is bitwise safe: OpenBLAS picks micro-kernels and reduction orders by shape,
and for some shapes a configuration's block of a stacked product differs in its last bits
from the product of that configuration alone. :func:`stacking_is_exact` checks this once per
shape (n, d, h, group size, dtype) on random data, before training; where it fails the group
issues one product per configuration, always with the same shapes and contiguous operands.
A step sweeps the samples in blocks (products small enough for OpenBLAS's unpacked
small-matrix kernels, pre-activations that stay in cache), with the O(n h) elementwise work
fused between the products, each configuration's numbers computed in the same order whatever
the group; a group runs many steps per call (:class:`ConfigGroup`, :mod:`._jit`).
The model's tests check alone-versus-batch bitwise identity for both dtypes and two sizes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from ...numerics.kernel_distance import kernel_distance
from ..base import rng

# ----------------------------------------------------------------------------------------------
# Initialisation and data (docs/two-layer.md, eqs. (1)–(2))
# ----------------------------------------------------------------------------------------------


def alpha_of(tau: np.ndarray | float, delta: np.ndarray | float) -> np.ndarray:
    """The layer-ratio ``α(τ, δ)`` of docs/two-layer.md, eq. (2): ``α² = ½(√(4 + q²) − q)``,
    ``q = δ/τ²``.

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
                 symmetrize: bool, data: str = "teacher", xor_labels: str = "smooth",
                 arrays: dict[str, np.ndarray] | None = None) -> Problem:
    """Teacher, data and base initialisation of one seed (Kunin et al. 2024, App. D.1).

    Streams: ``rng(seed, "teacher")`` (``W*`` unit rows, ``a* = ±1``), ``rng(seed, "data")``
    (training inputs), ``rng(seed, "test")`` (test inputs), ``rng(seed, "init")`` (base
    directions ``u_k`` and signs ``ε_k``). Labels are the noiseless ReLU teacher
    ``y = relu(X W*ᵀ) a*``. With ``symmetrize`` (``h`` even) the base is ``W = [U; U]``,
    ``a = [ε; −ε]`` so that the student output is exactly 0 at initialisation; otherwise ``h``
    independent directions with random signs.

    ``data`` replaces the teacher's inputs and labels (docs/two-layer.md, eq. (13): ``xor`` (d = 2)
    draws angles ``θ ~ Unif[0, 2π)`` from the same streams, ``x = (cos θ, sin θ)`` and
    ``y = 2x₁x₂ = sin 2θ`` (``xor_labels = smooth``) or ``sgn(x₁x₂)`` (``sign``); ``npz`` takes
    ``X``, ``y``, ``X_test``, ``y_test`` from ``arrays``. The teacher is drawn all the same.
    """
    gt = rng(seed, "teacher")
    teacher_w = sphere(gt, k, d)
    teacher_a = gt.choice(np.array([-1.0, 1.0]), size=k)
    if data == "xor":
        X, X_test = (np.stack([np.cos(th), np.sin(th)], axis=1) for th in
                     (rng(seed, s).uniform(0.0, 2.0 * np.pi, m)
                      for s, m in (("data", n), ("test", n_test))))
        label = (lambda Z: 2.0 * Z[:, 0] * Z[:, 1]) if xor_labels == "smooth" else (
            lambda Z: np.sign(Z[:, 0] * Z[:, 1]))
        y, y_test = label(X), label(X_test)
    elif data == "npz":
        assert arrays is not None
        X, y, X_test, y_test = (arrays[name] for name in ("X", "y", "X_test", "y_test"))
    else:
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
# Training a group of configurations
# ----------------------------------------------------------------------------------------------


def jit() -> Any:
    """The compiled training loop (:mod:`._jit`): imported on first use, so that only
    runs that train load numba (compiled code is cached on disk). Import it before setting a
    BLAS thread limit: it loads the BLAS its products call."""
    from . import _jit as _two_layer_jit

    return _two_layer_jit


_STACKING_EXACT: dict[tuple[int, int, int, int, str], bool] = {}


def stacking_is_exact(n: int, d: int, h: int, g: int, dtype: np.dtype) -> bool:
    """Whether stacking ``g`` configurations into one product changes no bit of any of them.

    Compares, on random data of the training shapes, the stacked forward product ``W Xᵀ``
    (``W`` of ``g h`` rows) and backward product ``Xᵀ Dᵀ`` with the products of each
    configuration alone, through the same calls as training. BLAS chooses kernels by shape,
    not by values, so the answer holds for these shapes, under the one BLAS thread that
    training runs with (the check holds BLAS at one thread itself: with two, OpenBLAS splits
    the products differently).
    """
    key = (n, d, h, g, np.dtype(dtype).str)
    if key not in _STACKING_EXACT:
        jit()  # load its BLAS before limiting the threads
        with threadpool_limits(limits=1, user_api="blas"):
            _STACKING_EXACT[key] = g == 1 or _stacking_is_exact(n, d, h, g, np.dtype(dtype))
    return _STACKING_EXACT[key]


def _stacking_is_exact(n: int, d: int, h: int, g: int, dtype: np.dtype) -> bool:
    gen = np.random.default_rng(20240229)
    X = gen.standard_normal((n, d)).astype(dtype)
    XT = np.ascontiguousarray(X.T)
    W = gen.standard_normal((g, h, d)).astype(dtype)
    D = gen.standard_normal((g * h, n)).astype(dtype)
    out = []
    for stacked in (True, False):
        ws = GroupWorkspace(n, h, d, g, dtype, stacked=stacked)
        Z = np.empty((g * h, n), dtype)
        nb = ws.Zb.shape[1]
        for j0 in range(0, n, nb):  # the blocks of a training step, with D drawn at random
            m = min(nb, n - j0)
            jit().forward_block(XT, W, j0, m, ws.Zb, stacked, ws.ints, ws.scal)
            Z[:, j0:j0 + m] = ws.Zb[:, :m]
            ws.Zb[:, :m] = D[:, j0:j0 + m]
            jit().backward_block(X, ws.Zb, j0, m, ws.P, h, j0 == 0, stacked, ws.ints, ws.scal)
        out.append((Z, ws.P))
    return all(np.array_equal(x, y) for x, y in zip(*out, strict=True))


class GroupWorkspace:
    """Preallocated buffers for one group of ``g`` configurations (no temporaries per step).

    One block of pre-activations ``Zb`` (g h × nb, neuron-major: the pass runs along the
    contiguous axis, and the group's rows stack into one matrix), the block's residuals, the
    backward product ``P`` (g h × d) and BLAS's by-reference arguments. ``stacked`` says
    whether the group issues its products stacked (:func:`stacking_is_exact`), unless given.
    """

    def __init__(self, n: int, h: int, d: int, g: int, dtype: np.dtype,
                 stacked: bool | None = None) -> None:
        nb = min(n, jit().SAMPLE_BLOCK)
        self.Zb = np.empty((g * h, nb), dtype)  # pre-activations, then σ'(Z) ∘ r
        self.r = np.empty(nb, dtype)
        self.P = np.empty((g * h, d), dtype)  # rows ξ_k
        self.loss = np.empty(g)
        self.bad = np.zeros(g, dtype=np.bool_)
        self.ints = np.zeros(6, dtype=np.int32)
        self.scal = np.zeros(2, dtype=dtype)
        if stacked is None:
            stacked = g > 1 and stacking_is_exact(n, d, h, g, np.dtype(dtype))
        self.stacked = stacked


class ConfigGroup:
    """Configurations of one seed that train together: their state and per-config constants.

    ``idx`` are the configurations' positions in the batch; ``W`` (g, h, d), ``a`` (g, h),
    ``leak``, ``coef`` (``lr_eff 2/n``) in the training dtype; ``loss0`` the initial losses;
    ``n`` training samples. Workspaces are shared between groups of the same size through
    ``spaces`` (groups run one after another).
    """

    def __init__(self, idx: np.ndarray, W: np.ndarray, a: np.ndarray, leak: np.ndarray,
                 coef: np.ndarray, n: int, spaces: dict[int, GroupWorkspace]) -> None:
        self.idx = idx
        self.n = n
        self.W = np.ascontiguousarray(W)
        self.a = np.ascontiguousarray(a)
        self.leak = np.ascontiguousarray(leak, dtype=W.dtype)
        self.coef = np.ascontiguousarray(coef, dtype=W.dtype)
        self.loss0 = np.full(idx.size, np.nan)
        self.spaces = spaces

    @property
    def size(self) -> int:
        return int(self.idx.size)

    def _workspace(self) -> GroupWorkspace:
        g = self.size
        if g not in self.spaces:
            _, h, d = self.W.shape
            self.spaces[g] = GroupWorkspace(self.n, h, d, g, self.W.dtype)
        return self.spaces[g]

    def advance(self, X: np.ndarray, XT: np.ndarray, y: np.ndarray, t_begin: int, t_end: int,
                steps: int, factor: float) -> tuple[int, np.ndarray]:
        """Run steps ``t_begin … t_end − 1`` (:func:`._jit.run_steps`) until done or
        a configuration diverges, which is then removed from the group, frozen at the ``θ_t``
        of its step. Returns the next step and the batch positions removed."""
        ws = self._workspace()
        t = jit().run_steps(X, XT, y, self.W, self.a, self.leak, self.coef, self.loss0,
                            ws.stacked, t_begin, t_end, steps, factor, ws.Zb, ws.r, ws.P,
                            ws.loss, ws.bad, ws.ints, ws.scal)
        bad = ws.bad.copy()
        if not bad.any():
            return t, self.idx[:0]
        removed = self.idx[bad]
        keep = ~bad
        self.idx, self.W, self.a = self.idx[keep], self.W[keep], self.a[keep]
        self.leak, self.coef, self.loss0 = self.leak[keep], self.coef[keep], self.loss0[keep]
        return t, removed


def group_gradients(X: np.ndarray, y: np.ndarray, W: np.ndarray, a: np.ndarray,
                    leak: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Losses (g,) and ``ξ`` (g, h, d), rows ``ξ_k = Xᵀ D_k r``, of ``g`` configurations,
    through the compiled pass and products that training uses (for tests).

    The gradients are ``∇_W L = (2/n) a ∘ ξ`` and ``∇_a L = (2/n) W·ξ`` (module docstring).
    """
    g, h, d = W.shape
    X = np.ascontiguousarray(X)
    ws = GroupWorkspace(X.shape[0], h, d, g, W.dtype)
    jit().gradient_pass(X, np.ascontiguousarray(X.T), y, W, a, leak, ws.stacked, True, ws.Zb,
                        ws.r, ws.P, ws.loss, ws.ints, ws.scal)
    return ws.loss.copy(), ws.P.reshape(g, h, d).copy()


# ----------------------------------------------------------------------------------------------
# Empirical NTK and kernel distance (docs/two-layer.md, eq. (7))
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
    """Closed-form empirical NTK over both layers, ``η = 1`` (docs/two-layer.md, eq. (7)):

    ``K = σ(XWᵀ) σ(XWᵀ)ᵀ + (X Xᵀ) ∘ (G Gᵀ)``, ``G_ik = a_k σ'(w_kᵀ x_i)``. Equals ``J Jᵀ``
    for the Jacobian ``J`` of ``f(X)`` with respect to ``(a, W)``.
    """
    _, A, G = features(X, W, a, leak)
    return A @ A.T + (X @ X.T) * (G @ G.T)


def _panel_rows(n: int) -> int:
    """Rows per upper-triangular panel: ~512 KiB panels (64 rows at n = 1000), which timing at
    the paper's size found faster than narrower or wider ones."""
    return int(max(16, min(n, 65536 // max(n, 1))))


def ntk_panels(A: np.ndarray, G: np.ndarray, C_panels: list[np.ndarray],
               work: np.ndarray | None = None) -> Iterator[tuple[int, np.ndarray]]:
    """The upper-triangular row panels ``K[i0:i1, i0:]`` of the NTK, never the whole matrix.

    ``C_panels`` are the matching panels of ``X Xᵀ`` (see :func:`gram_panels`). With ``work``
    (from :func:`panel_workspace`) each panel is computed into it, valid until the next one:
    fresh 0.5 MiB panels cost more in page faults than in arithmetic. Without it, each panel
    is a new array.
    """
    n = A.shape[0]
    nb = _panel_rows(n)
    for p, i0 in enumerate(range(0, n, nb)):
        i1 = min(i0 + nb, n)
        if work is None:
            K = A[i0:i1] @ A[i0:].T
            GG = G[i0:i1] @ G[i0:].T
        else:
            size = (i1 - i0) * (n - i0)
            K = np.matmul(A[i0:i1], A[i0:].T, out=work[0, :size].reshape(i1 - i0, n - i0))
            GG = np.matmul(G[i0:i1], G[i0:].T, out=work[1, :size].reshape(i1 - i0, n - i0))
        GG *= C_panels[p]
        K += GG
        yield i0, K


def panel_workspace(n: int, dtype: np.dtype) -> np.ndarray:
    """Scratch for :func:`ntk_panels` (two panels of the largest size)."""
    return np.empty((2, _panel_rows(n) * n), dtype)


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


kernel_distance_from = kernel_distance
"""``S(0,t)`` from ``⟨K0,Kt⟩``, ``‖K0‖²`` and ``‖Kt‖²``: the shared
:func:`richlazy_cli.numerics.kernel_distance.kernel_distance` (its older name here)."""
