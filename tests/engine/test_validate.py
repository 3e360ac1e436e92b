"""The memoised point checker gives exactly the verdicts of checking every point."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from richlazy_cli.engine.grid import Grid, GridDim
from richlazy_cli.engine.job import Job
from richlazy_cli.engine.validate import CaseTree, PointChecker, written_values
from richlazy_cli.errors import BadInput
from richlazy_cli.models.base import Model


class Branchy(Model):
    """A check whose reads depend on the values: ``b`` is read only when ``a`` > 1, ``c``
    only when ``mode`` is "strict"; it writes a derived value ``total``."""

    name = "branchy"

    @classmethod
    def check(cls, action: str, values: dict[str, Any]) -> None:
        if values["a"] > 1 and values["b"] == 0:
            raise BadInput(f"b = 0 needs a <= 1 (a = {values['a']})")
        if values["mode"] == "strict" and values["c"] < 0:
            raise BadInput("strict needs c >= 0")
        values["total"] = values["a"] + (values["c"] if values["mode"] == "strict" else 0)


class Enumerating(Model):
    name = "enumerating"
    calls = 0

    @classmethod
    def check(cls, action: str, values: dict[str, Any]) -> None:
        cls.calls += 1
        if sum(1 for k in values if values[k] is None) > 1:
            raise BadInput("too many None")


def direct(model: type[Model], base: dict[str, Any], point: dict[str, Any]) -> Any:
    values = dict(base)
    values.update(point)
    try:
        model.prepare("solve", values)
    except BadInput as exc:
        return ("error", str(exc))
    return ("ok", values)


def prepared_afresh(job: Job, flat: int) -> dict[str, Any]:
    """A point's values prepared directly (not from the kept cases)."""
    values = dict(job.base)
    values.update(job.grid.point(flat))
    job.model.prepare(job.action, values)
    return values


def memoised(checker: PointChecker, point: dict[str, Any], at: tuple[int, ...]) -> Any:
    try:
        return ("ok", checker.check(point, at))
    except BadInput as exc:
        return ("error", str(exc))


BRANCHY_GRIDS = dict(
    a=st.lists(st.integers(-2, 3), min_size=1, max_size=4, unique=True),
    b=st.lists(st.integers(0, 2), min_size=1, max_size=3, unique=True),
    c=st.lists(st.integers(-1, 2), min_size=1, max_size=3, unique=True),
    mode=st.sampled_from(["strict", "loose"]),
    order=st.permutations(["a", "b", "c"]),
)
"""Grids of Branchy's three axes in any order, and its mode (hypothesis strategies)."""


@settings(max_examples=60, deadline=None)
@given(**BRANCHY_GRIDS)
def test_memoised_verdicts_equal_direct_checks(a, b, c, mode, order) -> None:
    grid = {"a": a, "b": b, "c": c}
    names = list(order)
    base = {"a": 0, "b": 0, "c": 0, "mode": mode}
    checker = PointChecker(Branchy, "solve", base, names)
    for at in itertools.product(*(range(len(grid[n])) for n in names)):
        point = {n: grid[n][i] for n, i in zip(names, at, strict=True)}
        assert memoised(checker, point, at) == direct(Branchy, base, point)
    # the check runs once per distinct case it can tell apart, never more than once per point
    assert checker.runs <= len(a) * len(b) * len(c)
    if mode == "loose":  # c is never read, so it never multiplies the runs
        assert checker.runs <= len(a) * len(b)


def test_unread_dimensions_cost_one_check() -> None:
    base = {"a": 0, "b": 1, "c": 0, "mode": "loose"}
    checker = PointChecker(Branchy, "solve", base, ["c"])
    for i in range(1000):
        assert checker.check({"c": i}, (i,))["c"] == i
    assert checker.runs == 1


def test_enumerating_check_runs_at_every_point() -> None:
    Enumerating.calls = 0
    checker = PointChecker(Enumerating, "solve", {"x": None, "y": 1}, ["y"])
    for i in range(5):
        checker.check({"y": i}, (i,))
    assert Enumerating.calls == 5
    with pytest.raises(BadInput):
        PointChecker(Enumerating, "solve", {"x": None, "y": None}, ["y"]).check({"y": None}, (0,))


def test_real_model_first_bad_point_is_reported() -> None:
    """single-neuron: beta0 = 0 needs delta > 0; the memo must report the first such point."""
    with pytest.raises(BadInput, match=r"at grid point delta=-1\.0, eta_a=0\.5: .*beta0 = 0"):
        Job.build(
            "single-neuron",
            "solve",
            {"beta0": "0,0", "n_records": 3},
            [("delta", "-1,1"), ("eta_a", "0.5,1")],
        )
    job = Job.build(
        "single-neuron", "solve", {"n_records": 3},
        [("delta", "linspace(-1,1,50)"), ("eta_a", "1,2")],
    )
    for flat in range(job.grid.size):  # kept sets equal a direct check of every point
        kept = job.checked_values([flat])[0]
        fresh = prepared_afresh(job, flat)
        assert kept.keys() == fresh.keys()
        for key, value in kept.items():
            assert np.array_equal(np.asarray(value), np.asarray(fresh[key]))


def test_memo_is_bounded(monkeypatch) -> None:
    """Past MAX_RECORDS verdicts a table stops growing; points are then checked directly."""
    import richlazy_cli.engine.validate as validate

    monkeypatch.setattr(validate, "MAX_RECORDS", 10)
    base = {"a": 0, "b": 1, "c": 0, "mode": "strict"}
    checker = PointChecker(Branchy, "solve", base, ["c"])  # strict mode reads c: one run each
    for i in range(30):
        assert checker.check({"c": i}, (i,))["total"] == i
    assert sum(len(table) for _, table in checker.records) == 10
    assert checker.runs == 30
    for i in range(10):  # the recorded ones are still answered from the memo
        checker.check({"c": i}, (i,))
    assert checker.runs == 30


# -- the whole grid by its axes (CaseTree), as Job.build (prepared_cases) and --dry-run use it -----
def _grid(**axes: list[Any]) -> Grid:
    return Grid(tuple(GridDim(n, "", tuple(v), "list") for n, v in axes.items()))


@settings(max_examples=60, deadline=None)
@given(**BRANCHY_GRIDS)
def test_case_tree_gives_every_point_its_direct_verdict(a, b, c, mode, order) -> None:
    axes = {"a": a, "b": b, "c": c}
    grid = _grid(**{n: axes[n] for n in order})
    base = {"a": 0, "b": 0, "c": 0, "mode": mode}
    visited: list[tuple[int, ...]] = []
    tree = CaseTree(grid, base, written_values(Branchy, "solve"),
                    lambda fixed, first, outcome: visited.append(first))
    points = list(itertools.product(*(range(d.size) for d in grid.dims)))
    for at in points:
        point = {d.name: d.values[i] for d, i in zip(grid.dims, at, strict=True)}
        outcome = tree.outcome(at)
        verdict = (("error", str(outcome)) if isinstance(outcome, BadInput)
                   else ("ok", {**base, **point, **outcome}))
        assert verdict == direct(Branchy, base, point)
    # the leaves' boxes partition the grid, and the check never runs more than once per point
    assert tree.leaves == len(visited) <= len(points)
    assert tree.runs <= len(points)
    if mode == "loose":  # c is never read, so it never multiplies the cases
        assert tree.runs <= len(a) * len(b)


def test_the_first_bad_point_in_grid_order_is_reported() -> None:
    """Cases are explored along the axes the check reads, not in C order; the message must
    still name the first bad point in C order, as a point-by-point check would."""
    job_args = ("single-neuron", "solve", {"beta0": "0,0", "n_records": 3})
    grid = [("eta_a", "0.5,1"), ("delta", "1,-1,-2")]  # delta is read; eta_a is not
    with pytest.raises(BadInput, match=r"at grid point eta_a=0\.5, delta=-1\.0: "):
        Job.build(*job_args, grid)


def test_a_million_points_are_checked_without_building_them(monkeypatch) -> None:
    """A 10⁶-point grid whose check reads no swept parameter: one check, no dict per point,
    and the validation's memory stays far below a per-point representation (which took
    hundreds of MB)."""
    import tracemalloc

    from richlazy_cli.engine import grid as grid_module

    built = []
    points = grid_module.Grid.points
    monkeypatch.setattr(grid_module.Grid, "points",
                        lambda self, flats: built.append(len(flats)) or points(self, flats))
    tracemalloc.start()
    job = Job.build("single-neuron", "solve", {"n_records": 3},
                    [("delta", "linspace(-1,1,1000)"), ("eta_a", "linspace(0.5,1,1000)")])
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert job.grid.size == 10**6
    assert job.cases is not None and job.cases.runs == 1
    assert sum(built) == 0
    assert peak < 20e6, peak
    # the kept cases answer any point exactly as a direct check
    for flat in (0, 123_456, 10**6 - 1):
        kept, fresh = job.checked_values([flat])[0], prepared_afresh(job, flat)
        assert kept.keys() == fresh.keys()
        assert all(np.array_equal(np.asarray(kept[k]), np.asarray(fresh[k])) for k in kept)


REPLACED = [
    ("single-neuron", "solve", {"a0": "1", "w0": "1,0", "t_max": "2"}, [("delta", "-1,0,1")],
     "parameter delta: a0 replaces it"),
    ("single-neuron", "solve", {"alpha": "0.1", "s": "0.5"}, [("delta", "-1,1")],
     "parameter delta: alpha replaces it"),
    ("single-neuron", "solve", {"delta": "5", "a0": "1", "w0": "1,0"}, [],
     "parameter delta: a0 replaces it"),
    ("hermite", "solve", {"a": "1,0.5", "P": "2", "d": "4", "m": "2"}, [("beta", "0.5,1")],
     "parameter beta: a replaces it"),
    ("hermite", "solve", {"P": "2", "d": "4", "m": "2", "beta": "1"}, [("a", "1,0.5")],
     "parameter beta: a replaces it"),
    ("two-layer", "train", {"records": "0,5,20"}, [("n_records", "3,5")],
     "parameter n_records: records replaces it"),
]


@pytest.mark.parametrize(("model", "action", "params", "grid", "message"), REPLACED)
def test_a_parameter_beside_one_that_replaces_it_is_refused(
        model: str, action: str, params: dict[str, str], grid: list[tuple[str, str]],
        message: str) -> None:
    """Given or swept beside the parameter that replaces it (``Model.overrides``), a value
    would be computed over: every point of a sweep over it would compute the same thing
    under different labels, so the job is refused before anything runs."""
    with pytest.raises(BadInput, match=message):
        Job.build(model, action, params, grid)


def test_the_replacing_parameter_alone_runs_as_before() -> None:
    job = Job.build("single-neuron", "solve", {"a0": "1", "w0": "1,0", "n_records": "3"},
                    [("eta_a", "0.5,1")])
    deltas = [job.checked_values([flat])[0]["delta"] for flat in range(job.grid.size)]
    assert deltas == [1.0 - 0.5, 1.0 - 1.0]  # δ = η_w a0² − η_a |w0|², derived per point
