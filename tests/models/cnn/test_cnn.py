"""Tests of the ``cnn`` model (docs/cnn.md): checkpoints, training against an ``nn.Module``
LeNet with ``torch.optim.Adam``, and the ordering of kernel and Hamming distances in α at CI
size.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from richlazy_cli.models.base import Batch, rng  # noqa: E402
from richlazy_cli.models.cnn.model import CNN, checkpoint_steps  # noqa: E402
from richlazy_cli.practice import data, nets  # noqa: E402


def train(points: list[dict[str, Any]], **common: Any) -> Any:
    values = [CNN.resolve("train", {**common, **p}) for p in points]
    return CNN().train(Batch.from_points(CNN, values))


def test_checkpoint_steps() -> None:
    assert checkpoint_steps(500, 3, 10, None).tolist() == [
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 30, 60, 150, 300, 600, 1500]
    assert checkpoint_steps(7, 3, 2, [1, 5, 20]).tolist() == [0, 1, 2, 3, 15, 21]


class RefLeNet(torch.nn.Module):
    """LeNet for 8×8 digits written with torch.nn layers (docs/cnn.md §1)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 6, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(6, 16, 3, padding=1)
        self.fc1 = torch.nn.Linear(64, 120)
        self.fc2 = torch.nn.Linear(120, 84)
        self.fc3 = torch.nn.Linear(84, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv2(x)), 2).flatten(1)
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def test_training_matches_an_nn_module_with_torch_adam() -> None:
    alpha, seed, lr = 3.0, 2, 1e-3
    ds = train([{"alpha": alpha, "seed": seed, "lr": lr}], epochs=2, batch=512,
               first_steps=6, probe_fraction=0.02)
    split = data.load("digits", seed)
    ref = RefLeNet().double()
    theta = nets.lenet("lenet_digits", (1, 8, 8)).init(rng(seed, "init"), alpha)
    with torch.no_grad():
        for name, p in ref.named_parameters():
            p.copy_(torch.tensor(theta[name]))
    opt = torch.optim.Adam(ref.parameters(), lr=lr)
    X, y = torch.tensor(split.X_train), torch.tensor(split.y_train)
    gb = rng(seed, "batches")
    losses = []
    for _ in range(2):
        order = torch.as_tensor(gb.permutation(1437))
        for b0 in range(0, 1437, 512):
            with torch.no_grad():
                losses.append(float(torch.nn.functional.cross_entropy(ref(X), y)))
            idx = order[b0:b0 + 512]
            opt.zero_grad()
            torch.nn.functional.cross_entropy(ref(X[idx]), y[idx]).backward()
            opt.step()
    with torch.no_grad():
        losses.append(float(torch.nn.functional.cross_entropy(ref(X), y)))
    assert ds.step.values.tolist() == [0, 1, 2, 3, 4, 5, 6]
    np.testing.assert_allclose(ds.train_loss.values[0], losses, rtol=1e-10)
    np.testing.assert_allclose(ds.epoch.values, np.arange(7) / 3)


@pytest.mark.integration
def test_distances_grow_more_at_large_alpha_ci_size() -> None:
    """Upstream (α = 10) moves the kernel and the activation pattern more than downstream
    (α = 0.1) at CI size (30 epochs; docs/cnn.md §4)."""
    ds = train([{"alpha": 0.1}, {"alpha": 10.0}], epochs=30, probe_fraction=0.05,
               first_steps=2, records=[10], seed=0)
    for name in ("kernel_distance", "hamming_distance", "param_distance",
                 "rel_param_distance"):
        assert np.all(ds[name].values[:, 0] == 0.0), name
    S, H = ds.kernel_distance.values[:, -1], ds.hamming_distance.values[:, -1]
    assert S[1] > S[0] > 0 and H[1] > H[0] > 0
    assert ds.attrs["kernel"].startswith("trace")
    assert ds.epoch.values[-1] == 30


def test_a_loss_that_explodes_without_overflowing_is_a_divergence() -> None:
    """At lr = 10⁴ the cross-entropy reaches ~7·10²⁵ at the first checkpoint, finite but
    past DIVERGENCE_FACTOR times its start: the point is marked diverged and NaN after, as
    two-layer marks it (richlazy_cli/practice/metrics.py, ``diverged``)."""
    v = CNN.resolve("train", dict(epochs=1, batch=256, probe_fraction=0.01, first_steps=2,
                                  lr=1e4))
    ds = CNN().train(Batch.from_points(CNN, [v]))
    loss = ds.train_loss.values[0]
    assert int(ds.status[0]) == 1
    assert np.isfinite(loss[1]) and loss[1] > 1e6 * loss[0] and np.isnan(loss[2:]).all()


def test_the_divergence_rule() -> None:
    from richlazy_cli.practice.metrics import diverged

    loss = np.array([2.0, 1.0, 2e6, 3e6, np.inf])
    assert [diverged(loss, j) for j in range(5)] == [False, False, False, True, True]
    assert diverged(np.array([1.0, np.nan]), 1)
