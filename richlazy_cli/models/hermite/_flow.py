"""The population gradient flow of a batch of hermite configurations, as one problem.

:class:`HermiteFlowProblem` is what both implementations of the flow receive (docs/hermite.md,
"Gradient flow"): SciPy's integrators one configuration at a time
(:func:`richlazy_cli.models.hermite.model._integrate_flow`) and the batched Dormand–Prince
solver on a torch device (:func:`richlazy_cli.models.hermite._torch.integrate_flow`). Each
returns the same arrays over the batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class HermiteFlowProblem:
    """``V̇ = −∇L(V)`` for B configurations over ``[0, times[-1]]`` (docs/hermite.md, eq. (5)).

    ``V0`` (B, m, d) the initial weights; ``a`` (B, P) the teacher weights; ``c`` the Hermite
    coefficients of σ (shared); ``times`` (T,) the output times, 0 first; ``method`` the
    integrator (``RK45``, ``DOP853``, ``BDF``, ``LSODA``); ``rtol`` the relative tolerance
    and ``atol`` (B,) the absolute one. ``early_stop`` ends a configuration once as many
    teachers are recovered as ``recoverable`` (B, P) marks learnable and
    ``‖∇L‖² t ≤ settle_tol · L(0)``; ``recovery`` is the threshold on the squared overlap that
    counts a teacher recovered, ``r_floor`` the guard on ``‖v_k‖ → 0``. With ``save_params``
    the weights are kept at every output time. ``progress`` is called with the fraction done.
    """

    V0: np.ndarray
    a: np.ndarray
    c: np.ndarray
    times: np.ndarray
    method: str
    rtol: float
    atol: np.ndarray
    recovery: float
    r_floor: float
    early_stop: bool = False
    recoverable: np.ndarray | None = None
    settle_tol: float = 0.0
    save_params: bool = False
    progress: Callable[[float], None] | None = None

    @property
    def size(self) -> int:
        """B, the configurations of the batch."""
        return int(self.V0.shape[0])

    @property
    def learnable(self) -> np.ndarray:
        """``recoverable`` as a (B, P) bool array (none learnable where not given)."""
        if self.recoverable is None:
            return np.zeros(self.a.shape, bool)
        return np.asarray(self.recoverable, bool)

    def outputs(self) -> dict[str, np.ndarray]:
        """The arrays an integration fills, NaN (−1 for ``winner``, 0 for the counts) until
        it does: ``loss`` (B, T), ``overlap`` and ``norm`` (B, T, P), ``t_recover`` and
        ``winner`` (B, P), ``status``, ``nfev``, ``njev`` and ``t_stop`` (B,), with
        ``save_params`` ``V`` (B, T, m, d)."""
        B, m, d = self.V0.shape
        P, T = self.a.shape[1], len(self.times)
        out = {"loss": np.full((B, T), np.nan), "overlap": np.full((B, T, P), np.nan),
               "norm": np.full((B, T, P), np.nan), "t_recover": np.full((B, P), np.nan),
               "winner": np.full((B, P), -1, np.int64), "status": np.zeros(B, np.int8),
               "nfev": np.zeros(B, np.int64), "njev": np.zeros(B, np.int64),
               "t_stop": np.zeros(B)}
        if self.save_params:
            out["V"] = np.full((B, T, m, d), np.nan)
        return out
