"""Benchmark of the practice models ``rhm`` and ``cnn`` (docs/practice.md, docs/rhm.md,
docs/cnn.md).

Run: ``.venv/bin/python bench/practice.py [--short]``. Prints, in one run:

1. training throughput (samples per second) of ``rhm`` at the paper's size (L = 3, m = 4,
   width 64, batch 128, f = 0.05) and of ``cnn`` (lenet_digits on digits, batch 512), 2 worker
   processes with 2 configurations each, against a plain per-configuration PyTorch loop
   written the way the papers' code is (``nn.Sequential``, ``torch.optim``, one configuration
   at a time per process, PyTorch's default thread count), also on 2 processes, each timed
   inside its worker (start-up excluded, data set-up included for both). richlazy
   trains each configuration on its own (one intra-op thread, docs/practice.md §1); a probe
   also prints whether ``torch.func.vmap`` over stacked parameters gives gradients bitwise
   equal to single calls at the rhm size, and how much faster it is;
2. one kernel-distance evaluation of ``cnn`` (trace NTK over the 144-sample probe set, float64)
   with ``torch.func`` against a loop of per-example ``torch.autograd.grad`` calls;
3. the metrics at the default checkpoints as a fraction of training time (``rhm``: 26
   evaluations of the training and test sets over 250 epochs at f = 0.05; ``cnn``: 18
   checkpoints of NTK, Hamming and parameter distances, losses and accuracies over 500 epochs).
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import time
from typing import Any

RHM_SIZE = dict(L=3, width=64, batch=128, test_size=20000, train_fraction=0.05,
                schedule="constant", n_checkpoints=2)
CNN_SIZE = dict(batch=512, first_steps=0, probe_fraction=0.1)


# -- contenders (each runs in a worker process) ------------------------------------------------

def ours(model: str, epochs: int, seeds: list[int]) -> float:
    """Wall time of richlazy's model on ``seeds`` (one configuration after another)."""
    from richlazy_cli.models.base import Batch, get_model

    cls = get_model(model)
    size = RHM_SIZE if model == "rhm" else {**CNN_SIZE, "checkpoints": [epochs]}
    pts = [cls.resolve("train", {**size, "epochs": epochs, "seed": s, "alpha": 1.0})
           for s in seeds]
    t = time.perf_counter()
    cls().train(Batch.from_points(cls, pts))
    return time.perf_counter() - t


def plain(model: str, epochs: int, seeds: list[int]) -> float:
    """The papers' style: nn modules, torch.optim, default threads, one config at a time."""
    import numpy as np
    import torch

    from richlazy_cli.practice import data, hierarchy

    t = time.perf_counter()
    for seed in seeds:
        torch.manual_seed(seed)
        if model == "rhm":
            R = hierarchy.rules(np.random.default_rng(seed), 3, 8, 4, 2, 8)
            strings, labels = hierarchy.enumerate_inputs(R)
            perm = np.random.default_rng(seed + 1).permutation(labels.size)
            n = math.floor(0.05 * labels.size)
            X = torch.tensor(hierarchy.one_hot(strings[perm[:n]], 8), dtype=torch.float32)
            y = torch.tensor(labels[perm[:n]])
            net = torch.nn.Sequential(
                torch.nn.Linear(64, 64, bias=False), torch.nn.ReLU(),
                torch.nn.Linear(64, 64, bias=False), torch.nn.ReLU(),
                torch.nn.Linear(64, 64, bias=False), torch.nn.ReLU(),
                torch.nn.Linear(64, 8, bias=False))
            opt = torch.optim.SGD(net.parameters(), lr=6.4, momentum=0.9)
            bsz = 128
        else:
            split = data.load("digits", seed)
            X = torch.tensor(split.X_train)
            y = torch.tensor(split.y_train)
            net = torch.nn.Sequential(
                torch.nn.Conv2d(1, 6, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                torch.nn.Conv2d(6, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                torch.nn.Flatten(), torch.nn.Linear(64, 120), torch.nn.ReLU(),
                torch.nn.Linear(120, 84), torch.nn.ReLU(), torch.nn.Linear(84, 10)).double()
            opt = torch.optim.Adam(net.parameters(), lr=1e-4)
            bsz = 512
        for _ in range(epochs):
            order = torch.randperm(X.shape[0])
            for b0 in range(0, X.shape[0], bsz):
                idx = order[b0:b0 + bsz]
                opt.zero_grad()
                torch.nn.functional.cross_entropy(net(X[idx]), y[idx]).backward()
                opt.step()
    return time.perf_counter() - t


def _run(args: tuple[str, str, int, list[int]]) -> float:
    who, model, epochs, seeds = args
    return (ours if who == "ours" else plain)(model, epochs, seeds)


def throughput(pool: Any, who: str, model: str, epochs: int) -> float:
    """Samples per second on 2 processes (2 configurations each): the training samples of
    the 4 configurations over the longer of the two workers' times (each timed inside the
    worker, set-up of the data included for both contenders)."""
    n = math.floor(0.05 * 131072) if model == "rhm" else 1437
    walls = pool.map(_run, [(who, model, epochs, [0, 1]), (who, model, epochs, [2, 3])])
    return 4 * n * epochs / max(walls)


# -- kernel and metrics costs (in this process, one thread) ----------------------------------

def kernel_costs() -> tuple[float, float, float]:
    """(torch.func Jacobian, autograd.grad loop Jacobian, the Gram product J Jᵀ both share)."""
    import torch
    from torch.func import jacrev, vmap

    from richlazy_cli.models.base import rng
    from richlazy_cli.practice import data, nets

    net = nets.lenet("lenet_digits", (1, 8, 8))
    p = nets.to_torch(net.init(rng(0, "init"), 1.0), torch.float64, "cpu")
    Xp = torch.tensor(data.load("digits", 0).X_train[:144])

    def one(q: dict[str, Any], x: Any) -> Any:
        return net.forward(q, x.unsqueeze(0))[0].squeeze(0)

    vmap(jacrev(one), in_dims=(None, 0))(p, Xp)  # warm-up (tracing, once per process)
    t = time.perf_counter()
    jac = vmap(jacrev(one), in_dims=(None, 0))(p, Xp)
    t_func = time.perf_counter() - t
    J = torch.cat([v.reshape(144, -1) for v in jac.values()], dim=1)
    t = time.perf_counter()
    _ = J @ J.T
    t_gram = time.perf_counter() - t
    leaves = {k: v.clone().requires_grad_(True) for k, v in p.items()}
    t = time.perf_counter()
    rows = []
    for i in range(Xp.shape[0]):
        out = net.forward(leaves, Xp[i:i + 1])[0][0]
        per_c = [torch.cat([g.reshape(-1) for g in torch.autograd.grad(
            out[c], list(leaves.values()), retain_graph=True)]) for c in range(10)]
        rows.append(torch.cat(per_c))
    torch.stack(rows)
    return t_func, time.perf_counter() - t, t_gram


def metric_fractions() -> tuple[float, float]:
    """(rhm, cnn): metrics at the default checkpoints / training time at the paper's sizes."""
    import numpy as np
    import torch

    from richlazy_cli.models.base import rng
    from richlazy_cli.practice import data, metrics, nets

    # rhm: per-step time and per-evaluation time
    net = nets.mlp(64, 64, 3, 8)
    p = nets.to_torch(net.init(rng(0, "init"), 1.0), torch.float32, "cpu", requires_grad=True)
    n = math.floor(0.05 * 131072)
    X = torch.tensor(np.random.default_rng(0).random((n, 64)), dtype=torch.float32)
    Xt = torch.tensor(np.random.default_rng(1).random((20000, 64)), dtype=torch.float32)
    y = torch.zeros(n, dtype=torch.long)
    yt = torch.zeros(20000, dtype=torch.long)
    t = time.perf_counter()
    for b0 in range(0, n, 128):
        loss = torch.nn.functional.cross_entropy(net.forward(p, X[b0:b0 + 128])[0],
                                                 y[b0:b0 + 128])
        torch.autograd.grad(loss, list(p.values()))
    t_epoch = time.perf_counter() - t
    t = time.perf_counter()
    metrics.evaluate(net.forward, p, X, y)
    metrics.evaluate(net.forward, p, Xt, yt)
    t_eval = time.perf_counter() - t
    rhm = 26 * t_eval / (200 * t_epoch)  # 200 epochs train (the clamped 50 are skipped)
    # cnn
    net = nets.lenet("lenet_digits", (1, 8, 8))
    split = data.load("digits", 0)
    p = nets.to_torch(net.init(rng(0, "init"), 1.0), torch.float64, "cpu", requires_grad=True)
    opt = torch.optim.Adam(list(p.values()), lr=1e-4, foreach=False)
    X, y = torch.tensor(split.X_train), torch.tensor(split.y_train)
    Xt, yt = torch.tensor(split.X_test), torch.tensor(split.y_test)
    t = time.perf_counter()
    for _ in range(10):
        for b0 in range(0, 1437, 512):
            loss = torch.nn.functional.cross_entropy(net.forward(p, X[b0:b0 + 512])[0],
                                                     y[b0:b0 + 512])
            opt.zero_grad()
            loss.backward()
            opt.step()
    t_step = (time.perf_counter() - t) / 30
    p64 = {k: v.detach() for k, v in p.items()}
    Xp = X[:144]
    K0 = metrics.ntk(net.forward, p64, Xp)
    bits0 = metrics.activation_bits(net.forward(p64, Xp)[1])
    t = time.perf_counter()
    with torch.no_grad():
        metrics.evaluate(net.forward, p64, X, y)
        metrics.evaluate(net.forward, p64, Xt, yt)
        metrics.hamming_distance(bits0, metrics.activation_bits(net.forward(p64, Xp)[1]))
        metrics.param_distance(p64, p64)
    metrics.kernel_distance(K0, metrics.ntk(net.forward, p64, Xp))
    t_ck = time.perf_counter() - t
    return rhm, 18 * t_ck / (1500 * t_step)


def vmap_probe(B: int = 6, reps: int = 100) -> tuple[bool, float]:
    """One rhm gradient (batch 128, width 64, float32) of B configurations: ``vmap`` over
    stacked parameters against B single calls. (bitwise equal?, single time / batched time)"""
    import numpy as np
    import torch
    from torch.func import grad, vmap

    from richlazy_cli.practice import nets

    net = nets.mlp(64, 64, 3, 8)
    ps = [nets.to_torch(net.init(np.random.default_rng(i), 1.0), torch.float32, "cpu")
          for i in range(B)]
    X = torch.tensor(np.random.default_rng(9).random((B, 128, 64)), dtype=torch.float32)
    y = torch.tensor(np.random.default_rng(8).integers(0, 8, (B, 128)))

    def loss(p: dict[str, Any], x: Any, yy: Any) -> Any:
        return torch.nn.functional.cross_entropy(net.forward(p, x)[0], yy)

    g = grad(loss)
    stacked = {k: torch.stack([p[k] for p in ps]) for k in ps[0]}
    gb = vmap(g)(stacked, X, y)
    same = all(torch.equal(g(ps[i], X[i], y[i])[k], gb[k][i]) for i in range(B) for k in gb)
    t = time.perf_counter()
    for _ in range(reps):
        vmap(g)(stacked, X, y)
    t_b = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(reps):
        for i in range(B):
            g(ps[i], X[i], y[i])
    return same, (time.perf_counter() - t) / t_b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="shorter runs (noisier)")
    args = parser.parse_args()
    import torch

    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.2f}")
    e_rhm = 5 if args.short else 20
    e_cnn = 30 if args.short else 100
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        pool.map(_run, [("ours", "rhm", 1, [9]), ("plain", "rhm", 1, [9])])  # warm both
        rates = {}
        for model, epochs in (("rhm", e_rhm), ("cnn", e_cnn)):
            for who in ("ours", "plain"):
                rates[model, who] = throughput(pool, who, model, epochs)
    print("\n1. training throughput, 2 processes x 2 configurations (samples/s)")
    for model in ("rhm", "cnn"):
        o, p = rates[model, "ours"], rates[model, "plain"]
        print(f"   {model}: richlazy {o:10.0f}   plain PyTorch loop {p:10.0f}   "
              f"ratio {o / p:5.2f}x (target 1.5x)")
    torch.set_num_threads(1)
    same, ratio = vmap_probe()
    print(f"   (not used by the model) vmap over 6 stacked rhm configurations, one gradient: "
          f"bitwise equal to single calls: {same}; {ratio:4.2f}x faster")
    t_func, t_loop, t_gram = kernel_costs()
    print("\n2. one kernel distance (cnn, 144 probe samples, 10 logits, 19,754 parameters)")
    print(f"   Jacobians: torch.func {t_func * 1e3:8.1f} ms   autograd.grad loop "
          f"{t_loop * 1e3:8.1f} ms   ratio {t_loop / t_func:5.1f}x")
    print(f"   with the shared Gram product J J^T ({t_gram * 1e3:.1f} ms): ratio "
          f"{(t_loop + t_gram) / (t_func + t_gram):5.1f}x (target 10x)")
    f_rhm, f_cnn = metric_fractions()
    print("\n3. metrics at the default checkpoints / training time (target <= 15%)")
    print(f"   rhm (26 evaluations, f = 0.05): {100 * f_rhm:5.1f}%")
    print(f"   cnn (18 checkpoints, 500 epochs): {100 * f_cnn:5.1f}%")
    # projections of the full jobs from the measured rates (2 processes)
    frac = [10 ** (-2.3 + 1.9 * k / 6) for k in range(7)]
    samples = sum(math.floor(f * 131072) for f in frac) * 200 * 36
    t_rhm = samples / rates["rhm", "ours"] * (1 + f_rhm)
    t_cnn = 40 * 1437 * 500 / rates["cnn", "ours"] * (1 + f_cnn)
    print("\n4. projected wall time on 2 processes, from these rates (training + metrics; "
          "rhm trains 200 of its 250 epochs, the clamped ones are skipped)")
    print(f"   jobs/rhm-alpha.toml (252 points): {t_rhm / 60:6.1f} min")
    print(f"   jobs/cnn-digits-alpha.toml (40 points): {t_cnn / 60:6.1f} min")


if __name__ == "__main__":
    main()
