"""The cnn configurations of a chunk trained together on a GPU: stacked parameters, one step.

Private helper of :mod:`richlazy_cli.models.cnn.model`; pure numerics, no I/O. G configurations with
the same learning rate (and every non-batchable parameter equal, so the same data sizes,
mini-batch boundaries and checkpoint steps) differ in α and the seed: their data split, probe
set, initial values and batch order. Every parameter is stacked to (G, ...) and a training
step is ``torch.func.vmap`` of one configuration's loss over the stack (the convolutions
become grouped convolutions, the dense layers batched products); the gradient of the summed
losses is, slice by slice, each configuration's own gradient. SGD with momentum and Adam are
elementwise, so PyTorch's optimisers on the stacked tensors update each configuration's slice
as its own optimiser would. The checkpoint metrics (docs/cnn.md §3) are computed per
configuration on its own slice, by the same functions as one-at-a-time training.

A configuration whose training loss stops being finite is recorded so at that checkpoint and
not again; its slice keeps training (its NaNs cannot reach another slice: every operation acts
on one slice) and its outputs after that checkpoint stay NaN, as when it trains alone.

Results equal one-at-a-time training (:func:`richlazy_cli.models.cnn.model._train_one`) up to
rounding (grouped convolutions and batched products sum in another order): the tests allow
1e-9 relative in float64. It is the GPU default (``batch-dependent`` there, docs/engine.md);
the CPU trains one configuration at a time, bitwise independent of the chunk.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...numerics import compute
from ...practice import data as sources
from ...practice import filters, metrics, nets
from ..base import rng


def train(splits: Sequence[sources.DataSplit], v: Mapping[str, Any],
          points: Sequence[Mapping[str, Any]], device: str, checkpoints: Any
          ) -> tuple[list[dict[str, np.ndarray]], np.ndarray, np.ndarray, int]:
    """Train the G configurations together; per configuration the metrics of
    :func:`..cnn._train_one`, whether each stayed finite, the checkpoint steps and the steps
    per epoch. ``checkpoints(v, n_train)`` gives the checkpoint steps."""
    import torch
    import torch.nn.functional as F
    from torch.func import vmap

    G = len(points)
    dtype = compute.torch_dtype(v["dtype"])
    f64 = torch.float64
    lr = float(points[0]["lr"])
    net = nets.network(str(v["arch"]), splits[0].sample_shape, v.get("first_kernel"),
                       str(v["norm"]))
    dims = len(net.shapes[net.first]) - 2
    n_train = splits[0].y_train.shape[0]
    if any(s.y_train.shape[0] != n_train for s in splits):
        raise AssertionError("stacked configurations need training sets of one size")
    bsz = int(v["batch"])
    spe = math.ceil(n_train / bsz)
    epochs = int(v["epochs"])
    ck = np.asarray(checkpoints(v, n_train))
    n_probe = max(1, round(float(v["probe_fraction"]) * n_train))

    seeds = [int(p["seed"]) for p in points]
    probes = [np.sort(rng(s, "probe").choice(n_train, n_probe, replace=False)) for s in seeds]
    X = torch.tensor(np.stack([s.X_train for s in splits]), dtype=dtype, device=device)
    y = torch.tensor(np.stack([s.y_train for s in splits]), device=device)
    Xt = [torch.tensor(s.X_test, dtype=dtype, device=device) for s in splits]
    yt = [torch.tensor(s.y_test, device=device) for s in splits]
    Xp = [torch.tensor(s.X_train[pr], dtype=f64, device=device)
          for s, pr in zip(splits, probes, strict=True)]
    theta0 = [net.init(rng(s, "init"), float(p["alpha"]), str(v["rescale"]))
              for s, p in zip(seeds, points, strict=True)]
    P = {k: torch.tensor(np.stack([t[k] for t in theta0]), dtype=dtype, device=device,
                         requires_grad=True) for k in theta0[0]}
    params0 = [nets.to_torch(t, f64, device) for t in theta0]
    plist = list(P.values())
    if v["optimizer"] == "sgd":
        opt: Any = torch.optim.SGD(plist, lr=lr, momentum=float(v["momentum"]), foreach=False)
    else:
        opt = torch.optim.Adam(plist, lr=lr, betas=(0.9, 0.999), eps=1e-8, foreach=False)
    g_batches = [rng(s, "batches") for s in seeds]
    names = ("kernel_distance", "hamming_distance", "param_distance", "rel_param_distance",
             "train_loss", "test_loss", "train_acc", "test_acc", "filter_roughness")
    out = [{k: np.full(ck.size, np.nan) for k in names} for _ in range(G)]
    K0: list[Any] = [None] * G
    bits0: list[Any] = [None] * G
    alive = np.ones(G, dtype=bool)

    def record(j: int) -> None:
        for g in np.flatnonzero(alive):
            o = out[g]
            with torch.no_grad():
                mine = {k: q[g] for k, q in P.items()}
                p64 = {k: q.detach().to(f64) for k, q in mine.items()}
                o["train_loss"][j], o["train_acc"][j] = metrics.evaluate(net.forward, mine,
                                                                         X[g], y[g])
                o["test_loss"][j], o["test_acc"][j] = metrics.evaluate(net.forward, mine,
                                                                       Xt[g], yt[g])
                if metrics.diverged(o["train_loss"], j):
                    alive[g] = False
                    continue
                bits = metrics.activation_bits(net.forward(p64, Xp[g])[1])
                o["param_distance"][j], o["rel_param_distance"][j] = metrics.param_distance(
                    p64, params0[g])
                o["filter_roughness"][j] = filters.mean_roughness(
                    p64[net.first].cpu().numpy(), dims)
            K = metrics.ntk(net.forward, p64, Xp[g], str(v["kernel"]))
            if K0[g] is None:
                K0[g], bits0[g] = K, bits
            o["kernel_distance"][j] = metrics.kernel_distance(K0[g], K)
            o["hamming_distance"][j] = metrics.hamming_distance(bits0[g], bits)

    def loss_one(p: dict[str, Any], x: Any, labels: Any) -> Any:
        return F.cross_entropy(net.forward(p, x)[0], labels)

    batched_loss = vmap(loss_one)
    rows = torch.arange(G, device=device)[:, None]
    step, j = 0, 0
    for _epoch in range(epochs):
        order = torch.as_tensor(np.stack([g.permutation(n_train) for g in g_batches]),
                                device=device)
        for b0 in range(0, n_train, bsz):
            if j < ck.size and step == ck[j]:
                record(j)
                j += 1
                if not alive.any():
                    break
            idx = order[:, b0:b0 + bsz]
            loss = batched_loss(P, X[rows, idx], y[rows, idx]).sum()
            opt.zero_grad(set_to_none=False)
            loss.backward()
            opt.step()
            step += 1
        if not alive.any():
            break
    if alive.any() and j < ck.size and step == ck[j]:
        record(j)
    if v["save_filters"]:
        for g in range(G):
            w = P[net.first][g].detach().to(f64).cpu().numpy()
            ok = bool(alive[g])
            out[g]["filters"] = w if ok else np.full_like(w, np.nan)
            out[g]["update_roughness"] = np.array(
                filters.mean_roughness(w - theta0[g][net.first], dims) if ok else np.nan)
    return out, alive, ck, spe
