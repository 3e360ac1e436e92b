"""The command line and the result store: single runs, schema, provenance, bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import h5py
import numpy as np
import pytest
import xarray as xr

from richlazy_cli.engine.store import REQUIRED_ATTRS

from ..conftest import assert_one_line_error


def listing(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def test_version_and_models(cli) -> None:
    version = cli("--version")
    assert version.code == 0 and version.out.startswith("richlazy 0.")
    listed = json.loads(cli("models", "--json").out)
    names = {m["name"] for m in listed}
    assert "single-neuron" in names
    sn = next(m for m in listed if m["name"] == "single-neuron")
    assert sn["actions"] == ["solve"]
    params = {p["name"]: p for p in sn["params"]}
    assert params["delta"]["default"] == 0 and params["beta_star"]["default"] == [0, 1]
    assert all({"type", "default", "unit", "help"} <= set(p) for p in sn["params"])
    table = cli("models")
    assert table.code == 0 and "single-neuron" in table.out


def test_single_solve_writes_labelled_file_with_provenance(tmp_path, cli, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = cli("solve", "single-neuron", "-p", "delta=1", "-p", "n_records=11")
    assert result.code == 0, result.err
    path = Path(result.out.strip())
    assert path.parent == Path("results") and path.name.startswith("single-neuron-solve-")
    assert path.exists()
    with xr.open_dataset(path, engine="h5netcdf") as ds:
        for attr in REQUIRED_ATTRS:
            assert attr in ds.attrs, attr
        params = json.loads(ds.attrs["params"])
        assert params["delta"] == 1.0 and params["n_records"] == 11 and params["t_max"] == 20
        assert json.loads(ds.attrs["command"])[:2] == ["richlazy", "solve"]
        assert json.loads(ds.attrs["grid"]) == {}
        assert ds.attrs["created"].endswith("Z")
        assert "numpy" in json.loads(ds.attrs["versions"])
        assert int(ds.attrs["complete"]) == 1
        assert "git_commit" in ds.attrs  # the tests run from a checkout
        for name, item in ds.variables.items():
            assert "long_name" in item.attrs, name
        assert ds.sizes["time"] == 11
        assert set(ds["solution_method"].values) == {"exact", "numeric"}  # CF: not .sel's
        assert int(ds["status"]) == 0
    with h5py.File(path, "r") as fh:
        assert "a" in fh and fh.attrs["model"] in ("single-neuron", b"single-neuron")
    assert not [p for p in Path("results").iterdir() if p.name.startswith(".")]  # no temp files


def test_existing_output_is_kept_without_force(tmp_path, cli) -> None:
    out = tmp_path / "r.h5"
    assert cli("solve", "single-neuron", "-o", out, "-q").code == 0
    before = out.read_bytes()
    assert_one_line_error(cli("solve", "single-neuron", "-p", "delta=2", "-o", out))
    assert out.read_bytes() == before
    assert cli("solve", "single-neuron", "-p", "delta=2", "-o", out, "--force", "-q").code == 0
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert json.loads(ds.attrs["params"])["delta"] == 2.0


def test_job_file_for_single_run(tmp_path, cli) -> None:
    job = tmp_path / "job.toml"
    job.write_text(
        'action = "solve"\nmodel = "single-neuron"\n[params]\ndelta = -1.0\nbeta0 = [1.0, 0.5]\n'
    )
    out = tmp_path / "j.h5"
    result = cli("solve", "-c", job, "-p", "n_records=5", "-o", out, "-q")
    assert result.code == 0, result.err
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        params = json.loads(ds.attrs["params"])
    assert params["delta"] == -1.0 and params["beta0"] == [1.0, 0.5] and params["n_records"] == 5


BAD_SOLVES = {
    "unknown model": ["single-nueron"],
    "unknown parameter": ["single-neuron", "-p", "detla=1"],
    "non-numeric value": ["single-neuron", "-p", "delta=abc"],
    "vector of wrong length": ["single-neuron", "-p", "beta0=1,2,3"],
    "beta0 = 0 with delta <= 0": ["single-neuron", "-p", "beta0=0,0", "-p", "delta=-1"],
    "t_max <= 0": ["single-neuron", "-p", "t_max=0"],
    "n_records < 2": ["single-neuron", "-p", "n_records=1"],
    "NaN": ["single-neuron", "-p", "delta=nan"],
    "X and y of mismatched shapes": ["single-neuron", "-p", "X=[[1,0],[0,1]]", "-p", "y=1,2,3"],
    "exact with non-whitened X": [
        "single-neuron",
        "-p",
        "X=[[0.5,1]]",
        "-p",
        "y=1.1",
        "-p",
        "method=exact",
    ],
    "unknown method": ["single-neuron", "-p", "method=fast"],
    "malformed -p": ["single-neuron", "-p", "delta"],
    "wrong action": ["single-neuron", "--bogus-option"],
}


@pytest.mark.parametrize("args", list(BAD_SOLVES.values()), ids=list(BAD_SOLVES))
def test_bad_solve_input(tmp_path, cli, monkeypatch, args) -> None:
    monkeypatch.chdir(tmp_path)
    result = cli("solve", *args)
    assert_one_line_error(result)
    assert listing(tmp_path) == set()


def test_unknown_parameter_suggests_closest(tmp_path, cli) -> None:
    result = cli("solve", "single-neuron", "-p", "detla=1", "-o", tmp_path / "o.h5")
    assert "did you mean delta" in result.err


def test_bad_output_locations(tmp_path, cli) -> None:
    assert_one_line_error(cli("solve", "single-neuron", "-o", "/proc/richlazy-test.h5"))
    assert_one_line_error(cli("solve", "single-neuron", "-o", tmp_path / "no" / "such" / "o.h5"))
    assert listing(tmp_path) == set()
    if os.geteuid() != 0:  # permission bits do not stop root
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        assert_one_line_error(cli("solve", "single-neuron", "-o", locked / "o.h5"))


def test_malformed_job_file(tmp_path, cli) -> None:
    job = tmp_path / "bad.toml"
    job.write_text("action = solve\n[params\n")
    result = cli("solve", "-c", job, "-o", tmp_path / "o.h5")
    assert_one_line_error(result)
    assert "not valid TOML" in result.err
    job.write_text('model = "single-neuron"\nflavour = 1\n')
    assert_one_line_error(cli("solve", "-c", job, "-o", tmp_path / "o.h5"))
    assert_one_line_error(cli("solve", "-c", tmp_path / "missing.toml"))
    assert listing(tmp_path) == {"bad.toml"}


def test_single_run_of_a_failing_point_is_recorded(tmp_path, toy_env, cli, monkeypatch) -> None:
    monkeypatch.setenv("RICHLAZY_TOY_FAIL", "1")
    out = tmp_path / "f.h5"
    result = cli("solve", "toy", "-p", "slope=1", "-p", "fail_at=1", "-o", out)
    assert result.code == 1 and "requested failure" in result.err
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert int(ds["status"]) == 2
        assert json.loads(ds.attrs["errors"])[0]["message"].startswith("RuntimeError")


def test_grid_coordinate_values_are_exact(tmp_path, toy_env, cli) -> None:
    out = tmp_path / "g.h5"
    specs = [
        "-g",
        "slope=logspace(-1,0.3,7)",
        "-g",
        "scale=geomspace(0.01,1,3)",
        "-g",
        "seed=range(2,8,3)",
        "-g",
        "label=a,b",
    ]
    assert cli("sweep", "train", "toy", *specs, "-o", out, "-q").code == 0
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        np.testing.assert_array_equal(ds["slope"].values, np.logspace(-1, 0.3, 7))
        np.testing.assert_array_equal(ds["scale"].values, np.geomspace(0.01, 1, 3))
        np.testing.assert_array_equal(ds["seed"].values, [2, 5])
        assert ds["slope"].attrs["spacing"] == "log" and ds["seed"].attrs["spacing"] == "linear"
        assert list(ds["label"].values) == ["a", "b"]
        assert ds["status"].shape == (7, 3, 2, 2)


def test_swept_parameter_that_moves_a_model_coordinate(tmp_path, cli) -> None:
    """Sweeping t_max moves the `time` coordinate: it becomes an index with per-point values."""
    out = tmp_path / "tm.h5"
    assert (
        cli(
            "sweep",
            "solve",
            "single-neuron",
            "-g",
            "t_max=10,20",
            "-p",
            "n_records=11",
            "-o",
            out,
            "-q",
        ).code
        == 0
    )
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        np.testing.assert_array_equal(ds["time"].values, np.arange(11))
        np.testing.assert_array_equal(
            ds["time_values"].sel(t_max=20.0).values, np.linspace(0, 20, 11)
        )
        np.testing.assert_array_equal(
            ds["time_values"].sel(t_max=10.0).values, np.linspace(0, 10, 11)
        )


def test_swept_parameter_that_changes_a_dimension_length_is_padded(tmp_path, cli) -> None:
    """n_records = 11, 21: every variable over time is laid out at 21 times, NaN beyond a
    point's own, with a ``padding`` attribute; the times are kept per point in time_values
    (docs/engine.md, "Grids that change an output's shape"; "Records")."""
    out = tmp_path / "nt.h5"
    result = cli("sweep", "solve", "single-neuron", "-g", "n_records=11,21", "--jobs", "1",
                 "-q", "-o", out)
    assert result.code == 0, result.err
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        loss = ds["loss"]
        assert loss.sizes["time"] == 21 and "time" in loss.attrs["padding"]
        assert np.isnan(loss.sel(n_records=11).values[..., 11:]).all()
        assert np.isfinite(loss.sel(n_records=11).values[..., :11]).all()
        assert np.isfinite(loss.sel(n_records=21).values).all()
        times = ds["time_values"].sel(n_records=11).values
        assert np.isnan(times[11:]).all() and np.isfinite(times[:11]).all()
    assert cli("store", "verify", out).code == 0


def test_integer_steps_that_differ_between_points_stay_integers(tmp_path, cli) -> None:
    """hermite train, n_records = 1, 2: each point's steps are kept in step_values as
    integers, padded with −1 (the fill value of an integer), not turned into text."""
    out = tmp_path / "steps.h5"
    result = cli("sweep", "train", "hermite", "-p", "d=6", "-p", "P=2", "-p", "m=3",
                 "-p", "steps=10", "-p", "lr=0.01", "-g", "n_records=1,2", "--jobs", "1",
                 "-q", "-o", out)
    assert result.code == 0, result.err
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        steps = ds["step_values"]
        assert steps.dtype.kind == "i"
        np.testing.assert_array_equal(steps.sel(n_records=1).values, [0, 10, -1])
        np.testing.assert_array_equal(steps.sel(n_records=2).values, [0, 1, 10])
    assert cli("store", "verify", out).code == 0
