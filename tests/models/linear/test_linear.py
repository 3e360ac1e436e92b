"""Tests of the ``linear`` model (wide and deep linear networks, docs/linear.md).

Every check compares the model with an independent computation: conserved quantities,
function-space flows integrated separately, singular-value ODEs, KKT conditions of the implicit
bias, finite differences, an explicit Jacobian, the ``single-neuron`` model, and GD vs GF.
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr
from scipy.integrate import solve_ivp

from richlazy_cli.errors import BadInput
from richlazy_cli.models.base import Batch
from richlazy_cli.models.linear.model import (
    Linear,
    conserved_delta,
    end_to_end,
    function_space_factors,
    gradients,
    isotropic_init,
    kernel_distance,
    layer_relations,
    make_data,
    ntk_factors,
    theory_case,
)
from richlazy_cli.models.single_neuron.model import SingleNeuron


def run(action: str, points: list[dict[str, Any]]) -> Any:
    values = [Linear.resolve(action, p) for p in points]
    batch = Batch.from_points(Linear, values)
    return Linear().run(action, batch)


def _weights(values: dict[str, Any]) -> tuple[list[np.ndarray], np.ndarray, Any]:
    v = Linear.resolve("solve", values)
    data = make_data(v)
    Ws, A = Linear._init(v, data)
    return Ws, A, data


# -- loss convention, data, validation ---------------------------------------------------------


def test_loss_convention_and_data_file(tmp_path: Path) -> None:
    """Pins the loss: ``sum`` = ½‖Xβ−y‖², ``mean`` = ‖Xβ−y‖²/(2n); a user .npz sets n, d, c."""
    gen = np.random.default_rng(1)
    X = gen.standard_normal((7, 3))
    y = gen.standard_normal((7, 2))
    path = tmp_path / "data.npz"
    np.savez(path, X=X, y=y)
    common = dict(data=str(path), h=2, delta=0.3, scale=0.5, t_max=1.0, n_records=3)
    values = Linear.resolve("solve", common)
    assert (values["n"], values["d"], values["c"], values["data_kind"]) == (7, 3, 2, "file")
    with pytest.raises(BadInput, match="beta_star"):
        Linear.resolve("solve", {**common, "beta_star": np.ones((3, 2))})
    ds_sum = run("solve", [common])
    ds_mean = run("solve", [{**common, "loss": "mean"}])
    assert np.all(np.isnan(ds_sum.beta_star.values))  # the file holds no teacher
    beta0 = ds_sum.beta.values[0, 0, 0]
    np.testing.assert_array_equal(beta0, ds_mean.beta.values[0, 0, 0])  # same init
    expected = 0.5 * np.sum((X @ beta0 - y) ** 2)
    assert ds_sum.loss.values[0, 0, 0] == pytest.approx(expected, rel=1e-13)
    assert ds_mean.loss.values[0, 0, 0] == pytest.approx(expected / 7, rel=1e-13)
    # the mean loss is the sum loss in time rescaled by n: β_mean(t) = β_sum(t/n)
    slow = run("solve", [{**common, "loss": "mean", "t_max": 7.0}])
    np.testing.assert_allclose(slow.beta.values[0, 0, -1], ds_sum.beta.values[0, 0, -1],
                               atol=1e-9)


def test_whitened_data_and_teacher() -> None:
    v = Linear.resolve("solve", dict(d=4, n=9, c=2, h=2, noise=0.0, beta_star=np.ones((4, 2))))
    data = make_data(v)
    np.testing.assert_allclose(data.X.T @ data.X, np.eye(4), atol=1e-14)
    np.testing.assert_allclose(data.b, np.ones((4, 2)), atol=1e-14)
    v1 = dict(d=3, c=1, h=1, beta_star=[1.0, 2.0, 3.0], t_max=1.0, n_records=2)
    assert Linear.resolve("solve", v1)["beta_star"].shape == (3, 1)
    np.testing.assert_array_equal(run("solve", [v1]).beta_star.values[0, :, 0], [1.0, 2.0, 3.0])


@pytest.mark.parametrize(
    "given, fragment",
    [
        (dict(d=5, h=3, c=2, delta=0.5), "h <= c"),
        (dict(d=3, h=4, c=4, delta=-0.5), "h <= d"),
        (dict(d=5, n=3), "n >= d"),
        (dict(d=3, c=1, h=1, beta_star=[[1.0, 2.0]]), "beta_star"),
        (dict(data_kind="file"), "data"),
        (dict(init="gaussian", aligned=True), "aligned"),
    ],
)
def test_refuses_impossible_inputs(given: dict[str, Any], fragment: str) -> None:
    with pytest.raises(BadInput, match=fragment):
        Linear.resolve("solve", given)


def test_delta_zero_and_gaussian_accept_any_width() -> None:
    Linear.resolve("solve", dict(d=3, h=7, c=2, delta=0.0))
    Linear.resolve("solve", dict(d=3, h=7, c=2, delta=0.5, init="gaussian"))


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize(
    "d, h, c, delta",
    [(4, 3, 3, 0.7), (4, 4, 2, -0.6), (3, 3, 3, 0.0), (2, 5, 3, 0.0), (5, 1, 1, -0.4)],
)
def test_isotropic_init_structure(depth: int, d: int, h: int, c: int, delta: float) -> None:
    """Δ = δI_h, W_{l+1}ᵀW_{l+1} = W_lW_lᵀ and every nonzero singular value of β₀ = scale."""
    ea, ew, scale = 0.7, 1.3, 0.37
    Ws, A = isotropic_init(d, h, c, depth, delta, scale, ea, ew, np.random.default_rng(3))
    assert [W.shape for W in Ws] == [(h, d)] + [(h, h)] * (depth - 1)
    np.testing.assert_allclose(conserved_delta(Ws, A, ea, ew), delta * np.eye(h), atol=1e-12)
    for C in layer_relations(Ws):
        np.testing.assert_allclose(C, 0.0, atol=1e-12)
    s = np.linalg.svd(end_to_end(Ws, A), compute_uv=False)
    r = min(h, c, d)
    np.testing.assert_allclose(s[:r], scale, rtol=1e-12)
    np.testing.assert_allclose(s[r:], 0.0, atol=1e-12)


def test_isotropic_beta0_independent_of_delta() -> None:
    betas = [
        run("solve", [dict(d=3, h=3, c=3, delta=x, t_max=0.1, n_records=2)]).beta.values[0, 0, 0]
        for x in (-1.0, 0.0, 2.0)
    ]
    np.testing.assert_allclose(betas[0], betas[1], atol=1e-14)
    np.testing.assert_allclose(betas[2], betas[1], atol=1e-14)


# -- conservation --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "given",
    [
        dict(d=4, h=3, c=2, delta=-0.5, eta_a=0.5, eta_w=2.0),  # two-layer, 1 < h < d
        dict(d=3, h=6, c=2, init="gaussian", data_kind="gaussian", n=8, eta_a=1.5),
        dict(depth=2, d=4, h=4, c=1, delta=-0.3, eta_w=0.7, data_kind="gaussian", n=6),
        dict(depth=3, d=3, h=3, c=2, delta=0.0, scale=0.5, data_kind="gaussian", n=5),
        dict(depth=3, d=3, h=5, c=2, init="gaussian", sigma_a=0.8, eta_a=2.0),
    ],
)
def test_conservation_along_numeric_flow(given: dict[str, Any]) -> None:
    """‖Δ(t) − Δ(0)‖_F ≤ 1e-8 and, deep, ‖C_l(t) − C_l(0)‖_F ≤ 1e-8 (docs/linear.md, eq. (3))."""
    ds = run("solve", [{**given, "t_max": 20.0, "n_records": 41}])
    assert ds.status.values[0] == 0
    loss = ds.loss.sel({"method": "numeric"}).values[0]
    assert loss[-1] < 1e-2 * loss[0]  # the weights really moved
    assert np.nanmax(ds.delta_drift.values) <= 1e-8
    if given.get("depth", 1) > 1:
        assert np.nanmax(ds.layer_drift.values) <= 1e-8
    else:
        assert "layer_drift" not in ds


# -- function-space theory ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, deltas",
    [
        ((3, 1, 1), [0.5, 2.0]),  # h = c, δ > 0 (Theorem 4.2, c = 1)
        ((3, 3, 1), [-0.5, -2.0]),  # h = d, δ < 0 (Theorem 4.2)
        ((3, 3, 3), [-0.8, 0.0, 0.6]),  # d = h = c, every δ (Theorem B.6)
        ((4, 2, 2), [0.4]),  # h = c < d, δ > 0, multi-output (Theorem B.6)
        ((3, 4, 1), [0.0]),  # δ = 0, any h
        ((3, 1, 2), [-0.4]),  # one neuron, δ < 0 (Theorem 4.1)
    ],
)
def test_function_space_flow_matches_parameter_flow(
    shape: tuple[int, int, int], deltas: list[float]
) -> None:
    d, h, c = shape
    pts = [dict(d=d, h=h, c=c, delta=x, scale=0.3, eta_a=0.8, eta_w=1.4, t_max=10.0,
                n_records=41, seed=2) for x in deltas]
    ds = run("solve", pts)
    num = ds.beta.sel({"method": "numeric"}).values
    th = ds.beta.sel({"method": "theory"}).values
    assert np.all(np.isfinite(th))
    assert np.max(np.abs(num - th)) <= 1e-6
    assert np.max(np.abs(num[:, -1] - num[:, 0])) > 0.1  # non-trivial motion


def test_theory_is_nan_where_M_is_not_a_function_of_beta() -> None:
    """1 < h < d with δ < 0 (Theorem 4.2, docs/linear.md, eq. (5), second case): no theory row."""
    ds = run("solve", [dict(d=3, h=2, c=1, delta=-0.5, t_max=1.0, n_records=5),
                       dict(d=3, h=2, c=1, delta=0.0, t_max=1.0, n_records=5)])
    assert np.all(np.isnan(ds.beta.sel({"method": "theory"}).values[0]))
    assert np.all(np.isfinite(ds.beta.sel({"method": "theory"}).values[1]))
    assert theory_case(-0.5, 2, 1, 3) is None
    assert list(run("solve", [dict(depth=2, t_max=1.0, n_records=3)]).method.values) == ["numeric"]


@pytest.mark.parametrize(
    "shape, delta, wrong_delta, wrong_case",
    [((3, 3, 3), 0.6, 0.0, "B6"), ((3, 1, 1), -0.4, -0.4, "B6")],
)
def test_wrong_preconditioner_is_detected(
    shape: tuple[int, int, int], delta: float, wrong_delta: float, wrong_case: str
) -> None:
    """A function-space flow with the wrong M misses the parameter flow (the test can fail).

    Note: the B.6 flow ``G_W G + G G_A = ½(√(δ²I+4γ²ββᵀ) G + G √(δ²I+4γ²βᵀβ))`` depends on δ
    only through δ² (the ∓δ/2 terms cancel), so flipping the sign of δ is *not* detectable;
    dropping δ, or using the h = d formula for one neuron with h < d, is.
    """
    d, h, c = shape
    v = dict(d=d, h=h, c=c, delta=delta, scale=0.3, t_max=10.0, n_records=11, seed=2)
    ds = run("solve", [v])
    Ws, A, data = _weights(v)

    def rhs(_t: float, x: np.ndarray) -> np.ndarray:
        b = x.reshape(d, c)
        G = data.Sigma @ b - data.b
        PW, PA = function_space_factors(b, wrong_delta, 1.0, 1.0, wrong_case)
        return -(PW @ G + G @ PA).ravel()

    sol = solve_ivp(rhs, (0, 10), end_to_end(Ws, A).ravel(), method="DOP853",
                    t_eval=ds.time.values, rtol=1e-10, atol=1e-12)
    wrong = sol.y.T.reshape(-1, d, c)
    numeric = ds.beta.sel({"method": "numeric"}).values[0]
    assert np.max(np.abs(ds.beta.sel({"method": "theory"}).values[0] - numeric)) <= 1e-6
    assert np.max(np.abs(wrong - numeric)) > 1e-2


@pytest.mark.parametrize(
    "shape, delta",
    [((4, 3, 3), 0.5), ((3, 3, 2), -0.5), ((3, 3, 3), 0.0), ((3, 3, 3), -1.5)],
)
def test_theorem_b6_singular_values(shape: tuple[int, int, int], delta: float) -> None:
    """Whitened, task-aligned: ṡ_i = √(δ² + 4η_aη_w s_i²)(s*_i − s_i), independently (B.6)."""
    d, h, c = shape
    ea, ew, scale, t_max = 0.6, 1.5, 0.05, 15.0
    bs = np.zeros((d, c))
    s_star = np.array([2.0, 1.0, 0.4])[: min(d, c)]
    Q1 = np.linalg.qr(np.random.default_rng(5).standard_normal((d, d)))[0]
    Q2 = np.linalg.qr(np.random.default_rng(6).standard_normal((c, c)))[0]
    bs[: s_star.size, : s_star.size] = np.diag(s_star)
    bs = Q1 @ bs @ Q2.T
    ds = run("solve", [dict(d=d, h=h, c=c, n=d + 2, delta=delta, scale=scale, eta_a=ea,
                            eta_w=ew, aligned=True, beta_star=bs, t_max=t_max, n_records=31)])
    g2 = 4 * ea * ew
    sol = solve_ivp(lambda _t, s: np.sqrt(delta**2 + g2 * s**2) * (s_star - s), (0, t_max),
                    np.full(s_star.size, scale), method="DOP853", t_eval=ds.time.values,
                    rtol=1e-12, atol=1e-14)
    numeric = ds.singular_values.sel({"method": "numeric"}).values[0]
    assert np.max(np.abs(numeric - sol.y.T)) <= 1e-6
    assert abs(sol.y[-1, 15] - scale) > 0.01  # the smallest value has moved


# -- deep networks: implicit bias (Theorem B.10) -------------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("depth", [2, 3])
def test_deep_balanced_implicit_bias_kkt(depth: int) -> None:
    """δ → 0, underdetermined: ∇Q(β∞) ∈ range(Xᵀ) and Xβ∞ = y for Theorem B.10's Q.

    δ = 0 and δ = −1e-6 meet the KKT conditions to 1e-5; δ = −1e-2 does not (the residual is
    measured to shrink ∝ |δ|), nor does the minimum-norm interpolator.
    """
    v = dict(depth=depth, d=5, h=5, c=1, n=3, data_kind="gaussian", scale=0.4, seed=4,
             t_max=400.0, n_records=11)
    deltas = [0.0, -1e-6, -1e-2]
    ds = run("solve", [{**v, "delta": x} for x in deltas])
    data = make_data(Linear.resolve("solve", v))
    X, y = data.X, data.y[:, 0]
    null = np.eye(5) - np.linalg.pinv(X) @ X
    p = (depth + 2) / (depth + 1)

    def kkt(b: np.ndarray, b0: np.ndarray) -> float:
        grad_q = np.linalg.norm(b) ** (p - 2) * b \
            - np.linalg.norm(b0) ** (-depth / (depth + 1)) * b0
        return float(np.linalg.norm(null @ grad_q))

    beta = ds.beta.sel({"method": "numeric"}).values[:, -1, :, 0]
    beta0 = ds.beta.sel({"method": "numeric"}).values[:, 0, :, 0]
    residuals = [kkt(beta[k], beta0[k]) for k in range(3)]
    assert np.all(np.linalg.norm(beta @ X.T - y, axis=1) <= 1e-5)
    assert residuals[0] <= 1e-5 and residuals[1] <= 1e-5
    assert residuals[2] > 1e-4
    assert kkt(np.linalg.pinv(X) @ y, beta0[0]) > 1e-2  # the min-norm interpolator fails


# -- single-neuron agreement ---------------------------------------------------------------------


@pytest.mark.parametrize("delta", [0.8, 0.0, -0.3, -1.2])
def test_single_neuron_model_agrees(delta: float) -> None:
    """``linear`` with h = c = 1 and ``single-neuron`` give the same trajectory to 1e-8."""
    d = 3
    v = dict(d=d, h=1, c=1, n=5, delta=delta, scale=0.4, eta_a=0.9, eta_w=1.2, seed=7,
             t_max=8.0, n_records=17, rtol=1e-12, atol=1e-14)
    ds = run("solve", [v])
    Ws, A, data = _weights(v)
    model = SingleNeuron
    sv = model.resolve("solve", dict(
        d=d, X=data.X, y=data.y[:, 0], a0=float(A[0, 0]), w0=Ws[0][0], eta_a=0.9, eta_w=1.2,
        t_max=8.0, n_records=17, method="numeric", rtol=1e-12, atol=1e-14))
    ref = model().solve(Batch.from_points(model, [sv]))
    mine = ds.beta.sel({"method": "numeric"}).values[0, :, :, 0]
    theirs = ref.beta.sel({"method": "numeric"}).values[0]
    assert np.max(np.abs(mine - theirs)) <= 1e-8
    np.testing.assert_allclose(ds.kernel_distance.values[0],
                               ref.kernel_distance.sel({"method": "numeric"}).values[0], atol=1e-8)
    assert np.max(np.abs(mine[-1] - mine[0])) > 0.1


# -- preconditioners, gradients and the NTK ------------------------------------------------------


def _fd_beta_velocity(Ws: list[np.ndarray], A: np.ndarray, G: np.ndarray, ea: float,
                      ew: float, eps: float = 1e-6) -> np.ndarray:
    """β̇ by central differences of β along the parameter velocity θ̇ = −η ⊙ ∇L."""
    dWs, dA = gradients(Ws, A, G)
    plus = end_to_end([W - eps * ew * g for W, g in zip(Ws, dWs, strict=True)], A - eps * ea * dA)
    minus = end_to_end([W + eps * ew * g for W, g in zip(Ws, dWs, strict=True)], A + eps * ea * dA)
    return (plus - minus) / (2 * eps)


def test_theorem_4_1_sum_of_neuron_preconditioners() -> None:
    """β̇ = −Σ_k M_k[G] with κ_k, δ_k = Δ_kk, β_k = w_k a_kᵀ (Theorem 4.1, docs/linear.md,
    eq. (4))."""
    gen = np.random.default_rng(8)
    d, h, c, ea, ew = 4, 5, 3, 0.7, 1.9
    W, A, G = gen.standard_normal((h, d)), gen.standard_normal((h, c)), gen.standard_normal((d, c))
    Delta = conserved_delta([W], A, ea, ew)
    total = np.zeros((d, c))
    for k in range(h):
        bk = np.outer(W[k], A[k])
        dk = Delta[k, k]
        kap = math.sqrt(dk**2 + 4 * ea * ew * np.sum(bk**2))
        u, v = W[k] / np.linalg.norm(W[k]), A[k] / np.linalg.norm(A[k])
        total += (kap + dk) / 2 * G @ np.outer(v, v) + (kap - dk) / 2 * np.outer(u, u) @ G
    np.testing.assert_allclose(_fd_beta_velocity([W], A, G, ea, ew), -total, atol=1e-8)


@pytest.mark.parametrize("d, h, delta", [(4, 1, 0.7), (4, 4, -0.7), (4, 1, -0.7), (4, 3, -0.7),
                                         (4, 3, 0.0)])
def test_theorem_4_2_preconditioner(d: int, h: int, delta: float) -> None:
    """c = 1, Δ = δI: M = η_w‖a‖²I + η_aWᵀW equals Theorem 4.2's formula in β, δ (eq. (5))."""
    ea, ew = 1.3, 0.6
    Ws, A = isotropic_init(d, h, 1, 1, delta, 0.8, ea, ew, np.random.default_rng(9))
    W, a = Ws[0], A[:, 0]
    M = ew * (a @ a) * np.eye(d) + ea * W.T @ W
    beta = W.T @ a
    r = np.linalg.norm(beta)
    kap = math.sqrt(delta**2 + 4 * ea * ew * r**2)
    bb = np.outer(beta, beta) / r**2
    if delta > 0 or (delta < 0 and h == d):
        expect = (kap + abs(delta)) / 2 * np.eye(d) + (kap - abs(delta)) / 2 * bb
    elif delta < 0:
        rows = np.linalg.svd(W, full_matrices=False)[2]  # orthonormal basis of row(W)
        Pi = rows.T @ rows - bb
        expect = (kap + delta) / 2 * np.eye(d) + (kap - delta) / 2 * bb + abs(delta) * Pi
    else:
        expect = math.sqrt(ea * ew) * r * (np.eye(d) + bb)
    np.testing.assert_allclose(M, expect, atol=1e-12)
    G = np.random.default_rng(1).standard_normal((d, 1))
    np.testing.assert_allclose(_fd_beta_velocity(Ws, A, G, ea, ew), -M @ G, atol=1e-8)
    case = theory_case(delta, h, 1, d)
    if case is not None:
        PW, PA = function_space_factors(beta[:, None], delta, ea, ew, case)
        np.testing.assert_allclose(PW + PA[0, 0] * np.eye(d), M, atol=1e-12)


def test_preconditioner_reference_values() -> None:
    """Reference values computed independently: β = (3, 4), δ = 1, η = 1."""
    PW, PA = function_space_factors(np.array([[3.0], [4.0]]), 1.0, 1.0, 1.0, "B6")
    eig = np.linalg.eigvalsh(PW + PA[0, 0] * np.eye(2))
    np.testing.assert_allclose(eig, [5.5249378, 10.0498756], atol=5e-8)


def test_theorem_b6_factors_match_weights() -> None:
    """G_W = η_aWᵀW and G_A = η_wAᵀA for Δ = δI with h = c (δ > 0) or h = d (δ < 0)."""
    ea, ew = 0.9, 1.7
    for d, h, c, delta in [(5, 3, 3, 0.8), (3, 3, 5, -0.8), (4, 4, 4, 0.0)]:
        Ws, A = isotropic_init(d, h, c, 1, delta, 0.6, ea, ew, np.random.default_rng(2))
        PW, PA = function_space_factors(end_to_end(Ws, A), delta, ea, ew, "B6")
        np.testing.assert_allclose(PW, ea * Ws[0].T @ Ws[0], atol=1e-12)
        np.testing.assert_allclose(PA, ew * A.T @ A, atol=1e-12)


def test_deep_gradients_by_finite_differences() -> None:
    gen = np.random.default_rng(11)
    d, h, c, n = 3, 4, 2, 6
    Ws = [gen.standard_normal((h, d))] + [gen.standard_normal((h, h)) for _ in range(2)]
    A = gen.standard_normal((h, c))
    X, y = gen.standard_normal((n, d)), gen.standard_normal((n, c))

    def loss(Ws: list[np.ndarray], A: np.ndarray) -> float:
        return 0.5 * float(np.sum((X @ end_to_end(Ws, A) - y) ** 2))

    G = X.T @ (X @ end_to_end(Ws, A) - y)
    dWs, dA = gradients(Ws, A, G)
    eps = 1e-6
    for li in range(3):
        for idx in [(0, 0), (1, 2), (3, 1)]:
            Wp = [W.copy() for W in Ws]
            Wm = [W.copy() for W in Ws]
            Wp[li][idx] += eps
            Wm[li][idx] -= eps
            fd = (loss(Wp, A) - loss(Wm, A)) / (2 * eps)
            assert fd == pytest.approx(dWs[li][idx], rel=1e-6, abs=1e-6)
    Ap, Am = A.copy(), A.copy()
    Ap[2, 1] += eps
    Am[2, 1] -= eps
    assert (loss(Ws, Ap) - loss(Ws, Am)) / (2 * eps) == pytest.approx(dA[2, 1], rel=1e-6)


def test_kernel_distance_matches_explicit_jacobian() -> None:
    """K = Σ_p η_p J_p J_pᵀ over outputs (x_i, k) with J by central differences (exact here)."""
    gen = np.random.default_rng(12)
    d, h, c, n, ea, ew = 3, 4, 2, 5, 0.5, 1.5
    X = gen.standard_normal((n, d))

    def params() -> tuple[list[np.ndarray], np.ndarray]:
        return [gen.standard_normal((h, d)), gen.standard_normal((h, h))], \
            gen.standard_normal((h, c))

    def ntk(Ws: list[np.ndarray], A: np.ndarray) -> np.ndarray:
        theta = [*Ws, A]
        rates = [ew, ew, ea]
        K = np.zeros((n * c, n * c))
        for p, eta in zip(range(3), rates, strict=True):
            for idx in np.ndindex(theta[p].shape):
                plus = [t.copy() for t in theta]
                minus = [t.copy() for t in theta]
                plus[p][idx] += 0.5
                minus[p][idx] -= 0.5
                J = (X @ end_to_end(plus[:2], plus[2]) - X @ end_to_end(minus[:2], minus[2]))
                J = J.ravel()
                K += eta * np.outer(J, J)
        return K

    (W1, A1), (W2, A2) = params(), params()
    K1, K2 = ntk(W1, A1), ntk(W2, A2)
    expect = 1 - np.sum(K1 * K2) / (np.linalg.norm(K1) * np.linalg.norm(K2))
    got = kernel_distance(ntk_factors(W1, A1, ea, ew), ntk_factors(W2, A2, ea, ew), X.T @ X)
    assert got == pytest.approx(expect, rel=1e-10)


# -- gradient descent, batching -----------------------------------------------------------------


def test_gradient_descent_approaches_gradient_flow() -> None:
    base = dict(depth=2, d=3, h=3, c=2, delta=-0.2, scale=0.5, eta_a=0.8)
    flow = run("solve", [{**base, "t_max": 5.0, "n_records": 11}])
    ref = flow.beta.sel({"method": "numeric"}).values[0]
    errors = []
    for lr in (1e-2, 5e-3):
        gd = run("train", [{**base, "lr": lr, "steps": round(5.0 / lr), "n_records": 11}])
        assert gd.status.values[0] == 0
        errors.append(np.max(np.abs(gd.beta.values[0] - ref)))
        assert np.max(gd.delta_drift.values) < 1e-2  # O(lr) drift of the conserved quantity
    assert errors[1] < 1e-2
    assert errors[0] / errors[1] == pytest.approx(2.0, rel=0.1)  # first-order convergence


def test_gd_divergence_is_flagged() -> None:
    ds = run("train", [dict(d=3, h=3, c=3, delta=0.5, scale=1.0, lr=5.0, steps=200),
                       dict(d=3, h=3, c=3, delta=0.5, scale=1.0, lr=0.01, steps=200)])
    assert list(ds.status.values) == [1, 0]
    assert np.isnan(ds.loss.values[0, -1]) and np.isfinite(ds.loss.values[1, -1])


def test_deep_beta_dimensions() -> None:
    ds = run("solve", [dict(depth=2, t_max=1.0, n_records=3)])
    assert ds.beta.dims == ("point", "method", "time", "dim", "output")


# -- lazy -> rich -> lazy -----------------------------------------------------------------------


def test_delta_sweep_is_lazy_rich_lazy() -> None:
    """jobs/linear-delta.toml at five of its δ: the NTK moves most at δ = 0, little at |δ| = 2."""
    job = tomllib.loads((Path(__file__).parents[3] / "jobs" / "linear-delta.toml").read_text())
    assert (job["model"], job["action"], list(job["grid"])) == ("linear", "solve", ["delta"])
    deltas = [-2.0, -0.5, 0.0, 0.5, 2.0]
    ds = run("solve", [{**job["params"], "delta": x} for x in deltas])
    s = ds.kernel_distance.values[:, -1]
    assert s[2] > 0.4 and s[0] < 0.01 and s[4] < 0.01
    assert s[0] < s[1] < s[2] > s[3] > s[4]
    assert np.all(ds.status.values == 0)


@pytest.mark.system
def test_cli_end_to_end(tmp_path: Path, cli: Any) -> None:
    """``richlazy solve linear`` writes a result file; an impossible δ exits with code 2."""
    out = tmp_path / "out.h5"
    args = ["solve", "linear", "-p", "d=3", "-p", "h=3", "-p", "c=3", "-p", "t_max=2",
            "-p", "n_records=5", "-q"]
    done = cli(*args, "-p", "delta=0.5", "-o", str(out))
    assert done.code == 0, done.err
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert list(ds.solution_method.values) == ["numeric", "theory"]
        assert np.max(np.abs(ds.beta.values[0] - ds.beta.values[1])) <= 1e-6
    bad = cli(*args, "-p", "c=1", "-p", "delta=0.5", "-o", str(tmp_path / "bad.h5"))
    assert bad.code == 2 and "h <= c" in bad.err
    assert len(bad.err.strip().splitlines()) == 1


def test_a_configuration_without_a_closed_theory_flow_is_not_diverged() -> None:
    """δ > 0 with h < c (and δ < 0 with h < d) has no closed function-space flow at depth 1:
    its theory rows are NaN, said by their ``nan_meaning``, so the engine does not count them
    as a divergence, and the model's status is ok because the numeric flow is finite
    (docs/linear.md)."""
    from richlazy_cli.engine.chunk import _non_finite

    for delta, h, c in ((1.0, 2, 3), (-1.0, 2, 1)):
        ds = run("solve", [dict(d=5, h=h, c=c, delta=delta, t_max=1.0, n_records=3)])
        assert int(ds.status[0]) == 0 and not _non_finite(ds.drop_vars("status"))
        assert list(ds.method.values) == ["numeric", "theory"]
        assert np.isfinite(ds.loss.isel(method=0)).all()
        assert np.isnan(ds.loss.isel(method=1)).all()
        assert "no closed function-space flow" in ds.loss.attrs["nan_meaning"]
