"""Progress reporting: a rich bar on a terminal, rate-limited log lines otherwise, or nothing.

On a terminal the bar shows points done/total, the rate and the ETA. When stdout is not a
terminal (cron, SLURM, a pipe), one timestamped line at most every ``interval`` seconds carries
the same figures, plus a last line when the run ends. ``quiet`` prints nothing.

A chunk computed in this process moves the bar while it runs: the model calls the callback of
:meth:`Reporter.chunk_progress` with the fraction of its work done, and the bar shows the
finished points plus those fractions of the chunks in flight.
"""

from __future__ import annotations

import datetime as _dt
import sys
import threading
import time
from collections.abc import Callable
from typing import IO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)


def _eta(seconds: float) -> str:
    if seconds != seconds or seconds == float("inf"):
        return "?"
    return str(_dt.timedelta(seconds=round(seconds)))


class Reporter:
    """Counts finished points and shows progress in the way that suits the output."""

    def __init__(
        self,
        total: int,
        label: str,
        quiet: bool = False,
        stream: IO[str] | None = None,
        interval: float = 10.0,
        terminal: bool | None = None,
        note: str = "",
    ) -> None:
        self.total = total
        self.note = note
        self._partial: dict[int, float] = {}  # chunk key -> points of it done so far
        self._lock = threading.Lock()
        self._last_partial = -float("inf")
        self.label = label
        self.quiet = quiet
        self.stream = stream or sys.stdout
        self.interval = interval
        self.done = 0
        self.start = time.monotonic()
        self._last_line = -float("inf")
        is_tty = self.stream.isatty() if terminal is None else terminal
        self._bar: Progress | None = None
        if not quiet and is_tty:
            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TaskProgressColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(),
                TextColumn("{task.fields[eta]}"),
                console=Console(file=self.stream),
                transient=False,
            )
            self._task = self._bar.add_task(label, total=total, rate="", eta="")

    def __enter__(self) -> Reporter:
        if self.note and not self.quiet:
            print(f"{self.label}: {self.note}", file=self.stream, flush=True)
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def shown(self) -> float:
        """Points done, counting the finished fractions of the chunks in flight."""
        return self.done + sum(self._partial.values())

    def rate(self) -> float:
        elapsed = time.monotonic() - self.start
        return self.shown() / elapsed if elapsed > 0 else 0.0

    def advance(self, points: int, key: int | None = None) -> None:
        """``points`` more are finished (the chunk ``key``, whose partial count ends)."""
        with self._lock:
            if key is not None:
                self._partial.pop(key, None)
            self.done += points
            self._show()

    def chunk_progress(self, key: int, points: int) -> Callable[[float], None]:
        """A callback for a model computing the chunk ``key`` of ``points`` points here.

        Called with the fraction of the chunk done (clipped to [0, 1]); cheap, so a model may
        call it every step: the display is refreshed at most ten times a second.
        """

        def update(fraction: float) -> None:
            if self.quiet:
                return
            done = min(max(float(fraction), 0.0), 1.0) * points
            self._partial[key] = done
            now = time.monotonic()
            if now - self._last_partial >= 0.1:
                self._last_partial = now
                with self._lock:
                    self._show()

        return update

    def _show(self) -> None:
        if self.quiet:
            return
        rate = self.rate()
        if self._bar is not None:
            eta = f"ETA {self.eta(rate)}" if self.done else ""
            self._bar.update(self._task, completed=self.shown(), rate=f"{rate:.3g} pt/s",
                             eta=eta)
            return
        now = time.monotonic()
        if now - self._last_line >= self.interval:
            self._last_line = now
            self._line(rate)

    def eta(self, rate: float) -> str:
        """The remaining time at ``rate``; "?" until a whole point is done (a rate from a
        fraction of the first chunk says little about the rest)."""
        if not self.done:
            return "? (after the first points)"
        return _eta((self.total - self.shown()) / rate if rate > 0 else float("nan"))

    def _line(self, rate: float) -> None:
        stamp = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
        print(
            f"{stamp} {self.label}: {round(self.shown())}/{self.total} points, "
            f"{rate:.3g} points/s, ETA {self.eta(rate)}",
            file=self.stream,
            flush=True,
        )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        elif not self.quiet and self.done and self._last_line != time.monotonic():
            self._line(self.rate())
            self.quiet = True  # print the final line once
