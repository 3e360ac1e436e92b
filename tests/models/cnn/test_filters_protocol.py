"""The filter experiment's protocol options (docs/cnn.md §5; Kunin et al. 2024 Fig. 6b): a
per-sample channel normalisation after the first convolution with the first layer alone
rescaled (the paper's ResNet convention), and the drift control, the roughness of the update
w_end − w_0."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

torch = pytest.importorskip("torch")

from richlazy_cli.models.base import rng  # noqa: E402
from richlazy_cli.practice import filters, nets  # noqa: E402
from tests.conftest import assert_one_line_error  # noqa: E402

F64 = torch.float64
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def forward(net: nets.Net, alpha: float, rescale: str, X: np.ndarray) -> np.ndarray:
    params = nets.to_torch(net.init(rng(3, "init"), alpha, rescale), F64, "cpu")
    with torch.no_grad():
        return net.forward(params, torch.tensor(X, dtype=F64))[0].numpy()


@pytest.mark.parametrize("alpha", [0.1, 10.0])
def test_channel_norm_makes_f_independent_of_the_first_layer_scale(alpha: float) -> None:
    """norm = channel, rescale = first: f is unchanged at initialisation (≤ 1e-8 relative),
    the readout is not rescaled; without the norm the same rescaling changes f."""
    X = np.random.default_rng(0).standard_normal((6, 1, 24, 24))
    net = nets.network("smooth2d", (1, 24, 24), 9, norm="channel")
    f1, fa = forward(net, 1.0, "first", X), forward(net, alpha, "first", X)
    assert np.max(np.abs(fa - f1)) <= 1e-8 * np.max(np.abs(f1)), np.max(np.abs(fa - f1))
    p1, pa = net.init(rng(3, "init"), 1.0, "first"), net.init(rng(3, "init"), alpha, "first")
    np.testing.assert_array_equal(pa[net.readout], p1[net.readout])
    np.testing.assert_allclose(pa[net.first], p1[net.first] / alpha, rtol=1e-15)
    plain = nets.network("smooth2d", (1, 24, 24), 9)
    g1, ga = forward(plain, 1.0, "first", X), forward(plain, alpha, "first", X)
    assert np.max(np.abs(ga - g1)) >= 0.05 * np.max(np.abs(g1))


def test_channel_norm_standardises_each_channel_of_each_sample() -> None:
    z = torch.tensor(np.random.default_rng(1).standard_normal((3, 4, 5, 6)) * 7 + 2,
                     dtype=F64)
    h = nets.channel_norm(z, 2).numpy()
    np.testing.assert_allclose(h.mean(axis=(2, 3)), 0.0, atol=1e-12)
    np.testing.assert_allclose(h.var(axis=(2, 3)), 1.0, rtol=1e-8)
    # per sample: changing one sample leaves the others unchanged
    z2 = z.clone()
    z2[0] *= 5
    np.testing.assert_array_equal(nets.channel_norm(z2, 2).numpy()[1:], h[1:])


@pytest.mark.system
def test_update_roughness_is_the_roughness_of_w_end_minus_w0(cli, tmp_path: Path) -> None:
    out = tmp_path / "f.h5"
    r = cli("sweep", "train", "cnn", "-p", "arch=smooth1d", "-p", "dataset=mnist1d",
            "-p", "first_kernel=7", "-p", "optimizer=sgd", "-p", "lr=0.05", "-p", "epochs=1",
            "-p", "batch=1024", "-p", "first_steps=1", "-p", "probe_fraction=0.005",
            "-p", "save_filters=true", "-p", "norm=channel", "-p", "rescale=first",
            "-g", "alpha=1,4", "-o", out, "--jobs", "1", "-q")
    assert r.code == 0, r.err
    ds = xr.open_dataset(out, engine="h5netcdf").load()
    net = nets.network("smooth1d", (1, 40), 7, norm="channel")
    for i, alpha in enumerate(ds["alpha"].values):
        w0 = net.init(rng(0, "init"), float(alpha), "first")[net.first]
        want = filters.mean_roughness(ds["filters"].values[i] - w0, 1)
        assert float(ds["update_roughness"].values[i]) == pytest.approx(want, rel=1e-12)
        assert np.max(np.abs(ds["filters"].values[i] - w0)) > 0


def test_norm_on_a_lenet_is_one_line_exit_2(cli, tmp_path: Path) -> None:
    out = tmp_path / "x.h5"
    r = cli("sweep", "train", "cnn", "-p", "norm=channel", "-p", "epochs=1", "-g", "seed=0",
            "-o", out, "-q")
    assert_one_line_error(r)
    assert "norm" in r.err
    assert not out.exists()
