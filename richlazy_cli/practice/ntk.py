"""The empirical NTK from the layers' structure (docs/practice.md §3, eqs. (3), (7)–(9)).

The per-example gradient of a layer's weights factorises. For a dense layer
z = s·a Wᵀ + b, the gradient of the logit f_c(x_i) is the outer product s·δ_ic a_iᵀ, with
δ_ic = ∂f_c(x_i)/∂z(x_i), so its contribution to the trace kernel is

    K_ij = s² (a_i·a_j) Σ_c δ_ic·δ_jc  (+ Σ_c δ_ic·δ_jc for the bias),

n²(d_in + c·d_out) operations instead of the n²·c·d_in·d_out of J Jᵀ. For a convolution the
gradient is Σ_p δ_ic[:, p] u_i[p]ᵀ over output positions p, u_i[p] the input patch under the
kernel at p; it is formed per example and logit (c·n·O·P·Cin·k operations, small for the first
layers of a LeNet) and its Gram added. The "full" kernel (nc × nc) is assembled the same way
with (i, c) rows.

The inputs a and outputs z of each layer come from the forward pass's tape
(:func:`.nets.recording`); δ from ``c`` backward passes of the whole probe set (the samples
are independent in these networks, so ∂f_c(x_i)/∂z(x_j) = 0 for i ≠ j). A test compares every
layer type with J Jᵀ assembled from one ``autograd.grad`` per example and logit (≤ 1e-10).
"""

from __future__ import annotations

from typing import Any

from . import nets
from .nets import Forward


def layer_ntk(forward: Forward, params: dict[str, Any], X: Any,
              kind: str = "trace") -> Any | None:
    """The empirical NTK of ``forward`` at ``params`` over the samples ``X``, built layer by
    layer, in the dtype of ``params``; None when the forward's tape does not name every
    parameter exactly once (then use the Jacobian route, :func:`.metrics.jacobian_ntk`)."""
    import torch

    leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
    with torch.enable_grad(), nets.recording() as tape:
        out, _ = forward(leaves, X)
    named = [t.weight for t in tape] + [t.bias for t in tape if t.bias is not None]
    if sorted(named) != sorted(params) or any(t.kind not in ("dense", "conv") for t in tape):
        return None
    n, c = out.shape
    deltas: list[list[Any]] = [[] for _ in tape]
    for k in range(c):
        seed = torch.zeros_like(out)
        seed[:, k] = 1.0
        grads = torch.autograd.grad(out, [t.output for t in tape], grad_outputs=seed,
                                    retain_graph=k < c - 1)
        for store, g in zip(deltas, grads, strict=True):
            store.append(g.detach())
    K = out.new_zeros((n, n) if kind == "trace" else (n * c, n * c)).detach()
    for t, store in zip(tape, deltas, strict=True):
        delta = torch.stack(store)  # (c, n, *z.shape[1:])
        a = t.input.detach()
        if t.kind == "dense":
            K += _dense_term(a, delta, t.scale, t.bias is not None, kind)
        else:
            K += _conv_term(a, delta, leaves[t.weight].shape, t.scale, t.padding,
                            t.bias is not None, kind)
    return K


def _rows(features: Any, kind: str) -> Any:
    """(c, n, F) per-(logit, example) features → rows of the kernel's Gram: (n, c·F) for the
    trace kernel (Σ_c is the inner product over the concatenation), (n·c, F) for the full one,
    row i·c + k."""
    c, n = features.shape[:2]
    f = features.reshape(c, n, -1).transpose(0, 1)
    return f.reshape(n, -1) if kind == "trace" else f.reshape(n * c, -1)


def _dense_term(a: Any, delta: Any, scale: float, bias: bool, kind: str) -> Any:
    """(s² a aᵀ [+ 1]) ⊙ (δ δᵀ) of a dense layer (eq. (8))."""
    c = delta.shape[0]
    a = a.reshape(a.shape[0], -1)
    D = _rows(delta, kind)
    Kd = D @ D.T
    Ka = (a @ a.T) * (scale * scale)
    if kind == "full":
        Ka = Ka.repeat_interleave(c, 0).repeat_interleave(c, 1)
    return Kd * (Ka + 1.0) if bias else Kd * Ka


def _conv_term(a: Any, delta: Any, weight_shape: Any, scale: float, padding: int, bias: bool,
               kind: str) -> Any:
    """Gram of a convolution's per-example gradients s·Σ_p δ[:, p] u[p]ᵀ (eq. (9)), plus
    that of its bias, Σ_p δ[:, p]."""
    import torch.nn.functional as F

    c, n, O = delta.shape[:3]
    kernel = tuple(weight_shape[2:])
    if len(kernel) == 1:  # 1-D: as 2-D images of height 1
        a, kernel, pad = a.unsqueeze(-2), (1, kernel[0]), (0, padding)
    else:
        pad = (padding, padding)
    U = F.unfold(a, kernel, padding=pad)  # (n, Cin·∏kernel, P)
    d = delta.reshape(c, n, O, -1)  # (c, n, O, P)
    if d.shape[-1] != U.shape[-1]:
        raise ValueError(f"convolution tap: {d.shape[-1]} output positions, {U.shape[-1]} "
                         "patches (stride 1 and symmetric padding are assumed)")
    G = _rows(scale * (d @ U.transpose(1, 2).unsqueeze(0)), kind)  # (c, n, O, Q)
    K = G @ G.T
    if bias:
        B = _rows(d.sum(-1), kind)
        K = K + B @ B.T
    return K
