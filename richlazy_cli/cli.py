"""The ``richlazy`` command line: parse, validate, call the engine, print.

Exit codes: 0 success; 1 the run finished but some points failed (listed); 2 bad input (one line
on stderr, nothing written); 130 interrupted (finished chunks kept for ``--resume``).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import click
import typer
from rich.console import Console
from rich.table import Table

from . import __version__
from .models.params import BadInput

app = typer.Typer(
    name="richlazy",
    help="Batch simulations of lazy versus rich (feature-learning) training regimes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
store_app = typer.Typer(help="Inspect, verify and merge result files.", no_args_is_help=True)
app.add_typer(store_app, name="store")

out_console = Console(highlight=False, soft_wrap=True)


def _click_classes(name: str) -> tuple[type[BaseException], ...]:
    """An exception class from click and, where typer vendors its own click, from typer."""
    classes = {getattr(click.exceptions, name)}
    try:
        from typer._click import exceptions as vendored
    except ImportError:  # typer that uses click itself
        pass
    else:
        classes.add(getattr(vendored, name, getattr(click.exceptions, name)))
    return tuple(classes)


_EXITS = (*_click_classes("Exit"), typer.Exit)
_ABORTS = (*_click_classes("Abort"), typer.Abort)
_NO_ARGS = _click_classes("NoArgsIsHelpError")
_USAGE_ERRORS = _click_classes("ClickException")


def _version(value: bool) -> None:
    if value:
        print(f"richlazy {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """richlazy: solve, train and sweep lazy/rich models; report on the results."""


# -- shared option types --------------------------------------------------------------------
ParamOpt = Annotated[
    list[str] | None,
    typer.Option("-p", "--param", help="NAME=VALUE; vectors 1,2 or JSON [[..]]. Repeatable."),
]
ConfigOpt = Annotated[Path | None, typer.Option("-c", "--config", help="TOML job file.")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Replace existing output.")]
QuietOpt = Annotated[bool, typer.Option("-q", "--quiet", help="Print nothing but errors.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
ModelArg = Annotated[str | None, typer.Argument(help="Model name (see 'richlazy models').")]
OutputOpt = Annotated[Path | None, typer.Option("-o", "--output", help="Result file (.h5).")]


_argv: list[str] = []


def _command_line() -> list[str]:
    """The command as typed, recorded in every result file."""
    return ["richlazy", *_argv]


def _default_output(model: str, action: str) -> Path:
    folder = Path("results")
    folder.mkdir(exist_ok=True)
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    path = folder / f"{model}-{action}-{stamp}.h5"
    n = 1
    while path.exists():
        path = folder / f"{model}-{action}-{stamp}-{n}.h5"
        n += 1
    return path


def _failures_table(failures: list[dict[str, Any]]) -> Table:
    table = Table(title=f"{len(failures)} failed point(s)")
    table.add_column("point")
    table.add_column("status")
    table.add_column("message")
    for f in failures[:50]:
        point = ", ".join(f"{k}={v}" for k, v in f["point"].items()) or "(single run)"
        table.add_row(
            point, {1: "diverged", 2: "error"}.get(f["status"], str(f["status"])), f["message"]
        )
    return table


# -- models ---------------------------------------------------------------------------------
@app.command("models")
def models_cmd(as_json: JsonOpt = False) -> None:
    """List every model, its actions and its parameters."""
    from .models.base import all_models

    models = all_models()
    if as_json:
        print(
            json.dumps(
                [
                    {
                        "name": m.name,
                        "summary": m.summary,
                        "actions": list(m.actions),
                        "params": [p.to_json() for p in m.params],
                    }
                    for m in models.values()
                ],
                indent=1,
            )
        )
        return
    for m in models.values():
        table = Table(
            title=f"{m.name}  ({', '.join(m.actions)}): {m.summary}", title_justify="left"
        )
        for col in ("parameter", "type", "default", "unit", "range", "help"):
            table.add_column(col)
        for p in m.params:
            d = p.to_json()
            table.add_row(
                d["name"], d["type"], json.dumps(d["default"]), d["unit"], d["range"], d["help"]
            )
        out_console.print(table)


# -- solve / train --------------------------------------------------------------------------
def _single(
    action: str,
    model: str | None,
    params: list[str] | None,
    config: Path | None,
    output: Path | None,
    force: bool,
    quiet: bool,
) -> None:
    from .engine.job import Job, parse_assignments, read_job_file
    from .engine.run import RunOptions, execute

    job_file = read_job_file(config) if config else None
    model_name = model or (job_file.model if job_file else None)
    if not model_name:
        raise BadInput("no model given (as argument or in the job file)")
    if job_file and job_file.action and job_file.action != action:
        raise BadInput(f"job file {config} is for action {job_file.action!r}, not {action!r}")
    if job_file and job_file.grid:
        raise BadInput(f"job file {config} has a [grid]; run it with 'richlazy sweep'")
    given: dict[str, Any] = dict(job_file.params) if job_file else {}
    given.update(parse_assignments(params or [], "-p"))
    job = Job.build(model_name, action, given)
    out = output or _default_output(job.model.name, action)
    outcome = execute(
        job, out, RunOptions(jobs=1, use_parts=False, force=force, quiet=True), _command_line()
    )
    _finish(outcome, quiet)


def _finish(outcome: Any, quiet: bool) -> None:
    if outcome.exit_code == 130:
        print(f"richlazy: {outcome.message}", file=sys.stderr)
        raise typer.Exit(130)
    if outcome.failures:
        Console(stderr=True).print(_failures_table(outcome.failures))
    if outcome.message:
        print(f"richlazy: {outcome.message}", file=sys.stderr)
    if outcome.path is not None and not quiet:
        print(outcome.path)
    if outcome.exit_code:
        raise typer.Exit(outcome.exit_code)


def _single_command(action: str, doc: str) -> Any:
    """The `solve` or `train` command: one configuration, run in this process."""

    def command(
        model: ModelArg = None,
        param: ParamOpt = None,
        config: ConfigOpt = None,
        output: OutputOpt = None,
        force: ForceOpt = False,
        quiet: QuietOpt = False,
    ) -> None:
        _single(action, model, param, config, output, force, quiet)

    command.__doc__ = doc
    return command


app.command("solve")(
    _single_command(
        "solve", "Integrate a model's gradient flow (exact solutions where they exist)."
    )
)
app.command("train")(_single_command("train", "Train a model by gradient descent (GD or SGD)."))


# -- sweep ----------------------------------------------------------------------------------
@app.command("sweep")
def sweep_cmd(
    action: Annotated[str | None, typer.Argument(help="solve or train.")] = None,
    model: Annotated[str | None, typer.Argument(help="Model name.")] = None,
    grid: Annotated[
        list[str] | None,
        typer.Option(
            "-g",
            "--grid",
            help="NAME=SPEC, e.g. tau=logspace(-1,0.3,17). Repeatable; order = dimension order.",
        ),
    ] = None,
    param: ParamOpt = None,
    config: ConfigOpt = None,
    output: OutputOpt = None,
    jobs: Annotated[
        int | None, typer.Option("--jobs", "-j", help="Workers (default: all cores).")
    ] = None,
    backend: Annotated[str | None, typer.Option("--backend", help="loky, threads or dask.")] = None,
    scheduler: Annotated[
        str | None, typer.Option("--scheduler", help="Dask scheduler: tcp://HOST:PORT or 'local'.")
    ] = None,
    worker_timeout: Annotated[
        float | None, typer.Option("--worker-timeout", help="Seconds to wait for Dask workers.")
    ] = None,
    chunk_size: Annotated[
        int | None, typer.Option("--chunk-size", help="Points per vectorised call.")
    ] = None,
    shard: Annotated[
        str | None, typer.Option("--shard", help="K/N: compute shard K of N (1-based).")
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue an interrupted sweep.")
    ] = False,
    retry_failed: Annotated[
        bool, typer.Option("--retry-failed", help="With --resume: recompute failed points.")
    ] = False,
    fail_fast: Annotated[
        bool, typer.Option("--fail-fast", help="Stop at the first failed point.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the plan; compute nothing.")
    ] = False,
    force: ForceOpt = False,
    quiet: QuietOpt = False,
    max_points: Annotated[  # store safety hook: grid size limit
        int | None,
        typer.Option("--max-points", help="Largest grid accepted (default 10,000,000)."),
    ] = None,
) -> None:
    """Run solve or train across a parameter grid, in parallel, resumably."""
    from .engine.grid import parse_shard, shard_from_env
    from .engine.job import Job, parse_assignments, read_job_file
    from .engine.run import RunOptions, execute

    job_file = read_job_file(config) if config else None
    jf_run = job_file.run if job_file else {}
    action = action or (job_file.action if job_file else None)
    if action not in ("solve", "train"):
        raise BadInput(f"sweep action must be solve or train, got {action!r}")
    if job_file and job_file.action and job_file.action != action:
        raise BadInput(f"job file {config} is for action {job_file.action!r}, not {action!r}")
    model_name = model or (job_file.model if job_file else None)
    if not model_name:
        raise BadInput("no model given (as argument or in the job file)")
    given: dict[str, Any] = dict(job_file.params) if job_file else {}
    given.update(parse_assignments(param or [], "-p"))
    specs: dict[str, Any] = dict(job_file.grid) if job_file else {}
    cli_specs = parse_assignments(grid or [], "-g")
    seen: set[str] = set()
    for name, spec in cli_specs:
        if name in seen:
            raise BadInput(f"grid dimension {name} is given twice")
        seen.add(name)
        specs[name] = spec
    for name in list(given):  # a grid on the command line overrides a fixed value in the file
        if name in seen and job_file and name in job_file.params:
            del given[name]
    if not specs:
        raise BadInput("the grid is empty: give at least one -g NAME=SPEC")
    out = output or (Path(jf_run["output"]) if "output" in jf_run else None)
    if out is None:
        raise BadInput("sweep needs an output file: -o OUT.h5")
    shard_text = shard or jf_run.get("shard")
    the_shard = parse_shard(str(shard_text)) if shard_text else shard_from_env(dict(os.environ))
    opts = RunOptions(
        jobs=jobs if jobs is not None else jf_run.get("jobs"),
        backend=backend or jf_run.get("backend", "loky"),
        scheduler=scheduler or jf_run.get("scheduler"),
        worker_timeout=float(
            worker_timeout if worker_timeout is not None else jf_run.get("worker_timeout", 60.0)
        ),
        chunk_size=chunk_size if chunk_size is not None else jf_run.get("chunk_size"),
        shard=the_shard,
        resume=resume,
        retry_failed=retry_failed,
        fail_fast=fail_fast or bool(jf_run.get("fail_fast", False)),
        force=force,
        dry_run=dry_run,
        quiet=quiet,
    )
    if opts.jobs is not None and opts.jobs < 1:
        raise BadInput(f"--jobs {opts.jobs}: must be at least 1")
    if opts.chunk_size is not None and opts.chunk_size < 1:
        raise BadInput(f"--chunk-size {opts.chunk_size}: must be at least 1")
    if opts.worker_timeout <= 0:
        raise BadInput("--worker-timeout must be positive")
    if opts.scheduler and opts.backend != "dask":
        raise BadInput("--scheduler needs --backend dask")
    from .engine.grid import DEFAULT_MAX_POINTS  # store safety hook: --max-points

    if max_points is not None and max_points < 1:
        raise BadInput(f"--max-points {max_points}: must be at least 1")
    limit = max_points or DEFAULT_MAX_POINTS
    job = Job.build(model_name, action, given, list(specs.items()), limit)
    outcome = execute(job, out, opts, _command_line())
    if dry_run:
        p = outcome.plan
        shape = " x ".join(str(n) for n in job.grid.shape)
        print(f"grid: {shape} = {p['points']} points")
        if opts.shard:
            print(f"shard {opts.shard}: {p['selected']} points")
        print(
            f"pending: {p['pending']} points in {len(p['chunks'])} chunks "
            f"(chunk size {p['chunk_size']}, {p['workers']} worker(s))"
        )
        print(f"estimated work: {p['work']:.3g} units ({job.model.name} cost model)")
        return
    _finish(outcome, quiet)


# -- report ---------------------------------------------------------------------------------
@app.command("report")
def report_cmd(
    inputs: Annotated[list[Path], typer.Argument(help="Result files.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Output folder.")],
    kind: Annotated[
        str, typer.Option("--kind", help="auto, phase, curves, theory, scaling, neurons, "
                          "partition or basin.")
    ] = "auto",
    var: Annotated[
        list[str] | None, typer.Option("--var", help="Variable to draw. Repeatable.")
    ] = None,
    x: Annotated[str | None, typer.Option("--x", help="Dimension on the x axis.")] = None,
    y: Annotated[str | None, typer.Option("--y", help="Dimension on the y axis.")] = None,
    at: Annotated[
        list[str] | None, typer.Option("--at", help="DIM=VALUE selection. Repeatable.")
    ] = None,
    reduce: Annotated[str, typer.Option("--reduce", help="mean or median over seed.")] = "mean",
    fmt: Annotated[str, typer.Option("--format", help="png, svg or pdf.")] = "png",
    contours: Annotated[
        bool, typer.Option("--contours", help="Contour lines on phase diagrams.")
    ] = False,
    quiet: QuietOpt = False,
) -> None:
    """Turn result files into phase diagrams, learning curves and theory overlays."""
    from .engine.grid import split_assignment
    from .report import build_report, summary_table

    if kind not in ("auto", "phase", "curves", "theory", "scaling", "neurons", "partition",
                    "basin"):
        raise BadInput(f"--kind {kind!r}: use auto, phase, curves, theory, scaling, neurons, "
                       "partition or basin")
    if fmt not in ("png", "svg", "pdf"):
        raise BadInput(f"--format {fmt!r}: use png, svg or pdf")
    if reduce not in ("mean", "median"):
        raise BadInput(f"--reduce {reduce!r}: use mean or median")
    selections = dict(split_assignment(a, "--at") for a in (at or []))
    summary = build_report(
        list(inputs),
        output,
        kind=kind,
        variables=var or None,
        x=x,
        y=y,
        at=selections,
        reduce=reduce,
        fmt=fmt,
        contours=contours,
    )
    if not quiet:
        out_console.print(summary_table(summary))
        print(output / "index.html")


# -- store ----------------------------------------------------------------------------------
@store_app.command("ls")
def store_ls(
    folder: Annotated[Path, typer.Argument(help="Folder to list.")] = Path("results"),
    as_json: JsonOpt = False,
) -> None:
    """One row per result file: model, action, grid shape, points done/failed/missing."""
    from .engine.store import describe, is_hdf5

    if not folder.is_dir():
        raise BadInput(f"{folder} is not a folder")
    rows = []
    for path in sorted(folder.glob("*.h5")) + sorted(folder.glob("*.nc")):
        if not is_hdf5(path):
            rows.append({"file": str(path), "error": "not an HDF5 file"})
            continue
        try:
            info = describe(path)
        except BadInput as exc:
            rows.append({"file": str(path), "error": str(exc)})
            continue
        attrs = info["attrs"]
        rows.append(
            {
                "file": str(path),
                "model": attrs.get("model"),
                "action": attrs.get("action"),
                "grid": {d: info["dims"][d] for d in info["grid"]},
                **info["points"],
                "created": attrs.get("created"),
            }
        )
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    table = Table(title=f"{len(rows)} result file(s) in {folder}")
    for col in ("file", "model", "action", "grid", "done", "failed", "missing", "created"):
        table.add_column(col)
    for r in rows:
        if "error" in r:
            table.add_row(r["file"], f"[red]{r['error']}[/red]", "", "", "", "", "", "")
            continue
        shape = " x ".join(f"{k}={v}" for k, v in r["grid"].items()) or "-"
        table.add_row(
            r["file"],
            r["model"],
            r["action"],
            shape,
            str(r["done"]),
            str(r["failed"]),
            str(r["missing"]),
            r["created"],
        )
    out_console.print(table)


@store_app.command("show")
def store_show(
    path: Annotated[Path, typer.Argument(help="Result file.")], as_json: JsonOpt = False
) -> None:
    """Dimensions, variables, parameters and provenance of a result file."""
    from .engine.store import describe

    info = describe(path)
    if as_json:
        print(json.dumps(info, indent=1))
        return
    attrs = info["attrs"]
    out_console.print(
        f"[bold]{path}[/bold]: {attrs.get('model')} {attrs.get('action')}, "
        f"created {attrs.get('created')} on {attrs.get('host')}"
    )
    out_console.print("dimensions: " + ", ".join(f"{k}={v}" for k, v in info["dims"].items()))
    pts = info["points"]
    out_console.print(
        f"points: {pts['done']} done, {pts['failed']} failed, {pts['missing']} missing "
        f"of {pts['total']}"
    )
    table = Table(title="variables")
    for col in ("name", "dims", "dtype", "long_name", "units"):
        table.add_column(col)
    for name, v in info["variables"].items():
        table.add_row(name, ", ".join(v["dims"]), v["dtype"], v["long_name"], v["units"])
    out_console.print(table)
    ptable = Table(title="parameters")
    ptable.add_column("name")
    ptable.add_column("value")
    grid = attrs.get("grid") or {}
    for name, value in (attrs.get("params") or {}).items():
        ptable.add_row(name, f"swept: {grid[name]}" if name in grid else json.dumps(value))
    out_console.print(ptable)
    for key in ("command", "richlazy_version", "git_commit", "git_dirty", "versions", "complete"):
        if key in attrs:
            value = attrs[key]
            out_console.print(f"{key}: {value if isinstance(value, str) else json.dumps(value)}")


@store_app.command("verify")
def store_verify(path: Annotated[Path, typer.Argument(help="Result file.")]) -> None:
    """Check schema and completeness; exit 1 with the reason when incomplete or unreadable."""
    from .engine.store import verify

    try:
        problems = verify(path)
    except BadInput as exc:
        print(f"richlazy: {exc}", file=sys.stderr)
        raise typer.Exit(1) from None
    if problems:
        print(f"richlazy: {path}: {'; '.join(problems)}", file=sys.stderr)
        raise typer.Exit(1)
    print(f"{path}: ok")


@store_app.command("merge")
def store_merge(
    output: Annotated[Path, typer.Argument(help="Merged result file.")],
    inputs: Annotated[list[Path], typer.Argument(help="Shard files.")],
    force: ForceOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Merge shard files of one sweep into one result."""
    from .engine.merge import merge_results
    from .engine.store import point_counts

    merged = merge_results(output, inputs, force, _command_line())
    counts = point_counts(merged)
    if not quiet:
        print(output)
    if counts["missing"]:
        print(
            f"richlazy: {output}: {counts['missing']} of {counts['total']} points still missing",
            file=sys.stderr,
        )
        raise typer.Exit(1)


# -- entry point ----------------------------------------------------------------------------
def _error(message: str, code: int) -> int:
    print(f"richlazy: error: {message}", file=sys.stderr)
    return code


def _sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return the exit code (never raises)."""
    if threading_is_main():
        signal.signal(signal.SIGTERM, _sigterm)
    global _argv
    _argv = list(sys.argv[1:] if argv is None else argv)
    command = typer.main.get_command(app)
    try:
        code = command.main(args=argv, prog_name="richlazy", standalone_mode=False)
        return code if isinstance(code, int) else 0
    except BadInput as exc:
        return _error(str(exc), 2)
    except _EXITS as exc:
        return int(exc.exit_code)
    except _NO_ARGS as exc:  # bare `richlazy` or `richlazy store`: show the help
        print(exc.format_message())
        return 0
    except _USAGE_ERRORS as exc:
        return _error(" ".join(exc.format_message().split()), 2)
    except (KeyboardInterrupt, *_ABORTS):
        return _error("interrupted", 130)
    except Exception as exc:  # a bug: one line, and a traceback only when asked for
        from .engine.store import storage_error_line  # store safety hook: OS errors exit 2

        if (line := storage_error_line(exc)) is not None:
            return _error(line, 2)
        if os.environ.get("RICHLAZY_DEBUG"):
            raise
        from .engine.chunk import describe_exception

        return _error(
            f"internal error: {describe_exception(exc)} (set RICHLAZY_DEBUG=1 for a traceback)", 3
        )


def threading_is_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def main() -> None:
    sys.exit(run())
