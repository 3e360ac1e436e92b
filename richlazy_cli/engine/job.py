"""What a run computes: model, action, parameters and grid, validated at the boundary.

Values come from a TOML job file (``-c``), then ``-p NAME=VALUE`` and ``-g NAME=SPEC`` on the
command line, which override the file. Every point of the grid is validated before anything
runs, so a bad combination is reported at once (exit 2) instead of as a failed point.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..models.base import Model, get_model
from ..models.params import BadInput
from .grid import DEFAULT_MAX_POINTS, Grid, parse_grid, split_assignment
from .validate import PointChecker

JOB_KEYS = {"action", "model", "params", "grid", "run"}
KEEP_CHECKED = 200_000
"""Grids up to this many points keep their checked parameter sets in memory."""
RUN_KEYS = {
    "jobs",
    "backend",
    "scheduler",
    "chunk_size",
    "worker_timeout",
    "shard",
    "output",
    "fail_fast",
}


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
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise BadInput(f"job file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"job file {path} cannot be read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"job file {path} is not valid TOML: {exc}") from None
    unknown = set(data) - JOB_KEYS
    if unknown:
        raise BadInput(f"job file {path}: unknown key {sorted(unknown)[0]!r}")
    for table in ("params", "grid", "run"):
        if not isinstance(data.get(table, {}), dict):
            raise BadInput(f"job file {path}: [{table}] must be a table")
    bad_run = set(data.get("run", {})) - RUN_KEYS
    if bad_run:
        raise BadInput(f"job file {path}: unknown [run] option {sorted(bad_run)[0]!r}")
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


@dataclass
class Job:
    """A validated run: ``base`` holds every parameter, ``grid`` the swept ones."""

    model: type[Model]
    action: str
    base: dict[str, Any]
    grid: Grid
    recorded: dict[str, Any]  # the parameters as recorded in the file (grid ones at default)
    checked: list[dict[str, Any]] | None = None  # every point's checked parameters, if kept

    @classmethod
    def build(
        cls,
        model_name: str,
        action: str,
        params: Mapping[str, Any],
        grid_specs: Sequence[tuple[str, Any]] = (),
        max_points: int = DEFAULT_MAX_POINTS,  # store safety hook: --max-points
    ) -> Job:
        """Validate parameters (raw strings are parsed, other values coerced) and the grid."""
        model = get_model(model_name)
        if action not in model.actions:
            raise BadInput(
                f"model {model.name} has no action {action!r}; "
                f"it supports {', '.join(model.actions)}"
            )
        given: dict[str, Any] = {}
        for name, value in params.items():
            p = model.param(name)
            given[name] = p.parse(value) if isinstance(value, str) else p.coerce(value)
        grid = parse_grid(model, grid_specs, max_points)
        for name in grid.names:
            if name in given:
                raise BadInput(f"parameter {name} is both fixed (-p) and swept (-g)")
        base = dict(model.defaults())
        base.update(given)
        job = cls(model, action, base, grid, recorded=dict(base))
        job.validate_points()
        if not grid.dims:
            job.recorded = job.values(0)
        return job

    def values(self, flat: int, point: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Every parameter of one point (base overlaid with its grid values), checked."""
        values = dict(self.base)
        values.update(self.grid.point(flat) if point is None else point)
        self.model.check(self.action, values)
        return values

    def validate_points(self) -> None:
        """Check every point; the first bad one is reported with its grid values.

        A :class:`PointChecker` runs the model's check once per distinct case (see
        :mod:`.validate`). The checked parameter sets of grids up to :data:`KEEP_CHECKED`
        points are kept for the in-process route, which then need not check them again.
        """
        size = max(self.grid.size, 1)
        keep: list[dict[str, Any]] | None = [] if size <= KEEP_CHECKED else None
        checker = PointChecker(self.model, self.action, self.base, self.grid.names)
        flats = np.arange(size)
        points, positions = self.grid.points(flats), self.grid.positions(flats)
        for flat, (point, at) in enumerate(zip(points, positions, strict=True)):
            try:
                values = checker.check(point, at)
            except BadInput as exc:
                if not self.grid.dims:
                    raise
                where = ", ".join(f"{k}={v}" for k, v in self.grid.label(flat).items())
                raise BadInput(f"at grid point {where}: {exc}") from None
            if keep is not None:
                keep.append(values)
        self.checked = keep

    def checked_values(self, indices: np.ndarray) -> list[dict[str, Any]] | None:
        """The checked parameter sets of ``indices``, when they were kept."""
        if self.checked is None:
            return None
        return [self.checked[int(i)] for i in indices]

    def cost(self, indices: np.ndarray) -> float:
        """The model's rough amount of work for these points (for ``--dry-run``)."""
        kept = self.checked_values(indices)
        values = kept if kept is not None else (self.values(int(i)) for i in indices)
        return float(sum(self.model.cost(v) for v in values))

    def chunks(self, indices: np.ndarray, chunk_size: int) -> Iterator[np.ndarray]:
        """Cut ``indices`` into chunks of at most ``chunk_size`` batch-compatible points.

        Points share a chunk only when they agree on every non-batchable grid parameter.
        """
        fixed = [k for k, d in enumerate(self.grid.dims) if not self.model.param(d.name).batchable]
        indices = np.asarray(indices, dtype=np.int64)
        groups: dict[tuple[int, ...], list[int]] = {}
        if fixed and indices.size:
            index = np.unravel_index(indices, self.grid.shape)
            keys = zip(*(index[k].tolist() for k in fixed), strict=True)
            for i, key in zip(indices.tolist(), keys, strict=True):
                groups.setdefault(key, []).append(i)
        else:
            groups[()] = indices.tolist()
        for members in groups.values():
            arr = np.asarray(members, dtype=np.int64)
            for start in range(0, arr.size, chunk_size):
                yield arr[start : start + chunk_size]


def parse_assignments(items: Sequence[str], flag: str) -> list[tuple[str, str]]:
    return [split_assignment(item, flag) for item in items]
