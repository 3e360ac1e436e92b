"""Store and engine internals: atomic writes, grid parsing, sharding, progress output."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

from richlazy_cli.engine.grid import Shard, parse_shard, shard_from_env
from richlazy_cli.engine.progress import Reporter
from richlazy_cli.engine.store import atomic_write, write_result
from richlazy_cli.errors import BadInput


def test_interrupted_write_leaves_the_old_file_and_no_debris(tmp_path: Path) -> None:
    out = tmp_path / "r.h5"
    xr.Dataset({"x": ("a", np.arange(3.0), {"long_name": "x"})}).to_netcdf(out, engine="h5netcdf")
    before = out.read_bytes()

    def failing(tmp: Path) -> None:
        tmp.write_bytes(b"half a file")
        raise OSError("disk full")

    with pytest.raises(OSError):
        atomic_write(out, failing)
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.h5"]


@pytest.mark.system
def test_write_result_refuses_existing_file(tmp_path: Path) -> None:
    out = tmp_path / "r.h5"
    ds = xr.Dataset({"x": ("a", np.arange(3.0), {"long_name": "x"})})
    write_result(ds, out)
    with pytest.raises(BadInput, match="--force"):
        write_result(ds, out)
    write_result(ds * 2, out, force=True)
    with xr.open_dataset(out, engine="h5netcdf") as back:
        np.testing.assert_array_equal(back["x"].values, [0.0, 2.0, 4.0])


@pytest.mark.parametrize("size,count", [(30, 3), (31, 4), (5, 8), (1, 1)])
def test_shards_partition_the_grid_in_balance(size: int, count: int) -> None:
    parts = [Shard(k, count).select(size) for k in range(1, count + 1)]
    joined = np.sort(np.concatenate(parts))
    np.testing.assert_array_equal(joined, np.arange(size))
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1


def test_shard_parsing_and_slurm_variables() -> None:
    assert parse_shard("2/8") == Shard(2, 8)
    for bad in ("0/3", "4/3", "1/0", "a/b", "3"):
        with pytest.raises(BadInput):
            parse_shard(bad)
    with pytest.raises(BadInput, match="not in a SLURM array task"):
        shard_from_env({})
    assert shard_from_env(
        {"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "7"}
    ) == Shard(1, 8)
    assert shard_from_env(
        {"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "1"}
    ) == Shard(4, 4)
    # --array=1-16:2 runs tasks 1, 3, ..., 15: eight shards, task 15 the last
    step = {"SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "15",
            "SLURM_ARRAY_TASK_STEP": "2", "SLURM_ARRAY_TASK_COUNT": "8"}
    shards = [shard_from_env({**step, "SLURM_ARRAY_TASK_ID": str(t)}) for t in range(1, 16, 2)]
    assert shards == [Shard(k, 8) for k in range(1, 9)]
    for bad in (
        {"SLURM_ARRAY_TASK_ID": "x", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_COUNT": "4"},
        {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "4"},  # no MIN
        {**step, "SLURM_ARRAY_TASK_ID": "4"},  # not on the step
        {**step, "SLURM_ARRAY_TASK_ID": "17"},  # outside the array
        # --array=1,4,9: three tasks that no MIN-MAX:STEP numbers
        {"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "9",
         "SLURM_ARRAY_TASK_STEP": "1", "SLURM_ARRAY_TASK_COUNT": "3"},
    ):
        with pytest.raises(BadInput, match="--shard slurm"):
            shard_from_env(bad)


def test_progress_on_a_terminal_is_a_bar_with_rate_and_eta() -> None:
    stream = io.StringIO()
    with Reporter(10, "toy solve", stream=stream, terminal=True) as reporter:
        reporter.advance(4)
        reporter.advance(6)
    text = stream.getvalue()
    assert "toy solve" in text and "10/10" in text and "pt/s" in text


def test_progress_lines_are_rate_limited() -> None:
    stream = io.StringIO()
    with Reporter(1000, "x", stream=stream, terminal=False, interval=3600) as reporter:
        for _ in range(100):
            reporter.advance(10)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2  # the first update and the closing line
    assert "1000/1000 points" in lines[-1] and "ETA" in lines[-1]
    quiet = io.StringIO()
    with Reporter(10, "x", stream=quiet, quiet=True, terminal=True) as reporter:
        reporter.advance(10)
    assert quiet.getvalue() == ""


@settings(max_examples=40, deadline=None)
@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    fixed=st.lists(st.booleans(), min_size=3, max_size=3),
    chunk=st.integers(1, 7),
    seed=st.integers(0, 1000),
)
def test_chunks_group_batch_compatible_points_in_first_seen_order(shape, fixed, chunk,
                                                                  seed) -> None:
    """Job.chunks (numpy) cuts exactly as grouping by the non-batchable indices in a dict."""
    from richlazy_cli.engine.job import Job

    class Fake:
        def __init__(self, shape):
            self.shape = tuple(shape)
            self.dims = [type("D", (), {"name": f"p{k}"})() for k in range(len(shape))]

    class Model:
        implementations = ()  # no implementation batches over more than the family

        @staticmethod
        def param(name):
            return type("P", (), {"batchable": not fixed[int(name[1:])]})()

    job = Job.__new__(Job)
    job.grid, job.model = Fake(shape), Model
    size = int(np.prod(shape))
    indices = np.random.default_rng(seed).permutation(size)[: max(1, size // 2)]
    keys = [k for k in range(len(shape)) if fixed[k]]
    groups: dict[tuple[int, ...], list[int]] = {}
    for i in indices.tolist():
        at = np.unravel_index(i, shape)
        groups.setdefault(tuple(int(at[k]) for k in keys), []).append(i)
    expected = [g[s : s + chunk] for g in groups.values() for s in range(0, len(g), chunk)]
    assert [c.tolist() for c in job.chunks(indices, chunk)] == expected
