"""Every job file of jobs/ (jobs/paper/ included) validates, unchanged, grid point by grid
point, and speaks the parameter names of now: an older name (docs/usage.md, "Older parameter
names") is an error here. So do the paper figures' ``tiny`` overrides of them
(richlazy_cli/figures/registry.py). Nothing is computed."""

from __future__ import annotations

from pathlib import Path

import pytest

from richlazy_cli.engine.job import Job, Request, prepare_sweep, read_job_file
from richlazy_cli.errors import BadInput
from richlazy_cli.figures.registry import REGISTRY
from richlazy_cli.numerics.compute import NO_GPU, gpu_workers

from ..conftest import ROOT

JOBS = sorted((ROOT / "jobs").rglob("*.toml"))
REFUSED: dict[str, str] = {}
"""Job files refused on this machine, with the refusal's words."""
if gpu_workers("cuda") is None:
    REFUSED["fig1b-gpu"] = NO_GPU  # a GPU job on a machine without one


CURRENT_NAMES_ONLY = pytest.mark.filterwarnings(
    "error::richlazy_cli.params.RichlazyDeprecationWarning")
"""An older parameter name is an error, not a warning."""


@CURRENT_NAMES_ONLY
@pytest.mark.parametrize(
    "path", JOBS, ids=[str(p.relative_to(ROOT / "jobs").with_suffix("")) for p in JOBS])
def test_the_job_file_validates(path: Path) -> None:
    if path.stem in REFUSED:
        with pytest.raises(BadInput) as refusal:
            _build(path)
        assert REFUSED[path.stem] in str(refusal.value)
        return
    _build(path)


def _build(path: Path) -> None:
    job_file = read_job_file(path)
    assert job_file.model and job_file.action
    job = Job.build(job_file.model, job_file.action, job_file.params,
                    list(job_file.grid.items()), max_points=10**7)
    values = job.values(0)
    impl = job.model.implementation(values, job.action)
    if "implementation" in job_file.params:
        assert impl is not None and impl.name == job_file.params["implementation"]


TINY = sorted({(job, tuple(over.items())) for f in REGISTRY for job, over in f.tiny.items()})


@CURRENT_NAMES_ONLY
@pytest.mark.parametrize("job, over", TINY, ids=[f"{job}-{i}" for i, (job, _) in
                                                  enumerate(TINY)])
def test_the_tiny_overrides_of_the_paper_figures_validate(job: str, over: tuple[tuple[str, str],
                                                                                  ...],
                                                           tmp_path: Path) -> None:
    """As ``tests/figures/test_paper_figures.py`` runs them: ``-p NAME=VALUE`` and
    ``-g NAME=SPEC`` (``grid.NAME``) over the job file."""
    params = [f"{k}={v}" for k, v in over if not k.startswith("grid.")]
    grid = [f"{k[5:]}={v}" for k, v in over if k.startswith("grid.")]
    built, _, _ = prepare_sweep(Request(params=params, grid=grid, config=ROOT / job,
                                        run={"output": str(tmp_path / "out.h5")}))
    built.values(0)
