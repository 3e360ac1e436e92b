"""richlazy's Python API: the command line's runs, from a notebook or a script.

Each function takes what the command of the same name takes, with Python values where the
command line takes text, and returns an ``xarray.Dataset`` (docs/api.md)::

    import richlazy
    ds = richlazy.sweep("solve", "single-neuron",
                        grid={"delta": "linspace(-1,1,5)"}, params={"beta0": [1.0, 0.5]})
    ds = richlazy.sweep(config="jobs/fig1b-small.toml", output="results/fig1b-small.h5")
    ds = richlazy.solve("single-neuron", delta=-1.0, beta0=[1.0, 0.5])
    ds = richlazy.open("results/fig1b-small.h5")      # any result; a shard file as a grid
    plan = richlazy.estimate(config="jobs/fig1b-small.toml", jobs=2)  # --dry-run --json
    summary = richlazy.report(["results/fig1b-small.h5"], "reports/fig1b-small")

``params`` take the values ``-p NAME=VALUE`` takes (numbers, lists, strings; a string is
parsed as on the command line), ``grid`` the specs of ``-g NAME=SPEC`` (``"logspace(-1,0.3,17)"``)
or lists of values, ``config`` a job file, whose values they override. Results are those of
the command line, bit for bit (the same engine runs them: :func:`richlazy_cli.engine.run.execute`).

Datasets come in the file's layout (CF-1.11, docs/engine.md "Result files"): a dimension the
models call ``method`` is ``solution_method`` there, so that ``ds.sel(method=...)`` cannot
mean two things.

Bad input raises :class:`BadInput` (a ``ValueError``) with the command line's one-line
message; an argument of the wrong type is also a ``TypeError`` (:mod:`richlazy._arguments`,
docs/api.md "Arguments"); Ctrl-C raises ``KeyboardInterrupt`` saying what was kept. A run
whose points partly failed returns its dataset (``status`` says which) and warns.
"""

from __future__ import annotations

import shutil
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from richlazy import _arguments
from richlazy_cli import __version__
from richlazy_cli.errors import BadInput, ExitCode

if TYPE_CHECKING:  # the command line's dry run and runs import xarray only where they need it
    import xarray as xr

__all__ = ["BadInput", "__version__", "dry_run_summary", "estimate", "models", "open",
           "report", "solve", "sweep", "train"]

def _command(name: str, **given: Any) -> list[str]:
    """The provenance's ``command`` of an API call: what a reader can retype."""
    parts = ["richlazy.api", name]
    for key, value in given.items():
        if value not in (None, {}, (), []):
            parts.append(f"{key}={value!r}")
    return parts


def _finish(outcome: Any, out: Path, keep: bool, function: str = "sweep") -> xr.Dataset:
    if outcome.exit_code == ExitCode.INTERRUPTED:
        raise KeyboardInterrupt(_interrupted(outcome, out, keep, function))
    if outcome.exit_code not in (ExitCode.OK, ExitCode.FAILED_POINTS):
        raise BadInput(outcome.message or f"the run ended with exit code {int(outcome.exit_code)}")
    if outcome.exit_code == ExitCode.FAILED_POINTS:
        warnings.warn(
            f"{len(outcome.failures)} point(s) failed; see the status variable", stacklevel=3
        )
    ds = open(out)
    if not keep:  # a scratch folder of ours (_scratch)
        shutil.rmtree(out.parent, ignore_errors=True)
    return ds


def _interrupted(outcome: Any, out: Path, keep: bool, function: str) -> str:
    """The message of the ``KeyboardInterrupt`` an interrupted run raises: what was kept
    and how to resume (``resume=True``), or that nothing was (no ``output`` to resume)."""
    from richlazy_cli.engine.parts import parts_path

    head = str(outcome.message or "interrupted").split(":", 1)[0]  # interrupted (SIGINT)
    counts = outcome.counts or {}
    kept = int(counts.get("done", 0)) + int(counts.get("failed", 0))
    parts = Path(parts_path(out))
    if keep and parts.is_dir():
        return (f"{head}: {kept} of {int(counts.get('total', 0))} points kept in {parts}; "
                f"call richlazy.{function}(...) again with resume=True to finish")
    if keep:
        return f"{head}: nothing written to {out}"
    return (f"{head}: nothing kept (no output was given; with output=... the finished "
            f"points are kept for resume=True)")


def _scratch(model: str, action: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="richlazy-"))
    return folder / f"{model}-{action}.h5"


def _drop_scratch(out: Path | str) -> None:
    """Remove the scratch folder of ours (:func:`_scratch`) that holds ``out``."""
    shutil.rmtree(Path(out).parent, ignore_errors=True)


def sweep(
    action: str | None = None,
    model: str | None = None,
    *,
    grid: Mapping[str, Any] | None = None,
    params: Mapping[str, Any] | None = None,
    config: str | Path | None = None,
    output: str | Path | None = None,
    jobs: int | None = None,
    chunk_size: int | None = None,
    backend: str | None = None,
    shard: str | None = None,
    force: bool = False,
    resume: bool = False,
    quiet: bool = True,
    **run: Any,
) -> xr.Dataset:
    """Run ``action`` of ``model`` over ``grid`` (``richlazy sweep``); return the result.

    ``output`` (or the job file's ``[run] output``) keeps the file; without one the result is
    computed into a temporary file, loaded and the file removed. Other ``[run]`` options
    (``worker_timeout``, ``fail_fast``, ``max_points``, ``max_bytes``, ``scheduler``) pass as
    keywords.
    """
    request, keep, command = _sweep_request("sweep", action, model, grid, params, config,
                                            output, {"jobs": jobs, "chunk_size": chunk_size,
                                                     "backend": backend, "shard": shard,
                                                     "force": force, "resume": resume,
                                                     "quiet": quiet}, run)

    def warn(job: Any, out: Path, opts: Any) -> None:
        from richlazy_cli.engine.run import jobs_warning

        if (line := jobs_warning(opts)) is not None:
            warnings.warn(line, stacklevel=3)

    try:
        _, out, outcome = run_sweep(request, command, before=warn, resume=resume, force=force,
                                    quiet=quiet)
        return _finish(outcome, out, keep)
    except BaseException:  # no output to resume: no scratch left behind
        if not keep:
            _drop_scratch(request.run["output"])
        raise


def _sweep_request(function: str, action: Any, model: Any, grid: Any, params: Any,
                   config: Any, output: Any, flags: dict[str, Any], run: dict[str, Any]
                   ) -> tuple[Any, bool, list[str]]:
    """The engine's request for :func:`sweep` and :func:`estimate` (their arguments checked
    first: :func:`._arguments.sweep_arguments`), whether the output is the caller's to keep
    (``output``, else the job file's ``[run] output``; else a scratch file of ours,
    :func:`_scratch`), and the provenance's command."""
    from richlazy_cli.engine.job import Request, read_job_file

    checked = _arguments.sweep_arguments(function, action, model, grid, params, config,
                                         output, flags, run)
    action, model, grid, params = (checked["action"], checked["model"], checked["grid"],
                                   checked["params"])
    config, output, given_run = checked["config"], checked["output"], checked["run"]
    keep = output is not None
    if output is None and config is not None:
        keep = "output" in read_job_file(Path(config)).run
    given_run = dict(given_run)
    if not keep:
        job_file = read_job_file(Path(config)) if config is not None else None
        given_run["output"] = str(_scratch(
            str(model or (job_file.model if job_file else "result")),
            str(action or (job_file.action if job_file else "sweep"))))
    elif output is not None:
        given_run["output"] = str(output)
    request = Request(action, model, (), (), Path(config) if config else None,
                      {k: v for k, v in given_run.items() if v is not None},
                      values=dict(params or {}), grid_specs=dict(grid or {}))
    command = _command("sweep", action=action, model=model, grid=grid, params=params,
                       config=None if config is None else str(config))
    return request, keep, command


def estimate(
    action: str | None = None,
    model: str | None = None,
    *,
    grid: Mapping[str, Any] | None = None,
    params: Mapping[str, Any] | None = None,
    config: str | Path | None = None,
    output: str | Path | None = None,
    jobs: int | None = None,
    chunk_size: int | None = None,
    backend: str | None = None,
    shard: str | None = None,
    resume: bool = False,
    **run: Any,
) -> dict[str, Any]:
    """The plan and the estimated wall time of a sweep, without running it (``richlazy sweep
    ... --dry-run --json``): the same arguments as :func:`sweep`, and the same dictionary as
    the command's JSON, :func:`dry_run_summary` (``plan``, ``estimate``, ``axes``,
    ``output_bytes``). The estimate times a probe of the run's own computation here, so it
    takes seconds (docs/estimates.md)."""
    request, keep, command = _sweep_request("estimate", action, model, grid, params, config,
                                            output, {"jobs": jobs, "chunk_size": chunk_size,
                                                     "backend": backend, "shard": shard,
                                                     "resume": resume}, run)
    try:
        job, _, outcome = run_sweep(request, command, resume=resume, dry_run=True,
                                    quiet=True)
    finally:
        if not keep:  # nothing was written; the scratch folder of ours goes
            shutil.rmtree(Path(request.run["output"]).parent, ignore_errors=True)
    if outcome.exit_code != ExitCode.OK:
        raise BadInput(outcome.message or f"the dry run ended with exit code "
                                          f"{int(outcome.exit_code)}")
    return dry_run_summary(job, outcome)


def dry_run_summary(job: Any, outcome: Any) -> dict[str, Any]:
    """What a dry run found, as ``richlazy sweep --dry-run --json`` prints it and
    :func:`estimate` returns it: ``plan`` (:meth:`.Plan.summary`), ``estimate``
    (:meth:`.Estimate.summary`, None when nothing is pending or a device is absent),
    ``axes`` (each grid axis's first and last value and count), ``output_bytes`` (the
    result's declared size) and ``absent_devices`` (the devices the job asks for that this
    machine lacks: no estimate is made, and the run refuses)."""
    from richlazy_cli.params import jsonable

    size = outcome.output_size
    return {"plan": outcome.plan.summary(),
            "estimate": None if outcome.estimate is None else outcome.estimate.summary(),
            "axes": {d.name: {"first": jsonable(d.values[0]), "last": jsonable(d.values[-1]),
                              "count": d.size}
                     for d in job.grid.dims},
            "output_bytes": None if size is None else
            {"total": size.total, "per_point": size.per_point, "points": size.points,
             "source": size.source},
            "absent_devices": list(outcome.absent_devices)}


def run_sweep(request: Any, command: list[str], before: Any = None,
              **flags: bool) -> tuple[Any, Path, Any]:
    """The sweep behind :func:`sweep` and ``richlazy sweep``: the job file and options merged
    (:func:`richlazy_cli.engine.job.prepare_sweep`), ``before(job, out, opts)`` called (the
    command line prints its warnings there), then the run. Returns (job, output, outcome);
    a dry run's outcome holds the plan and the estimate."""
    from richlazy_cli.engine.job import prepare_sweep
    from richlazy_cli.engine.run import execute

    job, out, opts = prepare_sweep(request, None, **flags)  # env: this process's environment
    if before is not None:
        before(job, out, opts)
    return job, out, execute(job, out, opts, command)


def run_single(action: str, request: Any, output: str | Path | None, force: bool,
               command: list[str]) -> tuple[Path, Any]:
    """The run behind :func:`solve`/:func:`train` and ``richlazy solve|train``: one
    configuration in this process into ``output`` (a scratch file when None). Returns
    (output, outcome)."""
    from richlazy_cli.engine.job import prepare_single
    from richlazy_cli.engine.run import RunOptions, execute

    job = prepare_single(action, request)
    out = Path(output) if output is not None else _scratch(job.model.name, action)
    opts = RunOptions(jobs=1, use_parts=False, force=force, quiet=True)
    try:
        return out, execute(job, out, opts, command)
    except BaseException:  # no output to keep: no scratch left behind
        if output is None:
            _drop_scratch(out)
        raise


def _single(action: str, model: str, params: Mapping[str, Any], config: str | Path | None,
            output: str | Path | None, force: bool) -> xr.Dataset:
    from richlazy_cli.engine.job import Request

    _arguments.text_argument("model", model, optional=False)
    config = _arguments.path_argument("config", config)
    output = _arguments.path_argument("output", output)
    _arguments.flag_argument("force", force)
    request = Request(model=model, config=config, values=dict(params))
    command = _command(action, model=model, params=dict(params),
                       config=None if config is None else str(config))
    out, outcome = run_single(action, request, output, force, command)
    try:
        return _finish(outcome, out, keep=output is not None, function=action)
    except BaseException:
        if output is None:
            _drop_scratch(out)
        raise


def solve(model: str, config: str | Path | None = None, output: str | Path | None = None,
          force: bool = False, **params: Any) -> xr.Dataset:
    """One configuration's gradient flow (``richlazy solve MODEL -p NAME=VALUE ...``)."""
    return _single("solve", model, params, config, output, force)


def train(model: str, config: str | Path | None = None, output: str | Path | None = None,
          force: bool = False, **params: Any) -> xr.Dataset:
    """One configuration trained by GD or SGD (``richlazy train MODEL -p NAME=VALUE ...``)."""
    return _single("train", model, params, config, output, force)


def open(path: str | Path) -> xr.Dataset:
    """A result file, loaded: any layout (old files too), a shard file over the whole grid
    (the other shards' points missing: NaN, status -1), in the file layout (CF-1.11)."""
    from richlazy_cli.engine.cf import file_view
    from richlazy_cli.engine.store import as_grid, open_result

    return file_view(as_grid(open_result(_arguments.required_path("path", path))))


def _internal(name: str | None) -> str | None:
    from richlazy_cli.engine.cf import DATA_RENAMES, RENAMES

    inverse = {v: k for k, v in {**RENAMES, **DATA_RENAMES}.items()}
    return inverse.get(name, name) if name is not None else None


def report(
    inputs: str | Path | Sequence[str | Path],
    output: str | Path,
    *,
    kind: str = "auto",
    variables: Sequence[str] | None = None,
    x: str | None = None,
    y: str | None = None,
    at: Mapping[str, Any] | None = None,
    reduce: str = "mean",
    fmt: str = "png",
    contours: bool = False,
) -> dict[str, Any]:
    """Draw the figures of result files into ``output`` (``richlazy report``); return the
    summary (``summary.json``). Names may be given in the file's layout or the models'."""
    from richlazy_cli.report import build_report

    if isinstance(inputs, str | bytes) or hasattr(inputs, "__fspath__"):
        paths = [_arguments.required_path("inputs", inputs)]
    elif isinstance(inputs, Sequence):
        paths = [_arguments.required_path("inputs", p) for p in inputs]
    else:
        raise _arguments.path_type_error("inputs", inputs)
    output = _arguments.required_path("output", output)
    return build_report(
        paths, Path(output), kind=kind,
        variables=[str(_internal(v)) for v in variables] if variables else None,
        x=_internal(x), y=_internal(y),
        at={str(_internal(k)): str(v) for k, v in (at or {}).items()},
        reduce=reduce, fmt=fmt, contours=contours,
    )


def models() -> dict[str, Any]:
    """Every registered model class by name (``richlazy models``)."""
    from richlazy_cli.models.base import all_models

    return dict(all_models())
