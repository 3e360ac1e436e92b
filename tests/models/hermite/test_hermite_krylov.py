"""The hermite flow by CVODE (richlazy_cli/models/hermite/_linear.py and the model's ``method =
"CVODE"``): the Hessian–vector product against the dense Jacobian, and the flow against RK45
at a tight tolerance."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from richlazy_cli.errors import BadInput
from richlazy_cli.models.base import Batch
from richlazy_cli.models.hermite import model as hermite_model
from richlazy_cli.models.hermite._linear import FlowOperators
from richlazy_cli.models.hermite._population import R_FLOOR, population_loss_grad
from richlazy_cli.models.hermite.model import (
    DEFAULT_RTOL,
    Hermite,
    hermite_coeffs,
    population_grad_jacobian,
    teacher_weights,
)

H4 = hermite_coeffs(4, None)
MIXED = np.array([0.0, 0.0, 0.0, 0.0, np.sqrt(0.7), 0.0, np.sqrt(0.3)])
"""σ = √0.7 h_4 + √0.3 h_6: g has two terms, so g'' is not a single power."""


PRODUCT_ERROR = {np.float64: 1e-12, np.float32: 5e-8}
"""Bound on a product's error relative to ``max|J| · ‖v‖₁``, by precision of the product
(float32's unit roundoff is 6e-8)."""


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["double", "single"])
@pytest.mark.parametrize("c", [H4, MIXED], ids=["h4", "h4+h6"])
def test_the_product_is_the_dense_jacobians(c: np.ndarray, dtype: type) -> None:
    rng = np.random.default_rng(3)
    m, d, P = 5, 9, 4
    a = teacher_weights(P, 0.8)
    V = rng.standard_normal((m, d)) * rng.uniform(0.1, 1.0, (m, 1))
    V[0, :P] += 2.0  # one neuron near the teachers
    ops = FlowOperators(m, d, a, c, R_FLOOR, product_dtype=dtype)
    grad = population_loss_grad(V, a, c)[1]
    assert grad is not None
    np.testing.assert_allclose(ops.rhs(0.0, V.ravel()), -grad.ravel(), rtol=1e-13, atol=1e-14)
    J = -population_grad_jacobian(V, a, c)
    jv = ops.linearise(0.0, V.ravel())
    assert ops.extra == 0  # the state of the last rhs: reused
    scale = np.max(np.abs(J))
    for v in rng.standard_normal((4, m * d)):
        atol = PRODUCT_ERROR[dtype] * scale * np.abs(v).sum()
        np.testing.assert_allclose(jv(v), J @ v, rtol=0, atol=atol)


@pytest.mark.parametrize("c", [H4, MIXED], ids=["h4", "h4+h6"])
def test_the_curvatures_are_the_hessians_own(c: np.ndarray) -> None:
    """Against the dense Hessian's diagonal blocks: ``v̄_kᵀ ∇²_{v_k} L v̄_k`` is the radial
    curvature, and on the directions orthogonal to ``v̄_k``, the other neurons and the
    teachers the block is the cross curvature times the identity."""
    rng = np.random.default_rng(5)
    m, d, P = 3, 12, 2
    a = teacher_weights(P, 0.8)
    V = rng.standard_normal((m, d)) * rng.uniform(0.2, 1.0, (m, 1))
    V[0, 0] += 1.5  # one neuron near a teacher
    hessian = population_grad_jacobian(V, a, c)
    ops = FlowOperators(m, d, a, c, R_FLOOR)
    radial, across = ops.curvatures(0.0, V.ravel())
    U = V / np.linalg.norm(V, axis=1, keepdims=True)
    for k in range(m):
        block = hessian[k * d:(k + 1) * d, k * d:(k + 1) * d]
        assert U[k] @ block @ U[k] == pytest.approx(radial[k], rel=1e-11)
        spanned = np.vstack([U, np.eye(d)[:P]]).T
        rest = np.linalg.svd(spanned, full_matrices=True)[0][:, m + P:]  # d - m - P columns
        np.testing.assert_allclose(rest.T @ block @ rest, across[k] * np.eye(d - m - P),
                                   rtol=0, atol=1e-11 * np.max(np.abs(block)))


def test_a_neuron_converged_onto_a_teacher_is_stiff_at_four_a_p() -> None:
    """One neuron at ``√a_1 e_1``: ``λʳ = 4 a_1 g(1)`` and ``λᵗ = a_1 g'(1)``, both ``4 a_1`` for
    ``h_4`` (docs/hermite.md, "Integrators"); for ``√0.7 h_4 + √0.3 h_6``, ``g'(1) = 4.6``."""
    d, P = 8, 3
    a = teacher_weights(P, 0.8)
    for c, g1, dg1 in ((H4, 1.0, 4.0), (MIXED, 1.0, 0.7 * 4 + 0.3 * 6)):
        V = np.zeros((1, d))
        V[0, 0] = np.sqrt(a[0])
        radial, across = FlowOperators(1, d, a, c, R_FLOOR).curvatures(0.0, V.ravel())
        assert radial[0] == pytest.approx(4.0 * a[0] * g1, rel=1e-13)
        assert across[0] == pytest.approx(a[0] * dg1, rel=1e-13)


def test_the_preconditioner_inverts_its_blocks() -> None:
    """``z = (I + γ[λᵗ (I − v̄v̄ᵀ) + λʳ v̄v̄ᵀ])⁻¹ ρ`` per neuron, curvatures below zero taken as
    zero."""
    rng = np.random.default_rng(6)
    m, d, P = 4, 7, 3
    a = teacher_weights(P, 0.8)
    V = rng.standard_normal((m, d))
    ops = FlowOperators(m, d, a, H4, R_FLOOR)
    y = V.ravel()
    solve = ops.precondition(0.0, y)
    radial, across = (np.maximum(x, 0.0) for x in ops.curvatures(0.0, y))
    U = V / np.linalg.norm(V, axis=1, keepdims=True)
    rho = rng.standard_normal(m * d)
    for gamma in (0.0, 0.3, 40.0):
        z = solve(rho, gamma).reshape(m, d)
        for k in range(m):
            uu = np.outer(U[k], U[k])
            block = np.eye(d) + gamma * (across[k] * (np.eye(d) - uu) + radial[k] * uu)
            np.testing.assert_allclose(block @ z[k], rho.reshape(m, d)[k], rtol=1e-12,
                                       atol=1e-12)


def test_the_preconditioner_cuts_cvodes_products_on_a_plateau() -> None:
    """Twenty neurons converged onto twenty teachers of distinct weights (twenty distinct
    stiff rates, which GMRES alone resolves one Krylov vector at a time) and four still
    searching, d = 64, from t = 0 to 3000: with the preconditioner CVODE needs fewer than
    0.7 of the Hessian–vector products (measured 0.55–0.56 over three seeds), and its state
    agrees with the unpreconditioned run's to its tolerance."""
    from richlazy_cli.numerics.solvers.krylov import solve_cvode

    pytest.importorskip("sksundae")
    rng = np.random.default_rng(7)
    m, d, P, converged = 24, 64, 24, 20
    a = teacher_weights(P, 0.8)
    V = 0.01 * rng.standard_normal((m, d)) / np.sqrt(d)
    V[:converged] = 0.0
    V[np.arange(converged), np.arange(converged)] = np.sqrt(a[:converged])
    times = np.array([0.0, 3000.0])
    runs = {}
    for name in ("plain", "preconditioned"):
        ops = FlowOperators(m, d, a, H4, R_FLOOR)
        runs[name] = solve_cvode(ops.rhs, ops.linearise, V.ravel(), times, 1e-8, 1e-12,
                                 precondition=ops.precondition if name != "plain" else None)
        assert runs[name]["status"] == "finished"
    plain, pre = runs["plain"], runs["preconditioned"]
    assert pre["njev"] < 0.7 * plain["njev"], (pre["njev"], plain["njev"])
    assert pre["nfev"] < plain["nfev"]
    np.testing.assert_allclose(pre["y"][-1], plain["y"][-1], rtol=0,
                               atol=1e-6 * np.max(np.abs(plain["y"][-1])))


def test_a_product_at_a_new_state_evaluates_the_right_hand_side_there() -> None:
    rng = np.random.default_rng(4)
    m, d, P = 3, 6, 2
    a = teacher_weights(P, 0.8)
    ops = FlowOperators(m, d, a, H4, R_FLOOR, product_dtype=np.float64)
    V0, V1 = rng.standard_normal((2, m, d))
    ops.rhs(0.0, V0.ravel())
    v = rng.standard_normal(m * d)
    got = ops.linearise(0.0, V1.ravel())(v)
    assert ops.extra == 1
    np.testing.assert_allclose(got, -population_grad_jacobian(V1, a, H4) @ v, atol=1e-11)


def test_the_default_tolerance_follows_the_method() -> None:
    base = {"d": 8, "P": 2, "m": 2}
    assert Hermite.resolve("solve", {**base, "method": "CVODE"})["rtol"] == DEFAULT_RTOL["CVODE"]
    assert Hermite.resolve("solve", base)["rtol"] == 1e-7
    assert Hermite.resolve("solve", {**base, "method": "CVODE", "rtol": 1e-6})["rtol"] == 1e-6


def test_cvode_without_its_package_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    real = hermite_model.importlib.util.find_spec
    monkeypatch.setattr(hermite_model.importlib.util, "find_spec",
                        lambda name, *a: None if name == "sksundae" else real(name, *a))
    with pytest.raises(BadInput, match="method: CVODE needs the package scikit-sundae"):
        Hermite.resolve("solve", {"d": 8, "P": 2, "m": 2, "method": "CVODE"})


def _plateau_flow(t_max: float, **extra: object) -> Any:
    """``solve`` of the flow of :func:`_plateau_flow_against_rk45` up to ``t_max``."""
    base = {"d": 16, "P": 4, "m": 6, "k": 4, "beta": 0.8, "sigma0": 0.05, "t_max": t_max,
            "decades": 3.0, "n_records": 30, "seed": 0}
    values = Hermite.resolve("solve", {**base, **extra})
    return Hermite().solve(Batch.from_points(Hermite, [values]))


def _plateau_flow_against_rk45(t_max: float, rtol: float, method: str) -> tuple[Any, Any]:
    """RK45 at ``rtol`` and ``method`` at its default tolerance on a flow (d = 16, P = 4,
    m = 6) that learns three of its four teachers by t = 11 and then sits on its plateau,
    after asserting the accuracy asked of a method (docs/hermite.md, "Integrators"): the same
    teachers recovered, the recovery times within 0.5%, the loss at every output time within
    1e-3, and a clean status."""
    ref = _plateau_flow(t_max, method="RK45", rtol=rtol)
    new = _plateau_flow(t_max, method=method)
    t_ref, t_new = ref["t_recover"].values[0], new["t_recover"].values[0]
    assert np.count_nonzero(np.isfinite(t_ref)) == 3
    np.testing.assert_array_equal(np.isfinite(t_new), np.isfinite(t_ref))
    np.testing.assert_allclose(t_new, t_ref, rtol=5e-3)
    np.testing.assert_allclose(new["loss"].values[0], ref["loss"].values[0], rtol=1e-3)
    assert new["status"].values[0] == 0
    return ref, new


def test_cvode_follows_rk45_at_a_tight_tolerance() -> None:
    """CVODE at its default tolerance against RK45 at rtol 1e-9 on a flow that learns three
    of its four teachers by t = 11 and then sits on its plateau: the same teachers recovered,
    the recovery times within 0.5% and the loss at every output time within 1e-3 (the
    accuracy asked of a method, docs/hermite.md, "Integrators"); both counts reported."""
    pytest.importorskip("sksundae")
    ref, new = _plateau_flow_against_rk45(100.0, 1e-9, "CVODE")
    assert new["njev"].values[0] > 0
    assert new["nfev"].values[0] < ref["nfev"].values[0]


def own_work(m: int, d: int) -> float:
    """CVODE's own work per call in gradient evaluations, written out."""
    return (260.0 * m * d + 6.5e5) / (m * m * d + 160.0 * m * d + 1.3e6)


def shared(times: np.ndarray, after: float) -> float:
    """The escapes after ``after`` in isolated ones, written out: each finite time ``t``,
    in increasing order, counts ``min(1, (t − previous) / (0.055 t))``."""
    total, previous = 0.0, -np.inf
    for t in sorted(float(x) for x in times if np.isfinite(x)):
        if t > after:
            total += min(1.0, (t - previous) / (0.055 * t))
        previous = t
    return total


def test_escapes_closer_than_their_window_share_cvodes_steps() -> None:
    """Escapes far apart count one each; escapes packed at ``t_i = e^{iε}`` with ``ε ≪ β``
    count ``(1 − e^{−ε})/β`` each, about ``ln(t_N/t_0)/β`` in all, whatever their number
    (``shared_escapes``, docs/hermite.md, "The dry run's model")."""
    assert hermite_model.ESCAPE_WINDOW == 0.055
    apart = np.array([100.0, 1.0, np.nan, 10.0])
    assert hermite_model.shared_escapes(apart, 0.0) == 3.0
    assert hermite_model.shared_escapes(apart, 5.0) == 2.0
    for eps in (0.002, 0.005):
        n = round(3.0 / eps)
        packed = np.exp(eps * np.arange(n + 1))
        got = hermite_model.shared_escapes(packed, 0.0)
        assert got == pytest.approx(1.0 + n * (1.0 - np.exp(-eps)) / 0.055, rel=1e-9)
        assert got == pytest.approx(3.0 / 0.055, rel=0.02)
        assert got == pytest.approx(shared(packed, 0.0), rel=1e-12)
    assert hermite_model.shared_escapes(np.array([np.nan]), 0.0) == 0.0


def test_the_dry_run_prices_cvode_by_its_own_model() -> None:
    """``[(1 + 1.2·0.8)(1500 + 65 n) + 0.01 t_max](1e-8/rtol)^{1/5}(1 + 1.17 w)`` gradient
    evaluations, ``n`` the escapes of the teachers the greedy theory recovers by ``t_max``
    in isolated ones (counted here from the pairs) and ``w`` CVODE's own work per call, each
    evaluation of ``evaluation_work`` plus one per output time."""
    values = Hermite.resolve("solve", {"d": 64, "P": 32, "m": 32, "t_max": 500.0,
                                       "method": "CVODE", "rtol": 1e-7, "n_records": 10})
    U0 = hermite_model.initial_directions(0, 32, 64)
    times = hermite_model.greedy_pairs(U0[:, :32], teacher_weights(32, 0.8), H4)[0]
    n = shared(times[times <= 500.0], 0.0)
    assert 0 < n < int(np.count_nonzero(times <= 500.0)) - 5  # some escapes share steps
    expected = ((1.96 * (1500.0 + 65.0 * n) + 0.01 * 500.0) * 10.0 ** -0.2
                * (1.0 + 1.17 * own_work(32, 64)))
    assert hermite_model.expected_cvode_evaluations(values) == pytest.approx(expected, rel=1e-12)
    cost = Hermite.footprint("solve", values).cost
    assert cost == pytest.approx((expected + 11) * hermite_model.evaluation_work(32, 64) * 1e-9,
                                 rel=1e-12)


def test_rk45_cvode_follows_rk45_switches_on_the_plateau_and_repeats_itself() -> None:
    """RK45+CVODE at its default tolerance against RK45 at rtol 1e-8 on a flow that learns
    three of its four teachers by t = 11 and then sits on its plateau, where RK45's step
    creeps up to its stability edge 3.3/ρ (ρ = 3.15) by t ≈ 260: the same teachers recovered,
    the recovery times within 0.5% and the loss at every output time within 1e-3; one
    hand-over to CVODE, which then integrates the rest of the horizon; and the same seed gives
    the same result bitwise (its cost: tests/numerics/test_solvers_switching.py and
    bench/hermite_methods.py)."""
    pytest.importorskip("sksundae")
    ref, new = _plateau_flow_against_rk45(350.0, 1e-8, "RK45+CVODE")
    assert new["switches"].values[0] == 1
    assert 50.0 < new["t_stiff"].values[0] < 350.0 - 200.0
    assert new["njev"].values[0] > 0 and new["nlin"].values[0] > 0
    assert "switches" not in ref
    again = _plateau_flow(350.0, method="RK45+CVODE")
    for name, item in new.data_vars.items():
        if name != "elapsed":
            np.testing.assert_array_equal(again[name].values, item.values, err_msg=str(name))


def test_the_dry_run_prices_rk45_cvode_as_rk45_up_to_the_hand_over_then_cvode() -> None:
    """RK45's model up to ``t_s = t_i + τ`` (``τ = 2·20·3.0/λ``, ``λ = 4 max a`` for h4,
    ``t_i`` the first greedy recovery time followed by a gap longer than ``τ``), with the
    stiffness test's products (5 at 0.8 per 140 evaluations), then CVODE's
    ``[1.96 (1500 + 65 n) + 0.01 (t_max - t_s)](1 + 1.17 w)`` at rtol 1e-8 for the ``n``
    escapes after ``t_s`` in isolated ones, ``w`` its own work per call."""
    values = Hermite.resolve("solve", {"d": 64, "P": 16, "m": 8, "t_max": 500.0, "beta": 1.5,
                                       "method": "RK45+CVODE", "n_records": 10})
    assert values["rtol"] == 1e-7
    U0 = hermite_model.initial_directions(0, 8, 64)
    a = teacher_weights(16, 1.5)
    greedy = hermite_model.greedy_pairs(U0[:, :16], a, H4)[0]
    learned = np.isfinite(greedy) & (greedy <= 500.0)
    times = np.sort(greedy[learned])
    tau = 2 * 20 * 3.0 / (4.0 * a[learned].max())
    t_s = next((t for t, nxt in itertools.pairwise(times) if nxt - t > tau), times[-1]) + tau
    late = shared(times, t_s)
    assert 0 < t_s < 500.0 and late > 0  # both parts priced
    rk45 = hermite_model.expected_evaluations({**values, "method": "RK45", "t_max": t_s})
    cvode = (1.96 * (1500.0 + 65.0 * late) + 0.01 * (500.0 - t_s)) * (1 + 1.17 * own_work(8, 64))
    expected = (1 + 5 * 0.8 / 140) * rk45 + cvode
    got = hermite_model.expected_switched_evaluations(values)
    assert got == pytest.approx(expected, rel=1e-12)
    cost = Hermite.footprint("solve", values).cost
    assert cost == pytest.approx((expected + 11) * hermite_model.evaluation_work(8, 64) * 1e-9,
                                 rel=1e-12)


def test_the_dry_runs_model_of_rk45_cvode_holds_on_a_long_plateau() -> None:
    """A small flow run far past its greedy recoveries (d = 128, P = 32, m = 16 to
    t = 3·10⁵, which the greedy theory has recovered by t ≈ 90, and which escapes again at
    t ≈ 2.3·10⁴, 3.0·10⁴ and 1.8·10⁵): the work the run counts (what the dry run prices a
    finished probe by) lies within 2x of the model's
    (``expected_switched_evaluations``, docs/hermite.md, "The dry run's model"); without
    the plateau's term the model would price it at 0.51 of the counted work (bound: below
    0.56; with it, 0.88)."""
    pytest.importorskip("sksundae")
    values = Hermite.resolve("solve", {"d": 128, "P": 32, "m": 16, "t_max": 3e5,
                                       "method": "RK45+CVODE", "n_records": 20})
    result = Hermite().solve(Batch.from_points(Hermite, [values]))
    work = hermite_model.evaluation_work(16, 128) * 1e-9
    counted = Hermite._result_cost(values, result) / work - 21
    model = hermite_model.expected_switched_evaluations(values)
    assert 0.5 < counted / model < 2.0, (counted, model)
    without = model - 0.01 * 3e5 * (1 + 1.17 * own_work(16, 128))
    assert counted / without > 1.8, (counted, without)
