"""What a new user meets first: completion, help, one model, --json, dry-run estimates, store ls,
worker caps, typed job files, quiet stderr, and clean interruptions."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import xarray as xr

from ..conftest import (
    assert_one_line_error,
    pausing,
    release,
    run_process,
    wait_paused,
)

TOY4 = ["sweep", "solve", "toy", "-g", "slope=0,1,2,3"]


# -- completion and help --------------------------------------------------------------------
def test_show_completion_prints_a_script(tmp_path) -> None:
    env = dict(os.environ, _TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION="1", SHELL="/bin/bash")
    result = run_process("--show-completion", "bash", env=env)
    assert result.code == 0, result.err
    assert "_richlazy_completion" in result.out and "complete " in result.out
    assert "--install-completion" in run_process("--help").out


def test_help_shows_flags_plainly_with_defaults_uncut_when_piped() -> None:
    result = run_process("sweep", "--help", env=dict(os.environ, COLUMNS=""))
    assert result.code == 0, result.err
    assert "<bool>" not in result.out
    assert "[default: (all cores)]" in result.out and "<loky|threads|dask>" in result.out
    # the help column is whole on one line, not wrapped at rich's 80 columns
    assert "Dask scheduler: tcp://HOST:PORT, 'local' or 'slurm' (--jobs SLURM jobs)." in (
        result.out
    )
    report = run_process("report", "--help").out
    assert "lines" in report and "scaling" in report  # every kind the library draws


# -- models NAME ----------------------------------------------------------------------------
def test_models_shows_one_model(toy_env, cli) -> None:
    result = cli("models", "toy")
    assert result.code == 0, result.err
    assert "toy" in result.out and "slope" in result.out and "single-neuron" not in result.out
    data = json.loads(cli("models", "toy", "--json").out)
    assert data["name"] == "toy" and data["actions"] == ["solve", "train"]
    assert "slope" in {p["name"] for p in data["params"]}
    unknown = cli("models", "tyo")
    assert_one_line_error(unknown)
    assert "did you mean toy" in unknown.err


# -- --json ---------------------------------------------------------------------------------
def test_json_for_solve_sweep_and_verify(tmp_path, toy_env, cli, monkeypatch) -> None:
    single = cli("solve", "toy", "-o", tmp_path / "s.h5", "--json")
    assert single.code == 0, single.err
    data = json.loads(single.out)
    assert data["path"] == str(tmp_path / "s.h5") and data["counts"]["done"] == 1

    monkeypatch.setenv("RICHLAZY_TOY_FAIL", "1")
    out = tmp_path / "f.h5"
    swept = cli(*TOY4, "-p", "fail_at=2", "-o", out, "--jobs", "1", "--json")
    assert swept.code == 1
    data = json.loads(swept.out)
    assert data["path"] == str(out) and data["exit_code"] == 1
    assert data["counts"] == {"total": 4, "done": 3, "failed": 1, "missing": 0}
    assert data["failures"][0]["point"] == {"slope": 2.0}
    assert "requested failure" in data["failures"][0]["message"]
    assert data["plan"]["points"] == 4

    good = json.loads(cli("store", "verify", out, "--json").out)
    assert good == {"file": str(out), "ok": True, "problems": [], "notes": []}
    shard = tmp_path / "half.h5"
    assert cli(*TOY4, "-o", shard, "--shard", "1/2", "-q").code == 0
    bad = cli("store", "verify", shard, "--json")
    assert bad.code == 1
    data = json.loads(bad.out)
    assert data["ok"] is False and "missing" in data["problems"][0]


# -- dry run --------------------------------------------------------------------------------
def test_dry_run_estimates_time_from_a_probe(tmp_path, toy_env, cli) -> None:
    out = tmp_path / "d.h5"
    args = [*TOY4, "-g", "seed=range(2)", "-p", "sleep=0.25", "-o", out, "--jobs", "2"]
    text = cli(*args, "--dry-run")
    assert text.code == 0, text.err
    line = next(x for x in text.out.splitlines() if x.startswith("estimated time:"))
    assert "≈" in line and "probe of 1 point" in line
    data = json.loads(cli(*args, "--dry-run", "--json").out)
    estimate = data["estimate"]
    # every point sleeps 0.25 s: 8 points on 2 workers, about 1 s (up to 2 s where other
    # processes keep a core busy: the workers then share the cores, engine/startup.py)
    assert 0.25 <= estimate["probe_seconds"] < 2.0
    serial = 8 * estimate["probe_seconds"]
    # The floor is the sleeps themselves on 2 workers (8 x 0.25 s / 2 = 1 s), less 5%: the
    # estimate splits the probe's time into set-up and per-point time, so it may sit a little
    # below 8 probes / 2 (1.012 s against 1.014 s measured once) but never below the sleeps.
    assert 0.95 * 8 * 0.25 / 2 <= estimate["seconds"] <= serial
    assert not out.exists() and not Path(f"{out}.parts").exists()


# -- --jobs capped --------------------------------------------------------------------------
def test_jobs_capped_at_the_number_of_chunks(tmp_path, toy_env, cli) -> None:
    out = tmp_path / "c.h5"
    args = [*TOY4, "-o", out, "--jobs", "16", "--chunk-size", "2"]
    dry = cli(*args, "--dry-run")
    assert "2 worker(s); --jobs 16 capped at the number of chunks" in dry.out
    result = cli(*args, "--backend", "threads")
    assert result.code == 0, result.err
    assert "on 2 workers (--jobs 16 capped at the number of chunks)" in result.out
    data = json.loads(cli(*args, "--force", "--backend", "threads", "--json").out)
    assert data["plan"]["jobs"] == 16 and data["plan"]["workers"] == 2


# -- store ls -------------------------------------------------------------------------------
def test_store_ls_recurses_shows_sweeps_in_progress_and_whole_names(
    tmp_path, toy_env, cli, monkeypatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)  # as in a pipe: no width given
    deep = tmp_path / "a-rather-long-folder-name-for-the-results-of-one-study" / "sub"
    deep.mkdir(parents=True)
    done = deep / "a-long-result-file-name-that-rich-would-cut-at-eighty-columns.h5"
    result = cli(*TOY4, "-o", done, "-q", "--jobs", "1")
    assert result.code == 0, result.err
    parts = tmp_path / "running.h5.parts"  # a sweep in progress, as the engine leaves it
    parts.mkdir()
    manifest = {"model": "toy", "action": "solve", "params": {}, "grid": {"slope": "0,1,2"},
                "shard": None}
    (parts / "manifest.json").write_text(json.dumps(manifest))
    listing = cli("store", "ls", tmp_path, "--json")
    assert listing.code == 0, listing.err
    rows = {Path(r["file"]).name: r for r in json.loads(listing.out)}
    assert rows[done.name]["state"] == "complete" and rows[done.name]["done"] == 4
    assert rows["running.h5"]["state"] == "in progress"
    assert rows["running.h5"]["missing"] == 3 and rows["running.h5"]["grid"] == {"slope": 3}
    table = cli("store", "ls", tmp_path)  # stdout is not a terminal here either
    assert str(done) in table.out  # the whole path, on one line
    assert "in progress" in table.out
    top = json.loads(cli("store", "ls", tmp_path, "--top", "--json").out)
    assert [Path(r["file"]).name for r in top] == ["running.h5"]


# -- typed job files and options ------------------------------------------------------------
BAD_RUN = {
    "fail_fast string": 'fail_fast = "no"',
    "jobs string": 'jobs = "two"',
    "jobs float": "jobs = 1.5",
    "jobs bool": "jobs = true",
    "timeout string": 'worker_timeout = "x"',
    "timeout nan": "worker_timeout = nan",
    "output number": "output = 5",
    "chunk size zero": "chunk_size = 0",
    "backend unknown": 'backend = "mpi"',
}


@pytest.mark.parametrize("line", list(BAD_RUN.values()), ids=list(BAD_RUN))
def test_job_file_run_options_are_type_checked(tmp_path, toy_env, cli, line) -> None:
    job = tmp_path / "job.toml"
    job.write_text(f'action = "solve"\nmodel = "toy"\n[grid]\nslope = "0,1"\n[run]\n{line}\n')
    result = cli("sweep", "-c", job, "-o", tmp_path / "o.h5")
    assert_one_line_error(result)
    assert "[run]" in result.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.toml"]


def test_job_file_fail_fast_true_and_grid_values_checked(tmp_path, toy_env, cli) -> None:
    job = tmp_path / "job.toml"
    job.write_text('action = "solve"\nmodel = "toy"\n[grid]\ndelta = 5\n')
    result = cli("sweep", "-c", job, "-o", tmp_path / "o.h5")
    assert_one_line_error(result)
    assert "[grid] delta = 5" in result.err


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0"])
def test_worker_timeout_must_be_positive_and_finite(tmp_path, toy_env, cli, value) -> None:
    result = cli(*TOY4, "-o", tmp_path / "o.h5", "--backend", "dask", "--worker-timeout", value)
    assert_one_line_error(result)
    assert "--worker-timeout" in result.err


@pytest.mark.parametrize(
    "source,error", [("def (\n", "SyntaxError"), ("raise RuntimeError('boom')\n", "boom")]
)
def test_broken_models_module_is_bad_input(tmp_path, source, error) -> None:
    (tmp_path / "broken_models.py").write_text(source)
    env = dict(os.environ, RICHLAZY_MODELS="broken_models", PYTHONPATH=str(tmp_path))
    result = run_process("models", env=env)
    assert_one_line_error(result)
    assert "broken_models" in result.err and error in result.err


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_numpy_warnings_do_not_reach_stderr(tmp_path, toy_env, jobs) -> None:
    result = run_process(
        *TOY4, "-p", "warn=true", "-o", tmp_path / "w.h5", "--jobs", jobs, "--chunk-size", "2",
        "-q", env=toy_env,
    )
    assert result.code == 0 and result.err == "", result.err


# -- progress from inside a chunk -----------------------------------------------------------
def test_progress_reaches_models_computed_in_process(tmp_path, toy_env, monkeypatch) -> None:
    from richlazy_cli.engine.job import Job
    from richlazy_cli.engine.progress import Reporter
    from richlazy_cli.engine.run import RunOptions, execute

    calls: list[tuple[int, float]] = []
    original = Reporter.chunk_progress

    def recording(self, key, points):  # type: ignore[no-untyped-def]
        update = original(self, key, points)

        def record(fraction: float) -> None:
            calls.append((key, fraction))
            update(fraction)

        return record

    monkeypatch.setattr(Reporter, "chunk_progress", recording)
    job = Job.build("toy", "solve", {}, [("slope", "0,1,2,3")])
    opts = RunOptions(jobs=1, chunk_size=2, quiet=False)
    assert execute(job, tmp_path / "p.h5", opts, ["test"]).exit_code == 0
    assert calls == [(0, 0.5), (0, 1.0), (2, 0.5), (2, 1.0)]
    calls.clear()
    job = Job.build("toy", "solve", {}, [("slope", "0,1,2,3")])
    opts = RunOptions(jobs=2, chunk_size=2, quiet=False)  # worker processes: no callback
    assert execute(job, tmp_path / "q.h5", opts, ["test"]).exit_code == 0
    assert calls == []


# -- interruptions --------------------------------------------------------------------------
def _popen(args: list, env: dict[str, str], err: Path) -> subprocess.Popen:
    with open(err, "w") as fh:
        return subprocess.Popen(
            [sys.executable, "-m", "richlazy_cli", *map(str, args)],
            env=env, stdout=subprocess.DEVNULL, stderr=fh,
        )


@pytest.mark.processes
def test_sigterm_while_assembling_keeps_the_parts(tmp_path, toy_env, cli) -> None:
    out = tmp_path / "a.h5"
    parts = Path(f"{out}.parts")
    args = ["sweep", "solve", "toy", "-g", "slope=linspace(0,1,4)", "--chunk-size", "1",
            "--jobs", "1", "-o", out, "-q"]
    marker = tmp_path / "paused"
    proc = _popen(args, pausing(toy_env, "writer", marker), tmp_path / "err")
    wait_paused(marker, proc)  # every chunk computed, the result file's writer about to write
    assert len(list(parts.glob("part-*.rlp"))) == 4
    proc.send_signal(signal.SIGTERM)
    code = release(marker, proc, limit=60)
    err = (tmp_path / "err").read_text()
    assert code == 130, err
    assert err.startswith("richlazy: interrupted (SIGTERM)") and "--resume" in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert not out.exists() and parts.exists()
    resumed = cli(*args, "--resume")  # in this process
    assert resumed.code == 0, resumed.err
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert int((ds["status"] == 0).sum()) == 4


@pytest.mark.processes
def test_sigterm_while_merging_writes_nothing(tmp_path, toy_env, cli) -> None:
    grid = ["sweep", "solve", "toy", "-g", "slope=linspace(0,1,4)", "--jobs", "1", "-q"]
    shards = [tmp_path / f"s{k}.h5" for k in (1, 2)]
    for k, shard in enumerate(shards, start=1):
        assert cli(*grid, "-o", shard, "--shard", f"{k}/2").code == 0
    merged = tmp_path / "merged" / "m.h5"
    merged.parent.mkdir()
    marker = tmp_path / "paused"
    proc = _popen(["store", "merge", merged, *shards], pausing(toy_env, "writer", marker),
                  tmp_path / "err")
    wait_paused(marker, proc)  # the merged file's writer about to write its temporary file
    assert any(merged.parent.iterdir()), "no temporary file"
    proc.send_signal(signal.SIGTERM)
    code = release(marker, proc, limit=60)
    err = (tmp_path / "err").read_text()
    assert code == 130, err
    assert err.strip() == f"richlazy: interrupted (SIGTERM); nothing written to {merged}"
    assert not merged.exists()


@pytest.mark.processes
def test_an_interrupted_command_ends_with_130_after_its_atexit_functions(tmp_path) -> None:
    """The console entry ends an interrupted command with the status itself (os._exit), after
    the atexit functions and the one line, whatever the interpreter's exit would make of an
    interrupt it saw inside an eval (cli._leave)."""
    marker = tmp_path / "atexit-ran"
    script = (
        "import atexit, sys\n"
        "from richlazy_cli.cli import app as cli\n"
        f"atexit.register(lambda: open({str(marker)!r}, 'w').write('ran'))\n"
        "def interrupted(argv=None):\n"
        "    eval('(_ for _ in ()).throw(KeyboardInterrupt(\"SIGTERM\"))')\n"
        "cli.run = interrupted\n"
        "cli.main()\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.strip() == "richlazy: interrupted (SIGINT); nothing written"
    assert marker.read_text() == "ran"


@pytest.mark.processes
def test_an_interrupt_inside_fdopen_is_not_reported_as_an_unreadable_file(
    tmp_path, monkeypatch
) -> None:
    """An interrupt that lands after the file object took (and closed) the descriptor stays
    an interrupt: the second close's EBADF must not replace it (userfiles.open_regular)."""
    from richlazy_cli import userfiles
    from richlazy_cli.engine.store import is_hdf5

    path = tmp_path / "r.h5"
    path.write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(100))
    real_fdopen = os.fdopen

    def fdopen_then_interrupt(fd, *args, **kwargs):
        real_fdopen(fd, *args, **kwargs).close()  # the descriptor is taken and closed
        raise KeyboardInterrupt("SIGTERM")

    monkeypatch.setattr(userfiles.os, "fdopen", fdopen_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        is_hdf5(path)
