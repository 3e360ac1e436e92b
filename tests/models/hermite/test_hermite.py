"""Tests of the additive Hermite model (docs/hermite.md): closed forms against independent
methods."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.polynomial import hermite_e
from scipy.integrate import solve_ivp

from richlazy_cli.errors import BadInput
from richlazy_cli.models.base import Batch
from richlazy_cli.models.hermite.model import (
    Hermite,
    emergence_time,
    emergence_time_h4,
    greedy_recovery_times,
    hermite_coeffs,
    hermite_eval,
    initial_directions,
    minibatch_grad,
    population_loss_grad,
    teacher_weights,
)

H4 = hermite_coeffs(4, None)
MIXED = np.array([0.3, 0, 0, 0, 0.8, 0, math.sqrt(1 - 0.09 - 0.64)])  # c_0 h_0 + c_4 h_4 + c_6 h_6


def run(action: str, **given: object) -> object:
    values = Hermite.resolve(action, given)
    batch = Batch.from_points(Hermite, [values])
    return Hermite().run(action, batch).isel(point=0)


# -- Hermite algebra and reference values ----------------------------------------------------
def test_hermite_eval_matches_numpy_hermite_e() -> None:
    z = np.linspace(-4, 4, 41)
    for c in (H4, MIXED, hermite_coeffs(6, None)):
        he = np.array([ci / math.sqrt(math.factorial(j)) for j, ci in enumerate(c)])
        sig, dsig = hermite_eval(z, c)
        np.testing.assert_allclose(sig, hermite_e.hermeval(z, he), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(dsig, hermite_e.hermeval(z, hermite_e.hermeder(he)),
                                   rtol=1e-12, atol=1e-12)


def _gauss_2d(corr: float, n: int = 60) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Nodes (z1, z2) and weights of a 2-D Gauss-Hermite rule for unit normals with ``corr``."""
    x, w = hermite_e.hermegauss(n)
    w = w / w.sum()
    X, Y = np.meshgrid(x, x, indexing="ij")
    W = np.outer(w, w)
    return X, corr * X + math.sqrt(1 - corr**2) * Y, W


def test_hermite_correlation_and_loss_reference_values() -> None:
    # E[h4 h4] at correlation 0.6 is 0.6^4 = 0.1296 (quadrature)
    z1, z2, W = _gauss_2d(0.6)
    h4 = lambda z: (z**4 - 6 * z**2 + 3) / math.sqrt(24)  # noqa: E731
    assert abs(np.sum(W * h4(z1) * h4(z2)) - 0.1296) < 1e-12
    # one neuron r = 0.5, cos 0.3, one teacher a = 1: L = 0.5292250 (formula and quadrature)
    V = np.zeros((1, 5))
    V[0, 0], V[0, 3] = 0.5 * 0.3, 0.5 * math.sqrt(1 - 0.09)
    L, _ = population_loss_grad(V, np.array([1.0]), H4)
    assert abs(L - 0.5292250) < 1e-12
    z1, z2, W = _gauss_2d(0.3)
    assert abs(0.5 * np.sum(W * (0.25 * h4(z1) - h4(z2)) ** 2) - 0.5292250) < 1e-12


def test_emergence_time_reference_value() -> None:
    # eta = 1e-3, a = 0.5, m0 = 0.05 -> m1 = 0.9: T = 101551.101 (closed form = ODE = quadrature)
    assert abs(emergence_time_h4(0.05, 0.9, 0.5, eta=1e-3) - 101551.101) < 1e-3
    assert abs(emergence_time(0.05, 0.9, 0.5, H4, eta=1e-3) - 101551.101) < 1e-3

    def hit(t: float, m: np.ndarray) -> float:
        return m[0] - 0.9

    hit.terminal = True  # type: ignore[attr-defined]
    sol = solve_ivp(lambda t, m: 4e-3 * 0.5 * m**3 * (1 - m**2), (0, 2e5), [0.05],
                    events=hit, rtol=1e-12, atol=1e-14)
    assert abs(sol.t_events[0][0] - 101551.101) < 1e-2
    # general-σ quadrature against the same ODE for the mixed activation
    q = MIXED**2
    rate = lambda t, m: 0.7 * sum(q[j] * j * m ** (j - 1) for j in range(1, 7)) * (1 - m**2)  # noqa: E731
    sol = solve_ivp(rate, (0, 1e6), [0.1], events=hit, rtol=1e-12, atol=1e-14)
    assert abs(emergence_time(0.1, 0.9, 0.7, MIXED) / sol.t_events[0][0] - 1) < 1e-8


# -- population loss and gradient -------------------------------------------------------------
def _random_problem(seed: int) -> tuple[np.ndarray, np.ndarray]:
    g = np.random.default_rng(seed)
    V = 0.4 * g.standard_normal((3, 6))
    a = np.array([0.8, 0.6])
    return V, a


@pytest.mark.parametrize("c", [H4, MIXED], ids=["h4", "mixed"])
def test_population_loss_matches_monte_carlo(c: np.ndarray) -> None:
    V, a = _random_problem(1)
    L, _ = population_loss_grad(V, a, c, need_grad=False)
    g = np.random.default_rng(123)
    r2 = np.sum(V * V, axis=1)
    U = V / np.sqrt(r2)[:, None]
    total = total2 = 0.0
    n = 0
    for _ in range(10):  # 10^6 samples in chunks
        x = g.standard_normal((100_000, V.shape[1]))
        f = hermite_eval(x @ U.T, c)[0] @ r2
        fs = hermite_eval(x[:, : a.size], c)[0] @ a
        ell = 0.5 * (f - fs) ** 2
        total += ell.sum()
        total2 += (ell**2).sum()
        n += ell.size
    mean = total / n
    se = math.sqrt((total2 / n - mean**2) / n)
    assert abs(mean - L) <= 3 * se, (mean, L, se)
    assert se < 0.05 * L  # the comparison is informative


@pytest.mark.parametrize("c", [H4, MIXED], ids=["h4", "mixed"])
def test_gradient_matches_finite_differences(c: np.ndarray) -> None:
    V, a = _random_problem(2)
    _, grad = population_loss_grad(V, a, c)
    assert grad is not None
    fd = np.zeros_like(V)
    h = 1e-5
    for idx in np.ndindex(V.shape):
        E = np.zeros_like(V)
        E[idx] = h
        fd[idx] = (population_loss_grad(V + E, a, c, False)[0]
                   - population_loss_grad(V - E, a, c, False)[0]) / (2 * h)
    assert np.linalg.norm(fd - grad) / np.linalg.norm(grad) <= 1e-6


def test_gradient_equals_the_h4_formula() -> None:
    V, a = _random_problem(3)
    P = a.size
    r = np.linalg.norm(V, axis=1)
    spec = np.zeros_like(V)
    for k in range(V.shape[0]):
        for l in range(V.shape[0]):
            s = V[k] @ V[l]
            spec[k] += 4 * s**3 / (r[k] ** 2 * r[l] ** 2) * V[l]
            spec[k] -= 2 * s**4 / (r[k] ** 4 * r[l] ** 2) * V[k]
        for p in range(P):
            e = np.eye(V.shape[1])[p]
            s = V[k] @ e
            spec[k] -= a[p] * (4 * s**3 / r[k] ** 2 * e - 2 * s**4 / r[k] ** 4 * V[k])
    np.testing.assert_allclose(population_loss_grad(V, a, H4)[1], spec, rtol=1e-12, atol=1e-13)


# -- validation and schema --------------------------------------------------------------------
@pytest.mark.parametrize(
    "given",
    [
        {"k": 5},
        {"sigma_coeffs": [0, 0, 0, 1.0]},
        {"sigma_coeffs": [0, 0, 0.6, 0, 0.8]},
        {"sigma_coeffs": [0, 0, 0, 0, 0.9]},
        {"P": 300},
        {"P": 2, "a": [1.0, 0.5, 0.2]},
    ],
)
def test_bad_input_is_rejected(given: dict[str, object]) -> None:
    with pytest.raises(BadInput):
        Hermite.resolve("solve", given)


def test_default_lr_and_schema() -> None:
    assert Hermite.resolve("train", {"d": 20})["lr"] == pytest.approx(0.1 / 400)
    ds = run("solve", d=12, P=3, m=4, t_max=50.0, n_records=20, save_params=True)
    assert ds["overlap"].dims == ("time", "teacher")
    assert ds["v"].dims == ("time", "neuron", "dim")
    assert float(ds["loss"][0]) == pytest.approx(0.5, abs=1e-3)  # Σ a_p² = 1, σ0 small: L(0) ≈ ½
    assert float(ds["loss"][-1]) < 0.5 * float(ds["loss"][0])


# -- dynamics against theory ------------------------------------------------------------------
def test_single_task_overlap_law_and_recovery_time() -> None:
    # P = 1 (a = 1), d = 256: m² follows (1/m0² - 8at)^-1 in the search phase
    d, m, seed = 256, 4, 1
    ds = run("solve", d=d, P=1, m=m, seed=seed, t_max=100.0, n_records=300)
    m02 = float(np.max(initial_directions(seed, m, d)[:, 0] ** 2))
    t = ds["time"].values
    ov = ds["overlap"].values[:, 0]
    pred = 1 / (1 / m02 - 8 * t)
    search = (pred > 0) & (pred <= 0.01)  # up to ~6x the initial overlap
    assert search.sum() > 100
    assert np.max(np.abs(ov[search] / pred[search] - 1)) < 0.02
    # up to cos² = 0.5 the time matches the exact single-neuron law (with the 1 - m² factor)
    early = (t > 0) & (ov < 0.5)
    t_exact = np.array([emergence_time_h4(math.sqrt(m02), math.sqrt(o), 1.0) for o in ov[early]])
    np.testing.assert_allclose(t_exact, t[early], rtol=2e-4, atol=1e-6)
    t_rec, t_th = float(ds["t_recover"][0]), float(ds["t_recover_theory"][0])
    assert abs(t_rec / t_th - 1) < 0.10
    assert abs(t_th * 8 * m02 - 1) < 0.05  # the leading term 1/(8 a m0²) dominates


def test_separated_tasks_recover_in_predicted_order() -> None:
    ds = run("solve", d=256, P=3, m=8, a=[0.8, 0.4, 0.2], seed=2, t_max=300.0, n_records=60)
    t_rec, t_th = ds["t_recover"].values, ds["t_recover_theory"].values
    assert np.all(np.isfinite(t_rec))
    np.testing.assert_array_equal(np.argsort(t_rec), np.argsort(t_th))
    assert np.all(np.abs(t_rec / t_th - 1) < 0.20)


def test_greedy_rule_claims_each_neuron_once() -> None:
    M0 = np.array([[0.5, 0.4], [0.1, 0.05]])  # neuron 0 is best for both teachers
    a = np.array([1.0, 1.0])
    T = greedy_recovery_times(M0, a, H4)
    # teacher 0 takes neuron 0 (larger overlap), teacher 1 must use neuron 1
    assert T[0] == pytest.approx(emergence_time_h4(0.5, math.sqrt(0.9), 1.0), rel=1e-12)
    assert T[1] == pytest.approx(emergence_time_h4(0.05, math.sqrt(0.9), 1.0), rel=1e-12)
    assert np.isnan(greedy_recovery_times(M0[:1], a, H4)[1])  # m = 1 < P: one learnable
    # the tabulated general-σ times agree with direct quadrature
    Tm = greedy_recovery_times(M0, a, MIXED)
    assert Tm[0] == pytest.approx(emergence_time(0.5, math.sqrt(0.9), 1.0, MIXED), rel=1e-6)


@pytest.mark.integration
def test_online_sgd_tracks_population_flow() -> None:
    # small lr / batch: the loss curves agree within 10% after the first emergence.
    # (At d = 4 the search phase is short; at larger d the same accuracy needs ~d^3 more samples.)
    common = {"d": 4, "P": 3, "m": 2, "seed": 3, "sigma0": 0.1}
    lr, steps = 1e-3, 3000
    sgd = run("train", **common, lr=lr, steps=steps, batch=4096, n_records=400)
    gf = run("solve", **common, t_max=lr * steps, n_records=400)
    ts = sgd["time"].values[1:]
    Lg = np.interp(np.log(ts), np.log(gf["time"].values[1:]), gf["loss"].values[1:])
    after = ts >= np.nanmin(gf["t_recover"].values)
    assert after.sum() > 40
    assert np.max(np.abs(sgd["loss"].values[1:][after] / Lg[after] - 1)) < 0.10
    # and the recovery times agree
    ok = np.isfinite(gf["t_recover"].values)
    np.testing.assert_allclose(sgd["t_recover"].values[ok], gf["t_recover"].values[ok], rtol=0.05)


@pytest.mark.slow
def test_loss_time_exponent_d512() -> None:
    """d = 512, P = 64, m = 128, β = 0.8 (30-65 s on 2 cores, so marked slow).

    Measured: raw slope -1.02 [-1.05, -0.98] over [T_(4), T_(32)], finite-P-corrected slope
    -0.66 [-0.69, -0.64] (theory -0.75). The raw slope is shifted by finite P (the same window
    on the idealised curve of the same run gives a raw slope near -1.0, and the idealised raw
    slope drifts toward -0.75 as P grows: tests/report/test_scaling.py), so a ±0.15 bound around
    the theory is asserted on the finite-P-corrected estimator, and the raw slope is asserted to
    agree with the idealised curve within ±0.15.
    """
    from richlazy_cli.report.scaling import fit_scaling, ols_fit

    values = Hermite.resolve("solve", {"d": 512, "P": 64, "m": 128, "beta": 0.8,
                                       "t_max": 2000.0, "n_records": 300})
    ds = Hermite().solve(Batch.from_points(Hermite, [values])).isel(point=0)
    ds.attrs["params"] = '{"beta": 0.8, "P": 64, "m": 128, "d": 512}'
    fit = fit_scaling(ds)["time"]
    assert abs(fit["corrected"]["slope"] + 0.75) <= 0.15, fit
    t = ds["time"].values
    lo, hi = fit["window"]
    sel = (t >= lo) & (t <= hi)
    ideal = ols_fit(np.log10(t[sel]), np.log10(ds["loss_theory"].values[sel]))
    assert abs(fit["slope"] - ideal["slope"]) <= 0.15, (fit, ideal)


def test_teacher_weights_power_law_normalised() -> None:
    a = teacher_weights(16, 0.8)
    assert np.sum(a**2) == pytest.approx(1.0, abs=1e-14)
    np.testing.assert_allclose(a / a[0], np.arange(1, 17) ** -0.8, rtol=1e-14)
    np.testing.assert_array_equal(teacher_weights(3, 0.8, np.array([0.5, 0.2, 0.1])),
                                  [0.5, 0.2, 0.1])


def test_minibatch_gradient_is_unbiased() -> None:
    # the online-SGD gradient (docs/hermite.md, eq. (7)) averages to the closed-form population
    # gradient
    V, a = _random_problem(4)
    _, grad = population_loss_grad(V, a, H4)
    g = np.random.default_rng(7)
    chunks = []
    for _ in range(20):  # 20 chunks of 50 000 samples
        x = g.standard_normal((50_000, V.shape[1]))
        fstar = hermite_eval(x[:, : a.size], H4)[0] @ a
        chunks.append(minibatch_grad(V, x, fstar, H4))
    chunks_arr = np.array(chunks)
    mean = chunks_arr.mean(axis=0)
    se = chunks_arr.std(axis=0, ddof=1) / math.sqrt(len(chunks))
    assert np.all(np.abs(mean - grad) <= 4 * se), np.max(np.abs(mean - grad) / se)
    assert np.linalg.norm(mean - grad) < 0.05 * np.linalg.norm(grad)


@pytest.mark.slow
def test_loss_time_exponent_moves_toward_theory_with_size() -> None:
    """d = 512, P = 64, m = 128 against d = 1024, P = 128, m = 256 (about 4 min on 2 cores).

    Measured (window [T_(4), T_(P/2)] of the measured recovery times): raw slope -1.018 at
    P = 64 and -0.955 at P = 128 (idealised curves of the same runs: -1.040 and -0.979).
    """
    from richlazy_cli.report.scaling import ols_fit

    raw = []
    for d, P, m, t_max in ((512, 64, 128, 2000.0), (1024, 128, 256, 1500.0)):
        values = Hermite.resolve("solve", {"d": d, "P": P, "m": m, "beta": 0.8, "t_max": t_max,
                                           "n_records": 300, "decades": 3.0})
        ds = Hermite().solve(Batch.from_points(Hermite, [values])).isel(point=0)
        t, T = ds["time"].values, np.sort(ds["t_recover"].values)
        sel = (t >= T[3]) & (t <= T[P // 2 - 1])
        raw.append(ols_fit(np.log10(t[sel]), np.log10(ds["loss"].values[sel]))["slope"])
    assert raw[1] < -0.75 and raw[0] < raw[1], raw
