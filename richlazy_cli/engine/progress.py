"""Progress reporting: a rich bar on a terminal, rate-limited log lines otherwise, or nothing.

On a terminal the bar shows points done/total, the rate and the ETA. When stdout is not a
terminal (cron, SLURM, a pipe), one timestamped line at most every ``interval`` seconds carries
the same figures, plus a last line when the run ends. ``quiet`` prints nothing.
"""

from __future__ import annotations

import datetime as _dt
import sys
import time
from typing import IO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
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
    ) -> None:
        self.total = total
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
                TimeRemainingColumn(),
                console=Console(file=self.stream),
                transient=False,
            )
            self._task = self._bar.add_task(label, total=total, rate="")

    def __enter__(self) -> Reporter:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def rate(self) -> float:
        elapsed = time.monotonic() - self.start
        return self.done / elapsed if elapsed > 0 else 0.0

    def advance(self, points: int) -> None:
        self.done += points
        if self.quiet:
            return
        rate = self.rate()
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, rate=f"{rate:.3g} pt/s")
            return
        now = time.monotonic()
        if now - self._last_line >= self.interval:
            self._last_line = now
            self._line(rate)

    def _line(self, rate: float) -> None:
        remaining = (self.total - self.done) / rate if rate > 0 else float("nan")
        stamp = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
        print(
            f"{stamp} {self.label}: {self.done}/{self.total} points, "
            f"{rate:.3g} points/s, ETA {_eta(remaining)}",
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
