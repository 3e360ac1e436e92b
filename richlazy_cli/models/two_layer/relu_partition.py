r"""Activation regions of a deep ReLU network on the plane and their parity colouring
(Kunin et al. 2024, Fig. 9 and Prop. C.2; docs/two-layer.md, eq. (14)).

A ReLU network :math:`\mathbb R^2 \to \mathbb R` with hidden layers
:math:`h_\ell = \mathrm{relu}(W_\ell h_{\ell-1} + b_\ell)` (He initialisation,
:math:`W_\ell \sim \mathcal N(0, 2/\text{fan-in})`; biases 0 or
:math:`\mathcal N(0, \sigma_b^2)`) is linear on each region of constant activation pattern.
Without biases the pattern depends only on the angle of :math:`x` (every pre-activation is
positively homogeneous), so the regions are cones;
with biases they are polytopes. Crossing one region boundary flips one unit (away from the points
where boundaries meet), so the parity of the number of active units 2-colours the partition.
"""

from __future__ import annotations

import numpy as np


def he_network(gen: np.random.Generator, widths: tuple[int, ...] = (20, 20, 20),
               bias_std: float = 0.0, d_in: int = 2) -> list[tuple[np.ndarray, np.ndarray]]:
    """Layers ``(W, b)`` of the hidden part: ``W`` (fan_out, fan_in) ~ N(0, 2/fan_in), ``b`` 0 or
    N(0, bias_std²)."""
    layers = []
    fan_in = d_in
    for width in widths:
        W = gen.standard_normal((width, fan_in)) * np.sqrt(2.0 / fan_in)
        b = gen.standard_normal(width) * bias_std if bias_std > 0 else np.zeros(width)
        layers.append((W, b))
        fan_in = width
    return layers


def patterns(layers: list[tuple[np.ndarray, np.ndarray]], X: np.ndarray) -> np.ndarray:
    """Activation pattern (N, total units) of the inputs ``X`` (N, d):
    ``1[W_l h_{l-1} + b_l > 0]`` of every hidden layer, concatenated."""
    h = np.asarray(X, dtype=float)
    out = []
    for W, b in layers:
        z = h @ W.T + b
        out.append(z > 0.0)
        h = np.maximum(z, 0.0)
    return np.concatenate(out, axis=1)


def square_grid(size: int = 400, extent: float = 1.0) -> np.ndarray:
    """``size`` × ``size`` points of ``[−extent, extent]²`` as (size, size, 2), row = y."""
    t = np.linspace(-extent, extent, size)
    xx, yy = np.meshgrid(t, t)
    return np.stack([xx, yy], axis=-1)


def neighbour_flip_parity(P: np.ndarray) -> tuple[int, int]:
    """For a pattern grid ``P`` (ny, nx, units): among 4-neighbour pairs whose patterns differ,
    (the number that differ in an odd number of units, the number of such pairs)."""
    odd = total = 0
    for a, b in ((P[1:], P[:-1]), (P[:, 1:], P[:, :-1])):
        flips = np.count_nonzero(a != b, axis=-1)
        moved = flips > 0
        total += int(np.count_nonzero(moved))
        odd += int(np.count_nonzero(flips[moved] % 2 == 1))
    return odd, total
