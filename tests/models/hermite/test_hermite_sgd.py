"""Online SGD of the hermite model (docs/hermite-sgd.md): the compiled loop against its NumPy
reference, recovery steps and winners, early stop and the stiff integrators of the flow, bad
input through the CLI, and SGD ≈ GF (Ren et al. 2025, §3.3) at CI size."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from richlazy_cli.models.base import Batch
from richlazy_cli.models.hermite._sgd import hermite_tables, sgd_step_reference
from richlazy_cli.models.hermite.model import (
    SETTLE_TOL,
    Hermite,
    hermite_coeffs,
    hermite_eval,
    initial_directions,
    minibatch_grad,
    population_grad_jacobian,
    population_loss_grad,
)
from tests.conftest import assert_one_line_error

H4 = hermite_coeffs(4, None)
MIXED = np.array([0.3, 0, 0, 0, 0.8, 0, math.sqrt(1 - 0.09 - 0.64)])


def run_batch(action: str, points: list[dict[str, object]]) -> object:
    values = [Hermite.resolve(action, p) for p in points]
    return Hermite().run(action, Batch.from_points(Hermite, values))


def run(action: str, **given: object) -> object:
    return run_batch(action, [given]).isel(point=0)


# -- the compiled loop and its reference ------------------------------------------------------
@pytest.mark.parametrize("batch", [1, 3])
def test_compiled_loop_is_bitwise_equal_to_numpy_reference(batch: int) -> None:
    # two configurations in one batch (different lr and sigma0), a mixed activation, a stop
    common = {"d": 12, "P": 3, "m": 4, "steps": 1500, "n_records": 12, "batch": batch,
              "save_params": True, "seed": 4, "sigma_coeffs": MIXED.tolist(),
              "stop_on_recovery": True}
    pts = [{"lr": 2e-3, "sigma0": 0.1}, {"lr": 1e-3, "sigma0": 0.05}]
    out = {}
    for loop in ("numpy", "numba"):
        out[loop] = run_batch("train", [{**common, **p, "implementation": loop} for p in pts])
    for name in ("v", "loss", "overlap", "steps_recover", "winner", "steps_run"):
        np.testing.assert_array_equal(out["numba"][name].values, out["numpy"][name].values,
                                      err_msg=name)
    assert np.isfinite(out["numba"]["v"].values[:, 1]).all()  # the runs are not trivial


def test_reference_step_is_the_minibatch_gradient_step() -> None:
    # the sequential-sum step against the BLAS gradient (an independent computation)
    g = np.random.default_rng(0)
    V = 0.3 * g.standard_normal((5, 9))
    a = np.array([0.7, 0.5, 0.3])
    for c in (H4, MIXED):
        x = g.standard_normal((4, 9))
        sx = hermite_eval(x[:, :3], c)[0]
        r2 = np.sum(V * V, axis=1)
        Vn, r2n = sgd_step_reference(V, r2, x, sx, a, c, 0.01, 1e-150)
        expected = V - 0.01 * minibatch_grad(V, x, sx @ a, c)
        np.testing.assert_allclose(Vn, expected, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(r2n, np.sum(Vn * Vn, axis=1), rtol=1e-14)
    cs, cd, nz, c0 = hermite_tables(MIXED)
    assert c0 == 0.3 and list(np.flatnonzero(nz)) == [0, 4, 6]
    assert cs[4] == pytest.approx(0.8 / math.sqrt(24)) and cd[4] == pytest.approx(4 * cs[4])


def test_recovery_step_winner_and_stop() -> None:
    ds = run("train", d=10, P=2, m=4, a=[0.9, 0.5], sigma0=0.1, lr=1e-3, steps=60000,
             n_records=400, seed=1, save_params=True, stop_on_recovery=True)
    sr = ds["steps_recover"].values
    assert np.all(np.isfinite(sr))
    step = ds["step"].values
    ov = ds["overlap"].values
    U0 = initial_directions(1, 4, 10)
    for p in range(2):
        before = step < sr[p]
        assert np.all(ov[before, p] < 0.9)
        at = int(np.flatnonzero(step >= sr[p])[0])
        assert ov[at, p] >= 0.9 or step[at] > sr[p]
        w = int(ds["winner"].values[p])
        assert ds["winner_overlap0"].values[p] == pytest.approx(U0[w, p] ** 2, rel=1e-14)
    assert np.array_equal(ds["t_recover"].values, 1e-3 * sr)
    # stop: the last recovery plus 10% more steps, nothing recorded after
    last = int(np.nanmax(sr))
    assert int(ds["steps_run"]) == last + math.ceil(last / 10)
    after = step > int(ds["steps_run"])
    assert after.any() and np.all(np.isnan(ds["loss"].values[after]))
    assert np.all(np.isfinite(ds["loss"].values[~after]))
    # the greedy winners (Ren et al. 2025, Eq. 5) on this well-separated case
    np.testing.assert_array_equal(ds["winner"].values, ds["winner_theory"].values)


# -- the flow: Jacobian, stiff methods, early stop --------------------------------------------
@pytest.mark.parametrize("c", [H4, MIXED], ids=["h4", "mixed"])
def test_jacobian_matches_finite_differences_and_is_symmetric(c: np.ndarray) -> None:
    g = np.random.default_rng(2)
    V = 0.4 * g.standard_normal((3, 6))
    a = np.array([0.8, 0.6])
    J = population_grad_jacobian(V, a, c, block=5)
    fd = np.zeros_like(J)
    h = 1e-6
    for i in range(V.size):
        E = np.zeros(V.size)
        E[i] = h
        gp = population_loss_grad(V + E.reshape(V.shape), a, c)[1]
        gm = population_loss_grad(V - E.reshape(V.shape), a, c)[1]
        assert gp is not None and gm is not None
        fd[:, i] = (gp - gm).ravel() / (2 * h)
    assert np.max(np.abs(J - fd)) <= 1e-8 * np.max(np.abs(J))
    np.testing.assert_allclose(J, J.T, atol=1e-13 * np.max(np.abs(J)))  # a Hessian


def test_early_stop_keeps_recovery_and_plateau() -> None:
    common = {"d": 48, "P": 3, "m": 6, "a": [0.8, 0.5, 0.3], "seed": 2, "t_max": 3000.0,
              "n_records": 80}
    full = run("solve", **common)
    early = run("solve", **common, early_stop=True)
    # the same steps up to the stop: the same recovery times, bit for bit
    np.testing.assert_array_equal(early["t_recover"].values, full["t_recover"].values)
    assert np.all(np.isfinite(full["t_recover"].values))
    assert float(early["t_stop"]) < 0.2 * 3000.0
    assert int(early["nfev"]) < 0.2 * int(full["nfev"])
    # the settled loss is the plateau of the full run
    L0 = float(full["loss"][0])
    assert abs(float(early["loss"][-1]) - float(full["loss"][-1])) <= SETTLE_TOL * L0
    np.testing.assert_array_equal(early["winner"].values, full["winner"].values)
    np.testing.assert_array_equal(full["winner"].values, full["winner_theory"].values)


@pytest.mark.parametrize("method", ["BDF", "LSODA"])
def test_stiff_methods_agree_with_rk45(method: str) -> None:
    common = {"d": 32, "P": 2, "m": 3, "a": [0.8, 0.4], "seed": 3, "t_max": 500.0,
              "n_records": 40}
    ref = run("solve", **common)
    ds = run("solve", **common, method=method)
    np.testing.assert_allclose(ds["t_recover"].values, ref["t_recover"].values, rtol=2e-3)
    np.testing.assert_allclose(ds["loss"].values, ref["loss"].values, rtol=1e-2, atol=1e-6)
    if method == "BDF":  # long after the emergences it is not stability-bound
        assert int(ds["nfev"]) < 0.5 * int(ref["nfev"])


# -- bad input through the CLI ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("action", "params", "words"),
    [
        ("solve", ["stop_on_recovery=true"], "stop_on_recovery"),
        ("train", ["early_stop=true"], "early_stop"),
        ("train", ["batch=0"], "batch"),
        ("train", ["lr=0"], "lr"),
        ("train", ["lr=-1e-3"], "lr"),
        ("solve", ["beta=0", "P=4"], "beta"),
        ("solve", ["method=BDF", "m=32", "d=256"], "8192"),
        ("train", ["implementation=cuda"], "implementation"),
    ],
)
def test_bad_input_one_line_exit_2_no_file(cli, tmp_path: Path, action: str,
                                           params: list[str], words: str) -> None:
    out = tmp_path / "out.h5"
    args = [action, "hermite", "-o", str(out)]
    for p in params:
        args += ["-p", p]
    result = cli(*args)
    assert_one_line_error(result)
    assert words in result.err
    assert not out.exists() and not list(tmp_path.iterdir())


def test_stiff_limit_message_names_size_and_limit() -> None:
    from richlazy_cli.errors import BadInput

    with pytest.raises(BadInput, match=r"m·d = 8192 .* m·d ≤ 4096"):
        Hermite.resolve("solve", {"method": "LSODA", "m": 32, "d": 256})
    Hermite.resolve("solve", {"method": "BDF", "m": 16, "d": 256})  # 4096: allowed
    Hermite.resolve("solve", {"beta": 0.0, "P": 1})  # one teacher: β is irrelevant
    Hermite.resolve("solve", {"P": 3, "a": [0.5, 0.5, 0.5]})  # explicit weights, no β
    with pytest.raises(BadInput, match="parameter beta: a replaces it"):
        Hermite.resolve("solve", {"beta": 0.0, "P": 3, "a": [0.5, 0.5, 0.5]})


# -- SGD ≈ GF at CI size (docs/hermite-sgd.md, eq. (6)) ---------------------------------------
def sgd_over_theory(d: int, seeds: range, c_lr: float) -> np.ndarray:
    """t_recover/t_recover_theory of SGD at lr = c_lr/d² (P = 1, m = 4, σ0 = 1e-2)."""
    ratios = []
    for seed in seeds:
        th = run("solve", d=d, P=1, m=4, seed=seed, t_max=1.0, n_records=2)
        t_hat = float(th["t_recover_theory"][0])
        lr = c_lr / d**2
        ds = run("train", d=d, P=1, m=4, seed=seed, lr=lr, steps=math.ceil(3 * t_hat / lr),
                 n_records=20, stop_on_recovery=True)
        ratios.append(float(ds["t_recover"][0]) / t_hat)
    return np.array(ratios)


@pytest.mark.integration
def test_sgd_follows_gradient_flow_at_small_lr_ci() -> None:
    """d = 24, lr = 1e-3/d², 4 seeds (≈ 1.2·10⁶ steps each). The search-phase noise relative
    to the drift is ≈ 4.5 c/(a c_m) at lr = c/d² (docs/hermite-sgd.md, eq. (6)): it does not
    shrink with d, so c must be ≈ 1e-3 for SGD to track GF to ±10%."""
    r = sgd_over_theory(24, range(4), 1e-3)
    assert np.all(np.isfinite(r)), r
    assert 0.9 <= float(np.median(r)) <= 1.1, r
    assert np.all((r >= 0.67) & (r <= 1.5)), r


@pytest.mark.system
def test_report_kind_scaling_draws_the_sample_complexity_fit(cli, tmp_path: Path) -> None:
    out = tmp_path / "dscale.h5"
    res = cli("sweep", "train", "hermite", "-g", "d=8,12,16", "-g", "seed=range(2)",
              "-p", "P=1", "-p", "m=4", "-p", "steps=200000", "-p", "stop_on_recovery=true",
              "-p", "n_records=10", "-o", str(out), "-q", "--jobs", "1")
    assert res.code == 0, res.err
    rep = tmp_path / "rep"
    res = cli("report", str(out), "-o", str(rep), "--kind", "scaling")
    assert res.code == 0, res.err
    assert (rep / "dscale-scaling-samples.png").stat().st_size > 1000
    summary = (rep / "summary.json").read_text()
    assert '"samples"' in summary and '"theory": 3.0' in summary


def test_too_large_a_step_does_not_follow_the_flow() -> None:
    """Control: at lr = 20/d² (≈ 10⁴ times the step at which SGD tracks GF, eq. (6)), d = 96,
    8 seeds: at least half the runs fail to recover within 3 t̂/lr or take more than 1.5 t̂.
    Measured: 8 of 8 fail (7 diverge, 1 never recovers)."""
    d = 96
    bad = 0
    for seed in range(8):
        th = run("solve", d=d, P=1, m=4, seed=seed, t_max=1.0, n_records=2)
        t_hat = float(th["t_recover_theory"][0])
        lr = 20.0 / d**2
        ds = run("train", d=d, P=1, m=4, seed=seed, lr=lr, steps=math.ceil(3 * t_hat / lr),
                 n_records=20, stop_on_recovery=True)
        t = float(ds["t_recover"][0])
        bad += int(not np.isfinite(t) or t > 1.5 * t_hat)
    assert bad >= 4, bad
