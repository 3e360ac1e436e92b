"""The two-layer model's torch backend against its NumPy reference (docs/two-layer.md).

Both backends train the same problem from the same initialisation with the same step rule,
divergence test and checkpoint metrics; they differ only in the order of floating-point sums
inside products, so float64 results agree to rounding and float32 results to float32's own
sensitivity (measured here against the float32–float64 difference of the NumPy backend).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import xarray as xr
from threadpoolctl import threadpool_limits

from richlazy_cli.models.base import Batch
from richlazy_cli.models.two_layer.model import TwoLayer

from ...conftest import assert_one_line_error, run_process

torch = pytest.importorskip("torch")

METRICS = ("train_loss", "test_loss", "kernel_distance", "hamming_distance", "param_distance")
PAPER = dict(d=100, h=50, k=3, n=1000, n_test=10000)
POINTS = [{"tau": t, "delta": d} for t in (0.1, 1.0) for d in (-1.0, 0.0, 1.0)]


@pytest.fixture(autouse=True)
def _one_blas_thread() -> Iterator[None]:
    with threadpool_limits(1):
        yield


def train(points: list[dict[str, Any]], **common: Any) -> xr.Dataset:
    values = [TwoLayer.resolve("train", {**common, **p}) for p in points]
    return TwoLayer().train(Batch.from_points(TwoLayer, values))


@pytest.fixture(scope="module")
def paper_size() -> dict[str, xr.Dataset]:
    common = dict(PAPER, steps=200, n_records=8, seed=3)
    with threadpool_limits(1):
        return {
            (impl, dtype): train(POINTS, implementation=impl, dtype=dtype, **common)
            for impl in ("numba", "torch") for dtype in ("float64", "float32")
        }


@pytest.mark.integration
def test_float64_agrees_with_numpy_at_the_papers_size(paper_size: dict[Any, xr.Dataset]
                                                     ) -> None:
    ref, got = paper_size["numba", "float64"], paper_size["torch", "float64"]
    for name in METRICS:
        # relative 1e-10; the kernel distance also absolutely (S(0,t) ≈ 1e-16 near t = 0 is
        # the rounding of 1 − ⟨K0,Kt⟩/(‖K0‖‖Kt‖) itself)
        np.testing.assert_allclose(got[name].values, ref[name].values, rtol=1e-10,
                                   atol=1e-14 if name == "kernel_distance" else 0, err_msg=name)
    assert np.array_equal(got.status.values, ref.status.values)
    assert np.array_equal(got.step.values, ref.step.values)


@pytest.mark.integration
def test_float32_agrees_as_closely_as_float32_tracks_float64(
        paper_size: dict[Any, xr.Dataset]) -> None:
    ref64 = paper_size["numba", "float64"]
    ref, got = paper_size["numba", "float32"], paper_size["torch", "float32"]
    for name in METRICS:
        r, g, r64 = ref[name].values, got[name].values, ref64[name].values
        bound = 1e-4 * np.maximum(1.0, np.abs(r)) + 3.0 * np.abs(r - r64)
        assert np.all(np.abs(g - r) <= bound), name


def test_divergence_is_isolated_per_configuration() -> None:
    good = {"tau": 0.5, "delta": 0.0}
    bad = {"tau": 0.5, "delta": 0.0, "lr": 50.0}
    common = dict(d=6, h=8, k=2, n=15, n_test=40, steps=200, n_records=8, save_params=True,
                  seed=6)
    both = train([bad, good], implementation="torch", **common)
    alone = train([good], implementation="torch", **common)
    ref = train([bad, good], **common)
    assert list(both.status.values) == [1, 0]
    for name in (*METRICS, "W", "a"):
        assert np.array_equal(both[name].values[1], alone[name].values[0], equal_nan=True)
        np.testing.assert_allclose(both[name].values, ref[name].values, rtol=1e-10, atol=1e-14)
    loss = both.train_loss.values[0]
    first_nan = int(np.argmax(np.isnan(loss)))
    assert first_nan > 0 and np.all(np.isnan(loss[first_nan:]))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_alone_and_in_batch_are_bitwise_identical_on_the_cpu(dtype: str) -> None:
    common = dict(d=12, h=10, k=2, n=60, n_test=50, steps=60, n_records=6, seed=2,
                  implementation="torch", dtype=dtype, leak=0.1)
    batch = train(POINTS, **common)
    for i, p in enumerate(POINTS):
        alone = train([p], **common)
        for name in METRICS:
            assert np.array_equal(batch[name].values[i], alone[name].values[0],
                                  equal_nan=True), name


@pytest.mark.system
def test_sweeps_with_different_jobs_are_bitwise_identical(tmp_path: Any) -> None:
    args = ["sweep", "train", "two-layer", "-p", "implementation=torch", "-p", "d=8", "-p", "h=6",
            "-p", "n=30", "-p", "n_test=20", "-p", "steps=40", "-g", "tau=0.5,1,2",
            "-g", "delta=-1,0,1", "-g", "seed=0,1", "-q"]
    outs = []
    for jobs in (1, 2):
        out = tmp_path / f"j{jobs}.h5"
        proc = run_process(*args, "-o", out, "--jobs", jobs, "--chunk-size", 2 + jobs)
        assert proc.code == 0, proc.err
        outs.append(xr.open_dataset(out, engine="h5netcdf").load())
    for name in METRICS:
        assert np.array_equal(outs[0][name].values, outs[1][name].values, equal_nan=True)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_cuda_without_a_gpu_is_bad_input(tmp_path: Any, cli: Any) -> None:
    out = tmp_path / "x.h5"
    result = cli("train", "two-layer", "-p", "implementation=torch", "-p", "device=cuda",
                 "-p", "steps=2", "-o", out)
    assert_one_line_error(result)
    assert "cuda" in result.err and not out.exists()


def test_cuda_with_the_numpy_backend_is_bad_input(tmp_path: Any, cli: Any) -> None:
    out = tmp_path / "x.h5"
    result = cli("train", "two-layer", "-p", "device=cuda", "-p", "steps=2", "-o", out)
    assert_one_line_error(result)
    assert "implementation" in result.err and not out.exists()


def test_geometric_outputs_and_xor_data_agree_with_numpy() -> None:
    common = dict(d=2, h=8, n=40, n_test=30, steps=150, n_records=6, seed=4, data="xor",
                  save_surface=True, leak=0.05)
    ref = train(POINTS[:3], **common)
    got = train(POINTS[:3], implementation="torch", **common)
    names = [v for v in ref.data_vars if v not in ("status",)]
    assert {"partition_change", "n_regions", "output_sup", "surface", "parity"} <= set(names)
    for name in names:
        r, g = ref[name].values, got[name].values
        if r.dtype.kind in "iub":
            assert np.array_equal(r, g), name
        else:
            np.testing.assert_allclose(g, r, rtol=1e-10, atol=1e-13, err_msg=name)


def test_teacher_alignment_agrees_with_numpy() -> None:
    common = dict(d=8, h=6, k=2, n=30, n_test=20, steps=100, n_records=5, seed=1)
    ref = train(POINTS[:2], **common)
    got = train(POINTS[:2], implementation="torch", **common)
    for name in ("teacher_alignment", "direction_change", "preconditioner_drift"):
        np.testing.assert_allclose(got[name].values, ref[name].values, rtol=1e-10, atol=1e-12,
                                   err_msg=name)


def test_a_gpu_backend_starts_one_worker_per_gpu(monkeypatch: Any) -> None:
    from richlazy_cli.engine.job import Job, RunOptions
    from richlazy_cli.engine.run import make_plan
    from richlazy_cli.numerics.compute import gpu_workers

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert gpu_workers("cuda") == 2
    assert gpu_workers("auto") == 2
    assert gpu_workers("cpu") is None
    values = {**TwoLayer.resolve("train", {}), "implementation": "torch", "device": "cuda"}
    assert TwoLayer.device_workers(values, "train") == 2
    monkeypatch.setattr(TwoLayer, "device_workers", classmethod(lambda cls, *args: 1))
    job = Job.build("two-layer", "train", {"steps": 2}, [("tau", "0.5,1,2,3")])
    plan = make_plan(job, RunOptions(jobs=8, chunk_size=1), None)
    assert plan.workers == 1 and "capped at the 1 GPU(s)" in plan.note()
    assert make_plan(job, RunOptions(chunk_size=1), None).jobs == 1

