"""Results and parts folders written under a family's older record names (``n_times``,
``checkpoints``, ...) still open, verify, resume, continue and merge, silently (reading an old
file is no deprecated use); what is written now records ``n_records`` / ``records``
(docs/engine.md, "Records"). The sweeps are given under the names of now.

An "older" file is made the way the version before wrote it: the same data, its ``params``
attribute under the older name, and the fingerprint those names hash to.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

from richlazy_cli.engine.assemble import result_as_chunk
from richlazy_cli.engine.chunk import ChunkResult
from richlazy_cli.engine.fingerprint import fingerprint
from richlazy_cli.engine.job import Job
from richlazy_cli.engine.output import stamp_manifest
from richlazy_cli.engine.parts import PartsFolder, parts_path
from richlazy_cli.engine.run import manifest
from richlazy_cli.engine.store import open_result, write_result
from richlazy_cli.report.build import changed_params
from richlazy_cli.report.data import ResultFile

pytestmark = pytest.mark.filterwarnings("error::richlazy_cli.params.RichlazyDeprecationWarning")

SWEEP = ("sweep", "solve", "single-neuron", "-p", "n_records=5", "-p", "method=exact",
         "-g", "eta_a=0.5,1,2", "--jobs", "1", "-q")


def _older(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` as the version before recorded them: ``n_records`` was ``n_times``."""
    return {("n_times" if k == "n_records" else k): v for k, v in params.items()}


def _age(path: Path, *, missing: int | None = None) -> None:
    """Rewrite the result at ``path`` as the version before wrote it (``missing``: a point
    not computed yet)."""
    ds = open_result(path).load()
    old = _older(json.loads(ds.attrs["params"]))
    ds.attrs["params"] = json.dumps(old)
    ds.attrs["fingerprint"] = fingerprint(ds.attrs["model"], ds.attrs["action"], old,
                                          json.loads(ds.attrs["grid"]),
                                          json.loads(ds.attrs.get("inputs", "[]")))
    if missing is not None:
        ds["status"][missing] = -1
    write_result(ds, path, force=True)


def _written_now(cli: Any, path: Path, like: Path) -> None:
    """``path`` records today's name, verifies, and holds the data of ``like``."""
    params = json.loads(open_result(path).attrs["params"])
    assert params["n_records"] == 5 and "n_times" not in params
    assert cli("store", "verify", path).code == 0
    _same_data(path, like)


def _same_data(a: Path, b: Path) -> None:
    with open_result(a) as x, open_result(b) as y:
        for name in ("loss", "kernel_distance", "status"):
            np.testing.assert_array_equal(x[name].values, y[name].values)


@pytest.mark.system
def test_an_older_result_verifies_continues_and_resumes(tmp_path: Path, cli: Any) -> None:
    full, out = tmp_path / "full.h5", tmp_path / "out.h5"
    assert cli(*SWEEP, "-o", full).code == 0
    assert json.loads(open_result(full).attrs["params"])["n_records"] == 5
    assert cli(*SWEEP, "-o", out).code == 0
    _age(out)
    assert cli("store", "verify", out).code == 0  # its own names, its own fingerprint
    changed, known = changed_params(ResultFile.load(out))  # a report's caption
    assert known and changed["n_records"] == 5 and "n_times" not in changed
    before = out.read_bytes()
    done = cli(*SWEEP, "-o", out, "--continue")
    assert done.code == 0, done.err
    assert out.read_bytes() == before  # complete: nothing to do, nothing rewritten
    _age(out, missing=1)
    resumed = cli(*SWEEP, "-o", out, "--resume")
    assert resumed.code == 0 and not resumed.err, resumed.err
    _written_now(cli, out, full)


@pytest.mark.system
def test_another_sweep_under_older_names_is_still_refused(tmp_path: Path, cli: Any) -> None:
    out = tmp_path / "out.h5"
    assert cli(*SWEEP, "-o", out).code == 0
    _age(out, missing=1)
    other = [a if a != "n_records=5" else "n_records=7" for a in SWEEP]
    refused = cli(*other, "-o", out, "--resume")
    assert refused.code == 2 and "another sweep" in refused.err


@pytest.mark.system
def test_an_older_parts_folder_resumes(tmp_path: Path, cli: Any) -> None:
    """A parts folder whose manifest and parts carry the older names' fingerprint: its
    parts are read, the rest computed, and the result records the names of now."""
    full, out = tmp_path / "full.h5", tmp_path / "out.h5"
    assert cli(*SWEEP, "-o", full).code == 0
    job = Job.build("single-neuron", "solve", {"n_records": "5", "method": "exact"},
                    [("eta_a", "0.5,1,2")])
    now = manifest(job, None)
    stamp_manifest(now, job)
    old = {**now, "params": _older(now["params"])}
    old["fingerprint"] = fingerprint(old["model"], old["action"], old["params"], old["grid"],
                                     old["inputs"])
    assert old["fingerprint"] != now["fingerprint"]
    chunk = result_as_chunk(open_result(full), job.grid)
    assert chunk.data is not None
    first = ChunkResult(chunk.indices[:2], chunk.data.isel(point=[0, 1]), chunk.status[:2],
                        chunk.elapsed[:2])
    PartsFolder.create(parts_path(out), old).write(first)
    resumed = cli(*SWEEP, "-o", out, "--resume")
    assert resumed.code == 0, resumed.err
    assert not parts_path(out).exists()
    assert open_result(out).attrs["fingerprint"] == now["fingerprint"]
    _written_now(cli, out, full)


@pytest.mark.system
def test_an_older_shard_merges_with_one_written_now(tmp_path: Path, cli: Any) -> None:
    full, one, two, merged = (tmp_path / f"{n}.h5" for n in ("full", "one", "two", "merged"))
    assert cli(*SWEEP, "-o", full).code == 0
    assert cli(*SWEEP, "-o", one, "--shard", "1/2").code == 0
    assert cli(*SWEEP, "-o", two, "--shard", "2/2").code == 0
    _age(one)
    result = cli("store", "merge", merged, one, two, "-q")
    assert result.code == 0, result.err
    _written_now(cli, merged, full)


@pytest.mark.system
def test_a_swept_older_name_is_renamed_in_an_older_result(tmp_path: Path, cli: Any) -> None:
    """A sweep over ``n_times`` written before has a grid dimension ``n_times``; resumed now,
    the dimension is ``n_records``, as a sweep started now names it."""
    out = tmp_path / "out.h5"
    swept = ("sweep", "solve", "single-neuron", "-p", "method=exact", "-g", "n_records=5,9",
             "--jobs", "1", "-q", "-o", out)
    assert cli(*swept).code == 0
    ds = open_result(out).load()
    assert "n_records" in ds.dims
    old_grid = {"n_times": json.loads(ds.attrs["grid"])["n_records"]}
    old = ds.rename({"n_records": "n_times"})
    old.attrs["grid"] = json.dumps(old_grid)
    params = json.loads(ds.attrs["params"])
    old.attrs["params"] = json.dumps(_older(params))
    old.attrs["fingerprint"] = fingerprint("single-neuron", "solve", _older(params), old_grid,
                                           [])
    write_result(old, out, force=True)
    assert cli("store", "verify", out).code == 0
    old["status"][1] = -1
    write_result(old, out, force=True)
    resumed = cli(*swept, "--resume")
    assert resumed.code == 0, resumed.err
    with open_result(out) as now:
        assert "n_records" in now.dims and "n_times" not in now.variables
        xr.testing.assert_equal(now["loss"], ds["loss"])


@pytest.mark.system
def test_an_older_parts_folder_notices_a_changed_input(tmp_path: Path, cli: Any) -> None:
    """``linear`` once had both ``n_times`` (solve) and ``checkpoints`` (train); an older
    solve's folder records both. It resumes while its data file is unchanged, and is refused
    naming the input once the file changed."""
    data = tmp_path / "data.npz"
    rng = np.random.default_rng(0)
    np.savez(data, X=rng.standard_normal((6, 3)), y=rng.standard_normal((6, 1)))
    given = {"data": str(data), "n_records": "5", "t_max": "1.0", "h": "3"}
    sweep = ["sweep", "solve", "linear", *(f"-p{k}={v}" for k, v in given.items()),
             "-g", "delta=-0.5,0", "--jobs", "1", "-q"]
    job = Job.build("linear", "solve", given, [("delta", "-0.5,0")])
    now = manifest(job, None)
    stamp_manifest(now, job)
    old = {**now, "params": {**_older(now["params"]), "checkpoints": 101}}
    old["fingerprint"] = fingerprint(old["model"], old["action"], old["params"], old["grid"],
                                     old["inputs"])
    kept, changed = tmp_path / "kept.h5", tmp_path / "changed.h5"
    PartsFolder.create(parts_path(kept), old)
    PartsFolder.create(parts_path(changed), old)
    resumed = cli(*sweep, "-o", kept, "--resume")
    assert resumed.code == 0, resumed.err
    assert json.loads(open_result(kept).attrs["params"])["n_records"] == 5
    np.savez(data, X=rng.standard_normal((6, 3)), y=rng.standard_normal((6, 1)))
    refused = cli(*sweep, "-o", changed, "--resume")
    assert refused.code == 2 and "input file changed" in refused.err, refused.err


@pytest.mark.system
@pytest.mark.parametrize("backend, given", [(None, ()), ("numpy", ("implementation=numba",))])
def test_an_older_result_that_recorded_the_implementations_older_parameter_resumes(
        tmp_path: Path, cli: Any, backend: str | None, given: tuple[str, ...]) -> None:
    """A two-layer result written when ``backend`` was a parameter of its own records it
    beside ``implementation`` (both as given: ``None`` when not, or ``numpy``, which chose
    ``numba``), and its fingerprint hashes it; it still verifies and resumes (given the
    implementation by its name of now), and is written anew without it."""
    sweep = ("sweep", "train", "two-layer", "-p", "d=2", "-p", "h=2", "-p", "n=4",
             "-p", "n_test=4", "-p", "steps=4", "-p", "n_records=3", "-g", "tau=0.5,1",
             *(a for p in given for a in ("-p", p)), "--jobs", "1", "-q")
    full, out = tmp_path / "full.h5", tmp_path / "out.h5"
    assert cli(*sweep, "-o", full).code == 0
    ds = open_result(full).load()
    params = json.loads(ds.attrs["params"])
    assert "backend" not in params
    old = {**params, "backend": backend, "implementation": None}
    ds.attrs["params"] = json.dumps(old)
    ds.attrs["fingerprint"] = fingerprint("two-layer", "train", old,
                                          json.loads(ds.attrs["grid"]), [])
    write_result(ds, out, force=True)
    assert cli("store", "verify", out).code == 0  # its own names, its own fingerprint
    ds["status"][1] = -1
    write_result(ds, out, force=True)
    resumed = cli(*sweep, "-o", out, "--resume")
    assert resumed.code == 0 and not resumed.err, resumed.err
    assert json.loads(open_result(out).attrs["params"]) == params
    assert cli("store", "verify", out).code == 0
    with open_result(out) as x, open_result(full) as y:
        for name in ("train_loss", "status"):
            np.testing.assert_array_equal(x[name].values, y[name].values)
