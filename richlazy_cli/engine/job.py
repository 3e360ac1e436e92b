"""What a run computes and how: model, action, parameters, grid and run options, validated.

Values come from a TOML job file (``-c``), then from the command line (``-p NAME=VALUE``,
``-g NAME=SPEC`` and the run options such as ``--jobs``), which overrides the file; the merge
is :func:`prepare_single` and :func:`prepare_sweep`, so the CLI only collects what was typed.
The run options are declared once, with their types and checks (:data:`RUN_OPTIONS`), for the
``[run]`` table and the command line alike. Every point of the grid is validated before
anything runs, so a bad combination is reported at once (exit 2) instead of as a failed point.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import BadInput
from ..models.base import Footprint, Model, enter, get_model
from ..numerics import compute
from ..userfiles import read_text
from .grid import (
    SLURM_SHARD,
    Grid,
    Shard,
    describe_slurm_task,
    parse_grid,
    parse_shard,
    shard_from_env,
    split_assignment,
)
from .options import (  # noqa: F401  (names of the run options, re-exported)
    CLUSTER_DEFAULTS,
    DEFAULT_MAX_POINTS,
    RUN_KEYS,
    RUN_OPTIONS,
    SLURM_CLUSTER_KEYS,
    SLURM_SCHEDULER,
    Action,
    Backend,
    RunOption,
)
from .sizes import DEFAULT_MAX_BYTES, parse_bytes
from .validate import CaseTree, TooManyCases, written_values

JOB_KEYS = {"action", "model", "params", "grid", "run"}
KEEP_CASES = 100_000
"""The most distinct cases of a grid's check whose written values are kept in memory."""


@dataclass
class RunOptions:
    """How to run a job: the ``[run]`` table of a job file and the sweep's options."""

    jobs: int | None = None
    backend: Backend = Backend.LOKY
    scheduler: str | None = None
    cluster: dict[str, Any] = field(default_factory=dict)
    """``--scheduler slurm``: the SLURMCluster arguments of its worker jobs."""
    worker_timeout: float = 60.0
    chunk_size: int | None = None
    shard: Shard | None = None
    shard_source: str = ""
    """Where the shard came from, for the first line (``--shard slurm``: the array task)."""
    resume: bool = False
    continue_: bool = False
    """``--continue``: start, resume or do nothing, whichever the output needs
    (:func:`.output.continue_mode`)."""
    retry_failed: bool = False
    fail_fast: bool = False
    force: bool = False
    dry_run: bool = False
    quiet: bool = False
    use_parts: bool = True
    max_bytes: int = DEFAULT_MAX_BYTES
    """The largest result accepted, in bytes (uncompressed; engine/footprint.py)."""
    absent_devices: tuple[str, ...] = ()
    """A dry run's: the devices its points ask for that this machine lacks (validated with
    them allowed, :func:`richlazy_cli.numerics.compute.absent_devices_allowed`); no time
    estimate is made where one is absent."""


@dataclass(frozen=True)
class JobFile:
    """The parsed contents of a TOML job file."""

    action: str | None = None
    model: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    grid: dict[str, Any] = field(default_factory=dict)
    run: dict[str, Any] = field(default_factory=dict)


def read_job_file(path: Path) -> JobFile:
    """Parse a job file; any problem is a one-line BadInput."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise BadInput(f"job file {path} does not exist")
    text = read_text(path, "job file")  # a regular file: a FIFO or a folder is refused
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"job file {path} is not valid TOML: {exc}") from None
    except RecursionError:  # thousands of nested arrays or tables
        raise BadInput(f"job file {path} is not valid TOML: nested too deeply") from None
    unknown = set(data) - JOB_KEYS
    if unknown:
        raise BadInput(f"job file {path}: unknown key {sorted(unknown)[0]!r}")
    for table in ("params", "grid", "run"):
        if not isinstance(data.get(table, {}), dict):
            raise BadInput(f"job file {path}: [{table}] must be a table")
    bad_run = set(data.get("run", {})) - RUN_KEYS
    if bad_run:
        raise BadInput(f"job file {path}: unknown [run] option {sorted(bad_run)[0]!r}")
    for key, value in data.get("run", {}).items():
        problem = RUN_OPTIONS[key].problem(value)
        if problem:
            raise BadInput(f"job file {path}: [run] {key} = {_toml(value)}: {problem}")
    for key, value in data.get("grid", {}).items():
        if not isinstance(value, str | list) or (isinstance(value, list) and not value):
            raise BadInput(
                f"job file {path}: [grid] {key} = {_toml(value)}: expected a spec string such "
                'as "linspace(0,1,5)" or a non-empty list of values'
            )
    for key in ("action", "model"):
        if key in data and not isinstance(data[key], str):
            raise BadInput(f"job file {path}: {key} must be a string")
    return JobFile(
        action=data.get("action"),
        model=data.get("model"),
        params=dict(data.get("params", {})),
        grid=dict(data.get("grid", {})),
        run=dict(data.get("run", {})),
    )


def _toml(value: Any) -> str:
    """A value as it would be written in TOML (for messages)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


@dataclass
class Job:
    """A validated run: ``base`` holds every parameter, ``grid`` the swept ones."""

    model: type[Model]
    action: str
    base: dict[str, Any]
    grid: Grid
    recorded: dict[str, Any]  # the parameters as recorded in the file (grid ones at default)
    cases: CaseTree | None = None
    """The checked (written) values of every case of the grid, when kept (prepared_cases)."""

    @classmethod
    def build(
        cls,
        model_name: str,
        action: str,
        params: Mapping[str, Any],
        grid_specs: Sequence[tuple[str, Any]] = (),
        max_points: int = DEFAULT_MAX_POINTS,
    ) -> Job:
        """Validate parameters (raw strings are parsed, other values coerced) and the grid:
        the model's one entrance (:func:`~richlazy_cli.models.base.enter`, as
        :meth:`.Model.resolve` takes it), with the grid's cases prepared by
        :func:`prepared_cases`."""
        model = get_model(model_name)
        grid = parse_grid(model, grid_specs, max_points, action)
        entry = enter(model, action, params, swept=grid.names,
                      prepare_cases=lambda base: prepared_cases(model, action, base, grid))
        job = cls(model, action, entry.values, grid, recorded=dict(entry.values),
                  cases=entry.cases)
        if not grid.dims:
            job.recorded = job.values(0)  # what Model.resolve(action, params) returns
        return job

    def values(self, flat: int) -> dict[str, Any]:
        """Every parameter of one point (base overlaid with its grid values), prepared: from
        the cases kept by :func:`prepared_cases`, prepared afresh only where none are."""
        values = dict(self.base)
        values.update(self.grid.point(flat))
        if self.cases is not None:
            shape = self.grid.shape
            at = tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()
            values.update(self.cases.outcome(at))
        else:
            self.model.prepare(self.action, values)
        return values

    def footprint_of(self, values: dict[str, Any]) -> Footprint:
        """The model's footprint of a point's values as a :class:`CaseTree` hands them to its
        run (base and grid values, not prepared). The prepared values are taken from the kept
        cases, and the tree told which grid dimensions they depend on, so that the model's
        preparation does not run again; only where no cases are kept is it run here."""
        at = getattr(values, "at", None)
        if self.cases is None or at is None:
            self.model.prepare(self.action, values)
        else:
            outcome, dims = self.cases.locate(at)
            values.depends_on(self.grid.names[k] for k in dims)  # type: ignore[attr-defined]
            if isinstance(outcome, BadInput):
                raise BadInput(str(outcome))
            dict.update(values, outcome)
        return self.model.footprint(self.action, values)

    def workers_limit(self) -> int | None:
        """The most workers the model can use at once for this job (its footprint's
        ``workers`` at the first point; one per GPU on a device), or None."""
        return self.model.footprint(self.action, self.values(0)).workers

    def checked_values(self, indices: np.ndarray | Sequence[int]) -> list[dict[str, Any]] | None:
        """The checked parameter sets of ``indices``, built from the kept cases (or None)."""
        if self.cases is None:
            return None
        indices = np.asarray(indices, dtype=np.int64)
        out = []
        for point, at in zip(self.grid.points(indices), self.grid.positions(indices),
                             strict=True):
            values = dict(self.base)
            values.update(point)
            values.update(self.cases.outcome(at))
            out.append(values)
        return out

    def prepared_points(self, indices: np.ndarray | Sequence[int]) -> list[dict[str, Any]] | None:
        """The grid values of ``indices``, each with the values its case derived (from the kept
        cases, or None): overlaid on :attr:`base` they are the prepared parameter sets, so a
        worker process receives a point's preparation instead of running it again."""
        if self.cases is None:
            return None
        indices = np.asarray(indices, dtype=np.int64)
        return [{**point, **self.cases.outcome(at)} for point, at in
                zip(self.grid.points(indices), self.grid.positions(indices), strict=True)]

    def chunks(self, indices: np.ndarray, chunk_size: int) -> Iterator[np.ndarray]:
        """Cut ``indices`` into chunks of at most ``chunk_size`` batch-compatible points.

        Points share a chunk only when they agree on every non-batchable grid parameter (of
        their implementation: a parameter that it batches over besides the family's,
        ``Implementation.batchable``, does not split chunks); the groups come in the order of
        their first point in ``indices``, each in that order.
        """
        fixed = [k for k, d in enumerate(self.grid.dims) if not self.model.param(d.name).batchable]
        indices = np.asarray(indices, dtype=np.int64)
        if not fixed or not indices.size:
            for start in range(0, indices.size, chunk_size):
                yield indices[start : start + chunk_size]
            return
        index = self._chunk_positions(fixed, indices)
        key = np.ravel_multi_index([index[k] for k in fixed], [self.grid.shape[k] for k in fixed])
        _, first, group = np.unique(key, return_index=True, return_inverse=True)
        rank = np.empty(first.size, dtype=np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(first.size)
        order = np.argsort(rank[group], kind="stable")
        grouped, ranks = indices[order], rank[group][order]
        bounds = np.flatnonzero(np.diff(ranks)) + 1
        for members in np.split(grouped, bounds):
            for start in range(0, members.size, chunk_size):
                yield members[start : start + chunk_size]

    def _chunk_positions(self, fixed: list[int], indices: np.ndarray) -> dict[int, np.ndarray]:
        """The positions of ``indices`` along the ``fixed`` grid dimensions that decide their
        chunk: each dimension's own, except along a dimension that a point's implementation
        batches over (``Implementation.batchable``), where it is 0, so that such points share
        a chunk whatever their value there. The implementation is read once per combination
        of the other fixed dimensions (it is chosen by non-batchable values, never by the
        dimensions it batches over)."""
        index = np.unravel_index(indices, self.grid.shape)
        out = {k: index[k] for k in fixed}
        extra = {name for impl in self.model.implementations for name in impl.batchable}
        loose = [k for k in fixed if self.grid.dims[k].name in extra]
        if not loose:
            return out
        rest = [k for k in fixed if k not in loose]
        shape = self.grid.shape
        cases = (np.ravel_multi_index([index[k] for k in rest], [shape[k] for k in rest])
                 if rest else np.zeros(indices.size, dtype=np.int64))
        _, first, case = np.unique(cases, return_index=True, return_inverse=True)
        for k in loose:
            out[k] = out[k].copy()
        for c, at in enumerate(first.tolist()):
            names = self.model.batchable_names(self.values(int(indices[at])), self.action)
            members = case.reshape(-1) == c
            for k in loose:
                if self.grid.dims[k].name in names:
                    out[k][members] = 0
        return out


def prepared_cases(model: type[Model], action: str, base: dict[str, Any], grid: Grid
                   ) -> CaseTree | None:
    """Prepare every point of ``grid`` over ``base``: the grid's step of the model's entrance
    (:func:`~richlazy_cli.models.base.enter`). The first bad point (in C order) is reported
    with its grid values.

    A :class:`CaseTree` runs the model's :meth:`~.Model.prepare` once per distinct case,
    exploring the grid by its axes, so that nothing per point is built (a 10⁶-point grid over
    parameters the check never reads costs one check). The tree of written values is
    returned, unless it has more than :data:`KEEP_CASES` cases (then None), for the routes
    that compute in this process, which then need not check again
    (:meth:`Job.checked_values`).
    """
    failures: list[tuple[int, BadInput]] = []
    shape = grid.shape

    def visit(fixed: dict[int, int], first: tuple[int, ...], outcome: Any) -> None:
        if isinstance(outcome, BadInput):
            flat = int(np.ravel_multi_index(first, shape)) if shape else 0
            failures.append((flat, outcome))

    run = written_values(model, action)
    tree: CaseTree | None
    try:
        tree = CaseTree(grid, base, run, visit, limit=KEEP_CASES)
    except TooManyCases:
        failures.clear()
        CaseTree(grid, base, run, visit, keep=False)
        tree = None
    if failures:
        flat, exc = min(failures, key=lambda f: f[0])
        if not grid.dims:
            raise BadInput(str(exc))
        where = ", ".join(f"{k}={v}" for k, v in grid.label(flat).items())
        raise BadInput(f"at grid point {where}: {exc}") from None
    return tree


def parse_assignments(items: Sequence[str], flag: str) -> list[tuple[str, str]]:
    return [split_assignment(item, flag) for item in items]


# -- merging the job file with the command line ---------------------------------------------
@dataclass(frozen=True)
class Request:
    """What the command line gave: the job file (``-c``) is read and merged by ``prepare_*``.

    ``run`` maps :data:`RUN_OPTIONS` keys to the values of the flags that were given (typed
    by the CLI, not yet checked); the flags that were not given are left out.
    """

    action: str | None = None
    model: str | None = None
    params: Sequence[str] = ()
    grid: Sequence[str] = ()
    config: Path | None = None
    run: Mapping[str, Any] = field(default_factory=dict)
    values: Mapping[str, Any] = field(default_factory=dict)
    """Parameter values already typed (the Python API's ``params``), applied after ``params``."""
    grid_specs: Mapping[str, Any] = field(default_factory=dict)
    """Grid specs by name (the Python API's ``grid``: spec strings or lists), after ``grid``."""


def _model_and_params(
    req: Request, action: str | None, job_file: JobFile | None
) -> tuple[str, str, dict[str, Any]]:
    if job_file and job_file.action and action and job_file.action != action:
        raise BadInput(
            f"job file {req.config} is for action {job_file.action!r}, not {action!r}"
        )
    action = action or (job_file.action if job_file else None)
    if action not in set(Action):
        raise BadInput(f"the action must be solve or train, got {action!r}")
    model = req.model or (job_file.model if job_file else None)
    if not model:
        raise BadInput("no model given (as argument or in the job file)")
    given: dict[str, Any] = dict(job_file.params) if job_file else {}
    overrides = {**dict(parse_assignments(req.params, "-p")), **req.values}
    if job_file and overrides:
        _drop_overridden(get_model(model), str(action), given, overrides)
    given.update(overrides)
    return str(action), model, given


def _drop_overridden(model: type[Model], action: str, given: dict[str, Any],
                     overrides: Mapping[str, Any]) -> None:
    """Drop, from a job file's ``given`` values, those that ``overrides`` give again under
    another name of the same parameter (an older name: :attr:`.Model.aliases`), so that an
    override replaces the file's value whichever of its names either uses."""
    def own(name: str) -> str:
        try:
            return model.name_of(name, action)
        except BadInput:  # an unknown name is refused by the build, naming it
            return name

    replaced = {own(name) for name in overrides}
    for name in [n for n in given if n not in overrides and own(n) in replaced]:
        del given[name]


def prepare_single(action: str, req: Request) -> Job:
    """The job of ``richlazy solve|train``: one configuration, no grid."""
    job_file = read_job_file(req.config) if req.config else None
    if job_file and job_file.grid:
        raise BadInput(f"job file {req.config} has a [grid]; run it with 'richlazy sweep'")
    action, model, given = _model_and_params(req, action, job_file)
    return Job.build(model, action, given)


def run_settings(req: Request, job_file: JobFile | None) -> dict[str, Any]:
    """The run options: the command line's over the job file's, each checked once."""
    settings = dict(job_file.run) if job_file else {}
    for key, value in req.run.items():
        if value is None:
            continue
        option = RUN_OPTIONS[key]
        problem = option.problem(value)
        if problem:
            raise BadInput(f"{option.flag} {value}: {problem}")
        settings[key] = value
    return settings


def prepare_sweep(
    req: Request, env: Mapping[str, str] | None = None, **flags: bool
) -> tuple[Job, Path, RunOptions]:
    """The job, output and run options of ``richlazy sweep``, from the job file and flags.

    ``flags`` are the command line's switches that no job file sets (``resume``,
    ``retry_failed``, ``force``, ``dry_run``, ``quiet``); ``env`` is where ``--shard slurm``
    reads its array task (default: this process's environment). No environment variable
    changes what a sweep computes unless ``--shard slurm`` asks for it.
    """
    job_file = read_job_file(req.config) if req.config else None
    action, model, given = _model_and_params(req, req.action, job_file)
    specs: dict[str, Any] = dict(job_file.grid) if job_file else {}
    seen: set[str] = set()
    typed = [(str(name), spec) for name, spec in req.grid_specs.items()]
    for name, spec in [*parse_assignments(req.grid, "-g"), *typed]:
        if name in seen:
            raise BadInput(f"grid dimension {name} is given twice")
        seen.add(name)
        specs[name] = spec
    for name in list(given):  # a grid on the command line overrides a fixed value in the file
        if name in seen and job_file and name in job_file.params:
            del given[name]
    if not specs:
        raise BadInput("the grid is empty: give at least one -g NAME=SPEC")
    settings = run_settings(req, job_file)
    if "output" not in settings:
        raise BadInput("sweep needs an output file: -o OUT.h5")
    backend = Backend(settings.get("backend", Backend.LOKY))
    if settings.get("scheduler") and backend != Backend.DASK:
        raise BadInput("--scheduler needs --backend dask")
    if settings.get("cluster") and settings.get("scheduler") != SLURM_SCHEDULER:
        raise BadInput("[run.cluster] is for the SLURM workers of --scheduler slurm")
    shard_text = settings.get("shard")
    shard, shard_source = None, ""
    if shard_text and str(shard_text).strip().lower() == SLURM_SHARD:
        environ = dict(os.environ if env is None else env)
        shard, shard_source = shard_from_env(environ), describe_slurm_task(environ)
    elif shard_text:
        shard = parse_shard(str(shard_text))
    opts = RunOptions(
        jobs=settings.get("jobs"),
        backend=backend,
        scheduler=settings.get("scheduler"),
        cluster={**CLUSTER_DEFAULTS, **settings.get("cluster", {})},
        worker_timeout=float(settings.get("worker_timeout", 60.0)),
        chunk_size=settings.get("chunk_size"),
        shard=shard,
        shard_source=shard_source,
        fail_fast=bool(settings.get("fail_fast", False)),
        max_bytes=parse_bytes(settings.get("max_bytes", DEFAULT_MAX_BYTES)),
        **dict[str, Any](flags),  # the switches: resume, retry_failed, force, dry_run, quiet
    )
    # a dry run shows the plan of a GPU job where no GPU is (docs/engine.md); a run refuses
    allowed = compute.absent_devices_allowed() if opts.dry_run else contextlib.nullcontext()
    with allowed as absent:
        job = Job.build(model, action, given, list(specs.items()),
                        int(settings.get("max_points", DEFAULT_MAX_POINTS)))
    if absent:
        opts = dataclasses.replace(opts, absent_devices=tuple(sorted(absent)))
    return job, Path(settings["output"]), opts
