"""The dry run of a GPU job on a machine without a GPU (a cluster's login node, a laptop): the
plan and size, a line saying the device is absent and that no estimate is made, exit 0; the
run itself still refuses in one line (docs/usage.md, docs/engine.md "Implementations and
devices"). The GPU is hidden from torch, so the test means the same on a machine with one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from richlazy_cli.numerics.compute import NO_GPU

from ..conftest import ROOT, assert_one_line_error

GPU_JOB = ROOT / "jobs/fig1b-gpu.toml"


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)


def test_gpu_job_dry_run_prints_plan_and_size_without_a_gpu(no_gpu: None, cli,
                                                            tmp_path: Path) -> None:
    out = tmp_path / "fig1b.h5"
    result = cli("sweep", "-c", GPU_JOB, "-o", out, "--dry-run")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0] == "grid: 17 x 17 x 16 = 4624 points", result.out
    assert any(line.startswith("pending: 4624 points in ") for line in lines), result.out
    assert any(line.startswith("output: ") and "declared by the model" in line
               for line in lines), result.out
    assert ("device: cuda is absent on this machine: no time estimate is made" in result.out)
    assert "estimated time" not in result.out
    assert result.err == ""
    assert not list(tmp_path.iterdir())  # a dry run writes nothing

    data = json.loads(cli("sweep", "-c", GPU_JOB, "-o", out, "--dry-run", "--json").out)
    assert data["absent_devices"] == ["cuda"] and data["estimate"] is None
    assert data["plan"]["points"] == 4624 and data["output_bytes"]["points"] == 4624

    run = cli("sweep", "-c", GPU_JOB, "-o", out)  # the run itself refuses
    assert_one_line_error(run)
    assert NO_GPU in run.err
    assert not list(tmp_path.iterdir())


def test_only_a_dry_run_allows_an_absent_device(no_gpu: None, tmp_path: Path) -> None:
    """The absent device is the GPU job's alone, and a dry run's alone: the same job on the
    CPU names none, and its run (not dry) is refused while the job is built."""
    from richlazy_cli.engine.job import Request, prepare_sweep
    from richlazy_cli.errors import BadInput

    def request(**values: str) -> Request:
        return Request(config=GPU_JOB, run={"output": str(tmp_path / "out.h5")}, values=values)

    assert prepare_sweep(request(), dry_run=True)[2].absent_devices == ("cuda",)
    assert prepare_sweep(request(device="cpu"), dry_run=True)[2].absent_devices == ()
    with pytest.raises(BadInput, match=NO_GPU):
        prepare_sweep(request())
    assert not list(tmp_path.iterdir())


def test_python_estimate_says_the_device_is_absent(no_gpu: None) -> None:
    import richlazy

    summary = richlazy.estimate(config=GPU_JOB, params={"steps": 1000,
                                                        "records": [0, 10, 100, 1000]})
    assert summary["absent_devices"] == ["cuda"] and summary["estimate"] is None
    assert summary["plan"]["pending"] == 4624
