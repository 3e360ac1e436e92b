"""Shared fixtures: the engine's test model, and running the CLI in-process or as a process."""

from __future__ import annotations

import os
import signal
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


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C as at a terminal, whatever started the suite: a shell's background job (``&``,
    ``nohup``, cron, ``scripts/stress-tests.sh``'s runs side by side) starts it with SIGINT
    ignored, and the processes the tests start would inherit that, so that a SIGINT sent to a
    Python script never became ``KeyboardInterrupt``. A handler set here is reset to the
    default in each process the tests start (``exec``), where Python installs its own."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


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

    from richlazy_cli.engine.store import git_state

    # the provenance's one `git rev-parse` per process (cached): asked here, before the guard,
    # so that the first quick test to write a result does not depend on an earlier test's call
    git_state()

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


def live_children(pid: int) -> list[int]:
    """The child processes of ``pid`` that have not ended (Linux ``/proc``; not zombies)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                state, ppid = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:2]
            except (OSError, ValueError):
                continue
            if int(ppid) == pid and state not in ("Z", "X"):
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """Whether the process ``pid`` exists and has not ended (a zombie has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


PAUSE = "RICHLAZY_TEST_PAUSE"
"""The engine's test hook (richlazy_cli/engine/interrupts.py): a process given
``RICHLAZY_TEST_PAUSE=POINT:MARKER`` writes its pid to ``MARKER`` each time it reaches
``POINT`` (``part``: after a part is written; ``assemble``; ``fork``; ``writer``) and waits
there, at most 10 s, until the file is removed. A test that must catch a run in flight waits
for that file, an event it observes, instead of slowing the model down and hoping."""


def pausing(env: dict[str, str], point: str, marker: Path) -> dict[str, str]:
    """``env`` with the pause hook set: stop at ``point``, announcing it in ``marker``."""
    return {**env, PAUSE: f"{point}:{marker}"}


def paused_pid(marker: Path) -> int | None:
    """The pid a paused process wrote into ``marker``; None before it has (or while the
    file exists but its pid is not written yet)."""
    try:
        text = marker.read_text()
    except FileNotFoundError:
        return None
    return int(text) if text.strip() else None


def wait_paused(marker: Path, proc: subprocess.Popen, times: int = 1) -> int:
    """Until the run under ``proc`` has paused ``times`` times at its pause point (the earlier
    pauses released): it now waits there. Returns the pid it wrote."""
    for k in range(1, times + 1):
        wait_for(lambda: paused_pid(marker) is not None, proc, f"pause {k} of {times}")
        if k < times:
            marker.unlink()
    pid = paused_pid(marker)
    assert pid is not None
    return pid


def release(marker: Path, proc: subprocess.Popen, limit: float = 120) -> int:
    """Let ``proc`` run to its end, passing every later pause at once; its exit status."""
    deadline = time.monotonic() + limit
    while proc.poll() is None:
        marker.unlink(missing_ok=True)
        if time.monotonic() > deadline:
            raise AssertionError(f"the paused run did not end within {limit:g} s")
        time.sleep(0.005)
    marker.unlink(missing_ok=True)
    return proc.returncode


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
