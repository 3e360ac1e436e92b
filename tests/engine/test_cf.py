"""Result files read by CF tools: conventions, units, coordinates, names, history; and files
of the earlier layout (``richlazy-1``) still open, report, verify and merge."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pint
import pytest
import xarray as xr

from richlazy_cli.engine.cf import CONVENTIONS, RENAMES
from richlazy_cli.engine.store import open_result, verify

cf_xarray = pytest.importorskip("cf_xarray")

SELECTION_KEYWORDS = {"method", "tolerance", "drop", "indexers"}
"""Keywords of ``Dataset.sel`` that a dimension of that name would be swallowed by."""


def _raw(path: Path) -> xr.Dataset:
    return xr.open_dataset(path, engine="h5netcdf").load()


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """A single-neuron solve (a ``method`` dimension), a two-layer training (``teacher`` and
    ``dim`` without coordinates in the model, a data variable ``time``) and a linear sweep
    (a ``rank`` coordinate), written by the CLI."""
    from richlazy_cli.cli.app import run

    folder = tmp_path_factory.mktemp("cf")
    out = {
        "sn": folder / "sn.h5",
        "two": folder / "two.h5",
        "lin": folder / "lin.h5",
    }
    assert run(["sweep", "solve", "single-neuron", "-g", "delta=-1,0,1", "-p", "beta0=1,0.5",
                "-p", "n_records=11", "-o", str(out["sn"]), "-q", "--jobs", "1"]) == 0
    assert run(["train", "two-layer", "-p", "d=3", "-p", "h=8", "-p", "n=10", "-p", "steps=50",
                "-p", "n_test=20", "-o", str(out["two"]), "-q"]) == 0
    from richlazy_cli.models.base import get_model

    example = get_model("linear").examples["solve"][0]
    args = [f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in example.items()]
    assert run(["solve", "linear", *[a for kv in args for a in ("-p", kv)],
                "-o", str(out["lin"]), "-q"]) == 0
    return out


@pytest.mark.system
def test_conventions_title_source_references(files) -> None:
    for path in files.values():
        ds = _raw(path)
        assert ds.attrs["Conventions"] == CONVENTIONS
        assert ds.attrs["Conventions"].split()[0] == "CF-1.11"
        assert ds.attrs["title"].startswith("richlazy ")
        assert ds.attrs["source"].startswith("richlazy ")
        assert "et al." in ds.attrs["references"]


def test_every_units_attribute_parses_with_pint(files) -> None:
    """UDUNITS-style units: pint parses each, and a dimensionless number says "1"."""
    registry = pint.UnitRegistry()
    seen = 0
    for path in files.values():
        ds = _raw(path)
        for name, item in ds.variables.items():
            if item.dtype.kind in "OUSb":
                assert "units" not in item.attrs, name
                continue
            assert "units" in item.attrs, f"{path.name}: {name} has no units"
            registry.parse_units(item.attrs["units"])  # raises on "steps", "time", ...
            seen += 1
        assert ds["status"].attrs["units"] == "1"
        assert ds["elapsed"].attrs["units"] == "s"
    assert seen > 20


def test_cf_xarray_decodes_and_every_dimension_has_a_coordinate(files) -> None:
    for path in files.values():
        ds = _raw(path)
        for dim in ds.dims:
            assert dim in ds.coords, f"{path.name}: dimension {dim} has no coordinate"
        assert ds.cf.coordinates is not None  # cf_xarray reads the attributes
        guessed = ds.cf.guess_coord_axis()
        assert set(guessed.dims) == set(ds.dims)
        for name, item in ds.variables.items():
            assert item.attrs.get("long_name"), name
            assert item.attrs.get("label"), name
            assert len(item.attrs["label"]) <= 45, (name, item.attrs["label"])


def test_no_name_collides_with_xarray_selection_keywords(files) -> None:
    ds = _raw(files["sn"])
    assert "method" not in ds.dims and "method" not in ds.variables
    assert RENAMES["method"] in ds.dims
    exact = ds.sel({RENAMES["method"]: "exact"})
    assert RENAMES["method"] not in exact.dims
    for path in files.values():
        raw = _raw(path)
        for name in [*raw.dims, *raw.variables]:
            assert name not in SELECTION_KEYWORDS, (path.name, name)
            assert not hasattr(xr.Dataset, str(name)), (path.name, name)
    two = _raw(files["two"])
    assert "time" not in two.data_vars  # a data variable "time" is not the time coordinate
    assert "step_time" in two.data_vars


def test_history_is_cf_text_with_the_json_record_beside(files) -> None:
    ds = _raw(files["sn"])
    assert isinstance(ds.attrs["history"], str)
    line = ds.attrs["history"].splitlines()[0]
    assert "richlazy sweep solve single-neuron" in line and line[:4].isdigit()
    runs = json.loads(ds.attrs["richlazy_history"])
    assert [r["run"] for r in runs] == ["start"]


def test_internal_layout_is_restored_on_reading(files) -> None:
    ds = open_result(files["sn"])
    assert "method" in ds.dims and "solution_method" not in ds.dims
    assert isinstance(json.loads(ds.attrs["history"]), list)
    assert "time" in open_result(files["two"]).data_vars
    assert "rank" in open_result(files["lin"]).dims
    assert verify(files["sn"]) == []


def test_a_cf_subset_is_a_valid_subset(files, tmp_path) -> None:
    """``ds.isel(delta=slice(0, 2))`` written back (what ``ncks -d delta,0,1`` does), with a
    line appended to history as CF tools do: verify accepts it, and history survives."""
    ds = _raw(files["sn"])
    sub = ds.isel(delta=slice(0, 2))
    sub.attrs["history"] = ds.attrs["history"] + "\nTue Dec  1 12:00:00 2026: ncks -d delta,0,1"
    path = tmp_path / "subset.h5"
    sub.to_netcdf(path, engine="h5netcdf")
    assert verify(path) == []
    back = open_result(path)
    assert back.sizes["delta"] == 2 and "method" in back.dims
    assert "ncks" in back.attrs["history_text"]


def _old_layout(path: Path, dest: Path) -> Path:
    """``path`` rewritten as richlazy wrote files before the CF layer (richlazy-1)."""
    ds = open_result(path)  # the internal layout: method, rank, JSON history
    ds.attrs["Conventions"] = "richlazy-1"
    ds.attrs.pop("history_text", None)
    ds.to_netcdf(dest, engine="h5netcdf")
    raw = _raw(dest)
    assert "richlazy_renamed" not in raw.attrs and isinstance(json.loads(raw.attrs["history"]),
                                                              list)
    return dest


@pytest.mark.system
def test_old_layout_files_open_verify_report_and_merge(files, tmp_path, cli) -> None:
    import richlazy

    old = _old_layout(files["sn"], tmp_path / "old.h5")
    assert verify(old) == []
    internal = open_result(old)
    assert "method" in internal.dims
    view = richlazy.open(old)  # the API shows the file layout, whatever the file's age
    assert "solution_method" in view.dims and "method" not in view.dims
    new = open_result(files["sn"])
    for name in new.data_vars:
        np.testing.assert_array_equal(internal[name].values, new[name].values)
    report = cli("report", str(old), "-o", str(tmp_path / "rep"), "-q")
    assert report.code == 0, report.err
    merged = cli("store", "merge", str(tmp_path / "merged.h5"), str(old), "-q")
    assert merged.code == 0, merged.err
    again = _raw(tmp_path / "merged.h5")
    assert again.attrs["Conventions"] == CONVENTIONS and "solution_method" in again.dims
    assert [r["run"] for r in json.loads(again.attrs["richlazy_history"])] == ["start", "merge"]


@pytest.mark.integration
def test_report_takes_and_prints_the_names_in_the_file(files, tmp_path, cli) -> None:
    """``--at``, ``--var`` and ``--x`` take the names a user reads in the file
    (``solution_method``, ``step_time``) and, as before, the models' (``method``, ``time``);
    ``summary.json`` names variables and dimensions as the file does."""
    by_file = cli("report", files["sn"], "-o", tmp_path / "a", "--at",
                  f"{RENAMES['method']}=exact", "-q")
    assert by_file.code == 0, by_file.err
    by_model = cli("report", files["sn"], "-o", tmp_path / "b", "--at", "method=exact", "-q")
    assert by_model.code == 0, by_model.err
    for folder in ("a", "b"):
        summary = json.loads((tmp_path / folder / "summary.json").read_text())
        dims = {dim for stats in summary["variables"]["sn"].values()
                for arg in (stats["argmin"], stats["argmax"]) if arg for dim in arg}
        assert RENAMES["method"] in dims and "method" not in dims
    for name in ("step_time", "time"):
        result = cli("report", files["two"], "-o", tmp_path / name, "--var", name, "-q")
        assert result.code == 0, result.err
        summary = json.loads((tmp_path / name / "summary.json").read_text())
        assert list(summary["variables"]["two"]) == ["step_time"]
        assert {f["var"] for f in summary["figures"]} == {"step_time"}
    wrong = cli("report", files["sn"], "-o", tmp_path / "c", "--at", "nosuch=1")
    assert wrong.code == 2 and RENAMES["method"] in wrong.err
    assert not re.search(r"\bmethod\b", wrong.err)  # the dimensions listed as in the file
