"""The compiled online-SGD loop of the hermite model, in numba (docs/hermite-sgd.md, eq. (2)).

Private helper of :mod:`richlazy_cli.models.hermite._sgd`, which imports it only when a run
trains with ``loop = "numba"`` (numba and its compiled-code cache are then loaded once per
process). Pure numerics, no I/O.

:func:`run_block` takes ``n_steps`` online-SGD steps of ``B`` configurations in place. It is
the exact transcription of :func:`._sgd.sgd_step_reference` and
:func:`._sgd.check_recovery`: every number is computed by the same IEEE operations in
the same order (products and sums written out one by one, every sum sequential in the index
order of the reference's ``cumsum``; numba does not contract a multiply and an add into one
fused operation unless asked to), so the two loops agree bit for bit on the same samples.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, inline="always")
def _sigma(zv: float, cs: np.ndarray, cd: np.ndarray, nz: np.ndarray,
           c0: float) -> tuple[float, float]:
    """σ(z) and σ'(z) by the He_j recurrence, in :func:`._poly.hermite_eval`'s order."""
    hp = 1.0
    h = zv
    sg = c0 * 1.0
    ds = 0.0
    for j in range(1, cs.shape[0]):
        if j > 1:
            hn = zv * h - (j - 1) * hp
            hp = h
            h = hn
        if nz[j]:
            sg = sg + cs[j] * h
            ds = ds + cd[j] * hp
    return sg, ds


@njit(cache=True, nogil=True)
def run_block(V: np.ndarray, r2: np.ndarray, X: np.ndarray, n: int, cs: np.ndarray,
              cd: np.ndarray, nz: np.ndarray, c0: float, a: np.ndarray, lr: np.ndarray,
              active: np.ndarray, step0: int, n_steps: int, floor: float, floor2: float,
              level: float, stop_on_recovery: bool, rec_step: np.ndarray, winner: np.ndarray,
              n_left: np.ndarray, stop_after: np.ndarray, last_step: np.ndarray) -> int:
    """Steps ``step0 … step0 + n_steps − 1`` (sample rows ``t n … t n + n − 1`` of ``X`` for
    the ``t``-th) of the ``active`` configurations, in place on ``V`` (B, m, d) and its
    squared row norms ``r2`` (B, m).

    After each step ``s`` of configuration ``b``: a teacher ``p`` not yet recovered whose
    best squared overlap ``max_k V_kp²/‖v_k‖²`` reaches ``level`` gets ``rec_step[b, p] = s``
    and ``winner[b, p]`` = that argmax neuron (the first on ties); ``n_left[b]``, initially
    the number of learnable teachers, falls by one per recovery. With ``stop_on_recovery``,
    when it reaches 0 at
    step ``s`` the configuration runs to ``stop_after[b] = s + ⌈s/10⌉`` and stops (``active``
    cleared). ``last_step[b]`` is the last step taken. Returns the number of steps taken, fewer
    than ``n_steps`` when every configuration has stopped.
    """
    B, m, d = V.shape
    P = a.shape[1]
    U = np.empty((m, d))
    z = np.empty((m, n))
    sig = np.empty((m, n))
    dsig = np.empty((m, n))
    sx = np.empty((n, P))
    err = np.empty(n)
    r = np.empty(m)
    for t in range(n_steps):
        s = step0 + t
        x = X[t * n:(t + 1) * n]
        for i in range(n):
            for p in range(P):
                sx[i, p] = _sigma(x[i, p], cs, cd, nz, c0)[0]
        any_active = False
        for b in range(B):
            if not active[b]:
                continue
            Vb = V[b]
            # unit directions
            for k in range(m):
                rk = max(math.sqrt(r2[b, k]), floor)
                r[k] = rk
                for j in range(d):
                    U[k, j] = Vb[k, j] / rk
            # pre-activations and σ, σ'
            for k in range(m):
                for i in range(n):
                    zz = U[k, 0] * x[i, 0]
                    for j in range(1, d):
                        zz = zz + U[k, j] * x[i, j]
                    z[k, i] = zz
                    sg, ds = _sigma(zz, cs, cd, nz, c0)
                    sig[k, i] = sg
                    dsig[k, i] = ds
            # residuals e_i = f(x_i) - f*(x_i)
            for i in range(n):
                fs = sx[i, 0] * a[b, 0]
                for p in range(1, P):
                    fs = fs + sx[i, p] * a[b, p]
                f = r2[b, 0] * sig[0, i]
                for k in range(1, m):
                    f = f + r2[b, k] * sig[k, i]
                err[i] = f - fs
            lrb = lr[b]
            two_n = 2.0 / n
            for k in range(m):
                es = sig[k, 0] * err[0]
                for i in range(1, n):
                    es = es + sig[k, i] * err[i]
                ed0 = dsig[k, 0] * err[0]
                edz = ed0 * z[k, 0]
                for i in range(1, n):
                    edz = edz + (dsig[k, i] * err[i]) * z[k, i]
                ces = two_n * es
                crn = r[k] / n
                acc = 0.0
                for j in range(d):
                    edx = ed0 * x[0, j]
                    for i in range(1, n):
                        edx = edx + (dsig[k, i] * err[i]) * x[i, j]
                    grad = ces * Vb[k, j] + crn * (edx - edz * U[k, j])
                    v = Vb[k, j] - lrb * grad
                    Vb[k, j] = v
                    if j == 0:
                        acc = v * v
                    else:
                        acc = acc + v * v
                r2[b, k] = acc
            last_step[b] = s
            # recovery
            for p in range(P):
                if rec_step[b, p] >= 0:
                    continue
                best = -1
                bv = 0.0
                for k in range(m):
                    c2 = Vb[k, p] * Vb[k, p] / max(r2[b, k], floor2)
                    if best < 0 or c2 > bv:
                        best = k
                        bv = c2
                if bv >= level:
                    rec_step[b, p] = s
                    winner[b, p] = best
                    n_left[b] -= 1
                    if n_left[b] == 0 and stop_on_recovery:
                        stop_after[b] = s + (s + 9) // 10
            if stop_on_recovery and n_left[b] <= 0 and s >= stop_after[b]:
                active[b] = False
            else:
                any_active = True
        if not any_active:
            return t + 1
    return n_steps
