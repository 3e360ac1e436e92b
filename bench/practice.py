"""Benchmark of the practice models ``rhm`` and ``cnn`` (docs/practice.md, docs/rhm.md,
docs/cnn.md).

Run: ``.venv/bin/python bench/practice.py [--short]``. Prints, in one run:

1. training throughput (samples per second) on 2 worker processes, each timed inside its
   worker (start-up excluded, data set-up and the first and last evaluations included):
   ``rhm`` at the paper's size (L = 3, m = 4, width 64, batch 128, f = 0.05), 6
   configurations per worker (one chunk of ``jobs/rhm-alpha.toml``), and ``cnn``
   (lenet_digits on digits, batch 512, float64), 2 per worker. Contenders: richlazy
   (``rhm``: the chunk's configurations stacked, docs/practice.md §1), richlazy with every
   configuration alone (the same code with groups of one), and a plain per-configuration
   PyTorch loop written the way the papers' code is (``nn.Sequential``, ``torch.optim``), with
   one thread per process and with PyTorch's default thread count;
2. one kernel-distance evaluation of ``cnn`` (trace NTK over the 144-sample probe set,
   float64): richlazy's layer-structured kernel (docs/practice.md eq. (7)) against a loop of
   per-example ``torch.autograd.grad`` calls followed by J Jᵀ (and the ``torch.func``
   Jacobian route with the same J Jᵀ, for reference);
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
                schedule="constant", n_records=2)
CNN_SIZE = dict(batch=512, first_steps=0, probe_fraction=0.1)


# -- contenders (each runs in a worker process) ------------------------------------------------

def ours(model: str, epochs: int, seeds: list[int], stacked: bool = True) -> float:
    """Wall time of richlazy's model on ``seeds`` as one chunk (``stacked`` False: every
    configuration trained alone, as a group of one)."""
    from richlazy_cli.models.base import Batch, get_model
    from richlazy_cli.models.rhm import model as rhm

    if not stacked:
        rhm.stackable = lambda v, device: False  # type: ignore[assignment]

    cls = get_model(model)
    size = RHM_SIZE if model == "rhm" else {**CNN_SIZE, "records": [epochs]}
    pts = [cls.resolve("train", {**size, "epochs": epochs, "seed": s, "alpha": 1.0})
           for s in seeds]
    t = time.perf_counter()
    cls().train(Batch.from_points(cls, pts))
    return time.perf_counter() - t


def plain(model: str, epochs: int, seeds: list[int], threads: int | None = None) -> float:
    """The papers' style: nn modules, torch.optim, one config at a time; ``threads`` intra-op
    threads (None: PyTorch's default)."""
    import numpy as np
    import torch

    from richlazy_cli.practice import data, hierarchy

    if threads is not None:
        torch.set_num_threads(threads)
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


CONTENDERS = ("ours", "ours-alone", "plain-1", "plain")


def _run(args: tuple[str, str, int, list[int]]) -> float:
    who, model, epochs, seeds = args
    if who.startswith("ours"):
        return ours(model, epochs, seeds, stacked=who == "ours")
    return plain(model, epochs, seeds, threads=1 if who == "plain-1" else None)


def throughput(ctx: Any, who: str, model: str, epochs: int, per_worker: int) -> float:
    """Samples per second on 2 fresh processes (``per_worker`` configurations each): the
    training samples of all configurations over the longer of the two workers' times (each
    timed inside the worker, set-up of the data included for every contender)."""
    n = math.floor(0.05 * 131072) if model == "rhm" else 1437
    seeds = [list(range(k * per_worker, (k + 1) * per_worker)) for k in range(2)]
    with ctx.Pool(2) as pool:
        pool.map(_run, [(who, model, 1, [99]), (who, model, 1, [98])])  # warm up
        walls = pool.map(_run, [(who, model, epochs, seeds[0]), (who, model, epochs, seeds[1])])
    return 2 * per_worker * n * epochs / max(walls)


# -- kernel and metrics costs (in this process, one thread) ----------------------------------

def kernel_costs() -> dict[str, float]:
    """Seconds of one trace NTK (cnn, 144 probe samples, float64): richlazy's layer-structured
    kernel (``layer``), the torch.func Jacobian (``func``), the autograd.grad loop's Jacobian
    (``loop``) and the Gram product J Jᵀ both of the latter need (``gram``)."""
    import torch
    from torch.func import jacrev, vmap

    from richlazy_cli.models.base import rng
    from richlazy_cli.practice import data, nets
    from richlazy_cli.practice.ntk import layer_ntk

    net = nets.lenet("lenet_digits", (1, 8, 8))
    p = nets.to_torch(net.init(rng(0, "init"), 1.0), torch.float64, "cpu")
    Xp = torch.tensor(data.load("digits", 0).X_train[:144])

    def one(q: dict[str, Any], x: Any) -> Any:
        return net.forward(q, x.unsqueeze(0))[0].squeeze(0)

    def best(f: Any, reps: int = 3) -> float:
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            f()
            times.append(time.perf_counter() - t)
        return min(times)

    vmap(jacrev(one), in_dims=(None, 0))(p, Xp)  # warm-up (tracing, once per process)
    layer_ntk(net.forward, p, Xp)
    out = {"layer": best(lambda: layer_ntk(net.forward, p, Xp)),
           "func": best(lambda: vmap(jacrev(one), in_dims=(None, 0))(p, Xp))}
    jac = vmap(jacrev(one), in_dims=(None, 0))(p, Xp)
    J = torch.cat([v.reshape(144, -1) for v in jac.values()], dim=1)
    out["gram"] = best(lambda: J @ J.T)
    leaves = {k: v.clone().requires_grad_(True) for k, v in p.items()}

    def loop() -> None:
        rows = []
        for i in range(Xp.shape[0]):
            f = net.forward(leaves, Xp[i:i + 1])[0][0]
            per_c = [torch.cat([g.reshape(-1) for g in torch.autograd.grad(
                f[c], list(leaves.values()), retain_graph=True)]) for c in range(10)]
            rows.append(torch.cat(per_c))
        torch.stack(rows)

    out["loop"] = best(loop, reps=1)
    return out


def metric_fractions() -> tuple[float, float]:
    """(rhm, cnn): metrics at the default checkpoints / training time at the paper's sizes."""
    import numpy as np
    import torch

    from richlazy_cli.models.base import rng
    from richlazy_cli.practice import data, metrics, nets

    # rhm: training time per configuration and epoch in a stacked chunk of 6 (the difference
    # of two runs, so that set-up and the two evaluations cancel), and one evaluation
    walls = [ours("rhm", e, list(range(6))) for e in (2, 6)]
    t_epoch = (walls[1] - walls[0]) / (4 * 6)
    net = nets.mlp(64, 64, 3, 8)
    p = nets.to_torch(net.init(rng(0, "init"), 1.0), torch.float32, "cpu")
    n = math.floor(0.05 * 131072)
    X = torch.tensor(np.random.default_rng(0).random((n, 64)), dtype=torch.float32)
    Xt = torch.tensor(np.random.default_rng(1).random((20000, 64)), dtype=torch.float32)
    y = torch.zeros(n, dtype=torch.long)
    yt = torch.zeros(20000, dtype=torch.long)
    t = time.perf_counter()
    metrics.evaluate(net.forward, p, X, y)
    metrics.accuracy(net.forward, p, Xt, yt)  # the model needs no test loss
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="shorter runs (noisier)")
    args = parser.parse_args()
    import torch

    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.2f}")
    e_rhm = 5 if args.short else 20
    e_cnn = 20 if args.short else 60
    ctx = mp.get_context("spawn")
    rates = {}
    for model, epochs, per_worker in (("rhm", e_rhm, 6), ("cnn", e_cnn, 2)):
        for who in CONTENDERS:
            if model == "cnn" and who == "ours-alone":
                continue  # cnn configurations always train alone
            rates[model, who] = throughput(ctx, who, model, epochs, per_worker)
    print("\n1. training throughput, 2 processes (samples/s; rhm 6, cnn 2 configurations each)")
    for model in ("rhm", "cnn"):
        o = rates[model, "ours"]
        line = f"   {model}: richlazy {o:9.0f}"
        if (model, "ours-alone") in rates:
            a = rates[model, "ours-alone"]
            line += f" | alone {a:9.0f} (stacking {o / a:4.2f}x)"
        p1, pd = rates[model, "plain-1"], rates[model, "plain"]
        line += (f" | plain loop, 1 thread {p1:9.0f}: {o / p1:4.2f}x (target 1.5x)"
                 f" | default threads {pd:9.0f}: {o / pd:4.2f}x")
        print(line)
    torch.set_num_threads(1)
    k = kernel_costs()
    base = k["loop"] + k["gram"]
    print("\n2. one kernel distance (cnn, trace NTK, 144 probe samples, 10 logits, "
          "19,754 parameters, float64)")
    print(f"   layer-structured {k['layer'] * 1e3:7.1f} ms | per-example autograd.grad loop + "
          f"J J^T {base * 1e3:7.1f} ms ({k['loop'] * 1e3:.0f} + {k['gram'] * 1e3:.0f}): "
          f"{base / k['layer']:5.1f}x (target 10x)")
    print(f"   (torch.func Jacobian + J J^T, the former route: "
          f"{(k['func'] + k['gram']) * 1e3:7.1f} ms, {base / (k['func'] + k['gram']):4.1f}x)")
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
