"""What the ``richlazy`` commands share: option types, the console, JSON output, the argv.

Boolean flags are declared with :func:`flag` (no ``<bool>`` placeholder in ``--help``). When
stdout is not a terminal, tables and help are laid out for a wide page instead of rich's
default 80 columns, so that piped output keeps whole file names and help texts.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import Status

if TYPE_CHECKING:  # rich is imported where a table or console is made, not at start-up
    from rich.console import Console
    from rich.table import Table

PIPED_WIDTH = 200
"""Columns of the page when stdout is not a terminal (unless COLUMNS says otherwise)."""


def page_width() -> int | None:
    """None on a terminal (rich measures it); a wide page when piped, or COLUMNS if set."""
    if os.environ.get("COLUMNS"):
        return None
    stdout = sys.stdout
    if stdout is not None and hasattr(stdout, "isatty") and stdout.isatty():
        return None
    return PIPED_WIDTH


def console(stderr: bool = False, longest: int = 0) -> Console:
    """A console on stdout (or stderr), wide when piped: wide enough for a column of
    ``longest`` characters beside the others."""
    from rich.console import Console

    width = page_width()
    if width is not None:
        width = max(width, longest + 120)
    return Console(highlight=False, soft_wrap=False, stderr=stderr, width=width)


def flag(*names: str, help: str) -> Any:
    """A boolean ``typer.Option`` shown without a ``<bool>`` placeholder."""
    return typer.Option(*names, help=help, metavar="")


_json_state = {"printed": False}


def print_json(value: Any) -> None:
    """One JSON object (or list) on stdout."""
    print(json.dumps(value, indent=1, allow_nan=False))
    _json_state["printed"] = True


def json_wanted() -> bool:
    """Whether the command as typed asked for ``--json`` and has not printed its answer yet:
    then a refusal or an interruption answers with a JSON object too."""
    return "--json" in _argv and not _json_state["printed"]


def print_json_error(message: str, code: int) -> None:
    """The JSON answer of a command that ends without its own: ``{"error", "exit_code"}``."""
    if json_wanted():
        print_json({"path": None, "exit_code": int(code), "error": message})


# -- shared option types --------------------------------------------------------------------
ParamOpt = Annotated[
    list[str] | None,
    typer.Option(
        "-p", "--param", metavar="NAME=VALUE", help="Vectors as 1,2 or JSON [[..]]. Repeatable."
    ),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option("-c", "--config", metavar="JOB.toml", help="TOML job file; options override it."),
]
ForceOpt = Annotated[bool, flag("--force", help="Replace existing output.")]
QuietOpt = Annotated[bool, flag("-q", "--quiet", help="Print nothing but errors.")]
JsonOpt = Annotated[bool, flag("--json", help="Print one JSON object on stdout.")]
ModelArg = Annotated[
    str | None, typer.Argument(metavar="MODEL", help="Model name (see 'richlazy models').")
]
OutputOpt = Annotated[
    Path | None,
    typer.Option(
        "-o",
        "--output",
        metavar="OUT.h5",
        help="Result file.",
        show_default="results/MODEL-ACTION-TIME.h5 for solve/train",
    ),
]


# -- the command as typed -------------------------------------------------------------------
_argv: list[str] = []


def set_argv(argv: list[str]) -> None:
    global _argv
    _argv = list(argv)
    _json_state["printed"] = False


def command_line() -> list[str]:
    """The command as typed, recorded in every result file."""
    return ["richlazy", *_argv]


# -- what to say when interrupted -----------------------------------------------------------
_interrupt = {"hint": "nothing written", "signal": "SIGINT", "reported": False}


def on_interrupt(hint: str) -> None:
    """What an interruption of the running command leaves (the line printed on SIGINT/TERM)."""
    _interrupt.update(hint=hint, signal="SIGINT", reported=False)


def interrupted_by(signal_name: str) -> None:
    """Note the signal that interrupts the command (SIGINT unless said otherwise)."""
    _interrupt["signal"] = signal_name


def report_interrupt(message: str | None = None) -> None:
    """Print the one line of an interruption, once: ``message``, or the signal and the hint.

    Nothing when the interruption is a closed stdout (:class:`ClosedStdout`): a command cut
    off by ``| head`` ends silently, as ``cat`` or ``grep`` do.
    """
    if _interrupt["reported"] or ClosedStdout.closed:
        return
    _interrupt["reported"] = True
    text = message or f"interrupted ({_interrupt['signal']}); {_interrupt['hint']}"
    print(f"richlazy: {text}", file=sys.stderr)


# -- a closed stdout (`richlazy sweep ... | head -1`) -----------------------------------------
SIGPIPE_STATUS = 128 + 13
"""The exit status of a command whose stdout was closed: a shell's status for a process killed
by SIGPIPE (141), which richlazy returns itself after stopping cleanly."""


class StdoutClosed(KeyboardInterrupt):
    """Raised by the first write to a closed stdout; a run stops on it as on an interrupt
    (workers stopped, finished chunks kept in the parts folder)."""

    def __init__(self) -> None:
        super().__init__("SIGPIPE")


def escaped(text: str, stream: Any) -> str:
    """``text`` with what ``stream``'s encoding cannot hold as backslash escapes: a name that
    is not UTF-8 (a byte Python holds as ``\\udcXX``) prints as that escape, as Python's own
    stderr prints it, never as a ``UnicodeEncodeError`` (docs/engine.md, "Hostile input")."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    return text.encode(encoding, "backslashreplace").decode(encoding)


class EscapingStream:
    """A text stream (stderr: :func:`.app.run`) that writes what its encoding cannot hold as
    :func:`escaped` does, whatever its error handler (a test's capture is strict)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except UnicodeEncodeError:  # nothing was written: the text is encoded first
            return self._stream.write(escaped(text, self._stream))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class ClosedStdout:
    """``sys.stdout`` whose first write to a closed pipe raises :class:`StdoutClosed` once.

    After that, fd 1 points at ``/dev/null`` (so that nothing fails again, not even Python's
    final flush) and every later write is dropped. A ``BrokenPipeError`` would otherwise reach
    click, which turns it into exit 1, the status of failed points.
    """

    closed = False
    """Whether stdout was found closed during this command."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def _broken(self) -> None:
        ClosedStdout.closed = True
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._stream.fileno())
            os.close(null)
        except (OSError, ValueError, AttributeError):  # not a real file (a test's capture)
            pass
        raise StdoutClosed()

    def write(self, text: str) -> int:
        if ClosedStdout.closed:
            return len(text)
        try:
            try:
                return self._stream.write(text)
            except UnicodeEncodeError:  # a strict locale's stdout: nothing was written
                return self._stream.write(escaped(text, self._stream))
        except BrokenPipeError:
            self._broken()
            raise  # pragma: no cover - _broken raised

    def flush(self) -> None:
        if ClosedStdout.closed:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._broken()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


# -- failures -------------------------------------------------------------------------------
def failures_table(failures: list[dict[str, Any]]) -> Table:
    from rich.table import Table

    table = Table(title=f"{len(failures)} failed point(s)")
    table.add_column("point")
    table.add_column("status")
    table.add_column("message")
    for f in failures[:50]:
        point = ", ".join(f"{k}={v}" for k, v in f["point"].items()) or "(single run)"
        try:
            status = Status(f["status"]).name.lower()
        except ValueError:
            status = str(f["status"])
        table.add_row(point, status, f["message"])
    return table
