"""Online SGD of the hermite model: the NumPy reference step and the loop driver
(docs/hermite-sgd.md, eqs. (1)–(3); Ren et al. 2025, §2.1).

One step of one configuration with ``n`` fresh samples ``x_i ~ N(0, I_d)`` (the ``batch``)::

    z_ki = ⟨v̄_k, x_i⟩,  e_i = Σ_k ‖v_k‖² σ(z_ki) − Σ_p a_p σ(x_ip),
    ∇_{v_k} = (2/n) (Σ_i σ(z_ki) e_i) v_k + (‖v_k‖/n) (Σ_i σ'(z_ki) e_i x_i
                                                     − (Σ_i σ'(z_ki) e_i z_ki) v̄_k),
    v_k ← v_k − lr ∇_{v_k},

the gradient of ``½ mean_i e_i²`` (:func:`..hermite.minibatch_grad` computes the same with
BLAS). :func:`sgd_step_reference` writes it with NumPy operations whose rounding is fully
determined: every sum is a ``cumsum`` (strictly sequential, in index order), every other
operation elementwise. :mod:`._jit` transcribes it operation by operation, so the
compiled loop (implementation ``numba``) and this one (``numpy``) give bitwise-identical
weights for the same samples (tests/models/hermite/test_hermite_sgd.py).

:func:`run_online_sgd` drives either loop: it draws the samples of up to ``BLOCK_VALUES``
values at a time from one generator (the same sequence as one draw per step), runs blocks of
steps that end at the output steps, lets the caller record each configuration there, detects
each teacher's recovery step exactly (after every step) and stops a configuration once as
many teachers are recovered as are learnable, if asked.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ...errors import Status
from ._poly import hermite_eval

BLOCK_VALUES = 1 << 16
"""Gaussian values drawn per block of steps (512 KiB of float64)."""


def hermite_tables(c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """``(cs, cd, nz, c_0)``: ``cs_j = c_j/√(j!)`` and ``cd_j = c_j j/√(j!)`` computed by the
    same expressions as :func:`._poly.hermite_eval`, and the mask of non-zero ``c_j``."""
    c = np.asarray(c, dtype=float)
    K = len(c) - 1
    cs = np.zeros(K + 1)
    cd = np.zeros(K + 1)
    fact = 1.0
    for j in range(1, K + 1):
        if c[j] != 0:
            cs[j] = c[j] / math.sqrt(fact * j)
            cd[j] = c[j] * j / math.sqrt(fact * j)
        fact *= j
    return cs, cd, c != 0, float(c[0])


def _lastsum(x: np.ndarray, axis: int) -> np.ndarray:
    """Sequential sum along ``axis`` (the last entry of ``cumsum``)."""
    return np.take(np.cumsum(x, axis=axis), -1, axis=axis)


def sgd_step_reference(V: np.ndarray, r2: np.ndarray, x: np.ndarray, sx: np.ndarray,
                       a: np.ndarray, c: np.ndarray, lr: float, floor: float
                       ) -> tuple[np.ndarray, np.ndarray]:
    """One online-SGD step of one configuration: ``(V_new, ‖v_k,new‖²)``.

    ``V`` (m, d), ``r2 = ‖v_k‖²`` (m,) as returned by the previous step, ``x`` (n, d) the
    samples, ``sx = σ(x[:, :P])`` (n, P), ``a`` (P,). Module docstring for the formula and
    the order of operations.
    """

    n = x.shape[0]
    r = np.maximum(np.sqrt(r2), floor)
    U = V / r[:, None]
    z = _lastsum(U[:, None, :] * x[None, :, :], 2)  # (m, n)
    sig, dsig = hermite_eval(z, c)
    fstar = _lastsum(sx * a[None, :], 1)  # (n,)
    err = _lastsum(r2[:, None] * sig, 0) - fstar  # (n,)
    es = _lastsum(sig * err[None, :], 1)  # (m,)
    ed = dsig * err[None, :]  # (m, n)
    edx = _lastsum(ed[:, :, None] * x[None, :, :], 1)  # (m, d)
    edz = _lastsum(ed * z, 1)  # (m,)
    grad = ((2.0 / n) * es)[:, None] * V + (r / n)[:, None] * (edx - edz[:, None] * U)
    Vn = V - lr * grad
    return Vn, _lastsum(Vn * Vn, 1)


def check_recovery(V: np.ndarray, r2: np.ndarray, s: int, level: float, floor2: float,
                   rec_step: np.ndarray, winner: np.ndarray) -> int:
    """Mark the teachers recovered at step ``s`` (best squared overlap ≥ ``level``) in
    ``rec_step``/``winner`` (one configuration); returns how many were."""
    P = rec_step.shape[0]
    with np.errstate(over="ignore", invalid="ignore"):
        cos2 = V[:, :P] ** 2 / np.maximum(r2, floor2)[:, None]
    best = np.argmax(cos2, axis=0)
    val = cos2[best, np.arange(P)]
    new = (rec_step < 0) & (val >= level)
    rec_step[new] = s
    winner[new] = best[new]
    return int(np.count_nonzero(new))


def numpy_block(V: np.ndarray, r2: np.ndarray, X: np.ndarray, n: int, c: np.ndarray,
                a: np.ndarray, lr: np.ndarray, active: np.ndarray, step0: int, n_steps: int,
                floor: float, floor2: float, level: float, stop_on_recovery: bool,
                rec_step: np.ndarray, winner: np.ndarray,
                n_left: np.ndarray, stop_after: np.ndarray, last_step: np.ndarray) -> int:
    """The NumPy reference of :func:`._jit.run_block` (same arguments, except the
    Hermite coefficients ``c`` themselves)."""

    P = a.shape[1]
    for t in range(n_steps):
        s = step0 + t
        x = X[t * n:(t + 1) * n]
        sx = hermite_eval(x[:, :P], c)[0]
        any_active = False
        for b in np.flatnonzero(active):
            with np.errstate(over="ignore", invalid="ignore"):
                V[b], r2[b] = sgd_step_reference(V[b], r2[b], x, sx, a[b], c, lr[b], floor)
            last_step[b] = s
            got = check_recovery(V[b], r2[b], s, level, floor2, rec_step[b], winner[b])
            if got:
                n_left[b] -= got
                if n_left[b] <= 0 and n_left[b] + got > 0 and stop_on_recovery:
                    stop_after[b] = s + (s + 9) // 10
            if stop_on_recovery and n_left[b] <= 0 and s >= stop_after[b]:
                active[b] = False
            else:
                any_active = True
        if not any_active:
            return t + 1
    return n_steps


Block = Callable[[np.ndarray, int, int], int]
"""Steps ``step0 … step0 + k − 1`` of a batch on the samples ``X``: ``block(X, step0, k)``
returns the steps taken (fewer once every configuration has stopped)."""
Blocks = Callable[..., Block]
"""Makes the :data:`Block` of one run from its state (:func:`numpy_blocks`'s arguments)."""


def numpy_blocks(V: np.ndarray, r2: np.ndarray, n: int, c: np.ndarray, a: np.ndarray,
                 lr: np.ndarray, active: np.ndarray, floor: float, floor2: float, level: float,
                 stop_on_recovery: bool, rec_step: np.ndarray, winner: np.ndarray,
                 n_left: np.ndarray, stop_after: np.ndarray, last_step: np.ndarray) -> Block:
    """The NumPy loop (:func:`numpy_block`) over the run's state, updated in place."""

    def block(X: np.ndarray, step0: int, k: int) -> int:
        return numpy_block(V, r2, X, n, c, a, lr, active, step0, k, floor, floor2, level,
                           stop_on_recovery, rec_step, winner, n_left, stop_after, last_step)

    return block


def compiled_blocks(V: np.ndarray, r2: np.ndarray, n: int, c: np.ndarray, a: np.ndarray,
                    lr: np.ndarray, active: np.ndarray, floor: float, floor2: float,
                    level: float, stop_on_recovery: bool, rec_step: np.ndarray,
                    winner: np.ndarray, n_left: np.ndarray, stop_after: np.ndarray,
                    last_step: np.ndarray) -> Block:
    """The compiled loop (:func:`._jit.run_block`, numba imported now) over the run's state,
    bitwise the same as :func:`numpy_blocks`'s."""
    from . import _jit as _hermite_jit

    cs, cd, nz, c0 = hermite_tables(c)

    def block(X: np.ndarray, step0: int, k: int) -> int:
        return int(_hermite_jit.run_block(
            V, r2, X, n, cs, cd, nz, c0, a, lr, active, step0, k, floor, floor2, level,
            stop_on_recovery, rec_step, winner, n_left, stop_after, last_step))

    return block


def run_online_sgd(V: np.ndarray, a: np.ndarray, c: np.ndarray, lr: np.ndarray, n: int,
                   grid: np.ndarray, gen: np.random.Generator, recoverable: np.ndarray,
                   stop_on_recovery: bool, blocks: Blocks, floor: float, level: float,
                   record: Callable[[int, int], None],
                   progress: Callable[[float], None] | None = None) -> dict[str, Any]:
    """Online SGD of ``B`` configurations in place on ``V`` (B, m, d), all driven by the
    same samples from ``gen``, up to step ``grid[-1]``, in the loop that ``blocks`` makes
    (:func:`numpy_blocks` or :func:`compiled_blocks`, as the implementation row chooses).

    ``record(i, b)`` is called when configuration ``b`` has reached output step ``grid[i]``
    (``V[b]`` is then its state there); a configuration whose weights are no longer finite
    at an output step gets status DIVERGED and stops. ``recoverable`` (B, P) marks the
    learnable teachers (finite greedy time): ``stop_on_recovery`` waits until as many teachers
    as that are recovered (the greedy rule may pick a different set when neurons compete), then
    runs 10% more steps. Returns ``rec_step``, ``winner`` (B, P; −1:
    never recovered), ``last_step`` (B,) and ``status`` (B,).
    """
    B, _, d = V.shape
    P = a.shape[1]
    floor2 = floor * floor
    steps = int(grid[-1])
    r2 = np.cumsum(V * V, axis=2)[:, :, -1].copy()
    rec_step = np.full((B, P), -1, np.int64)
    winner = np.full((B, P), -1, np.int64)
    n_left = np.count_nonzero(recoverable, axis=1).astype(np.int64)
    stop_after = np.full(B, np.iinfo(np.int64).max, np.int64)
    last_step = np.zeros(B, np.int64)
    status = np.full(B, int(Status.OK), np.int8)
    active = np.ones(B, bool)
    for b in range(B):
        n_left[b] -= check_recovery(V[b], r2[b], 0, level, floor2, rec_step[b], winner[b])
        if n_left[b] <= 0 and stop_on_recovery:
            stop_after[b] = 0
            active[b] = False
        record(0, b)
    block = blocks(V, r2, n, c, a, lr, active, floor, floor2, level, stop_on_recovery,
                   rec_step, winner, n_left, stop_after, last_step)
    per_block = max(1, BLOCK_VALUES // (n * d))
    s = 1  # the next step to take
    for i in range(1, len(grid)):
        while s <= grid[i] and active.any():
            k = int(min(per_block, grid[i] - s + 1))
            X = gen.standard_normal((k * n, d))
            s += block(X, s, k)
            if progress is not None:
                progress(min(1.0, (s - 1) / steps))
        for b in range(B):
            if last_step[b] == grid[i] and status[b] == Status.OK:
                if np.all(np.isfinite(V[b])):
                    record(i, b)
                else:
                    status[b] = Status.DIVERGED
                    active[b] = False
        if not active.any():
            break
    return {"rec_step": rec_step, "winner": winner, "last_step": last_step, "status": status}
