"""Tests of the ``diagonal`` model (docs/diagonal.md; Azulay et al. 2021).

Every closed form is checked against an independent computation: reference values computed
independently, quadrature, finite differences, the raw-parameter gradient flow
integrated with ``solve_ivp``, a linear programme (minimum-ℓ1 interpolator) and the
pseudo-inverse (minimum-ℓ2 interpolator).
"""

from __future__ import annotations

import tomllib
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from scipy.integrate import quad, solve_ivp
from scipy.linalg import null_space
from scipy.optimize import linprog

from richlazy_cli.errors import BadInput
from richlazy_cli.models.base import Batch
from richlazy_cli.models.diagonal.model import (
    DiagonalModel,
    implicit_interpolator,
    init_scale_shape,
    make_data,
    q_delta,
    q_delta_prime,
    q_k,
    q_objective,
    solve_flow,
    sqrt_k_symmetric,
    theorem1_constants,
)

ROOT = Path(__file__).resolve().parents[3]
M = DiagonalModel


def run(action: str, points: list[dict]) -> object:
    vals = [M.resolve(action, p) for p in points]
    model = M()
    return model.run(action, Batch.from_points(M, vals))


def min_l1(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Minimum-ℓ1 interpolator by linear programming (w = p − q, p, q ≥ 0)."""
    d = X.shape[1]
    res = linprog(np.ones(2 * d), A_eq=np.hstack([X, -X]), b_eq=y, bounds=(0, None),
                  method="highs")
    assert res.status == 0
    return res.x[:d] - res.x[d:]


def raw_flow_rhs(X: np.ndarray, y: np.ndarray):
    """Gradient flow of L = |Xw − y|²/(2N) on the raw parameters (u+, v+, u−, v−)."""
    n, d = X.shape

    def rhs(_t: float, p: np.ndarray) -> np.ndarray:
        up, vp, um, vm = p.reshape(4, d)
        g = X.T @ (X @ (up * vp - um * vm) - y) / n
        return np.concatenate([-g * vp, -g * up, g * vm, g * um])

    return rhs


# -- reference values, computed independently ----------------------------------------------------


def test_theorem1_constants_of_a_general_initialisation() -> None:
    k, theta = theorem1_constants(0.3, 0.5, 0.2, 0.1)
    assert k == pytest.approx(0.0845, abs=5e-12)
    assert np.sqrt(k) == pytest.approx(0.290689, abs=5e-7)
    assert theta == pytest.approx(0.804719, abs=5e-7)
    # w0 = u+v+ − u−v− = 0.13
    assert np.sqrt(k) / 2 * np.sinh(theta) == pytest.approx(0.3 * 0.5 - 0.2 * 0.1, abs=1e-14)


def test_sqrt_k_of_the_symmetric_initialisation() -> None:
    assert sqrt_k_symmetric(1e-3, 0.9) == pytest.approx(0.0381053, abs=5e-8)
    u0, v0 = init_scale_shape(1e-3, 0.9)
    assert abs(u0**2 - v0**2) == pytest.approx(0.0189474, abs=5e-8)
    assert sqrt_k_symmetric(0.1, 0.5) == pytest.approx(0.666667, abs=5e-7)


@pytest.mark.parametrize("alpha, s", [(1e-3, 0.0), (0.1, 0.5), (2.0, -0.7), (1e-5, 0.99)])
def test_scale_shape_identities(alpha: float, s: float) -> None:
    """alpha = u0 v0, s = (v0 − u0)/(v0 + u0), and the general k, θ reduce to √k, 0."""
    u0, v0 = init_scale_shape(alpha, s)
    assert u0 * v0 == pytest.approx(alpha, rel=1e-13)
    assert (v0 - u0) / (v0 + u0) == pytest.approx(s, abs=1e-13)
    k, theta = theorem1_constants(u0, v0, u0, v0)
    assert np.sqrt(k) == pytest.approx(sqrt_k_symmetric(alpha, s), rel=1e-12)
    assert np.sqrt(k) == pytest.approx(2 * (u0**2 + v0**2), rel=1e-12)
    assert theta == pytest.approx(0.0, abs=1e-12)


def test_q_delta_reference_values() -> None:
    assert q_delta(1.0, 2.0) == pytest.approx(-0.9101797, abs=5e-8)
    assert q_delta_prime(1.0, 2.0) == pytest.approx(0.9653914, abs=5e-8)
    assert q_delta(2.0, 0.0) == pytest.approx(2 ** 1.5, abs=5e-8)
    assert q_delta(0.5, -1.0) == pytest.approx(0.7768870, abs=5e-8)
    assert q_delta_prime(0.5, -1.0) == pytest.approx(1.6480262, abs=5e-8)
    assert q_delta(0.0, 1.0) == -0.5  # the limit x -> 0 (removable 0/0), not 0
    # the derivative formula against central differences
    for delta in (-1.5, 0.0, 0.7, 3.0):
        for x in (0.2, 1.0, 2.5):
            h = 1e-6
            fd = (q_delta(x + h, delta) - q_delta(x - h, delta)) / (2 * h)
            assert fd == pytest.approx(q_delta_prime(x, delta), rel=1e-7)


# -- q_k ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1e-16, 1e-8, 1e-3, 0.3, 5.0, 1e4])
def test_q_k_closed_form_matches_quadrature(k: float) -> None:
    """q_k(x) = ½∫₀ˣ arcsinh(2z/√k) dz (docs/diagonal.md, eq. (8)) by adaptive quadrature."""
    for x in (-2.0, -0.3, 1e-6, 0.05, 0.7, 3.0):
        # split at multiples of √k, where the integrand bends (a near-kink for tiny k)
        cuts = [c for c in np.sqrt(k) * np.array([1.0, 10.0, 1e3, 1e5]) if c < abs(x)]
        edges = np.sign(x) * np.array([0.0, *cuts, abs(x)])
        ref = sum(quad(lambda z: 0.5 * np.arcsinh(2 * z / np.sqrt(k)), a, b,
                       epsabs=0, epsrel=1e-13, limit=200)[0] for a, b in pairwise(edges))
        assert q_k(x, k) == pytest.approx(ref, rel=1e-10, abs=1e-300)


def test_q_k_limits() -> None:
    """k → ∞: q ≈ x²/(2√k) (ℓ2); k → 0: q ≈ (|x|/2)(ln(4|x|/√k) − 1) (ℓ1): eq. (9)."""
    x = np.array([-1.3, 0.4, 2.0])
    k = 1e16
    assert np.allclose(q_k(x, k), x**2 / (2 * np.sqrt(k)), rtol=1e-12)
    k = 1e-24
    approx = np.abs(x) / 2 * (np.log(4 * np.abs(x) / np.sqrt(k)) - 1)
    assert np.allclose(q_k(x, k), approx, rtol=1e-12)


# -- the flow: reparametrisation, conservation, Theorem 1 ----------------------------------------


def small_problem(seed: int = 3, n: int = 4, d: int = 8) -> tuple[np.ndarray, np.ndarray]:
    g = np.random.default_rng(seed)
    return g.standard_normal((n, d)), g.standard_normal(n)


def test_theorem1_general_initialisation_limit_and_conservation() -> None:
    """Raw-parameter GF (solve_ivp, rtol 1e-12) from a general asymmetric initialisation:
    u±² − v±² conserved, w(t) = (√k/2) sinh(2ν + θ) with ν ∈ range(Xᵀ), and the limit equals
    argmin Q (Theorem 1) from the damped-Newton dual solver."""
    X, y = small_problem()
    d = X.shape[1]
    g = np.random.default_rng(7)
    up, vp, um, vm = (g.uniform(0.05, 0.6, d) * g.choice([-1, 1], d) for _ in range(4))
    p0 = np.concatenate([up, vp, um, vm])
    sol = solve_ivp(raw_flow_rhs(X, y), (0, 400), p0, method="DOP853", rtol=1e-12,
                    atol=1e-14, dense_output=True)
    assert sol.success
    for t in (0.0, 1.0, 10.0, 400.0):
        a, b, c, e = sol.sol(t).reshape(4, d)
        assert np.max(np.abs((a**2 - b**2) - (up**2 - vp**2))) < 1e-11
        assert np.max(np.abs((c**2 - e**2) - (um**2 - vm**2))) < 1e-11
    k, theta = theorem1_constants(up, vp, um, vm)
    a, b, c, e = sol.y[:, -1].reshape(4, d)
    w_end = a * b - c * e
    assert np.linalg.norm(X @ w_end - y) < 1e-9
    # the mirror coordinate 2ν = arcsinh(2w/√k) − θ lies in range(Xᵀ)
    two_nu = np.arcsinh(2 * w_end / np.sqrt(k)) - theta
    assert np.linalg.norm(null_space(X).T @ two_nu) < 1e-8
    w_imp, _, _ = implicit_interpolator(X, y, np.sqrt(k), theta)
    assert np.max(np.abs(w_imp - w_end)) < 1e-10 * max(1.0, np.max(np.abs(w_end)))


def test_mirror_flow_matches_raw_flow_along_trajectory() -> None:
    """The solver's N-dimensional mirror flow equals the raw 4d-dimensional GF at finite times."""
    X, y = small_problem(seed=11, n=5, d=12)
    d = X.shape[1]
    alpha, s = 0.02, 0.5
    u0, v0 = init_scale_shape(alpha, s)
    p0 = np.concatenate([np.full(d, u0), np.full(d, v0), np.full(d, u0), np.full(d, v0)])
    times = np.array([0.0, 0.5, 2.0, 8.0])
    raw = solve_ivp(raw_flow_rhs(X, y), (0, 8.0), p0, method="DOP853", rtol=1e-12, atol=1e-15,
                    t_eval=times)
    for j, t in enumerate(times[1:], start=1):
        out = solve_flow(X, y, float(sqrt_k_symmetric(alpha, s)), 1e-300, times[: j + 1], t,
                         rtol=1e-12, atol=1e-14)
        a, b, c, e = raw.y[:, j].reshape(4, d)
        w_raw = a * b - c * e
        assert np.max(np.abs(out["w"] - w_raw)) < 1e-8
        assert out["loss"][-1] == pytest.approx(np.mean((X @ w_raw - y) ** 2), rel=1e-7)


def test_implicit_interpolator_is_the_constrained_minimiser() -> None:
    """KKT by an independent route: the gradient of Q projected on null(X) vanishes, Xw = y,
    and Q grows along random feasible directions."""
    values = M.resolve("solve", {"alpha": 1e-4, "s": 0.5})
    X, y, _ = make_data(values)
    rk = float(sqrt_k_symmetric(1e-4, 0.5))
    w, _, _ = implicit_interpolator(X, y, rk)
    assert np.linalg.norm(X @ w - y) < 1e-10 * np.linalg.norm(y)
    grad_q = 0.5 * np.arcsinh(2 * w / rk)  # q_k'(w)
    basis = null_space(X)
    assert np.linalg.norm(basis.T @ grad_q) < 1e-8 * np.linalg.norm(grad_q)
    g = np.random.default_rng(0)
    q0 = q_objective(w, rk**2)
    for _ in range(20):
        p = basis @ g.standard_normal(basis.shape[1])
        p *= 1e-3 / np.linalg.norm(p)
        assert q_objective(w + p, rk**2) > q0
        assert q_objective(w - p, rk**2) > q0


@pytest.mark.parametrize("s", [0.0, 0.5, 0.9])
def test_flow_end_point_matches_theorem1(s: float) -> None:
    """Theorem 1 (eq. (7)): the flow's end point equals w_implicit to 1e-4 (relative), small alpha.

    The end point is where the train MSE first drops below ``tol``; at the default tol = 1e-8
    (N = 20) it sits ~2e-4 from the limit, so the flow is run to tol = 1e-12 here.
    """
    ds = run("solve", [{"alpha": a, "s": s, "tol": 1e-12} for a in (1e-5, 1e-3)])
    assert np.all(ds.converged.values == 1)
    for i in range(2):
        w, w_imp = ds.w.values[i], ds.w_implicit.values[i]
        assert np.linalg.norm(w - w_imp) / np.linalg.norm(w_imp) < 1e-4
        assert ds.implicit_gap.values[i] < 1e-4


def test_alpha_to_zero_gives_min_l1_and_to_infinity_min_l2() -> None:
    """Rich (α → 0, s = 0): distance to the LP minimum-ℓ1 interpolator shrinks monotonically;
    lazy (α → ∞): distance to the pseudo-inverse minimum-ℓ2 interpolator shrinks monotonically."""
    base = {"seed": 0, "tol": 1e-12}
    X, y, _ = make_data(M.resolve("solve", base))
    w1 = min_l1(X, y)
    w2 = np.linalg.pinv(X) @ y
    small = (1e-1, 1e-2, 1e-4, 1e-6, 1e-8, 1e-12)
    ds = run("solve", [{**base, "alpha": a} for a in small])
    dist1 = np.linalg.norm(ds.w.values - w1, axis=1) / np.linalg.norm(w1)
    assert np.all(np.diff(dist1) < 0), dist1
    assert dist1[-1] < 0.03
    large = (1e-2, 1e-1, 1.0, 10.0, 100.0)
    ds = run("solve", [{**base, "alpha": a} for a in large])
    dist2 = np.linalg.norm(ds.w.values - w2, axis=1) / np.linalg.norm(w2)
    assert np.all(np.diff(dist2) < 0), dist2
    assert dist2[-1] < 1e-5


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_population_error_grows_with_shape(seed: int) -> None:
    """Azulay §7: at fixed small α, s → 1 pushes toward the kernel regime and the population
    error ‖w − β*‖² grows with s."""
    ds = run("solve", [{"alpha": 1e-4, "s": s, "seed": seed}
                       for s in (0.0, 0.5, 0.7, 0.9, 0.99)])
    pop = ds.population_error.values
    assert np.all(np.diff(pop) > 0), pop
    assert pop[-1] > 2 * pop[0]
    # population error is exactly |w − β*|² with the teacher the data was made from
    _, _, beta = make_data(M.resolve("solve", {"seed": seed}))
    assert np.allclose(pop, np.sum((ds.w.values - beta) ** 2, axis=1), rtol=1e-14)


# -- GD ------------------------------------------------------------------------------------------


def test_loss_convention_one_gd_step() -> None:
    """Pins the convention: gradient of |Xw − y|²/(2N), reported train MSE |Xw − y|²/N.

    From the symmetric initialisation (w0 = 0) one GD step gives w1 = lr·√k·Xᵀy/N exactly up to
    the O(lr²) terms that cancel between the ± branches."""
    values = {"alpha": 0.05, "s": 0.3, "lr": 1e-2, "max_steps": 1, "tol": 1e-300}
    ds = run("train", [values])
    X, y, _ = make_data(M.resolve("train", values))
    rk = float(sqrt_k_symmetric(0.05, 0.3))
    expected = 1e-2 * rk * X.T @ y / X.shape[0]
    assert np.allclose(ds.w.values[0], expected, rtol=1e-12, atol=1e-16)
    assert ds.train_loss.values[0, 0] == pytest.approx(np.mean(y**2), rel=1e-14)
    assert ds.train_loss.values[0, -1] == pytest.approx(np.mean((X @ expected - y) ** 2),
                                                        rel=1e-12)
    assert ds.steps.values[0] == 1


def test_gd_tends_to_gf_as_lr_shrinks() -> None:
    """GD end point → GF end point (same tol) with error O(lr): halving lr halves the gap."""
    base = {"alpha": 0.05, "s": 0.5, "tol": 1e-6}
    w_gf = run("solve", [base]).w.values[0]
    gaps, times = [], []
    ds = run("train", [{**base, "lr": lr} for lr in (4e-3, 2e-3, 1e-3)])
    assert np.all(ds.converged.values == 1)
    for i in range(3):
        gaps.append(np.linalg.norm(ds.w.values[i] - w_gf) / np.linalg.norm(w_gf))
        times.append(ds.time_to_tol.values[i])
    assert gaps[2] < 5e-5
    assert 1.6 < gaps[0] / gaps[1] < 2.4 and 1.6 < gaps[1] / gaps[2] < 2.4, gaps
    t_gf = float(run("solve", [base]).time_to_tol.values[0])
    assert abs(times[2] - t_gf) / t_gf < 0.01


def test_gd_conservation_per_step_identity() -> None:
    """Under GF u² − v² is conserved; one GD step multiplies it by exactly (1 − lr²g²), so at a
    fixed time T the drift is first order, ≈ lr·∫g², and halves with lr."""
    X, y = small_problem()
    n, d = X.shape
    u0, v0 = init_scale_shape(0.1, 0.5)
    drifts = []
    for lr in (1e-2, 5e-3):
        up, vp = np.full(d, u0), np.full(d, v0)
        um, vm = up.copy(), vp.copy()
        for _ in range(round(1.0 / lr)):  # up to time 1
            g = X.T @ (X @ (up * vp - um * vm) - y) / n
            before = up**2 - vp**2
            up, vp, um, vm = up - lr * g * vp, vp - lr * g * up, um + lr * g * vm, vm + lr * g * um
            assert np.allclose(up**2 - vp**2, before * (1 - lr**2 * g**2), rtol=1e-12, atol=0)
        drifts.append(np.max(np.abs((up**2 - vp**2) - (u0**2 - v0**2))))
    assert 1.8 < drifts[0] / drifts[1] < 2.2, drifts


def test_train_divergence_sets_status() -> None:
    ds = run("train", [{"alpha": 0.5, "s": 0.0, "lr": 5.0, "max_steps": 2000},
                       {"alpha": 0.5, "s": 0.0, "lr": 1e-2, "max_steps": 2000}])
    assert ds.status.values.tolist() == [1, 0]
    assert np.all(np.isnan(ds.w.values[0]))
    assert np.all(np.isfinite(ds.w.values[1]))


# -- batching, validation, data files, job files --------------------------------------------------


def test_time_coordinate_depends_only_on_non_batchable() -> None:
    a = run("solve", [{"alpha": 1e-3}])
    b = run("solve", [{"alpha": 0.2, "s": 0.9}, {"alpha": 1e-5}])
    assert np.array_equal(a.time.values, b.time.values)
    # after convergence the loss keeps its final value, which is below tol
    loss = b.train_loss.values
    assert np.all(loss[:, -1] < 1e-8)


def test_check_rejects_bad_combinations() -> None:
    with pytest.raises(BadInput, match="N"):
        M.resolve("solve", {"d": 10, "N": 20})
    with pytest.raises(BadInput, match="r"):
        M.resolve("solve", {"d": 10, "N": 5, "r": 11})
    with pytest.raises(BadInput, match="s"):
        M.resolve("solve", {"s": 1.0})
    with pytest.raises(BadInput, match="alpha"):
        M.resolve("solve", {"alpha": 0.0})


def test_user_data_file(tmp_path: Path) -> None:
    g = np.random.default_rng(5)
    X = g.standard_normal((6, 15))
    beta = np.zeros(15)
    beta[[2, 9]] = 1.0
    y = X @ beta
    path = tmp_path / "data.npz"
    np.savez(path, X=X, y=y, beta_star=beta)
    values = M.resolve("solve", {"data": str(path), "alpha": 1e-3, "tol": 1e-12})
    assert (values["N"], values["d"]) == (6, 15)
    ds = M().solve(Batch.from_points(M, [values]))
    assert ds.converged.values[0] == 1
    assert np.linalg.norm(X @ ds.w.values[0] - y) < np.sqrt(6e-12) * (1 + 1e-9)
    # a 2-sparse teacher with 6 Gaussian measurements: the rich regime nearly recovers it,
    # far better than the minimum-ℓ2 interpolator
    pop_l2 = np.sum((np.linalg.pinv(X) @ y - beta) ** 2)
    assert ds.population_error.values[0] < min(5e-3, 0.01 * pop_l2)
    np.savez(tmp_path / "nobeta.npz", X=X, y=y)
    ds = run("solve", [{"data": str(tmp_path / "nobeta.npz")}])
    assert np.isnan(ds.population_error.values[0])
    np.savez(tmp_path / "tall.npz", X=X.T, y=np.ones(15))
    np.save(tmp_path / "plain.npy", X)
    (tmp_path / "text.npz").write_text("not an archive")
    np.savez(tmp_path / "noy.npz", X=X)
    for name in ("tall.npz", "plain.npy", "text.npz", "noy.npz", "missing.npz"):
        with pytest.raises(BadInput, match="data"):
            M.resolve("solve", {"data": str(tmp_path / name)})


def test_job_files() -> None:
    full = tomllib.loads((ROOT / "jobs" / "azulay-diagonal.toml").read_text())
    assert full["model"] == "diagonal" and full["action"] in ("solve", "train")
    assert full["params"]["d"] == 1000 and full["params"]["N"] == 100
    assert full["params"]["r"] == 5 and full["params"]["noise"] == 0.01
    assert full["grid"]["alpha"] == "logspace(-5,-0.6,20)"
    assert [float(x) for x in str(full["grid"]["s"]).split(",")] == [0, 0.5, 0.7, 0.9, 0.99]
    assert list(full["grid"]) == ["alpha", "s", "seed"]
    small = tomllib.loads((ROOT / "jobs" / "azulay-diagonal-small.toml").read_text())
    assert small["model"] == "diagonal" and list(small["grid"]) == ["alpha", "s", "seed"]
    for job in (full, small):
        M.resolve(job["action"], job["params"])  # every fixed parameter is valid


# -- paper-sized checks (slow) ---------------------------------------------------------------------

PAPER = {"d": 1000, "N": 100, "r": 5, "noise": 0.01}


@pytest.mark.slow
def test_paper_size_end_point_matches_theorem1() -> None:
    """d = 1000, N = 100: flow end point vs w_implicit to 1e-4 for s ∈ {0, 0.5, 0.9}."""
    ds = run("solve", [{**PAPER, "alpha": a, "s": s, "tol": 1e-12}
                       for a in (1e-4, 1e-3) for s in (0.0, 0.5, 0.9)])
    assert np.all(ds.converged.values == 1)
    assert np.all(ds.implicit_gap.values < 1e-4), ds.implicit_gap.values


@pytest.mark.slow
def test_paper_size_solve_matches_study_gd() -> None:
    """The bench claim as a test: the study's GD (lr 1e-3, stop at train MSE < 1e-4) and
    ``solve`` with tol = 1e-4 end within 1e-3 (relative) of each other, at the same time."""
    point = {**PAPER, "alpha": 1e-3, "s": 0.5, "tol": 1e-4}
    gf = run("solve", [point])
    gd = run("train", [{**point, "lr": 1e-3, "max_steps": 200_000}])
    assert gd.converged.values[0] == 1
    w_gf, w_gd = gf.w.values[0], gd.w.values[0]
    assert np.linalg.norm(w_gf - w_gd) / np.linalg.norm(w_gd) < 1e-3
    t_gf, t_gd = gf.time_to_tol.values[0], gd.time_to_tol.values[0]
    assert abs(t_gf - t_gd) / t_gd < 1e-3


# -- end to end through the command line -----------------------------------------------------------


@pytest.mark.system
def test_cli_small_job_and_bad_input(cli, tmp_path: Path) -> None:

    out = tmp_path / "small.h5"
    result = cli("sweep", "solve", "diagonal", "-c", ROOT / "jobs" / "azulay-diagonal-small.toml",
                 "-o", out, "--jobs", "1", "-q")
    assert result.code == 0, result.err
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert list(ds.population_error.dims) == ["alpha", "s", "seed"]
        assert np.all(ds.status.values == 0) and np.all(ds.converged.values == 1)
        # the Azulay §7 picture at the smallest alpha: population error grows with s
        pop = ds.population_error.isel(alpha=0).mean("seed").values
        assert np.all(np.diff(pop) > 0), pop
        # and with alpha at s = 0 (rich → lazy)
        pop = ds.population_error.sel(s=0.0).mean("seed").values
        assert np.all(np.diff(pop) > 0), pop
    bad = cli("solve", "diagonal", "-p", "d=10", "-p", "N=20", "-o", tmp_path / "x.h5")
    assert bad.code == 2 and "N" in bad.err and len(bad.err.strip().splitlines()) == 1
