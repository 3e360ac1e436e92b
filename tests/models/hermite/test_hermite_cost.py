"""The hermite cost model (docs/estimates.md) tells a solve from a train by the action, and
prices every grid point of the hermite job files as it priced them when
``tests/data/hermite_job_costs.json`` was recorded: the dry run's estimates of those jobs
(``richlazy sweep -c JOB --dry-run`` scales its probe's time by these costs) stay as they
are whatever parameters choose the implementation."""

from __future__ import annotations

import json

import numpy as np
import pytest

from richlazy_cli.engine.job import Job, read_job_file
from richlazy_cli.models.hermite.model import SGD_WORK_PER_SAMPLE, Hermite, expected_steps

from ...conftest import ROOT

RECORDED = json.loads((ROOT / "tests" / "data" / "hermite_job_costs.json").read_text())["jobs"]


@pytest.mark.parametrize("path", sorted(RECORDED))
def test_every_point_of_a_hermite_job_keeps_its_cost(path: str) -> None:
    job_file = read_job_file(ROOT / path)
    assert job_file.model == "hermite" and job_file.action == RECORDED[path]["action"]
    job = Job.build("hermite", job_file.action, job_file.params, list(job_file.grid.items()),
                    max_points=10**7)
    costs = [job.model.footprint(job.action, job.values(flat)).cost
             for flat in range(job.grid.size)]
    np.testing.assert_allclose(costs, RECORDED[path]["costs"], rtol=1e-12, atol=0)


def test_the_hermite_job_files_are_all_recorded() -> None:
    files = {str(path.relative_to(ROOT)) for path in sorted((ROOT / "jobs").rglob("*.toml"))
             if read_job_file(path).model == "hermite"}
    assert files == set(RECORDED)


def test_the_action_not_the_implementation_parameters_tells_solve_from_train() -> None:
    """The same values priced as a train: steps × batch × m × d × the implementation's work
    per sample, independent of the flow's horizon; as a solve: independent of SGD's steps."""
    solve = Hermite.resolve("solve", {"d": 32, "P": 4, "m": 8, "t_max": 300.0})
    assert Hermite.footprint("solve", solve).cost == Hermite.footprint(
        "solve", {**solve, "steps": 10 * solve["steps"]}).cost
    for name, per_sample in SGD_WORK_PER_SAMPLE.items():
        train = Hermite.resolve("train", {"d": 32, "P": 4, "m": 8, "batch": 3,
                                          "implementation": name})
        cost = Hermite.footprint("train", train).cost
        assert cost == pytest.approx(expected_steps(train) * 3 * 8 * 32 * per_sample * 1e-9,
                                     rel=1e-15)
        assert cost == Hermite.footprint("train", {**train, "t_max": 10 * train["t_max"]}).cost
    assert SGD_WORK_PER_SAMPLE["numpy"] == 15 * SGD_WORK_PER_SAMPLE["numba"]
