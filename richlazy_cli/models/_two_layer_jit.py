"""The compiled training loop of the two-layer model (SPEC.md §A3), in numba.

Private helper of :mod:`richlazy_cli.models._two_layer_kernels`, which imports it only when a
run trains (numba and its compiled-code cache are then loaded once per process). Pure
numerics, no I/O. Notation of that module: ``W`` (g, h, d) and ``a`` (g, h) are the parameters
of a group of ``g`` configurations, ``XT = Xᵀ`` (d, n), pre-activations are stored
neuron-major, ``Z`` (g, h, n) with ``Z[c] = W[c] Xᵀ``.

One gradient-descent step is two matrix products, one O(n h) pass and the update:

* forward product ``Z = W Xᵀ`` (:func:`forward_product`);
* one pass (:func:`residual_pass`) for the residual ``r = f(X) − y`` with
  ``f = Σ_k a_k σ(z_k)``, the loss ``(1/n) Σ r²`` summed in float64, and the backward factor
  ``D = σ'(Z) ∘ r``, written over ``Z``;
* backward product ``P = Xᵀ Dᵀ`` (d, g h), column ``c h + k`` is ``ξ_k = Xᵀ D_k r`` of SPEC §A3
  "Dynamics" for configuration ``c`` (:func:`backward_product`);
* the update ``a_k ← a_k − κ w_k·ξ_k``, ``w_k ← w_k − κ a_k ξ_k`` with ``κ = lr_eff 2/n``
  (:func:`descend`; ``∂L/∂w_k = (2/n) a_k ξ_k``, ``∂L/∂a_k = (2/n) w_k·ξ_k``).

:func:`run_steps` repeats them for a range of steps without returning to Python. The products
call BLAS through numba's ``np.dot`` (SciPy's BLAS, whose thread count ``threadpoolctl``
limits like NumPy's: this module imports it first, so that a limit set afterwards covers it).
Each configuration's numbers are computed in the same order whatever the group: stacked
products are used only where :func:`..._two_layer_kernels.stacking_is_exact` has found them
bitwise equal to per-configuration ones, and the passes loop over configurations.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg.cython_blas  # noqa: F401  (load the BLAS numba calls, see above)
from numba import njit


@njit(cache=True, nogil=True)
def forward_product(W: np.ndarray, XT: np.ndarray, Z: np.ndarray, stacked: bool) -> None:
    """``Z[c] = W[c] Xᵀ`` for every configuration: one product of all ``g h`` rows if
    ``stacked``, else one per configuration (always the same shapes and contiguous operands)."""
    g, h, d = W.shape
    n = XT.shape[1]
    if stacked:
        np.dot(W.reshape(g * h, d), XT, Z.reshape(g * h, n))
    else:
        for c in range(g):
            np.dot(W[c], XT, Z[c])


@njit(cache=True, nogil=True)
def backward_product(XT: np.ndarray, D: np.ndarray, P: np.ndarray, scratch: np.ndarray,
                     stacked: bool) -> None:
    """``P[:, c h:(c+1) h] = Xᵀ D[c]ᵀ`` (``P`` is d × g h): one product if ``stacked``, else
    one per configuration into ``scratch`` (d × h), copied into its columns."""
    g, h, n = D.shape
    if stacked:
        np.dot(XT, D.reshape(g * h, n).T, P)
    else:
        for c in range(g):
            np.dot(XT, D[c].T, scratch)
            P[:, c * h:(c + 1) * h] = scratch


@njit(cache=True, nogil=True)
def residual_pass(Z: np.ndarray, a: np.ndarray, leak: np.ndarray, y: np.ndarray,
                  r: np.ndarray, loss: np.ndarray, backward: bool) -> None:
    """Residuals, losses and (if ``backward``) the backward factor, by configuration:

    * ``r[c, i] = Σ_k a[c, k] σ(Z[c, k, i]) − y[i]``, accumulated over neurons in order in
      the training dtype (vectorised along samples);
    * ``loss[c] = (1/n) Σ_i r[c, i]²``, summed in float64 (four interleaved partial sums
      over ``i ≡ 0, 1, 2, 3 (mod 4)``, added as ``(s0 + s1) + (s2 + s3)``);
    * ``Z[c, k, i] ← σ'(Z[c, k, i]) r[c, i]`` in place (``D`` of the module docstring).

    ``σ(z) = z`` and ``σ'(z) = 1`` for ``z ≥ 0``, else ``γ z`` and ``γ``. (A single sweep over
    ``Z`` in blocks of samples, which reads ``Z`` from memory once instead of twice, measured
    slower: 26–29 µs against 18 µs per configuration at the paper's size.)
    """
    g, h, n = Z.shape
    n4 = n - n % 4
    for c in range(g):
        gam = leak[c]
        rc = r[c]
        rc[:] = 0.0
        for k in range(h):
            ak = a[c, k]
            zk = Z[c, k]
            for i in range(n):
                z = zk[i]
                rc[i] += ak * (z if z >= 0 else gam * z)
        for i in range(n):
            rc[i] -= y[i]
        s0 = s1 = s2 = s3 = 0.0
        for i in range(0, n4, 4):
            s0 += np.float64(rc[i]) * np.float64(rc[i])
            s1 += np.float64(rc[i + 1]) * np.float64(rc[i + 1])
            s2 += np.float64(rc[i + 2]) * np.float64(rc[i + 2])
            s3 += np.float64(rc[i + 3]) * np.float64(rc[i + 3])
        for i in range(n4, n):
            s0 += np.float64(rc[i]) * np.float64(rc[i])
        loss[c] = ((s0 + s1) + (s2 + s3)) / n
        if backward:
            for k in range(h):
                zk = Z[c, k]
                for i in range(n):
                    zk[i] = rc[i] if zk[i] >= 0 else gam * rc[i]


@njit(cache=True, nogil=True)
def descend(W: np.ndarray, a: np.ndarray, P: np.ndarray, coef: np.ndarray,
            frozen: np.ndarray) -> None:
    """One GD step in place for the configurations ``c`` not ``frozen``:
    ``a_k ← a_k − κ_c (w_k·ξ_k)`` and ``w_k ← w_k − (κ_c a_k) ξ_k`` (old ``a_k`` and ``w_k``),
    with ``ξ_k`` column ``c h + k`` of ``P`` and ``κ_c = lr_eff 2/n``.

    ``w_k·ξ_k`` is summed in four interleaved partial sums over ``j ≡ 0, 1, 2, 3 (mod 4)``,
    added as ``(s0 + s1) + (s2 + s3)`` (independent chains instead of one chain of ``d`` adds).
    """
    g, h, d = W.shape
    xi = np.empty((h, d), W.dtype)
    d4 = d - d % 4
    for c in range(g):
        if frozen[c]:
            continue
        for j in range(d):  # ξ of this configuration, neuron-major
            for k in range(h):
                xi[k, j] = P[j, c * h + k]
        for k in range(h):
            wk = W[c, k]
            xk = xi[k]
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
def run_steps(XT: np.ndarray, y: np.ndarray, W: np.ndarray, a: np.ndarray, leak: np.ndarray,
              coef: np.ndarray, loss0: np.ndarray, stacked: bool, t_begin: int, t_end: int,
              steps: int, factor: float, Z: np.ndarray, r: np.ndarray, P: np.ndarray,
              scratch: np.ndarray, loss: np.ndarray, bad: np.ndarray) -> int:
    """Steps ``t_begin … t_end − 1`` of full-batch GD on a group, in place on ``W`` and ``a``.

    Step ``t`` evaluates the loss at ``θ_t`` (stored in ``loss0`` when ``t = 0``), marks in
    ``bad`` the configurations whose loss is non-finite or above ``factor × loss0``, then, if
    ``t < steps``, updates the others to ``θ_{t+1}``. Returns the next step: ``t_end``, or
    ``t + 1`` right after a step that marked a configuration (the caller removes it).
    """
    g = W.shape[0]
    for t in range(t_begin, t_end):
        forward_product(W, XT, Z, stacked)
        residual_pass(Z, a, leak, y, r, loss, t < steps)
        any_bad = False
        for c in range(g):
            if t == 0:
                loss0[c] = loss[c]
            bad[c] = not np.isfinite(loss[c]) or loss[c] > factor * loss0[c]
            any_bad = any_bad or bad[c]
        if t < steps:
            backward_product(XT, Z, P, scratch, stacked)
            descend(W, a, P, coef, bad)
        if any_bad:
            return t + 1
    return t_end
