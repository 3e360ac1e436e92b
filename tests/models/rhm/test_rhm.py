"""Tests of the ``rhm`` model (docs/rhm.md): the exact enumeration of the random hierarchy
model, the learning-rate schedule, training against a plain ``torch.optim.SGD`` loop, the
sanity of sample complexity at CI size, and independence from chunk-mates.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from richlazy_cli.models.base import Batch, rng  # noqa: E402
from richlazy_cli.models.rhm.model import RHM, learning_rate  # noqa: E402
from richlazy_cli.practice import hierarchy  # noqa: E402


def train(points: list[dict[str, Any]], **common: Any) -> Any:
    values = [RHM.resolve("train", {**common, **p}) for p in points]
    return RHM().train(Batch.from_points(RHM, values))


def parse(string: np.ndarray, rules: list[np.ndarray]) -> int | None:
    """The class of a leaf string, read bottom-up through the rules (None if unparsable)."""
    seq = [int(t) for t in string]
    for level in range(len(rules) - 1, -1, -1):
        R = rules[level]
        s = R.shape[2]
        table = {tuple(int(t) for t in R[p, k]): p for p in range(R.shape[0])
                 for k in range(R.shape[1])}
        parents = []
        for i in range(0, len(seq), s):
            key = tuple(seq[i:i + s])
            if key not in table:
                return None
            parents.append(table[key])
        seq = parents
    assert len(seq) == 1
    return seq[0]


@pytest.mark.parametrize(("L", "n_c", "m", "s", "v"),
                         [(3, 8, 4, 2, 8), (2, 8, 4, 2, 8), (3, 8, 2, 2, 8), (2, 3, 2, 3, 4)])
def test_enumeration_is_exact_and_consistent_with_the_rules(L, n_c, m, s, v) -> None:
    R = hierarchy.rules(rng(5, "rules"), L, n_c, m, s, v)
    strings, labels = hierarchy.enumerate_inputs(R)
    P = n_c * m ** ((s**L - 1) // (s - 1))
    assert hierarchy.p_max(n_c, m, s, L) == P
    assert strings.shape == (P, s**L) and labels.shape == (P,)
    assert np.unique(strings, axis=0).shape[0] == P  # all distinct
    assert np.array_equal(np.bincount(labels), np.full(n_c, P // n_c))
    # rules of a level are distinct tuples, so a tuple has one parent
    for Rl in R:
        flat = Rl.reshape(-1, s)
        assert np.unique(flat, axis=0).shape[0] == flat.shape[0]
    check = np.random.default_rng(0).choice(P, size=min(P, 3000), replace=False)
    for i in check:
        assert parse(strings[i], R) == labels[i]
    # a string with one symbol changed is (almost always) not a datum of the same class
    if P == 131_072:
        assert P == 8 * 4**7


def test_one_hot_is_position_major() -> None:
    x = hierarchy.one_hot(np.array([[2, 0, 1]], dtype=np.int8), 3)
    assert x.tolist() == [[0, 0, 1, 1, 0, 0, 0, 1, 0]]


def test_learning_rate_schedules() -> None:
    assert learning_rate(6.4, 0, 250, "cosine_clamped") == 6.4
    assert learning_rate(6.4, 100, 250, "cosine_clamped") == pytest.approx(3.2)
    assert learning_rate(6.4, 200, 250, "cosine_clamped") == 0.0
    assert learning_rate(6.4, 249, 250, "cosine_clamped") == 0.0
    assert learning_rate(6.4, 77, 250, "constant") == 6.4
    # cosine_torch is PyTorch's CosineAnnealingLR with T_max = 0.8 epochs, rising after T
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=6.4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=0.8 * 50)
    for e in range(50):
        assert learning_rate(6.4, e, 50, "cosine_torch") == pytest.approx(
            opt.param_groups[0]["lr"], rel=1e-9, abs=1e-12)
        opt.step()
        sched.step()
    assert learning_rate(6.4, 45, 50, "cosine_torch") > 0


def test_training_matches_a_plain_torch_sgd_loop() -> None:
    """The model's loop against nn.Linear layers and torch.optim.SGD, written independently."""
    common = dict(L=2, width=16, hidden_layers=2, epochs=5, test_size=100, batch=32,
                  n_records=6,
                  dtype="float64", schedule="cosine_clamped")  # agree to rounding (1e-10)
    alpha, f, seed = 3.0, 0.4, 2
    ds = train([{"alpha": alpha, "train_fraction": f, "seed": seed}], **common)
    # reference
    R = hierarchy.rules(rng(seed, "rules"), 2, 8, 4, 2, 8)
    strings, labels = hierarchy.enumerate_inputs(R)
    perm = rng(seed, "split").permutation(labels.size)
    X = torch.tensor(hierarchy.one_hot(strings[perm], 8))
    y = torch.tensor(labels[perm])
    n = math.floor(f * labels.size)
    X, y = X[:n], y[:n]
    g = rng(seed, "init")
    layers = [torch.nn.Linear(32, 16, bias=False), torch.nn.Linear(16, 16, bias=False),
              torch.nn.Linear(16, 8, bias=False)]
    with torch.no_grad():
        for lin in layers:
            lin.weight.copy_(torch.tensor(g.standard_normal(tuple(lin.weight.shape))))
        layers[0].weight.div_(alpha)
        layers[-1].weight.mul_(alpha)
    layers = [lin.double() for lin in layers]

    def f_ref(x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(layers[0](x) / math.sqrt(32))
        h = torch.relu(layers[1](h) / math.sqrt(16))
        return layers[2](h) / 16

    opt = torch.optim.SGD([lin.weight for lin in layers], lr=1.6, momentum=0.9)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda e: (1 + math.cos(math.pi * e / 4)) / 2 if e < 4 else 0.0)
    gb = rng(seed, "batches")
    losses = []
    with torch.no_grad():
        losses.append(float(torch.nn.functional.cross_entropy(f_ref(X), y)))
    for _ in range(5):
        order = torch.as_tensor(gb.permutation(n))
        for b0 in range(0, n, 32):
            idx = order[b0:b0 + 32]
            opt.zero_grad()
            torch.nn.functional.cross_entropy(f_ref(X[idx]), y[idx]).backward()
            opt.step()
        sched.step()
        with torch.no_grad():
            losses.append(float(torch.nn.functional.cross_entropy(f_ref(X), y)))
    epochs = ds.epoch.values.tolist()
    assert epochs[0] == 0 and epochs[-1] == 5 and len(epochs) >= 4
    np.testing.assert_allclose(ds.train_loss.values[0], [losses[e] for e in epochs], rtol=1e-8)
    assert losses[-1] < 0.995 * losses[0]  # it trains


CI = dict(L=3, m=2, width=32, batch=32, epochs=60, test_size=200, n_records=3)
"""CI size: P_max = 8·2⁷ = 1024 inputs, 64 one-hot features (docs/rhm.md §4)."""


def test_test_accuracy_rises_with_the_training_fraction_at_ci_size() -> None:
    fractions = [0.03, 0.2, 0.75]
    pts = [{"alpha": 1.0, "train_fraction": f, "seed": s} for s in range(2) for f in fractions]
    ds = train(pts, **CI)
    acc = ds.final_test_acc.values.reshape(2, 3).mean(axis=0)
    assert acc[0] <= 0.3  # near chance, 1/8
    assert acc[0] < acc[1] < acc[2]
    assert acc[2] >= 0.9
    assert ds.attrs["P_max"] == 1024 and ds.attrs["input_dim"] == 64
    assert ds.n_train.values.tolist() == [30, 204, 768] * 2


def test_a_configuration_does_not_depend_on_its_chunk_mates() -> None:
    common = dict(L=2, width=16, epochs=3, test_size=100, n_records=3, batch=32)
    p = {"alpha": 0.3, "train_fraction": 0.3, "seed": 1}
    alone = train([p], **common)
    mates = train([{"alpha": 10.0, "train_fraction": 0.6, "seed": 0}, p,
                   {"alpha": 0.3, "train_fraction": 0.3, "seed": 4}], **common)
    for name in ("test_acc", "train_acc", "train_loss"):
        assert np.array_equal(alone[name].values[0], mates[name].values[1])
    assert not np.array_equal(mates.train_loss.values[1], mates.train_loss.values[2])
