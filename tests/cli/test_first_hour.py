"""A newcomer's first hour: the rough edges of the command line, each answered with one line
that says what to type, and a dry run that shows what a grid means before anything runs."""

from __future__ import annotations

import io
import json
import os

import pytest

from richlazy_cli.engine.progress import Reporter

from ..conftest import assert_one_line_error, run_process

TOY4 = ["sweep", "solve", "toy", "-g", "slope=0,1,2,3"]


def test_param_with_a_space_instead_of_equals_names_the_form(tmp_path, cli) -> None:
    result = cli("solve", "single-neuron", "-p", "delta", "1", "-o", tmp_path / "x.h5")
    assert_one_line_error(result)
    assert "-p delta=1" in result.err and "-p NAME=VALUE" in result.err
    assert not (tmp_path / "x.h5").exists()


def test_a_grid_that_does_not_parse_names_the_grammar(tmp_path, cli) -> None:
    result = cli("sweep", "solve", "single-neuron", "-g", "delta=-1:1:5", "-o",
                 tmp_path / "y.h5", "--dry-run")
    assert_one_line_error(result)
    assert "linspace(a,b,n)" in result.err and "range(n)" in result.err
    assert "'-1:1:5'" in result.err


@pytest.mark.parametrize(("action", "says"), [
    ("solvee", "unknown action 'solvee': use solve or train"),
    ("single-neuron", "'single-neuron' is a model; the action comes first"),
])
def test_a_missing_or_wrong_action_is_a_plain_line(tmp_path, cli, action, says) -> None:
    result = cli("sweep", action, "single-neuron", "-g", "delta=1,2", "-o", tmp_path / "z.h5")
    assert_one_line_error(result)
    assert says in result.err
    assert "Value error" not in result.err and "is not one of" not in result.err


def test_store_ls_fits_80_columns(tmp_path, toy_env, cli, monkeypatch) -> None:
    (tmp_path / "results").mkdir()
    for name in ("fig1b-small.h5", "single-neuron-delta.h5"):
        assert cli(*TOY4, "-o", tmp_path / "results" / name, "-q", "--jobs", "1").code == 0
    monkeypatch.setenv("COLUMNS", "80")
    listing = run_process("store", "ls", env=dict(os.environ), cwd=tmp_path)  # results/
    assert listing.code == 0, listing.err
    lines = listing.out.splitlines()
    assert all(len(line.rstrip()) <= 80 for line in lines), listing.out
    rows = [line for line in lines if ".h5" in line]
    assert len(rows) == 2
    for row in rows:  # a whole name, the model, the grid's shape and the counts on one line
        assert "toy" in row and "4 done" in row and " 4 " in row
    assert any("fig1b-small.h5" in r for r in rows)


def test_jobs_above_the_core_count_warns_once(tmp_path, toy_env, cli) -> None:
    cores = len(os.sched_getaffinity(0))
    result = cli(*TOY4, "-o", tmp_path / "j.h5", "-q", "--jobs", str(cores + 6),
                 "--backend", "threads")
    assert result.code == 0, result.err
    warnings = [line for line in result.err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and f"{cores} core(s)" in warnings[0]
    quiet = cli(*TOY4, "-o", tmp_path / "k.h5", "-q", "--jobs", str(cores), "--backend",
                "threads")
    assert quiet.code == 0 and "warning" not in quiet.err


def test_models_name_shows_outputs_and_docs_page(cli) -> None:
    result = cli("models", "single-neuron")
    assert result.code == 0, result.err
    assert "outputs of single-neuron" in result.out
    assert "kernel_distance" in result.out and "basin_score" in result.out
    assert "docs/single-neuron.md" in result.out
    data = json.loads(cli("models", "single-neuron", "--json").out)
    assert data["docs"] == "docs/single-neuron.md"
    names = {row["name"] for row in data["outputs"]}
    assert {"a", "w", "loss", "kernel_distance"} <= names


def test_dry_run_shows_each_axis_first_last_and_count(tmp_path, cli) -> None:
    """``logspace(0.1,10,5)`` meant as 0.1 ... 10 shows as 1.259 ... 1e+10 at once."""
    args = ["sweep", "solve", "single-neuron", "-g", "t_max=logspace(0.1,10,5)",
            "-g", "delta=linspace(-1,1,3)", "-p", "n_records=11", "-o", tmp_path / "d.h5",
            "--dry-run"]
    result = cli(*args)
    assert result.code == 0, result.err
    assert "  t_max: 1.259 ... 1e+10 (5 values, log)" in result.out
    assert "  delta: -1 ... 1 (3 values, linear)" in result.out
    data = json.loads(cli(*args, "--json").out)
    assert data["axes"]["delta"] == {"first": -1.0, "last": 1.0, "count": 3}
    assert data["estimate"]["compile_seconds"] >= 0


def test_no_eta_until_a_point_is_done() -> None:
    stream = io.StringIO()
    reporter = Reporter(10, "toy solve", stream=stream, interval=0.0, terminal=False)
    with reporter:
        update = reporter.chunk_progress(0, 5)
        update(0.01)  # a hundredth of the first chunk: nothing to extrapolate from
        first = stream.getvalue().splitlines()[-1]
        reporter.advance(5, key=0)
        second = stream.getvalue().splitlines()[-1]
    assert "ETA ?" in first
    assert "5/10 points" in second and "ETA 0:" in second
