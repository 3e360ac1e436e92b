"""How large a sweep's result will be, known before anything is allocated or computed.

A result holds, per point, the model's outputs plus the bookkeeping (``status``, 1 byte;
``elapsed``, 8 bytes; in a shard file the point's grid index, 8 bytes). A model that declares
the bytes of its outputs per configuration (``output_bytes`` of :meth:`.Model.footprint`,
from the parameters that set their shapes: output times, dimensions, widths) gives the estimate from
the specs alone: the sum over the run's points, computed once per distinct case of the grid
(:func:`.validate.case_sum`), so a 10⁶-point grid costs what its few cases cost. A model that
declares nothing is measured on the first computed point instead (the dry run's probe, or a
run's first chunk, before the grid's arrays are allocated).

The estimate is compared with a limit, :data:`DEFAULT_MAX_BYTES` unless ``--max-bytes`` (or
``max_bytes`` in a job file's ``[run]`` table) sets another, and a result above it is
refused with one line (exit 2) before anything is written. A result must also fit in the
memory available (``MemAvailable``, or less under ``ulimit -v``), where it is assembled;
shards (``--shard K/N``) hold a share each. The working memory of one configuration that
every model declares (``working_bytes`` of :meth:`.Model.footprint`) is checked too: the result
plus one configuration's working memory per worker must fit (:func:`check_memory`), so that a run
too large for the machine is one line before it starts, naming the parameter to change
(:func:`working_lever`), not a MemoryError or the kernel's OOM killer hours later.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import BadInput
from ..userfiles import available_memory
from .sizes import DEFAULT_MAX_BYTES, human, parse_bytes, size_problem  # noqa: F401
from .validate import CaseTree, TooManyCases

BOOKKEEPING_BYTES = 1 + 8
"""``status`` (int8) and ``elapsed`` (float64) per point."""
SHARD_INDEX_BYTES = 8
"""A shard file's ``point`` coordinate (the flat grid index, int64) per point."""
CASE_LIMIT = 10_000
"""Past this many distinct cases, :func:`case_sum` samples the points instead."""
SAMPLE = 2_000
"""Points evaluated when :func:`case_sum` samples."""

@dataclass(frozen=True)
class OutputSize:
    """An estimate of a result's bytes (uncompressed, as held in memory)."""

    total: float
    points: int
    source: str
    """``declared`` (by the model, from the parameters), ``probe`` (measured on the dry
    run's probe, a shortened configuration: a lower bound where the probe has fewer output
    times) or ``first chunk``."""

    @property
    def per_point(self) -> float:
        return self.total / max(self.points, 1)

    def describe(self) -> str:
        return (f"≈ {human(self.total)} uncompressed ({self.points:,} points x "
                f"{human(self.per_point)}, {self.source})")

    def check(self, limit: int, memory: int | None = None) -> None:
        """BadInput when the estimate exceeds ``limit`` or the physical ``memory``."""
        what = (f"the result would take about {human(self.total)} ({self.points:,} points x "
                f"{human(self.per_point)}, {self.source})")
        if self.total > limit:
            raise BadInput(
                f"{what}, more than the limit of {human(limit)}; raise it with --max-bytes "
                "(or max_bytes in [run]), or split the grid into shards (--shard K/N)"
            )
        memory = available_memory() if memory is None else memory
        if memory and self.total > memory:
            raise BadInput(
                f"{what} in memory, more than the {human(memory)} available; "
                "split the grid into shards (--shard K/N) or sweeps"
            )


def physical_memory() -> int:
    """Bytes of physical memory (0 when unknown)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


def declared_working(job: Any) -> tuple[float, int] | None:
    """The largest working memory of one configuration over the grid (declared by the model,
    ``working_bytes`` of :meth:`.Model.footprint`) and a point where it is reached, or None
    when the model declares none."""

    def run(values: Any) -> float:
        declared = job.footprint_of(values).working_bytes
        if declared is None:
            raise _Undeclared
        return -float(declared)

    try:
        _, at = case_sum(job, None, run)  # the smallest negative: the largest working memory
    except _Undeclared:
        return None
    return float(job.model.footprint(job.action, job.values(at)).working_bytes), at


def check_memory(job: Any, result: OutputSize | None, workers: int,
                 memory: int | None = None) -> None:
    """BadInput when the result plus ``workers`` times the model's declared working memory
    of one configuration exceed the memory available (:func:`.userfiles.available_memory`,
    or ``memory``)."""
    working = declared_working(job)
    if working is None:
        return
    per_worker, at = working
    total = (result.total if result is not None else 0.0) + workers * per_worker
    memory = available_memory() if memory is None else memory
    if memory and total > memory:
        where = (", ".join(f"{k}={v}" for k, v in job.grid.label(at).items())
                 if job.grid.dims else "the configuration")
        lever = working_lever(job.model, job.action, job.values(at))
        change = "use smaller sizes"
        if lever is not None:
            now = lever[1] if isinstance(lever[1], int | np.integer) else f"{lever[1]:g}"
            change = (f"use a smaller {lever[0]} (now {now}; the working memory grows most "
                      "with it)")
        raise BadInput(
            f"the run needs about {human(total)} of memory ({human(per_worker)} working memory "
            f"per configuration, declared by model {job.model.name} for {where}, x {workers} "
            f"worker(s), plus the result), more than the {human(memory)} available; "
            f"{change}, fewer workers (--jobs), or a machine with more memory"
        )


def working_lever(model: Any, action: str, values: Mapping[str, Any]
                  ) -> tuple[str, float] | None:
    """The numeric parameter of ``values`` whose halving lowers the working memory that
    ``model`` declares the most, with its value, or None where halving none lowers it: the
    parameter a refusal names for the user to change. Only the declared formula is
    evaluated (once per integer parameter of 2 or more and per positive real one), nothing
    is allocated."""
    base = model.footprint(action, values).working_bytes
    best: tuple[float, str, float] | None = None
    for name, value in values.items():
        if isinstance(value, bool | np.bool_):
            continue
        if isinstance(value, int | np.integer):
            if value < 2:
                continue
            half: float = int(value) // 2
        elif isinstance(value, float | np.floating) and math.isfinite(value) and value > 0:
            half = float(value) / 2
        else:
            continue
        try:
            halved = model.footprint(action, {**values, name: half}).working_bytes
        except (ValueError, ArithmeticError, KeyError, TypeError, BadInput):
            continue
        if base is None or halved is None:
            continue
        gain = float(base) - float(halved)
        if gain > 0 and (best is None or gain > best[0]):
            best = (gain, name, value)
    return None if best is None else (best[1], best[2])


def overhead(sharded: bool) -> int:
    """Bookkeeping bytes per point besides the model's outputs."""
    return BOOKKEEPING_BYTES + (SHARD_INDEX_BYTES if sharded else 0)


def case_sum(job: Any, points: np.ndarray | None, run: Any) -> tuple[float, int]:
    """The sum of ``run(values)`` over some points of the grid, and the point where it is
    smallest, without building the points' values.

    ``points`` is a boolean mask over the grid's flat indices, or sorted flat indices, or None
    for every point. ``run`` receives a point's values before the model's preparation
    (:meth:`.job.Job.footprint_of` completes them) and returns a number. It is evaluated once per
    distinct case of the grid (:class:`.validate.CaseTree`), weighted by the points in the
    case. Past :data:`CASE_LIMIT` cases, the mean over :data:`SAMPLE` evenly spaced points,
    times their number, is the sum (and the smallest is among them).
    """
    shape = job.grid.shape
    size = max(job.grid.size, 1)
    mask: np.ndarray | None = None
    if points is not None:
        points = np.asarray(points)
        if points.dtype != bool:
            flags = np.zeros(size, dtype=bool)
            flags[points] = True
            points = flags
        mask = points.reshape(shape)
    total = 0.0
    best: list[Any] = [math.inf, -1]

    def visit(fixed: dict[int, int], first: tuple[int, ...], value: Any) -> None:
        nonlocal total
        if isinstance(value, BaseException):
            raise value
        box = tuple(fixed.get(k, slice(None)) for k in range(len(shape)))
        free = [k for k in range(len(shape)) if k not in fixed]
        if mask is None:
            count, local = math.prod(shape[k] for k in free), (0,) * len(free)
        else:
            inside = mask[box]
            count = int(np.count_nonzero(inside))
            if not count:
                return
            local = tuple(int(i) for i in np.unravel_index(int(np.argmax(inside)),
                                                           np.shape(inside)))
        total += float(value) * count
        if value < best[0]:
            at = list(first)
            for k, i in zip(free, local, strict=True):
                at[k] = int(i)
            best[:] = [float(value), int(np.ravel_multi_index(at, shape)) if shape else 0]

    try:
        CaseTree(job.grid, job.base, run, visit, limit=CASE_LIMIT, keep=False)
        return total, max(best[1], 0)
    except TooManyCases:
        pass
    flat = np.arange(size) if mask is None else np.flatnonzero(mask)
    picks = np.unique(np.linspace(0, flat.size - 1, min(flat.size, SAMPLE)).astype(int))
    sample = flat[picks]
    values = np.array([run(_values(job, int(i))) for i in sample], dtype=float)
    return float(values.mean()) * flat.size, int(sample[int(np.argmin(values))])


def _values(job: Any, flat: int) -> dict[str, Any]:
    values = dict(job.base)
    values.update(job.grid.point(flat))
    return values


def declared_size(job: Any, shard: Any) -> OutputSize | None:
    """The result's size (the points of ``shard``, or the whole grid) from the model's
    declared outputs, or None when it declares none."""
    size = max(job.grid.size, 1)
    indices = None if shard is None else shard.select(size)
    points = size if indices is None else int(indices.size)
    extra = overhead(shard is not None)

    def run(values: Any) -> float:
        declared = job.footprint_of(values).output_bytes
        if declared is None:
            raise _Undeclared
        return float(declared) + extra

    try:
        total, _ = case_sum(job, indices, run)
    except _Undeclared:  # a configuration the model does not declare
        return None
    return OutputSize(total, points, "declared by the model")


class _Undeclared(Exception):
    """A configuration whose outputs' size the model does not declare."""
