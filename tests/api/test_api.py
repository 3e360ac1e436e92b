"""The Python API (``import richlazy``): the command line's runs, bit for bit, as Datasets;
shard files as grids; reports; models found through entry points; the example notebook."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import richlazy
from richlazy_cli.engine.store import open_result

ROOT = Path(__file__).resolve().parents[2]
AZULAY_FC = ROOT / "jobs" / "azulay-fc.toml"


def _same_data(a: xr.Dataset, b: xr.Dataset) -> None:
    assert set(a.data_vars) == set(b.data_vars)
    for name in a.data_vars:
        if name == "elapsed":  # wall time: not a result
            continue
        assert a[name].dims == b[name].dims, name
        assert a[name].values.tobytes() == b[name].values.tobytes(), name
    for name in a.coords:
        np.testing.assert_array_equal(a[name].values, b[name].values)


def test_sweep_of_a_job_file_equals_the_cli_bitwise(tmp_path, cli) -> None:
    out = tmp_path / "cli.h5"
    assert cli("sweep", "-c", AZULAY_FC, "-o", out, "-q", "--jobs", "2").code == 0
    from_cli = richlazy.open(out)
    from_api = richlazy.sweep(config=AZULAY_FC, jobs=1, chunk_size=3)  # other chunking too
    _same_data(from_cli, from_api)
    assert from_api.attrs["Conventions"].startswith("CF-1.11")
    assert json.loads(from_api.attrs["grid"]) == {"alpha": "0.01,0.1", "s": "0,0.5,0.95"}


def test_sweep_with_python_values_equals_the_cli(tmp_path, cli) -> None:
    out = tmp_path / "g.h5"
    args = ["sweep", "solve", "single-neuron", "-g", "delta=linspace(-1,1,3)", "-g",
            "t_max=5,10", "-p", "beta0=1,0.5", "-p", "n_records=21", "-o", out, "-q"]
    assert cli(*args).code == 0
    ds = richlazy.sweep("solve", "single-neuron",
                        grid={"delta": "linspace(-1,1,3)", "t_max": [5, 10]},
                        params={"beta0": [1.0, 0.5], "n_records": 21},
                        output=tmp_path / "api.h5")
    assert (tmp_path / "api.h5").exists()
    _same_data(richlazy.open(out), ds)
    assert "solution_method" in ds.dims and "method" not in ds.dims


def test_solve_and_train_equal_the_cli(tmp_path, cli) -> None:
    out = tmp_path / "s.h5"
    assert cli("solve", "single-neuron", "-p", "delta=-1", "-p", "beta0=1,0.5", "-o", out,
               "-q").code == 0
    _same_data(richlazy.open(out), richlazy.solve("single-neuron", delta=-1, beta0=[1, 0.5]))
    small = {"d": 3, "h": 8, "n": 10, "steps": 40, "n_test": 20}
    out2 = tmp_path / "t.h5"
    args = [a for k, v in small.items() for a in ("-p", f"{k}={v}")]
    assert cli("train", "two-layer", *args, "-o", out2, "-q").code == 0
    _same_data(richlazy.open(out2), richlazy.train("two-layer", **small))


def test_estimate_is_the_dry_runs_json_and_writes_nothing(tmp_path, cli, monkeypatch) -> None:
    """``richlazy.estimate`` gives what ``sweep --dry-run --json`` prints (the plan, the axes
    and the declared size the same; the estimate's terms, timed anew, the same keys), with
    the arguments overriding the job file as in :func:`richlazy.sweep`, and writes nothing:
    neither the output it is given nor a scratch file of its own."""
    out = tmp_path / "fc.h5"
    printed = cli("sweep", "-c", AZULAY_FC, "-o", out, "--dry-run", "--json", "--jobs", "2")
    assert printed.code == 0, printed.err
    from_cli = json.loads(printed.out)
    scratch = tmp_path / "scratch"  # this test's own temporary folder: the shared one races
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    from_api = richlazy.estimate(config=AZULAY_FC, jobs=2, output=out)
    assert not list(scratch.iterdir())
    assert not out.exists() and not Path(f"{out}.parts").exists()
    for key in ("plan", "axes", "output_bytes"):
        assert from_api[key] == from_cli[key], key
    assert from_api["plan"]["points"] == 6 and from_api["axes"]["s"]["count"] == 3
    assert set(from_api["estimate"]) == set(from_cli["estimate"])
    assert from_api["estimate"]["wall_seconds"] > 0
    assert from_api["estimate"]["stops_early"] is None
    assert richlazy.estimate(config=AZULAY_FC)["plan"]["points"] == 6  # no output: scratch
    assert not list(scratch.iterdir())
    one = richlazy.estimate(config=AZULAY_FC, grid={"alpha": [0.1]}, jobs=1)
    assert one["plan"]["points"] == 3 and one["plan"]["workers"] == 1
    with pytest.raises(richlazy.BadInput, match="delta"):
        richlazy.estimate("solve", "single-neuron", grid={"delta": "-1:1:5"})


def test_bad_input_raises_the_cli_line() -> None:
    with pytest.raises(richlazy.BadInput, match="unknown model 'single-nueron'"):
        richlazy.solve("single-nueron")
    with pytest.raises(richlazy.BadInput, match="delta"):
        richlazy.sweep("solve", "single-neuron", grid={"delta": "-1:1:5"})


def test_open_gives_a_shard_file_as_a_grid(tmp_path, cli) -> None:
    grid = ["-g", "delta=-1,0,1,2", "-p", "n_records=5"]
    full = tmp_path / "full.h5"
    assert cli("sweep", "solve", "single-neuron", *grid, "-o", full, "-q").code == 0
    part = tmp_path / "s1.h5"
    assert cli("sweep", "solve", "single-neuron", *grid, "--shard", "1/2", "-o", part,
               "-q").code == 0
    assert "point" in open_result(part).dims  # the file itself holds its points only
    ds = richlazy.open(part)
    assert "point" not in ds.dims and ds.sizes["delta"] == 4
    assert list(ds["status"].values) == [0, -1, 0, -1]
    whole = richlazy.open(full)
    np.testing.assert_array_equal(ds["a"].isel(delta=[0, 2]), whole["a"].isel(delta=[0, 2]))
    assert np.isnan(ds["a"].isel(delta=1)).all()


def test_report_returns_the_summary(tmp_path) -> None:
    ds = richlazy.sweep("solve", "single-neuron", grid={"delta": "-1,1"},
                        params={"n_records": 11}, output=tmp_path / "r.h5")
    assert ds.sizes["delta"] == 2
    summary = richlazy.report(tmp_path / "r.h5", tmp_path / "rep", kind="theory",
                              variables=["a"], at={"delta": -1})
    assert (tmp_path / "rep" / "index.html").exists()
    assert summary["figures"] and summary["figures"][0]["kind"] == "theory"


def test_models_come_from_entry_points_too(tmp_path, monkeypatch) -> None:
    """A package that declares ``[project.entry-points."richlazy.models"]`` is found without
    RICHLAZY_MODELS: here a distribution's metadata on sys.path naming the test models."""
    from richlazy_cli.models import base

    dist = tmp_path / "toy_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[richlazy.models]\ntoy = tests.engine_models:Toy\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.delenv("RICHLAZY_MODELS", raising=False)
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    base._REGISTRY.pop("toy", None)
    imported = set(sys.modules)
    try:
        assert "toy" in base.all_models()
        (dist / "entry_points.txt").write_text("[richlazy.models]\nbroken = no_such_module_x\n")
        with pytest.raises(richlazy.BadInput, match=r"entry point broken .* of toy-plugin"):
            base.all_models()
    finally:  # the test models registered into this test's registry only: forget the module,
        # so that later tests importing it (RICHLAZY_MODELS) register it into the real one
        for name in set(sys.modules) - imported:
            del sys.modules[name]


def test_the_example_notebook_executes(tmp_path) -> None:
    """examples/fig3_single_neuron.py, converted by jupytext and run by nbclient."""
    jupytext = pytest.importorskip("jupytext")
    nbclient = pytest.importorskip("nbclient")
    notebook = jupytext.read(ROOT / "examples" / "fig3_single_neuron.py")
    env = {"RICHLAZY_EXAMPLE_OUT": str(tmp_path),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        client = nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                                         resources={"metadata": {"path": str(tmp_path)}})
        client.execute()
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    outputs = "".join(o.get("text", "") for cell in notebook.cells
                      for o in cell.get("outputs", []))
    assert "largest |exact - numeric| kernel distance" in outputs
    assert (tmp_path / "fig3_single_neuron.png").stat().st_size > 10_000
