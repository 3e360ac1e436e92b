"""The hermite flow in the reduced state (``reduce = "auto"``, docs/hermite.md, "The reduced
state"): the basis, the invariance of the span it rests on, and the reduced flow against the
full one."""

from __future__ import annotations

import numpy as np
import pytest

from richlazy_cli.errors import BadInput
from richlazy_cli.models.base import Batch
from richlazy_cli.models.hermite import model as hermite_model
from richlazy_cli.models.hermite.model import Hermite, initial_directions, reduced_basis

BASE = {"d": 32, "P": 4, "m": 6, "k": 4, "beta": 0.8, "sigma0": 0.05, "t_max": 60.0,
        "decades": 2.0, "n_records": 20, "seed": 0, "save_params": True, "rtol": 1e-9}


def test_the_basis_holds_the_teachers_and_the_initial_rows() -> None:
    U0 = initial_directions(0, 6, 32)
    Q = reduced_basis(U0, 4)
    assert Q.shape == (32, 10)
    np.testing.assert_allclose(Q.T @ Q, np.eye(10), atol=1e-14)
    np.testing.assert_array_equal(Q[:, :4], np.eye(32)[:, :4])
    np.testing.assert_allclose(U0 @ Q @ Q.T, U0, atol=1e-14)


def test_the_reduced_flow_is_the_full_flow(monkeypatch: pytest.MonkeyPatch) -> None:
    """RK45 at rtol 1e-9 both ways: the integrator receives 10 coordinates instead of 32,
    the full flow's weights stay in the span (the claim the reduction rests on, checked on the
    full flow itself), and the reduced flow's outputs, its weights mapped back included, agree
    with the full flow's."""
    shapes = []
    integrate = hermite_model._integrate_flow

    def spy(problem: hermite_model.HermiteFlowProblem) -> dict[str, np.ndarray]:
        shapes.append(problem.V0.shape)
        return integrate(problem)

    monkeypatch.setattr(hermite_model, "_integrate_flow", spy)

    def run(**extra: object) -> object:
        values = Hermite.resolve("solve", {**BASE, **extra})
        return Hermite().solve(Batch.from_points(Hermite, [values]))

    full, reduced = run(), run(reduce="auto")
    assert shapes == [(1, 6, 32), (1, 6, 10)]
    Q = reduced_basis(initial_directions(0, 6, 32), 4)
    V = full["v"].values[0]
    assert V.shape[-1] == 32 and reduced["v"].values[0].shape == V.shape
    np.testing.assert_allclose(V @ Q @ Q.T, V, rtol=0, atol=1e-12 * np.abs(V).max())
    t_full, t_red = full["t_recover"].values[0], reduced["t_recover"].values[0]
    assert np.count_nonzero(np.isfinite(t_full)) >= 2
    np.testing.assert_array_equal(np.isfinite(t_red), np.isfinite(t_full))
    np.testing.assert_allclose(t_red, t_full, rtol=1e-6)
    np.testing.assert_array_equal(reduced["winner"].values, full["winner"].values)
    for name in ("loss", "overlap", "norm"):
        np.testing.assert_allclose(reduced[name].values, full[name].values, rtol=1e-6,
                                   atol=1e-12, err_msg=name)
    np.testing.assert_allclose(reduced["v"].values[0], V, rtol=0,
                               atol=1e-6 * np.abs(V).max())


def test_reduce_is_for_the_flow_only() -> None:
    with pytest.raises(BadInput, match="parameter reduce: only for solve"):
        Hermite.resolve("train", {"d": 8, "P": 2, "m": 2, "reduce": "auto"})


def test_the_dry_run_prices_an_evaluation_at_the_reduced_size() -> None:
    base = {"d": 256, "P": 32, "m": 16, "t_max": 500.0, "n_records": 10}
    full = Hermite.footprint("solve", Hermite.resolve("solve", base)).cost
    reduced = Hermite.footprint("solve", Hermite.resolve("solve", {**base, "reduce": "auto"}))
    ratio = hermite_model.evaluation_work(16, 48) / hermite_model.evaluation_work(16, 256)
    assert reduced.cost == pytest.approx(full * ratio, rel=1e-12)
    wide = {**base, "m": 240}  # P + m ≥ d: nothing to reduce
    assert (Hermite.footprint("solve", Hermite.resolve("solve", {**wide, "reduce": "auto"})).cost
            == Hermite.footprint("solve", Hermite.resolve("solve", wide)).cost)
