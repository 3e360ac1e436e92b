"""The kernel distance, the project's headline quantity, finished in one place.

``S(0, t) = 1 − ⟨K₀, K_t⟩_F / (‖K₀‖_F ‖K_t‖_F)`` (Kunin et al. 2024, eq. (4);
docs/engine.md, "One definition per concept"). Every model computes the inner product and
the two squared norms of its own tangent kernels and calls :func:`kernel_distance`, which
applies the one rule:

* written as ``1 − ⟨K₀,K_t⟩ / √(‖K₀‖²‖K_t‖²)``, so that ``S(K₀, K₀)`` is exactly 0 (IEEE:
  ``√(fl(x²)) = x`` and ``x / x = 1``);
* clipped into ``[0, 1]``: values outside are rounding (for positive semi-definite kernels
  ``0 ≤ ⟨K₀,K_t⟩ ≤ ‖K₀‖‖K_t‖``);
* NaN where a norm is zero or anything is not finite (no kernel to compare: a diverged run,
  a dead network).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .arrays import namespace


def kernel_distance(inner: Any, norm0_sq: Any, normt_sq: Any) -> Any:
    """``S(0,t)`` from ``⟨K₀,K_t⟩``, ``‖K₀‖²`` and ``‖K_t‖²`` (scalars or broadcastable
    NumPy arrays or torch tensors; the result has their type: a Python float for floats)."""
    if all(isinstance(x, float | int) for x in (inner, norm0_sq, normt_sq)):
        denom = math.sqrt(norm0_sq * normt_sq) if norm0_sq * normt_sq >= 0 else math.nan
        if not (math.isfinite(inner) and math.isfinite(denom)) or denom == 0.0:
            return math.nan
        return min(1.0, max(0.0, 1.0 - inner / denom))
    xp = namespace(inner, norm0_sq, normt_sq)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        denom = xp.sqrt(norm0_sq * normt_sq)
        ok = xp.isfinite(inner) & xp.isfinite(denom) & (denom > 0)
        s = xp.clip(1.0 - inner / denom, 0.0, 1.0)
        return xp.where(ok, s, math.nan)
