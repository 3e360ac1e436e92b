"""Every job file in jobs/ is exercised, so that none can rot: each is read, validated point by
point, planned and sized (fast), and its ``--dry-run`` (which also times the model's probe)
succeeds: in the fast suite for the job files whose dry run takes seconds, in the slow suite for
the ones whose probe takes 20 s to a minute."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from richlazy_cli.engine.footprint import declared_size
from richlazy_cli.engine.job import Request, prepare_sweep
from richlazy_cli.engine.run import make_plan
from richlazy_cli.numerics.compute import NO_GPU

from ..conftest import assert_one_line_error

ROOT = Path(__file__).resolve().parents[2]
JOBS = sorted((ROOT / "jobs").glob("*.toml")) + sorted((ROOT / "jobs" / "paper").glob("*.toml"))
"""Every job file: jobs/ and the paper gallery's small ones in jobs/paper/ (``make paper``)."""


def _name(job: Path) -> str:
    """A job file's name relative to jobs/, without ``.toml`` (``fig1a``, ``paper/ren-fig2``)."""
    return job.relative_to(ROOT / "jobs").with_suffix("").as_posix()


GPU_ONLY = {"fig1b-gpu"}
"""Job files that ask for ``device = "cuda"``: on a machine without one, their dry run gives
the plan and size without an estimate, and their run is refused (one line)."""
SLOW_PROBES = {"filters-digits24", "filters-digits24-small", "filters-digits24-bn",
               "filters-digits24-bn-converged", "grokking-alpha", "grokking-reduced",
               "grokking-tau-reduced", "grokking-tau-stable-step", "rhm-alpha",
               "rhm-alpha-small", "cnn-digits-alpha", "cnn-digits-alpha-small",
               "cnn-digits-alpha-early", "linear-b1-expanding", "linear-b1-narrowing",
               "linear-b1-wide", "paper/kunin-fig6b", "paper/kunin-fig6d"}
"""Job files whose dry run takes 20 s or more on 2 cores (measured on the CI's kind of machine,
an AMD EPYC: 20-60 s each): the probe trains a practice model, or solves flows of seconds.
Their files are still validated, planned and sized in the fast suite."""


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def test_the_job_list_is_complete() -> None:
    assert len(JOBS) >= 30
    assert {_name(p) for p in JOBS} >= GPU_ONLY | SLOW_PROBES
    assert sum(_name(p).startswith("paper/") for p in JOBS) >= 16


@pytest.mark.parametrize("job", JOBS, ids=[_name(p) for p in JOBS])
def test_every_job_file_validates_plans_and_sizes(job: Path, tmp_path: Path) -> None:
    values = {"device": "auto"} if _name(job) in GPU_ONLY and not _has_cuda() else {}
    request = Request(config=job, run={"output": str(tmp_path / "out.h5")}, values=values)
    built, _, opts = prepare_sweep(request, dry_run=True, quiet=True)
    plan = make_plan(built, opts, None)
    assert plan.points == max(built.grid.size, 1) and plan.chunks
    size = declared_size(built, opts.shard)
    if size is not None:
        size.check(opts.max_bytes)


def _dry(job: Path) -> object:
    return pytest.param(job, id=_name(job),
                        marks=[pytest.mark.slow] if _name(job) in SLOW_PROBES else [])


@pytest.mark.parametrize("job", [_dry(p) for p in JOBS])
def test_every_job_file_dry_run_succeeds(job: Path, tmp_path: Path, cli) -> None:
    out = tmp_path / "out.h5"
    result = cli("sweep", "-c", job, "-o", out, "--dry-run", "--json", "--jobs", "2")
    if _name(job) in GPU_ONLY and not _has_cuda():
        assert result.code == 0, result.err  # the plan and size, no estimate
        absent = json.loads(result.out)
        assert absent["absent_devices"] == ["cuda"] and absent["estimate"] is None
        assert absent["plan"]["points"] > 0 and absent["output_bytes"]["total"] > 0
        run = cli("sweep", "-c", job, "-o", out, "--jobs", "2")
        assert_one_line_error(run)  # the run itself is refused
        assert NO_GPU in run.err
        result = cli("sweep", "-c", job, "-o", out, "--dry-run", "--json", "--jobs", "2",
                     "-p", "device=auto")  # where to try it first: the same job on the CPU
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["estimate"]["seconds"] > 0
    counts = [axis["count"] for axis in data["axes"].values()]
    assert counts and math.prod(counts) == data["plan"]["points"]
    assert not out.exists() and not Path(f"{out}.parts").exists()
