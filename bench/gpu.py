"""Every paper-scale job's training rate beside its roofline limit, on a GPU or on the CPU.

Run: ``python bench/gpu.py [--quick] [--device cpu|cuda]`` (default: cuda where present).
For each headline job (``jobs/fig1b.toml`` / ``jobs/fig1b-gpu.toml``, ``ren-fig2``,
``grokking-alpha``, ``rhm-alpha``, ``cnn-digits-alpha``, ``filters-digits24``) it times a short
run of the job's own configuration on the device — one chunk as the device trains it: on a GPU
the stacked batch (``make paper-gpu``'s chunk), on the CPU the CPU default — and prints

* configuration-steps per second (a step: one gradient step of one configuration; for rhm and
  cnn one epoch, for ren-fig2 one Dormand–Prince step of one width), from two run lengths so
  that set-up and fixed costs cancel;
* the roofline limit of that step: FLOP and bytes moved per configuration-step (the counts
  are written out below for each family) against the device's peak rate and memory
  bandwidth, ``limit = 1 / max(FLOP / peak, bytes / bandwidth)``, and the measured fraction of
  it;
* the job's projected wall time on this device (configuration-steps of the whole job divided
  by the measured rate). ren-fig2's flows have no fixed number of steps: each width is priced
  at the dry run's step-count model (``hermite.expected_evaluations``, docs/estimates.md, "The
  solver's step count"), six evaluations to a step, and the job's time is the widths' sum on
  one worker (on a GPU the widths run one after another) or, on the CPU's two workers, the
  larger of that sum halved and the longest width. Widths that ``--quick`` leaves untimed
  are rated from the widest timed one by the dry run's work per evaluation
  (``hermite.evaluation_work``, fitted on the CPU: ``bench/hermite_cost.py``), and say so.

Fig. 1b is timed on the eager torch step and on the compiled one (``implementation =
torch-compiled``: CUDA graphs on a GPU; its compilation is left out of the timing), on a GPU
with one seed's 289 configurations and with the whole job's 4,624 (16 seeds) as one chunk.

Peaks. On the CPU both are measured here: a 2000³ GEMM on one thread (the sweeps run one
thread per worker) times the 2 workers of a 2-core machine, and a 256 MiB copy. On an NVIDIA
H200 the datasheet's figures are used (NVIDIA H200 Tensor Core GPU datasheet,
https://www.nvidia.com/en-us/data-center/h200/ : FP64 Tensor Core 67 TFLOP/s, FP32 67
TFLOP/s, HBM3e 4.8 TB/s, SXM), beside a GEMM and a copy measured here; on any other GPU the
measured ones.

The load average is printed first: on a shared machine every figure moves with it.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import sys
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

H200 = {"float64": 67e12, "float32": 67e12, "bandwidth": 4.8e12}
"""NVIDIA H200 SXM datasheet peaks: FP64 Tensor Core and FP32 FLOP/s, HBM3e bytes/s."""


# -- FLOP and bytes per configuration-step ------------------------------------------------------
def two_layer_step(B: int, d: int, h: int, n: int, itemsize: int) -> tuple[float, float]:
    """One gradient step of B two-layer configurations (docs/two-layer.md): the two products
    ``Z = W Xᵀ`` and ``ξ = (σ'(Z) ∘ r) X`` (2·h·n·d FLOP each) and ~8·h·n elementwise FLOP;
    bytes of an ideally fused step: the (h, n) activations written once and read once
    forward (Z) and backward (σ'(Z) ∘ r), 4·h·n values, plus the parameters read and
    written (4·h·d) — X is shared by the batch and stays in cache."""
    flop = B * (4.0 * h * n * d + 8.0 * h * n)
    moved = B * itemsize * (4.0 * h * n + 4.0 * h * d)
    return flop, moved


def grokking_step(v: dict[str, Any], itemsize: int) -> tuple[float, float]:
    """One AdamW step of the one-layer transformer at batch b (docs/grokking.md): forward and
    backward 6 FLOP per weight and token over 4 tokens (the model's own cost count), plus the
    full-set evaluations of one epoch spread over its steps; bytes: ~17·d activations per
    layer and token and the logits written forward and read twice backward, and the
    parameters, gradients and two moments read and written."""
    from richlazy_cli.models.grokking import model as gk

    d, p, L = int(v["d_model"]), int(v["p"]), int(v["n_layers"])
    b = gk.batch_size(int(v["batch"]), p, str(v["op"]))
    N = gk.n_pairs(p, str(v["op"]))
    per_token = L * 12 * d * d + d * (p + 2)
    n_train = math.floor(float(v["train_fraction"]) * N)
    every = int(v["eval_every"]) or math.ceil(n_train / b)
    flop = 6.0 * 4 * b * per_token + 2.0 * 4 * N * per_token / every
    params = L * (12 * d * d + 13 * d) + 2 * (p + 2) * d + 5 * d
    moved = itemsize * (3.0 * 4 * b * (17 * d * L) + 3.0 * b * (p + 2) + 8.0 * params
                        + 4 * N * (17 * d * L) / every)
    return flop, moved


def rhm_epoch(v: dict[str, Any], itemsize: int) -> tuple[float, float]:
    """One epoch of the random-hierarchy MLP (docs/rhm.md): 6 FLOP per weight and training
    input; bytes: each mini-batch's inputs and activations written and read back, and the
    weights, gradients and momentum read and written per step."""
    from richlazy_cli.practice import hierarchy

    P = hierarchy.p_max(v["n_classes"], v["m"], v["s"], v["L"])
    w, d = int(v["width"]), int(v["s"]) ** int(v["L"]) * int(v["v"])
    layers = int(v["hidden_layers"])
    macs = d * w + (layers - 1) * w * w + w * int(v["n_classes"])
    n_train = float(v["train_fraction"]) * P
    steps = math.ceil(n_train / int(v["batch"]))
    flop = 6.0 * macs * n_train
    moved = itemsize * (3.0 * n_train * (d + layers * w) + 6.0 * macs * steps)
    return flop, moved


def cnn_epoch(v: dict[str, Any], itemsize: int) -> tuple[float, float]:
    """One epoch of a cnn configuration: the model's own FLOP count per example (its
    ``cost``, 6 FLOP per multiply-add forward and backward) over the training set; bytes:
    each example's activations (the network's hidden units) written and read back, and the
    parameters, gradients and optimiser state per step."""
    from richlazy_cli.models.cnn import model as cnn
    from richlazy_cli.practice import data as sources

    one = {**v, "epochs": 1, "probe_fraction": 0.0, "first_steps": 0, "records": [1]}
    n_train = float(sources.TRAIN_SIZES.get(v["dataset"], 4000))
    flop = cnn.CNN.footprint("train", one).cost * 1e9
    shape = sources.SAMPLE_SHAPES.get(v["dataset"], (1, 28, 28))
    units = 36e3 * math.prod(shape) / 64.0 / 25
    n_params = 2e4 * math.prod(shape) / 64.0
    steps = math.ceil(n_train / int(v["batch"]))
    moved = itemsize * (3.0 * n_train * (units + math.prod(shape)) + 8.0 * n_params * steps)
    return flop, moved


def hermite_step(m: int, d: int, P: int, k: int) -> tuple[float, float]:
    """One Dormand–Prince step of the population flow (docs/hermite.md), 6 gradient
    evaluations: each the Gram ``G = U Uᵀ`` and ``(g'(G) ∘ r²) U`` (2·m²·d FLOP each), Horner
    on the (m, m) and (m, P) overlaps (~4k FLOP per entry for g and g'), and O(m·d)
    normalisation; bytes: V, U and the gradient (5·m·d values) and ~2k passes over the
    (m, m) and (m, P) overlaps, float64."""
    per_eval = 4.0 * m * m * d + 4.0 * k * (m * m + m * P) + 10.0 * m * d
    moved = 8.0 * (5.0 * m * d + 2.0 * k * (m * m + m * P))
    return 6 * per_eval + 14.0 * m * d, 6 * moved + 8.0 * 14 * m * d


# -- the device ------------------------------------------------------------------------------
def measured_peaks(torch: Any, device: str, quick: bool) -> dict[str, float]:
    """FLOP/s of a square GEMM in float64 and float32, and bytes/s of a copy, on ``device``
    (one thread on the CPU), each the best of several calls."""
    n = 1000 if quick else 2000
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    out: dict[str, float] = {}
    for name, dt in (("float64", torch.float64), ("float32", torch.float32)):
        A = torch.randn(n, n, dtype=dt, device=device)
        gemm = functools.partial(torch.matmul, A, A)
        out[name] = 2.0 * n**3 / best(gemm, sync, 5 if device == "cpu" else 20)
    x = torch.empty(1 << 25, dtype=torch.float64, device=device)  # 256 MiB
    y = torch.empty_like(x)
    out["bandwidth"] = 2.0 * x.numel() * 8 / best(lambda: y.copy_(x), sync, 5)
    return out


def best(f: Callable[[], Any], sync: Callable[[], None], reps: int) -> float:
    """The shortest of ``reps`` timed calls of ``f`` (after one untimed): on a shared machine
    the least disturbed one is closest to the peak."""
    f()
    sync()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        sync()
        times.append(time.perf_counter() - t)
    return min(times)


@dataclass
class Row:
    job: str
    unit: str
    rate: float  # configuration-steps per second
    flop: float  # per configuration-step
    moved: float
    dtype: str
    total: float | None  # configuration-steps of the whole job
    note: str = ""
    single: bool = False  # the total is one configuration's, which one worker runs alone


def per_step(run: Callable[[int], float], s1: int, s2: int) -> float:
    """Seconds per step of ``run(steps)`` from two lengths (after a warm-up)."""
    run(s1)
    t1, t2 = run(s1), run(s2)
    return max((t2 - t1) / (s2 - s1), 1e-12)


def job(name: str) -> dict[str, Any]:
    return tomllib.loads((ROOT / "jobs" / f"{name}.toml").read_text())


def grid_points(cls: Any, spec: dict[str, Any]) -> int:
    """Points of a job file's grid."""
    from richlazy_cli.engine.grid import parse_grid

    return parse_grid(cls, [(k, str(x)) for k, x in spec["grid"].items()]).size


def timed(cls: Any, action: str, points: list[dict[str, Any]], sync: Callable[[], None]
          ) -> float:
    from richlazy_cli.models.base import Batch

    values = [cls.resolve(action, p) for p in points]
    t = time.perf_counter()
    getattr(cls(), action)(Batch.from_points(cls, values))
    sync()
    return time.perf_counter() - t


# -- the jobs -----------------------------------------------------------------------------------
def bench_fig1b(device: str, gpu: bool, quick: bool, sync: Any) -> list[Row]:
    from richlazy_cli.models.two_layer.model import TwoLayer

    spec = job("fig1b-gpu" if gpu else "fig1b")
    prm = {k: v for k, v in spec["params"].items() if k not in ("records",)}
    B = 289 if gpu else 17
    taus, deltas = np.logspace(-1, 0.3, 17), np.linspace(-1, 1, 17)
    grid = [{"tau": float(t), "delta": float(dl), "seed": 100} for t in taus
            for dl in deltas][:B]
    total = grid_points(TwoLayer, spec) * float(prm["steps"])
    rows = []
    impls = [("torch", "float64"), ("torch", "float32")] if gpu else \
        [("numba", "float64"), ("torch", "float64"), ("torch", "float32")]
    impls += [("torch-compiled", "float64"), ("torch-compiled", "float32")]
    s1, s2 = ((200, 600) if quick else (2000, 6000)) if gpu else \
        ((10, 30) if quick else (50, 150))
    chunks = [(impl, dtype, grid, s1, s2) for impl, dtype in impls]
    if gpu:  # the whole job as one chunk, its 16 seeds together (docs/performance.md)
        whole = [{**g, "seed": seed} for seed in range(100, 116) for g in grid]
        chunks += [("torch-compiled", dtype, whole, *((20, 60) if quick else (200, 600)))
                   for dtype in ("float64", "float32")]
    for impl, dtype, grid, s1, s2 in chunks:
        B = len(grid)
        base = {k: x for k, x in prm.items() if k not in ("implementation", "device")}
        base.update(implementation=impl, dtype=dtype)
        if impl != "numba":
            base["device"] = device

        def run(steps: int, base: dict[str, Any] = base, grid: list[Any] = grid) -> float:
            pts = [{**base, **g, "steps": steps, "records": [0, steps]} for g in grid]
            return timed(TwoLayer, "train", pts, sync)

        if impl == "torch-compiled":
            run(2)  # the compilation (seconds) is not a step
        sec = per_step(run, s1, s2)
        flop, moved = two_layer_step(1, int(prm["d"]), int(prm["h"]), int(prm["n"]),
                                     8 if dtype == "float64" else 4)
        seeds_in = len({g["seed"] for g in grid})
        note = f"{impl}, {B} configurations per batch" + (
            f" ({seeds_in} seeds)" if seeds_in > 1 else "") + (
            ", one worker of 2" if not gpu else "")
        rows.append(Row("fig1b", "GD step", B / sec, flop, moved, dtype, total, note))
    return rows


def bench_grokking(device: str, gpu: bool, quick: bool, sync: Any) -> list[Row]:
    from richlazy_cli.models.grokking.model import Grokking

    spec = job("grokking-alpha")
    prm = {**spec["params"], "device": device}
    G = 25 if gpu else 1
    pts = [{"tau": t, "alpha": a, "seed": s} for s in range(5) for t in (0.5, 1.0, 1.5)
           for a in (0.1, 1.0, 10.0)][:G]
    s1, s2 = ((20, 60) if quick else (100, 300)) if gpu else ((10, 20) if quick else (20, 60))

    def run(steps: int) -> float:
        return timed(Grokking, "train", [{**prm, **p, "steps": steps} for p in pts], sync)

    sec = per_step(run, s1, s2)
    flop, moved = grokking_step(Grokking.resolve("train", prm), 4)
    total = grid_points(Grokking, spec) * float(prm["steps"])
    how = "stacked" if gpu else "one at a time (the CPU default), one worker of 2"
    rows = [Row("grokking-alpha", "AdamW step", G / sec, flop, moved, "float32", total,
                f"{G} runs per chunk, {how}")]
    if not gpu:  # the GPU's stacked path, timed on the CPU for comparison
        from richlazy_cli.models.grokking import model as gk

        G = 5
        pts = pts * G if len(pts) == 1 else pts
        pts = [{**p, "seed": i} for i, p in enumerate(pts[:G])]
        saved = gk.stacked_by_default
        gk.stacked_by_default = lambda device: True
        try:
            sec = per_step(run, s1, s2)
        finally:
            gk.stacked_by_default = saved
        rows.append(Row("grokking-alpha", "AdamW step", G / sec, flop, moved, "float32",
                        total, f"{G} runs stacked (the GPU path; not the CPU default)"))
    return rows


def bench_rhm(device: str, gpu: bool, quick: bool, sync: Any) -> list[Row]:
    from richlazy_cli.models.rhm.model import RHM

    spec = job("rhm-alpha")
    prm = {**spec["params"], "device": device, "n_records": 2}
    fraction = float(np.logspace(-2.3, -0.4, 7)[3])
    G = 36 if gpu else 6
    pts = [{"alpha": a, "seed": s, "train_fraction": fraction}
           for a in (0.03, 0.1, 0.3, 1, 3, 10) for s in range(6)][:G]
    s1, s2 = (1, 3) if quick else (2, 6)

    def run(epochs: int) -> float:
        return timed(RHM, "train", [{**prm, **p, "epochs": epochs, "schedule": "constant"}
                                    for p in pts], sync)

    sec = per_step(run, s1, s2)
    v = RHM.resolve("train", {**prm, "train_fraction": fraction})
    flop, moved = rhm_epoch(v, 4)
    fractions = np.logspace(-2.3, -0.4, 7)
    flop_all = sum(rhm_epoch(RHM.resolve("train", {**prm, "train_fraction": float(f)}), 4)[0]
                   for f in fractions)
    epochs = math.ceil(0.8 * int(spec["params"]["epochs"]))  # cosine_clamped skips the rest
    total = 36 * epochs * flop_all / flop  # in epochs of this training fraction
    return [Row("rhm-alpha", "epoch", G / sec, flop, moved, "float32", total,
                f"{G} configurations, f = {fraction:.3f}; total in epochs of this f")]


def bench_cnn(name: str, device: str, gpu: bool, quick: bool, sync: Any) -> list[Row]:
    from richlazy_cli.models.cnn.model import CNN

    spec = job(name)
    prm = {**spec["params"], "device": device, "first_steps": 0, "records": [1],
           "probe_fraction": 0.01}
    s1, s2 = (1, 2) if quick else (2, 5)
    G = (8 if name == "cnn-digits-alpha" else 5) if gpu else 1  # make paper-gpu's chunks

    def run(epochs: int) -> float:
        return timed(CNN, "train", [{**prm, "alpha": a, "seed": 0, "epochs": epochs,
                                     "records": [epochs]}
                                    for a in np.geomspace(0.1, 10, G)], sync)

    sec = per_step(run, s1, s2)
    flop, moved = cnn_epoch(CNN.resolve("train", prm), 8)
    n_points = grid_points(CNN, spec)
    total = n_points * float(spec["params"]["epochs"])
    how = f"{G} stacked" if gpu else "one configuration at a time"
    return [Row(name, "epoch", G / sec, flop, moved, str(prm["dtype"]), total,
                f"{how}; training only (checkpoint metrics excluded)")]


def bench_hermite(device: str, gpu: bool, quick: bool, sync: Any) -> list[Row]:
    from richlazy_cli.models.base import Batch
    from richlazy_cli.models.hermite.model import Hermite, evaluation_work, expected_evaluations

    spec = job("ren-fig2")
    prm = {**spec["params"], "implementation": "torch", "device": device,
           "early_stop": False, "n_records": 2}
    widths = [int(w) for w in str(spec["grid"]["m"]).split(",")]
    timed_widths = widths[:1] if quick and not gpu else widths[:3] if quick else widths
    rows: dict[int, Row] = {}
    for m in widths:
        steps = expected_evaluations(Hermite.resolve("solve", {**spec["params"], "m": m})) / 6
        flop, moved = hermite_step(m, int(prm["d"]), int(prm["P"]), int(prm["k"]))
        rows[m] = Row("ren-fig2", "DP step", math.nan, flop, moved, "float64", steps,
                      f"m = {m}, not timed{' (--quick)' if m not in timed_widths else ''}: "
                      "rated from the widest timed width by the dry run's work per "
                      "evaluation", single=True)
        if m not in timed_widths:
            continue

        def run(t_max: float, m: int = m) -> tuple[float, int]:
            v = Hermite.resolve("solve", {**prm, "m": m, "t_max": t_max})
            t = time.perf_counter()
            res = Hermite().solve(Batch.from_points(Hermite, [v]))
            sync()
            return time.perf_counter() - t, int(res.nfev.values[0])

        run(1e-3)
        (t1, e1), (t2, e2) = run(1e-3), run(100.0 if quick else 3000.0)
        if e2 <= e1:
            continue
        sec = (t2 - t1) / ((e2 - e1) / 6)
        rows[m].rate = 1 / sec
        rows[m].note = (f"m = {m}, {(e2 - e1) // 6} steps timed; {steps:,.0f} steps priced "
                        "(the dry run's step-count model, early stop)")
    timed = [m for m, r in rows.items() if math.isfinite(r.rate)]
    for m, r in rows.items():
        if timed and not math.isfinite(r.rate):
            r.rate = rows[max(timed)].rate * (evaluation_work(max(timed), int(prm["d"]))
                                              / evaluation_work(m, int(prm["d"])))
    return [r for r in rows.values() if math.isfinite(r.rate)]


def whole_job_seconds(rows: list[Row], workers: int) -> float:
    """The wall time of a job whose rows are single configurations: their sum on one worker;
    on several, at least the longest and at least the sum shared out."""
    seconds = [r.total / r.rate for r in rows if r.total]
    return max(max(seconds), sum(seconds) / workers)


# -- the table ----------------------------------------------------------------------------------
def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="short runs (a couple of minutes "
                        "on 2 cores)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default=None)
    parser.add_argument("--only", default=None, help="comma-separated jobs to run")
    args = parser.parse_args()
    import torch

    gpu = args.device == "cuda" or (args.device is None and torch.cuda.is_available())
    device = "cuda" if gpu else "cpu"
    if gpu and not torch.cuda.is_available():
        print("bench/gpu.py: --device cuda was asked for, but no CUDA device is present",
              file=sys.stderr)
        raise SystemExit(2)
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"torch {torch.__version__}")
    torch.set_num_threads(1)
    meas = measured_peaks(torch, device, args.quick)
    if gpu:
        name = torch.cuda.get_device_name(0)
        peak = dict(H200) if "H200" in name else dict(meas)
        src = "datasheet" if "H200" in name else "measured"
        print(f"device: {name}; peaks ({src}) float64 {peak['float64'] / 1e12:.1f} TFLOP/s, "
              f"float32 {peak['float32'] / 1e12:.1f} TFLOP/s, {peak['bandwidth'] / 1e12:.2f} "
              f"TB/s; measured here: GEMM float64 {meas['float64'] / 1e12:.1f}, float32 "
              f"{meas['float32'] / 1e12:.1f} TFLOP/s, copy {meas['bandwidth'] / 1e12:.2f} TB/s")
    else:
        peak = {k: 2 * x for k, x in meas.items()}
        peak["bandwidth"] = meas["bandwidth"]  # shared by the cores
        print(f"device: CPU, 2 workers of one thread; peaks (measured GEMM on one thread x 2): "
              f"float64 {peak['float64'] / 1e9:.1f} GFLOP/s, float32 "
              f"{peak['float32'] / 1e9:.1f} GFLOP/s; copy {peak['bandwidth'] / 1e9:.1f} GB/s")
    workers = 1 if gpu else 2
    benches: dict[str, Callable[[], list[Row]]] = {
        "fig1b": lambda: bench_fig1b(device, gpu, args.quick, sync),
        "ren-fig2": lambda: bench_hermite(device, gpu, args.quick, sync),
        "grokking-alpha": lambda: bench_grokking(device, gpu, args.quick, sync),
        "rhm-alpha": lambda: bench_rhm(device, gpu, args.quick, sync),
        "cnn-digits-alpha": lambda: bench_cnn("cnn-digits-alpha", device, gpu, args.quick, sync),
        "filters-digits24": lambda: bench_cnn("filters-digits24", device, gpu, args.quick, sync),
    }
    chosen = args.only.split(",") if args.only else list(benches)
    print(f"{'job':<18} {'dtype':<8} {'unit':<10} {'config-steps/s':>14} {'GFLOP/step':>10} "
          f"{'MB/step':>9} {'limit/s':>12} {'of limit':>8} {'job time':>9}  note")
    def limit(r: Row) -> float:
        """The roofline rate of one worker: configuration-steps per second."""
        one = 1.0 / max(r.flop / peak[r.dtype], r.moved / peak["bandwidth"])
        return one / workers  # the CPU's peaks are both workers'

    for key in chosen:
        start = time.perf_counter()
        rows = benches[key]()
        for r in rows:
            rate = r.rate * workers  # one worker's, times the 2 workers on 2 cores
            # a single configuration runs on one worker: its time is its own rate's
            when = duration(r.total / (r.rate if r.single else rate)) if r.total else "-"
            print(f"{r.job:<18} {r.dtype:<8} {r.unit:<10} {rate:>14,.1f} {r.flop / 1e9:>10.4f} "
                  f"{r.moved / 1e6:>9.2f} {limit(r) * workers:>12,.1f} "
                  f"{r.rate / limit(r):>7.1%} {when:>9}  {r.note}")
        singles = [r for r in rows if r.single]
        if singles:
            whole = duration(whole_job_seconds(singles, workers))
            print(f"{key:<18} {'':<8} {'whole job':<10} {'':>14} {'':>10} {'':>9} {'':>12} "
                  f"{'':>8} {whole:>9}  {len(singles)} configurations, one worker each, "
                  f"{workers} worker(s)")
        print(f"{'':<18} ({key}: {time.perf_counter() - start:.0f} s to measure)", flush=True)
    if not gpu:
        print("rates on the CPU are one worker's times 2 (2 workers on 2 cores); GPU figures: "
              "not measured here (run on a GPU: python bench/gpu.py)")


if __name__ == "__main__":
    main()
