"""The ``richlazy`` command line: collect what was typed, call the engine, print.

The merge of a job file with the options lives in the engine (:mod:`.engine.job`); choices
are the engine's and the report's enumerations, so the command line cannot offer what the
library does not do, or the reverse. The ``store`` subcommands are in :mod:`.store`.

Exit codes (:class:`.errors.ExitCode`): 0 success; 1 the run finished but some points failed
(listed); 2 bad input (one line on stderr, nothing written); 3 an internal error (one line;
``RICHLAZY_DEBUG=1`` shows the traceback); 75 busy: another run holds the output's lock
(nothing done, try later); 130 interrupted by SIGINT or SIGTERM (one line; finished chunks kept
for ``--resume``); 141 stdout closed early (``| head``: the status of a process killed by
SIGPIPE, quietly, finished chunks kept).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import gc
import itertools
import os
import sys
import warnings
from pathlib import Path
from typing import Annotated, Any

import typer

from .. import __version__
from ..engine import interrupts
from ..engine.options import RUN_OPTIONS, Action, Backend
from ..errors import BadInput, Busy, ExitCode, RichlazyDeprecationWarning
from ..report.options import Format, Reduction, ReportKind
from .common import (
    SIGPIPE_STATUS,
    ClosedStdout,
    ConfigOpt,
    EscapingStream,
    ForceOpt,
    JsonOpt,
    ModelArg,
    OutputOpt,
    ParamOpt,
    QuietOpt,
    StdoutClosed,
    command_line,
    console,
    failures_table,
    flag,
    interrupted_by,
    on_interrupt,
    page_width,
    print_json,
    print_json_error,
    report_interrupt,
    set_argv,
)
from .store import store_app

app = typer.Typer(
    name="richlazy",
    help="Batch simulations of lazy versus rich (feature-learning) training regimes.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(store_app, name="store")


try:  # typer that vendors its click (typer._click); its Exit and Abort are typer's own
    from typer._click import exceptions as _click_errors
    from typer._click.core import Context as _ClickContext
except ImportError:  # pragma: no cover - typer that uses click itself (click is installed)
    from click import Context as _ClickContext  # type: ignore[assignment]
    from click import exceptions as _click_errors  # type: ignore[no-redef]

# The click that typer runs on, never ``import click``: a typer that vendors it does not
# install click (a non-editable install has none, scripts/check-install.sh).
_EXITS: tuple[type[Any], ...] = tuple({typer.Exit, getattr(_click_errors, "Exit", typer.Exit)})
_ABORTS: tuple[type[Any], ...] = tuple({typer.Abort,
                                        getattr(_click_errors, "Abort", typer.Abort)})
_NO_ARGS: tuple[type[Any], ...] = (_click_errors.NoArgsIsHelpError,)
_USAGE_ERRORS: tuple[type[Any], ...] = (_click_errors.ClickException,)


def _version(value: bool) -> None:
    if value:
        print(f"richlazy {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version.", metavar=""
        ),
    ] = False,
) -> None:
    """richlazy: solve, train and sweep lazy/rich models; report on the results."""


def _default_output(model: str, action: str) -> Path:
    """A new name under ``results/``, reserved by creating it empty with ``O_EXCL``: two
    runs started in the same second never pick the same name (the run replaces the empty
    file; :func:`_release_reservation` removes it when the run writes nothing)."""
    folder = Path("results")
    folder.mkdir(exist_ok=True)
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    for n in range(10_000):
        path = folder / f"{model}-{action}-{stamp}{f'-{n}' if n else ''}.h5"
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        except OSError as exc:
            raise BadInput(f"cannot create {path} ({exc.strerror})") from None
        return path
    raise BadInput(f"no free result name for {model}-{action}-{stamp} in {folder}")


def _release_reservation(path: Path) -> None:
    """Remove the empty file :func:`_default_output` reserved, if it is still empty."""
    with contextlib.suppress(OSError):
        if path.stat().st_size == 0:
            path.unlink()


def _finish(outcome: Any, quiet: bool, as_json: bool, with_plan: bool = False) -> None:
    """Print a run's outcome (a JSON object with --json) and exit with its code."""
    if as_json:
        print_json(
            {
                "path": str(outcome.path) if outcome.path is not None else None,
                "exit_code": int(outcome.exit_code),
                "counts": outcome.counts,
                "failures": outcome.failures,
                "message": outcome.message,
                **({"plan": outcome.plan.summary()} if with_plan and outcome.plan else {}),
            }
        )
    elif outcome.failures and outcome.exit_code != ExitCode.INTERRUPTED:
        console(stderr=True).print(failures_table(outcome.failures))
    if outcome.exit_code == ExitCode.INTERRUPTED:
        report_interrupt(outcome.message)
    elif outcome.message:
        print(f"richlazy: {outcome.message}", file=sys.stderr)
    if outcome.path is not None and not quiet and not as_json:
        print(outcome.path)
    if outcome.exit_code:
        raise typer.Exit(int(outcome.exit_code))


# -- models ---------------------------------------------------------------------------------
def _model_json(m: Any) -> dict[str, Any]:
    return {
        "name": m.name,
        "summary": m.summary,
        "actions": list(m.actions),
        "params": [{**p.to_json(), "aliases": m.aliases_of(p.name)} for p in m.params],
    }


def model_docs(model: Any) -> str | None:
    """The model's page in docs/ (a class's ``docs`` attribute, else ``docs/<name>.md``)."""
    page = getattr(model, "docs", None) or f"docs/{model.name}.md"
    root = Path(__file__).resolve().parents[2]
    return page if (root / page).is_file() or getattr(model, "docs", None) else None


def model_outputs(model: Any) -> list[dict[str, Any]]:
    """The variables each action of ``model`` writes, from its first declared example."""
    from ..models.base import Batch

    rows = []
    for action in model.actions:
        examples = getattr(model, "examples", {}).get(action) or ()
        if not examples:
            continue
        try:
            values = model.resolve(action, examples[0])
            ds = model().run(action, Batch.from_points(model, [values]))
        except Exception as exc:  # an extra not installed (torch): say so, list the rest
            rows.append({"action": action, "name": "?", "dims": [], "units": "",
                         "long_name": f"not available here ({type(exc).__name__}: {exc})"})
            continue
        for name, item in ds.data_vars.items():
            rows.append({"action": action, "name": str(name),
                         "dims": [str(d) for d in item.dims if d != "point"],
                         "units": str(item.attrs.get("units", "")),
                         "long_name": str(item.attrs.get("long_name", ""))})
    return rows


@app.command("models")
def models_cmd(
    name: Annotated[
        str | None, typer.Argument(metavar="[MODEL]", help="One model (default: every model).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """List every model (or one), its actions and its parameters."""
    from rich.table import Table

    from ..models.base import all_models, get_model

    models = [get_model(name)] if name else list(all_models().values())
    outputs = model_outputs(models[0]) if name else None
    if as_json:
        if name:
            print_json({**_model_json(models[0]), "outputs": outputs,
                        "docs": model_docs(models[0])})
        else:
            print_json([_model_json(m) for m in models])
        return
    out = console()
    for m in models:
        table = Table(
            title=f"{m.name}  ({', '.join(m.actions)}): {m.summary}", title_justify="left"
        )
        for col in ("parameter", "type", "default", "unit", "range", "help"):
            table.add_column(col, no_wrap=col == "parameter")
        for p in m.params:
            d = p.to_json()
            default = "none" if d["default"] is None else str(d["default"])
            older = ", ".join(f"{alias} for {'/'.join(acts)}"
                              for alias, acts in m.aliases_of(p.name).items())
            helptext = f"{d['help']} (deprecated name: {older})" if older else d["help"]
            table.add_row(d["name"], d["type"], default, d["unit"], d["range"], helptext)
        out.print(table)
    if outputs is not None:
        table = Table(title=f"outputs of {models[0].name} (variables of a result file)",
                      title_justify="left")
        for col in ("action", "variable", "dimensions", "units", "long name"):
            table.add_column(col, no_wrap=col == "variable")
        for row in outputs:
            table.add_row(row["action"], row["name"], ", ".join(row["dims"]), row["units"],
                          row["long_name"])
        out.print(table)
        docs = model_docs(models[0])
        if docs:
            out.print(f"mathematics and outputs: {docs}")


# -- solve / train --------------------------------------------------------------------------
def _single_command(action: Action, doc: str) -> Any:
    """The `solve` or `train` command: one configuration, run in this process."""

    def command(
        model: ModelArg = None,
        param: ParamOpt = None,
        config: ConfigOpt = None,
        output: OutputOpt = None,
        force: ForceOpt = False,
        quiet: QuietOpt = False,
        as_json: JsonOpt = False,
    ) -> None:
        from richlazy import run_single

        from ..engine.job import Request, prepare_single

        request = Request(model=model, params=param or (), config=config)
        if output is not None:
            _, outcome = run_single(action, request, output, force, command_line())
        else:  # the model's name is known once the job file is read
            out = _default_output(prepare_single(action, request).model.name, action)
            try:  # reserved: the run replaces it
                _, outcome = run_single(action, request, out, True, command_line())
            finally:
                _release_reservation(out)  # left only when nothing was written
        _finish(outcome, quiet, as_json)

    command.__doc__ = doc
    return command


app.command("solve")(
    _single_command(
        Action.SOLVE, "Integrate a model's gradient flow (exact solutions where they exist)."
    )
)
app.command("train")(
    _single_command(Action.TRAIN, "Train a model by gradient descent (GD or SGD).")
)


# -- sweep ----------------------------------------------------------------------------------
def _run_opt(key: str, *names: str, metavar: str | None, default: str | None = None) -> Any:
    """A sweep option declared in :data:`.engine.options.RUN_OPTIONS` (help and checks
    shared)."""
    option = RUN_OPTIONS[key]
    return typer.Option(
        option.flag, *names, help=option.help, metavar=metavar, show_default=default or False
    )


@app.command("sweep")
def sweep_cmd(
    action: Annotated[
        str | None, typer.Argument(metavar="ACTION", help="solve or train.",
                                   autocompletion=lambda: [a.value for a in Action])
    ] = None,
    model: ModelArg = None,
    grid: Annotated[
        list[str] | None,
        typer.Option(
            "-g",
            "--grid",
            metavar="NAME=SPEC",
            help="e.g. tau=logspace(-1,0.3,17). Repeatable; order = dimension order.",
        ),
    ] = None,
    param: ParamOpt = None,
    config: ConfigOpt = None,
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", metavar="OUT.h5",
                     help="Result file (required: here or as the job file's \\[run] output)."),
    ] = None,
    jobs: Annotated[int | None, _run_opt("jobs", "-j", metavar="N", default="all cores")] = None,
    backend: Annotated[Backend | None, _run_opt("backend", metavar=None, default="loky")] = None,
    scheduler: Annotated[str | None, _run_opt("scheduler", metavar="ADDRESS")] = None,
    worker_timeout: Annotated[
        float | None, _run_opt("worker_timeout", metavar="S", default="60")
    ] = None,
    chunk_size: Annotated[int | None, _run_opt("chunk_size", metavar="N", default="auto")] = None,
    shard: Annotated[str | None, _run_opt("shard", metavar="K/N")] = None,
    resume: Annotated[bool, flag("--resume", help="Continue an interrupted sweep.")] = False,
    continue_: Annotated[
        bool,
        flag("--continue", help="Start, resume or do nothing (cron, make); "
             "--force: replace another sweep's."),
    ] = False,
    retry_failed: Annotated[
        bool, flag("--retry-failed", help="With --resume: recompute failed points.")
    ] = False,
    fail_fast: Annotated[bool, flag("--fail-fast", help=RUN_OPTIONS["fail_fast"].help)] = False,
    dry_run: Annotated[
        bool, flag("--dry-run", help="Print the plan and an estimated time; write nothing.")
    ] = False,
    force: ForceOpt = False,
    quiet: QuietOpt = False,
    max_points: Annotated[
        int | None,
        typer.Option("--max-points", metavar="N",
                     help="Largest grid accepted (default 10,000,000)."),
    ] = None,
    max_bytes: Annotated[str | None, _run_opt("max_bytes", metavar="SIZE")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run solve or train across a parameter grid, in parallel, resumably."""
    from richlazy import dry_run_summary, run_sweep

    from ..engine.job import Request
    from ..engine.run import jobs_warning

    if action is not None and action not in set(Action):
        raise BadInput(unknown_action(action))
    given = {"jobs": jobs, "backend": backend, "scheduler": scheduler, "shard": shard,
             "worker_timeout": worker_timeout, "chunk_size": chunk_size,
             "output": str(output) if output else None, "fail_fast": fail_fast or None,
             "max_points": max_points, "max_bytes": max_bytes}
    request = Request(action, model, param or (), grid or (), config, given)

    planned: dict[str, Any] = {}

    def before(job: Any, out: Path, opts: Any) -> None:
        planned["opts"] = opts
        warning = jobs_warning(opts)
        if warning and not as_json:
            print(f"richlazy: warning: {warning}", file=sys.stderr)
        on_interrupt(f"finished work kept in {out}.parts for --resume")

    job, _, outcome = run_sweep(
        request, command_line(), before, resume=resume, continue_=continue_,
        retry_failed=retry_failed, force=force, dry_run=dry_run, quiet=quiet or as_json,
    )
    if not dry_run:
        _finish(outcome, quiet, as_json, with_plan=True)
    elif as_json:
        print_json(dry_run_summary(job, outcome))
    else:
        _print_dry_run(job, planned["opts"], outcome)


def unknown_action(action: str) -> str:
    """The line for an ACTION that is neither solve nor train (a model name, a typo)."""
    from ..models.base import all_models

    if action in all_models():
        return (f"{action!r} is a model; the action comes first: "
                f"richlazy sweep solve|train {action} -g NAME=SPEC ...")
    return f"unknown action {action!r}: use solve or train (richlazy sweep ACTION MODEL ...)"


def _print_dry_run(job: Any, opts: Any, outcome: Any) -> None:
    p = outcome.plan
    print(f"grid: {' x '.join(str(n) for n in job.grid.shape)} = {p.points} points")
    for dim in job.grid.dims:
        print(f"  {dim.describe()}")
    if opts.shard:
        print(f"shard {opts.shard}: {p.selected} points")
    capped = f"; --jobs {p.jobs} capped at the number of chunks" if p.capped else ""
    print(
        f"pending: {p.pending} points in {len(p.chunks)} chunks "
        f"(chunk size {p.chunk_size}, {p.workers} worker(s){capped})"
    )
    if outcome.output_size is not None:
        print(f"output: {outcome.output_size.describe()}")
    if outcome.estimate is not None:
        print(f"estimated time: {outcome.estimate.describe()}")
    for device in outcome.absent_devices:
        print(f"device: {device} is absent on this machine: no time estimate is made "
              "(the estimate times a probe on the device)")
        print(f"  chunks sized as without a GPU (on one: by its free memory); the run needs "
              f"{device}")


# -- report ---------------------------------------------------------------------------------
@app.command("report")
def report_cmd(
    inputs: Annotated[list[Path], typer.Argument(metavar="IN.h5...", help="Result files.")],
    output: Annotated[
        Path, typer.Option("-o", "--output", metavar="DIR", help="Output folder.")
    ],
    kind: Annotated[ReportKind, typer.Option("--kind", help="What to draw.")] = ReportKind.AUTO,
    var: Annotated[
        list[str] | None,
        typer.Option("--var", metavar="NAME", help="Variable to draw (default: all). Repeatable."),
    ] = None,
    x: Annotated[str | None, typer.Option("--x", metavar="DIM", help="x-axis dimension.")] = None,
    y: Annotated[str | None, typer.Option("--y", metavar="DIM", help="y-axis dimension.")] = None,
    at: Annotated[
        list[str] | None,
        typer.Option("--at", metavar="DIM=VALUE", help="Select one value. Repeatable."),
    ] = None,
    reduce: Annotated[
        Reduction, typer.Option("--reduce", help="Reduction over seed.")
    ] = Reduction.MEAN,
    fmt: Annotated[Format, typer.Option("--format", help="Figure format.")] = Format.PNG,
    contours: Annotated[bool, flag("--contours", help="Contour lines on phase diagrams.")] = False,
    quiet: QuietOpt = False,
) -> None:
    """Turn result files into phase diagrams, learning curves and theory overlays."""
    from ..engine.grid import split_assignment
    from ..report import build_report, summary_table

    selections = dict(split_assignment(a, "--at") for a in (at or []))
    on_interrupt(f"the report in {output} may be incomplete")
    summary = build_report(
        list(inputs), output, kind=kind, variables=var or None, x=x, y=y, at=selections,
        reduce=reduce, fmt=fmt, contours=contours,
    )
    if not quiet:
        console().print(summary_table(summary))
        for note in summary.get("notes", []):
            print(f"note: {note}")
        print(output / "index.html")


# -- figure: the papers' figures (richlazy_cli/figures, docs/figures.md) ---------------------
@app.command("figure")
def figure_cmd(
    args: Annotated[
        list[str] | None,
        typer.Argument(metavar="NAME [IN.h5...]", help="A registered figure and its results."),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", metavar="DIR", help="Output folder.")
    ] = None,
    list_: Annotated[bool, flag("--list", help="List the registered figures.")] = False,
    gallery: Annotated[
        Path | None,
        typer.Option("--gallery", metavar="RESULTS", help="Draw every registered figure from "
                     "the results in this folder, with index.html."),
    ] = None,
    full: Annotated[bool, flag("--full", help="With --gallery: the paper-scale jobs.")] = False,
    fmt: Annotated[Format, typer.Option("--format", help="Figure format.")] = Format.PNG,
    quiet: QuietOpt = False,
) -> None:
    """Draw a paper's figure as the paper lays it out, captioned with its claim and the
    measured value (--list names them; --gallery draws them all)."""
    from ..figures import gallery as gal

    if list_:
        print(gal.listing())
        return
    if output is None:
        raise BadInput("-o DIR is required")
    if gallery is not None:
        entries = gal.build_gallery(gallery, output, fmt=fmt, full=full)
    else:
        if not args:
            raise BadInput("give a figure NAME and its result files (richlazy figure --list)")
        entries = gal.write_figures([args[0]], [Path(a) for a in args[1:]], output, fmt=fmt)
    if not quiet:
        for e in entries:
            print(f"{e['name']}: {e['caption']['measured']} [{e['seconds']:.1f} s]")
        print(output / "index.html")


# -- entry point ----------------------------------------------------------------------------
def _error(message: str, code: int) -> int:
    print(f"richlazy: error: {message}", file=sys.stderr)
    print_json_error(message, code)  # with --json, stdout answers too
    return code


def _interrupted() -> int:
    """Exit 130 with one line (and a JSON object with --json), or 141 and nothing when the
    interruption was a closed stdout (:class:`.common.ClosedStdout`)."""
    interrupted_by(interrupts.pending() or "SIGINT")
    report_interrupt()
    if ClosedStdout.closed:
        return SIGPIPE_STATUS
    print_json_error("interrupted", ExitCode.INTERRUPTED)
    return int(ExitCode.INTERRUPTED)


HELP_WIDTH = 140
"""Columns of ``--help`` when stdout is not a terminal: every help text on one line."""


def _wide_help() -> str | None:
    """Lay typer's help out for a wide page when stdout is not a terminal, without importing
    typer's rich layer (a command that prints no help should not pay for it): where it is
    not imported yet, through ``TERMINAL_WIDTH``, which it reads when imported (unless the
    user set it). Returns the ``TERMINAL_WIDTH`` to restore: None where it was unset."""
    if page_width() is None:
        return os.environ.get("TERMINAL_WIDTH")
    loaded = sys.modules.get("typer.rich_utils")
    if loaded is not None and getattr(loaded, "MAX_WIDTH", 0) is None:
        setattr(loaded, "MAX_WIDTH", HELP_WIDTH)  # noqa: B010  (a module attribute of typer)
    before = os.environ.get("TERMINAL_WIDTH")
    os.environ.setdefault("TERMINAL_WIDTH", str(HELP_WIDTH))
    return before


_VALUE_FLAGS = {"-p": "-p NAME=VALUE", "--param": "-p NAME=VALUE", "-g": "-g NAME=SPEC",
                "--grid": "-g NAME=SPEC", "--at": "--at DIM=VALUE"}


def usage_hint(argv: list[str], message: str) -> str:
    """A hint for a usage error caused by ``-p NAME VALUE`` (a space instead of ``=``)."""
    if "unexpected extra argument" not in message:
        return ""
    for i, (flag_name, value) in enumerate(itertools.pairwise(argv)):
        if flag_name in _VALUE_FLAGS and "=" not in value:
            given = argv[i + 2] if i + 2 < len(argv) else "VALUE"
            form = _VALUE_FLAGS[flag_name]
            return f"; write {flag_name} {value}={given} ({form}, no space around '=')"
    return ""


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return the exit code (never raises)."""
    previous = interrupts.install()  # SIGINT and SIGTERM: engine/interrupts.py
    real_stdout, ClosedStdout.closed = sys.stdout, False
    sys.stdout = ClosedStdout(real_stdout)  # a closed pipe stops the command quietly (141)
    real_stderr = sys.stderr
    sys.stderr = EscapingStream(real_stderr)  # names that are not UTF-8 print as escapes
    set_argv(sys.argv[1:] if argv is None else argv)
    on_interrupt("nothing written")
    saved_width = _wide_help()
    debug = bool(os.environ.get("RICHLAZY_DEBUG"))
    saved_env = os.environ.get("PYTHONWARNINGS")
    if not debug:  # stderr carries richlazy's lines only; worker processes inherit this
        os.environ["PYTHONWARNINGS"] = "ignore"
    try:
        with warnings.catch_warnings():
            if not debug:
                warnings.simplefilter("ignore")
            _show_deprecations()
            code = _main(argv, debug)
        try:
            sys.stdout.flush()  # here, where a closed pipe is still caught, not at exit
        except StdoutClosed:
            code = SIGPIPE_STATUS if code == ExitCode.OK else code
        return code
    finally:
        sys.stdout, sys.stderr = real_stdout, real_stderr
        interrupts.restore(previous)
        if saved_width is None:
            os.environ.pop("TERMINAL_WIDTH", None)
        else:
            os.environ["TERMINAL_WIDTH"] = saved_width
        if not debug:
            if saved_env is None:
                os.environ.pop("PYTHONWARNINGS", None)
            else:
                os.environ["PYTHONWARNINGS"] = saved_env


def _show_deprecations() -> None:
    """Within :func:`run`'s ``catch_warnings``: each older parameter name given
    (:class:`~richlazy_cli.params.RichlazyDeprecationWarning`) is one line on stderr, once
    per command; every other warning is shown as before."""
    shown: set[str] = set()
    previous = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: Any = None, line: str | None = None) -> None:
        if not issubclass(category, RichlazyDeprecationWarning):
            previous(message, category, filename, lineno, file, line)
        elif str(message) not in shown:
            shown.add(str(message))
            print(f"richlazy: warning: {message}", file=sys.stderr)

    warnings.simplefilter("always", RichlazyDeprecationWarning)
    warnings.showwarning = show


def _bare_flags(command: Any) -> None:
    """Show every boolean flag (``--help`` and the completion options too) without a
    ``<bool>`` placeholder, in ``command`` and its subcommands."""
    context_class = getattr(command, "context_class", _ClickContext)
    help_option = command.get_help_option(context_class(command))
    for param in [*command.params, *([help_option] if help_option is not None else [])]:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        _bare_flags(sub)


def _main(argv: list[str] | None, debug: bool) -> int:
    command = typer.main.get_command(app)
    _bare_flags(command)
    try:
        try:
            code = command.main(args=argv, prog_name="richlazy", standalone_mode=False)
            if code == ExitCode.INTERRUPTED:  # typer turns KeyboardInterrupt into this, silently
                return _interrupted()
            return code if isinstance(code, int) else ExitCode.OK
        except Busy as exc:  # another run holds the output: try later, not bad input
            return _error(str(exc), ExitCode.BUSY)
        except BadInput as exc:
            return _error(str(exc), ExitCode.BAD_INPUT)
        except _EXITS as exc:
            if exc.exit_code == ExitCode.INTERRUPTED:
                return _interrupted()
            return int(exc.exit_code)
        except _NO_ARGS as exc:  # bare `richlazy` or `richlazy store`: show the help
            print(exc.format_message())
            return ExitCode.OK
        except _USAGE_ERRORS as exc:
            message = " ".join(exc.format_message().split())
            return _error(message + usage_hint(argv or sys.argv[1:], message),
                          ExitCode.BAD_INPUT)
        except _ABORTS:
            return _interrupted()
    except KeyboardInterrupt:  # also while a handler above was printing
        return _interrupted()
    except Exception as exc:  # a bug: one line, and a traceback only when asked for
        from ..engine.store import storage_error_line

        if (line := storage_error_line(exc)) is not None:  # no space, read-only, ...
            return _error(line, ExitCode.BAD_INPUT)
        if debug:
            raise
        from ..engine.chunk import describe_exception

        return _error(
            f"internal error: {describe_exception(exc)} (set RICHLAZY_DEBUG=1 for a traceback)",
            ExitCode.INTERNAL,
        )


def main() -> None:
    """The console entry point. An interrupt that lands outside :func:`run`'s handlers (while
    its clean-up runs) still ends with exit 130 and the one line, never with Python's own
    re-raised SIGINT."""
    try:
        code = run()
    except KeyboardInterrupt:
        code = _interrupted()
    # what is alive now lives until the process ends: the interpreter's collections while it
    # finalises skip it (0.2-0.5 s after a command that imported xarray, SciPy and dask, out
    # of a one-point dry run's second); the atexit handlers and closing of files run as ever
    gc.freeze()
    if code in (ExitCode.INTERRUPTED, SIGPIPE_STATUS):
        _leave(int(code))
    sys.exit(code)


def _leave(code: int) -> None:
    """End an interrupted command with ``code`` itself, not through the interpreter's exit.

    CPython ends a process in which a KeyboardInterrupt went "unhandled" by killing itself with
    SIGINT, and it reads that from a process-wide flag which an interrupted ``eval`` or
    ``exec`` of a string sets and nothing clears. ``collections.namedtuple`` evaluates a
    string, so a signal that lands while a module being imported defines one sets the flag,
    and the command, having caught the interrupt and printed its line, would still end by
    SIGINT (status -2) instead of 130. Measured under load: a ``store merge`` stopped by
    SIGTERM ended so in 9 of 310 runs; in the 70 runs where the flag was read at exit, both
    that ended -2 had it set and none of the 68 that ended 130 did; through this function,
    0 of 200 ended -2. The command's clean-up has run by now (the engine's ``finally``
    blocks); the ``atexit`` functions run here, the standard streams are flushed, and the
    status goes to the operating system directly.
    """
    import atexit

    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    os._exit(code)
