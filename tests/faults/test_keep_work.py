"""Work is never thrown away: Make's figure rules, the cron command, a closed pipe.

* Make (the Makefile's ``$(RESULTS)/%.h5`` rule, run on a toy job in a scratch folder): a
  sweep interrupted by SIGTERM is resumed by the next ``make`` (the finished points are not
  computed again: counted), a changed job file recomputes, an unchanged one does nothing.
* Cron (the crontab line of docs/cluster.md, run as cron would): the same command starts,
  resumes after a SIGKILL and then does nothing, exit 0 each time; the data are a lone run's;
  a run that finds another one holding the output exits 75.
* ``richlazy sweep ... | head -1`` ends with status 141, silent, workers gone, parts kept.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from ..conftest import ROOT, live_children, pausing, release, wait_for, wait_paused
from ..engine.test_sweep import assert_bitwise

POINTS = 16
JOB = f'action = "solve"\nmodel = "toy"\n[grid]\nslope = "linspace(0,1,{POINTS})"\n' \
      "[params]\nsteps = {steps}\n[run]\njobs = 1\nchunk_size = 1\n"


def _richlazy() -> str:
    return f"{sys.executable} -m richlazy_cli"


def _parts(out: Path) -> int:
    return len(list(Path(f"{out}.parts").glob("part-*")))


def _older(result: Path, job: Path) -> None:
    """Date ``result`` 2 s before ``job``, as a job file edited later than its result is
    (without waiting for a clock tick that Make can see)."""
    then = job.stat().st_mtime_ns - 2_000_000_000
    os.utime(result, ns=(then, then))


def _lone(tmp_path: Path, cli, job: Path) -> Path:
    """The sweep of ``job`` run alone, in this process, on one worker (the worker count is
    no part of a sweep)."""
    out = tmp_path / f"lone-{uuid.uuid4().hex[:8]}.h5"
    result = cli("sweep", "-c", job, "-o", out, "-q", "--jobs", "1")
    assert result.code == 0, result.err
    return out


# -- make ----------------------------------------------------------------------------------
def _make(folder: Path, env: dict[str, str], **popen) -> subprocess.Popen:
    """``make results/toy.h5`` with the repository's Makefile in ``folder`` (no install)."""
    command = ["make", "-f", str(ROOT / "Makefile"), "-C", str(folder), f"RICHLAZY={_richlazy()}",
               "STAMP=", "results/toy.h5"]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **popen)


@pytest.mark.processes
def test_make_resumes_an_interrupted_sweep_and_recomputes_a_changed_job(tmp_path, toy_env,
                                                                        cli):
    (tmp_path / "jobs").mkdir()
    job = tmp_path / "jobs" / "toy.toml"
    job.write_text(JOB.format(steps=8))
    out = tmp_path / "results" / "toy.h5"
    # a first make, stopped by SIGTERM (to make and richlazy, as a terminal's group) while
    # its sweep waits after its fourth part
    marker = tmp_path / "paused"
    first = _make(tmp_path, pausing(toy_env, "part", marker), start_new_session=True)
    wait_paused(marker, first, times=4)
    os.killpg(first.pid, signal.SIGTERM)
    release(marker, first, limit=60)
    _, err = first.communicate(timeout=60)
    assert first.returncode != 0 and not out.exists(), err
    kept = int(re.search(rf"(\d+) of {POINTS} points kept", err).group(1))
    assert 4 <= kept < POINTS, err
    # make again: the sweep resumes and computes only the points the first one did not keep
    second = _make(tmp_path, toy_env)
    stdout, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert f"toy solve: {POINTS - kept} points in {POINTS - kept} chunks" in stdout, stdout
    assert_bitwise(_lone(tmp_path, cli, job), out)
    # touched, unchanged: nothing computed, the result's bytes stay
    before = out.read_bytes()
    job.touch()
    _older(out, job)
    third = _make(tmp_path, toy_env)
    stdout, err = third.communicate(timeout=120)
    assert third.returncode == 0 and "nothing to do" in err and "points in" not in stdout, err
    assert out.read_bytes() == before
    # changed: the whole sweep is computed again, with the new value
    job.write_text(JOB.format(steps=9))
    _older(out, job)
    fourth = _make(tmp_path, toy_env)
    stdout, err = fourth.communicate(timeout=120)
    assert fourth.returncode == 0, err
    assert f"toy solve: {POINTS} points in {POINTS} chunks" in stdout, stdout
    assert_bitwise(_lone(tmp_path, cli, job), out)


# -- cron ----------------------------------------------------------------------------------
def _crontab_line() -> str:
    """The crontab example of docs/cluster.md (the line after ``# crontab -e``)."""
    text = (ROOT / "docs" / "cluster.md").read_text()
    found = re.search(r"# crontab -e\n(.+)\n", text)
    assert found, "docs/cluster.md has no crontab example"
    return found.group(1)


def _project(tmp_path: Path) -> Path:
    """A home with the project the crontab line names: its job file and its .venv/bin."""
    project = tmp_path / "home" / "richlazy"
    (project / "jobs").mkdir(parents=True)
    (project / "jobs" / "fig1b.toml").write_text(JOB.format(steps=8))
    (project / ".venv" / "bin").mkdir(parents=True)
    launcher = project / ".venv" / "bin" / "richlazy"
    launcher.write_text(f'#!/bin/sh\nexec {sys.executable} -m richlazy_cli "$@"\n')
    launcher.chmod(0o755)
    return project


def _cron(line: str, env: dict[str, str], **popen) -> subprocess.Popen:
    command = line.split(None, 5)[5]  # minute hour day month weekday COMMAND
    return subprocess.Popen(["/bin/sh", "-c", command], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **popen)


@pytest.mark.processes
def test_crontab_line_starts_resumes_and_does_nothing(tmp_path, toy_env, cli) -> None:
    line = _crontab_line()
    project = _project(tmp_path)
    env = {**toy_env, "HOME": str(tmp_path / "home")}
    out = project / "results" / "fig1b.h5"
    # a run killed outright (SIGKILL: no clean-up at all), waiting after its fourth part
    marker = tmp_path / "paused"
    killed = _cron(line, pausing(env, "part", marker), start_new_session=True)
    wait_paused(marker, killed, times=4)
    os.killpg(killed.pid, signal.SIGKILL)
    release(marker, killed, limit=30)
    assert 4 <= _parts(out) < POINTS
    # the next run resumes and finishes; the one after finds nothing to do and leaves the
    # result's bytes: exit 0 both times
    proc = _cron(line, env)
    proc.communicate(timeout=120)
    assert proc.returncode == 0, (project / "logs" / "cron-fig1b.log").read_text()
    done = out.read_bytes()
    proc = _cron(line, env)
    proc.communicate(timeout=120)
    assert proc.returncode == 0 and out.read_bytes() == done
    assert "complete, nothing to do" in (project / "logs" / "cron-fig1b.log").read_text()
    assert_bitwise(_lone(tmp_path, cli, project / "jobs" / "fig1b.toml"), out)
    # a fresh output: the same line simply starts (and finishes) the sweep
    out.unlink()
    proc = _cron(line, env)
    proc.communicate(timeout=120)
    assert proc.returncode == 0 and out.exists()


@pytest.mark.processes
def test_busy_output_exits_75_and_a_complete_one_is_done_without_its_lock(tmp_path, toy_env,
                                                                           cli):
    out = tmp_path / "busy.h5"
    job = tmp_path / "job.toml"
    job.write_text(JOB.format(steps=8))
    args = ["sweep", "-c", str(job), "-o", str(out), "--continue", "-q"]
    command = [sys.executable, "-m", "richlazy_cli", *args]
    # a run that holds the output's lock, waiting after its first part; terminated below
    marker = tmp_path / "paused"
    holder = subprocess.Popen(command, env=pausing(toy_env, "part", marker),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_paused(marker, holder)
    busy = cli(*args)  # the next run, in this process
    assert busy.code == 75, busy.err
    assert busy.err.count("\n") == 1 and "another run is in progress" in busy.err
    holder.terminate()
    release(marker, holder, limit=60)
    holder.communicate(timeout=60)
    assert holder.returncode == 130
    assert cli(*args).code == 0  # the terminated run continued (in this process)
    # complete: the nothing-to-do check comes before the lock, so a lock that cannot be made
    # (here its path is a folder; on a read-only file system, the same) does not matter
    Path(f"{out}.lock").mkdir()
    done = cli(*args)
    assert done.code == 0 and "complete, nothing to do" in done.err, done.err


# -- pipes ---------------------------------------------------------------------------------
def _marked(mark: str) -> list[int]:
    """Processes whose environment holds ``mark`` (the sweep and its workers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if mark.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.processes
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")
def test_closed_stdout_exits_141_quietly_with_parts_kept(tmp_path, toy_env, cli) -> None:
    out = tmp_path / "piped.h5"
    job = tmp_path / "job.toml"
    job.write_text(JOB.format(steps=8).replace("jobs = 1", "jobs = 2"))
    mark = f"RICHLAZY_TEST_MARK={uuid.uuid4().hex}"
    script = (f"{sys.executable} -m richlazy_cli sweep -c {job} -o {out} | head -1; "
              'echo "status=${PIPESTATUS[0]}" >&2')
    marker = tmp_path / "paused"
    env = {**pausing(toy_env, "part", marker), mark.split("=")[0]: mark.split("=")[1]}
    proc = subprocess.Popen(["bash", "-c", script], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    sweep = wait_paused(marker, proc)  # its first line printed, its first part written
    # head has read that line and ended (the pipeline's other process): stdout is closed
    wait_for(lambda: live_children(proc.pid) == [sweep], proc, "the end of head -1")
    release(marker, proc)
    stdout, stderr = proc.communicate(timeout=60)
    assert stdout.startswith("toy solve: 16 points in 16 chunks on 2 workers"), stdout
    assert stderr == "status=141\n", stderr  # nothing else on stderr
    deadline = time.monotonic() + 10
    while _marked(mark) and time.monotonic() < deadline:  # workers stopped
        time.sleep(0.1)
    assert _marked(mark) == []
    assert not out.exists() and Path(f"{out}.parts").is_dir()
    kept = _parts(out)
    resumed = cli("sweep", "-c", job, "-o", out, "--continue", "--jobs", "1")  # in this process
    assert resumed.code == 0, resumed.err
    assert resumed.out.startswith(f"toy solve: {POINTS - kept} points"), (kept, resumed.out)
    assert_bitwise(_lone(tmp_path, cli, job), out)
