"""The normalised Hermite polynomials of an activation σ = Σ_j c_j h_j (docs/hermite.md §1).

A leaf module: both the flow (:mod:`.model`) and the online-SGD loops (:mod:`._sgd`)
evaluate σ and σ' with it.
"""

from __future__ import annotations

import math

import numpy as np


def hermite_eval(z: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """σ(z) = Σ_j c_j h_j(z) and σ'(z) = Σ_j c_j √j h_{j-1}(z) (recurrence on He_j)."""
    K = len(c) - 1
    he_prev = np.ones_like(z)  # He_0
    sig = c[0] * he_prev
    dsig = np.zeros_like(z)
    if K == 0:
        return sig, dsig
    he = z.copy()  # He_1
    fact = 1.0  # j!
    for j in range(1, K + 1):
        if j > 1:
            he, he_prev = z * he - (j - 1) * he_prev, he
        # here he = He_j, he_prev = He_{j-1}; fact = (j-1)!
        if c[j] != 0:
            # h_j = He_j/√(j!), h_j' = j He_{j-1}/√(j!)
            sig = sig + (c[j] / math.sqrt(fact * j)) * he
            dsig = dsig + (c[j] * j / math.sqrt(fact * j)) * he_prev
        fact *= j
    return sig, dsig
