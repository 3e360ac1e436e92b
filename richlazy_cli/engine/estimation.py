"""A dry run's estimate of the wall time (``sweep --dry-run``; docs/estimates.md).

The cheapest pending point by the model's cost (:meth:`.Model.footprint`, summed once per
distinct case of the grid), shortened by its probe, is computed here and timed; its time,
scaled by the total cost over the probe's and divided among the workers, is the estimate,
plus the measured start-up of the command and its workers and the one-off compilation.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from .chunk import ChunkTask, compute_chunk
from .footprint import case_sum
from .job import Job
from .plan import Plan


@dataclass(frozen=True)
class Estimate:
    """A dry run's estimate of the wall time, from the model's cost and a timed probe."""

    seconds: float
    probe_seconds: float
    probe_points: int
    workers: int
    probe_bytes: float = 0.0
    """Bytes of the probe's outputs (one point, a shortened configuration)."""
    compile_seconds: float = 0.0
    """One-off time of the first call (numba compilation, imports), excluded from
    ``seconds``: each worker pays it once."""
    startup_seconds: float = 0.0
    """Starting up: an interpreter importing the engine and the model, measured, once for the
    command itself and once more for its worker processes when it has some (for the short runs
    whose wall time it would dominate; 0 when not measured)."""

    @property
    def wall_seconds(self) -> float:
        """The run's expected wall time: the computation, plus starting the workers and their
        one-off compilation (paid in parallel, once per worker)."""
        return self.seconds + self.compile_seconds + self.startup_seconds

    def describe(self) -> str:
        s = self.seconds
        points = f"{self.probe_points} point{'s' if self.probe_points != 1 else ''}"
        once = self.compile_seconds + self.startup_seconds
        extra = (f"; plus ≈ {_when(once)} to start up and compile"
                 if once >= 0.5 else "")
        return (
            f"≈ {_when(s)} on {self.workers} worker{'s' if self.workers != 1 else ''} "
            f"(probe of {points}: {self.probe_seconds:.2g} s, scaled by the model's cost"
            f"{extra})"
        )


def _when(s: float) -> str:
    return (f"{s:.2g} s" if s < 90 else f"{s / 60:.2g} min" if s < 5400
            else f"{s / 3600:.2g} h" if s < 172800 else f"{s / 86400:.3g} days")


STARTUP_BELOW = 600.0
"""Runs estimated below this many seconds also get their start-up measured."""


def worker_startup(model: str) -> float:
    """Seconds for a fresh interpreter to import the engine and ``model``'s module, as a loky
    or Dask worker does before its first chunk."""
    import subprocess
    import sys

    code = ("import richlazy_cli.engine.chunk as c; from richlazy_cli.models.base import "
            f"get_model; get_model({model!r})")
    start = time.perf_counter()
    try:
        subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120,
                       check=False)
    except (OSError, subprocess.SubprocessError):
        return 0.0
    return time.perf_counter() - start


PROBE_REPEAT_BELOW = 60.0
"""A probe faster than this many seconds runs twice and the second time counts: the first
call pays one-off costs (imports, numba compiling its kernels, torch's first dispatch), which
a sweep pays once per worker, not per point. The difference is reported as the compilation
time. A slower probe runs once (its one-off costs are then a small part of it)."""
PROBE_CHUNK = 16
"""The most points of the first chunk that the dry run's second probe computes together, so
that a model that vectorises a chunk is timed vectorised, as the sweep will run it."""


def pending_cost(job: Job, pending: np.ndarray | None) -> tuple[float, int]:
    """The model's total cost of the ``pending`` points (a mask over the grid, or None for
    all), and the cheapest of them, once per distinct case (:func:`.footprint.case_sum`)."""

    def run(values: Any) -> float:
        return float(job.footprint_of(values).cost)

    return case_sum(job, pending, run)


def probe_of(job: Job, flat: int) -> dict[str, Any]:
    """The shortened configuration (the ``probe`` of :meth:`.Model.footprint`) of grid point
    ``flat``, checked: the probe shortens the prepared values (lengths only, so what was
    derived still holds) and the model's check, a pure verdict, passes on it."""
    prepared = job.values(flat)
    values = job.model.footprint(job.action, prepared).probe
    if values is None:  # none declared: the configuration itself
        return prepared
    job.model.check(job.action, values)
    return values


def estimate(job: Job, plan: Plan) -> Estimate | None:
    """Estimate the wall time of ``plan`` from one timed point and the model's cost.

    The cheapest pending point (by the model's cost, :func:`pending_cost`), shortened by its
    probe (fewer steps, a shorter horizon; both from :meth:`.Model.footprint`), is computed
    here, alone; its time, scaled by the total cost over its cost and divided among the
    workers, is the estimate. Chunks vectorise several points per call, so a run is usually
    faster than this.
    """
    if not plan.chunks:
        return None
    pending = None  # every point: no mask needed
    if plan.pending < plan.points:
        pending = np.zeros(max(job.grid.size, 1), dtype=bool)
        for chunk in plan.chunks:
            pending[chunk] = True
    total, cheapest = pending_cost(job, pending)
    probe_values = probe_of(job, cheapest)
    probe_cost = job.model.footprint(job.action, probe_values).cost
    task = ChunkTask(
        job.model.name, job.action, np.array([cheapest]), [probe_values], checked=True,
    )
    timings: list[float] = []
    while len(timings) < 2:
        start = time.perf_counter()
        result = compute_chunk(task, job.base)
        timings.append(time.perf_counter() - start)
        if timings[0] >= PROBE_REPEAT_BELOW:
            break
    probe = timings[-1]
    compile_seconds = max(0.0, timings[0] - timings[-1]) if len(timings) > 1 else 0.0
    scale = total / probe_cost if probe_cost > 0 else float(plan.pending)
    per_cost = probe / probe_cost if probe_cost > 0 else probe
    chunk_points = 1
    first = [int(i) for i in plan.chunks[0][:PROBE_CHUNK]]
    if len(first) > 1 and len(timings) > 1 and plan.chunk_size > 1:
        # the first chunk's points, shortened, computed together as the sweep computes them
        values = [probe_of(job, i) for i in first]
        costs = sum(float(job.model.footprint(job.action, v).cost) for v in values)
        if costs > 0:
            together = ChunkTask(job.model.name, job.action, np.array(first), values,
                                 checked=True)
            start = time.perf_counter()
            compute_chunk(together, job.base)
            elapsed = time.perf_counter() - start
            if elapsed < probe * len(first):  # vectorised: cheaper per point than alone
                per_cost, chunk_points, probe = elapsed / costs, len(first), elapsed
    seconds = per_cost * total if probe_cost > 0 else probe * scale
    probe_bytes = 0.0
    if result.data is not None:
        probe_bytes = float(sum(item.nbytes for item in result.data.data_vars.values()))
    seconds /= plan.workers
    startup = 0.0
    if seconds < STARTUP_BELOW:  # short runs: starting up is a good part of the wall time
        # the command's own start, and (in parallel) its worker processes' (loky, Dask)
        startup = worker_startup(job.model.name) * (2 if plan.workers > 1 else 1)
    return Estimate(seconds, probe, chunk_points, plan.workers, probe_bytes, compile_seconds,
                    startup)
