"""Bad input of the second audit (docs/engine.md, "Hostile input"): names that are not UTF-8,
shard counts past the grid, and ``figure`` on readable but odd files.

* A name that is not UTF-8 (a Latin-1 byte, which Python holds as a lone surrogate): the output
  file, its folder, a data file, a job file, shard files and a merge of them are written and
  resumed like any other name; the attributes record them without loss (the JSON ones as
  ``\\udcXX``, which ``os.fsencode`` turns back into the bytes) and never fail after the run.
* ``--shard K/N`` and a SLURM array of N tasks with N past the grid's points (2⁶³, 10³⁰) are
  one line, exit 2, before any work (never NumPy's ``arange`` on numbers it cannot index).
* ``figure`` on a readable result it cannot draw (a ``grid`` attribute that is not JSON, no
  point done, a log axis with nothing positive) is one line naming the figure, the file and
  what is wrong, exit 2.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest

from richlazy_cli.engine import interrupts
from richlazy_cli.engine.grid import Shard

from ..conftest import ROOT, assert_one_line_error

LATIN1 = os.fsdecode(b"\xe9t\xe9\xff")
"""A name's bytes that are not UTF-8 ("été" in Latin-1, and 0xff), as Python holds them."""
TOY = ["sweep", "solve", "toy", "-g", "slope=linspace(0,1,4)", "--jobs", "1", "-q"]


def _attrs(path: Path) -> dict[str, object]:
    """The file's global attributes as written (text as text, numbers as numbers)."""
    def value(v: object) -> object:
        if isinstance(v, bytes):
            return v.decode()
        return v if isinstance(v, str) else np.asarray(v).ravel()[0].item()

    with h5py.File(os.fsencode(path), "r") as f:
        return {k: value(v) for k, v in f.attrs.items()}


def _recorded_bytes(path: Path, key: str = "command") -> list[bytes]:
    """The strings of a JSON attribute, as the bytes of the names they record."""
    value = json.loads(str(_attrs(path)[key]))
    texts = value if isinstance(value, list) else [value]
    return [os.fsencode(str(t)) for t in texts]


# -- names that are not UTF-8 ---------------------------------------------------------------
def test_an_output_file_and_folder_named_in_latin1_are_written_and_recorded(
        tmp_path, toy_env, cli) -> None:
    folder = tmp_path / f"runs-{LATIN1}"
    folder.mkdir()
    for out in (tmp_path / f"o-{LATIN1}.h5", folder / "o.h5"):
        result = cli(*TOY, "-o", out)
        assert result.code == 0, result.err
        assert os.fsencode(out) in _recorded_bytes(out)  # the command, byte for byte
        assert "\\udce9t\\udce9\\udcff" in str(_attrs(out)["history"])  # the declared escape
        assert _attrs(out)["complete"] == 1


def test_a_latin1_output_name_too_long_is_one_line(tmp_path, toy_env, cli) -> None:
    """The file system's limit counts bytes: 200 Latin-1 é are 200 bytes, not 400."""
    fits = tmp_path / (os.fsdecode(b"\xe9" * 200) + ".h5")
    assert cli(*TOY, "-o", fits).code == 0
    too_long = tmp_path / (os.fsdecode(b"\xe9" * 250) + ".h5")
    result = cli(*TOY, "-o", too_long)
    assert_one_line_error(result)
    assert "output name too long" in result.err and not too_long.exists()


def test_a_latin1_data_file_is_recorded_without_loss(tmp_path, toy_env, cli) -> None:
    data = tmp_path / f"data-{LATIN1}.npz"
    X = np.random.default_rng(0).standard_normal((4, 12))
    np.savez(data, X=X, y=X @ np.r_[1.0, 1.0, np.zeros(10)])
    out = tmp_path / "data.h5"
    result = cli("sweep", "solve", "diagonal", "-g", "alpha=0.1,1", "-p", "t_max=5", "-p",
                 f"data={data}", "--jobs", "1", "-q", "-o", out)
    assert result.code == 0, result.err
    inputs = json.loads(str(_attrs(out)["inputs"]))
    assert [os.fsencode(i["path"]) for i in inputs] == [os.fsencode(data)]


def test_a_latin1_job_file_is_recorded_without_loss(tmp_path, toy_env, cli) -> None:
    job = tmp_path / f"job-{LATIN1}.toml"
    job.write_text('action = "solve"\nmodel = "toy"\n[grid]\nslope = "1,2"\n')
    out = tmp_path / "job.h5"
    result = cli("sweep", "-c", job, "--jobs", "1", "-q", "-o", out)
    assert result.code == 0, result.err
    assert os.fsencode(job) in _recorded_bytes(out)


def test_latin1_shard_files_are_written_and_merged(tmp_path, toy_env, cli) -> None:
    shards = [tmp_path / f"s{k}-{LATIN1}.h5" for k in (1, 2)]
    for k, shard in enumerate(shards, 1):
        result = cli(*TOY, "--shard", f"{k}/2", "-o", shard)
        assert result.code == 0, result.err
    merged = tmp_path / f"merged-{LATIN1}.h5"
    result = cli("store", "merge", merged, *shards)
    assert result.code == 0, result.err
    assert _attrs(merged)["complete"] == 1
    assert {os.fsencode(s) for s in shards} <= set(_recorded_bytes(merged))


def test_an_interrupted_sweep_in_a_latin1_folder_resumes(tmp_path, toy_env, cli,
                                                         monkeypatch) -> None:
    """Stopped after its first part (SIGINT as the engine sees it: a KeyboardInterrupt at the
    hook after a part is written), the sweep keeps its parts; ``--resume`` finishes it."""
    folder = tmp_path / LATIN1
    folder.mkdir()
    out = folder / "o.h5"
    pause = interrupts.pause_point

    def stop(point: str) -> None:
        if point == "part":
            raise KeyboardInterrupt("SIGINT")
        pause(point)

    monkeypatch.setattr(interrupts, "pause_point", stop)
    first = cli(*TOY, "--chunk-size", "1", "-o", out)
    assert first.code == 130 and Path(f"{out}.parts").is_dir(), first.err
    monkeypatch.setattr(interrupts, "pause_point", pause)
    resumed = cli(*TOY, "--chunk-size", "1", "-o", out, "--resume")
    assert resumed.code == 0, resumed.err
    assert _attrs(out)["complete"] == 1 and not Path(f"{out}.parts").exists()


# -- shard counts past the grid -------------------------------------------------------------
HUGE = [2**63, 2**64 + 1, 10**30]


@pytest.mark.parametrize("count", HUGE)
@pytest.mark.parametrize("dry_run", [False, True])
def test_a_shard_count_past_the_grid_is_one_line(tmp_path, toy_env, cli, count,
                                                 dry_run) -> None:
    out = tmp_path / "s.h5"
    result = cli(*TOY, "--shard", f"1/{count}", "-o", out, *(["--dry-run"] if dry_run else []))
    assert_one_line_error(result)
    assert f"{count} shards for a grid of 4 points; give at most 4 shards" in result.err
    assert not list(tmp_path.iterdir())
    result = cli(*TOY, "--shard", "5/5", "-o", out)  # one shard too many: no point of its own
    assert_one_line_error(result)
    assert "5 shards for a grid of 4 points" in result.err


@pytest.mark.parametrize("count", HUGE)
def test_a_slurm_array_past_the_grid_is_one_line(tmp_path, toy_env, cli, monkeypatch,
                                                 count) -> None:
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "1")
    monkeypatch.setenv("SLURM_ARRAY_TASK_MIN", "1")
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", str(count))
    monkeypatch.delenv("SLURM_ARRAY_TASK_MAX", raising=False)
    monkeypatch.delenv("SLURM_ARRAY_TASK_STEP", raising=False)
    out = tmp_path / "s.h5"
    result = cli(*TOY, "--shard", "slurm", "-o", out)
    assert_one_line_error(result)
    assert f"--shard slurm (SLURM array task 1 of {count} tasks from 1)" in result.err
    assert f"{count} shards for a grid of 4 points" in result.err
    assert not list(tmp_path.iterdir())


def test_a_shard_selects_its_points_as_integers_whatever_the_count() -> None:
    """Round-robin: shard K of N holds K-1, K-1+N, ... below the size (checked against a
    plain Python loop), as int64 even where N does not fit in one."""
    for size in (0, 1, 4, 7):
        for count in (1, 2, 3, 7, 8, 2**63, 10**30):
            for index in (1, 2, 3, 8, 2**63):
                if index > count:
                    continue
                got = Shard(index, count).select(size)
                assert got.dtype == np.int64
                assert got.tolist() == [i for i in range(size) if i % count == index - 1]


# -- figure on readable but odd files -------------------------------------------------------
@pytest.fixture(scope="module")
def diagonal_result(tmp_path_factory) -> Path:
    """A tiny run of azulay-diagonal's job (its registry's ``tiny`` sizes): a figure whose
    population error is on a log axis."""
    from richlazy_cli.cli.app import run
    from richlazy_cli.figures.registry import get

    figure = get("azulay-diagonal")
    (job,) = figure.jobs
    out = tmp_path_factory.mktemp("figure") / "diag.h5"
    args = ["sweep", "-c", str(ROOT / job), "-o", str(out), "-q", "--jobs", "1"]
    for key, value in figure.tiny.get(job, {}).items():
        args += ["-p", f"{key}={value}"]
    assert run(args) == 0
    return out


def _damaged(source: Path, target: Path, how: str) -> Path:
    """A copy of ``source`` with its ``grid`` attribute not JSON, or every point failed (or
    all but the first), their values NaN, the coordinates kept."""
    shutil.copy(source, target)
    with h5py.File(target, "r+") as f:
        if how == "grid":
            f.attrs["grid"] = "delta=0,1"
            return target
        status = f["status"]
        failed = np.full(status.shape, 2, dtype=status.dtype)
        if how == "one-done":
            failed.flat[0] = 0
        status[...] = failed
        for name, item in f.items():
            if (isinstance(item, h5py.Dataset) and not item.is_scale and item.dtype.kind == "f"
                    and name != "elapsed" and item.shape[:status.ndim] == status.shape):
                item[...] = np.nan
    return target


@pytest.mark.parametrize("how,what", [
    ("grid", "the grid attribute is not JSON ('delta=0,1')"),
    ("all-failed", "no point is done (64 failed, 0 missing of 64): nothing to draw"),
    ("one-done", "cannot be drawn from these results (ValueError: Data cannot be log-scaled"),
])
def test_figure_on_a_damaged_result_is_one_line_naming_figure_and_file(
        tmp_path, cli, diagonal_result, how, what) -> None:
    damaged = _damaged(diagonal_result, tmp_path / f"{how}.h5", how)
    result = cli("figure", "azulay-diagonal", damaged, "-o", tmp_path / "figs", "-q")
    assert_one_line_error(result)
    assert f"figure azulay-diagonal: {damaged}: {what}" in result.err, result.err
    assert not (tmp_path / "figs" / "azulay-diagonal.png").exists()
