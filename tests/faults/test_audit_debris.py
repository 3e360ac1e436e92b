"""The debris of a run killed while it deleted its finished parts folder (the trash folder
``.OUT.h5.parts.<pid>.trash`` and the lock file) is removed by the next run of the output,
``--resume``, ``--continue`` or plain, once the output is complete and its lock is free."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from richlazy_cli.engine.lock import lock_path
from richlazy_cli.engine.parts import parts_path

from ..conftest import wait_for

SWEEP = ["sweep", "solve", "toy", "-g", "slope=linspace(0,1,6)", "--jobs", "1"]


def _killed_during_clean_up(out: Path, env: dict[str, str]) -> Path:
    """A sweep SIGKILLed once its finished parts folder is renamed to the trash name and
    before it is deleted (the ``remove`` pause point, engine/interrupts.py); its trash."""
    marker = out.with_name("paused")
    proc = subprocess.Popen(
        [sys.executable, "-m", "richlazy_cli", *SWEEP, "-o", str(out), "-q"],
        env={**env, "RICHLAZY_TEST_PAUSE": f"remove:{marker}"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: marker.exists() and marker.read_text().isdigit(), proc,
                 "the clean-up's pause", limit=120)
        assert int(marker.read_text()) == proc.pid
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    marker.unlink()
    trash = out.with_name(f".{parts_path(out).name}.{proc.pid}.trash")
    assert trash.is_dir() and any(trash.glob("part-*.rlp")), list(out.parent.iterdir())
    assert lock_path(out).exists() and not parts_path(out).exists() and out.is_file()
    return trash


@pytest.mark.processes
@pytest.mark.parametrize(("flags", "code"), [(["--resume"], 0), (["--continue"], 0), ([], 2)])
def test_a_killed_clean_up_is_removed_by_the_next_run(tmp_path, toy_env, cli,
                                                      flags: list[str], code: int) -> None:
    out = tmp_path / "o.h5"
    trash = _killed_during_clean_up(out, toy_env)
    before = (out.read_bytes(), out.stat().st_mtime_ns)
    result = cli(*SWEEP, "-o", out, *flags)
    assert result.code == code, result.err
    if code == 0:
        assert result.err.strip() == f"richlazy: {out}: complete, nothing to do"
    else:  # a plain run refuses to replace the result, and cleans up under the lock first
        assert "exists; use --force" in result.err
    assert (out.read_bytes(), out.stat().st_mtime_ns) == before
    assert not trash.exists() and not lock_path(out).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.h5"]


@pytest.mark.processes
def test_the_debris_stays_while_another_run_holds_the_lock(tmp_path, toy_env, cli) -> None:
    """A live writer's files look like debris: only the lock tells them apart."""
    from richlazy_cli.engine.lock import OutputLock

    out = tmp_path / "o.h5"
    trash = _killed_during_clean_up(out, toy_env)
    with OutputLock(out):
        result = cli(*SWEEP, "-o", out, "--resume")
        assert result.code == 0, result.err
        assert trash.exists()
    assert cli(*SWEEP, "-o", out, "--resume").code == 0
    assert not trash.exists() and not lock_path(out).exists()
