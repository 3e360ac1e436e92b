"""The result's size is known from the specs before anything runs, and a result too large is
refused (exit 2, one line, nothing written) unless --max-bytes raises the limit."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from richlazy_cli.engine.footprint import case_sum, human, parse_bytes
from richlazy_cli.engine.job import Job
from richlazy_cli.models.base import Batch, Model, all_models

from ..conftest import assert_one_line_error, assert_refused


def data_bytes(path: Path) -> int:
    """The uncompressed bytes of a result's variables (what the estimate estimates)."""
    with xr.open_dataset(path, engine="h5netcdf") as ds:
        ds.load()
        return sum(int(item.nbytes) for item in ds.data_vars.values())


def dry_run_bytes(cli, *args: str) -> dict:
    result = cli(*args, "--dry-run", "--json")
    assert result.code == 0, result.err
    return json.loads(result.out)["output_bytes"]


def test_parse_bytes() -> None:
    assert parse_bytes("20GB") == 20 * 10**9
    assert parse_bytes("500MiB") == 500 * 2**20
    assert parse_bytes("1e9") == 10**9
    assert parse_bytes(" 2 k ") == 2000
    assert parse_bytes(4096) == 4096
    for bad in ("", "GB", "-1GB", "0", "1 XB", "nan", True, 0):
        with pytest.raises(ValueError):
            parse_bytes(bad)
    assert human(1.6e10) == "16 GB" and human(512) == "512 bytes"


@pytest.mark.system
def test_a_huge_result_is_refused_before_anything(tmp_path, toy_env, cli) -> None:
    # 1000 points x 2 x 10^7 steps x 8 bytes = 160 GB: refused from the specs, in no time
    args = ["sweep", "solve", "toy", "-g", "slope=linspace(0,1,1000)", "-p", "steps=10000000"]
    out = tmp_path / "huge.h5"
    assert_refused(cli, args, "160 GB", out)
    assert_refused(cli, [*args, "--dry-run"], "--max-bytes", out)
    # a shard holds its share: 1/20 of it is 8 GB, under the default limit of 10 GB
    result = cli(*args, "--shard", "1/20", "-o", out, "--dry-run")
    assert result.code == 0, result.err
    assert "output: ≈ 8 GB uncompressed (50 points x 160 MB, declared by the model)" \
        in result.out


@pytest.mark.system
def test_max_bytes_raises_or_lowers_the_limit(tmp_path, toy_env, cli) -> None:
    args = ["sweep", "solve", "toy", "-g", "slope=linspace(0,1,10)", "-p", "steps=100"]
    out = tmp_path / "small.h5"
    # 10 points x (1608 + 9) bytes = 16.2 kB
    assert_refused(cli, [*args, "--max-bytes", "16kB"], "more than the limit of 16 kB", out)
    assert_refused(cli, [*args, "--max-bytes", "lots"], "--max-bytes lots: expected a size", out)
    result = cli(*args, "--max-bytes", "17kB", "-o", out, "-q")
    assert result.code == 0, result.err
    job = tmp_path / "job.toml"
    job.write_text('action = "solve"\nmodel = "toy"\n[params]\nsteps = 100\n'
                   '[grid]\nslope = "linspace(0,1,10)"\n[run]\nmax_bytes = "1kB"\n')
    assert_refused(cli, ["sweep", "-c", job], "more than the limit of 1 kB", tmp_path / "j.h5")
    assert cli("sweep", "-c", job, "--max-bytes", "1MB", "-o", tmp_path / "j.h5",
               "-q").code == 0
    job.write_text(job.read_text().replace('"1kB"', "true"))
    result = cli("sweep", "-c", job, "-o", tmp_path / "k.h5")
    assert_one_line_error(result)
    assert "[run] max_bytes = true" in result.err


@pytest.mark.system
@pytest.mark.parametrize(
    ("model", "grid", "params"),
    [
        ("toy", ["-g", "slope=linspace(0,1,6)", "-g", "seed=range(2)"], ["-p", "steps=50"]),
        ("single-neuron", ["-g", "delta=linspace(-1,1,5)", "-g", "eta_a=0.5,1"],
         ["-p", "n_records=30", "-p", "method=exact"]),
        ("diagonal", ["-g", "alpha=0.1,1"], []),
        # declares nothing: measured on the probe
        ("undeclared toy", ["-g", "slope=linspace(0,1,6)"], ["-p", "steps=50"]),
    ],
)
def test_the_estimate_matches_the_data_of_a_real_sweep(tmp_path, toy_env, cli, monkeypatch,
                                                       model, grid, params) -> None:
    declared = model != "undeclared toy"
    if not declared:
        model = "toy"
        monkeypatch.setattr(all_models()[model], "_output_bytes",
                            classmethod(lambda cls, action, values: None))
    action = "train" if model == "diagonal" else "solve"
    out = tmp_path / "r.h5"
    args = ["sweep", action, model, *grid, *params, "-o", out]
    estimate = dry_run_bytes(cli, *args)
    assert cli(*args, "-q").code == 0
    actual = data_bytes(out)
    assert actual / 2 <= estimate["total"] <= 2 * actual, (estimate, actual)
    assert (estimate["source"] == "declared by the model") == declared, estimate
    if declared:  # exact where the model declares it
        assert estimate["total"] == actual
    for k, shard in enumerate((tmp_path / "s1.h5", tmp_path / "s2.h5"), start=1):
        sharded = dry_run_bytes(cli, *args[:-1], shard, "--shard", f"{k}/2")
        assert cli(*args[:-1], shard, "--shard", f"{k}/2", "-q").code == 0
        assert sharded["total"] / 2 <= data_bytes(shard) <= 2 * sharded["total"]


@pytest.mark.integration
def test_declared_sizes_equal_every_example_of_every_model() -> None:
    """Each model that declares its outputs' bytes declares exactly what it returns."""
    declared = 0
    for model in all_models().values():
        for action in model.actions:
            for example in model.examples[action]:
                values = model.resolve(action, example)
                size = model.footprint(action, values).output_bytes
                if size is None:
                    continue
                data = model().run(action, Batch.from_points(model, [values]))
                data = data.drop_vars("status", errors="ignore")  # the engine's, not a model's
                assert size == sum(item.nbytes for item in data.data_vars.values()), (
                    model.name, action, example)
                declared += 1
    assert declared >= 2


def actual_bytes(model: type[Model], action: str, values: dict) -> int:
    """The bytes of one configuration's outputs from a real one-point run (no ``status``)."""
    data = model().run(action, Batch.from_points(model, [values]))
    data = data.drop_vars("status", errors="ignore")
    return sum(int(item.nbytes) for item in data.data_vars.values())


_TWO_LAYER = {"d": 3, "h": 2, "k": 2, "n": 6, "n_test": 5, "steps": 6}
_LINEAR = {"d": 3, "h": 2, "n": 4, "t_max": 0.5, "steps": 7}
_DIAGONAL = {"d": 6, "N": 3, "r": 2, "alpha": 0.1, "tol": 1e-4, "t_max": 10.0,
             "max_steps": 30, "lr": 0.05}


@pytest.mark.parametrize(
    ("name", "action", "given"),
    [
        ("two-layer", "train", {**_TWO_LAYER, "n_records": 3}),
        ("two-layer", "train", {**_TWO_LAYER, "n_records": 9, "d": 4, "h": 4, "k": 3,
                                "save_params": True}),
        ("two-layer", "train", {**_TWO_LAYER, "records": [0, 2, 2, 5], "h": 3,
                                "symmetrize": False, "save_params": True}),
        ("two-layer", "train", {**_TWO_LAYER, "steps": 0, "d": 2}),
        ("two-layer", "train", {**_TWO_LAYER, "d": 2, "data": "xor", "n_records": 5,
                                "save_surface": True, "save_params": True}),
        ("two-layer", "train", {**_TWO_LAYER, "d": 2, "k": 4, "save_surface": True,
                                "dtype": "float32"}),
        ("two-layer", "train", {**_TWO_LAYER, "d": 2, "data": "npz", "file": True,
                                "n_records": 4}),
        ("two-layer", "train", {**_TWO_LAYER, "data": "npz", "file": True,
                                "save_params": True, "implementation": "torch"}),
        ("linear", "solve", {**_LINEAR, "n_records": 3}),
        ("linear", "solve", {**_LINEAR, "n_records": 4, "c": 2, "h": 1, "delta": 0.5}),
        ("linear", "solve", {**_LINEAR, "n_records": 2, "depth": 3, "c": 4, "init": "gaussian"}),
        ("linear", "solve", {**_LINEAR, "n_records": 3, "h": 5, "init": "neuron",
                             "delta_spread": 0.2}),
        ("linear", "solve", {**_LINEAR, "n_records": 3, "file": True}),
        ("linear", "train", {**_LINEAR, "n_records": 4}),
        ("linear", "train", {**_LINEAR, "n_records": 20, "depth": 2, "c": 2}),  # clipped
        ("linear", "train", {**_LINEAR, "n_records": 3, "d": 5, "n": 6, "c": 3,
                             "init": "gaussian", "loss": "mean"}),
        ("linear", "train", {**_LINEAR, "n_records": 5, "file": True}),
        ("diagonal", "solve", {**_DIAGONAL, "n_records": 2}),
        ("diagonal", "solve", {**_DIAGONAL, "n_records": 7, "d": 9, "s": 0.3}),
        ("diagonal", "solve", {**_DIAGONAL, "n_records": 3, "file": True}),
        ("diagonal", "train", {**_DIAGONAL, "n_records": 2}),
        ("diagonal", "train", {**_DIAGONAL, "n_records": 25, "d": 4}),  # duplicate steps
        ("diagonal", "train", {**_DIAGONAL, "n_records": 5, "max_steps": 1, "file": True}),
    ],
)
def test_declared_sizes_equal_real_runs_off_the_examples(tmp_path, name, action,
                                                         given) -> None:
    """Output times, dimensions, widths and flags beyond the examples: the declared bytes are
    a real run's, including data files (whose sizes the model's check reads)."""
    model = all_models()[name]
    given = dict(given)
    if given.get("implementation") == "torch":
        pytest.importorskip("torch")
    if given.pop("file", False):
        gen = np.random.default_rng(0)
        path = tmp_path / "data.npz"
        if name == "two-layer":  # 7 training, 4 test samples (n, n_test are the file's)
            X, Xt = gen.standard_normal((7, given["d"])), gen.standard_normal((4, given["d"]))
            np.savez(path, X=X, y=X[:, 0], X_test=Xt, y_test=Xt[:, 0])
            given["data_file"] = str(path)
        elif name == "linear":  # n, d, c are the file's: 6 x 4 inputs, 2 outputs
            X = gen.standard_normal((6, 4))
            np.savez(path, X=X, y=X[:, :2])
            given["data"] = str(path)
        else:  # N = 3, d = 5 are the file's, no beta_star
            X = gen.standard_normal((3, 5))
            np.savez(path, X=X, y=X[:, 0])
            given["data"] = str(path)
    values = model.resolve(action, given)
    size = model.footprint(action, values).output_bytes
    assert size is not None
    assert size == actual_bytes(model, action, values)


def test_sums_over_a_million_points_run_once_per_case(toy_env) -> None:
    job = Job.build("toy", "solve", {}, [("slope", "linspace(0,1,1000)"),
                                         ("steps", "range(1,1001)")])
    calls = []

    def run(values) -> float:
        calls.append(1)
        return float(values["steps"])

    every = np.arange(job.grid.size)
    total, cheapest = case_sum(job, every, run)
    assert total == 1000 * sum(range(1, 1001)) and cheapest == 0
    assert len(calls) == 1000  # one case per value of the one parameter it reads
    odd = every[every % 2 == 1]  # steps = 2, 4, ... at the odd flat indices
    total, cheapest = case_sum(job, odd, run)
    assert total == 1000 * sum(range(2, 1001, 2)) and cheapest == 1


@pytest.mark.system
def test_a_million_point_dry_run_builds_no_point(tmp_path, toy_env, monkeypatch) -> None:
    """The whole dry run (validation, plan, cost and size estimates, probe) of a 10⁶-point
    grid builds the parameters of the one probed point only, and its memory is a few arrays
    of the grid's size (flat indices, a mask), not a representation per point."""
    import tracemalloc

    from richlazy_cli.engine import grid as grid_module
    from richlazy_cli.engine.run import RunOptions, execute

    built: list[int] = []

    def counted(method):
        return lambda self, flats: built.append(len(flats)) or method(self, flats)

    for name in ("points", "positions"):
        monkeypatch.setattr(grid_module.Grid, name, counted(getattr(grid_module.Grid, name)))
    tracemalloc.start()
    job = Job.build("toy", "solve", {}, [("slope", "linspace(0,1,1000)"),
                                         ("scale", "linspace(0,1,1000)")])
    outcome = execute(job, tmp_path / "dry.h5", RunOptions(dry_run=True, jobs=2), ["test"])
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert outcome.plan.pending == 10**6 and outcome.estimate is not None
    assert outcome.output_size.total == 10**6 * (8 * (2 * 8 + 1) + 9)
    assert sum(built) == 0
    assert peak < 40e6, peak  # a dict per point took over 500 MB
    assert not list(tmp_path.iterdir())


@pytest.mark.system
def test_a_run_builds_each_chunks_points_when_it_is_dispatched(tmp_path, toy_env,
                                                               monkeypatch) -> None:
    from richlazy_cli.engine import grid as grid_module
    from richlazy_cli.engine.run import RunOptions, execute

    built: list[int] = []
    original = grid_module.Grid.points
    monkeypatch.setattr(grid_module.Grid, "points",
                        lambda self, flats: built.append(len(flats)) or original(self, flats))
    job = Job.build("toy", "solve", {}, [("slope", "linspace(0,1,40)"), ("seed", "range(50)")])
    for backend in ("threads", "loky"):
        built.clear()
        opts = RunOptions(jobs=2 if backend == "threads" else 1, backend=backend,
                          chunk_size=25, quiet=True)
        assert execute(job, tmp_path / f"{backend}.h5", opts, ["test"]).exit_code == 0
        assert built and max(built) <= 25 and sum(built) == 2000, backend


@pytest.mark.system
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_an_undeclared_size_is_checked_on_the_first_chunk(tmp_path, toy_env, cli, monkeypatch,
                                                          jobs) -> None:
    """A model that declares nothing is measured on its first chunk, before the result's
    arrays are allocated: refused with one line, and nothing is left behind."""
    toy = all_models()["toy"]
    monkeypatch.setattr(toy, "_output_bytes", classmethod(lambda cls, action, values: None))
    args = ["sweep", "solve", "toy", "-g", "slope=linspace(0,1,40)", "-p", "steps=100",
            "--chunk-size", "5", "--jobs", jobs, "--backend", "threads", "-q"]
    # 40 points x (1608 + 9) bytes = 64.7 kB
    assert_refused(cli, [*args, "--max-bytes", "64kB"], "measured on the first chunk",
                   tmp_path / "o.h5")
    result = cli(*args, "--max-bytes", "65kB", "-o", tmp_path / "o.h5")
    assert result.code == 0, result.err
    assert data_bytes(tmp_path / "o.h5") == 40 * (1608 + 9)
