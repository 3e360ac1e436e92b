"""Metrics of a network's training (docs/practice.md §3): the empirical NTK and its kernel
distance, the Hamming distance of activation patterns, parameter distances, losses and
accuracies.

* Empirical NTK over a probe set X (n samples, c logits, parameters θ),
  J_c = ∂f_c(X)/∂θ:

      trace kernel  K = Σ_c J_c J_cᵀ  (n × n),      full kernel  K = [J_c J_c'ᵀ]  (nc × nc)

  (docs/practice.md eq. (3); the paper does not say which it used, and the trace is the
  cheapest faithful choice). Built layer by layer from the factorised per-example gradients
  (:mod:`.ntk`) when the network's forward pass records its layers, else from per-example
  Jacobians from ``torch.func`` (``vmap`` of ``jacrev``, no loop over examples).
* Kernel distance S(0,t) = 1 − ⟨K₀,K_t⟩_F / (‖K₀‖_F ‖K_t‖_F) (Fort et al. 2020, as used by
  Kunin et al. 2024 §5; docs/practice.md eq. (4)), computed so that S(0,0) is exactly 0.
* Hamming distance: the fraction of (probe sample, hidden unit) pairs whose bit
  1[pre-activation > 0] differs from initialisation, over all hidden units (eq. (5)).
* Parameter distance ‖θ_t − θ₀‖₂ over all parameters, and its ratio to ‖θ₀‖₂ (eq. (6)).

All sums are taken in float64.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import DIVERGENCE_FACTOR
from ..numerics.kernel_distance import kernel_distance as _finish
from .nets import Forward

KERNELS = ("trace", "full")


def ntk(forward: Forward, params: dict[str, Any], X: Any, kind: str = "trace") -> Any:
    """The empirical NTK of ``forward`` at ``params`` over the samples ``X`` (first axis),
    in the dtype of ``params`` (docs/practice.md eq. (3)): layer by layer where the forward
    pass records its layers (:func:`.ntk.layer_ntk`), else :func:`jacobian_ntk`."""
    from .ntk import layer_ntk

    K = layer_ntk(forward, params, X, kind)
    return jacobian_ntk(forward, params, X, kind) if K is None else K


def jacobian_ntk(forward: Forward, params: dict[str, Any], X: Any, kind: str = "trace") -> Any:
    """The empirical NTK from the per-example Jacobians (``vmap`` of ``jacrev``) and their
    Gram products J Jᵀ, one per parameter tensor."""
    from torch.func import jacrev, vmap

    def one(p: dict[str, Any], x: Any) -> Any:
        return forward(p, x.unsqueeze(0))[0].squeeze(0)

    jac = vmap(jacrev(one), in_dims=(None, 0))(params, X)  # name -> (n, c, *shape)
    n, c = X.shape[0], next(iter(jac.values())).shape[1]
    K = None
    for J in jac.values():
        Jf = J.reshape(n, -1) if kind == "trace" else J.reshape(n * c, -1)
        term = Jf @ Jf.T
        K = term if K is None else K + term
    return K


def kernel_distance(K0: Any, K: Any) -> float:
    """S(0,t) = 1 − ⟨K₀,K⟩/√(‖K₀‖²‖K‖²), clipped to [0, 1] (eq. (4)). Written with the square
    root of the product so that S(K₀, K₀) is exactly 0 (IEEE: √(fl(x²)) = x)."""
    import torch

    K0 = K0.to(torch.float64)
    K = K.to(torch.float64)
    return float(_finish(float(torch.sum(K0 * K)), float(torch.sum(K0 * K0)),
                         float(torch.sum(K * K))))


def activation_bits(pre: list[Any]) -> Any:
    """The bits 1[z > 0] of every hidden unit, flattened per sample: (n, units) bool."""
    import torch

    return torch.cat([(z > 0).reshape(z.shape[0], -1) for z in pre], dim=1)


def hamming_distance(bits0: Any, bits: Any) -> float:
    """Fraction of (sample, hidden unit) bits that differ (eq. (5))."""
    return float((bits0 != bits).sum()) / bits0.numel()


def param_distance(params: dict[str, Any], params0: dict[str, Any]) -> tuple[float, float]:
    """(‖θ − θ₀‖₂, ‖θ − θ₀‖₂ / ‖θ₀‖₂) over every parameter, in float64 (eq. (6))."""
    import torch

    diff = sum(float(torch.sum((params[k].double() - params0[k].double()) ** 2))
               for k in params0)
    norm0 = sum(float(torch.sum(params0[k].double() ** 2)) for k in params0)
    dist = math.sqrt(diff)
    return dist, (dist / math.sqrt(norm0) if norm0 > 0 else float("nan"))


def loss_and_accuracy(logits: Any, y: Any) -> tuple[float, float]:
    """Mean cross-entropy (float64 sum) and the fraction of argmax predictions equal to y."""
    import torch.nn.functional as F

    loss = float(F.cross_entropy(logits.double(), y, reduction="sum")) / y.shape[0]
    acc = float((logits.argmax(dim=1) == y).sum()) / y.shape[0]
    return loss, acc


def evaluate(forward: Forward, params: dict[str, Any], X: Any, y: Any,
             block: int = 4096) -> tuple[float, float]:
    """:func:`loss_and_accuracy` over a data set, forward passes in blocks of ``block`` (the
    accuracy is the exact count of right predictions over n; NaN where a logit is not finite:
    such logits hold no prediction)."""
    import torch

    total = 0.0
    right = 0
    finite = True
    n = y.shape[0]
    with torch.no_grad():
        for i in range(0, n, block):
            logits, _ = forward(params, X[i:i + block])
            loss, _ = loss_and_accuracy(logits, y[i:i + block])
            total += loss * min(block, n - i)
            right += int((logits.argmax(dim=1) == y[i:i + block]).sum())
            finite = finite and bool(torch.isfinite(logits).all())
    return total / n, right / n if finite else math.nan


def accuracy(forward: Forward, params: dict[str, Any], X: Any, y: Any,
             block: int = 4096) -> float:
    """The accuracy of :func:`evaluate` without the loss (the same forward passes in the same
    blocks and the same count, hence the same value; NaN where a logit is not finite)."""
    import torch

    right = 0
    finite = True
    with torch.no_grad():
        for i in range(0, y.shape[0], block):
            logits, _ = forward(params, X[i:i + block])
            right += int((logits.argmax(dim=1) == y[i:i + block]).sum())
            finite = finite and bool(torch.isfinite(logits).all())
    return right / y.shape[0] if finite else math.nan


def diverged(loss: Any, j: int) -> bool:
    """Whether a run whose recorded training losses are ``loss[0], …, loss[j]`` has diverged
    at record ``j``: its loss is not finite, or exceeds
    :data:`~richlazy_cli.errors.DIVERGENCE_FACTOR` times the initial one ``loss[0]`` (the rule
    two-layer applies too)."""
    value = float(loss[j])
    return not math.isfinite(value) or value > DIVERGENCE_FACTOR * float(loss[0])
