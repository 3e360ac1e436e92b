"""The two roots of a single neuron's conserved quantity, without cancellation
(docs/single-neuron.md). A leaf module shared by :mod:`.single_neuron` and
:mod:`._extras`.
"""

from __future__ import annotations

import numpy as np


def _halves(delta: np.ndarray | float, x: np.ndarray | float
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""``(kappa, p, q)`` with :math:`\kappa = \sqrt{\delta^2 + 4x}`, :math:`p = (\kappa+\delta)/2`,
    :math:`q = (\kappa-\delta)/2`, for :math:`x \ge 0`, without cancellation.

    :math:`pq = x`, so the half that would cancel (``q`` when :math:`\delta > 0`, ``p`` when
    :math:`\delta < 0`) is computed as ``x`` divided by the other one.
    """
    delta = np.asarray(delta, dtype=float)
    x = np.asarray(x, dtype=float)
    kappa = np.hypot(delta, 2.0 * np.sqrt(x))
    big_p = 0.5 * (kappa + np.abs(delta))  # the half without cancellation, >= |delta|
    with np.errstate(divide="ignore", invalid="ignore"):
        small = np.where(big_p > 0, x / np.where(big_p > 0, big_p, 1.0), 0.0)
    p = np.where(delta >= 0, big_p, small)
    q = np.where(delta >= 0, small, big_p)
    return kappa, p, q
