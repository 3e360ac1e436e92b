"""SIGINT and SIGTERM: where a run may stop, and how the forked writer is kept safe.

The command line installs :func:`handler` for both signals (:func:`install`). It notes the
signal (:func:`pending`, a flag) and raises ``KeyboardInterrupt("SIGTERM")`` (or
``SIGINT``) in the main thread, so that a long computation stops at once; the engine catches
it where stopping is safe (between chunks, before the final rename: engine/run.py), keeps
the finished parts and exits 130 with one line. The one place where Python cannot deliver
it safely is ``fork()`` of the result writer: raised inside the interpreter's at-fork hooks,
it would be swallowed with an "Exception ignored" traceback and the signal lost. Around
``fork()`` the signals are therefore blocked (:func:`fork_writer`), and delivered in the
parent once it can kill its child and clean up (:func:`unblock`); the child starts
with the default dispositions, asks the kernel to kill it when its parent dies
(``PR_SET_PDEATHSIG``, Linux) and leaves at once if the parent is already gone
(:func:`writer_child`), so a killed run never leaves an orphan writer holding memory.

Tests stop a process at a named point with the environment variable
``RICHLAZY_TEST_PAUSE=POINT:MARKER[,POINT:MARKER...]`` (:func:`pause_point`): reaching
``POINT``, the process writes its pid to the file ``MARKER`` and waits until the test removes
it (at most 10 s). Points: ``fork`` (the parent, signals blocked, just before ``fork()``),
``writer`` (the writer child, before it writes), ``part`` (after a part is written),
``assemble`` (before the result is assembled), ``remove`` (a finished parts folder renamed to
its trash name, before it is deleted).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_state: dict[str, Any] = {"pending": None}
PAUSE_VARIABLE = "RICHLAZY_TEST_PAUSE"
PAUSE_LIMIT_S = 10.0
_PR_SET_PDEATHSIG = 1


def handler(signum: int, frame: Any) -> None:
    """Note the signal (:func:`pending`) and raise KeyboardInterrupt with its name."""
    name = signal.Signals(signum).name
    _state["pending"] = name
    raise KeyboardInterrupt(name)


def install() -> dict[int, Any]:
    """Install :func:`handler` for SIGINT and SIGTERM (main thread only); the previous
    handlers, for :func:`restore`."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    _state["pending"] = None
    return {s: signal.signal(s, handler) for s in SIGNALS}


def restore(previous: dict[int, Any]) -> None:
    for signum, old in previous.items():
        signal.signal(signum, old)


def pending() -> str | None:
    """The name of the last signal received (``SIGTERM``, ``SIGINT``), or None."""
    return _state["pending"]


def fork_writer() -> int:
    """``os.fork()`` with the signals blocked around it (see the module doc); in the child,
    :func:`writer_child` has run. Returns the child's pid (0 in the child)."""
    parent = os.getpid()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    try:
        pause_point("fork")
        pid = os.fork()
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        raise
    if pid == 0:
        writer_child(parent)
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        return 0
    # the parent unblocks in its caller's try block (:func:`unblock`), which kills the child
    # if a signal that was held back is raised there
    _state["mask"] = old
    return pid


def unblock() -> None:
    """Restore the parent's signal mask after :func:`fork_writer` (held signals arrive)."""
    old = _state.pop("mask", None)
    if old is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def writer_child(parent: int) -> None:
    """The first thing a forked writer does: default signal dispositions (a signal ends it
    without a traceback), death with its parent, and no work for a parent already gone."""
    for signum in SIGNALS:
        with contextlib.suppress(ValueError, OSError):
            signal.signal(signum, signal.SIG_DFL)
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def pause_point(point: str) -> None:
    """The test hook of the module doc: pause at ``point`` when asked to."""
    spec = os.environ.get(PAUSE_VARIABLE)
    if not spec:
        return
    for item in spec.split(","):
        name, _, marker = item.partition(":")
        if name != point or not marker:
            continue
        path = Path(marker)
        path.write_text(str(os.getpid()))
        deadline = time.monotonic() + PAUSE_LIMIT_S
        while path.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
