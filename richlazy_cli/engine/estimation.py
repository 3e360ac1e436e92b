"""A dry run's estimate of the wall time (``sweep --dry-run``; docs/estimates.md).

The cheapest pending point by the model's cost (:meth:`.Model.footprint`, summed once per
distinct case of the grid), shortened by its probe, is computed here and timed; its time,
scaled by the total cost over the probe's and divided among the workers, is the estimate,
plus the measured start-up of the command and its workers and the one-off compilation.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import startup
from .chunk import ChunkResult, ChunkTask, compute_chunk
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
    """The fixed costs (:mod:`.startup`): the command's own start (measured), its final write
    (priced by the result's bytes), and, for the short runs whose wall time they would
    dominate, its worker processes' start (measured; 0 when not measured)."""
    stops_early: str | None = None
    """Where some pending points may stop before the length their cost counts, at a point
    nothing predicts (:attr:`.Footprint.stops_early`), the model's phrase saying so and how
    it is priced (None: the cost prices every point as it will run)."""
    bound_seconds: float | None = None
    """With :attr:`stops_early`, the computation if no point stopped early (``seconds``
    prices them at their :attr:`.Footprint.stop_share`); None otherwise."""

    @property
    def wall_seconds(self) -> float:
        """The run's expected wall time: the computation, plus starting the workers and their
        one-off compilation (paid in parallel, once per worker)."""
        return self.seconds + self.compile_seconds + self.startup_seconds

    @property
    def bound_wall_seconds(self) -> float | None:
        """The wall time if no point stopped early (None where none may)."""
        if self.bound_seconds is None:
            return None
        return self.bound_seconds + self.compile_seconds + self.startup_seconds

    def summary(self) -> dict[str, Any]:
        """The estimate's terms, as ``--dry-run --json`` and ``richlazy.estimate`` give them
        (seconds; ``stops_early`` and ``bound_wall_seconds`` None where no point may stop
        early at a point nothing predicts)."""
        return {"seconds": self.seconds, "probe_seconds": self.probe_seconds,
                "compile_seconds": self.compile_seconds,
                "startup_seconds": self.startup_seconds, "wall_seconds": self.wall_seconds,
                "probe_points": self.probe_points, "workers": self.workers,
                "stops_early": self.stops_early, "bound_wall_seconds": self.bound_wall_seconds}

    def describe(self) -> str:
        s = self.seconds
        points = f"{self.probe_points} point{'s' if self.probe_points != 1 else ''}"
        once = self.compile_seconds + self.startup_seconds
        extra = (f"; plus ≈ {_when(once)} to start up and compile"
                 if once >= 0.5 else "")
        stops = ""
        if self.stops_early:
            bound = self.bound_seconds if self.bound_seconds is not None else s
            stops = f" ({self.stops_early}; ≤ {_when(bound)} if none stops early)"
        return (
            f"≈ {_when(s)} on {self.workers} "
            f"worker{'s' if self.workers != 1 else ''}{stops} "
            f"(probe of {points}: {self.probe_seconds:.2g} s, scaled by the model's cost"
            f"{extra})"
        )


def _when(s: float) -> str:
    return (f"{s:.2g} s" if s < 90 else f"{s / 60:.2g} min" if s < 5400
            else f"{s / 3600:.2g} h" if s < 172800 else f"{s / 86400:.3g} days")


STARTUP_BELOW = 600.0
"""Runs estimated below this many seconds also get their worker pool's start measured."""


PROBE_REPEAT_BELOW = 60.0
"""A probe faster than this many seconds runs twice and the second time counts: the first
call pays one-off costs (imports, numba compiling its kernels, torch's first dispatch), which
a sweep pays once per worker, not per point. The difference is reported as the compilation
time. A slower probe runs once (its one-off costs are then a small part of it)."""
MAKESPAN_POINTS = 2000
"""Runs of at most this many pending points have their chunks scheduled onto the workers
one by one (:func:`makespan`); larger ones, whose chunks even out, are priced as the total
over the workers."""
PROBE_CHUNK = 16
"""The most points of the first chunk that the dry run's second probe computes together, so
that a model that vectorises a chunk is timed vectorised, as the sweep will run it."""


def pending_cost(job: Job, pending: np.ndarray | None,
                 costliest: list[Any] | None = None,
                 stops: set[str] | None = None, expected: bool = False) -> tuple[float, int]:
    """The model's total cost of the ``pending`` points (a mask over the grid, or None for
    all), and the cheapest of them, once per distinct case (:func:`.footprint.case_sum`).
    A ``costliest`` list is set to ``[cost, values]`` of the costliest case (its values
    prepared); a ``stops`` set gathers the cases' :attr:`.Footprint.stops_early` phrases.
    With ``expected``, a point that may stop early at a point nothing predicts counts its
    :attr:`.Footprint.stop_share` of its cost (:attr:`.Footprint.expected_cost`)."""

    def run(values: Any) -> float:
        footprint = job.footprint_of(values)
        cost = float(footprint.cost)
        if costliest is not None and (not costliest or cost > costliest[0]):
            costliest[:] = [cost, dict(values)]
        if stops is not None and footprint.stops_early:
            stops.add(footprint.stops_early)
        return footprint.expected_cost if expected else cost

    return case_sum(job, pending, run)


def chunk_cost(job: Job, chunk: np.ndarray) -> tuple[float, float]:
    """A chunk's summed cost, whole and expected (:attr:`.Footprint.expected_cost`), its
    points' footprints read once."""
    whole = expected = 0.0
    for i in chunk:
        footprint = job.model.footprint(job.action, job.values(int(i)))
        whole += float(footprint.cost)
        expected += footprint.expected_cost
    return whole, expected


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


def done_cost(job: Job, values: dict[str, Any], result: ChunkResult, cost: float) -> float:
    """The cost of the work a probe did: what the model counts in its result where it
    declares how (a private ``_result_cost(values, data)``, e.g. an adaptive solver's
    evaluations, which its ``cost`` can only predict), else the predicted ``cost``. Pricing
    the probe by its own count leaves the step-count model to predict the run alone."""
    counted = getattr(job.model, "_result_cost", None)
    if counted is None or result.data is None:
        return cost
    done = counted(values, result.data)
    return float(done) if done is not None and done > 0 else cost


def estimate(job: Job, plan: Plan, output_bytes: float | None = None) -> Estimate | None:
    """Estimate the wall time of ``plan`` from timed probes and the model's cost.

    The cheapest pending point (by the model's cost, :func:`pending_cost`), shortened by its
    probe (fewer steps, a shorter horizon; both from :meth:`.Model.footprint`), is computed
    here, alone; its time, scaled by the total cost over its cost and divided by the workers'
    speed-up, is the computation. The first chunk's points computed together, or else the
    costliest point (:func:`_fit_two_points`), split off a set-up that the cost does not
    scale. The fixed costs of :mod:`.startup` are added: the command's start, measured; the
    final write, priced by the result's bytes (``output_bytes``, uncompressed; where None, the
    probe's bytes per point times the selected points) at the share of a core the probe got;
    the workers' start, measured for short runs (docs/estimates.md, "What the estimate counts").
    """
    if not plan.chunks:
        return None
    pending = None  # every point: no mask needed
    if plan.pending < plan.points:
        pending = np.zeros(max(job.grid.size, 1), dtype=bool)
        for chunk in plan.chunks:
            pending[chunk] = True
    command = startup.command_startup(job.model.name)  # before the probe: what a run pays too
    costliest: list[Any] = []
    stops: set[str] = set()  # the early stops nothing predicts, priced at their stop_share
    total, cheapest = pending_cost(job, pending, costliest, stops)
    probe_values = probe_of(job, cheapest)
    probe_cost = job.model.footprint(job.action, probe_values).cost
    task = ChunkTask(
        job.model.name, job.action, np.array([cheapest]), [probe_values], checked=True,
    )
    timings: list[float] = []
    share = startup.CpuShare()  # the share of a core the probe gets on this machine now
    with share:
        while len(timings) < 2:
            start = time.perf_counter()
            result = compute_chunk(task, job.base)
            timings.append(time.perf_counter() - start)
            if timings[0] >= PROBE_REPEAT_BELOW:
                break
    probe = timings[-1]
    probe_cost = done_cost(job, probe_values, result, probe_cost)
    compile_seconds = max(0.0, timings[0] - timings[-1]) if len(timings) > 1 else 0.0
    scale = total / probe_cost if probe_cost > 0 else float(plan.pending)
    per_cost = probe / probe_cost if probe_cost > 0 else probe
    per_chunk = 0.0  # seconds a chunk costs whatever its points and length (its set-up)
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
            done = compute_chunk(together, job.base)
            elapsed = time.perf_counter() - start
            # a chunk shares its non-batchable values (the sizes a counted cost reads)
            costs = done_cost(job, values[0], done, costs)
            if elapsed < probe * len(first):  # vectorised: cheaper per point than alone
                per_cost, chunk_points = elapsed / costs, len(first)
                # one point alone and the chunk together share a set-up that the model's cost
                # does not scale (data, initial kernels): the two times split it off
                marginal = (elapsed - probe) / (costs - probe_cost) if costs > probe_cost else 0
                if 0 < marginal < per_cost:
                    per_cost, per_chunk = marginal, probe - marginal * probe_cost
                probe = elapsed
    per_point = 0.0  # seconds a point costs whatever its cost (its set-up)
    if chunk_points == 1 and len(timings) > 1 and costliest and plan.pending > 1:
        # the costliest point too, shortened: a point's time is a set-up plus its cost's
        # share, and probing the cheapest alone would scale its set-up by every cost
        fit = _fit_two_points(job, probe, probe_cost, costliest)
        if fit is not None:
            per_point, per_cost = fit
    speedup = share.speedup(plan.workers)  # W workers on the cores that are free now

    scheduled = (probe_cost > 0 and plan.workers > 1 and plan.pending <= MAKESPAN_POINTS)
    # each chunk's (whole, expected) cost, read once for the chunks' schedule (makespan)
    chunk_costs = [chunk_cost(job, chunk) for chunk in plan.chunks] if scheduled else []

    def computation(total: float, expected: bool) -> float:
        """The sweep's computation for a total cost, its points priced at their expected
        cost (their early stops nothing predicts at their stop_share) or at their whole
        cost (none stops early)."""
        if probe_cost <= 0:
            return probe * scale / speedup
        seconds = (per_cost * total + per_chunk * len(plan.chunks)
                   + per_point * plan.pending) / speedup
        if scheduled:
            # each worker runs at speedup / W of the probe's speed; chunks go in order to the
            # first free one, so the uneven costs of a few chunks can outlast the average
            slow = plan.workers / speedup
            chunk_seconds = [
                slow * (per_cost * (cost if expected else whole) + per_chunk
                        + per_point * len(chunk))
                for (whole, cost), chunk in zip(chunk_costs, plan.chunks, strict=True)]
            seconds = max(seconds, makespan(chunk_seconds, plan.workers))
        return seconds

    bound: float | None = None
    if stops:  # priced at their stop_share; the whole cost is the bound beside it
        bound = computation(total, expected=False)
        total = pending_cost(job, pending, expected=True)[0]
    seconds = computation(total, expected=True)
    probe_bytes = 0.0
    if result.data is not None:
        probe_bytes = float(sum(item.nbytes for item in result.data.data_vars.values()))
    # the fixed costs (engine/startup.py): the command's own start, its final write (priced
    # by the result's bytes), and for short runs, where they are a good part of the wall
    # time, its workers' start
    if output_bytes is None:
        output_bytes = probe_bytes * plan.selected
    fixed = command + startup.final_write(output_bytes, share.share)
    if seconds < STARTUP_BELOW and plan.workers > 1:  # a pool of W, started and timed
        fixed += startup.pool_startup(job.model.name, plan.workers)
    return Estimate(seconds, probe, chunk_points, plan.workers, probe_bytes, compile_seconds,
                    fixed, "; ".join(sorted(stops)) or None, bound)


def _fit_two_points(job: Job, probe: float, probe_cost: float, costliest: list[Any]
                    ) -> tuple[float, float] | None:
    """(seconds per point, seconds per unit of cost) fitted through the cheapest point's probe
    and the costliest's (shortened by the model's probe, timed once), or None where their
    costs are too close to tell the two apart, the second probe would take over a minute, or
    the fit is not positive."""
    prepared = dict(costliest[1])
    try:
        values = job.model.footprint(job.action, prepared).probe or prepared
        job.model.check(job.action, values)
    except (KeyError, TypeError, ValueError):
        return None
    cost = float(job.model.footprint(job.action, values).cost)
    if not cost > 2 * probe_cost or probe / probe_cost * cost > PROBE_REPEAT_BELOW:
        return None
    task = ChunkTask(job.model.name, job.action, np.array([0]), [values], checked=True)
    start = time.perf_counter()
    result = compute_chunk(task, job.base)
    elapsed = time.perf_counter() - start
    cost = done_cost(job, values, result, cost)
    return split_setup(probe, probe_cost, elapsed, cost)


def split_setup(small: float, small_cost: float, large: float, large_cost: float
                ) -> tuple[float, float] | None:
    """The line ``seconds = set-up + per_cost × cost`` through two timed probes, as
    ``(set-up, per_cost)``, or None where it is not a valid split (costs not increasing, a
    time per cost that is not positive, a negative set-up)."""
    if not large_cost > small_cost:
        return None
    per_cost = (large - small) / (large_cost - small_cost)
    per_point = small - per_cost * small_cost
    return (per_point, per_cost) if per_cost > 0 and per_point >= 0 else None


def makespan(chunk_seconds: list[float], workers: int) -> float:
    """The wall time of chunks taken in their order, each by the first worker free (how the
    sweep hands out its chunks, docs/engine.md): list scheduling. A costly chunk late in
    the order, or a few costly ones among few chunks, keep one worker busy after the others
    are done, which the total over the workers does not see."""
    free = [0.0] * max(1, workers)
    for seconds in chunk_seconds:
        heapq.heappush(free, heapq.heappop(free) + seconds)
    return max(free)
