"""Grokking's runs of a chunk trained together: one stacked network, one optimiser step.

Private helper of :mod:`richlazy_cli.models.grokking.model`; pure numerics, no I/O. The G
configurations of a chunk share every non-batchable parameter (p, op, width, heads, layers,
learning rate, batch, steps), so they have training sets of the same size, the same
mini-batch boundaries and the same evaluation steps; they differ in α, τ and the seed (their
split, initial values and batch order). Every parameter is stacked to (G, ...) and

* the forward pass of docs/grokking.md eq. (2)–(4) is written with batched products over the
  leading axis (token and position embeddings gathered per configuration, the causal
  multi-head attention over the 4 positions, post-LN blocks with GELU feed-forward layers,
  the final LayerNorm and the unembedding at the last position, × τ_g);
* the loss is ``Σ_g CE_g``: configuration g's parameters enter only its own term, so the
  gradient of the sum is, slice by slice, the gradient of each configuration's own mean
  cross-entropy;
* AdamW (docs/grokking.md eq. (6)) runs on the stacked tensors with each configuration's
  learning rate ``lr/τ_g²`` times the warm-up factor;
* evaluations compute each configuration's mean cross-entropy and accuracy on its own
  training and validation sets, in slices of at most ``EVAL_ROWS`` pairs.

A configuration that diverges (non-finite training loss at an evaluation) or stops early
keeps its slice in the stack, but its optimiser update is masked out and nothing more is
recorded for it; every operation acts on one configuration's slice only, so a neighbour's
NaN cannot reach it.

Agreement with one-at-a-time training (:class:`richlazy_cli.models.grokking.model._Run`): the same
mathematics, rounded otherwise (batched products, a hand-written attention and AdamW), so
results agree within rounding: 1e-9 relative in float64 over tens of steps (tested), looser
in float32 and over long runs where training amplifies the differences. This is the GPU
default (a batch is one computation there, ``batch-dependent`` in docs/engine.md); the CPU
keeps training one configuration at a time, bitwise independent of batching.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ._schedule import BETAS, EVAL_ROWS, warmup_factor

LN_EPS = 1e-5
"""PyTorch's LayerNorm epsilon."""
ADAM_EPS = 1e-8
"""PyTorch's AdamW epsilon."""


def stack_initial(values: Sequence[Mapping[str, np.ndarray]], dtype: Any, device: str
                  ) -> dict[str, Any]:
    """The configurations' initial values stacked to (G, ...) leaf tensors."""
    import torch

    return {name: torch.tensor(np.stack([v[name] for v in values]), dtype=dtype,
                               device=device).requires_grad_(True)
            for name in values[0]}


def _linear(x: Any, W: Any, b: Any) -> Any:
    """``x Wᵀ + b`` per configuration: x (G, r, i), W (G, o, i), b (G, o)."""
    import torch

    return torch.baddbmm(b[:, None, :], x, W.transpose(1, 2))


def _layer_norm(x: Any, w: Any, b: Any) -> Any:
    """LayerNorm over the last axis with per-configuration weight and bias (G, d)."""
    import torch.nn.functional as F

    shape = (x.shape[0],) + (1,) * (x.dim() - 2) + (x.shape[-1],)
    return F.layer_norm(x, x.shape[-1:], eps=LN_EPS) * w.view(shape) + b.view(shape)


def forward(P: Mapping[str, Any], tokens: Any, tau: Any, n_heads: int, n_layers: int) -> Any:
    """Logits (G, b, p + 2) at the last position, × τ_g, for tokens (G, b, 4)."""
    import torch
    import torch.nn.functional as F

    G, b, n = tokens.shape
    E = P["token_embeddings.weight"]  # (G, V, d)
    d = E.shape[2]
    dh = d // n_heads
    gi = torch.arange(G, device=tokens.device)[:, None, None]
    h = E[gi, tokens] + P["position_embeddings.weight"][:, None, :n, :]  # (G, b, n, d)
    mask = torch.triu(torch.full((n, n), float("-inf"), device=tokens.device,
                                 dtype=h.dtype), diagonal=1)
    for layer in range(n_layers):
        pre = f"blocks.{layer}."
        x = h.reshape(G, b * n, d)
        qkv = _linear(x, P[pre + "self_attn.in_proj_weight"], P[pre + "self_attn.in_proj_bias"])
        q, k, v = (t.reshape(G, b, n, n_heads, dh).transpose(2, 3)
                   for t in qkv.split(d, dim=2))  # (G, b, H, n, dh)
        scores = q @ k.transpose(-1, -2) / math.sqrt(dh) + mask
        att = (torch.softmax(scores, dim=-1) @ v).transpose(2, 3).reshape(G, b * n, d)
        att = _linear(att, P[pre + "self_attn.out_proj.weight"],
                      P[pre + "self_attn.out_proj.bias"])
        a = _layer_norm(x + att, P[pre + "self_attn_norm.weight"],
                        P[pre + "self_attn_norm.bias"])
        ff = _linear(F.gelu(_linear(a, P[pre + "ffn.0.weight"], P[pre + "ffn.0.bias"])),
                     P[pre + "ffn.2.weight"], P[pre + "ffn.2.bias"])
        h = _layer_norm(a + ff, P[pre + "ffn_norm.weight"],
                        P[pre + "ffn_norm.bias"]).reshape(G, b, n, d)
    last = _layer_norm(h[:, :, -1, :], P["ln_f.weight"], P["ln_f.bias"])
    return _linear(last, P["head.weight"], P["head.bias"]) * tau[:, None, None]


def cross_entropy(logits: Any, labels: Any, reduction: str = "mean") -> Any:
    """Per-configuration cross-entropy (G,) of logits (G, b, V) against labels (G, b)."""
    import torch.nn.functional as F

    G, b, V = logits.shape
    ce = F.cross_entropy(logits.reshape(G * b, V), labels.reshape(G * b),
                         reduction="none").reshape(G, b)
    return ce.mean(dim=1) if reduction == "mean" else ce.sum(dim=1)


class AdamW:
    """PyTorch's AdamW (decoupled weight decay, bias-corrected moments) on stacked tensors,
    with one learning rate per configuration; a masked configuration is left unchanged."""

    def __init__(self, params: Mapping[str, Any], betas: tuple[float, float],
                 weight_decay: float) -> None:
        import torch

        self.params = params
        self.betas = betas
        self.wd = weight_decay
        self.m = {k: torch.zeros_like(v) for k, v in params.items()}
        self.v = {k: torch.zeros_like(v) for k, v in params.items()}
        self.t = 0

    def step(self, lr: Any, live: Any) -> None:
        """One step at learning rates ``lr`` (G,), for the configurations where ``live``."""
        import torch

        b1, b2 = self.betas
        self.t += 1
        bc1 = 1.0 - b1 ** self.t
        bc2_sqrt = math.sqrt(1.0 - b2 ** self.t)
        lr = torch.where(live, lr, torch.zeros_like(lr))
        with torch.no_grad():
            for k, p in self.params.items():
                g = p.grad
                shape = (p.shape[0],) + (1,) * (p.dim() - 1)
                lr_k = lr.view(shape)
                keep = live.view(shape)
                p.mul_(1.0 - lr_k * self.wd)
                m, v = self.m[k], self.v[k]
                m.copy_(torch.where(keep, torch.lerp(m, g, 1.0 - b1), m))
                v.copy_(torch.where(keep, v * b2 + (1.0 - b2) * g * g, v))
                denom = v.sqrt() / bc2_sqrt + ADAM_EPS
                p.sub_(torch.where(keep, (lr_k / bc1) * m / denom, torch.zeros_like(p)))


def evaluate(P: Mapping[str, Any], A: Any, b: Any, tau: Any, n_heads: int, n_layers: int,
             rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean cross-entropy and accuracy (G,) of each configuration on its own pairs
    A (G, N, 4) with labels b (G, N), in slices of at most ``rows`` pairs. Where the loss is
    not finite the logits hold no prediction, so the accuracy is NaN too."""
    import torch

    n = int(b.shape[1])
    loss = torch.zeros(b.shape[0], dtype=torch.float64, device=b.device)
    correct = torch.zeros(b.shape[0], dtype=torch.int64, device=b.device)
    for start in range(0, n, rows):
        logits = forward(P, A[:, start:start + rows], tau, n_heads, n_layers)
        part = b[:, start:start + rows]
        loss += cross_entropy(logits, part, "sum").double()
        correct += (logits.argmax(2) == part).sum(dim=1)
    mean = (loss / n).cpu().numpy()
    return mean, np.where(np.isfinite(mean), (correct.double() / n).cpu().numpy(), np.nan)


def train(v: Mapping[str, Any], inits: Sequence[Mapping[str, np.ndarray]],
          taus: np.ndarray, batch_rngs: Sequence[np.random.Generator],
          train_sets: Sequence[tuple[np.ndarray, np.ndarray]],
          val_sets: Sequence[tuple[np.ndarray, np.ndarray]], bsz: int, ev: np.ndarray,
          device: str, progress: Any = None, rows: int | None = None
          ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Train the G configurations together; their curves (G, n_eval) (NaN where not
    evaluated) and whether each ended without diverging (G,) bool. Evaluations take
    ``rows`` pairs of every configuration at once (default ``EVAL_ROWS // G``, so that an
    evaluation needs the memory of one configuration's)."""
    import torch

    from ...numerics import compute

    dtype = compute.torch_dtype(str(v["dtype"]))
    G = len(inits)
    rows = rows or max(1, EVAL_ROWS // G)
    H, L = int(v["n_heads"]), int(v["n_layers"])
    P = stack_initial(inits, dtype, device)
    tau = torch.tensor(taus, dtype=dtype, device=device)
    lr0 = torch.tensor(float(v["lr"]) / np.asarray(taus, dtype=np.float64) ** 2,
                       dtype=torch.float64, device=device)
    X = torch.as_tensor(np.stack([s[0] for s in train_sets]), device=device)
    y = torch.as_tensor(np.stack([s[1] for s in train_sets]), device=device)
    Xv = torch.as_tensor(np.stack([s[0] for s in val_sets]), device=device)
    yv = torch.as_tensor(np.stack([s[1] for s in val_sets]), device=device)
    opt = AdamW(P, BETAS, float(v["weight_decay"]))
    thr, early = float(v["threshold"]), bool(v["early_stop"])
    names = ("train_acc", "val_acc", "train_loss", "val_loss")
    out = {k: np.full((G, ev.size), np.nan) for k in names}
    live = np.ones(G, dtype=bool)
    ok = np.ones(G, dtype=bool)
    gi = torch.arange(G, device=device)[:, None]

    def record(j: int) -> None:
        with torch.no_grad():
            for tag, A, b in (("train", X, y), ("val", Xv, yv)):
                loss, acc = evaluate(P, A, b, tau, H, L, rows)
                out[f"{tag}_loss"][live, j] = loss[live]
                out[f"{tag}_acc"][live, j] = acc[live]
        bad = live & ~np.isfinite(out["train_loss"][:, j])
        ok[bad] = False
        live[bad] = False
        if early:
            live[live & (out["train_acc"][:, j] >= thr) & (out["val_acc"][:, j] >= thr)] = False

    record(0)
    live_t = torch.as_tensor(live, device=device)
    n = int(y.shape[1])
    j, step, steps = 1, 0, int(ev[-1])
    while step < steps and live.any():
        order = torch.as_tensor(np.stack([g.permutation(n) for g in batch_rngs]),
                                device=device)
        for b0 in range(0, n, bsz):
            idx = order[:, b0:b0 + bsz]
            for p in P.values():
                p.grad = None
            cross_entropy(forward(P, X[gi, idx], tau, H, L), y[gi, idx]).sum().backward()
            opt.step((lr0 * warmup_factor(step)).to(dtype), live_t)
            step += 1
            if step == ev[j]:
                record(j)
                live_t = torch.as_tensor(live, device=device)  # copied only when it changes
                j += 1
                if progress is not None:
                    progress(step / steps)
                if not live.any():
                    break
            if step == steps:
                break
    return out, ok
