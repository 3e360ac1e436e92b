"""Single-neuron extras (Kunin et al. 2024, §3, App. A.2–A.4; docs/single-neuron.md,
eqs. (15)–(18)): the downstream delay, the balanced two phases, Lemma A.1, the two basins, the
Riccati variable of Fig. 8 and Hessian maps. Each closed form is checked against the exact
solution of the flow, an ODE or finite differences."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import xarray as xr
from scipy.optimize import brentq

from richlazy_cli.models.base import Batch
from richlazy_cli.models.single_neuron._extras import (
    basin_score,
    g_delta,
    nu_closed_form,
    preconditioner_inverse,
)
from richlazy_cli.models.single_neuron.model import (
    SingleNeuron,
    exact_trajectory,
    hessian_map_defect,
    init_from_beta,
    numeric_trajectory,
)


def solve(points: list[dict[str, Any]]) -> xr.Dataset:
    values = [SingleNeuron.resolve("solve", p) for p in points]
    return SingleNeuron().solve(Batch.from_points(SingleNeuron, values))


def _one(beta0: np.ndarray, delta: float, beta_star: np.ndarray):
    """(t -> (a, w)) of the exact solution from beta0 at this delta, eta = 1."""
    a0, w0 = init_from_beta(beta0[None], np.array([delta]), np.ones(1), np.ones(1))

    def at(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a, w = exact_trajectory(a0, w0, np.array([delta]), beta_star[None], np.ones(1),
                                np.ones(1), np.atleast_1d(np.asarray(t, dtype=float)))
        return a[0], w[0]

    return at


def _first_crossing(f, level: float, t_hi: float, n: int = 4001) -> float:
    """The first t in [0, t_hi] with f(t) >= level (grid, then brentq)."""
    t = np.linspace(0.0, t_hi, n)
    v = f(t)
    k = int(np.argmax(v >= level))
    assert v[k] >= level and k > 0, "the level is not crossed in the window"
    return brentq(lambda s: float(f(np.array([s]))[0]) - level, t[k - 1], t[k], xtol=1e-12)


# -- K7: the downstream delay grows like |delta| ----------------------------------------------
def test_downstream_delay_proportional_to_abs_delta() -> None:
    """Slow equation phi' = gamma^2 b^2 |delta|^-1 phi (1 - phi^2): t_0.9 = 1.274 |delta| from
    phi0 = 0.5 (Kunin et al. 2024, §3; docs/single-neuron.md, eq. (18))."""
    bstar = np.array([0.0, 1.0])
    beta0 = np.array([np.sin(np.pi / 3), np.cos(np.pi / 3)])  # |beta0| = 1, 60 deg from beta*
    predicted = 0.5 * np.log(0.81 * 0.75 / (0.25 * 0.19))
    assert predicted == pytest.approx(1.274, abs=5e-4)
    times = {}
    for delta in (-10.0, -20.0, -40.0, -80.0):
        at = _one(beta0, delta, bstar)

        def phi(t: np.ndarray, at: Any = at) -> np.ndarray:
            _, w = at(t)
            return w[:, 1] / np.linalg.norm(w, axis=1)

        times[delta] = _first_crossing(phi, 0.9, 4.0 * predicted * abs(delta))
    for delta, t in times.items():
        if abs(delta) >= 20:
            assert abs(t / (predicted * abs(delta)) - 1.0) <= 0.2, (delta, t)
    for delta in (-10.0, -20.0, -40.0):
        assert 1.8 <= times[2 * delta] / times[delta] <= 2.2, times


# -- K7: balanced small init, an alignment phase then a fitting phase -------------------------
def test_balanced_alignment_time_independent_of_scale() -> None:
    """delta = 0, beta0 perpendicular to beta*: phi = tanh(gamma b t), t_a = artanh 0.9 = 1.472
    whatever |beta0|; the fitting time grows like (1/2) ln(1/mu0)."""
    bstar = np.array([0.0, 1.0])
    t_a, t_f = {}, {}
    for scale in (1e-2, 1e-4, 1e-6):
        at = _one(np.array([scale, 0.0]), 0.0, bstar)

        def phi(t: np.ndarray, at: Any = at) -> np.ndarray:
            _, w = at(t)
            return w[:, 1] / np.linalg.norm(w, axis=1)

        def mu(t: np.ndarray, at: Any = at) -> np.ndarray:
            a, w = at(t)
            return a * np.linalg.norm(w, axis=1)

        t_a[scale] = _first_crossing(phi, 0.9, 10.0)
        t_f[scale] = _first_crossing(mu, 0.9, 30.0)
        assert t_a[scale] == pytest.approx(np.arctanh(0.9), rel=0.01)
    # scale independence: the three alignment times agree with each other to 1e-3
    assert max(t_a.values()) - min(t_a.values()) <= 1e-3, t_a
    assert 2.2 <= t_f[1e-6] - t_f[1e-4] <= 2.4, t_f
    assert t_a[1e-6] < 0.2 * t_f[1e-6]


# -- K9: Lemma A.1, at most one sign change of a(t) w(t)^T beta* ----------------------------------
def test_lemma_a1_at_most_one_sign_change() -> None:
    gen = np.random.default_rng(91)
    B, d = 2000, 3
    bstar = gen.standard_normal((B, d))
    beta0 = gen.standard_normal((B, d))
    delta = gen.uniform(-3.0, 3.0, B)
    ones = np.ones(B)
    a0, w0 = init_from_beta(beta0, delta, ones, ones)
    t = np.linspace(0.0, 50.0, 5001)
    changes = np.empty(B, dtype=int)
    for lo in range(0, B, 200):
        sl = slice(lo, lo + 200)
        a, w = exact_trajectory(a0[sl], w0[sl], delta[sl], bstar[sl], ones[sl], ones[sl], t)
        s = np.sign(a * np.einsum("btd,bd->bt", w, bstar[sl]))
        changes[sl] = [np.count_nonzero(np.diff(row[row != 0]) != 0) for row in s]
    assert changes.max() <= 1
    assert np.count_nonzero(changes == 1) >= 100
    # a0 z0 = beta0^T beta*, and a z -> b^2 > 0: it changes sign exactly when beta0^T beta* < 0
    np.testing.assert_array_equal(changes == 1, np.sum(beta0 * bstar, axis=1) < 0)


# -- K10: the two basins --------------------------------------------------------------------------
def test_basin_score_predicts_sign_of_a_inf() -> None:
    gen = np.random.default_rng(10)
    B, d = 2000, 3
    bstar = gen.standard_normal((B, d))
    bstar *= (gen.uniform(0.5, 2.0, B) / np.linalg.norm(bstar, axis=1))[:, None]
    a0 = gen.standard_normal(B)
    w0 = gen.standard_normal((B, d)) * 2.0
    delta = a0**2 - np.sum(w0 * w0, axis=1)
    neg = delta < 0
    assert neg.sum() >= 1500
    ones = np.ones(B)
    score = basin_score(a0, w0, delta, bstar, ones, ones)
    a, _ = exact_trajectory(a0, w0, delta, bstar, ones, ones, np.array([200.0]))
    decided = neg & (np.abs(score) > 1e-6)
    assert decided.sum() >= 1500
    np.testing.assert_array_equal(np.sign(a[decided, 0]), np.sign(score[decided]))
    assert np.count_nonzero(score[neg] < 0) >= 100  # both basins are populated
    # delta > 0: the sign of a never changes
    pos = ~neg
    np.testing.assert_array_equal(np.sign(score[pos]), np.sign(a0[pos]))
    np.testing.assert_array_equal(np.sign(a[pos, 0]), np.sign(a0[pos]))


def test_basin_score_against_numeric_flow() -> None:
    """Independent of the closed form: solve_ivp from inits on both sides of the surface."""
    bstar = np.array([1.0, 1.0]) / np.sqrt(2.0)
    gen = np.random.default_rng(3)
    a0 = gen.uniform(-1.0, 1.0, 40)
    w0 = gen.uniform(-2.0, 2.0, (40, 2))
    delta = a0**2 - np.sum(w0 * w0, axis=1)
    score = basin_score(a0, w0, delta, np.tile(bstar, (40, 1)), np.ones(40), np.ones(40))
    keep = np.abs(score) > 1e-3
    for i in np.flatnonzero(keep):
        a, _ = numeric_trajectory(a0[i:i + 1], w0[i:i + 1], np.ones(1), np.ones(1),
                                  np.array([0.0, 60.0]), bstar[None])
        assert np.sign(a[0, -1]) == np.sign(score[i])


def test_model_outputs_basin_and_nu() -> None:
    ds = solve([
        {"a0": 0.5, "w0": [-1.5, -0.2], "beta_star": [1.0, 1.0], "t_max": 40.0, "n_records": 81},
        {"a0": 0.5, "w0": [1.0, -0.2], "beta_star": [1.0, 1.0], "t_max": 40.0, "n_records": 81},
    ])
    assert set(ds["basin_score"].dims) == {"point"}
    assert ds["nu"].dims == ("point", "method", "time")
    a_end = ds["a"].values[:, :, -1]
    np.testing.assert_array_equal(np.sign(a_end[:, 0]), ds["a_inf_sign"].values)
    np.testing.assert_array_equal(np.sign(a_end[:, 1]), ds["a_inf_sign"].values)
    assert ds["a_inf_sign"].values.tolist() == [-1.0, 1.0]
    z = np.sum(ds["w"].values * np.array([1.0, 1.0]), axis=-1)
    np.testing.assert_allclose(ds["nu"].values * ds["a"].values, z, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(ds["upsilon"].values * z, ds["a"].values, rtol=1e-12, atol=1e-14)


def test_basin_outputs_nan_for_unwhitened_data() -> None:
    ds = solve([{"X": [[1.0, 0.5], [0.0, 2.0]], "y": [1.0, 0.5], "method": "numeric",
                 "t_max": 2.0, "n_records": 5}])
    assert np.isnan(ds["basin_score"].values).all()
    assert np.isfinite(ds["nu"].values).all()


# -- K11: Fig. 8, nu obeys a Riccati equation --------------------------------------------------
FIG8_STARTS = {"3pi/2": 1.5 * np.pi, "-pi/4": -0.25 * np.pi, "pi/4": 0.25 * np.pi}


@pytest.mark.parametrize("delta", [-4.0, -1.0, 0.0, 1.0, 4.0])
def test_nu_matches_riccati_closed_form(delta: float) -> None:
    bstar = np.array([1.0, 1.0]) / np.sqrt(2.0)
    starts = [[np.cos(t), np.sin(t)] for t in FIG8_STARTS.values()] + [[1.5, 1.2]]
    pts = [{"beta0": b, "delta": delta, "beta_star": bstar.tolist(), "t_max": 10.0,
            "n_records": 201} for b in starts]
    ds = solve(pts)
    t = ds["time"].values
    checked = 0
    for i in range(len(pts)):
        for m in range(ds.sizes["method"]):
            a = ds["a"].values[i, m]
            if np.any(np.sign(a) != np.sign(a[0])):
                continue  # nu passes through infinity where a changes sign
            nu = ds["nu"].values[i, m]
            ref = nu_closed_form(nu[0], delta, 1.0, 1.0, 1.0, t)
            tol = 1e-9 if ds["method"].values[m] == "exact" else 1e-7
            err = np.abs(nu - ref) / np.maximum(1.0, np.abs(ref))
            assert err.max() <= tol, (i, ds["method"].values[m], err.max())
            checked += 1
    assert checked >= 4


def test_nu_branches() -> None:
    """The coth branch without a sign change of a (beta0 = (1.5, 1.2), delta = 1) and the fixed
    point (beta0 = beta*: x = 1), each against a numeric flow."""
    bstar = np.array([1.0, 1.0]) / np.sqrt(2.0)
    t = np.linspace(0.0, 5.0, 51)
    for beta0, delta in ((np.array([1.5, 1.2]), 1.0), (bstar.copy(), 0.0),
                         (np.array([0.1, -0.05]), -2.0)):
        a0, w0 = init_from_beta(beta0[None], np.array([delta]), np.ones(1), np.ones(1))
        a, w = numeric_trajectory(a0, w0, np.ones(1), np.ones(1), t, bstar[None],
                                  rtol=1e-12, atol=1e-14)
        nu = (w[0] @ bstar) / a[0]
        kstar = np.hypot(delta, 2.0)
        x = (delta + 2.0 * nu[0]) / kstar
        ref = nu_closed_form(nu[0], delta, 1.0, 1.0, 1.0, t)
        np.testing.assert_allclose(nu, ref, rtol=1e-8, atol=1e-10)
        if beta0[0] == 1.5:
            assert abs(x) > 1


# -- K13 / Z5: Hessian maps ---------------------------------------------------------------------
def _psi_grad(beta: np.ndarray, delta: float) -> np.ndarray:
    """psi_delta = grad Psi_delta = sqrt(kappa - delta) beta/|beta| (docs/single-neuron.md,
    eq. (11), gamma = 1)."""
    r = np.linalg.norm(beta)
    kappa = np.sqrt(delta * delta + 4.0 * r * r)
    return np.sqrt(kappa - delta) * beta / r


def test_hessian_maps() -> None:
    gen = np.random.default_rng(13)
    for d in (2, 3, 5):
        for _ in range(10):
            beta = gen.standard_normal(d)
            beta /= np.linalg.norm(beta)
            # Gunasekar's example: the defect is max_j |beta_j| >= 1/sqrt(d)
            assert hessian_map_defect(lambda b: np.eye(b.size) + np.outer(b, b), beta) >= 0.1
            for delta in (-1.0, 0.5, 2.0):
                assert hessian_map_defect(lambda b, dl=delta: preconditioner_inverse(b, dl),
                                          beta) >= 1e-2

                def warped(b: np.ndarray, dl: float = delta) -> np.ndarray:
                    return g_delta(b @ b, dl) * preconditioner_inverse(b, dl)

                assert hessian_map_defect(warped, beta) <= 1e-6
                # and it is the Hessian of Psi_delta (finite differences of its gradient)
                h = 1e-5
                hess = np.stack([(_psi_grad(beta + h * e, delta) - _psi_grad(beta - h * e, delta))
                                 / (2 * h) for e in np.eye(d)])
                np.testing.assert_allclose(warped(beta), hess, rtol=0, atol=1e-7)


def test_preconditioner_inverse_is_the_inverse() -> None:
    gen = np.random.default_rng(5)
    for delta, ea, ew in ((-1.0, 1.0, 1.0), (0.5, 2.0, 0.5), (3.0, 0.3, 1.7)):
        beta = gen.standard_normal(4)
        a0, w0 = init_from_beta(beta[None], np.array([delta]), np.array([ea]), np.array([ew]))
        M = ew * a0[0] ** 2 * np.eye(4) + ea * np.outer(w0[0], w0[0])
        np.testing.assert_allclose(preconditioner_inverse(beta, delta, ea, ew) @ M, np.eye(4),
                                   atol=1e-12)
