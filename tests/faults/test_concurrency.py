"""N sweeps started together on one output: exactly one computes, the others exit 2, and the
result is bit for bit that of a run alone (README: "Sweeps")."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import xarray as xr

from ..conftest import ROOT, paused_pid, pausing, release

GRID = ["-g", "slope=linspace(0,1,6)", "-g", "seed=range(2)"]


def _values(path: Path) -> dict[str, bytes]:
    with xr.open_dataset(path, engine="h5netcdf") as ds:
        return {name: ds[name].values.tobytes() for name in ("y", "y_final", "status")}


@pytest.fixture(scope="module")
def alone(tmp_path_factory) -> dict[str, bytes]:
    from richlazy_cli.cli.app import run

    out = tmp_path_factory.mktemp("alone") / "alone.h5"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RICHLAZY_MODELS", "tests.engine_models")
        mp.syspath_prepend(str(ROOT))
        assert run(["sweep", "solve", "toy", *GRID, "-o", str(out), "-q", "--jobs", "1"]) == 0
    return _values(out)


def _held(procs: list[subprocess.Popen], marker: Path) -> subprocess.Popen:
    """The sweep that took the lock (it waits after its first part, its pid in ``marker``),
    once every other one has ended."""
    deadline = time.monotonic() + 120
    while True:
        pid = paused_pid(marker)
        if pid is not None and all(p.poll() is not None for p in procs if p.pid != pid):
            return next(p for p in procs if p.pid == pid)
        if all(p.poll() is not None for p in procs):
            raise AssertionError(f"no sweep paused: {[p.communicate() for p in procs]}")
        assert time.monotonic() < deadline, "the sweeps did not end within 120 s"
        time.sleep(0.005)


def _round(tmp_path: Path, env: dict[str, str], n: int, k: int, extra: list[str]) -> Path:
    """Start ``n`` identical sweeps at once; check one computed and the others were refused."""
    out = tmp_path / f"race-{n}-{k}.h5"
    # the winner waits after its first part until the others have ended: they all start and
    # reach the lock while it runs
    marker = tmp_path / f"paused-{n}-{k}"
    command = [sys.executable, "-m", "richlazy_cli", "sweep", "solve", "toy", *GRID, "-o",
               str(out), "--jobs", "1", "--chunk-size", "4", "-q", *extra]
    procs = [
        subprocess.Popen(command, env=pausing(env, "part", marker), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for _ in range(n)
    ]
    try:
        winner = _held(procs, marker)
        release(marker, winner)
    finally:
        for p in procs:
            p.kill()
    results = [(p.wait(timeout=120), p.communicate()[1]) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes.count(0) == 1 and set(codes) <= {0, 2, 75}, results
    assert winner.returncode == 0, results
    for code, err in results:
        if code:  # busy (75) while the winner runs; bad input (2) once its output exists
            lines = err.strip().splitlines()
            assert len(lines) == 1 and "Traceback" not in err, err
            assert ("in progress" in lines[0]) == (code == 75), err
            assert code == 75 or "exists" in lines[0], err
    assert not Path(f"{out}.parts").exists() and not Path(f"{out}.lock").exists()
    return out


def _check(tmp_path, env, alone, n, rounds) -> None:
    for k in range(rounds):
        extra = ["--force"] if k % 2 else []  # overlapping --force runs too
        out = _round(tmp_path, env, n, k, extra)
        assert _values(out) == alone


@pytest.mark.processes
def test_three_sweeps_started_together_one_round(tmp_path, toy_env, alone) -> None:
    _check(tmp_path, toy_env, alone, 3, 1)


@pytest.mark.processes
@pytest.mark.slow
@pytest.mark.parametrize("n", [2, 3])
def test_sweeps_started_together_five_rounds(tmp_path, toy_env, alone, n) -> None:
    _check(tmp_path, toy_env, alone, n, 5)
