"""Shared fixtures: the engine's test model, and running the CLI in-process or as a process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEST_MODELS = "tests.engine_models"


UNIT_FOLDERS = ("numerics", "models", "engine", "architecture")
"""The folders of the quick tier (``make test-quick``): their tests run in this process and in
about two seconds or less, except those marked ``system`` (they start a process: the CLI, a
worker pool, a subprocess) or ``integration`` (longer, in-process runs: a model at the paper's
size, a whole sweep)."""
NOT_QUICK = ("system", "integration", "processes", "slurm", "slow", "claims")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks the quick tier (:data:`UNIT_FOLDERS`), and groups the tests for pytest-xdist's
    ``--dist loadgroup`` (``make test`` runs two workers): the tests that start, signal or wait
    on other processes (and those against SLURM, which ``make test`` runs alone after the
    rest) share the group ``processes`` and run one at a time on one worker, always beside the
    other worker's load (each waits for an event it observes, never for a time); every other
    test is grouped with its file, so that a module's fixtures are computed once."""
    tests = ROOT / "tests"
    for item in items:
        folder = item.path.relative_to(tests).parts[0]
        if folder in UNIT_FOLDERS and not any(item.get_closest_marker(m) for m in NOT_QUICK):
            item.add_marker(pytest.mark.quick)
        if item.get_closest_marker("processes") or item.get_closest_marker("slurm"):
            group = "processes"
        else:
            group = item.nodeid.split("::", 1)[0]
        item.add_marker(pytest.mark.xdist_group(group))


class StartedAProcess(AssertionError):
    """A quick test started a process: mark it ``system`` (tests/conftest.py)."""


@pytest.fixture(autouse=True)
def _quick_tests_start_no_process(request: pytest.FixtureRequest,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A test of the quick tier fails if it starts a process: a subprocess, a fork (worker
    pools, loky, multiprocessing) or a spawn."""
    if request.node.get_closest_marker("quick") is None:
        return
    import multiprocessing.process

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise StartedAProcess(f"{request.node.nodeid} started a process; mark it "
                              "pytest.mark.system (it is not a unit test)")

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    monkeypatch.setattr(os, "fork", refuse)
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refuse)
    for name in ("posix_spawn", "posix_spawnp", "forkpty"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, refuse)


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def toy_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Make the `toy` test model visible to this process and to its workers/subprocesses."""
    monkeypatch.setenv("RICHLAZY_MODELS", TEST_MODELS)
    path = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", f"{ROOT}{os.pathsep}{path}" if path else str(ROOT))
    if str(ROOT) not in sys.path:
        monkeypatch.syspath_prepend(str(ROOT))
    return dict(os.environ)


@pytest.fixture
def one_torch_thread():
    """torch at one intra-op thread for the test, as the practice models run (their workers
    hold one thread each), restored afterwards."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):
    """Run `richlazy ARGS...` in this process; returns exit code, stdout and stderr."""
    from richlazy_cli.cli.app import run

    def invoke(*args: str) -> CliResult:
        code = run([str(a) for a in args])
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return invoke


def run_process(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 300
) -> CliResult:
    """Run `python -m richlazy_cli ARGS...` as a separate process."""
    proc = subprocess.run(
        [sys.executable, "-m", "richlazy_cli", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def wait_for(predicate: Callable[[], bool], proc: subprocess.Popen, what: str,
             limit: float = 120) -> None:
    """Poll ``predicate`` until it holds; fail if ``proc`` ends first or ``limit`` s pass."""
    deadline = time.monotonic() + limit
    while not predicate():
        if proc.poll() is not None:
            raise AssertionError(f"ended before {what} (exit {proc.returncode}): "
                                 f"{proc.communicate()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {limit:g} s")
        time.sleep(0.005)


def assert_one_line_error(result: CliResult, code: int = 2) -> None:
    """Exit 2 (or ``code``: 75 for a busy output), exactly one line on stderr, no traceback."""
    assert result.code == code, (result.code, result.err)
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1, result.err
    assert "Traceback" not in result.err
    assert lines[0].startswith("richlazy: error: ")


def assert_refused(cli: Any, args: Sequence[str], fragment: str, out: Path) -> None:
    """``richlazy ARGS -o OUT`` is bad input: one line naming ``fragment``, and nothing of
    ``out`` (the file, its parts folder, its lock or temporary files) is left behind."""
    result = cli(*args, "-o", str(out))
    assert_one_line_error(result)
    assert fragment in result.err, (args, result.err)
    assert not out.exists() and not list(out.parent.glob(f"{out.name}*"))
