"""The compiled training loop of the two-layer model (docs/two-layer.md), in numba.

Private helper of :mod:`richlazy_cli.models.two_layer._kernels`, which imports it only when a
run trains (numba and its compiled-code cache are then loaded once per process). Pure
numerics, no I/O. Notation of that module: ``W`` (g, h, d) and ``a`` (g, h) are the parameters
of a group of ``g`` configurations; ``X`` (n, d) and ``XT = Xᵀ`` (d, n) are C-contiguous.

One gradient-descent step (:func:`gradient_pass`, then :func:`descend`) sweeps the samples in
blocks of ``nb`` (:data:`SAMPLE_BLOCK`). For each block ``b`` it computes

* the forward product ``Z_b = W X_bᵀ`` (g h × nb, :func:`forward_block`);
* the residuals ``r = f(x) − y`` with ``f = Σ_k a_k σ(z_k)``, the loss ``(1/n) Σ r²`` summed in
  float64, and the backward factor ``D_b = σ'(Z_b) ∘ r``, written over ``Z_b``;
* the backward product ``P += D_b X_b`` (g h × d, :func:`backward_block`), so that row
  ``c h + k`` of ``P`` ends as ``ξ_k = Xᵀ D_k r`` of docs/two-layer.md, eq. (4), for configuration
  ``c``;

and then the update ``a_k ← a_k − κ w_k·ξ_k``, ``w_k ← w_k − κ a_k ξ_k`` with ``κ = lr_eff 2/n``
(``∂L/∂w_k = (2/n) a_k ξ_k``, ``∂L/∂a_k = (2/n) w_k·ξ_k``). :func:`run_steps` repeats steps
without returning to Python.

Why blocks of samples: products of this size (g h × d × nb with nb ≈ 40) run in OpenBLAS's
small-matrix kernels, which do not pack their operands: at the paper's size they run faster
than the whole products, which OpenBLAS repacks (Xᵀ twice, D once) at every call (README,
"Performance"; ``bench/two_layer.py``); and the block's
pre-activations stay in cache between the products and the pass. The products are called
straight from BLAS (``dgemm``/``sgemm`` of SciPy's ``cython_blas``; ``threadpoolctl`` limits
its threads like NumPy's BLAS: this module imports it first, so that a limit set afterwards
covers it), since the backward product accumulates (``beta = 1``), which ``np.dot`` cannot.

Each configuration's numbers are computed in the same order whatever the group: stacked
products (all the group's ``g h`` rows in one call) are used only where
:func:`._kernels.stacking_is_exact` has found them bitwise equal to
per-configuration ones, and the passes loop over configurations.
"""

from __future__ import annotations

import llvmlite.binding as llvm
import numpy as np
import scipy.linalg.cython_blas  # noqa: F401  (load the BLAS called below, see above)
from numba import njit, types
from numba.extending import get_cython_function_address

SAMPLE_BLOCK = 40
"""Samples per block: the fastest of 32 to 100 in timings at the paper's size, where blocks
beat whole products both in groups of 4 and for single configurations."""

# BLAS's Fortran gemm from SciPy, bound by symbol name (not as ctypes pointers, which numba
# cannot cache): the names are registered with LLVM before any compiled code is loaded.
_GEMM_SIGNATURE = types.void(*([types.voidptr] * 13))
for _name in ("dgemm", "sgemm"):
    llvm.add_symbol(f"richlazy_scipy_{_name}",
                    get_cython_function_address("scipy.linalg.cython_blas", _name))
_DGEMM = types.ExternalFunction("richlazy_scipy_dgemm", _GEMM_SIGNATURE)
_SGEMM = types.ExternalFunction("richlazy_scipy_sgemm", _GEMM_SIGNATURE)
_NO_TRANSPOSE = np.frombuffer(b"N", dtype=np.uint8)


@njit(cache=True, nogil=True)
def gemm(m: int, n: int, k: int, A: np.ndarray, offa: int, lda: int, B: np.ndarray, offb: int,
         ldb: int, beta: float, C: np.ndarray, offc: int, ldc: int, ints: np.ndarray,
         scal: np.ndarray) -> None:
    """BLAS ``C ← A B + β C`` in column-major terms (``C`` m × n, ``A`` m × k, ``B`` k × n),
    the matrices starting ``off*`` elements into the C-contiguous arrays, with leading
    dimensions ``ld*``: ``dgemm`` or ``sgemm`` by the dtype. ``ints`` (int32, 6) and ``scal``
    (the arrays' dtype, 2) hold the arguments BLAS takes by reference."""
    ints[0] = m
    ints[1] = n
    ints[2] = k
    ints[3] = lda
    ints[4] = ldb
    ints[5] = ldc
    scal[0] = 1.0
    scal[1] = beta
    args = (_NO_TRANSPOSE.ctypes, _NO_TRANSPOSE.ctypes, ints.ctypes, ints[1:].ctypes,
            ints[2:].ctypes, scal.ctypes, A.ravel()[offa:].ctypes, ints[3:].ctypes,
            B.ravel()[offb:].ctypes, ints[4:].ctypes, scal[1:].ctypes,
            C.ravel()[offc:].ctypes, ints[5:].ctypes)
    # an ExternalFunction is callable only in compiled code (numba types the call there); its
    # stub describes the Python-level call that builds a signature
    if scal.itemsize == 8:
        _DGEMM(*args)  # type: ignore[call-overload]
    else:
        _SGEMM(*args)  # type: ignore[call-overload]


@njit(cache=True, nogil=True)
def forward_block(XT: np.ndarray, W: np.ndarray, j0: int, m: int, Zb: np.ndarray,
                  stacked: bool, ints: np.ndarray, scal: np.ndarray) -> None:
    """``Zb[:, :m] = W Xᵀ[:, j0:j0+m]`` (rows ``c h + k``; ``Zb`` is g h × nb): one product of
    all ``g h`` rows if ``stacked``, else one per configuration."""
    g, h, d = W.shape
    n = XT.shape[1]
    nb = Zb.shape[1]
    if stacked:
        gemm(m, g * h, d, XT, j0, n, W, 0, d, 0.0, Zb, 0, nb, ints, scal)
    else:
        for c in range(g):
            gemm(m, h, d, XT, j0, n, W, c * h * d, d, 0.0, Zb, c * h * nb, nb, ints, scal)


@njit(cache=True, nogil=True)
def backward_block(X: np.ndarray, Zb: np.ndarray, j0: int, m: int, P: np.ndarray, h: int,
                   first: bool, stacked: bool, ints: np.ndarray, scal: np.ndarray) -> None:
    """``P = D X[j0:j0+m]`` if ``first``, else ``P += D X[j0:j0+m]`` (``D`` = ``Zb[:, :m]``,
    ``P`` is g h × d): one product if ``stacked``, else one per configuration (``h`` rows)."""
    gh, d = P.shape
    nb = Zb.shape[1]
    beta = 0.0 if first else 1.0
    if stacked:
        gemm(d, gh, m, X, j0 * d, d, Zb, 0, nb, beta, P, 0, d, ints, scal)
    else:
        for row in range(0, gh, h):
            gemm(d, h, m, X, j0 * d, d, Zb, row * nb, nb, beta, P, row * d, d, ints, scal)


@njit(cache=True, nogil=True)
def gradient_pass(X: np.ndarray, XT: np.ndarray, y: np.ndarray, W: np.ndarray, a: np.ndarray,
                  leak: np.ndarray, stacked: bool, backward: bool, Zb: np.ndarray,
                  r: np.ndarray, P: np.ndarray, loss: np.ndarray, ints: np.ndarray,
                  scal: np.ndarray) -> None:
    """``loss[c] = (1/n) Σ_i r_i²`` and, if ``backward``, ``P`` (rows ``ξ_k``), block by block.

    Per block and configuration: ``r_i = Σ_k a_k σ(z_ki) − y_i`` accumulated over neurons in
    order in the training dtype, ``σ(z) = z`` for ``z ≥ 0`` else ``γ z``; ``Σ r_i²`` added to
    the loss in float64, block after block; then ``z_ki ← σ'(z_ki) r_i`` in place
    (``σ'(z) = 1`` for ``z ≥ 0``, else ``γ``) and the block's backward product.
    """
    g, h, _ = W.shape
    n = X.shape[0]
    nb = Zb.shape[1]
    for c in range(g):
        loss[c] = 0.0
    for j0 in range(0, n, nb):
        m = min(nb, n - j0)
        forward_block(XT, W, j0, m, Zb, stacked, ints, scal)
        for c in range(g):
            gam = leak[c]
            r[:m] = 0.0
            for k in range(h):
                ak = a[c, k]
                zk = Zb[c * h + k]
                for i in range(m):
                    z = zk[i]
                    r[i] += ak * (z if z >= 0 else gam * z)
            total = 0.0
            for i in range(m):
                ri = r[i] - y[j0 + i]
                r[i] = ri
                total += np.float64(ri) * np.float64(ri)
            loss[c] += total
            if backward:
                for k in range(h):
                    zk = Zb[c * h + k]
                    for i in range(m):
                        zk[i] = r[i] if zk[i] >= 0 else gam * r[i]
        if backward:
            backward_block(X, Zb, j0, m, P, h, j0 == 0, stacked, ints, scal)
    for c in range(g):
        loss[c] /= n


@njit(cache=True, nogil=True)
def descend(W: np.ndarray, a: np.ndarray, P: np.ndarray, coef: np.ndarray,
            frozen: np.ndarray) -> None:
    """One GD step in place for the configurations ``c`` not ``frozen``:
    ``a_k ← a_k − κ_c (w_k·ξ_k)`` and ``w_k ← w_k − (κ_c a_k) ξ_k`` (old ``a_k`` and ``w_k``),
    with ``ξ_k`` row ``c h + k`` of ``P`` and ``κ_c = lr_eff 2/n``.

    ``w_k·ξ_k`` is summed in four interleaved partial sums over ``j ≡ 0, 1, 2, 3 (mod 4)``,
    added as ``(s0 + s1) + (s2 + s3)`` (independent chains instead of one chain of ``d`` adds).
    """
    g, h, d = W.shape
    d4 = d - d % 4
    for c in range(g):
        if frozen[c]:
            continue
        for k in range(h):
            wk = W[c, k]
            xk = P[c * h + k]
            s0 = s1 = s2 = s3 = wk[0] * 0
            for j in range(0, d4, 4):
                s0 += wk[j] * xk[j]
                s1 += wk[j + 1] * xk[j + 1]
                s2 += wk[j + 2] * xk[j + 2]
                s3 += wk[j + 3] * xk[j + 3]
            for j in range(d4, d):
                s0 += wk[j] * xk[j]
            cak = coef[c] * a[c, k]
            a[c, k] -= coef[c] * ((s0 + s1) + (s2 + s3))
            for j in range(d):
                wk[j] -= xk[j] * cak


@njit(cache=True, nogil=True)
def run_steps(X: np.ndarray, XT: np.ndarray, y: np.ndarray, W: np.ndarray, a: np.ndarray,
              leak: np.ndarray, coef: np.ndarray, loss0: np.ndarray, stacked: bool,
              t_begin: int, t_end: int, steps: int, factor: float, Zb: np.ndarray,
              r: np.ndarray, P: np.ndarray, loss: np.ndarray, bad: np.ndarray,
              ints: np.ndarray, scal: np.ndarray) -> int:
    """Steps ``t_begin … t_end − 1`` of full-batch GD on a group, in place on ``W`` and ``a``.

    Step ``t`` evaluates the loss at ``θ_t`` (stored in ``loss0`` when ``t = 0``), marks in
    ``bad`` the configurations whose loss is non-finite or above ``factor × loss0``, then, if
    ``t < steps``, updates the others to ``θ_{t+1}``. Returns the next step: ``t_end``, or
    ``t + 1`` right after a step that marked a configuration (the caller removes it). A marked
    configuration's rows of the products are its own: the others' numbers do not depend on
    them.
    """
    g = W.shape[0]
    for t in range(t_begin, t_end):
        gradient_pass(X, XT, y, W, a, leak, stacked, t < steps, Zb, r, P, loss, ints, scal)
        any_bad = False
        for c in range(g):
            if t == 0:
                loss0[c] = loss[c]
            bad[c] = not np.isfinite(loss[c]) or loss[c] > factor * loss0[c]
            any_bad = any_bad or bad[c]
        if t < steps:
            descend(W, a, P, coef, bad)
        if any_bad:
            return t + 1
    return t_end
