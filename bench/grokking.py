"""Benchmark of the ``grokking`` model (docs/grokking.md).

Run: ``.venv/bin/python bench/grokking.py [--short]``. Prints, in one run, at the paper's
size (p = 97, d = 128, batch 512, float32) and at the reduced size (p = 23, d = 64, full batch,
float32 and float64):

1. optimiser steps per second of richlazy's ``grokking`` (one intra-op thread), evaluating the
   full training and validation sets once per epoch (the default) and every 100 steps;
2. the same network trained by a plain PyTorch loop (the same ``nn.Module``, ``AdamW`` and
   ``LinearLR``, ``torch.randperm`` batches, no evaluation, one thread);
3. the cost of richlazy's evaluations and engine on top of the plain loop, in per cent;
4. the projected wall time of ``jobs/grokking-alpha.toml`` (125 runs × 30,000 steps, no early
   stop: an upper bound) and of ``jobs/grokking-reduced.toml`` on 2 cores (2 workers).

Rates are differences of two run lengths, so start-up and set-up costs cancel.
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

PAPER = dict(p=97, d_model=128, batch=512)
REDUCED = dict(p=23, d_model=64, batch=512)


def ours(size: dict[str, Any], steps: int, eval_every: int, dtype: str) -> float:
    from richlazy_cli.models.base import Batch
    from richlazy_cli.models.grokking.model import Grokking

    v = Grokking.resolve("train", {**size, "steps": steps, "eval_every": eval_every,
                                   "dtype": dtype})
    t = time.perf_counter()
    Grokking().train(Batch.from_points(Grokking, [v]))
    return time.perf_counter() - t


def plain(size: dict[str, Any], steps: int, dtype: str) -> float:
    import torch
    import torch.nn.functional as F

    from richlazy_cli.models.grokking import model as gk
    from richlazy_cli.models.grokking.model import Grokking

    torch.set_num_threads(1)
    torch.manual_seed(0)
    v = Grokking.resolve("train", {**size, "dtype": dtype})
    t = time.perf_counter()
    net = gk.build(v, 1.0, 0)
    X, y = gk.modular_data(int(v["p"]), "x+y")
    perm = torch.randperm(y.size)
    n = y.size // 2
    X, y = torch.as_tensor(X)[perm[:n]], torch.as_tensor(y)[perm[:n]]
    bsz = gk.batch_size(int(v["batch"]), int(v["p"]), "x+y")
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, betas=(0.9, 0.98), weight_decay=1.0)
    sched = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=9)
    step = 0
    while step < steps:
        order = torch.randperm(n)
        for b0 in range(0, n, bsz):
            idx = order[b0:b0 + bsz]
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(net(X[idx], 1.0), y[idx]).backward()
            opt.step()
            sched.step()
            step += 1
            if step == steps:
                break
    return time.perf_counter() - t


def per_step(f: Any, *args: Any, short: int, long: int) -> float:
    """Seconds per step from two run lengths (set-up cancels)."""
    return (f(*args[:1], long, *args[1:]) - f(*args[:1], short, *args[1:])) / (long - short)


def cell(t: float, ref: float, width: int) -> str:
    """Steps per second and the per-step cost on top of ``ref``."""
    return f"{1 / t:.1f} ({100 * (t / ref - 1):+.0f}%)".rjust(width)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--short", action="store_true", help="fewer steps (noisier)")
    a = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    k = 1 if a.short else 3
    cases = [("paper", PAPER, "float32", 10 * k, 30 * k),
             ("reduced", REDUCED, "float32", 20 * k, 80 * k),
             ("reduced", REDUCED, "float64", 20 * k, 80 * k)]
    print(f"{'size':8} {'dtype':8} {'plain':>8} {'ours, no eval':>14} {'ours, eval/epoch':>17} "
          f"{'ours, eval/100':>15}   (steps/s; in brackets: cost on top of plain)")
    rate: dict[str, float] = {}
    for name, size, dtype, s0, s1 in cases:
        from richlazy_cli.models.grokking import model as gk

        epoch = math.ceil((size["p"] ** 2 // 2) / gk.batch_size(size["batch"], size["p"], "x+y"))
        t_plain = per_step(plain, size, dtype, short=s0, long=s1)
        # eval_every = s1: no evaluation between the first and the last: engine cost alone
        t_bare = (ours(size, s1, s1, dtype) - ours(size, s0, s1, dtype)) / (s1 - s0)
        t_epoch = (ours(size, s1, 0, dtype) - ours(size, s0, 0, dtype)) / (s1 - s0)
        t_eval = (t_epoch - t_bare) * epoch  # one evaluation of both full sets
        t_100 = t_bare + t_eval / 100
        print(f"{name:8} {dtype:8} {1 / t_plain:8.1f} {cell(t_bare, t_plain, 14)} "
              f"{cell(t_epoch, t_plain, 17)} {cell(t_100, t_plain, 15)}")
        rate.setdefault(name, t_epoch)
        rate.setdefault(name + "/100", t_100)
    runs, steps = 125, 30_000
    hours = runs * steps * rate["paper"] / 2 / 3600
    print(f"jobs/grokking-alpha.toml on 2 cores (upper bound, no early stop): "
          f"{runs} runs x {steps} steps x {rate['paper'] * 1e3:.0f} ms / 2 = {hours:.0f} h")
    r_steps = 10_000
    mins = 9 * r_steps * rate["reduced/100"] / 2 / 60
    print(f"jobs/grokking-reduced.toml on 2 cores (upper bound): 9 runs x {r_steps} steps x "
          f"{rate['reduced/100'] * 1e3:.0f} ms / 2 = {mins:.0f} min")
    print("(a shared, loaded machine gives larger times than a quiet one)")


if __name__ == "__main__":
    main()
