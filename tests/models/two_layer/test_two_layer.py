"""Tests of the ``two-layer`` model (docs/two-layer.md; Kunin et al. 2024, App. D.1).

Every check compares the model with an independent computation: central finite differences,
an explicit Jacobian, plain per-configuration NumPy formulas written here from the equations of
docs/two-layer.md, or reference values computed independently.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from richlazy_cli.errors import BadInput
from richlazy_cli.models.base import Batch, rng
from richlazy_cli.models.two_layer import _kernels as kern
from richlazy_cli.models.two_layer.model import TwoLayer, checkpoint_steps


@pytest.fixture(autouse=True)
def _one_blas_thread() -> Iterator[None]:
    # Small products gain nothing from BLAS threads and suffer badly on a loaded 2-core box.
    with threadpool_limits(1):
        yield


def train(points: list[dict[str, Any]], **common: Any) -> Any:
    values = [TwoLayer.resolve("train", {**common, **p}) for p in points]
    return TwoLayer().train(Batch.from_points(TwoLayer, values))


SMALL = dict(d=6, h=8, k=2, n=15, n_test=40)


# -- independent reference formulas (docs/two-layer.md) ---------------------------------------

def sigma(z: np.ndarray, leak: float) -> np.ndarray:
    return np.maximum(z, leak * z)


def dsigma(z: np.ndarray, leak: float) -> np.ndarray:
    return np.where(z >= 0, 1.0, leak)


def mse(X: np.ndarray, y: np.ndarray, W: np.ndarray, a: np.ndarray, leak: float) -> float:
    r = sigma(X @ W.T, leak) @ a - y
    return float(np.mean(r**2))


def jacobian(X: np.ndarray, W: np.ndarray, a: np.ndarray, leak: float) -> np.ndarray:
    """Explicit n × (h + h d) Jacobian of f(X) with respect to (a, W)."""
    Z = X @ W.T
    Ja = sigma(Z, leak)
    Jw = (a * dsigma(Z, leak))[:, :, None] * X[:, None, :]
    return np.concatenate([Ja, Jw.reshape(X.shape[0], -1)], axis=1)


def s_dense(K0: np.ndarray, K: np.ndarray) -> float:
    return float(1 - np.sum(K0 * K) / (np.linalg.norm(K0) * np.linalg.norm(K)))


def random_case(seed: int, n: int = 15, d: int = 6, h: int = 8
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    g = np.random.default_rng(seed)
    X = kern.sphere(g, n, d)
    y = g.standard_normal(n)
    W = g.standard_normal((h, d))
    a = g.standard_normal(h)
    return X, y, W, a


# -- initialisation -------------------------------------------------------------------------

def test_alpha_matches_reference_values() -> None:
    # eq. (2) at (0.1, 1) and (0.5, -0.3), reference values computed independently
    for tau, delta, alpha, w, a in [(0.1, 1.0, 0.0999950, 0.0099995, 1.0000500),
                                    (0.5, -0.3, 1.3289810, 0.6644905, 0.3762281)]:
        al = float(kern.alpha_of(tau, delta))
        assert al == pytest.approx(alpha, abs=6e-8)
        assert tau * al == pytest.approx(w, abs=6e-8)
        assert tau / al == pytest.approx(a, abs=6e-8)
        assert (tau / al) ** 2 - (tau * al) ** 2 == pytest.approx(delta, abs=1e-13)


def test_symmetrised_init_gives_zero_output_and_requested_scales() -> None:
    taus = [0.1, 0.1, 0.5, 2.0, 1.3]
    deltas = [1.0, -1.0, 0.0, 1.0, -0.7]
    ds = train([{"tau": t, "delta": dl} for t, dl in zip(taus, deltas, strict=True)],
               **SMALL, steps=0, save_params=True, seed=3)
    X = kern.sphere(rng(3, "data"), SMALL["n"], SMALL["d"])
    for i, (tau, delta) in enumerate(zip(taus, deltas, strict=True)):
        W = ds.W.values[i, 0]
        a = ds.a.values[i, 0]
        norms = np.linalg.norm(W, axis=1)
        assert np.max(np.abs(sigma(X @ W.T, 0.0) @ a)) <= 1e-12 * tau**2
        np.testing.assert_allclose(np.abs(a) * norms, tau**2, rtol=1e-12, atol=0)
        np.testing.assert_allclose(a**2 - norms**2, delta, rtol=0, atol=1e-12)
        # mirrored pairs: W = [U; U], a = [eps; -eps]
        half = SMALL["h"] // 2
        assert np.array_equal(W[:half], W[half:]) and np.array_equal(a[:half], -a[half:])
    # every configuration of the seed shares the base directions
    dirs = ds.W.values[:, 0] / np.linalg.norm(ds.W.values[:, 0], axis=2, keepdims=True)
    np.testing.assert_allclose(dirs, np.broadcast_to(dirs[0], dirs.shape), atol=1e-15)


# -- gradients -----------------------------------------------------------------------------

@pytest.mark.parametrize("leak", [0.0, 0.2])
def test_gradients_match_finite_differences(leak: float) -> None:
    X, y, W, a = random_case(1)
    _, P3 = kern.group_gradients(X, y, W[None].copy(), a[None].copy(), np.array([leak]))
    n = X.shape[0]
    gW = 2.0 / n * a[:, None] * P3[0]
    ga = 2.0 / n * (W * P3[0]).sum(axis=1)
    eps = 1e-6
    fdW = np.zeros_like(W)
    for idx in np.ndindex(W.shape):
        Wp, Wm = W.copy(), W.copy()
        Wp[idx] += eps
        Wm[idx] -= eps
        fdW[idx] = (mse(X, y, Wp, a, leak) - mse(X, y, Wm, a, leak)) / (2 * eps)
    fda = np.zeros_like(a)
    for k in range(a.size):
        ap, am = a.copy(), a.copy()
        ap[k] += eps
        am[k] -= eps
        fda[k] = (mse(X, y, W, ap, leak) - mse(X, y, W, am, leak)) / (2 * eps)
    g = np.concatenate([gW.ravel(), ga])
    fd = np.concatenate([fdW.ravel(), fda])
    assert np.linalg.norm(g - fd) / np.linalg.norm(fd) <= 1e-6


@pytest.mark.parametrize("leak", [0.0, 0.3])
def test_first_step_is_plain_gradient_descent(leak: float) -> None:
    # eqs. (3)-(4), written out per configuration, against the batched kernel
    pts = [{"tau": 0.7, "delta": 0.4, "leak": leak, "lr": 0.05},
           {"tau": 1.5, "delta": -1.0, "leak": leak, "lr": 0.02, "symmetrize": False}]
    for p in pts:
        ds = train([p], **SMALL, steps=1, records=[0, 1], save_params=True, seed=5)
        W0, a0 = ds.W.values[0, 0], ds.a.values[0, 0]
        X = kern.sphere(rng(5, "data"), SMALL["n"], SMALL["d"])
        tw = kern.sphere(rng(5, "teacher"), SMALL["k"], SMALL["d"])
        ta = rng(5, "teacher")
        ta.standard_normal((SMALL["k"], SMALL["d"]))
        y = np.maximum(X @ tw.T, 0) @ ta.choice(np.array([-1.0, 1.0]), size=SMALL["k"])
        n = SMALL["n"]
        lr = p["lr"] / p["tau"] ** 2
        r = sigma(X @ W0.T, leak) @ a0 - y
        a1 = a0 - lr / n * 2 * sigma(X @ W0.T, leak).T @ r
        W1 = W0 - lr / n * 2 * (a0 * (dsigma(X @ W0.T, leak) * r[:, None])).T @ X
        np.testing.assert_allclose(ds.a.values[0, 1], a1, rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(ds.W.values[0, 1], W1, rtol=1e-13, atol=1e-15)
        assert ds.train_loss.values[0, 0] == pytest.approx(np.mean(r**2), rel=1e-13)


def test_many_steps_match_a_plain_numpy_loop() -> None:
    # eqs. (3)-(4) repeated, against the compiled loop that runs many steps per call
    p = {"tau": 0.6, "delta": -0.3, "leak": 0.1, "lr": 0.05}
    steps = 25
    ds = train([p], **SMALL, steps=steps, records=[0, steps], save_params=True, seed=5)
    W, a = ds.W.values[0, 0].copy(), ds.a.values[0, 0].copy()
    X = kern.sphere(rng(5, "data"), SMALL["n"], SMALL["d"])
    prob = kern.make_problem(5, SMALL["d"], SMALL["h"], SMALL["k"], SMALL["n"], 1, True)
    y, n, lr = prob.y, SMALL["n"], p["lr"] / p["tau"] ** 2
    for _ in range(steps):
        Z = X @ W.T
        r = sigma(Z, 0.1) @ a - y
        a, W = (a - lr / n * 2 * sigma(Z, 0.1).T @ r,
                W - lr / n * 2 * (a * (dsigma(Z, 0.1) * r[:, None])).T @ X)
    np.testing.assert_allclose(ds.W.values[0, 1], W, rtol=1e-11, atol=1e-14)
    np.testing.assert_allclose(ds.a.values[0, 1], a, rtol=1e-11, atol=1e-14)
    assert ds.train_loss.values[0, 1] == pytest.approx(mse(X, y, W, a, 0.1), rel=1e-10)


# -- NTK and kernel distance -----------------------------------------------------------------

@pytest.mark.parametrize("leak", [0.0, 0.25])
def test_closed_form_ntk_equals_jacobian_product(leak: float) -> None:
    X, _, W, a = random_case(2)
    J = jacobian(X, W, a, leak)
    # the explicit Jacobian itself against finite differences of f
    eps = 1e-6
    theta = np.concatenate([a, W.ravel()])
    h = a.size

    def f(th: np.ndarray) -> np.ndarray:
        return sigma(X @ th[h:].reshape(W.shape).T, leak) @ th[:h]

    fdJ = np.stack([(f(theta + eps * e) - f(theta - eps * e)) / (2 * eps)
                    for e in np.eye(theta.size)], axis=1)
    np.testing.assert_allclose(J, fdJ, atol=1e-8)
    K = J @ J.T
    np.testing.assert_allclose(kern.ntk_dense(X, W, a, leak), K, rtol=0,
                               atol=1e-10 * np.abs(K).max())
    # the upper-triangular panels used by the model
    _, A, G = kern.features(X, W, a, leak)
    Kp = np.zeros_like(K)
    for i0, P in kern.ntk_panels(A, G, kern.gram_panels(X)):
        Kp[i0:i0 + P.shape[0], i0:] = P
    np.testing.assert_allclose(np.triu(Kp), np.triu(K), rtol=0, atol=1e-10 * np.abs(K).max())


def test_panel_kernel_distance_equals_dense() -> None:
    X, _, W, a = random_case(4, n=300)
    W1 = W + 0.3 * np.random.default_rng(9).standard_normal(W.shape)
    K0 = jacobian(X, W, a, 0.0)
    K0 = K0 @ K0.T
    K1 = jacobian(X, W1, 0.5 * a, 0.0)
    K1 = K1 @ K1.T
    C = kern.gram_panels(X)
    assert len(C) > 1  # several panels at n = 300
    _, A0, G0 = kern.features(X, W, a, 0.0)
    _, A1, G1 = kern.features(X, W1, 0.5 * a, 0.0)
    inner = n0 = n1 = 0.0
    for (i0, P0), (_, P1) in zip(kern.ntk_panels(A0, G0, C), kern.ntk_panels(A1, G1, C),
                                 strict=True):
        i1 = i0 + P0.shape[0]
        inner += kern.panel_inner(P0, P1, i0, i1)
        n0 += kern.panel_inner(P0, P0, i0, i1)
        n1 += kern.panel_inner(P1, P1, i0, i1)
    S = kern.kernel_distance_from(inner, n0, n1)
    assert S == pytest.approx(s_dense(K0, K1), abs=1e-12)
    assert kern.kernel_distance_from(n0, n0, n0) == 0.0


def test_metrics_match_independent_computation() -> None:
    # kernel distance, Hamming fraction, parameter distance and both losses recomputed from
    # the saved parameters with explicit Jacobians and plain formulas
    pts = [{"tau": 0.2, "delta": 1.0}, {"tau": 0.3, "delta": -0.5, "leak": 0.1}]
    ds = train(pts, **SMALL, steps=300, n_records=6, lr=0.05, save_params=True, seed=7)
    X = kern.sphere(rng(7, "data"), SMALL["n"], SMALL["d"])
    Xt = kern.sphere(rng(7, "test"), SMALL["n_test"], SMALL["d"])
    gt = rng(7, "teacher")
    tw = kern.sphere(gt, SMALL["k"], SMALL["d"])
    ta = gt.choice(np.array([-1.0, 1.0]), size=SMALL["k"])
    y, yt = np.maximum(X @ tw.T, 0) @ ta, np.maximum(Xt @ tw.T, 0) @ ta
    for i, p in enumerate(pts):
        leak = p.get("leak", 0.0)
        W0, a0 = ds.W.values[i, 0], ds.a.values[i, 0]
        J0 = jacobian(X, W0, a0, leak)
        K0 = J0 @ J0.T
        for j in range(ds.sizes["step"]):
            W, a = ds.W.values[i, j], ds.a.values[i, j]
            J = jacobian(X, W, a, leak)
            S = ds.kernel_distance.values[i, j]
            assert S == pytest.approx(max(0.0, s_dense(K0, J @ J.T)), abs=1e-10)
            flips = np.mean(np.sign(X @ W.T) != np.sign(X @ W0.T))
            assert ds.hamming_distance.values[i, j] == flips
            dist = np.sqrt(np.sum((W - W0) ** 2) + np.sum((a - a0) ** 2))
            assert ds.param_distance.values[i, j] == pytest.approx(dist, rel=1e-12, abs=1e-15)
            assert ds.train_loss.values[i, j] == pytest.approx(mse(X, y, W, a, leak), rel=1e-12)
            assert ds.test_loss.values[i, j] == pytest.approx(mse(Xt, yt, W, a, leak), rel=1e-12)
        assert ds.kernel_distance.values[i, -1] > 0.01  # something moved


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_recomputed_initial_kernel_equals_the_stored_one(dtype: str, monkeypatch: Any) -> None:
    """Above a memory bound the initial NTK's panels are recomputed at every checkpoint instead
    of stored; both routes, through their panel workspaces, give the same bits (n = 300: two
    panels, so a workspace is reused)."""
    from richlazy_cli.models.two_layer import model as two_layer

    pts = [{"tau": 0.3, "delta": 0.5}, {"tau": 1.0, "delta": -0.2, "leak": 0.1}]
    common = dict(d=10, h=8, k=2, n=300, n_test=20, steps=40, n_records=5, seed=3,
                  dtype=dtype)
    stored = train(pts, **common)
    monkeypatch.setattr(two_layer, "_K0_STORE_BYTES", 0)
    recomputed = train(pts, **common)
    S = stored.kernel_distance.values
    assert np.all(S[:, -1] > 1e-4)  # the kernels moved
    assert S.tobytes() == recomputed.kernel_distance.values.tobytes()


def test_kernel_distance_starts_at_exactly_zero_and_stays_in_unit_interval() -> None:
    pts = [{"tau": t, "delta": dl} for t in (0.1, 0.5, 2.0) for dl in (-1.0, 0.0, 1.0)]
    ds = train(pts, **SMALL, steps=2000, seed=1)
    assert np.all(ds.status.values == 0)
    S = ds.kernel_distance.values
    assert np.all(S[:, 0] == 0.0)
    assert np.all(np.isfinite(S)) and np.all(S >= 0) and np.all(S <= 1)
    assert np.all(ds.hamming_distance.values[:, 0] == 0.0)
    assert np.all(ds.param_distance.values[:, 0] == 0.0)


# -- the phenomenon -------------------------------------------------------------------------

def test_lazy_versus_rich() -> None:
    # a reduced Fig. 1b setting: d = 20, h = 50, n = 200, 1000 steps, paper lr 5e-3 / tau^2
    pts = [{"tau": 2.0, "delta": 0.0}, {"tau": 2.0, "delta": 1.0},
           {"tau": 0.1, "delta": 1.0}, {"tau": 0.1, "delta": -1.0}]
    ds = train(pts, d=20, h=50, n=200, n_test=2000, steps=1000, n_records=5, seed=0)
    S = ds.kernel_distance.values[:, -1]
    test = ds.test_loss.values[:, -1]
    assert np.all(ds.status.values == 0)
    assert S[0] < 0.05 and S[1] < 0.05  # lazy
    assert 10 * S[0] <= S[2] and 10 * S[1] <= S[2]  # rich upstream moves the kernel
    assert test[2] < test[3]  # upstream beats downstream at small tau


# -- batching, dtype, divergence ----------------------------------------------------------------

BATCH_POINTS = [
    {"tau": 0.1, "delta": 1.0},
    {"tau": 2.0, "delta": -0.5, "lr": 0.01},
    {"tau": 0.5, "delta": 0.0, "leak": 0.2},
    {"tau": 1.0, "delta": -1.0},
    {"tau": 0.3, "delta": 0.25, "leak": 0.05, "lr": 0.002},
]


def assert_same(ds_a: Any, i: int, ds_b: Any, j: int) -> None:
    for name in ds_a.data_vars:
        x = ds_a[name].values[i]
        y = ds_b[name].values[j]
        assert x.tobytes() == y.tobytes(), name


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("size", [dict(d=7, h=6, k=2, n=23, n_test=30),
                                  dict(d=100, h=50, k=3, n=1000, n_test=100)])
def test_alone_and_in_batch_are_bitwise_identical(dtype: str, size: dict[str, int]) -> None:
    common = dict(size, dtype=dtype, steps=30, n_records=4, save_params=True, seed=2)
    batch = train(BATCH_POINTS, **common)
    order = [3, 0, 4, 2, 1]
    shuffled = train([BATCH_POINTS[i] for i in order], **common)
    for i, p in enumerate(BATCH_POINTS):
        alone = train([p], **common)
        assert_same(batch, i, alone, 0)
        assert_same(batch, i, shuffled, order.index(i))


def test_checkpoints_do_not_change_the_trajectory() -> None:
    """Training runs in compiled ranges of steps between checkpoints (and progress reports):
    where the ranges are cut must not change a bit of the trajectory."""
    common = dict(SMALL, steps=45, save_params=True, seed=9)
    pts = [{"tau": 0.3, "delta": 0.5}, {"tau": 1.2, "delta": -0.4, "leak": 0.1}]
    coarse = train(pts, **common, records=[0, 45])
    fine = train(pts, **common, records=[0, 1, 2, 7, 13, 29, 44, 45])
    for name in ("W", "a", "train_loss", "kernel_distance"):
        x = coarse[name].sel(step=[0, 45]).values
        y = fine[name].sel(step=[0, 45]).values
        assert x.tobytes() == y.tobytes(), name


def test_float32_tracks_float64() -> None:
    """float32 training (and float32 products in the metrics, summed in float64) stays close
    to float64, down to the lazy regime's small kernel distances (S ~ 4e-4 here)."""
    pts = [{"tau": 0.5, "delta": 0.5}, {"tau": 1.5, "delta": -0.5}, {"tau": 2.0, "delta": 0.0}]
    common = dict(d=20, h=50, n=200, n_test=500, steps=300, n_records=4, seed=4)
    d64 = train(pts, **common)
    d32 = train(pts, **common, dtype="float32")
    np.testing.assert_allclose(d32.train_loss.values, d64.train_loss.values, rtol=1e-3)
    np.testing.assert_allclose(d32.test_loss.values, d64.test_loss.values, rtol=1e-3)
    S32, S64 = d32.kernel_distance.values, d64.kernel_distance.values
    assert S64[:, -1].min() > 1e-4  # the check below is not vacuous
    np.testing.assert_allclose(S32, S64, rtol=1e-4, atol=1e-8)
    np.testing.assert_allclose(d32.hamming_distance.values, d64.hamming_distance.values,
                               atol=1e-3)
    np.testing.assert_allclose(d32.param_distance.values, d64.param_distance.values, rtol=1e-4)


def test_divergent_configuration_is_frozen_and_others_unaffected() -> None:
    good = {"tau": 0.5, "delta": 0.0}
    bad = {"tau": 0.5, "delta": 0.0, "lr": 50.0}
    common = dict(SMALL, steps=200, n_records=8, save_params=True, seed=6)
    both = train([bad, good], **common)
    alone = train([good], **common)
    assert list(both.status.values) == [1, 0]
    assert_same(both, 1, alone, 0)
    loss = both.train_loss.values[0]
    assert np.isfinite(loss[0])
    assert np.isnan(loss[-1]) and np.isnan(both.kernel_distance.values[0, -1])
    first_nan = int(np.argmax(np.isnan(loss)))
    assert np.all(np.isnan(loss[first_nan:])) and np.all(np.isfinite(loss[:first_nan]))


# -- parameters and schema ---------------------------------------------------------------------

def test_checkpoint_steps() -> None:
    ck = checkpoint_steps(10000, 41, None)
    assert ck[0] == 0 and ck[-1] == 10000 and len(ck) <= 41
    assert np.all(np.diff(ck) > 0) and ck.dtype == np.int64
    assert list(checkpoint_steps(0, 41, None)) == [0]
    assert list(checkpoint_steps(5, 41, [5, 0, 2, 2])) == [0, 2, 5]


def test_bad_input_names_the_parameter() -> None:
    with pytest.raises(BadInput, match="parameter h"):
        TwoLayer.resolve("train", {"h": 7})
    TwoLayer.resolve("train", {"h": 7, "symmetrize": False})
    with pytest.raises(BadInput, match="parameter records"):
        TwoLayer.resolve("train", {"steps": 10, "records": [0, 11]})


def test_dataset_schema() -> None:
    ds = train([{"tau": 1.0}], **SMALL, steps=10, save_params=True)
    for name in ("train_loss", "test_loss", "kernel_distance", "hamming_distance",
                 "param_distance", "time"):
        assert ds[name].dims == ("point", "step")
    assert ds.W.dims == ("point", "step", "neuron", "dim")
    assert ds.a.dims == ("point", "step", "neuron")
    assert ds.status.dims == ("point",) and ds.status.dtype == np.int8
    assert "point" not in ds.coords
    assert list(ds.step.values) == list(checkpoint_steps(10, 41, None))


def test_blas_thread_count_does_not_change_results() -> None:
    common = dict(d=100, h=50, n=1000, n_test=50, steps=5, n_records=2, seed=8)
    p = {"tau": 0.5, "delta": 0.5}
    one = train([p], **common)
    with threadpool_limits(2):
        two = train([p], **common)
    assert_same(one, 0, two, 0)


def test_paper_size_kernel_distance_after_1000_steps() -> None:
    # at the paper's size, one seed, after 1,000 steps S ~ 2e-4 at tau = 2 and
    # S ~ 0.13-0.24 at tau = 0.1, delta = +1
    ds = train([{"tau": 2.0, "delta": 0.0}, {"tau": 0.1, "delta": 1.0}], n_test=1000,
               steps=1000, records=[0, 1000], seed=0)
    S = ds.kernel_distance.values[:, -1]
    assert 5e-5 < S[0] < 1e-3
    assert 0.1 < S[1] < 0.3


@pytest.mark.system
def test_sweeps_with_different_jobs_are_bitwise_identical(tmp_path: Any) -> None:
    import subprocess
    import sys

    import xarray as xr

    args = [sys.executable, "-m", "richlazy_cli", "sweep", "train", "two-layer",
            "-g", "tau=0.1,2", "-g", "delta=-1,1", "-q",
            *(f"-p{k}={v}" for k, v in SMALL.items()), "-psteps=100", "-pn_checkpoints=5"]
    outs = []
    for jobs, chunk in [(1, 4), (2, 1)]:
        out = tmp_path / f"j{jobs}.h5"
        subprocess.run([*args, "-o", str(out), "-j", str(jobs), "--chunk-size", str(chunk)],
                       check=True, capture_output=True)
        outs.append(xr.open_dataset(out, engine="h5netcdf").load())
    for name in ("train_loss", "test_loss", "kernel_distance", "hamming_distance",
                 "param_distance", "status"):
        assert outs[0][name].values.tobytes() == outs[1][name].values.tobytes(), name


@pytest.mark.system
def test_threads_backend_is_bitwise_identical_at_the_papers_size(tmp_path: Any) -> None:
    """Products large enough for OpenBLAS to split over threads: each thread's training must
    run under one BLAS thread, also in the BLAS that the compiled loop loads on first use (the
    engine loads it before it holds BLAS at one thread for the whole threads run)."""
    import subprocess
    import sys

    import xarray as xr

    args = [sys.executable, "-m", "richlazy_cli", "sweep", "train", "two-layer",
            "-g", "tau=0.1,0.5,1,2", "-g", "delta=-1,1", "-q", "--chunk-size", "1",
            "-psteps=30", "-pn_test=50", "-pn_checkpoints=3"]
    outs = []
    for backend, jobs in [("loky", 1), ("threads", 2)]:
        out = tmp_path / f"{backend}.h5"
        subprocess.run([*args, "-o", str(out), "-j", str(jobs), "--backend", backend],
                       check=True, capture_output=True)
        outs.append(xr.open_dataset(out, engine="h5netcdf").load())
    for name in ("train_loss", "kernel_distance", "param_distance"):
        assert outs[0][name].values.tobytes() == outs[1][name].values.tobytes(), name


def test_stacking_check_does_not_depend_on_the_callers_blas_threads() -> None:
    """The check runs under the one BLAS thread training uses, whatever the caller holds
    (with two threads OpenBLAS splits the products differently and stacking looks unsafe)."""
    from threadpoolctl import threadpool_limits

    answers = []
    for threads in (2, 1):
        kern._STACKING_EXACT.clear()
        with threadpool_limits(limits=threads):
            answers.append(kern.stacking_is_exact(1000, 100, 50, 4, np.dtype(np.float64)))
    kern._STACKING_EXACT.clear()
    assert answers[0] == answers[1]


@pytest.mark.system
def test_a_dry_run_times_a_short_probe_of_a_long_run(cli: Any, tmp_path: Any) -> None:
    """The estimate of a 10⁶-step sweep comes from a short probe (here 10⁴ steps: one GFLOP of
    steps, two_layer.PROBE_GFLOP), in seconds."""
    import time

    start = time.perf_counter()
    result = cli("sweep", "train", "two-layer", "-p", "steps=1000000", "-p", "d=10", "-p",
                 "n=50", "-p", "n_test=20", "-g", "tau=0.5,1", "-o", tmp_path / "x.h5",
                 "--dry-run")
    assert result.code == 0, result.err
    assert "estimated time" in result.out and time.perf_counter() - start < 60
    assert not (tmp_path / "x.h5").exists()


@pytest.mark.parametrize(("tau", "dtype", "refused"), [
    (1000.0, "float32", True), (100.0, "float32", True), (30.0, "float32", False),
    (1e7, "float64", True), (1e6, "float64", False)])
def test_a_step_below_the_weights_rounding_is_refused(tau: float, dtype: str,
                                                      refused: bool) -> None:
    """At lr = 0.005 with lr/τ² the updates fall below the weights' rounding: measured on
    d = 5, h = 4, n = 20, 100 steps, the loss stays at its start from τ = 300 (float32) and
    10⁷ (float64) and is 13% off the lazy limit's at τ = 100 (float32, a step of 4 rounding
    units); 0.14% at τ = 30 (47 units) and 0.27% at τ = 10⁶ (float64, 22 units). Below
    SMALLEST_STEP = 10 units the configuration is refused."""
    values = dict(d=5, h=4, k=2, n=20, n_test=10, steps=100, n_records=3, tau=tau, dtype=dtype)
    if refused:
        with pytest.raises(BadInput, match="rounding units"):
            TwoLayer.resolve("train", values)
    else:
        TwoLayer.resolve("train", values)
