"""The layer-structured empirical NTK (docs/practice.md §3, eqs. (7)–(9)) against J Jᵀ
assembled from one ``autograd.grad`` call per example and logit, for every layer type: dense
layers with and without bias and with a scale, 2-D convolutions with and without padding, a
1-D convolution; and the Jacobian route for forward passes that do not record their layers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from richlazy_cli.practice import metrics, nets  # noqa: E402
from richlazy_cli.practice.ntk import layer_ntk  # noqa: E402
from tests.practice.test_practice import explicit_jacobian  # noqa: E402

F64 = torch.float64


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def reference(net: nets.Net, params: dict, X: Any, kind: str) -> np.ndarray:
    J = explicit_jacobian(net, params, X)  # (n, c, P)
    n, c, _ = J.shape
    if kind == "trace":
        return sum(J[:, k] @ J[:, k].T for k in range(c))
    return J.reshape(n * c, -1) @ J.reshape(n * c, -1).T


def assert_layer_kernel_matches(net: nets.Net, X: Any, seed: int = 4) -> None:
    params = nets.to_torch(net.init(np.random.default_rng(seed), 2.0), F64, "cpu")
    g = np.random.default_rng(seed + 1)
    for name in params:  # non-zero biases, so that their terms are exercised
        if name.endswith("bias"):
            params[name] = torch.tensor(0.3 * g.standard_normal(tuple(params[name].shape)))
    for kind in ("trace", "full"):
        K = layer_ntk(net.forward, params, X, kind)
        assert K is not None, "the forward pass did not record every layer"
        K_ref = reference(net, params, X, kind)
        assert K.shape == K_ref.shape
        assert np.max(np.abs(K.numpy() - K_ref)) <= 1e-10 * max(1.0, np.abs(K_ref).max())
        assert torch.equal(metrics.ntk(net.forward, params, X, kind), K)


def test_dense_layers_without_bias_and_with_scales() -> None:
    """nets.mlp: z = a Wᵀ/√fan_in, readout f = h W_outᵀ/width (docs/rhm.md eq. (3))."""
    X = torch.tensor(np.random.default_rng(5).standard_normal((6, 12)))
    assert_layer_kernel_matches(nets.mlp(12, 10, 3, 4), X)


def test_two_d_convolutions_with_padding_and_dense_layers_with_bias() -> None:
    """lenet_digits (3×3, padding 1, max-pooling) on 8×8 images."""
    X = torch.tensor(np.random.default_rng(5).standard_normal((5, 1, 8, 8)))
    assert_layer_kernel_matches(nets.lenet("lenet_digits", (1, 8, 8)), X)


def test_unpadded_five_by_five_convolutions_on_three_channels() -> None:
    """lenet5 on 32×32×3 (no padding in either convolution)."""
    X = torch.tensor(np.random.default_rng(5).standard_normal((3, 3, 32, 32)))
    assert_layer_kernel_matches(nets.lenet("lenet5", (3, 32, 32)), X)


@pytest.mark.parametrize("arch, shape, k", [("smooth2d", (1, 12, 12), 5),
                                             ("smooth1d", (1, 20), 7)])
def test_filter_smoothness_nets_with_global_average_pooling(arch: str, shape: tuple, k: int
                                                            ) -> None:
    """smooth2d / smooth1d: 'same' convolutions, global average pooling, dense readout."""
    X = torch.tensor(np.random.default_rng(6).standard_normal((4, *shape)))
    assert_layer_kernel_matches(nets.network(arch, shape, k), X)


def conv1d_net() -> nets.Net:
    """A small 1-D network written for this test: conv1d (k = 5, padding 2, z = W⋆x/2 + b) →
    ReLU → conv1d (k = 3, no padding, no bias) → ReLU → flatten → dense."""
    import torch.nn.functional as F

    shapes = {"c1.weight": (4, 2, 5), "c1.bias": (4,), "c2.weight": (3, 4, 3),
              "d.weight": (5, 3 * 10), "d.bias": (5,)}

    def forward(p: dict[str, Any], x: Any) -> tuple[Any, list[Any]]:
        z1 = F.conv1d(x, p["c1.weight"], padding=2) / 2 + p["c1.bias"][:, None]
        nets.tap("conv", "c1.weight", "c1.bias", x, z1, scale=0.5, padding=2)
        z2 = F.conv1d(torch.relu(z1), p["c2.weight"])
        nets.tap("conv", "c2.weight", None, torch.relu(z1), z2)
        a = torch.relu(z2).flatten(-2)
        out = a @ p["d.weight"].T + p["d.bias"]
        nets.tap("dense", "d.weight", "d.bias", a, out)
        return out, [z1, z2]

    std = {k: 0.5 for k in shapes if k.endswith("weight")}
    return nets.Net(shapes, "c1.weight", "d.weight", std, forward, 4 * 12 + 3 * 10)


def test_one_d_convolutions_with_a_scale() -> None:
    X = torch.tensor(np.random.default_rng(5).standard_normal((6, 2, 12)))
    assert_layer_kernel_matches(conv1d_net(), X)


def test_forward_passes_without_a_complete_tape_take_the_jacobian_route() -> None:
    net = nets.mlp(8, 6, 2, 3)
    params = nets.to_torch(net.init(np.random.default_rng(1), 1.0), F64, "cpu")
    X = torch.tensor(np.random.default_rng(2).standard_normal((5, 8)))

    def silent(p: dict[str, Any], x: Any) -> tuple[Any, list[Any]]:
        h = torch.relu(x @ p["W1"].T / np.sqrt(8))
        z = h @ p["W2"].T / np.sqrt(6)
        return torch.relu(z) @ p["W_out"].T / 6, [z]

    def partial(p: dict[str, Any], x: Any) -> tuple[Any, list[Any]]:
        out, pre = silent(p, x)
        nets.tap("dense", "W_out", None, torch.relu(pre[0]), out, 1 / 6)
        return out, pre

    for forward in (silent, partial):
        assert layer_ntk(forward, params, X) is None
        K = metrics.ntk(forward, params, X)
        assert torch.equal(K, metrics.jacobian_ntk(forward, params, X))
        np.testing.assert_allclose(K.numpy(), metrics.ntk(net.forward, params, X).numpy(),
                                   rtol=1e-12)
    with nets.recording() as tape:
        net.forward(params, X)
    assert [t.weight for t in tape] == ["W1", "W2", "W_out"]
    net.forward(params, X)  # outside recording(): nothing more is recorded
    assert len(tape) == 3
