"""Every job file of jobs/ still validates, unchanged, grid point by grid point (the older
``backend`` and ``loop`` parameters are accepted aliases of ``implementation``; docs/engine.md,
"Implementations and devices"). Nothing is computed."""

from __future__ import annotations

from pathlib import Path

import pytest

from richlazy_cli.engine.job import Job, read_job_file
from richlazy_cli.errors import BadInput
from richlazy_cli.numerics.compute import NO_GPU, gpu_workers

from ..conftest import ROOT

JOBS = sorted((ROOT / "jobs").rglob("*.toml"))
REFUSED: dict[str, str] = {}
"""Job files refused on this machine, with the refusal's words."""
if gpu_workers("cuda") is None:
    REFUSED["fig1b-gpu"] = NO_GPU  # a GPU job on a machine without one


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
    if "backend" in job_file.params:  # the alias chose the implementation
        assert impl is not None and (impl.name == "torch") == (
            job_file.params["backend"] == "torch")
