"""First-layer filter roughness and the filter-smoothness networks (docs/cnn.md §5):
the roughness against independent computations and its exact i.i.d. moments, the networks
against ``torch.nn`` layers, the CI-size run and its report, and bad inputs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.signal import convolve, convolve2d

from richlazy_cli.models.base import Batch, rng
from richlazy_cli.practice import filters

from ...conftest import assert_refused

torch = pytest.importorskip("torch")

from richlazy_cli.models.cnn.model import CNN  # noqa: E402
from richlazy_cli.practice import data, nets  # noqa: E402

STENCIL = np.array([[0, 1, 0], [1, -4, 1], [0, 1, 0]], dtype=float)


def train(points: list[dict[str, Any]], **common: Any) -> Any:
    values = [CNN.resolve("train", {**common, **p}) for p in points]
    return CNN().train(Batch.from_points(CNN, values))


# -- the roughness ---------------------------------------------------------------------------

def test_roughness_equals_scipy_valid_convolution() -> None:
    g = np.random.default_rng(0)
    w = g.standard_normal((4, 3, 9, 9))
    ref = np.array([[np.sum(convolve2d(f, STENCIL, mode="valid") ** 2) / np.sum(f**2)
                     for f in row] for row in w])
    np.testing.assert_allclose(filters.roughness(w, 2), ref, rtol=1e-13)
    v = g.standard_normal((5, 15))
    ref1 = [np.sum(convolve(f, [1.0, -2.0, 1.0], mode="valid") ** 2) / np.sum(f**2) for f in v]
    np.testing.assert_allclose(filters.roughness(v, 1), ref1, rtol=1e-13)


def test_roughness_is_scale_free_and_zero_on_harmonic_filters() -> None:
    g = np.random.default_rng(1)
    w = g.standard_normal((16, 1, 9, 9))
    for alpha in (1e-3, 0.1, 10.0, 1e3):
        np.testing.assert_allclose(filters.roughness(alpha * w, 2), filters.roughness(w, 2),
                                   rtol=1e-12)
    y, x = np.mgrid[0:9, 0:9].astype(float)
    for harmonic in (np.ones((9, 9)), 2 * x - 3 * y + 1, x * y, x**2 - y**2):
        assert filters.roughness(harmonic, 2) < 1e-25
    assert filters.roughness(np.arange(15.0), 1) < 1e-25
    checker = (-1.0) ** (x + y)  # the roughest 2-D filter: Λ has eigenvalue -8 on it
    assert filters.roughness(checker, 2) == pytest.approx(64 * 49 / 81, rel=1e-14)
    assert np.isnan(filters.roughness(np.zeros((9, 9)), 2))


@pytest.mark.parametrize("k, dims, rel_sd", [(9, 2, 0.198), (15, 2, 0.102), (15, 1, 0.370)])
def test_iid_moments_are_exact(k: int, dims: int, rel_sd: float) -> None:
    """E R = tr Q / N equals 20 (k−2)²/k² (2-D) or 6 (k−2)/k (1-D); the relative standard
    deviation from the spectrum of Q; both against Monte Carlo over 40,000 filters."""
    L = filters.operator(k, dims)
    n = k**dims
    assert np.trace(L.T @ L) / n == pytest.approx(filters.expected_roughness(k, dims),
                                                  rel=1e-14)
    assert filters.roughness_rel_sd(k, dims) == pytest.approx(rel_sd, abs=2e-3)
    g = np.random.default_rng(k + dims)
    r = filters.roughness(g.standard_normal((40_000,) + (k,) * dims), dims)
    er = filters.expected_roughness(k, dims)
    assert abs(r.mean() / er - 1) <= 4 * rel_sd / np.sqrt(r.size)
    assert r.std() / r.mean() == pytest.approx(rel_sd, rel=0.03)


@pytest.mark.parametrize("arch, shape, k, nets_pooled", [
    ("smooth2d", (1, 24, 24), 9, 16), ("smooth2d", (1, 24, 24), 15, 16),
    ("smooth1d", (1, 40), 15, 64)])
def test_initial_filters_sit_at_the_iid_level(arch: str, shape: tuple[int, ...], k: int,
                                              nets_pooled: int) -> None:
    """The mean roughness of the He-initialised first-layer filters over N ≥ 256 filters
    (16 or 64 seeds × 16 channels, α = 0.1, 1, 10 mixed) lies within 5% of the i.i.d. level,
    and within 4 σ_k/√N (σ_k the single-filter relative s.d.), which is tighter."""
    dims = len(shape) - 1
    net = nets.network(arch, shape, k)
    alphas = (0.1, 1.0, 10.0)
    w = np.concatenate([net.init(rng(s, "init"), alphas[s % 3])[net.first]
                        for s in range(nets_pooled)])
    r = filters.roughness(w, dims)
    er = filters.expected_roughness(k, dims)
    tol = min(0.05, 4 * filters.roughness_rel_sd(k, dims) / np.sqrt(r.size))
    assert r.size >= 256
    assert abs(r.mean() / er - 1) <= tol


# -- the networks ----------------------------------------------------------------------------

class RefSmooth(torch.nn.Module):
    """smooth2d / smooth1d written with torch.nn layers (docs/cnn.md eq. (3))."""

    def __init__(self, dims: int, k: int) -> None:
        super().__init__()
        conv = torch.nn.Conv2d if dims == 2 else torch.nn.Conv1d
        self.pool = torch.nn.MaxPool2d(2) if dims == 2 else torch.nn.MaxPool1d(2)
        self.conv1 = conv(1, 16, k, padding="same")
        self.conv2 = conv(16, 32, 3, padding="same")
        self.fc = torch.nn.Linear(32, 10)
        self.dims = dims

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv2(self.pool(torch.relu(self.conv1(x)))))
        return self.fc(x.mean(dim=tuple(range(-self.dims, 0))))


@pytest.mark.integration
@pytest.mark.parametrize("arch, dataset, k", [("smooth2d", "digits24", 9),
                                              ("smooth1d", "mnist1d", 15)])
def test_training_matches_nn_layers_with_torch_sgd(arch: str, dataset: str, k: int) -> None:
    alpha, seed, lr = 3.0, 1, 0.05
    ds = train([{"alpha": alpha, "seed": seed}], dataset=dataset, arch=arch, optimizer="sgd",
               lr=lr, momentum=0.9, batch=1024, epochs=1, first_steps=1,
               probe_fraction=0.005, save_filters=True)
    split = data.load(dataset, seed)
    dims = 2 if arch == "smooth2d" else 1
    ref = RefSmooth(dims, k).double()
    theta = nets.network(arch, split.sample_shape, k).init(rng(seed, "init"), alpha)
    with torch.no_grad():
        for name, p in ref.named_parameters():
            p.copy_(torch.tensor(theta[name]))
    opt = torch.optim.SGD(ref.parameters(), lr=lr, momentum=0.9)
    X, y = torch.tensor(split.X_train), torch.tensor(split.y_train)
    order = torch.as_tensor(rng(seed, "batches").permutation(y.shape[0]))
    losses, rough = [], []
    for b0 in range(0, y.shape[0], 1024):
        with torch.no_grad():
            losses.append(float(torch.nn.functional.cross_entropy(ref(X), y)))
            rough.append(filters.mean_roughness(ref.conv1.weight.numpy(), dims))
        idx = order[b0:b0 + 1024]
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ref(X[idx]), y[idx]).backward()
        opt.step()
    with torch.no_grad():
        losses.append(float(torch.nn.functional.cross_entropy(ref(X), y)))
        rough.append(filters.mean_roughness(ref.conv1.weight.numpy(), dims))
    steps = ds.step.values
    assert steps[-1] == len(losses) - 1
    np.testing.assert_allclose(ds.train_loss.values[0], np.array(losses)[steps], rtol=1e-10)
    np.testing.assert_allclose(ds.filter_roughness.values[0], np.array(rough)[steps],
                               rtol=1e-10)
    np.testing.assert_allclose(ds.filters.values[0], ref.conv1.weight.detach().numpy(),
                               rtol=1e-9, atol=1e-12)
    assert ds.attrs["filter_roughness_iid"] == pytest.approx(filters.expected_roughness(k, dims))


@pytest.mark.system
def test_ci_size_run_records_roughness_and_draws_the_figures(tmp_path: Path, cli) -> None:
    """One epoch on digits24 at α = 0.1 and 10: R̄ at t = 0 is the roughness of the initial
    filters; the filters and both figures are written (docs/cnn.md §5)."""
    out = tmp_path / "f.h5"
    res = cli("sweep", "train", "cnn", "-p", "dataset=digits24", "-p", "arch=smooth2d",
              "-p", "optimizer=sgd", "-p", "lr=0.05", "-p", "batch=512", "-p", "epochs=1",
              "-p", "first_steps=0", "-p", "probe_fraction=0.01", "-p", "save_filters=true",
              "-g", "alpha=0.1,10", "-o", str(out), "-q")
    assert res.code == 0, res.err
    import xarray as xr

    with xr.open_dataset(out, engine="h5netcdf") as ds:
        ds.load()
    net = nets.network("smooth2d", (1, 24, 24))
    for i, alpha in enumerate((0.1, 10.0)):
        w0 = net.init(rng(0, "init"), alpha)[net.first]
        assert ds.filter_roughness.values[i, 0] == pytest.approx(
            filters.mean_roughness(w0, 2), rel=1e-12)
    assert ds.filters.dims == ("alpha", "out_channel", "in_channel", "filter_row",
                               "filter_col")
    assert np.isfinite(ds.filters.values).all()
    rep = tmp_path / "rep"
    res = cli("report", str(out), "-o", str(rep), "-q")
    assert res.code == 0, res.err
    names = {p.name for p in rep.iterdir()}
    assert {"f-practice-roughness.png", "f-practice-filters.png"} <= names
    summary = json.loads((rep / "summary.json").read_text())
    entry = next(f for f in summary["figures"] if f["file"] == "f-practice-roughness.png")
    assert set(entry["roughness"]) == {"0.1", "10"}


# -- bad input --------------------------------------------------------------------------------

def test_bad_filter_inputs_exit_2_with_one_line_and_write_nothing(tmp_path: Path, cli) -> None:
    base = ["train", "cnn", "-p", "epochs=1"]
    smooth = [*base, "-p", "arch=smooth2d", "-p", "dataset=digits24"]
    cases = [
        ([*base, "-p", "arch=smooth2d"], "first_kernel: 9 is larger than the input (8x8)"),
        ([*smooth, "-p", "first_kernel=31"], "larger than the input (24x24)"),
        ([*smooth, "-p", "first_kernel=4"], "must be odd"),
        ([*smooth, "-p", "first_kernel=1"], "first_kernel"),
        ([*base, "-p", "first_kernel=5"], "fixed 3x3"),
        ([*base, "-p", "arch=smooth1d"], "smooth1d needs signals"),
        ([*base, "-p", "arch=smooth2d", "-p", "dataset=mnist1d"], "smooth2d needs images"),
        ([*smooth, "-p", "momentum=0.5"], "only read when optimizer = sgd"),
        ([*smooth, "-p", "optimizer=sgd", "-p", "momentum=1"], "momentum"),
        ([*smooth, "-p", "optimizer=rmsprop"], "optimizer"),
    ]
    for args, phrase in cases:
        assert_refused(cli, args, phrase, tmp_path / "out.h5")
