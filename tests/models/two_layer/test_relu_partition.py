"""Activation regions of a three-layer ReLU net on the plane (Kunin et al. 2024, Fig. 9 and
Prop. C.2; docs/two-layer.md, eq. (14)): cones without biases, and the parity 2-colouring."""

from __future__ import annotations

import numpy as np
import pytest

from richlazy_cli.models.two_layer.relu_partition import (
    he_network,
    neighbour_flip_parity,
    patterns,
    square_grid,
)


def test_without_biases_the_pattern_depends_only_on_the_angle() -> None:
    layers = he_network(np.random.default_rng(0))
    X = square_grid(400).reshape(-1, 2)
    np.testing.assert_array_equal(patterns(layers, X), patterns(layers, 2.0 * X))
    with_bias = he_network(np.random.default_rng(0), bias_std=0.1)
    assert not np.array_equal(patterns(with_bias, X), patterns(with_bias, 2.0 * X))


def test_neighbouring_regions_differ_in_an_odd_number_of_units_ci() -> None:
    layers = he_network(np.random.default_rng(0), bias_std=0.1)
    P = patterns(layers, square_grid(400).reshape(-1, 2)).reshape(400, 400, -1)
    odd, total = neighbour_flip_parity(P)
    assert total > 10_000 and odd / total >= 0.9


@pytest.mark.slow
def test_neighbouring_regions_differ_in_an_odd_number_of_units() -> None:
    """Crossing one boundary flips one unit; a grid step that crosses two boundaries at once
    (near the points where boundaries meet or bend) flips an even number. At 400 x 400 over
    [-1, 1]^2 with bias s.d. 0.1 such pairs are 6.8-8.6% of the changing pairs (5 seeds), and
    the fraction shrinks with the step (3.2-3.5x from 400 to 1600 points per side) [margins
    ours]."""
    for seed in range(2):
        layers = he_network(np.random.default_rng(seed), bias_std=0.1)
        even = []
        for size in (400, 1600):
            P = patterns(layers, square_grid(size).reshape(-1, 2)).reshape(size, size, -1)
            odd, total = neighbour_flip_parity(P)
            assert total > 10_000
            even.append(1.0 - odd / total)
        assert even[0] <= 0.1 and even[1] <= 0.03, even
        assert even[0] >= 2.5 * even[1], even
