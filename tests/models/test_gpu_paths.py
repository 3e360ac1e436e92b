"""The GPU-oriented paths, run on the CPU: the fused two-layer step, the chunks sized by a
GPU's free memory (with a faked device), the stacked practice training (grokking, cnn, rhm)
and the paper-scale GPU target's refusal without a GPU.

A GPU runs these same code paths; here they are checked against independent computations
(one NumPy gradient step) and against one-at-a-time training, within the tolerances stated
in each test."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

torch = pytest.importorskip("torch")

from richlazy_cli.engine import plan as plan_module  # noqa: E402
from richlazy_cli.engine.job import Job, RunOptions  # noqa: E402
from richlazy_cli.engine.run import execute  # noqa: E402
from richlazy_cli.models.base import Batch  # noqa: E402
from richlazy_cli.models.cnn import model as cnn  # noqa: E402
from richlazy_cli.models.grokking import model as gk  # noqa: E402
from richlazy_cli.models.rhm import model as rhm  # noqa: E402
from richlazy_cli.models.two_layer import _torch as tb  # noqa: E402
from richlazy_cli.models.two_layer import model as tl  # noqa: E402
from richlazy_cli.numerics import compute  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("one_torch_thread")


# -- the fused two-layer step ----------------------------------------------------------------
def numpy_step(W: np.ndarray, a: np.ndarray, X: np.ndarray, y: np.ndarray, leak: np.ndarray,
               coef: np.ndarray, active: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One gradient step of docs/two-layer.md, configuration by configuration in NumPy."""
    W1, a1 = W.copy(), a.copy()
    for b in range(W.shape[0]):
        if not active[b]:
            continue
        Z = W[b] @ X.T
        D = np.where(Z >= 0, 1.0, leak[b])
        r = a[b] @ (Z * D) - y
        xi = (D * r) @ X
        a1[b] = a[b] - coef[b] * np.sum(W[b] * xi, axis=1)
        W1[b] = W[b] - coef[b] * a[b][:, None] * xi
    return W1, a1


def test_fused_step_equals_a_numpy_gradient_step_and_freezes_the_inactive() -> None:
    g = np.random.default_rng(3)
    B, h, d, n = 5, 7, 4, 33
    W, a = g.standard_normal((B, h, d)), g.standard_normal((B, h))
    X, y = g.standard_normal((n, d)), g.standard_normal(n)
    leak = np.array([0.0, 0.1, 0.0, 0.5, 0.0])
    coef = np.array([1e-2, 2e-2, 5e-3, 1e-2, 3e-2])
    active = np.array([True, True, False, True, True])
    with torch.no_grad():
        t = lambda x: torch.as_tensor(np.ascontiguousarray(x))  # noqa: E731
        step = tb.FusedStep(torch, t(W), t(a), t(X), t(X.T), t(y), t(leak)[:, None, None],
                            t(coef))
        r = step.forward().numpy().copy()
        step.backward_update(t(active))
    r_ref = np.einsum("bh,bhn->bn", a, np.maximum(W @ X.T, leak[:, None, None] * (W @ X.T))) - y
    np.testing.assert_allclose(r, r_ref, rtol=1e-12, atol=1e-12)
    W1, a1 = numpy_step(W, a, X, y, leak, coef, active)
    np.testing.assert_allclose(step.W.numpy(), W1, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(step.a.numpy(), a1, rtol=1e-12, atol=1e-13)
    assert np.array_equal(step.W.numpy()[2], W[2]) and np.array_equal(step.a.numpy()[2], a[2])
    assert not np.array_equal(step.W.numpy()[0], W[0])


# -- the compiled two-layer step -------------------------------------------------------------
COMPILED_POINTS = [dict(tau=0.3, delta=-0.5), dict(tau=1.0, delta=0.5),
                   dict(tau=0.05, delta=0.0, lr=2.0), dict(tau=1.5, delta=0.0, leak=0.1)]
COMPILED_BASE = dict(d=6, h=4, k=2, n=16, n_test=20, steps=150, n_records=6)


def two_layer_batch(implementation: str, dtype: str = "float64") -> xr.Dataset:
    values = [tl.TwoLayer.resolve("train", {**COMPILED_BASE, **p, "dtype": dtype,
                                            "implementation": implementation})
              for p in COMPILED_POINTS]
    return tl.TwoLayer().train(Batch.from_points(tl.TwoLayer, values))


def assert_two_layer_close(got: xr.Dataset, want: xr.Dataset, rtol: float) -> None:
    assert got.status.values.tolist() == want.status.values.tolist()
    for name, item in want.data_vars.items():
        a, b = got[name].values, item.values
        if item.dtype.kind != "f":
            assert np.array_equal(a, b), name
            continue
        assert np.array_equal(np.isnan(a), np.isnan(b)), name
        scale = float(np.nanmax(np.abs(b))) if np.isfinite(b).any() else 1.0
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * scale, err_msg=name)


@pytest.mark.system  # torch.compile starts the C++ compiler
@pytest.mark.parametrize("whole, mode", [(False, None), (True, None),
                                         (True, "reduce-overhead")],
                         ids=["cpu-parts", "gpu-whole-step", "gpu-whole-step-graphs"])
def test_the_compiled_step_equals_the_eager_one(whole: bool, mode: str | None,
                                                monkeypatch: Any) -> None:
    """torch.compile of the step, as the CPU compiles it (the elementwise passes) and as a
    GPU does (the whole step, products included; in "reduce-overhead" mode, whose CUDA
    graphs torch skips for CPU tensors, the GPU's step marks and copies run too): within the
    torch implementation's 1e-10 of the eager step over 150 steps (measured: 3e-16), a
    diverging configuration (lr/τ² = 800) frozen at the same step, no fallback."""
    if whole:
        init = tb.CompiledStep.__init__
        monkeypatch.setattr(tb.CompiledStep, "__init__", lambda self, *a, **k: init(
            self, *a, whole=True, mode=mode, **k))
    monkeypatch.setattr(tb, "_warned", [])
    eager = two_layer_batch("torch")
    assert eager.status.values.tolist() == [0, 0, 1, 0]
    compiled = two_layer_batch("torch-compiled")
    assert not tb._warned, tb._warned
    assert (whole, mode) in tb._compiled
    assert_two_layer_close(compiled, eager, 1e-10)


def test_a_failing_compilation_falls_back_to_the_eager_step_in_one_line(
        monkeypatch: Any, capsys: Any) -> None:
    """The compiled functions raise (as a missing compiler would): one line on stderr, once,
    and the eager step's very bits."""
    def broken(*args: Any) -> Any:
        raise RuntimeError("no C compiler found\nsecond line")

    monkeypatch.setattr(tb, "compiled_functions", lambda torch, whole, mode: (broken, broken))
    monkeypatch.setattr(tb, "_warned", [])
    got = two_layer_batch("torch-compiled")
    lines = capsys.readouterr().err.splitlines()
    assert lines == [tb.COMPILE_FAILED.format("RuntimeError: no C compiler found")]
    want = two_layer_batch("torch")
    for name, item in want.data_vars.items():
        assert item.values.tobytes() == got[name].values.tobytes(), name


# -- several seeds in one torch batch -----------------------------------------------------------
SEEDED = [dict(tau=0.3, delta=-0.5, seed=2), dict(tau=1.0, delta=0.5, seed=0),
          dict(tau=0.05, delta=0.0, lr=2.0, seed=0), dict(tau=1.5, delta=0.0, leak=0.1, seed=1),
          dict(tau=0.7, delta=0.2, seed=2), dict(tau=1.2, delta=-0.3, seed=1)]
"""Six configurations of three seeds, interleaved; the third diverges (lr/τ² = 800)."""


def assert_row_close(got: xr.Dataset, i: int, want: xr.Dataset, rtol: float,
                     atol_of: dict[str, float] | None = None) -> None:
    """Every variable of row ``i`` of ``got`` against ``want``'s one row: integers and the
    NaN pattern exactly, floats within ``rtol`` relative and ``rtol`` times the variable's
    scale absolute (or the absolute tolerance ``atol_of`` names for it)."""
    for name, item in want.data_vars.items():
        a, b = got[name].values[i], item.values[0]
        if item.dtype.kind != "f":
            assert np.array_equal(a, b), name
            continue
        assert np.array_equal(np.isnan(a), np.isnan(b)), name
        scale = float(np.nanmax(np.abs(b))) if np.isfinite(b).any() else 1.0
        atol = (atol_of or {}).get(name, rtol * scale)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=name)


def seeded_batch(implementation: str, points: list[dict[str, Any]], dtype: str = "float64",
                 **common: Any) -> xr.Dataset:
    values = [tl.TwoLayer.resolve("train", {**COMPILED_BASE, **p, "dtype": dtype,
                                            "implementation": implementation, **common})
              for p in points]
    return tl.TwoLayer().train(Batch.from_points(tl.TwoLayer, values))


def assert_same_configuration(got: xr.Dataset, i: int, want: xr.Dataset, k: int) -> None:
    for name, item in want.data_vars.items():
        assert got[name].values[i].tobytes() == item.values[k].tobytes(), name


@pytest.mark.system  # torch.compile starts the C++ compiler
@pytest.mark.parametrize("implementation, dtype", [("torch", "float64"), ("torch", "float32"),
                                                   ("torch-compiled", "float64")])
def test_a_batch_of_several_seeds_equals_each_seeds_own_batch_bit_for_bit(
        implementation: str, dtype: str) -> None:
    """On the CPU the torch rows are bitwise across batching, seeds included: each
    configuration of a batch of three seeds (interleaved) has the bits it has in its own
    seed's batch and alone (every variable: metrics, geometry, the seed's teacher); the
    diverging configuration is frozen (status 1) and the others, of its seed and the other
    seeds, have the bits they have in the same batch without it."""
    together = seeded_batch(implementation, SEEDED, dtype, save_params=True)
    assert together.status.values.tolist() == [0, 0, 1, 0, 0, 0]
    for seed in (0, 1, 2):
        mine = [i for i, p in enumerate(SEEDED) if p["seed"] == seed]
        own = seeded_batch(implementation, [SEEDED[i] for i in mine], dtype, save_params=True)
        for k, i in enumerate(mine):
            assert_same_configuration(together, i, own, k)
    assert_same_configuration(together, 0, seeded_batch(implementation, SEEDED[:1], dtype,
                                                        save_params=True), 0)
    calm = [p for i, p in enumerate(SEEDED) if i != 2]
    without = seeded_batch(implementation, calm, dtype, save_params=True)
    for k, i in enumerate(i for i in range(len(SEEDED)) if i != 2):
        assert_same_configuration(together, i, without, k)
        assert np.isfinite(together.train_loss.values[i]).all()
    assert np.isnan(together.train_loss.values[2][-1])
    tw = together.teacher_W.values
    assert np.array_equal(tw[1], tw[2]) and not np.array_equal(tw[0], tw[1])


def test_several_seeds_match_the_numpy_reference_within_the_torch_tolerance() -> None:
    """The batch of three seeds against the reference (numba), configuration by
    configuration: within the torch rows' 1e-10 of each variable's scale."""
    together = seeded_batch("torch", SEEDED)
    for i, p in enumerate(SEEDED):
        assert_row_close(together, i, seeded_batch("numba", [p]), 1e-10)


@pytest.mark.system  # torch.compile starts the C++ compiler
@pytest.mark.parametrize("implementation, whole, equal", [
    ("torch", False, True), ("torch-compiled", True, True), ("torch-compiled", True, False)],
    ids=["eager-grouped", "compiled-whole-grouped", "compiled-whole-blocks"])
def test_the_gpus_products_over_several_seeds_agree_with_each_seeds_batch(
        implementation: str, whole: bool, equal: bool, monkeypatch: Any) -> None:
    """The products a GPU takes over several seeds, run on the CPU: blocks of equal size as
    one grouped product (S, b·h, d) @ (S, d, n) (eager, and inside the compiled whole step),
    and unequal blocks one product each inside the compiled whole step: within the torch
    rows' 1e-10 of each seed's own batch on the CPU's exact path over 150 steps (measured:
    the same bits eager, 7e-15 compiled), the diverging configuration frozen at the same
    step."""
    init = tb.CompiledStep.__init__
    if whole:
        monkeypatch.setattr(tb.CompiledStep, "__init__", lambda self, *a, **k: init(
            self, *a, **{**k, "whole": True}))
    of = tb.Blocks.of
    made: list[Any] = []
    monkeypatch.setattr(tb.Blocks, "of", staticmethod(
        lambda group, B, grouped=False: made.append(of(group, B, True)) or made[-1]))
    points = SEEDED if equal else [*SEEDED[:5], dict(tau=0.9, delta=0.1, seed=0)]
    together = seeded_batch(implementation, points)
    assert made[-1].grouped == equal and len(made[-1].bounds) == 3
    monkeypatch.setattr(tb.Blocks, "of", of)
    assert together.status.values.tolist()[2] == 1
    for seed in (0, 1, 2):
        mine = [i for i, p in enumerate(points) if p["seed"] == seed]
        own = seeded_batch("torch", [points[i] for i in mine])
        for k, i in enumerate(mine):
            assert together.status.values[i] == own.status.values[k]
            for name, item in own.data_vars.items():
                a, b = together[name].values[i], item.values[k]
                if item.dtype.kind != "f":
                    assert np.array_equal(a, b), name
                    continue
                assert np.array_equal(np.isnan(a), np.isnan(b)), name
                scale = float(np.nanmax(np.abs(b))) if np.isfinite(b).any() else 1.0
                np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10 * scale,
                                           err_msg=name)


# -- chunks sized by the device's free memory -------------------------------------------------
def test_device_free_bytes_reads_the_driver_on_a_gpu_and_nothing_on_the_cpu(monkeypatch: Any
                                                                            ) -> None:
    asked: list[Any] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info",
                        lambda index=None: asked.append(index) or (7 * 2**30, 80 * 2**30))
    assert compute.device_free_bytes("cuda") == 7 * 2**30
    assert compute.device_free_bytes("auto") == 7 * 2**30
    assert compute.device_free_bytes("cuda:1") == 7 * 2**30 and asked[-1] == 1
    assert compute.device_free_bytes("cpu") is None and compute.device_free_bytes(None) is None
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert compute.device_free_bytes("auto") is None


SMALL = {"d": 6, "h": 4, "k": 2, "n": 16, "n_test": 20, "steps": 30, "n_records": 5}
GRID = [("tau", "0.3,0.6,1.0,1.5,2.0"), ("delta", "-1,0,1"), ("seed", "0,1")]


def two_layer_job(implementation: str = "torch") -> Job:
    return Job.build("two-layer", "train", {**SMALL, "implementation": implementation}, GRID)


@pytest.fixture
def declared_working(monkeypatch: Any) -> None:
    """Two-layer's footprint carrying its private working-memory estimate, as the model's
    default footprint hands on the private hooks a family defines."""
    footprint = tl.TwoLayer.footprint
    if footprint("train", tl.TwoLayer.resolve("train", {**SMALL, "implementation": "torch"})
                 ).working_bytes is None:
        import dataclasses

        monkeypatch.setattr(tl.TwoLayer, "footprint", classmethod(
            lambda cls, action, values: dataclasses.replace(
                footprint(action, values),
                working_bytes=cls._working_bytes(action, values))))


def fake_gpu(monkeypatch: Any, free: float) -> None:
    """A device of ``free`` bytes for every configuration of a device implementation (the
    points still compute on the CPU)."""
    monkeypatch.setattr(compute, "device_free_bytes", lambda device: int(free))


def test_the_chunk_on_a_device_follows_its_free_memory(monkeypatch: Any,
                                                       declared_working: None) -> None:
    """2 seeds of 15 points: the torch rows batch over seed, so a device with room for 4
    configurations (in the memory share) takes chunks of 4 across the seeds, and one with
    room for the whole job takes its 30 in one chunk; the NumPy implementation's chunks never
    mix seeds, and are the CPU's whatever the faked memory; without a device the chunks are
    the CPU's."""
    job = two_layer_job()
    values = job.values(0)
    per_point = tl.TwoLayer._working_bytes("train", values)
    output = tl.TwoLayer.footprint("train", values).output_bytes
    assert per_point is not None and output is not None
    cpu = plan_module.make_plan(job, RunOptions(jobs=1), None)
    assert cpu.chunk_size == plan_module.auto_chunk_size(30, 1) == 8
    room = (4.5 * (per_point + output + 9)) / plan_module.DEVICE_MEMORY_SHARE
    fake_gpu(monkeypatch, room)
    small = plan_module.make_plan(job, RunOptions(jobs=1), None)
    assert small.chunk_size == 4 and [c.size for c in small.chunks] == [4] * 7 + [2]
    seeds = [{job.values(int(i))["seed"] for i in c} for c in small.chunks]
    assert {0, 1} in seeds
    fake_gpu(monkeypatch, 1e12)
    large = plan_module.make_plan(job, RunOptions(jobs=1), None)
    assert large.chunk_size == 30 and [c.size for c in large.chunks] == [30]
    assert plan_module.make_plan(job, RunOptions(jobs=1, chunk_size=3), None).chunk_size == 3
    numpy_job = two_layer_job("numba")
    numpy_plan = plan_module.make_plan(numpy_job, RunOptions(jobs=1), None)
    assert numpy_plan.chunk_size == 8 and [c.size for c in numpy_plan.chunks] == [8, 7] * 2
    assert all(len({numpy_job.values(int(i))["seed"] for i in c}) == 1
               for c in numpy_plan.chunks)
    monkeypatch.setattr(compute, "device_free_bytes", lambda device: None)
    assert plan_module.make_plan(job, RunOptions(jobs=1), None).chunk_size == 8


def test_the_paper_fig1b_gpu_job_fits_one_chunk_on_a_139_gib_device(monkeypatch: Any,
                                                                    declared_working: None
                                                                    ) -> None:
    """jobs/fig1b-gpu.toml at the paper's size (16 seeds x 289 (tau, delta) = 4,624
    configurations), planned for one GPU with 139 GiB free (faked; on the CPU device so that
    it validates here): the declared 21.8 MB per configuration in float64 (11.0 MB in
    float32) lets 5,487 (10,826) configurations into 80% of the memory, so the whole job is
    one chunk holding every seed; with 40 GiB free (3,115 fit in float32) the first chunk
    still holds every seed. Computed from the declared bytes, not measured on a GPU."""
    from richlazy_cli.engine.job import read_job_file

    spec = read_job_file(ROOT / "jobs" / "fig1b-gpu.toml")
    assert "chunk_size" not in spec.run  # the device's memory decides
    fits = {}
    for dtype in ("float64", "float32"):
        job = Job.build("two-layer", "train", {**spec.params, "device": "cpu", "dtype": dtype},
                        list(spec.grid.items()))
        assert job.grid.size == 4624
        values = job.values(0)
        per_point = (float(tl.TwoLayer._working_bytes("train", values) or 0.0)
                     + float(tl.TwoLayer.footprint("train", values).output_bytes or 0.0))
        fits[dtype] = int(plan_module.DEVICE_MEMORY_SHARE * 139 * 2**30 // per_point)
        fake_gpu(monkeypatch, 139 * 2**30)
        plan = plan_module.make_plan(job, RunOptions(jobs=1), None)
        assert [c.size for c in plan.chunks] == [4624], dtype
        seeds = {job.values(int(i))["seed"] for i in plan.chunks[0][::17]}
        assert seeds == set(range(100, 116))
    assert fits == {"float64": 5487, "float32": 10826}
    fake_gpu(monkeypatch, 40 * 2**30)
    plan = plan_module.make_plan(job, RunOptions(jobs=1), None)  # float32
    assert [c.size for c in plan.chunks] == [3115, 1509]
    assert {job.values(int(i))["seed"] for i in plan.chunks[0][::17]} == set(range(100, 116))


@pytest.mark.system
def test_a_jobs_results_do_not_depend_on_the_device_chunk(tmp_path: Path, monkeypatch: Any,
                                                          declared_working: None) -> None:
    """The same job with the CPU's chunks (8 across both seeds), a small device's (3) and a
    large device's (the whole job, both seeds in one chunk), and each seed as a job of its
    own (its 15 points in one chunk): every variable bit for bit the same (the torch
    implementation on the CPU is bitwise across batching, seeds included; on a GPU the
    promise is its declared tolerance, batch-dependent)."""
    values = two_layer_job().values(0)
    per_point = float(tl.TwoLayer._working_bytes("train", values) or 0.0)
    results = {}
    for label, free in (("cpu", None), ("small", 3.5 * per_point / 0.8), ("large", 1e12)):
        if free is not None:
            fake_gpu(monkeypatch, free)
        outcome = execute(two_layer_job(), tmp_path / f"{label}.h5",
                          RunOptions(jobs=1, quiet=True), ["test"])
        assert outcome.plan is not None
        results[label] = ([c.size for c in outcome.plan.chunks],
                          xr.load_dataset(tmp_path / f"{label}.h5"))
    assert results["cpu"][0] == [8, 8, 8, 6] and results["small"][0] == [3] * 10
    assert results["large"][0] == [30]
    want = results["cpu"][1]
    for label in ("small", "large"):
        got = results[label][1]
        for name, item in want.data_vars.items():
            if name == "elapsed":
                continue
            assert item.values.tobytes() == got[name].values.tobytes(), (label, name)
    for seed in (0, 1):
        job = Job.build("two-layer", "train", {**SMALL, "implementation": "torch"},
                        [*GRID[:2], ("seed", str(seed))])
        execute(job, tmp_path / f"seed{seed}.h5", RunOptions(jobs=1, quiet=True), ["test"])
        alone = xr.load_dataset(tmp_path / f"seed{seed}.h5")
        mixed = want.sel(seed=seed)
        for name, item in alone.data_vars.items():
            if name == "elapsed":
                continue
            assert item.values.tobytes() == mixed[name].values.tobytes(), (seed, name)


def held_by_a_batch(B: int, n: int, n_test: int, d: int, h: int, seeds: int = 1) -> int:
    """Bytes of the tensors a two-layer torch batch of ``B`` configurations over ``seeds``
    data sets holds while it trains: the step's buffers, the checkpoint metrics' initial
    features and each data set's data, the parameters."""
    g = np.random.default_rng(0)
    S = seeds
    group = np.repeat(np.arange(S), -(-B // S))[:B] if S > 1 else None
    shape = (lambda *s: (S, *s)) if S > 1 else (lambda *s: s)
    run = tb.TorchRun(g.standard_normal(shape(n, d)), g.standard_normal(shape(n)),
                      g.standard_normal(shape(n_test, d)), g.standard_normal(shape(n_test)),
                      g.standard_normal((B, h, d)), g.standard_normal((B, h)),
                      np.zeros(B), np.full(B, 1e-3), 2, np.array([0, 2]), 1e6, "float64",
                      "cpu", group=group)
    t_ = lambda x: torch.as_tensor(np.ascontiguousarray(x))  # noqa: E731
    Xs, ys, _, _ = run.data_sets()
    blocks = tb.Blocks.of(group, B)
    with torch.no_grad():
        X = t_(Xs)
        metrics = tb._CheckpointMetrics(torch, run, X, torch.float64, torch.device("cpu"),
                                        lambda A, Bm: tb.batched_matmul(torch, A, Bm), blocks)
        W, a = t_(run.W0), t_(run.a0)
        metrics.initial(W, a)
        y = t_(ys[0]) if S == 1 else t_(ys[group])
        step = tb.FusedStep(torch, W, a, X, t_(Xs.transpose(0, 2, 1)), y,
                            t_(run.leak)[:, None, None], t_(run.coef), blocks)
    tensors = [*vars(step).values(), *vars(metrics).values(), W, a]
    tensors += [t for v in vars(metrics).values() if isinstance(v, list) for t in v]
    return sum(v.numel() * v.element_size() for v in tensors if isinstance(v, torch.Tensor))


def test_two_layer_declares_the_torch_buffers_it_allocates() -> None:
    """The declared working memory of one configuration covers the tensors a batch of one
    holds while it trains (counted from the objects themselves) and is less than twice them;
    what each further configuration of a batch adds is covered too, and so is a batch of 4
    configurations over 4 seeds' data sets (each its own data) or over 2."""
    sizes = dict(n=200, n_test=300, d=20, h=10)
    values = tl.TwoLayer.resolve("train", {**SMALL, **sizes, "implementation": "torch"})
    declared = tl.TwoLayer._working_bytes("train", values)
    assert declared is not None
    one, four = held_by_a_batch(1, **sizes), held_by_a_batch(4, **sizes)
    assert one <= declared < 2 * one
    assert four <= 4 * declared
    assert held_by_a_batch(4, **sizes, seeds=2) <= held_by_a_batch(4, **sizes, seeds=4)
    assert held_by_a_batch(4, **sizes, seeds=4) <= 4 * declared
# -- grokking: stacked against one at a time -------------------------------------------------
GROK = dict(p=11, d_model=16, n_heads=2, steps=60, eval_every=10, batch=16)
CURVES = ("train_acc", "val_acc", "train_loss", "val_loss")


def grok(points: list[dict[str, Any]], stacked: bool, monkeypatch: Any, **common: Any
         ) -> xr.Dataset:
    monkeypatch.setattr(gk, "stacked_by_default", lambda device: stacked)
    values = [gk.Grokking.resolve("train", {**GROK, **common, **p}) for p in points]
    return gk.Grokking().train(Batch.from_points(gk.Grokking, values))


THREE = [dict(alpha=1.0, tau=1.0, seed=0), dict(alpha=3.0, tau=0.5, seed=1),
         dict(alpha=0.5, tau=2.0, seed=2)]


@pytest.mark.parametrize("dtype, rtol", [("float64", 1e-9), ("float32", 1e-4)])
def test_grokking_stacked_equals_one_at_a_time(dtype: str, rtol: float, monkeypatch: Any
                                               ) -> None:
    """Within 1e-9 relative in float64 and 1e-4 in float32 over 60 steps (measured: 5e-16 and
    1.4e-7); the evaluated steps and the steps to the threshold equal."""
    together = grok(THREE, True, monkeypatch, dtype=dtype)
    for i, p in enumerate(THREE):
        alone = grok([p], False, monkeypatch, dtype=dtype)
        for name in CURVES:
            got, want = together[name].values[i], alone[name].values[0]
            assert np.array_equal(np.isnan(got), np.isnan(want)), name
            np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, err_msg=name)
        assert together.status.values[i] == alone.status.values[0] == 0
    assert together.attrs["n_params"] == alone.attrs["n_params"]
    assert not np.allclose(together.train_loss.values[0], together.train_loss.values[1])


def test_grokking_stacked_early_stop_is_per_configuration(monkeypatch: Any) -> None:
    common = dict(dtype="float64", early_stop=True, threshold=0.083, steps=80)
    together = grok(THREE, True, monkeypatch, **common)
    stops = []
    for i, p in enumerate(THREE):
        alone = grok([p], False, monkeypatch, **common)
        got, want = together.train_loss.values[i], alone.train_loss.values[0]
        assert np.array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=1e-9)
        for k in ("steps_to_train", "steps_to_val"):
            assert np.array_equal(together[k].values[i], alone[k].values[0], equal_nan=True)
        stops.append(int(np.isnan(got).sum()))
    assert len(set(stops)) > 1, "the configurations should stop at different steps"


def test_grokking_a_diverging_configuration_leaves_its_neighbours_alone(monkeypatch: Any
                                                                        ) -> None:
    """τ = 10⁻³ gives a learning rate of lr/τ² = 10³: the run diverges within the first
    evaluations; its stack mates train as they do without it."""
    wild = dict(alpha=1.0, tau=1e-3, seed=3)
    common = dict(dtype="float32")
    together = grok([THREE[0], wild, THREE[1]], True, monkeypatch, **common)
    without = grok([THREE[0], THREE[1]], True, monkeypatch, **common)
    assert together.status.values.tolist() == [0, 1, 0]
    loss = together.train_loss.values[1]
    assert np.isnan(loss[-1]) and np.isfinite(loss[0])
    for i, k in ((0, 0), (2, 1)):
        for name in CURVES:
            np.testing.assert_allclose(together[name].values[i], without[name].values[k],
                                       rtol=1e-6, atol=1e-6, err_msg=name)
            assert np.isfinite(together[name].values[i]).all()
    alone = grok([wild], False, monkeypatch, **common)
    assert alone.status.values[0] == 1
    assert np.array_equal(np.isnan(alone.train_loss.values[0]), np.isnan(loss))


# -- rhm: the GPU's stacking of any shape, on the CPU ----------------------------------------
def test_rhm_stacks_any_shape_on_a_gpu_and_it_agrees_with_one_at_a_time(monkeypatch: Any
                                                                        ) -> None:
    common = dict(L=2, width=15, epochs=3, test_size=100, n_records=3, batch=32,
                  dtype="float64", train_fraction=0.3)
    v = rhm.RHM.resolve("train", {**common, "alpha": 1.0, "seed": 0})
    assert not rhm.stackable(v, "cpu") and rhm.stackable(v, "cuda")
    points = [{"alpha": 1.0, "seed": 0}, {"alpha": 10.0, "seed": 1}, {"alpha": 0.3, "seed": 2}]
    values = [rhm.RHM.resolve("train", {**common, **p}) for p in points]
    alone = [rhm.RHM().train(Batch.from_points(rhm.RHM, [x])) for x in values]
    monkeypatch.setattr(rhm, "stackable", lambda v, device: True)
    together = rhm.RHM().train(Batch.from_points(rhm.RHM, values))
    for i in range(len(points)):
        for name in ("test_acc", "train_acc", "train_loss"):
            np.testing.assert_allclose(together[name].values[i], alone[i][name].values[0],
                                       rtol=1e-10, atol=1e-12, err_msg=name)
    assert not np.allclose(together.train_loss.values[0], together.train_loss.values[1])


def test_rhm_a_diverging_configuration_leaves_its_neighbours_alone(monkeypatch: Any) -> None:
    """α = 10¹⁰ in float32 overflows in the first epoch (status 1, NaN from the first
    checkpoint after 0 on); stacked on the GPU's path with two others, those train as they
    do stacked without it and as they do alone, within 1e-6 relative (measured: the same
    bits), and the wild one alone diverges at the same checkpoint."""
    common = dict(L=2, width=15, epochs=3, test_size=100, n_records=3, batch=32,
                  dtype="float32", train_fraction=0.3)
    calm = [{"alpha": 1.0, "seed": 0}, {"alpha": 3.0, "seed": 1}]
    wild = {"alpha": 1e10, "seed": 3}

    def train(points: list[dict[str, Any]]) -> xr.Dataset:
        values = [rhm.RHM.resolve("train", {**common, **p}) for p in points]
        return rhm.RHM().train(Batch.from_points(rhm.RHM, values))

    alone = [train([p]) for p in (calm[0], wild, calm[1])]
    monkeypatch.setattr(rhm, "stackable", lambda v, device: True)
    together = train([calm[0], wild, calm[1]])
    without = train(calm)
    assert together.status.values.tolist() == [0, 1, 0]
    assert alone[1].status.values.tolist() == [1]
    for name in ("test_acc", "train_acc", "train_loss"):
        for i, k in ((0, 0), (2, 1)):
            got = together[name].values[i]
            assert np.isfinite(got).all(), name
            np.testing.assert_allclose(got, without[name].values[k], rtol=1e-6, atol=1e-7,
                                       err_msg=name)
            np.testing.assert_allclose(got, alone[i][name].values[0], rtol=1e-6, atol=1e-7,
                                       err_msg=name)
        assert np.array_equal(np.isnan(together[name].values[1]),
                              np.isnan(alone[1][name].values[0])), name
    loss = together.train_loss.values[1]
    assert np.isfinite(loss[0]) and np.isnan(loss[-1])


# -- cnn: stacked against one at a time --------------------------------------------------------
def cnn_runs(base: dict[str, Any], points: list[dict[str, Any]], stacked: bool,
             monkeypatch: Any) -> xr.Dataset:
    monkeypatch.setattr(cnn, "stacked_by_default", lambda device: stacked)
    values = [cnn.CNN.resolve("train", {**base, **p}) for p in points]
    return cnn.CNN().train(Batch.from_points(cnn.CNN, values))


def assert_cnn_close(got: xr.Dataset, i: int, want: xr.Dataset, rtol: float) -> None:
    """Row ``i`` of ``got`` against ``want``'s one row. Where the tolerance is not a bitwise
    one: a Hamming distance (a count of sign flips) within 1e-3, and a kernel distance,
    ``1 − cos(K₀, K_t)``, within ``rtol`` absolute — the scale of the cosine it is computed
    from (docs/cnn.md), not its own small value: rounding in the kernels moves the cosine,
    and a distance of 0.015 then moves by as much as one of 0.5."""
    assert_row_close(got, i, want, rtol,
                     {"hamming_distance": 1e-3, "kernel_distance": rtol}
                     if rtol > 1e-9 else None)


@pytest.mark.integration
@pytest.mark.parametrize("dtype, rtol", [("float64", 1e-9), ("float32", 1e-5)])
def test_cnn_stacked_equals_one_at_a_time(dtype: str, rtol: float, monkeypatch: Any) -> None:
    """Every metric within 1e-9 relative in float64 and 1e-5 in float32 (measured: the same
    bits in float64, 1.3e-7 in float32; a Hamming fraction may differ by one activation bit
    in float32), with a second learning rate in its own stack."""
    base = {**cnn.CNN.examples["train"][0], "epochs": 2, "dtype": dtype}
    points = [dict(alpha=1.0, seed=0), dict(alpha=3.0, seed=1), dict(alpha=0.3, seed=2),
              dict(alpha=1.0, seed=3, lr=3e-4)]
    together = cnn_runs(base, points, True, monkeypatch)
    for i, p in enumerate(points):
        assert_cnn_close(together, i, cnn_runs(base, [p], False, monkeypatch), rtol)
    assert not np.allclose(together.train_loss.values[0], together.train_loss.values[1])


@pytest.mark.integration
def test_cnn_a_diverging_configuration_leaves_its_neighbours_alone(monkeypatch: Any) -> None:
    """α = 10⁸ multiplies the readout by 10⁸: the float32 loss overflows at the second
    checkpoint; its stack mates train as they do alone, within 1e-4 of each variable's
    scale in float32 over 3 epochs of SGD (measured: 5e-5, the final filters; on an AMD
    EPYC 2.4e-5 for the filters and 5.6e-6 absolute for a kernel distance of 0.015)."""
    base = {**cnn.CNN.examples["train"][2], "epochs": 3, "dtype": "float32"}
    points = [dict(alpha=0.5, seed=2), dict(alpha=1e8, seed=5), dict(alpha=4.0, seed=3)]
    together = cnn_runs(base, points, True, monkeypatch)
    assert together.status.values.tolist() == [0, 1, 0]
    for i in (0, 2):
        assert_cnn_close(together, i, cnn_runs(base, [points[i]], False, monkeypatch), 1e-4)
        assert np.isfinite(together.train_loss.values[i]).all()
    loss = together.train_loss.values[1]
    assert np.isfinite(loss[0]) and np.isnan(loss[-1])
    alone = cnn_runs(base, [points[1]], False, monkeypatch)
    assert alone.status.values[0] == 1
    assert np.array_equal(np.isnan(alone.train_loss.values[0]), np.isnan(loss))


# -- make paper-gpu -----------------------------------------------------------------------------
@pytest.mark.system
@pytest.mark.skipif(shutil.which("make") is None or not (ROOT / ".venv/bin/richlazy").exists(),
                    reason="needs make and the .venv that make install creates")
def test_paper_gpu_refuses_in_one_line_without_a_gpu(tmp_path: Path) -> None:
    """The dry run comes first and, without a GPU, prints the plan and says the device is
    absent; the sweep then refuses ``device = cuda``: richlazy's one line (make adds its own
    "Error 2" line), exit 2, no file written."""
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the target would run")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(["make", "-s", "-C", str(ROOT), "paper-gpu",
                           f"RESULTS={tmp_path}/results",
                           "STAMP="], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("make")]
    assert len(lines) == 1 and "no CUDA device" in lines[0], proc.stderr
    assert "points" in proc.stdout and "cuda is absent on this machine" in proc.stdout
    assert not [p for p in (tmp_path / "results").rglob("*") if p.is_file()]


@pytest.mark.system
def test_paper_gpu_dry_run_lists_each_job_with_its_estimate_first() -> None:
    proc = subprocess.run(["make", "-n", "-C", str(ROOT), "paper-gpu", "STAMP="],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    for job in ("fig1b", "ren-fig2", "grokking-alpha", "rhm-alpha", "cnn-digits-alpha",
                "filters-digits24"):
        toml = "jobs/fig1b-gpu.toml" if job == "fig1b" else f"jobs/{job}.toml"
        sweeps = [ln for ln in lines if f"sweep -c {toml} " in ln]
        assert len(sweeps) == 2, job
        assert "--dry-run" in sweeps[0] and "--continue" in sweeps[1], job
        assert f"results/gpu/{job}.h5" in sweeps[1], job
        assert "device=cuda" in sweeps[1] or job == "fig1b", job


# -- the roofline model of bench/gpu.py -------------------------------------------------------
def test_the_bench_roofline_counts_the_two_layer_step() -> None:
    """One step of the paper's problem for 289 configurations is 2 products of 2·h·n·d FLOP
    each per configuration: 5.78 GFLOP (d = 100, h = 50, n = 1000)."""
    spec = importlib.util.spec_from_file_location("bench_gpu", ROOT / "bench" / "gpu.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules["bench_gpu"] = bench  # dataclasses look their module up
    spec.loader.exec_module(bench)
    flop, moved = bench.two_layer_step(289, d=100, h=50, n=1000, itemsize=8)
    assert flop == pytest.approx(2 * 2 * 50 * 1000 * 100 * 289, rel=0.03)
    assert 0.2e9 < moved < 1.0e9
