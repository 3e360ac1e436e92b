"""The sweep engine end to end: determinism across execution routes, crash safety, shards,
failure isolation and bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
import xarray as xr

from richlazy_cli.engine import startup

from ..conftest import (
    ROOT,
    alive,
    assert_one_line_error,
    live_children,
    pausing,
    release,
    run_process,
    wait_paused,
)

GRID = ["-g", "slope=linspace(0,1,5)", "-g", "seed=range(3)", "-g", "offset=[[0,1],[1,0]]"]


def data_of(path: Path) -> xr.Dataset:
    """The computed content of a result: every variable but timing; no provenance attributes."""
    with xr.open_dataset(path, engine="h5netcdf") as ds:
        return ds.drop_vars("elapsed").drop_attrs().load()


def assert_bitwise(a: Path, b: Path) -> None:
    da, db = data_of(a), data_of(b)
    assert da.identical(db)
    for name in da.data_vars:  # identical() is NaN-aware; also compare the raw bytes
        assert da[name].values.tobytes() == db[name].values.tobytes(), name


def toy_sweep(cli, out: Path, *options: str):
    """`richlazy sweep solve toy` over GRID into ``out``, quietly, with extra options."""
    return cli("sweep", "solve", "toy", *GRID, "-o", out, "-q", *options)


@pytest.fixture
def reference(tmp_path: Path, toy_env: dict[str, str], cli) -> Path:
    out = tmp_path / "ref.h5"
    result = cli("sweep", "solve", "toy", *GRID, "-o", out, "--jobs", "1", "-q")
    assert result.code == 0, result.err
    return out


@pytest.mark.system
def test_result_layout(reference: Path) -> None:
    with xr.open_dataset(reference, engine="h5netcdf") as ds:
        assert list(ds["y"].dims) == ["slope", "seed", "offset", "step", "output"]
        np.testing.assert_array_equal(ds["slope"].values, np.linspace(0, 1, 5))
        np.testing.assert_array_equal(ds["seed"].values, np.arange(3))
        assert ds["slope"].attrs["spacing"] == "linear"
        assert ds["status"].dims == ("slope", "seed", "offset")
        assert int(ds.attrs["complete"]) == 1
        assert json.loads(ds.attrs["grid"]) == {
            "slope": "linspace(0,1,5)",
            "seed": "range(3)",
            "offset": "[[0,1],[1,0]]",
        }
        # the point (slope=0.5, seed=2, offset=[1,0]) holds what a single run of it gives
        y = ds["y"].sel(slope=0.5, seed=2).isel(offset=1).values
    noise = np.random.Generator(
        np.random.PCG64(
            np.random.SeedSequence(
                2,
                spawn_key=(
                    int.from_bytes(__import__("hashlib").sha256(b"noise").digest()[:4], "little"),
                ),
            )
        )
    )
    expected = 0.5 * np.arange(8) + 0.1 * noise.standard_normal(8)
    np.testing.assert_array_equal(y[:, 0], expected + 1.0)
    np.testing.assert_array_equal(y[:, 1], expected)


@pytest.mark.system
@pytest.mark.parametrize(
    "options",
    [
        ["--jobs", "2", "--chunk-size", "3"],
        ["--backend", "threads", "--jobs", "2", "--chunk-size", "2"],
        ["--jobs", "1", "--chunk-size", "7"],
    ],
    ids=["loky-2", "threads-2", "serial-chunks-7"],
)
def test_bitwise_identical_across_routes(tmp_path, reference, cli, options) -> None:
    out = tmp_path / "other.h5"
    result = cli("sweep", "solve", "toy", *GRID, "-o", out, "-q", *options)
    assert result.code == 0, result.err
    assert_bitwise(reference, out)


@pytest.mark.system
def test_bitwise_identical_on_dask_local_cluster(tmp_path, reference, cli) -> None:
    pytest.importorskip("distributed")
    out = tmp_path / "dask.h5"
    result = toy_sweep(
        cli, out, "--backend", "dask", "--scheduler", "local", "--jobs", "2", "--chunk-size", "4"
    )
    assert result.code == 0, result.err
    assert_bitwise(reference, out)


@pytest.mark.system
def test_bitwise_identical_on_running_dask_scheduler(tmp_path, reference, cli) -> None:
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address=None, processes=True
    ) as cluster:
        out = tmp_path / "dask-tcp.h5"
        result = toy_sweep(
            cli,
            out,
            "--backend",
            "dask",
            "--scheduler",
            cluster.scheduler_address,
            "--chunk-size",
            "5",
        )
    assert result.code == 0, result.err
    assert_bitwise(reference, out)


@pytest.mark.system
def test_three_shards_merged(tmp_path, reference, cli) -> None:
    shards = []
    for k in (1, 2, 3):
        out = tmp_path / f"shard{k}.h5"
        result = cli("sweep", "solve", "toy", *GRID, "-o", out, "-q", "--shard", f"{k}/3")
        assert result.code == 0, result.err
        with xr.open_dataset(out, engine="h5netcdf") as ds:
            assert int(ds.attrs["complete"]) == 0
            assert int((ds["status"] == 0).sum()) in (10,)
        shards.append(out)
    verify = cli("store", "verify", shards[0])
    assert verify.code == 1 and "missing" in verify.err
    merged = tmp_path / "merged.h5"
    result = cli("store", "merge", merged, *shards)
    assert result.code == 0, result.err
    assert_bitwise(reference, merged)
    assert cli("store", "verify", merged).code == 0


@pytest.mark.system
def test_slurm_array_variables_alone_change_nothing(tmp_path, toy_env, cli, monkeypatch,
                                                     reference) -> None:
    """Inside an array task a plain sweep computes the whole grid: only --shard shards."""
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "2")
    monkeypatch.setenv("SLURM_ARRAY_TASK_MIN", "1")
    monkeypatch.setenv("SLURM_ARRAY_TASK_MAX", "3")
    out = tmp_path / "whole.h5"
    result = cli("sweep", "solve", "toy", *GRID, "-o", out)
    assert result.code == 0 and "shard" not in result.out, result.out
    assert_bitwise(reference, out)


@pytest.mark.system
def test_shard_from_slurm_environment(tmp_path, toy_env, cli, monkeypatch) -> None:
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "2")
    monkeypatch.setenv("SLURM_ARRAY_TASK_MIN", "1")
    monkeypatch.setenv("SLURM_ARRAY_TASK_MAX", "3")
    out = tmp_path / "s.h5"
    result = cli("sweep", "solve", "toy", *GRID, "-o", out, "--shard", "slurm")
    assert result.code == 0, result.err
    # the first line says which shard, and why
    assert result.out.splitlines()[0].startswith(
        "toy solve: shard 2/3 (SLURM array task 2 of 1-3) of 30 points: 10 points"
    ), result.out
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert ds.attrs["shard"] == "2/3"
        status, points = ds["status"].values, ds["point"].values
    # a shard file holds its own points only, over `point`, with their flat grid indices
    np.testing.assert_array_equal(points, np.arange(1, 30, 3))
    assert status.shape == (10,) and np.all(status >= 0)


@pytest.mark.system
def test_merge_refuses_mismatch_and_conflicts(tmp_path, toy_env, cli) -> None:
    a, b, c = tmp_path / "a.h5", tmp_path / "b.h5", tmp_path / "c.h5"
    assert (
        cli("sweep", "solve", "toy", "-g", "slope=1,2", "-o", a, "-q", "--shard", "1/2").code == 0
    )
    assert (
        cli(
            "sweep",
            "solve",
            "toy",
            "-g",
            "slope=1,2",
            "-o",
            b,
            "-q",
            "--shard",
            "2/2",
            "-p",
            "scale=0.2",
        ).code
        == 0
    )
    assert (
        cli("sweep", "solve", "toy", "-g", "slope=1,3", "-o", c, "-q", "--shard", "2/2").code == 0
    )
    out = tmp_path / "m.h5"
    for pair in ((a, b), (a, c)):
        result = cli("store", "merge", out, *pair)
        assert_one_line_error(result)
        assert not out.exists()
    # a conflict: the same point computed twice with different data
    d = tmp_path / "d.h5"
    assert (
        cli("sweep", "solve", "toy", "-g", "slope=1,2", "-o", d, "-q", "--shard", "1/2").code == 0
    )
    with h5py.File(d, "r+") as fh:
        fh["y"][0, 0, 0] += 1.0
    result = cli("store", "merge", out, a, d)
    assert_one_line_error(result)
    assert "conflicting" in result.err
    assert not out.exists()


@pytest.mark.system
def test_failures_isolated_reported_and_retried(tmp_path, toy_env, cli, monkeypatch) -> None:
    monkeypatch.setenv("RICHLAZY_TOY_FAIL", "1")
    out = tmp_path / "f.h5"
    args = (
        "sweep",
        "solve",
        "toy",
        "-g",
        "slope=linspace(0,1,5)",
        "-g",
        "seed=range(2)",
        "-p",
        "fail_at=0.5",
        "-p",
        "nan_at=0.25",
        "-o",
        out,
        "--jobs",
        "1",
        "-q",
    )
    result = cli(*args)
    assert result.code == 1
    assert "failed point" in result.err and "requested failure" in result.err
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        status = ds["status"].values
        errors = json.loads(ds.attrs["errors"])
        assert np.isnan(ds["y"].sel(slope=0.5).values).all()
        good = ds["y"].sel(slope=0.75).values
    np.testing.assert_array_equal(status[:, 0], [0, 1, 2, 0, 0])
    assert {e["status"] for e in errors} == {1, 2}
    assert np.isfinite(good).all()
    # the fault goes away: --retry-failed recomputes exactly the failed points
    monkeypatch.setenv("RICHLAZY_TOY_FAIL", "0")
    result = cli(*args, "--resume", "--retry-failed")
    assert result.code == 1  # the NaN point still diverges
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        np.testing.assert_array_equal(ds["status"].values[:, 0], [0, 1, 0, 0, 0])
        assert np.isfinite(ds["y"].sel(slope=0.5).values).all()


@pytest.mark.system
def test_fail_fast_stops_early(tmp_path, toy_env, cli, monkeypatch) -> None:
    monkeypatch.setenv("RICHLAZY_TOY_FAIL", "1")
    out = tmp_path / "ff.h5"
    result = cli(
        "sweep",
        "solve",
        "toy",
        "-g",
        "slope=range(20)",
        "-p",
        "fail_at=0",
        "--chunk-size",
        "1",
        "--jobs",
        "1",
        "--fail-fast",
        "-o",
        out,
        "-q",
    )
    assert result.code == 1 and "fail-fast" in result.err
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert int((ds["status"] == -1).sum()) == 19


def start_sweep(args: list[str], out: Path, env: dict[str, str]) -> subprocess.Popen:
    """A toy sweep in its own process, to be interrupted; its stderr goes to OUT.err.

    (Not a pipe: worker processes orphaned by a SIGKILL would hold a pipe open until they
    notice, and reading it would wait for them.)
    """
    command = [sys.executable, "-m", "richlazy_cli", "sweep", "solve", "toy", *args]
    with open(str(out) + ".err", "w") as err:
        return subprocess.Popen(
            [*command, "-o", str(out), "-q"], env=env, stdout=subprocess.DEVNULL, stderr=err
        )


@pytest.mark.system
@pytest.mark.parametrize(
    "sig,jobs",
    [(signal.SIGKILL, "1"), (signal.SIGINT, "1"), (signal.SIGKILL, "2"), (signal.SIGINT, "2")],
    ids=["SIGKILL", "SIGINT", "SIGKILL-2-workers", "SIGINT-2-workers"],
)
@pytest.mark.processes
def test_killed_sweep_resumes_to_identical_data(tmp_path, toy_env, cli, monkeypatch, sig,
                                                jobs) -> None:
    # the killed run on `jobs` workers; the runs in this process on one (the worker count is
    # no part of a sweep: test_bitwise_identical_across_routes)
    sweep = ["-g", "slope=linspace(0,1,8)", "--chunk-size", "1"]
    grid = [*sweep, "--jobs", "1"]
    ref = tmp_path / "ref.h5"
    assert cli("sweep", "solve", "toy", *grid, "-o", ref, "-q").code == 0
    out = tmp_path / "killed.h5"
    parts = Path(str(out) + ".parts")
    marker = tmp_path / "paused"
    proc = start_sweep([*sweep, "--jobs", jobs], out, pausing(toy_env, "part", marker))
    wait_paused(marker, proc)  # its first part written, the run waits: signalled in flight
    workers = live_children(proc.pid)  # its worker pool (and loky's resource tracker)
    assert bool(workers) == (jobs == "2"), workers
    proc.send_signal(sig)
    release(marker, proc, limit=60)
    err = Path(str(out) + ".err").read_text()
    if sig == signal.SIGINT:
        assert proc.returncode == 130, err
        assert err.startswith("richlazy: interrupted (SIGINT)") and "--resume" in err, err
        assert len(err.strip().splitlines()) == 1, err
        # the workers stop with their parent (a SIGKILL leaves them to notice it alone)
        deadline = time.monotonic() + 5
        while any(alive(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in workers if alive(p)], "worker processes outlived their parent"
    else:
        assert proc.returncode == -signal.SIGKILL
    assert not out.exists()
    done = len(list(parts.glob("part-*.rlp")))
    assert 1 <= done < 8
    # without --resume the unfinished sweep is protected
    assert_one_line_error(cli("sweep", "solve", "toy", *grid, "-o", out))
    # (its estimate without the fresh interpreter that times a command's start from a
    # notebook, engine/startup.py: the plan is what is checked here)
    monkeypatch.setattr(startup, "command_startup", lambda model: 0.0)
    dry = cli("sweep", "solve", "toy", *grid, "-o", out, "--resume", "--dry-run")
    assert dry.code == 0 and f"pending: {8 - done} points" in dry.out
    result = cli("sweep", "solve", "toy", *grid, "-o", out, "--resume", "-q")
    assert result.code == 0, result.err
    assert not parts.exists()
    assert_bitwise(ref, out)


@pytest.mark.system
def test_resume_of_complete_file_computes_nothing(tmp_path, reference, cli) -> None:
    dry = cli("sweep", "solve", "toy", *GRID, "-o", reference, "--resume", "--dry-run")
    assert dry.code == 0 and "pending: 0 points" in dry.out


@pytest.mark.system
def test_dry_run_plans_without_computing(tmp_path, toy_env, cli) -> None:
    out = tmp_path / "dry.h5"
    result = cli(
        "sweep",
        "solve",
        "toy",
        *GRID,
        "-o",
        out,
        "--dry-run",
        "--chunk-size",
        "4",
        "--shard",
        "1/2",
    )
    assert result.code == 0, result.err
    assert "grid: 5 x 3 x 2 = 30 points" in result.out
    assert "shard 1/2: 15 points" in result.out
    # seed is not batchable: 3 seeds x ceil(5 points / 4) chunks
    assert "pending: 15 points in 6 chunks" in result.out
    assert not out.exists() and not Path(str(out) + ".parts").exists()


@pytest.mark.system
def test_job_file_supplies_and_cli_overrides(tmp_path, toy_env, cli) -> None:
    job = tmp_path / "job.toml"
    job.write_text(
        'action = "solve"\nmodel = "toy"\n[params]\nscale = 0.5\nsteps = 4\n'
        '[grid]\nslope = "0,1"\nseed = [3, 4]\n[run]\nchunk_size = 1\n'
    )
    out = tmp_path / "job.h5"
    result = cli("sweep", "-c", job, "-p", "steps=5", "-o", out, "-q")
    assert result.code == 0, result.err
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert ds.sizes["step"] == 5
        assert list(ds["seed"].values) == [3, 4]
        assert json.loads(ds.attrs["params"])["scale"] == 0.5


@pytest.mark.system
def test_non_terminal_progress_is_timestamped_lines(tmp_path, toy_env) -> None:
    out = tmp_path / "p.h5"
    result = run_process(
        "sweep", "solve", "toy", "-g", "slope=range(4)", "-o", out, "--jobs", "1", env=toy_env
    )
    assert result.code == 0, result.err
    lines = [line for line in result.out.splitlines() if "points/s" in line]
    assert 1 <= len(lines) <= 3  # rate-limited to one per 10 s, plus the closing line
    assert lines[-1].split()[0][:4].isdigit() and "4/4 points" in lines[-1]
    quiet = run_process(
        "sweep",
        "solve",
        "toy",
        "-g",
        "slope=range(4)",
        "-o",
        tmp_path / "q.h5",
        "--jobs",
        "1",
        "-q",
        env=toy_env,
    )
    assert quiet.code == 0 and quiet.out == "" and quiet.err == ""


def _listing(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


BAD_SWEEPS = {
    "bad grid syntax": ["-g", "slope=linspace(0,1)"],
    "unknown grid function": ["-g", "slope=logspaced(0,1,3)"],
    "empty range": ["-g", "slope=range(0)"],
    "empty list": ["-g", "slope=,"],
    "missing =": ["-g", "slope"],
    "duplicate dimension": ["-g", "slope=1,2", "-g", "slope=3,4"],
    "unknown parameter": ["-g", "slop=1,2"],
    "wrong type (int)": ["-g", "steps=linspace(1,2,3)"],
    "wrong type (choice)": ["-g", "label=a,c"],
    "vector of wrong length": ["-g", "offset=[[1,2,3]]"],
    "repeated values": ["-g", "slope=1,1"],
    "shard 0/3": ["-g", "slope=1,2", "--shard", "0/3"],
    "shard 4/3": ["-g", "slope=1,2", "--shard", "4/3"],
    "shard syntax": ["-g", "slope=1,2", "--shard", "two"],
    "fixed and swept": ["-g", "slope=1,2", "-p", "slope=3"],
    "retry without resume": ["-g", "slope=1,2", "--retry-failed"],
    "jobs 0": ["-g", "slope=1,2", "--jobs", "0"],
    "unknown backend": ["-g", "slope=1,2", "--backend", "mpi"],
    "scheduler without dask": ["-g", "slope=1,2", "--scheduler", "tcp://127.0.0.1:1"],
    "no grid": ["-p", "slope=1"],
    "resume with nothing": ["-g", "slope=1,2", "--resume"],
    "negative noise": ["-g", "slope=1,2", "-p", "scale=-1"],
}


@pytest.mark.parametrize("args", list(BAD_SWEEPS.values()), ids=list(BAD_SWEEPS))
def test_bad_sweep_input(tmp_path, toy_env, cli, args) -> None:
    before = _listing(tmp_path)
    result = cli("sweep", "solve", "toy", *args, "-o", tmp_path / "out.h5")
    assert_one_line_error(result)
    assert _listing(tmp_path) == before


def test_bad_input_unknown_model_and_action(tmp_path, toy_env, cli) -> None:
    result = cli("sweep", "solve", "tyo", "-g", "slope=1,2", "-o", tmp_path / "o.h5")
    assert_one_line_error(result)
    assert "did you mean toy" in result.err
    assert_one_line_error(cli("sweep", "fit", "toy", "-g", "slope=1,2", "-o", tmp_path / "o.h5"))
    assert_one_line_error(cli("sweep", "solve", "toy", "-g", "slope=1,2"))  # no output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.system
def test_existing_output_needs_force(tmp_path, reference, cli) -> None:
    before = reference.read_bytes()
    result = cli("sweep", "solve", "toy", *GRID, "-o", reference)
    assert_one_line_error(result)
    assert "--force" in result.err
    assert reference.read_bytes() == before
    assert cli("sweep", "solve", "toy", *GRID, "-o", reference, "--force", "-q").code == 0


def test_missing_or_corrupt_parts_on_resume(tmp_path, toy_env, cli) -> None:
    out = tmp_path / "c.h5"
    parts = Path(str(out) + ".parts")
    parts.mkdir()
    (parts / "manifest.json").write_text("{not json")
    result = cli("sweep", "solve", "toy", "-g", "slope=1,2", "-o", out, "--resume")
    assert_one_line_error(result)
    assert "corrupt" in result.err
    # a parts folder left by another sweep
    (parts / "manifest.json").write_text(json.dumps({"model": "toy", "grid": {"slope": "1,3"}}))
    result = cli("sweep", "solve", "toy", "-g", "slope=1,2", "-o", out, "--resume")
    assert_one_line_error(result)
    assert "different sweep" in result.err
    # no parts folder at all
    parts.joinpath("manifest.json").unlink()
    parts.rmdir()
    result = cli("sweep", "solve", "toy", "-g", "slope=1,2", "-o", out, "--resume")
    assert_one_line_error(result)
    assert "nothing to resume" in result.err


@pytest.mark.system
@pytest.mark.processes
def test_corrupt_part_file_on_resume(tmp_path, toy_env, cli) -> None:
    grid = ["-g", "slope=linspace(0,1,6)", "--chunk-size", "1", "--jobs", "1"]
    out = tmp_path / "k.h5"
    parts = Path(str(out) + ".parts")
    marker = tmp_path / "paused"
    proc = start_sweep(grid, out, pausing(toy_env, "part", marker))
    wait_paused(marker, proc)  # killed once its first part is written
    proc.kill()
    release(marker, proc, limit=60)
    first = sorted(parts.glob("part-*.rlp"))[0]
    first.write_bytes(b"garbage")
    result = cli("sweep", "solve", "toy", *grid, "-o", out, "--resume")
    assert_one_line_error(result)
    assert first.name in result.err


@pytest.mark.system
def test_corrupt_or_foreign_shard_to_merge(tmp_path, reference, cli) -> None:
    bad = tmp_path / "bad.h5"
    bad.write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 100)
    out = tmp_path / "m.h5"
    assert_one_line_error(cli("store", "merge", out, reference, bad))
    foreign = tmp_path / "foreign.h5"
    xr.Dataset({"x": ("a", np.arange(3))}).to_netcdf(foreign, engine="h5netcdf")
    result = cli("store", "merge", out, reference, foreign)
    assert_one_line_error(result)
    assert "not a richlazy result" in result.err
    assert not out.exists()


def dask_sweep(tmp_path: Path, scheduler: str, timeout: str) -> list:
    """Arguments of a two-point toy sweep on the Dask scheduler at ``scheduler``."""
    return [
        "sweep",
        "solve",
        "toy",
        "-g",
        "slope=1,2",
        "-o",
        tmp_path / "o.h5",
        "--backend",
        "dask",
        "--scheduler",
        scheduler,
        "--worker-timeout",
        timeout,
    ]


@pytest.mark.system
def test_unreachable_scheduler_fails_within_timeout(tmp_path, toy_env) -> None:
    pytest.importorskip("distributed")
    start = time.monotonic()
    result = run_process(*dask_sweep(tmp_path, "tcp://127.0.0.1:9", "2"), env=toy_env, timeout=120)
    assert time.monotonic() - start < 60
    assert_one_line_error(result)
    assert "tcp://127.0.0.1:9" in result.err
    assert not (tmp_path / "o.h5").exists()


def test_scheduler_without_workers_times_out(tmp_path, toy_env, cli) -> None:
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=0, host="127.0.0.1", dashboard_address=None) as cluster:
        start = time.monotonic()
        result = cli(*dask_sweep(tmp_path, cluster.scheduler_address, "1"))
        assert time.monotonic() - start < 30
    assert_one_line_error(result)
    assert "no Dask workers" in result.err


@pytest.mark.system
def test_store_ls_and_show(tmp_path, reference, cli) -> None:
    (tmp_path / "junk.h5").write_text("not hdf5")
    listing = cli("store", "ls", tmp_path, "--json")
    assert listing.code == 0
    rows = {Path(r["file"]).name: r for r in json.loads(listing.out)}
    assert rows["ref.h5"]["done"] == 30 and rows["ref.h5"]["grid"] == {
        "slope": 5,
        "seed": 3,
        "offset": 2,
    }
    assert "not an HDF5" in rows["junk.h5"]["error"]
    shown = json.loads(cli("store", "show", reference, "--json").out)
    assert shown["attrs"]["model"] == "toy" and shown["points"]["done"] == 30
    text = cli("store", "show", reference)
    assert text.code == 0 and "slope" in text.out
    result = cli("store", "verify", tmp_path / "junk.h5")
    assert result.code == 1 and "not an HDF5" in result.err


@pytest.mark.system
def test_package_runs_as_module_and_console_script(tmp_path) -> None:
    version = subprocess.run(
        [sys.executable, "-m", "richlazy_cli", "--version"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert version.returncode == 0 and version.stdout.startswith("richlazy ")
    script = Path(sys.executable).parent / "richlazy"
    if script.exists():
        out = subprocess.run([str(script), "--version"], capture_output=True, text=True)
        assert out.stdout == version.stdout
    assert os.access(ROOT / ".ci" / "run", os.X_OK)


@pytest.mark.system
def test_slurm_template_runs_shards_and_merge(tmp_path, reference, toy_env) -> None:
    """jobs/slurm/sweep-array.sbatch and merge.sbatch, run by bash as SLURM would (no SLURM:
    tests/slurm/test_slurm.py submits them to a real one): 3 array tasks, then the merge."""
    folder = ROOT / "jobs" / "slurm"
    console = Path(sys.executable).parent / "richlazy"
    if not console.exists():
        pytest.skip("the richlazy console script is not installed next to this Python")
    job = tmp_path / "job.toml"
    job.write_text(
        'action = "solve"\nmodel = "toy"\n[grid]\nslope = "linspace(0,1,5)"\n'
        'seed = "range(3)"\noffset = "[[0,1],[1,0]]"\n'
    )
    env = dict(
        toy_env,
        RICHLAZY=str(console),
        JOB=str(job),
        OUT=str(tmp_path / "swept"),
        N="3",
        SLURM_ARRAY_TASK_MIN="1",
        SLURM_ARRAY_TASK_MAX="3",
        SLURM_ARRAY_TASK_COUNT="3",
        SLURM_CPUS_PER_TASK="1",
    )
    for task in ("1", "2", "3"):
        proc = subprocess.run(
            ["bash", str(folder / "sweep-array.sbatch")],
            env=dict(env, SLURM_ARRAY_TASK_ID=task),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        assert f"shard {task}/3" in proc.stdout, proc.stdout
    proc = subprocess.run(["bash", str(folder / "merge.sbatch")], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert_bitwise(reference, tmp_path / "swept.h5")


@pytest.mark.system
def test_checks_run_once_per_case_on_every_route(tmp_path, toy_env) -> None:
    """toy's check reads only `offset`: a sweep over `slope` checks once up front, and the
    routes that compute in this process (threads, --jobs 1) reuse that case for every chunk."""
    from richlazy_cli.engine.job import Job
    from richlazy_cli.engine.run import RunOptions, execute
    from richlazy_cli.models.base import get_model

    toy = get_model("toy")
    job_values = []
    for backend, jobs in (("threads", 2), ("loky", 1)):
        toy.check_calls = 0
        job = Job.build("toy", "solve", {}, [("slope", "linspace(0,1,40)")])
        assert toy.check_calls == 1
        out = tmp_path / f"{backend}.h5"
        opts = RunOptions(backend=backend, jobs=jobs, chunk_size=10, quiet=True)
        assert execute(job, out, opts, ["test"]).exit_code == 0
        job_values.append(toy.check_calls)
    # in process the case checked up front is reused, by the chunks and by the size
    # estimate (toy declares its outputs' bytes, from the kept case's values) alike
    assert job_values == [1, 1]
