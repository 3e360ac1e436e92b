"""Tests of the single-neuron model (docs/single-neuron.md; Kunin et al. 2024, §3).

Every closed form is checked against an independent computation: ``solve_ivp`` on the
parameter-space ODE, reference values computed independently (ODE, quadrature), explicit
matrices, analytic limits and the eta-rescaling symmetry.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import xarray as xr

from richlazy_cli.errors import BadInput
from richlazy_cli.models.base import Batch, all_models
from richlazy_cli.models.single_neuron.model import (
    SingleNeuron,
    exact_trajectory,
    implicit_interpolant,
    init_from_beta,
    kernel_distance,
    numeric_limit,
    numeric_trajectory,
    preconditioner,
)

EXACT = {"method": "exact"}
NUMERIC = {"method": "numeric"}
DELTAS = (-4.0, -2.0, -1.0, -0.2, 0.0, 0.02, 0.2, 1.0, 2.0, 4.0)
ANGLES = (0.0, 45.0, 90.0, 135.0, 180.0, 270.0)


def solve(points: list[dict[str, Any]]) -> xr.Dataset:
    """Resolve (validate) every point, stack them into one batch and solve."""
    values = [SingleNeuron.resolve("solve", p) for p in points]
    return SingleNeuron().solve(Batch.from_points(SingleNeuron, values))


def angle_grid(beta_star: np.ndarray, e_perp: np.ndarray) -> list[np.ndarray]:
    """Unit-norm beta0 at the angles ANGLES from beta_star, in the plane of (beta*, e_perp)."""
    bh = beta_star / np.linalg.norm(beta_star)
    e = e_perp - (e_perp @ bh) * bh
    e /= np.linalg.norm(e)
    return [np.cos(np.radians(t)) * bh + np.sin(np.radians(t)) * e for t in ANGLES]


def test_registered() -> None:
    assert all_models()["single-neuron"] is SingleNeuron
    assert SingleNeuron.actions == ("solve",)


# -- exact vs numeric -----------------------------------------------------------------------
SETTINGS = {
    "default": dict(d=2, eta_a=1.0, eta_w=1.0, beta_star=np.array([0.0, 1.0]),
                    e_perp=np.array([1.0, 0.0])),
    "eta-d5": dict(d=5, eta_a=2.0, eta_w=0.5, beta_star=np.array([1.0, -0.5, 0.3, 0.2, 0.7]),
                   e_perp=np.array([0.2, 1.0, 0.0, -0.4, 0.1])),
}


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_exact_matches_numeric(setting: str) -> None:
    """Eqs. (5)-(7) against eq. (1): max |exact - numeric| <= 1e-7 in a, w, mu, phi, S over
    t in [0, 20], for every delta in DELTAS x beta0 at every angle in ANGLES, as one batch.

    One configuration is special: delta = 0 with beta0 anti-aligned (180 deg) lies exactly on
    the stable manifold of the saddle at the origin (basin score P = 0, the basin
    hyperplane of docs/single-neuron.md, eq. (8)), so rounding errors of size 1e-16 grow like
    exp(lambda_+ t) = exp(gamma b t) and the problem itself is ill-conditioned (in the eta-d5
    setting gamma b t = 27.5 at t = 20).
    There we compare a, w, mu while the amplification of absolute errors stays below 1e7, i.e.
    t <= 16 / (gamma b), and the direction-type quantities phi and S (relative errors, amplified
    like exp(2 gamma b t) as |w| shrinks) for t <= 8 / (gamma b); and we check that both
    solutions head for the saddle (|a| shrinks by > 1e4 by t = 16 / (gamma b)).
    """
    s = SETTINGS[setting]
    points = []
    for delta in DELTAS:
        for beta0 in angle_grid(s["beta_star"], s["e_perp"]):
            points.append(dict(d=s["d"], eta_a=s["eta_a"], eta_w=s["eta_w"],
                               beta_star=s["beta_star"], beta0=beta0, delta=delta))
    ds = solve(points)
    assert list(ds["method"].values) == ["exact", "numeric"]
    saddle = DELTAS.index(0.0) * len(ANGLES) + ANGLES.index(180.0)
    gamma_b = np.sqrt(s["eta_a"] * s["eta_w"]) * np.linalg.norm(s["beta_star"])
    t_ok = 16.0 / gamma_b
    for name in ("a", "w", "mu", "phi", "kernel_distance"):
        diff = abs(ds[name].sel(EXACT) - ds[name].sel(NUMERIC))
        others = diff.drop_isel(point=saddle)
        assert float(others.max()) <= 1e-7, name
        t_cmp = t_ok if name in ("a", "w", "mu") else t_ok / 2
        assert float(diff.isel(point=saddle).sel(time=slice(0, t_cmp)).max()) <= 1e-7, name
    a_saddle = ds["a"].isel(point=saddle).sel(time=slice(0, t_ok))
    assert np.all(abs(a_saddle.isel(time=-1)) < 1e-4 * abs(a_saddle.isel(time=0)))
    # some trajectories make a(t) cross zero (delta < 0 on the far side of the basin boundary)
    a_ex = ds["a"].sel(EXACT)
    crossed = (a_ex.min("time") < 0) & (a_ex.isel(time=0) > 0)
    assert int(crossed.sum()) >= 1
    # the conserved quantity drifts <= 1e-8 along the numeric trajectories (eq. (2))
    dt = ds["delta_t"].sel(NUMERIC)
    assert float(abs(dt - dt.isel(time=0)).max()) <= 1e-8
    # and the initial value is the requested delta (initialisation, eq. (3))
    np.testing.assert_allclose(dt.isel(time=0), np.repeat(DELTAS, len(ANGLES)), atol=1e-12)
    np.testing.assert_allclose(ds["beta"].sel(EXACT).isel(time=0),
                               np.array([p["beta0"] for p in points]), atol=1e-14)


def test_init_from_beta_is_stable_and_unique() -> None:
    """a0 > 0, a0 w0 = beta0 and eta_w a0^2 - eta_a |w0|^2 = delta, with eta_w a0^2 equal to the
    positive root (delta + sqrt(delta^2 + 4 gamma^2 |beta0|^2)) / 2 evaluated in 60-digit decimal
    arithmetic, to relative precision 1e-14, also for |delta| = 1e3 and |beta0| = 1e-6 (where
    the naive float formula loses up to 12 digits to cancellation)."""
    from decimal import Decimal, getcontext

    getcontext().prec = 60
    deltas = np.array([-1e3, -1.0, 0.0, 1e-3, 1.0, 1e3] * 2)
    beta0 = np.array([[0.6, -0.8]] * 6 + [[0.6e-6, -0.8e-6]] * 6)
    ea = np.full(12, 2.0)
    ew = np.full(12, 0.5)
    a0, w0 = init_from_beta(beta0, deltas, ea, ew)
    assert np.all(a0 > 0)
    np.testing.assert_allclose(a0[:, None] * w0, beta0, rtol=1e-15)
    for i in range(12):
        dl = Decimal(float(deltas[i]))
        x = Decimal(float(ea[i])) * Decimal(float(ew[i])) * sum(Decimal(float(b)) ** 2
                                                               for b in beta0[i])
        root = (dl + (dl * dl + 4 * x).sqrt()) / 2
        assert abs(float(ew[i] * a0[i] ** 2) / float(root) - 1.0) < 1e-14
        q_exact = float(root - dl)  # eta_a |w0|^2
        q = float(ea[i] * (w0[i] @ w0[i]))
        assert abs(q / q_exact - 1.0) < 1e-14


# -- regimes --------------------------------------------------------------------------------
def test_lazy_regime() -> None:
    """delta = 50 (default beta* = [0,1], beta0 = [-1,0] perpendicular): S(0,20) < 0.01 and
    |beta(20) - beta*| < 1e-3."""
    ds = solve([dict(delta=50.0, method="both")])
    for m in (EXACT, NUMERIC):
        p = ds.sel(m).isel(point=0)
        assert float(p["kernel_distance"].isel(time=-1)) < 0.01
        assert np.linalg.norm(p["beta"].isel(time=-1).values - [0.0, 1.0]) < 1e-3


def test_rich_regime() -> None:
    """delta = 0 from |beta0| = 1e-3: S(0,20) > 0.15 (0.2 is the supremum: M rotates from
    I + b0 b0^T to I + b* b*^T, unit b0 perpendicular to b*, so <M0, M20>/|M|^2 -> 4/5)."""
    ds = solve([dict(delta=0.0, beta0=[-1e-3, 0.0], method="both")])
    for m in (EXACT, NUMERIC):
        s20 = float(ds["kernel_distance"].sel(m).isel(point=0, time=-1))
        assert 0.15 < s20 <= 0.2 + 1e-12


def test_delayed_rich_regime() -> None:
    """delta = -50: phi stays within 0.05 of phi(0) until t = 5, yet S(0, 2000) > 0.9 (M turns
    from rank-one along beta0 to rank-one along beta*)."""
    ds = solve([dict(delta=-50.0, method="exact", t_max=2000.0, n_records=4001)])
    p = ds.sel(EXACT).isel(point=0)
    phi = p["phi"]
    assert float(abs(phi.sel(time=slice(0, 5)) - phi.isel(time=0)).max()) < 0.05
    assert float(p["kernel_distance"].isel(time=-1)) > 0.9
    # cross-check the early phase against the ODE (stiff but short)
    ds_n = solve([dict(delta=-50.0, method="both", t_max=5.0, n_records=51)])
    for name in ("phi", "kernel_distance"):
        diff = ds_n[name].sel(EXACT) - ds_n[name].sel(NUMERIC)
        assert float(abs(diff).max()) < 1e-8


# -- implicit bias --------------------------------------------------------------------------
X1 = [[0.5, 1.0]]
Y1 = [1.1]
BETA0_IB = np.array([0.4, 0.05])


def test_implicit_bias_one_dimensional_null_space() -> None:
    """X = [[0.5, 1]], y = [1.1], beta0 = [0.4, 0.05]: the numeric limit (|grad| < 1e-10)
    matches the Theorem 3.1 closed form to 1e-6 for delta in {-4, -2, -1, 0, 1, 2, 4}."""
    deltas = [-4.0, -2.0, -1.0, 0.0, 1.0, 2.0, 4.0]
    ds = solve([dict(X=X1, y=Y1, beta0=BETA0_IB, delta=d, method="numeric", t_max=5.0)
                for d in deltas])
    assert ds["beta_inf"].dims == ("point", "dim")
    binf = ds["beta_inf"].values
    bimp = ds["beta_implicit"].values
    np.testing.assert_allclose(np.asarray(X1) @ binf.T, [Y1 * len(deltas)], atol=1e-9)
    assert np.max(np.abs(binf - bimp)) <= 1e-6
    # the limits differ by O(1) across delta, so the match is not a triviality
    assert np.ptp(binf[:, 0]) > 0.5


def test_implicit_bias_large_delta_limits() -> None:
    """|delta| -> infinity (docs/single-neuron.md after eq. (12): Psi becomes
    quadratic).

    delta -> +inf: a is large and nearly frozen (a = a0), so beta = a0 w follows plain linear
    gradient flow from beta0, which ends at the l2 projection of beta0 onto {X beta = y}.
    delta -> -inf: |w| is large and w barely turns, so beta = a w moves along the ray of beta0
    and ends at the interpolator t* beta0 with t* = y / (X beta0) (= 4.4 > 0 here, a keeps its
    sign). The closed form shows the same: alpha -> c cot(angle(beta0, v)) for delta -> -inf.
    """
    X = np.asarray(X1)
    y = np.asarray(Y1)
    proj = BETA0_IB + X[0] * (y[0] - X[0] @ BETA0_IB) / (X[0] @ X[0])
    along = BETA0_IB * y[0] / (X[0] @ BETA0_IB)
    ds = solve([dict(X=X1, y=Y1, beta0=BETA0_IB, delta=d, method="numeric", t_max=1.0,
                     n_records=2) for d in (1e4, -1e4)])
    bimp = ds["beta_implicit"].values
    assert np.linalg.norm(bimp[0] - proj) < 1e-3
    assert np.linalg.norm(bimp[1] - along) < 1e-3
    assert np.linalg.norm(proj - along) > 0.5


def test_implicit_bias_general_null_space() -> None:
    """d = 5, n = 3 (two-dimensional null space): the lambda-parametrisation least-squares
    interpolant (eq. (14)) matches the numeric limit to 1e-6, for delta of both
    signs, including a trajectory on which a changes sign (s = -1)."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(3, 5))
    y = rng.normal(size=3)
    points = [dict(d=5, X=X, y=y, a0=a0, w0=w0, method="numeric", t_max=1.0, n_records=2)
              for a0, w0 in [(0.3, rng.normal(size=5)), (1.5, 0.3 * rng.normal(size=5)),
                             (0.8, rng.normal(size=5)), (0.05, -rng.normal(size=5))]]
    ds = solve(points)
    assert np.max(np.abs(ds["beta_inf"].values - ds["beta_implicit"].values)) <= 1e-6
    deltas = [p["a0"] ** 2 - p["w0"] @ p["w0"] for p in points]
    assert min(deltas) < 0 < max(deltas)
    a_inf, _ = numeric_limit(points[3]["a0"], points[3]["w0"], 1.0, 1.0, X.T @ X, X.T @ y)
    assert a_inf < 0 < points[3]["a0"]  # s = -1 on this one


def test_implicit_bias_reference_values() -> None:
    """Implicit bias (eq. (12)) with X = [1 0], y = 1: reference values."""
    pts = [dict(a0=1.5, w0=[0.3, 0.4]), dict(a0=0.3, w0=[0.3, 0.4]), dict(a0=0.2, w0=[-0.8, 0.4])]
    ds = solve([dict(X=[[1.0, 0.0]], y=[1.0], method="numeric", t_max=1.0, n_records=2, **p)
                for p in pts])
    expected = np.array([[1.0, 0.6389829], [1.0, 0.4], [1.0, -0.3450288]])
    np.testing.assert_allclose(ds["beta_inf"].values, expected, atol=5e-7)
    np.testing.assert_allclose(ds["beta_implicit"].values, expected, atol=5e-7)
    G = np.array([[1.0, 0.0], [0.0, 0.0]])
    a_inf, _ = numeric_limit(0.2, np.array([-0.8, 0.4]), 1.0, 1.0, G, np.array([1.0, 0.0]))
    assert abs(a_inf - (-0.862572)) < 5e-7
    # with the wrong sign s = +1 the prediction is off by O(1) (the sign caveat after eq. (12))
    wrong = implicit_interpolant(np.array([[1.0, 0.0]]), np.array([1.0]),
                                 np.array([[-0.8, 0.4]]), np.array([-0.76]), 1.0, 1.0, 1.0)
    assert np.linalg.norm(wrong[0] - expected[2]) > 0.1


# -- reference values, computed independently ---------------------------------------------------
def test_balanced_reference_values() -> None:
    """Balanced closed form, reference values: eta = 1, beta* = (0,1), w0 = (-1,0), a0 = 1
    (delta = 0)."""
    ds = solve([dict(a0=1.0, w0=[-1.0, 0.0], t_max=2.0, n_records=5)])
    for m in (EXACT, NUMERIC):
        p = ds.sel(m).isel(point=0).sel(time=[0.5, 1.0, 2.0])
        np.testing.assert_allclose(p["mu"], [0.6090918, 0.6243979, 0.8503546], atol=5e-7)
        np.testing.assert_allclose(p["phi"], [0.4621172, 0.7615942, 0.9640276], atol=5e-7)


def test_sign_flip_reference_values() -> None:
    """Sign flip, reference values: delta = -1.21, beta* = (1,0), w0 = (-1,0.5), a0 = 0.2."""
    values = SingleNeuron.resolve("solve", dict(beta_star=[1.0, 0.0], a0=0.2, w0=[-1.0, 0.5],
                                                t_max=3.0, n_records=4))
    assert values["delta"] == pytest.approx(-1.21, abs=1e-15)
    ds = SingleNeuron().solve(Batch.from_points(SingleNeuron, [values]))
    for m in (EXACT, NUMERIC):
        p = ds.sel(m).isel(point=0)
        np.testing.assert_allclose(p["a"].sel(time=[1.0, 3.0]), [-0.5175694, -0.7388077],
                                   atol=5e-7)
        np.testing.assert_allclose(p["w"].sel(time=3.0), [-1.3128532, 0.1795919], atol=5e-7)
    one = np.ones(1)
    a, _ = exact_trajectory(np.array([0.2]), np.array([[-1.0, 0.5]]), np.array([-1.21]),
                            np.array([[1.0, 0.0]]), one, one, np.array([1e3, 1e6]))
    np.testing.assert_allclose(a[0], -0.7508467, atol=5e-7)
    # the limit from the conserved δ and the fit a∞ w∞ = β*: a∞² (a∞² − δ) = ‖β*‖², so
    # a∞² = (δ + √(δ² + 4‖β*‖²))/2, computed independently of the trajectory
    a_inf2 = (-1.21 + np.sqrt(1.21**2 + 4 * 1.0)) / 2
    np.testing.assert_allclose(np.asarray(a[0]) ** 2, a_inf2, rtol=1e-6)


def test_preconditioner_reference_values() -> None:
    """Preconditioner (eq. (9)), reference values: beta = (3,4), delta = 1, eta = 1:
    kappa = 10.0498756, eigenvalues of M 5.5249378 (perpendicular to beta) and 10.0498756 (along
    beta); M = a^2 I + w w^T."""
    a0, w0 = init_from_beta(np.array([[3.0, 4.0]]), np.array([1.0]), np.ones(1), np.ones(1))
    M = preconditioner(a0, w0, 1.0, 1.0)[0]
    vals, vecs = np.linalg.eigh(M)
    np.testing.assert_allclose(vals, [5.5249378, 10.0498756], atol=5e-7)
    assert abs(abs(vecs[:, 1] @ np.array([0.6, 0.8])) - 1.0) < 1e-12
    kappa = np.sqrt(1 + 4 * 25)
    np.testing.assert_allclose(M, (kappa + 1) / 2 * np.eye(2)
                               + (kappa - 1) / 2 * np.outer([0.6, 0.8], [0.6, 0.8]), atol=1e-12)


def test_kernel_distance_matches_explicit_frobenius() -> None:
    """S(0,t) from the trace identities equals 1 - <K0,Kt>/(|K0||Kt|) computed with explicit
    K = X M X^T matrices (random X, random trajectory points), and with K = M when X is None."""
    rng = np.random.default_rng(3)
    B, T, d, n = 3, 4, 3, 5
    a = rng.normal(size=(B, T))
    w = rng.normal(size=(B, T, d))
    ea = rng.uniform(0.5, 2, B)
    ew = rng.uniform(0.5, 2, B)
    X = rng.normal(size=(n, d))
    M = preconditioner(a, w, ea[:, None], ew[:, None])
    for Xm in (X, None):
        K = M if Xm is None else np.einsum("ij,btjk,lk->btil", Xm, M, Xm)
        inner = np.einsum("bij,btij->bt", K[:, 0], K)
        norms = np.sqrt(np.einsum("btij,btij->bt", K, K))
        expected = 1 - inner / (norms[:, :1] * norms)
        got = kernel_distance(a, w, ea, ew, None if Xm is None else Xm.T @ Xm)
        np.testing.assert_allclose(got, expected, atol=1e-13)


def test_eta_rescaling_symmetry() -> None:
    """Learning rates act through gamma and delta only: beta(t; eta_a, eta_w, delta) =
    beta(gamma t; 1, 1, delta/gamma), gamma = sqrt(eta_a eta_w), at the same beta0; mu, phi and S
    are invariant."""
    ea, ew = 3.0, 0.5
    gamma = np.sqrt(ea * ew)
    base = dict(beta_star=[0.3, 1.0], beta0=[-0.7, -0.2], method="exact", n_records=41)
    for delta in (-2.0, 0.0, 0.7):
        ds1 = solve([dict(base, delta=delta, eta_a=ea, eta_w=ew, t_max=4.0)])
        ds2 = solve([dict(base, delta=delta / gamma, t_max=4.0 * gamma)])
        for name in ("beta", "mu", "phi", "kernel_distance", "loss"):
            np.testing.assert_allclose(ds1[name].values, ds2[name].values, atol=1e-12,
                                       err_msg=name)
        # and the weights rescale by alpha^2 = sqrt(eta_a / eta_w)
        alpha = (ea / ew) ** 0.25
        np.testing.assert_allclose(ds1["a"].values, alpha * ds2["a"].values, atol=1e-12)


@pytest.mark.parametrize("delta", [1e3, -1e3])
def test_stability_extreme_delta_and_tiny_beta0(delta: float) -> None:
    """No catastrophic cancellation for |delta| = 1e3 and |beta0| = 1e-6: the exact solution
    agrees with solve_ivp at rtol 1e-13 to relative precision 1e-8 pointwise (the values span
    many decades, so an absolute comparison would prove nothing)."""
    cases = [(r, th) for r in (1.0, 1e-6) for th in (90.0, 135.0)]
    B = len(cases)
    beta0 = np.array([[r * np.sin(np.radians(th)), r * np.cos(np.radians(th))]
                      for r, th in cases])
    deltas = np.full(B, delta)
    one = np.ones(B)
    bstar = np.tile([0.0, 1.0], (B, 1))
    t = np.linspace(0.0, 20.0, 201)
    a0, w0 = init_from_beta(beta0, deltas, one, one)
    ae, we = exact_trajectory(a0, w0, deltas, bstar, one, one, t)
    an, wn = numeric_trajectory(a0, w0, one, one, t, bstar, rtol=1e-13, atol=1e-300)

    def close(x: np.ndarray, ref: np.ndarray) -> None:
        scale = np.max(np.abs(ref), axis=1, keepdims=True)
        assert np.all(np.abs(x - ref) <= 1e-8 * np.abs(ref) + 1e-15 * scale)

    close(ae, an)
    close(we[..., 0], wn[..., 0])
    close(we[..., 1], wn[..., 1])
    assert np.all(np.isfinite(ae)) and np.all(np.isfinite(we))
    # analytic limit a(inf) = sign(P) sqrt((delta + kappa*)/2)
    kstar = np.hypot(delta, 2.0)
    lam = (delta + kstar) / 2 if delta > 0 else 2.0 / (kstar - delta)
    a_inf, _ = exact_trajectory(a0, w0, deltas, bstar, one, one, np.array([1e12]))
    np.testing.assert_allclose(np.abs(a_inf[:, 0]), np.sqrt(lam), rtol=1e-12)


# -- whitened data through X ----------------------------------------------------------------
def test_whitened_X_allows_exact_and_matches_beta_star_form() -> None:
    """X with orthonormal columns (n = 3, d = 2): exact is allowed, beta* = X^T y, and the
    result equals the X-free model with beta_star = X^T y; exact and numeric agree."""
    Q, _ = np.linalg.qr(np.random.default_rng(1).normal(size=(3, 2)))
    y = np.array([0.3, -1.0, 0.5])
    ds = solve([dict(X=Q, y=y, delta=d) for d in (-1.0, 0.5)])
    ref = solve([dict(beta_star=Q.T @ y, delta=d) for d in (-1.0, 0.5)])
    for name in ("a", "w", "phi", "kernel_distance"):
        np.testing.assert_allclose(ds[name].sel(EXACT), ref[name].sel(EXACT), atol=1e-12)
        assert float(abs(ds[name].sel(EXACT) - ds[name].sel(NUMERIC)).max()) < 1e-7
    # the loss includes the unreachable part of y
    resid = 0.5 * (y @ y - (Q.T @ y) @ (Q.T @ y))
    np.testing.assert_allclose(ds["loss"].sel(EXACT), ref["loss"].sel(EXACT) + resid, atol=1e-12)
    assert "beta_inf" not in ds


# -- output schema and batching -------------------------------------------------------------
def test_output_schema() -> None:
    ds = solve([dict(delta=1.0, n_records=11, t_max=2.0),
                dict(delta=-1.0, n_records=11, t_max=2.0)])
    assert ds["a"].dims == ("point", "method", "time")
    assert ds["w"].dims == ("point", "method", "time", "dim")
    for name in ("a", "w", "beta", "mu", "phi", "loss", "kernel_distance", "delta_t"):
        assert name in ds
        assert ds[name].shape[0] == 2
    assert ds["time"].attrs["units"] == "gradient-flow time"
    assert "point" not in ds.coords
    np.testing.assert_allclose(ds["time"].values, np.linspace(0, 2, 11))
    ds_e = solve([dict(method="exact")])
    assert list(ds_e["method"].values) == ["exact"]


def test_exact_kernel_bitwise_independent_of_batch_position() -> None:
    """The exact kernel is elementwise: rows computed inside a large batch (several cache
    blocks) are bitwise equal to the same rows computed alone."""
    rng = np.random.default_rng(5)
    B = 400
    beta0 = rng.normal(size=(B, 3))
    delta = rng.uniform(-3, 3, B)
    delta[::7] = 0.0
    ea = rng.uniform(0.5, 2, B)
    ew = rng.uniform(0.5, 2, B)
    bstar = rng.normal(size=(B, 3))
    t = np.linspace(0, 20, 201)
    a0, w0 = init_from_beta(beta0, delta, ea, ew)
    a, w = exact_trajectory(a0, w0, delta, bstar, ea, ew, t)
    S = kernel_distance(a, w, ea, ew)
    for i in (0, 7, 162, 163, 399):
        sl = slice(i, i + 1)
        a0i, w0i = init_from_beta(beta0[sl], delta[sl], ea[sl], ew[sl])
        ai, wi = exact_trajectory(a0i, w0i, delta[sl], bstar[sl], ea[sl], ew[sl], t)
        assert np.array_equal(ai[0], a[i]) and np.array_equal(wi[0], w[i])
        assert np.array_equal(kernel_distance(ai, wi, ea[sl], ew[sl])[0], S[i])


# -- validation -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("given", "fragment"),
    [
        (dict(beta0=[1.0, 2.0, 3.0]), "parameter beta0: expected 2 values (d = 2), got 3"),
        (dict(d=3), "parameter beta_star: expected 3 values (d = 3), got 2"),
        (dict(beta0=[0.0, 0.0], delta=0.0), "parameter beta0"),
        (dict(beta0=[0.0, 0.0], delta=-1.0), "parameter beta0"),
        (dict(delta=float("nan")), "parameter delta"),
        (dict(delta="nan"), "parameter delta"),
        (dict(beta0=[float("nan"), 1.0]), "parameter beta0"),
        (dict(X=[[1.0, 0.0], [0.0, 1.0]], y=[1.0], method="numeric"), "parameter y"),
        (dict(X=[[1.0, 0.0, 0.0]], y=[1.0], method="numeric"), "parameter X"),
        (dict(X=[[1.0, 0.0]]), "parameter y"),
        (dict(X=[[0.5, 1.0]], y=[1.1]), "parameter method"),
        (dict(X=[[0.5, 1.0]], y=[1.1], method="exact"), "use method=numeric"),
        (dict(a0=1.0), "parameter a0"),
        (dict(a0=0.0, w0=[0.0, 0.0]), "parameter w0"),
        (dict(a0=1.0, w0=[1.0, 0.0, 0.0]), "parameter w0: expected 2 values"),
        (dict(beta_star=[0.0, 0.0]), "parameter beta_star"),
        (dict(method="magic"), "parameter method"),
    ],
)
def test_bad_input(given: dict[str, Any], fragment: str) -> None:
    with pytest.raises(BadInput) as err:
        SingleNeuron.resolve("solve", given)
    msg = str(err.value)
    assert fragment in msg
    assert "\n" not in msg


def test_good_inputs_and_derived_values() -> None:
    """beta0 = 0 with delta > 0 is fine (a0 = sqrt(delta/eta_w), w0 = 0); given a0, w0,
    delta and beta0 are derived from them (and giving either beside them is refused, so that
    no result records a value it did not use); whitened X with exact is accepted."""
    v = SingleNeuron.resolve("solve", dict(beta0=[0.0, 0.0], delta=2.0, method="exact"))
    ds = SingleNeuron().solve(Batch.from_points(SingleNeuron, [v]))
    assert float(ds["a"].isel(point=0, method=0, time=0)) == pytest.approx(np.sqrt(2.0))
    v = SingleNeuron.resolve("solve", dict(a0=2.0, w0=[1.0, 1.0], eta_a=0.5))
    assert v["delta"] == pytest.approx(4.0 - 0.5 * 2.0)
    np.testing.assert_array_equal(v["beta0"], [2.0, 2.0])
    for given in (dict(delta=99.0), dict(beta0=[1.0, 0.0])):
        with pytest.raises(BadInput, match="a0 replaces it"):
            SingleNeuron.resolve("solve", dict(a0=2.0, w0=[1.0, 1.0], **given))
    SingleNeuron.resolve("solve", dict(X=[[0.0, 1.0], [1.0, 0.0]], y=[1.0, 2.0]))
    assert SingleNeuron.footprint("solve", SingleNeuron.resolve("solve", {})).cost >= 1.0


# -- end to end through the CLI (in process) ------------------------------------------------
@pytest.mark.system
def test_cli_solve_writes_readable_file(cli: Any, tmp_path: Any) -> None:
    """`richlazy solve single-neuron` with X, y writes a file that opens with xarray and h5py
    and carries beta_inf / beta_implicit (the first case of test_implicit_bias_reference_values)."""
    import h5py

    out = tmp_path / "ib.h5"
    res = cli("solve", "single-neuron", "-p", "X=[[1.0,0.0]]", "-p", "y=1", "-p", "a0=1.5",
              "-p", "w0=0.3,0.4", "-p", "method=numeric", "-p", "n_records=5", "-o", out, "-q")
    assert res.code == 0, res.err
    ds = xr.open_dataset(out, engine="h5netcdf")
    np.testing.assert_allclose(ds["beta_inf"].values, [1.0, 0.6389829], atol=5e-7)
    assert ds["a"].dims == ("solution_method", "time")
    ds.close()
    with h5py.File(out, "r") as f:
        assert "beta_implicit" in f and f["time"].shape == (5,)


def test_cli_bad_input_one_line(cli: Any, tmp_path: Any) -> None:
    out = tmp_path / "bad.h5"
    bad = (["-p", "beta0=1,2,3"], ["-p", "beta0=0,0"], ["-p", "X=[[0.5,1.0]]", "-p", "y=1,2"])
    for args in bad:
        res = cli("solve", "single-neuron", *args, "-o", out)
        assert res.code == 2
        lines = [line for line in res.err.splitlines() if line.strip()]
        assert len(lines) == 1 and "parameter" in lines[0]
        assert not out.exists()


def test_a_start_at_beta0_zero_is_not_diverged() -> None:
    """beta0 = 0 with δ > 0 starts at w = 0, where φ = cos(w, β*) has no value: φ is NaN at
    t = 0 only, said by its ``nan_meaning``, so the engine does not count it as a divergence
    (the loss converges)."""
    from richlazy_cli.engine.chunk import _non_finite

    v = SingleNeuron.resolve("solve", dict(beta0=[0.0, 0.0], delta=1.0, t_max=5.0,
                                           n_records=2))
    ds = SingleNeuron().solve(Batch.from_points(SingleNeuron, [v]))
    assert not _non_finite(ds)
    phi = ds.phi.values
    assert np.isnan(phi[..., 0]).all() and np.isfinite(phi[..., 1:]).all()
    assert "nan_meaning" in ds.phi.attrs
    assert float(ds.loss.isel(time=-1).max()) < 1e-6
