"""Result files under the checker data centres use: the IOOS compliance-checker at
``cf:1.11`` on one result file of every family and action (tiny sweeps of each model's first
example over two values, written in-process), with no finding but the ones docs/engine.md
("The CF layer") lists with their reasons; no ``_FillValue`` on a coordinate variable; model
time that no reader takes for calendar time; and the model's own attributes back on reading."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5netcdf
import numpy as np
import pytest
import xarray as xr

from richlazy_cli.engine.cf import MODEL_TIME_COMMENT, coordinate_encoding
from richlazy_cli.engine.store import open_result, verify
from richlazy_cli.models.base import all_models, get_model

from ..conftest import ROOT

pytest.importorskip("compliance_checker")
cf_xarray = pytest.importorskip("cf_xarray")
pytest.importorskip("torch")  # the practice families (rhm, cnn, grokking) are among "every"

pytestmark = pytest.mark.integration

FAMILIES = {"single-neuron", "two-layer", "linear", "diagonal", "hermite", "rhm", "cnn",
            "grokking"}

DOCUMENTED = {
    "§2.1 Filename": 'must end with ".nc"',
    "§5.1 Independent Latitude, Longitude, Vertical, and Time Axes":
        "Coordinate variable 'time' should have standard_name='time'",
}
"""The findings docs/engine.md lists with their reasons: each section and the one message it
may carry (the ``.h5`` suffix; the checker's rule that a dimension named ``time`` is calendar
time)."""
CHECKER_FAULTS = {"check_coordinate_variables_strict_monotonicity": TypeError}
"""Checks that raise inside the checker on a string coordinate (``solution_method``):
the checker's fault, listed in docs/engine.md too."""


def _pairs() -> list[tuple[str, str]]:
    models = {name: get_model(name) for name in all_models() if name in FAMILIES}
    return [(name, action) for name, model in sorted(models.items())
            for action in model.actions]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    """One result file per (family, action): the model's first example, swept over two seeds
    (or, without a seed, two values of its first floating-point parameter)."""
    import richlazy

    folder = tmp_path_factory.mktemp("checker")
    out = {}
    for name, action in _pairs():
        model = get_model(name)
        values = dict(model.examples[action][0])
        if "seed" in {p.name for p in model.params}:
            values.pop("seed", None)
            grid: dict[str, Any] = {"seed": [0, 1]}
        else:
            key = next(k for k, v in values.items() if isinstance(v, float))
            first = values.pop(key)
            grid = {key: [first, first / 2]}
        path = folder / f"{name}-{action}.h5"
        richlazy.sweep(action, name, grid=grid, params=values, output=path, jobs=1)
        out[name, action] = path
    return out


def _check(path: Path) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    """The failing results of ``cf:1.11`` on ``path`` (section, message), every weight, and
    the checks that raised inside the checker."""
    from compliance_checker.runner import CheckSuite

    suite = CheckSuite()
    suite.load_all_available_checkers()
    ds = suite.load_dataset(str(path))
    try:
        results, raised = suite.run_all(ds, ["cf:1.11"], skip_checks=[])["cf:1.11"]
    finally:
        ds.close()
    failing = []
    for result in results:
        score, out_of = result.value if isinstance(result.value, tuple) else (
            int(bool(result.value)), 1)
        if score < out_of:
            failing += [(str(result.name), str(msg)) for msg in result.msgs] or [
                (str(result.name), "")]
    return failing, {name: exc for name, (exc, _tb) in raised.items()}


def test_every_family_and_action_has_a_file(files: dict[tuple[str, str], Path]) -> None:
    assert {name for name, _ in files} == FAMILIES
    assert len(files) == 11  # solve and train where a family has both


def test_compliance_checker_finds_only_the_documented(
        files: dict[tuple[str, str], Path], tmp_path: Path) -> None:
    seen: set[str] = set()
    for (name, action), path in files.items():
        failing, raised = _check(path)
        print(f"{name} {action}: {failing} {sorted(raised)}")  # shown with pytest -s
        for section, message in failing:
            assert section in DOCUMENTED and DOCUMENTED[section] in message, (
                name, action, section, message)
            seen.add(section)
        assert "§2.1 Filename" in {s for s, _ in failing}  # the suffix, on every .h5 file
        for check, exc in raised.items():
            assert isinstance(exc, CHECKER_FAULTS.get(check, ())), (name, action, check, exc)
            assert "solution_method" in xr.open_dataset(path, engine="h5netcdf").coords
    assert seen == set(DOCUMENTED)  # each listed finding still happens (else: update the docs)
    # the same file named .nc has no §2.1 finding: the rest is the file's
    nc = tmp_path / "single-neuron.nc"
    nc.write_bytes(files["single-neuron", "solve"].read_bytes())
    assert {s for s, _ in _check(nc)[0]} == {"§5.1 Independent Latitude, Longitude, Vertical, "
                                              "and Time Axes"}
    assert verify(nc) == []


def test_the_documented_findings_are_in_the_docs() -> None:
    text = (ROOT / "docs/engine.md").read_text()
    section = text[text.index("### The CF layer"):]
    section = section[:section.index("\n## ")]
    for finding in ("§2.1", "§5.1", "strict monotonicity", "`.nc`"):
        assert finding in section, finding


def test_no_coordinate_variable_has_a_fill_value(files: dict[tuple[str, str], Path]) -> None:
    coords = 0
    for path in files.values():
        with h5netcdf.File(path, "r") as f:
            for name, item in f.variables.items():
                if item.dimensions == (name,):
                    assert "_FillValue" not in item.attrs, (path.name, name)
                    coords += 1
    assert coords >= 30
    # the rule itself: every coordinate variable, floating-point or not, and nothing else
    ds = xr.Dataset({"y": ("t", np.zeros(3))}, coords={"t": [0.5, 1.0, 2.0], "k": ("t", [1, 2,
                                                                                        3])})
    assert coordinate_encoding(ds) == {"t": {"_FillValue": None}}


def test_model_time_is_not_calendar_time(files: dict[tuple[str, str], Path]) -> None:
    with_time = [path for path in files.values()
                 if "time" in xr.open_dataset(path, engine="h5netcdf").dims]
    assert len(with_time) >= 4  # the flows: single-neuron, linear, diagonal, hermite
    for path in with_time:
        ds = xr.open_dataset(path, engine="h5netcdf")  # decode_times on: stays a number
        time = ds["time"]
        assert time.dtype == np.float64, (path.name, time.dtype)
        assert time.attrs["units"] == "1" and time.attrs["comment"] == MODEL_TIME_COMMENT
        assert time.attrs["long_name"].lower() != "time" and time.attrs["long_name"]
        for key in ("axis", "standard_name", "calendar"):
            assert key not in time.attrs, (path.name, key)
        assert "T" not in ds.cf.axes and "time" not in ds.cf.coordinates, path.name
        # reading gives the model's attributes back: no comment, the model's long_name
        internal = open_result(path)["time"].attrs
        assert "comment" not in internal and "richlazy_long_name" not in internal
    sn = open_result(files["single-neuron", "solve"])["time"].attrs
    assert sn["long_name"] == "time" and sn["units"] == "gradient-flow time"
