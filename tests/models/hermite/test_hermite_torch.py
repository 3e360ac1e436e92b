"""The hermite model's torch backend against its NumPy reference (docs/hermite.md).

The torch backend integrates the same flow with the same Dormand–Prince pair and step control
as SciPy's RK45, so each configuration takes the same steps; its gradient differs from the
NumPy one only in the order of floating-point sums.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import xarray as xr

from richlazy_cli.models.base import Batch
from richlazy_cli.models.hermite import model as H

from ...conftest import assert_one_line_error

torch = pytest.importorskip("torch")

FIG2_SMALL = dict(d=128, P=32, k=4, beta=0.8, sigma0=0.01, t_max=1000.0, decades=4.0,
                  n_records=200, seed=0, early_stop=True)


def solve(points: list[dict[str, Any]], **common: Any) -> xr.Dataset:
    values = [H.Hermite.resolve("solve", {**common, **p}) for p in points]
    return H.Hermite().solve(Batch.from_points(H.Hermite, values))


def widths(ms: tuple[int, ...], **common: Any) -> xr.Dataset:
    """One run per width (``m`` is not batchable), stacked along ``point``."""
    return xr.concat([solve([{"m": m}], **common) for m in ms], dim="point",
                     coords="minimal", compat="override")


@pytest.mark.parametrize(("m", "d", "P", "k"), [(8, 16, 4, 4), (32, 64, 16, 6), (5, 40, 40, 8)])
def test_population_loss_and_gradient_agree_to_1e12(m: int, d: int, P: int, k: int) -> None:
    gen = np.random.default_rng(m * d)
    c = H.hermite_coeffs(k, None)
    a = np.stack([H.teacher_weights(P, beta) for beta in (0.6, 0.8, 1.5)])
    V = gen.standard_normal((3, m, d)) * np.array([0.01, 0.3, 2.0])[:, None, None]
    loss, grad = H.population_loss_grad(torch.as_tensor(V), torch.as_tensor(a), c)
    for b in range(3):
        ref_loss, ref_grad = H.population_loss_grad(V[b], a[b], c)
        assert abs(float(loss[b]) - ref_loss) <= 1e-12 * abs(ref_loss)
        assert np.max(np.abs(grad[b].numpy() - ref_grad)) <= 1e-12 * np.max(np.abs(ref_grad))


@pytest.mark.integration
def test_recovery_times_agree_on_the_small_fig2_job() -> None:
    ref = widths((4, 8, 16), **FIG2_SMALL)
    got = widths((4, 8, 16), implementation="torch", **FIG2_SMALL)
    r, g = ref.t_recover.values, got.t_recover.values
    assert np.array_equal(np.isnan(r), np.isnan(g))
    assert np.nanmax(np.abs(g - r) / r) <= 1e-6
    assert np.array_equal(got.nfev.values, ref.nfev.values)  # the same steps, one by one
    assert np.array_equal(got.winner.values, ref.winner.values)
    np.testing.assert_allclose(got.t_stop.values, ref.t_stop.values, rtol=1e-6)
    np.testing.assert_allclose(got.loss.values, ref.loss.values, rtol=1e-6)
    np.testing.assert_allclose(got.overlap.values, ref.overlap.values, rtol=1e-6, atol=1e-9)


@pytest.mark.slow
def test_recovery_times_agree_on_the_whole_small_fig2_job() -> None:
    ref = widths((4, 8, 16, 32, 64), **FIG2_SMALL)
    got = widths((4, 8, 16, 32, 64), implementation="torch", **FIG2_SMALL)
    r, g = ref.t_recover.values, got.t_recover.values
    assert np.array_equal(np.isnan(r), np.isnan(g))
    assert np.nanmax(np.abs(g - r) / r) <= 1e-6


def test_a_configuration_alone_and_in_a_batch_are_bitwise_equal_on_the_cpu() -> None:
    common = dict(d=12, P=3, m=4, t_max=40.0, n_records=12, implementation="torch",
                  save_params=True)
    points = [{"sigma0": 0.05}, {"sigma0": 0.02, "beta": 1.2}]
    both = solve(points, **common)
    for i, p in enumerate(points):
        alone = solve([p], **common)
        for name in ("loss", "overlap", "t_recover", "v"):
            assert np.array_equal(both[name].values[i], alone[name].values[0], equal_nan=True)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["train", "hermite", "-p", "implementation=torch", "-p", "steps=10"], "implementation"),
        (["solve", "hermite", "-p", "implementation=torch", "-p", "method=DOP853"], "RK45"),
        (["solve", "hermite", "-p", "device=cuda"], "implementation"),
    ],
)
def test_bad_backend_combinations(tmp_path: Any, cli: Any, args: list[str], words: str) -> None:
    out = tmp_path / "x.h5"
    result = cli(*args, "-o", out)
    assert_one_line_error(result)
    assert words in result.err and not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_cuda_without_a_gpu_is_bad_input(tmp_path: Any, cli: Any) -> None:
    out = tmp_path / "x.h5"
    result = cli("solve", "hermite", "-p", "implementation=torch", "-p", "device=cuda", "-o", out)
    assert_one_line_error(result)
    assert "cuda" in result.err and not out.exists()


def test_the_array_namespace_follows_the_inputs() -> None:
    from richlazy_cli.numerics.arrays import NUMPY, array_namespace

    assert array_namespace(np.ones(2), 1.0) is NUMPY
    xp = array_namespace(np.ones(2), torch.ones(2))
    assert xp.module is torch and xp is array_namespace(torch.ones(1))
    x = np.array([[3.0, -4.0], [0.5, 2.0]])
    for ns, arr in ((NUMPY, x), (xp, torch.as_tensor(x))):
        np.testing.assert_array_equal(np.asarray(ns.squared_norm(arr)), [25.0, 4.25])
        np.testing.assert_array_equal(np.asarray(ns.vecdot(arr, arr)), [25.0, 4.25])
        np.testing.assert_array_equal(np.asarray(ns.sum_last(arr)), [-1.0, 2.5])
        np.testing.assert_array_equal(np.asarray(ns.clamp_min(arr, 0.0)), [[3, 0], [0.5, 2]])


def test_one_numpy_configuration_gives_a_float_loss_and_the_batch_its_rows() -> None:
    c = H.hermite_coeffs(4, None)
    a = H.teacher_weights(3, 0.8)
    V = np.random.default_rng(1).standard_normal((2, 5, 6))
    batch = H.population_loss_grad(V, np.stack([a, a]), c)
    for b in range(2):
        loss, grad = H.population_loss_grad(V[b], a, c)
        assert isinstance(loss, float)
        np.testing.assert_allclose(batch[0][b], loss, rtol=1e-13)
        np.testing.assert_allclose(batch[1][b], grad, rtol=1e-12, atol=1e-15)
