"""The networks of the practice experiments as pure functions of a parameter dict
(docs/practice.md §2, docs/rhm.md §2, docs/cnn.md §1).

A network is a :class:`Net`: an ordered dict of parameter shapes, an initialisation drawn from
the engine's NumPy random streams, and ``forward(params, x) -> (logits, pre_activations)``.
Being pure functions of ``params`` they work with ``torch.func`` (per-example Jacobians) as
they are. Every bias starts at 0.

**Relative scale α** (Kunin et al. 2024, Fig. 6 caption; docs/practice.md eq. (1)): the first
layer's initial weights are divided by α and the readout's multiplied by α. With zero biases,
ReLU and max-pooling are positively homogeneous, so every hidden pre-activation is divided by α
and the readout multiplies it back: f is unchanged at initialisation, exactly in real
arithmetic and to rounding in floating point.

ReLU is ``torch.relu``, whose derivative is 1[z > 0] (the bit of the Hamming distance); its
backward pass is a vectorised threshold, several times faster than ``clamp_min``'s.

**Layer tape** (docs/practice.md §3): inside :func:`recording`, a forward pass appends one
:class:`Tap` per parametrised layer (its input and its pre-activation, still in the autograd
graph). The layer-structured NTK (:mod:`.ntk`) builds the kernel from them; a forward that
records nothing, or not every parameter, gets the generic per-example-Jacobian kernel.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import BadInput

Forward = Callable[[dict[str, Any], Any], tuple[Any, list[Any]]]


@dataclass(frozen=True)
class Net:
    """A network: parameter shapes (in order), the names of its first and readout weight, the
    standard deviation of each weight's initial entries, and its forward function."""

    shapes: dict[str, tuple[int, ...]]
    first: str
    readout: str
    init_std: dict[str, float]
    forward: Forward
    n_hidden_units: int  # hidden units per sample (for the Hamming distance)

    def n_params(self) -> int:
        return sum(math.prod(s) for s in self.shapes.values())

    def init(self, g: np.random.Generator, alpha: float,
             rescale: str = "both") -> dict[str, np.ndarray]:
        """Initial parameters (float64): weights N(0, init_std²) drawn in declaration order,
        biases 0, then the relative scale α applied (:func:`apply_alpha`; ``rescale``
        ``"first"`` divides the first layer only)."""
        params = {}
        for name, shape in self.shapes.items():
            std = self.init_std.get(name)
            params[name] = (np.zeros(shape) if std is None
                            else std * g.standard_normal(shape))
        return apply_alpha(params, self.first, self.readout, alpha, rescale)


@dataclass(frozen=True)
class Tap:
    """One parametrised layer of a forward pass, z = scale·(W ⋆ a) + b: ``kind`` ``"dense"``
    (z = scale·a Wᵀ + b over the last axis) or ``"conv"`` (a convolution of ``a`` with W over
    1 or 2 spatial axes, stride 1, zero ``padding``), the names of W and b (None: no bias),
    the layer's input a and its output z."""

    kind: str
    weight: str
    bias: str | None
    input: Any
    output: Any
    scale: float = 1.0
    padding: int = 0


_tape: contextvars.ContextVar[list[Tap] | None] = contextvars.ContextVar("tape", default=None)


@contextlib.contextmanager
def recording() -> Iterator[list[Tap]]:
    """Collect the :class:`Tap` of every layer of the forward passes run inside."""
    tape: list[Tap] = []
    token = _tape.set(tape)
    try:
        yield tape
    finally:
        _tape.reset(token)


def tap(kind: str, weight: str, bias: str | None, a: Any, z: Any, scale: float = 1.0,
        padding: int = 0) -> None:
    """Record a layer on the active tape (nothing outside :func:`recording`)."""
    tape = _tape.get()
    if tape is not None:
        tape.append(Tap(kind, weight, bias, a, z, scale, padding))


RESCALES = ("both", "first")


def apply_alpha(params: dict[str, np.ndarray], first: str, readout: str,
                alpha: float, rescale: str = "both") -> dict[str, np.ndarray]:
    """First layer ÷ α, readout × α (docs/practice.md eq. (1)); with ``rescale = "first"``
    the first layer ÷ α only (the paper's ResNet convention, where a normalisation after the
    first convolution keeps f unchanged: docs/cnn.md §5); other entries unchanged."""
    out = dict(params)
    out[first] = params[first] / alpha
    if rescale == "both":
        out[readout] = params[readout] * alpha
    return out


# -- the random-hierarchy MLP (docs/rhm.md eq. (3)) ------------------------------------------

def mlp(d_in: int, width: int, hidden_layers: int, n_out: int) -> Net:
    """Bias-free ReLU MLP with standard-normal weights, ``1/√fan_in`` hidden layers and the
    mean-field readout ``f = W_out h_L / width`` (docs/rhm.md eq. (3)).

    The forward pass also takes a group of G configurations at once: parameters stacked to
    (G, out, in) and inputs (G, batch, in) become batched matrix products, one per
    configuration (docs/practice.md §1)."""
    shapes: dict[str, tuple[int, ...]] = {"W1": (width, d_in)}
    for layer in range(2, hidden_layers + 1):
        shapes[f"W{layer}"] = (width, width)
    shapes["W_out"] = (n_out, width)
    names = list(shapes)

    def forward(params: dict[str, Any], x: Any) -> tuple[Any, list[Any]]:
        import torch

        pre = []
        h = x
        for name in names[:-1]:
            root = math.sqrt(params[name].shape[-1])
            z = h @ params[name].mT / root
            tap("dense", name, None, h, z, 1.0 / root)
            pre.append(z)
            h = torch.relu(z)
        out = h @ params["W_out"].mT / width
        tap("dense", "W_out", None, h, out, 1.0 / width)
        return out, pre

    return Net(shapes, "W1", "W_out", {n: 1.0 for n in names}, forward,
               width * hidden_layers)


# -- LeNets (docs/cnn.md §1) -----------------------------------------------------------------

LENETS = ("lenet_digits", "lenet5")
SMOOTH = ("smooth2d", "smooth1d")
ARCHS = LENETS + SMOOTH
FIRST_KERNEL = {"lenet_digits": 3, "lenet5": 5, "smooth2d": 9, "smooth1d": 15}
"""The first convolution's kernel size of each architecture (settable for ``smooth*``)."""


def lenet_geometry(arch: str, in_shape: tuple[int, ...]) -> dict[str, int]:
    """Kernel size, paddings and the spatial sizes of a LeNet on images of ``in_shape``
    (C, H, W), or BadInput when the architecture does not fit them.

    ``lenet_digits``: 3×3 convolutions with padding 1, each followed by 2×2 max-pooling (H and
    W divisible by 4). ``lenet5``: 5×5 convolutions, the first padded so that its output is
    28×28 (28×28 input: padding 2, as for MNIST; 32×32: none, as for CIFAR-10), the second
    unpadded, hence a 16×5×5 = 400 flattening.
    """
    if len(in_shape) != 3:
        raise BadInput(f"parameter arch: {arch} needs images (channels, height, width); the "
                       f"data have samples of shape {tuple(in_shape)}")
    c, h, w = in_shape
    if arch == "lenet_digits":
        if h % 4 or w % 4 or h < 4 or w < 4:
            raise BadInput(f"parameter arch: lenet_digits needs height and width divisible by "
                           f"4; the data are {h}x{w}")
        return {"c": c, "k": 3, "pad1": 1, "pad2": 1, "h2": h // 4, "w2": w // 4}
    if (h, w) not in ((28, 28), (32, 32)):
        raise BadInput(f"parameter arch: lenet5 needs 28x28 or 32x32 images; the data are "
                       f"{h}x{w}")
    return {"c": c, "k": 5, "pad1": (32 - h) // 2, "pad2": 0, "h2": 5, "w2": 5}


def lenet(arch: str, in_shape: tuple[int, ...], n_out: int = 10) -> Net:
    """conv(6) → ReLU → max-pool 2 → conv(16) → ReLU → max-pool 2 → dense 120 → ReLU →
    dense 84 → ReLU → dense ``n_out``, He-normal weights N(0, 2/fan_in) (docs/cnn.md eq. (1))."""
    g = lenet_geometry(arch, in_shape)
    k, c = g["k"], g["c"]
    flat = 16 * g["h2"] * g["w2"]
    shapes = {
        "conv1.weight": (6, c, k, k), "conv1.bias": (6,),
        "conv2.weight": (16, 6, k, k), "conv2.bias": (16,),
        "fc1.weight": (120, flat), "fc1.bias": (120,),
        "fc2.weight": (84, 120), "fc2.bias": (84,),
        "fc3.weight": (n_out, 84), "fc3.bias": (n_out,),
    }
    std = {name: math.sqrt(2.0 / math.prod(shape[1:]))
           for name, shape in shapes.items() if name.endswith("weight")}
    h, w = in_shape[1], in_shape[2]
    h1, w1 = h + 2 * g["pad1"] - k + 1, w + 2 * g["pad1"] - k + 1
    h2, w2 = h1 // 2 + 2 * g["pad2"] - k + 1, w1 // 2 + 2 * g["pad2"] - k + 1
    units = 6 * h1 * w1 + 16 * h2 * w2 + 120 + 84

    def forward(params: dict[str, Any], x: Any) -> tuple[Any, list[Any]]:
        import torch
        import torch.nn.functional as F

        z1 = F.conv2d(x, params["conv1.weight"], params["conv1.bias"], padding=g["pad1"])
        a1 = F.max_pool2d(torch.relu(z1), 2)
        z2 = F.conv2d(a1, params["conv2.weight"], params["conv2.bias"], padding=g["pad2"])
        a2 = F.max_pool2d(torch.relu(z2), 2).flatten(-3)
        z3 = a2 @ params["fc1.weight"].T + params["fc1.bias"]
        h3 = torch.relu(z3)
        z4 = h3 @ params["fc2.weight"].T + params["fc2.bias"]
        h4 = torch.relu(z4)
        out = h4 @ params["fc3.weight"].T + params["fc3.bias"]
        tap("conv", "conv1.weight", "conv1.bias", x, z1, padding=g["pad1"])
        tap("conv", "conv2.weight", "conv2.bias", a1, z2, padding=g["pad2"])
        tap("dense", "fc1.weight", "fc1.bias", a2, z3)
        tap("dense", "fc2.weight", "fc2.bias", h3, z4)
        tap("dense", "fc3.weight", "fc3.bias", h4, out)
        return out, [z1, z2, z3, z4]

    return Net(shapes, "conv1.weight", "fc3.weight", std, forward, units)


# -- the filter-smoothness networks (docs/cnn.md §5) -----------------------------------------

def smooth_geometry(arch: str, in_shape: tuple[int, ...], first_kernel: int) -> dict[str, int]:
    """Check that ``smooth2d`` (images (C, H, W)) or ``smooth1d`` (signals (C, L)) fits the
    data and that ``first_kernel`` is odd, at least 3 and no larger than the input; returns
    the channels and the spatial size(s) before and after the pooling."""
    dims = 2 if arch == "smooth2d" else 1
    if len(in_shape) != dims + 1:
        want = "images (channels, height, width)" if dims == 2 else "signals (channels, length)"
        raise BadInput(f"parameter arch: {arch} needs {want}; the data have samples of shape "
                       f"{tuple(in_shape)}")
    k = first_kernel
    if k < 3 or k % 2 == 0:
        raise BadInput(f"parameter first_kernel: must be odd and at least 3 ('same' padding "
                       f"and a Laplacian need a centre), not {k}")
    sides = in_shape[1:]
    if k > min(sides):
        raise BadInput(f"parameter first_kernel: {k} is larger than the input "
                       f"({'x'.join(map(str, sides))})")
    if min(sides) < 2:
        raise BadInput(f"parameter arch: {arch} needs inputs of side at least 2")
    return {"c": in_shape[0], "k": k, "dims": dims,
            "n1": math.prod(sides), "n2": math.prod(s // 2 for s in sides)}


NORMS = ("none", "channel")
NORM_EPS = 1e-10


def channel_norm(z: Any, dims: int) -> Any:
    """Per sample and channel, ``(z − mean)/√(var + ε)`` over the spatial positions (no
    affine parameters): f no longer depends on the scale of the layer before it, as with the
    batch normalisation of the paper's ResNet, while every sample stays independent of the
    others (so the per-example NTK and evaluation are unchanged in meaning)."""
    axes = tuple(range(-dims, 0))
    mu = z.mean(dim=axes, keepdim=True)
    var = z.var(dim=axes, keepdim=True, unbiased=False)
    return (z - mu) / (var + NORM_EPS).sqrt()


def smooth_net(arch: str, in_shape: tuple[int, ...], first_kernel: int,
               n_out: int = 10, norm: str = "none") -> Net:
    """conv k (16 channels, 'same') → [channel norm] → ReLU → max-pool 2 → conv 3 (32,
    'same') → ReLU → global average pool → dense ``n_out``; 2-D for ``smooth2d``, 1-D for
    ``smooth1d``. He-normal weights N(0, 2/fan_in), zero biases (docs/cnn.md eq. (3)).
    Global average pooling is linear, so conv1 ÷ α and dense × α leave f unchanged at
    initialisation; with ``norm = "channel"`` (:func:`channel_norm` after conv1) conv1 ÷ α
    alone does (up to ε)."""
    g = smooth_geometry(arch, in_shape, first_kernel)
    k, c, dims = g["k"], g["c"], g["dims"]
    box = (k,) * dims
    shapes = {
        "conv1.weight": (16, c, *box), "conv1.bias": (16,),
        "conv2.weight": (32, 16, *(3,) * dims), "conv2.bias": (32,),
        "fc.weight": (n_out, 32), "fc.bias": (n_out,),
    }
    std = {name: math.sqrt(2.0 / math.prod(shape[1:]))
           for name, shape in shapes.items() if name.endswith("weight")}
    units = 16 * g["n1"] + 32 * g["n2"]

    def forward(params: dict[str, Any], x: Any) -> tuple[Any, list[Any]]:
        import torch
        import torch.nn.functional as F

        conv = F.conv2d if dims == 2 else F.conv1d
        pool = F.max_pool2d if dims == 2 else F.max_pool1d
        z1 = conv(x, params["conv1.weight"], params["conv1.bias"], padding=k // 2)
        h1 = channel_norm(z1, dims) if norm == "channel" else z1
        a1 = pool(torch.relu(h1), 2)
        z2 = conv(a1, params["conv2.weight"], params["conv2.bias"], padding=1)
        a2 = torch.relu(z2).flatten(-dims).mean(-1)
        out = a2 @ params["fc.weight"].T + params["fc.bias"]
        tap("conv", "conv1.weight", "conv1.bias", x, z1, padding=k // 2)
        tap("conv", "conv2.weight", "conv2.bias", a1, z2, padding=1)
        tap("dense", "fc.weight", "fc.bias", a2, out)
        return out, [h1, z2]

    return Net(shapes, "conv1.weight", "fc.weight", std, forward, units)


def network(arch: str, in_shape: tuple[int, ...], first_kernel: int | None = None,
            norm: str = "none") -> Net:
    """The ``cnn`` model's network ``arch`` on samples of ``in_shape`` (docs/cnn.md §1, §5);
    ``first_kernel`` (only for ``smooth*``) defaults to :data:`FIRST_KERNEL`; ``norm`` (only
    for ``smooth*``) adds :func:`channel_norm` after the first convolution."""
    if arch in LENETS:
        if first_kernel is not None and first_kernel != FIRST_KERNEL[arch]:
            raise BadInput(f"parameter first_kernel: {arch} has a fixed {FIRST_KERNEL[arch]}x"
                           f"{FIRST_KERNEL[arch]} first convolution; first_kernel is for "
                           f"{' and '.join(SMOOTH)}")
        if norm != "none":
            raise BadInput(f"parameter norm: {arch} has no normalisation option; norm is for "
                           f"{' and '.join(SMOOTH)}")
        return lenet(arch, in_shape)
    return smooth_net(arch, in_shape, first_kernel or FIRST_KERNEL[arch], norm=norm)


def to_torch(params: dict[str, np.ndarray], dtype: Any, device: str,
             requires_grad: bool = False) -> dict[str, Any]:
    import torch

    return {k: torch.tensor(v, dtype=dtype, device=device, requires_grad=requires_grad)
            for k, v in params.items()}
