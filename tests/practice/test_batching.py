"""Training configurations together without letting them touch (docs/practice.md §1): the
batched matrix products the stacked ``rhm`` loop relies on give each configuration the bits it
gets alone, whatever the group's size and its place in it, when every slice is aligned as a
tensor of its own is; and the model's outputs for a configuration are bitwise the same in
groups of 1, 2, 3 and 7, with mixed α, seeds and training fractions, in float32 and float64,
and for any ``--jobs`` or chunk size.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

torch = pytest.importorskip("torch")

from richlazy_cli.models.base import Batch  # noqa: E402
from richlazy_cli.models.rhm.model import RHM, stackable, training_groups  # noqa: E402
from richlazy_cli.numerics import compute  # noqa: E402
from richlazy_cli.practice import nets  # noqa: E402
from tests.conftest import run_process  # noqa: E402

OUTPUTS = ("test_acc", "train_acc", "train_loss", "final_test_acc", "n_train", "status")


def train(points: list[dict[str, Any]], **common: Any) -> xr.Dataset:
    values = [RHM.resolve("train", {**common, **p}) for p in points]
    return RHM().train(Batch.from_points(RHM, values))


# -- the primitive: one slice of a batched product is the product of that slice alone --------

SHAPES = [(16, 1, 16), (16, 2, 8), (16, 4, 4), (32, 16, 8), (32, 32, 16), (128, 64, 64),
          (128, 64, 8), (16, 64, 8), (48, 37, 16), (16, 33, 48), (128, 200, 64), (144, 129, 80)]
"""(rows b, inner k, outer m): b a multiple of 16 rows and k·m of 16 elements, so that every
slice starts 64-byte aligned (docs/practice.md §1); the first ones fall below the size where
ATen switches to its small-product kernel."""


def _products(H: Any, W: Any, D: Any, sel: list[int]) -> tuple[Any, Any, Any]:
    """The products of a dense layer's forward and backward passes on the slices ``sel``
    stacked (fresh, contiguous copies): h Wᵀ, ∂/∂h = d W and ∂/∂W = dᵀ h."""
    h, w, d = H[sel], W[sel], D[sel]
    return h @ w.mT, d @ w, d.mT @ h


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batched_products_do_not_depend_on_the_group(dtype: str) -> None:
    """For every shape (b × k)·(k × m), the forward product h Wᵀ and both backward products of
    slice g are bitwise those of a group of one, for group sizes 2–9 and any position."""
    dt = compute.torch_dtype(dtype)
    g = np.random.default_rng(0)
    with compute.session():
        for b, k, m in SHAPES:
            H = torch.tensor(g.standard_normal((9, b, k)), dtype=dt)
            W = torch.tensor(g.standard_normal((9, m, k)), dtype=dt)
            D = torch.tensor(g.standard_normal((9, b, m)), dtype=dt)

            alone = [_products(H, W, D, [i]) for i in range(9)]
            for size in (2, 3, 4, 7, 9):
                sel = list(g.permutation(9)[:size])
                together = _products(H, W, D, sel)
                for pos, i in enumerate(sel):
                    for x, y in zip(together, alone[i], strict=True):
                        assert torch.equal(x[pos], y[0]), (b, k, m, size)


# -- the model: groups of 1, 2, 3, 7 ---------------------------------------------------------

SMALL = dict(L=2, width=16, epochs=3, test_size=100, n_records=3, batch=32)
ODD = dict(L=2, n_classes=2, width=8, hidden_layers=1, epochs=2, test_size=40,
           n_records=2, batch=3)
"""Awkward sizes: mini-batches of 3 rows padded to 16, a last mini-batch of 1, a readout
product below ATen's small-product threshold (16·8·2 < 400)."""
UNSTACKABLE = dict(L=2, width=5, epochs=2, test_size=100, n_records=2, batch=7)
"""Width 5: the readout's 8·5 float32 entries are not a whole number of 64 bytes, so every
configuration trains alone."""


def mixed_points(n: int, fraction: float) -> list[dict[str, Any]]:
    alphas = (0.1, 1.0, 10.0, 0.3, 3.0)
    return [{"alpha": alphas[i % 5], "seed": i % 4, "train_fraction": fraction}
            for i in range(n)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("size", ["small", "odd", "unstackable"])
def test_a_configuration_gives_the_same_bits_in_groups_of_1_2_3_7(dtype: str,
                                                                 size: str) -> None:
    common = {**{"small": SMALL, "odd": ODD, "unstackable": UNSTACKABLE}[size], "dtype": dtype}
    stack = stackable(RHM.resolve("train", common), "cpu")
    assert stack == (size != "unstackable")
    pts = mixed_points(7, 0.2 if size == "odd" else 0.1)
    alone = [train([p], **common) for p in pts]
    for group in ([0, 1], [4, 2, 6], list(range(7))[::-1]):
        together = train([pts[i] for i in group], **common)
        n_groups = len(training_groups(together.n_train.values, stack))
        assert n_groups == (1 if stack else len(group))
        for pos, i in enumerate(group):
            for name in OUTPUTS:
                assert np.array_equal(together[name].values[pos], alone[i][name].values[0],
                                      equal_nan=True), (name, group, i)
    # configurations differ: the stacking did not make them share anything
    assert len({float(a.train_loss.values[0, -1]) for a in alone}) == 7


def test_a_chunk_mixing_training_fractions_trains_each_size_apart() -> None:
    pts = [{"alpha": 10.0, "train_fraction": 0.3, "seed": 0},
           {"alpha": 0.3, "train_fraction": 0.1, "seed": 1},
           {"alpha": 1.0, "train_fraction": 0.3, "seed": 2},
           {"alpha": 0.3, "train_fraction": 0.1, "seed": 4}]
    ds = train(pts, **SMALL)
    groups = training_groups(ds.n_train.values, True)
    assert [gr.tolist() for gr in groups] == [[0, 2], [1, 3]]
    assert [gr.tolist() for gr in training_groups(ds.n_train.values, False)] == [
        [0], [1], [2], [3]]
    values = RHM.resolve("train", SMALL)
    assert stackable(values, "cpu") and stackable(values, "cuda")
    unaligned = {**values, "width": int(values["width"]) + 1}  # rows no longer fill the line
    assert not stackable(unaligned, "cpu") and stackable(unaligned, "cuda")  # a GPU stacks any
    for i, p in enumerate(pts):
        alone = train([p], **SMALL)
        for name in OUTPUTS:
            assert np.array_equal(ds[name].values[i], alone[name].values[0]), name


def test_a_diverging_configuration_leaves_its_group_mates_alone() -> None:
    """At lr = 1000, α = 0.01 diverges (its loss overflows to NaN in the second epoch) and
    α = 1 does not: the diverged point is marked and NaN from then on, and its group mate
    keeps exactly the numbers it has alone."""
    common = {**SMALL, "lr": 1e3, "epochs": 4, "n_records": 4}
    pts = [{"alpha": 1.0, "train_fraction": 0.2, "seed": 0},
           {"alpha": 0.01, "train_fraction": 0.2, "seed": 0}]
    both = train(pts, **common)
    for i, p in enumerate(pts):
        alone = train([p], **common)
        for name in OUTPUTS:
            assert np.array_equal(both[name].values[i], alone[name].values[0],
                                  equal_nan=True), name
    assert both.status.values.tolist() == [0, 1]
    assert np.isnan(both.train_loss.values[1, -1]) and np.isfinite(both.train_loss.values[0, -1])


# -- the sweep: any --jobs, any chunk size ---------------------------------------------------

GRID = ["-g", "alpha=0.1,10", "-g", "train_fraction=0.1,0.3", "-g", "seed=0,1,2",
        "-p", "L=2", "-p", "width=16", "-p", "epochs=3", "-p", "test_size=100",
        "-p", "n_records=3", "-p", "batch=32"]


def test_rhm_sweep_is_bitwise_the_same_for_jobs_and_chunk_sizes(tmp_path: Path, cli) -> None:
    runs = {"jobs1-chunk12": ("--jobs", "1", "--chunk-size", "12"),
            "jobs1-chunk1": ("--jobs", "1", "--chunk-size", "1"),
            "jobs1-chunk5": ("--jobs", "1", "--chunk-size", "5")}
    files = {}
    for name, opts in runs.items():
        files[name] = tmp_path / f"{name}.h5"
        r = cli("sweep", "train", "rhm", *GRID, "-o", files[name], *opts, "-q")
        assert r.code == 0, r.err
    files["jobs2-chunk2"] = tmp_path / "jobs2.h5"
    r = run_process("sweep", "train", "rhm", *GRID, "-o", files["jobs2-chunk2"], "--jobs", "2",
                    "--chunk-size", "2", "-q")
    assert r.code == 0, r.err
    ref = xr.open_dataset(files["jobs1-chunk1"], engine="h5netcdf")
    for name, path in files.items():
        other = xr.open_dataset(path, engine="h5netcdf")
        for var in ref.data_vars:
            if var != "elapsed":
                assert np.array_equal(ref[var].values, other[var].values, equal_nan=True), (
                    name, var)
        other.close()
    ref.close()


def test_the_mlp_forward_takes_stacked_parameters() -> None:
    """nets.mlp's forward on parameters stacked to (G, out, in) gives each configuration's
    logits (to rounding: the products are batched, the reference is not)."""
    net = nets.mlp(12, 6, 2, 3)
    g = np.random.default_rng(1)
    ps = [nets.to_torch(net.init(g, a), torch.float64, "cpu") for a in (0.5, 2.0, 7.0)]
    X = torch.tensor(g.standard_normal((3, 10, 12)))
    stacked = {k: torch.stack([p[k] for p in ps]) for k in ps[0]}
    out, pre = net.forward(stacked, X)
    assert out.shape == (3, 10, 3) and len(pre) == 2
    for i, p in enumerate(ps):
        torch.testing.assert_close(out[i], net.forward(p, X[i])[0], rtol=1e-14, atol=1e-14)
