"""What a run computes and on how many workers: the pending points of its shard (on resume,
those not done), cut into chunks of batch-compatible points, and the workers that take them
(``--jobs``, capped at the chunks and at the model's limit: one worker per GPU on a device).
On a GPU the automatic chunk is as large as the device's free memory allows
(:func:`device_chunk_size`); on the CPU it depends on the points and workers alone. The plan is
the same for a dry run and a run (docs/engine.md; docs/performance.md, "Chunks on a GPU")."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from ..errors import Status
from ..numerics import compute
from .footprint import declared_size, declared_working
from .job import Job, RunOptions

MAX_AUTO_CHUNK = 256
"""Largest automatic chunk with worker processes: bounds the results in flight to the parent."""
MAX_AUTO_CHUNK_IN_PROCESS = 4096
"""Largest automatic chunk when the parent computes (--jobs 1): nothing is in flight."""
DEVICE_MEMORY_SHARE = 0.8
"""The share of a GPU's free memory that the configurations of one chunk may take (their
declared working and output bytes); the rest is headroom for what a chunk's configurations
share (the data, the library's workspaces, the allocator's cache)."""


@dataclass(frozen=True)
class Plan:
    """What a run will compute: the points, their chunks and the workers that take them."""

    points: int
    """Points of the whole grid (1 for a single run)."""
    selected: int
    """Points of this shard (all of them without --shard)."""
    pending: int
    """Points still to compute (fewer than ``selected`` when resuming)."""
    chunks: list[np.ndarray]
    chunk_size: int
    jobs: int
    """Workers asked for (--jobs, default all cores)."""
    workers: int
    """Workers started: ``jobs``, but never more than there are chunks, nor than the model
    can use at once (one per GPU on a GPU backend: the ``workers`` of :meth:`.Model.footprint`)."""
    device_limit: int | None = None
    """The model's limit on workers, when it has one."""

    @property
    def capped(self) -> bool:
        return self.workers < self.jobs

    def summary(self) -> dict[str, int]:
        """The plan's counts, as ``--json`` and the Python API give them."""
        return {"points": self.points, "selected": self.selected, "pending": self.pending,
                "chunks": len(self.chunks), "chunk_size": self.chunk_size, "jobs": self.jobs,
                "workers": self.workers}

    def note(self) -> str:
        """One line on the workers, saying so when --jobs was capped at the chunk count."""
        n = len(self.chunks)
        text = f"{self.pending} points in {n} chunk{'s' if n != 1 else ''} on {self.workers} "
        text += "worker" + ("s" if self.workers != 1 else "")
        if self.capped:
            if self.device_limit is not None and self.workers == self.device_limit:
                text += f" (--jobs {self.jobs} capped at the {self.device_limit} GPU(s))"
            else:
                text += f" (--jobs {self.jobs} capped at the number of chunks)"
        return text


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def jobs_warning(opts: RunOptions) -> str | None:
    """A warning when ``--jobs`` asks for more local workers than the cores this process may
    use (they would share the cores and every point would take longer), else None."""
    cores = default_jobs()
    if opts.jobs is None or opts.jobs <= cores or opts.scheduler:
        return None
    return (f"--jobs {opts.jobs} is more than the {cores} core(s) here; the workers will "
            "share them (no faster than --jobs " + f"{cores})")


def auto_chunk_size(pending: int, workers: int) -> int:
    """About four chunks per worker, so that work balances and progress moves."""
    cap = MAX_AUTO_CHUNK_IN_PROCESS if workers == 1 else MAX_AUTO_CHUNK
    return max(1, min(cap, math.ceil(pending / (4 * max(workers, 1)))))


def device_chunk_size(job: Job, pending: np.ndarray, workers: int) -> int | None:
    """The automatic chunk on a GPU: as many configurations as fit in
    :data:`DEVICE_MEMORY_SHARE` of the device's free memory
    (:func:`richlazy_cli.numerics.compute.device_free_bytes`), each taking the largest working
    memory the model declares over the grid (``working_bytes`` of :meth:`.Model.footprint`) plus its
    outputs, and no more than one chunk's share of the pending points per worker (one worker
    per GPU), so that one GPU takes a whole job in one chunk where it fits. None where the job
    does not compute on a GPU (a CPU implementation, ``device = cpu``, no GPU present) or the
    model declares no working memory: the chunk is then :func:`auto_chunk_size`'s."""
    if not len(pending):
        return None
    values = job.values(int(pending[0]))
    impl = job.model.implementation(values, job.action)
    if impl is None or not impl.on_devices:
        return None
    free = compute.device_free_bytes(compute.device_of(values))
    if free is None:
        return None
    working = declared_working(job)
    if working is None:
        return None
    output = declared_size(job, None)
    per_point = working[0] + (output.per_point if output is not None else 0.0)
    fit = int(DEVICE_MEMORY_SHARE * free // max(per_point, 1.0))
    return max(1, min(fit, math.ceil(len(pending) / max(workers, 1))))


def make_plan(job: Job, opts: RunOptions, status: np.ndarray | None) -> Plan:
    """The pending points of this run (its shard; on resume, those not done) in chunks."""
    size = max(job.grid.size, 1)
    indices = opts.shard.select(size) if opts.shard else np.arange(size)
    if status is None:
        pending = indices
    else:
        todo = status[indices] == Status.MISSING
        if opts.retry_failed:
            todo |= Status.failed(status[indices])  # type: ignore[operator]
        pending = indices[todo]
    limit = job.workers_limit()
    jobs = opts.jobs or (min(default_jobs(), limit) if limit else default_jobs())
    takers = min(jobs, limit or jobs)
    chunk_size = (opts.chunk_size or device_chunk_size(job, pending, takers)
                  or auto_chunk_size(len(pending), takers))
    chunks = list(job.chunks(pending, chunk_size))
    return Plan(
        points=size,
        selected=len(indices),
        pending=len(pending),
        chunks=chunks,
        chunk_size=chunk_size,
        jobs=jobs,
        workers=max(1, min(jobs, len(chunks), limit or jobs)),
        device_limit=limit,
    )


def workers_for(job: Job, opts: RunOptions, size: int) -> int:
    """The workers a run of this shard will start at most (as :func:`make_plan` counts)."""
    selected = len(opts.shard.select(size)) if opts.shard else size
    limit = job.workers_limit()
    jobs = opts.jobs or (min(default_jobs(), limit) if limit else default_jobs())
    return max(1, min(jobs, selected, limit or jobs))
