"""Shard files hold only their own points; merging them gives the unsharded result, bitwise.

A shard file (``sweep --shard K/N``) keeps the grid's dimensions and coordinates, but its
variables run over ``point``, whose coordinate holds the flat grid index of each of the
shard's points (docs/engine.md, "Shard files").
"""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import xarray as xr

from richlazy_cli.engine.store import as_grid, open_result

from ..conftest import assert_one_line_error
from .test_sweep import assert_bitwise, data_of

# 8 x 4 x 2 = 64 points; a quarter of them is 16
GRID = ["-g", "slope=linspace(0,1,8)", "-g", "seed=range(4)", "-g", "scale=0.1,0.2"]
STEPS = 64  # the toy's per-point output: y over (step, output) and y_final


@pytest.fixture
def unsharded(tmp_path: Path, toy_env: dict[str, str], cli) -> Path:
    out = tmp_path / "all.h5"
    result = cli("sweep", "solve", "toy", *GRID, "-p", f"steps={STEPS}", "-o", out, "-q")
    assert result.code == 0, result.err
    return out


def shard(cli, tmp_path: Path, k: int, n: int, *options: str) -> Path:
    out = tmp_path / f"s{k}of{n}.h5"
    result = cli("sweep", "solve", "toy", *GRID, "-p", f"steps={STEPS}", "--shard", f"{k}/{n}",
                 "-o", out, "-q", *options)
    assert result.code == 0, result.err
    return out


@pytest.mark.system
def test_a_shard_file_holds_only_its_share(tmp_path, unsharded, cli) -> None:
    s = shard(cli, tmp_path, 2, 4)
    with xr.open_dataset(s, engine="h5netcdf") as ds, \
            xr.open_dataset(unsharded, engine="h5netcdf") as full:
        assert ds.attrs["shard"] == "2/4" and int(ds.attrs["complete"]) == 0
        np.testing.assert_array_equal(ds["point"].values, np.arange(1, 64, 4))
        # every array holds a quarter of the points: nothing is allocated for other shards
        for name in ("y", "y_final", "status", "elapsed"):
            assert ds[name].dims[0] == "point"
            assert ds[name].size * 4 == full[name].size, name
        assert ds["y"].shape == (16, STEPS, 2)
        # the grid's dimensions and coordinates are kept
        for dim in ("slope", "seed", "scale"):
            np.testing.assert_array_equal(ds[dim].values, full[dim].values)
        # and its points are the unsharded run's, bitwise
        at = np.unravel_index(ds["point"].values, full["status"].shape)
        y = full["y"].values[at]
        assert y.tobytes() == ds["y"].values.tobytes()
    # the file itself scales with the share: above the fixed part of a file (attributes, the
    # CF coordinate variables; a 2-point shard's size), a quarter of the points' bytes
    fixed = shard(cli, tmp_path, 1, 32).stat().st_size
    assert s.stat().st_size - fixed < 0.5 * (unsharded.stat().st_size - fixed)


@pytest.mark.system
def test_shards_in_the_new_layout_merge_to_the_unsharded_run(tmp_path, unsharded, cli) -> None:
    shards = [shard(cli, tmp_path, k, 4, "--jobs", "1" if k % 2 else "2") for k in (1, 2, 3, 4)]
    merged = tmp_path / "merged.h5"
    result = cli("store", "merge", merged, *reversed(shards))
    assert result.code == 0, result.err
    assert_bitwise(unsharded, merged)
    assert cli("store", "verify", merged).code == 0
    with xr.open_dataset(merged, engine="h5netcdf") as ds:
        assert "point" not in ds.dims and int(ds.attrs["complete"]) == 1


@pytest.mark.system
def test_show_verify_report_and_resume_read_a_shard_file(tmp_path, unsharded, cli) -> None:
    s = shard(cli, tmp_path, 3, 4)
    shown = cli("store", "show", s, "--json")
    assert shown.code == 0, shown.err
    info = json.loads(shown.out)
    assert info["points"] == {"total": 64, "done": 16, "failed": 0, "missing": 48}
    assert info["variables"]["y"]["dims"] == ["point", "step", "output"]
    verify = cli("store", "verify", s)
    assert verify.code == 1 and "48 of 64 points missing" in verify.err and "3/4" in verify.err
    # over the grid, a shard file is the unsharded result with the other shards' points missing
    grid_view, full = as_grid(open_result(s)), data_of(unsharded)
    mine = grid_view["status"].values >= 0
    assert int(mine.sum()) == 16
    assert grid_view["y"].values[mine].tobytes() == full["y"].values[mine].tobytes()
    assert np.isnan(grid_view["y"].values[~mine]).all()
    report = cli("report", s, "-o", tmp_path / "rep", "--kind", "lines", "--var", "y_final",
                 "--x", "slope")
    assert report.code == 0, report.err
    assert (tmp_path / "rep" / "index.html").exists()
    before = s.stat().st_mtime_ns
    again = cli("sweep", "solve", "toy", *GRID, "-p", f"steps={STEPS}", "--shard", "3/4",
                "-o", s, "--resume")
    assert again.code == 0 and "complete, nothing to do" in again.err
    assert s.stat().st_mtime_ns == before


@pytest.mark.system
def test_a_shard_resumed_from_its_file_keeps_the_layout(tmp_path, unsharded, cli) -> None:
    s = shard(cli, tmp_path, 1, 2)
    with h5py.File(s, "a") as f:  # as if two points had failed: --retry-failed redoes them
        status = f["status"][...]
        status[[0, 5]] = 2
        f["status"][...] = status
    result = cli("sweep", "solve", "toy", *GRID, "-p", f"steps={STEPS}", "--shard", "1/2",
                 "-o", s, "--resume", "--retry-failed", "-q")
    assert result.code == 0, result.err
    other = shard(cli, tmp_path, 2, 2)
    merged = tmp_path / "m.h5"
    assert cli("store", "merge", merged, s, other).code == 0
    assert_bitwise(unsharded, merged)


@pytest.mark.system
def test_merge_refuses_inconsistent_or_conflicting_shards(tmp_path, toy_env, cli) -> None:
    a, b = shard(cli, tmp_path, 1, 2), shard(cli, tmp_path, 2, 2)
    out = tmp_path / "m.h5"
    # a shard file that says it is another shard than the points it holds
    wrong = tmp_path / "wrong.h5"
    wrong.write_bytes(a.read_bytes())
    with h5py.File(wrong, "a") as f:
        f.attrs["shard"] = "2/2"
    result = cli("store", "merge", out, wrong, b)
    assert_one_line_error(result)
    assert "not those of shard 2/2" in result.err and not out.exists()
    # point indices edited: repeated, or outside the grid
    for edit in (lambda p: p.__setitem__(1, p[0]), lambda p: p.__setitem__(-1, 64)):
        wrong.write_bytes(a.read_bytes())
        with h5py.File(wrong, "a") as f:
            f.attrs["shard"] = "-"
            points = f["point"][...]
            edit(points)
            f["point"][...] = points
        result = cli("store", "merge", out, wrong, b)
        assert_one_line_error(result)
        assert "point coordinate" in result.err and not out.exists()
    # overlapping shards of different splits agree where they overlap: accepted ...
    third = shard(cli, tmp_path, 1, 3)
    assert cli("store", "merge", out, a, b, third).code == 0
    out.unlink()
    # ... but not when a point they share differs (status or data)
    with h5py.File(third, "a") as f:
        f["y_final"][1] += 1.0  # flat index 3, which shard 2/2 holds too
    result = cli("store", "merge", out, a, b, third)
    assert_one_line_error(result)
    assert "conflicting results" in result.err and not out.exists()


@pytest.mark.system
def test_shard_files_of_the_former_layout_still_merge_and_resume(tmp_path, unsharded,
                                                                 cli) -> None:
    """A shard file over the whole grid, NaN at the other shards' points (as written before
    the point layout), merges with shard files of the new layout and resumes into one."""
    from richlazy_cli.engine.store import write_result

    new = shard(cli, tmp_path, 2, 2)
    former = tmp_path / "former.h5"
    write_result(as_grid(open_result(shard(cli, tmp_path, 1, 2))), former)
    with xr.open_dataset(former, engine="h5netcdf") as ds:
        assert "point" not in ds.dims and ds["y"].shape[:3] == (8, 4, 2)
    merged = tmp_path / "m.h5"
    assert cli("store", "merge", merged, former, new).code == 0
    assert_bitwise(unsharded, merged)
    with h5py.File(former, "a") as f:  # as if two points had failed
        status = f["status"][...]
        status[0, 0, 0] = status[0, 1, 0] = 2
        f["status"][...] = status
    result = cli("sweep", "solve", "toy", *GRID, "-p", f"steps={STEPS}", "--shard", "1/2",
                 "-o", former, "--resume", "--retry-failed", "-q")
    assert result.code == 0, result.err
    with xr.open_dataset(former, engine="h5netcdf") as ds:
        np.testing.assert_array_equal(ds["point"].values, np.arange(0, 64, 2))
    merged.unlink()
    assert cli("store", "merge", merged, former, new).code == 0
    assert_bitwise(unsharded, merged)
