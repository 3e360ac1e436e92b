"""The diagnostics of richlazy_cli/models/hermite/_diagnostics.py against hand-built cases
(docs/claims.md §2, §6)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from richlazy_cli.models.hermite import _diagnostics as hd


def test_plateaus_greedy_and_recovered() -> None:
    a = np.array([0.8, 0.5, 0.3])
    pred = hd.plateau_predictions(a, np.array([1.0, np.nan, 2.0]),
                                  np.array([1.0, 3.0, np.nan]))
    assert pred["recovered"] == pytest.approx(0.5 * 0.25)
    assert pred["greedy"] == pytest.approx(0.5 * 0.09)
    c = np.array([0.0, 0.0, 0.0, 0.0, math.sqrt(0.5), 0.0, math.sqrt(0.5)])  # Σ c_j² = 1
    assert hd.plateau(a, np.zeros(3, bool), c) == pytest.approx(0.5 * np.sum(a**2))


def test_neuron_roles_name_each_case() -> None:
    d, P = 6, 3
    V = np.zeros((5, d))
    V[0, 0] = 1.0  # greedy teacher 1, on e_1: as greedy
    V[1, 2] = 2.0  # greedy teacher 2, ends on e_3: diverted
    V[2, [0, 1]] = [0.6, 0.5]  # two teachers ≥ 0.1, none ≥ 0.9: co-learning
    V[2, 5] = 0.3
    V[3, 1] = 1.0  # no greedy teacher, on e_2: spare
    V[4, 4] = 1.0  # outside the teachers' span: idle
    rows = hd.neuron_roles(V, P, np.array([0, 1, -1]))
    assert [r["role"] for r in rows] == ["as greedy", "diverted", "co-learning", "spare",
                                         "idle"]
    assert rows[1]["greedy_teacher"] == 2 and rows[1]["overlaps"] == {3: 1.0}
    named = hd.co_learning_neurons(V, P, np.array([0, 1, -1]))
    assert [r["neuron"] for r in named] == [1, 2]


def test_norm_phase_is_the_logistic_midpoint() -> None:
    """r' = 4r(a − r) from σ0²: r(τ) = a/(1 + (a/σ0² − 1)e^{−4aτ}) ≈ a/2 at τ = ln(a/σ0²)/(4a)."""
    for a, s0 in ((0.8, 1e-2), (0.2, 1e-2), (0.5, 1e-3)):
        tau = hd.norm_phase(a, s0)
        r = a / (1 + (a / s0**2 - 1) * math.exp(-4 * a * tau))
        assert r / a == pytest.approx(0.5, abs=1e-3)


def test_decoupling_ratios_and_the_floor() -> None:
    """One teacher (P = 1), winner 0 recovered at t = 1; competitor 1 grows 3× before and
    1.5× after t_q + 2τ_q; competitor 2 sits at round-off after it, and the initial overlap
    floors its reference (its ratio stays below 1 instead of reaching 1e10)."""
    a, s0 = np.array([0.5]), 1e-2
    t_after = 1.0 + 2 * hd.norm_phase(0.5, s0)
    times = np.array([0.0, 0.5, 1.0, t_after, t_after + 1])
    d = 4
    cos2 = {1: [0.01, 0.02, 0.03, 0.02, 0.03], 2: [0.01, 0.01, 0.01, 1e-18, 1e-8]}
    V = np.zeros((times.size, 3, d))
    V[:, 0, 0] = 1.0
    for j, c in cos2.items():
        V[:, j, 0] = np.sqrt(c)
        V[:, j, 1] = np.sqrt(1 - np.asarray(c))
    r = hd.decoupling(times, V, a, np.array([1.0]), np.array([0]), s0)
    assert r["before"][1] == pytest.approx(3.0)
    assert r["after"][1] == pytest.approx(1.5)
    assert r["level"][1] == pytest.approx(0.03 * d**0.9)
    assert r["a_min_over_d_pow"] == pytest.approx(0.5 / d**-0.3)
    assert not r["not_settled"]


def test_time_law_lag_of_a_shifted_curve() -> None:
    """L_ideal = ½ e^{-t} and the measured L the same curve 2 time units later: at every level
    ℓ the crossings are ln(½/ℓ) and ln(½/ℓ) + 2, so the lag is 2 and the ratio the geometric
    mean of (x + 2)/x over the levels (to the interpolation error of a 1e-4 grid)."""
    t = np.linspace(0.0, 20.0, 200_001)
    ideal = 0.5 * np.exp(-t)
    late = np.where(t < 2.0, 0.5, 0.5 * np.exp(-(t - 2.0)))
    levels = (0.4, 0.2, 0.1)
    x = np.log(0.5 / np.array(levels))
    ratio, lag = hd.time_law_lag(t, late, ideal, levels)
    assert lag == pytest.approx(2.0, abs=1e-6)
    assert ratio == pytest.approx(float(np.exp(np.mean(np.log((x + 2) / x)))), rel=1e-5)
    assert hd.time_law_lag(t, ideal, ideal, levels) == pytest.approx((1.0, 0.0), abs=1e-12)
