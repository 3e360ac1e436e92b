"""The record grid (richlazy_cli/numerics/records.py): every grid ends at the run's length, so
a run's horizon is its grid's last point whatever the count."""

from __future__ import annotations

import numpy as np
import pytest

from richlazy_cli.models.base import Batch
from richlazy_cli.models.hermite.model import Hermite
from richlazy_cli.numerics.records import record_grid


@pytest.mark.parametrize("count", [1, 2, 5, 40])
def test_a_log_time_grid_is_zero_then_count_points_ending_at_last(count: int) -> None:
    grid = record_grid(20.0, count, first=0.002)
    assert grid[0] == 0.0 and grid[-1] == 20.0 and len(grid) == count + 1
    if count > 1:  # geometric from first: constant ratio between neighbours
        ratios = grid[2:] / grid[1:-1]
        assert grid[1] == pytest.approx(0.002)
        np.testing.assert_allclose(ratios, (20.0 / 0.002) ** (1.0 / (count - 1)))


@pytest.mark.parametrize("count", [1, 2, 7])
def test_a_log_step_grid_ends_at_the_last_step(count: int) -> None:
    grid = record_grid(120, count)
    assert grid[0] == 0 and grid[-1] == 120 and grid.dtype == np.int64
    assert np.all(np.diff(grid) > 0)


def test_with_last_ends_at_the_last_step_whatever_the_count() -> None:
    """The families that record ``0``, log-spaced points and the last (rhm, two-layer) ask
    ``n_records − 1`` points: ``n_records`` points in all, 2 of them at ``n_records = 2``."""
    assert list(record_grid(5, 0, with_last=True)) == [0, 5]
    assert list(record_grid(5, 1, with_last=True)) == [0, 5]
    assert list(record_grid(100, 3, with_last=True)) == [0, 1, 10, 100]


def test_hermite_with_one_record_still_runs_to_its_horizon() -> None:
    """One output time after 0 is t_max, not the first log-spaced time t_max·10^-decades:
    the flow runs to t_max and SGD runs every step asked."""
    solve = Hermite.resolve("solve", {"d": 6, "P": 2, "m": 3, "t_max": 20.0, "n_records": 1})
    flow = Hermite().solve(Batch.from_points(Hermite, [solve]))
    assert list(flow.time.values) == [0.0, 20.0] and float(flow.t_stop[0]) == 20.0
    train = Hermite.resolve("train", {"d": 6, "P": 2, "m": 3, "steps": 120, "n_records": 1,
                                      "batch": 2})
    sgd = Hermite().train(Batch.from_points(Hermite, [train]))
    assert list(sgd.step.values) == [0, 120] and int(sgd.steps_run[0]) == 120


def test_rhm_and_two_layer_record_as_many_points_as_asked() -> None:
    from richlazy_cli.models.rhm.model import checkpoint_epochs
    from richlazy_cli.models.two_layer.model import checkpoint_steps

    for n in (2, 3, 5):
        assert checkpoint_epochs(300, n).size == n and checkpoint_epochs(300, n)[-1] == 300
        assert checkpoint_steps(300, n, None).size == n
