"""richlazy against a real single-node SLURM (munge, slurmctld, slurmd; scripts/slurm-up.sh).

What runs here is what a cluster user submits: the array template with its dependent merge
(jobs/slurm/submit.sh), an array with a step, a task that receives its time-limit signal and
requeues itself to completion, and a sweep on Dask workers that dask-jobqueue starts as SLURM
jobs. Every result is compared bit for bit with the same sweep run locally.

``.ci/run`` starts SLURM before the tests (and sets ``RICHLAZY_REQUIRE_SLURM=1``, so that a
SLURM that went missing fails rather than skips). Elsewhere the fixture starts it when the
packages are installed and this is root, and otherwise skips every test with the reason.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..conftest import ROOT
from ..engine.test_sweep import assert_bitwise

pytestmark = pytest.mark.slurm

SUBMIT = ROOT / "jobs" / "slurm" / "submit.sh"
UP, DOWN = ROOT / "scripts" / "slurm-up.sh", ROOT / "scripts" / "slurm-down.sh"
GRID = '[grid]\nslope = "linspace(0,1,8)"\nseed = "range(3)"\n'
WAIT = 150.0
"""Seconds a test waits for its jobs at most (the requeue alone can take about a minute)."""


def _answers() -> bool:
    if shutil.which("sinfo") is None:
        return False
    probe = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True)
    return probe.returncode == 0 and ("idle" in probe.stdout or "mix" in probe.stdout)


@pytest.fixture(scope="session")
def slurm() -> Iterator[None]:
    """A SLURM that answers: the one running, or one started here (and stopped after)."""
    started = False
    if not _answers():
        reason = "SLURM is not running and cannot be started here"
        if shutil.which("slurmctld") and os.geteuid() == 0:
            up = subprocess.run(["bash", str(UP)], capture_output=True, text=True, timeout=120)
            started = up.returncode == 0 and _answers()
            reason = (up.stderr.strip().splitlines() or [reason])[-1]
        elif os.geteuid() != 0:
            reason = "SLURM is not running, and starting it (scripts/slurm-up.sh) needs root"
        else:
            reason = ("SLURM is not installed: scripts/slurm-up.sh installs and starts it "
                      "(apt-get install slurmctld slurmd slurm-client munge)")
        if not started:
            if os.environ.get("RICHLAZY_REQUIRE_SLURM") == "1":
                pytest.fail(f"RICHLAZY_REQUIRE_SLURM=1 but {reason}")
            pytest.skip(reason)
    yield
    if started:
        subprocess.run(["bash", str(DOWN)], capture_output=True, timeout=60)


def _write_job(path: Path, run: str = "", grid: str = GRID) -> Path:
    path.write_text(f'action = "solve"\nmodel = "toy"\n{grid}{run}')
    return path


def _submit(env: dict[str, str], n: int, job: Path, out: Path, *options: str,
            step: int = 1) -> tuple[str, str]:
    """``jobs/slurm/submit.sh``: the ids of the array and of its merge."""
    env = dict(env, N=str(n), JOB=str(job), OUT=str(out), STEP=str(step),
               LOGS=str(out.parent / "logs"))
    proc = subprocess.run(["bash", str(SUBMIT), "--cpus-per-task=1", "--mem=500M", *options],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    found = re.fullmatch(r"array (\d+), merge (\d+)\s*", proc.stdout)
    assert found, proc.stdout
    return found.group(1), found.group(2)


def _states(job: str) -> list[dict[str, str]]:
    """``scontrol show job`` of a job (every task of an array), one dict per job."""
    proc = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    return [dict(re.findall(r"(\w+)=(\S*)", line)) for line in proc.stdout.splitlines()]


RELEASE_AFTER = 5.0
"""Seconds a requeued job stays held before the test releases it (see :func:`_wait`)."""


def _wait(*jobs: str, timeout: float = WAIT) -> None:
    """Wait until the jobs (arrays included) have left the queue.

    A requeued job is held for two minutes (``Reason=BeginTime``): it is released after
    :data:`RELEASE_AFTER` seconds, as an operator would, so that the test does not sit out
    SLURM's requeue delay. Not at once: slurmd refuses a launch that comes while the previous
    run's credential is still being revoked ("Job credential revoked", the job then FAILS).
    """
    deadline = time.monotonic() + timeout
    held: dict[str, float] = {}
    while time.monotonic() < deadline:
        live = []
        for job in jobs:
            for state in _states(job):
                if state["JobState"] in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING",
                                         "REQUEUED", "SUSPENDED"):
                    live.append(state)
                if state["JobState"] == "PENDING" and state.get("Reason") == "BeginTime" and (
                        time.monotonic() - held.setdefault(state["JobId"], time.monotonic())
                        >= RELEASE_AFTER):
                    subprocess.run(["scontrol", "update", f"JobId={state['JobId']}",
                                    "StartTime=now"], capture_output=True)
        if not live:
            return
        time.sleep(0.5)
    pytest.fail(f"jobs {jobs} still queued after {timeout:g} s: {_states(jobs[0])}")


def _completed(job: str) -> list[dict[str, str]]:
    states = _states(job)
    assert states and all(s["JobState"] == "COMPLETED" for s in states), [
        (s.get("JobState"), s.get("Reason"), s.get("ExitCode"), s.get("Restarts"))
        for s in states]
    return states


def _local(cli, job: Path, out: Path) -> Path:
    result = cli("sweep", "-c", job, "-o", out, "-q", "--jobs", "1")
    assert result.code == 0, result.err
    return out


def _console() -> str:
    console = Path(sys.executable).parent / "richlazy"
    if not console.exists():
        pytest.skip("the richlazy console script is not installed next to this Python")
    return str(console)


def test_array_shards_and_dependent_merge(slurm, tmp_path, toy_env, cli) -> None:
    """Four array tasks, one shard each, then the merge once all succeeded: the merged file is
    bitwise the local sweep; each task's first line names its shard and array task."""
    job = _write_job(tmp_path / "job.toml")
    env = dict(toy_env, RICHLAZY=_console())
    array, merge = _submit(env, 4, job, tmp_path / "out", "--time=10")
    _wait(array, merge)
    tasks = _completed(array)
    _completed(merge)
    assert len(tasks) == 4 and all(t["Restarts"] == "0" for t in tasks), tasks
    assert_bitwise(_local(cli, job, tmp_path / "local.h5"), tmp_path / "out.h5")
    logs = sorted((tmp_path / "logs").glob(f"richlazy-{array}_*.out"))
    assert len(logs) == 4
    for k, log in enumerate(logs, start=1):
        lines = log.read_text().splitlines()
        assert lines[1].startswith(f"toy solve: shard {k}/4 (SLURM array job {array} task {k} "
                                   "of 1-4) of 24 points: 6 points"), lines
    # the merge asked for little: one CPU, not the array's
    assert _states(merge)[0]["NumCPUs"] == "1"


def test_array_with_a_step(slurm, tmp_path, toy_env, cli) -> None:
    """``--array=1-5:2`` runs tasks 1, 3, 5: three shards, all computed, none missing."""
    job = _write_job(tmp_path / "job.toml")
    env = dict(toy_env, RICHLAZY=_console())
    array, merge = _submit(env, 3, job, tmp_path / "out", "--time=10", step=2)
    _wait(array, merge)
    tasks = _completed(array)
    assert sorted(int(t["ArrayTaskId"]) for t in tasks) == [1, 3, 5]
    _completed(merge)
    assert_bitwise(_local(cli, job, tmp_path / "local.h5"), tmp_path / "out.h5")
    for k in (1, 2, 3):
        assert (tmp_path / f"out.shard{k}.h5").exists()


def test_time_limit_signal_requeues_to_completion(slurm, tmp_path, toy_env, cli) -> None:
    """A task slower than its time limit gets SIGTERM from ``--signal=B:TERM@75`` (2-minute
    limit), stops with its parts kept, requeues itself and finishes on its second run without
    recomputing what the first kept; the merge then runs, and the data are the local ones."""
    # SLURM sends the signal at its first check (about every 30 s) once fewer than 75 + 30 s
    # are left: 15 to 45 s after the start, while this first run needs 90 s
    grid = '[grid]\nslope = "linspace(0,1,90)"\n'
    job = _write_job(tmp_path / "job.toml", "[run]\nchunk_size = 1\n", grid)
    wrapper = tmp_path / "slow-first-run.sh"  # the first run takes a second a chunk
    wrapper.write_text(
        "#!/bin/bash\n"
        'if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then export RICHLAZY_TOY_SLEEP=1; fi\n'
        f'exec {_console()} "$@"\n'
    )
    wrapper.chmod(0o755)
    array, merge = _submit(dict(toy_env, RICHLAZY=str(wrapper)), 1, job, tmp_path / "out",
                           "--time=2", "--signal=B:TERM@75")
    _wait(array, merge)
    [task] = _completed(array)
    _completed(merge)
    assert task["Restarts"] == "1", task
    log = next((tmp_path / "logs").glob(f"richlazy-{array}_1.out")).read_text()
    assert "restart 0" in log and "restart 1" in log, log
    assert "interrupted (SIGTERM)" in log and "requeueing" in log, log
    kept = int(re.search(r"(\d+) of 90 points kept", log).group(1))
    assert 0 < kept < 90, log
    # the second run computed only what the first did not keep
    assert f"{90 - kept} points in {90 - kept} chunks" in log, log
    assert_bitwise(_local(cli, job, tmp_path / "local.h5"), tmp_path / "out.h5")


def test_dask_workers_started_by_slurm(slurm, tmp_path, toy_env, cli) -> None:
    """``--backend dask --scheduler slurm``: one command, two Dask workers as SLURM jobs
    (dask-jobqueue), the same data as the local sweep."""
    job = _write_job(
        tmp_path / "job.toml",
        '[run]\nbackend = "dask"\nscheduler = "slurm"\njobs = 2\nchunk_size = 4\n'
        '[run.cluster]\nmemory = "500MB"\nwalltime = "00:10:00"\n'
        f'log_directory = "{tmp_path / "logs"}"\n'
        'scheduler_options = { host = "127.0.0.1" }\n',
    )
    before = _dask_jobs()
    out = tmp_path / "dask.h5"
    proc = subprocess.run([sys.executable, "-m", "richlazy_cli", "sweep", "-c", str(job), "-o",
                           str(out)], env=toy_env, capture_output=True, text=True, timeout=WAIT)
    assert proc.returncode == 0, proc.stderr
    assert "on 2 workers" in proc.stdout, proc.stdout
    started = _dask_jobs() - before
    assert len(started) == 2, started  # one SLURM job per worker
    plain = _write_job(tmp_path / "plain.toml")
    assert_bitwise(_local(cli, plain, tmp_path / "local.h5"), out)
    assert len(list((tmp_path / "logs").glob("*.out"))) >= 2  # the worker jobs' logs


def _dask_jobs() -> set[str]:
    proc = subprocess.run(["scontrol", "-o", "show", "job"], capture_output=True, text=True)
    return {m.group(1) for m in re.finditer(r"JobId=(\d+) .*?JobName=dask-worker", proc.stdout)}
