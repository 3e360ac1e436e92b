"""Running a job: the plan, the computation, the parts folder, resume, shards, the result.

The grid's pending points are cut into chunks of batch-compatible points (equal non-batchable
parameters; :mod:`.plan`), each chunk one vectorised model call (:func:`.chunk.compute_chunk`
on a :class:`.chunk.ChunkTask`) with one BLAS thread, on the executor of ``--backend``
(:mod:`.executors`: the parent itself, threads, loky processes or a Dask cluster, driven by
one loop with back-pressure). The parent writes each finished chunk to the parts folder at
once (on a background thread, overlapping the next chunk), then assembles the final file
atomically and removes the folder. A dry run stops after the plan, with an estimate
(:mod:`.estimation`). This module is the run itself (:func:`execute`); it also re-exports the
names that callers import from here.

Determinism does not depend on any of this: a point's numbers depend only on its parameters
(models draw random numbers from its ``seed``), so the data are bitwise identical for any
worker count, chunk size, backend, shard split or resume. See docs/engine.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import BadInput, ExitCode, Status
from ..params import jsonable
from . import interrupts
from .assemble import Assembler
from .chunk import ChunkResult
from .estimation import Estimate, estimate, pending_cost, probe_of
from .fingerprint import InputChanged, InputGuard
from .footprint import OutputSize, check_memory, declared_size, overhead
from .grid import Shard
from .job import Backend, Job, RunOptions
from .lock import output_lock
from .output import (
    ContinueMode,
    continue_mode,
    is_complete,
    previous_status,
    remove_debris,
    stamp_manifest,
    start_point,
)
from .parts import PartsFolder, parts_path
from .plan import Plan, auto_chunk_size, default_jobs, jobs_warning, make_plan, workers_for
from .store import provenance

__all__ = ["Backend", "Estimate", "Plan", "RunOptions", "RunOutcome", "auto_chunk_size",
           "default_jobs", "estimate", "execute", "jobs_warning", "make_plan",
           "pending_cost", "probe_of"]

BACKENDS = tuple(b.value for b in Backend)

@dataclass
class RunOutcome:
    path: Path | None
    exit_code: ExitCode
    failures: list[dict[str, Any]] = field(default_factory=list)
    message: str = ""
    plan: Plan | None = None
    estimate: Estimate | None = None
    output_size: OutputSize | None = None
    """The estimated size of the result (a dry run prints it)."""
    counts: dict[str, int] = field(default_factory=dict)
    """Points done, failed, missing and in total (:func:`richlazy_cli.errors.point_counts`)."""
    absent_devices: tuple[str, ...] = ()
    """A dry run's: the devices the job asks for that this machine lacks (no estimate made)."""


def manifest(job: Job, shard: Shard | None) -> dict[str, Any]:
    return {
        "model": job.model.name,
        "action": job.action,
        "params": jsonable(job.recorded),
        "grid": job.grid.specs(),
        "shard": str(shard) if shard else None,
    }


# -- the run --------------------------------------------------------------------------------
class Collector:
    """Takes finished chunks on one background thread: into the assembler, then to disk.

    Copying a chunk into the grid arrays and writing its part (with its fsync) then overlap
    the computation of the next chunk, which matters when the parent computes (``--jobs 1``)
    and the model is cheap. Chunks are taken in the order they finish, one at a time: a call
    to :meth:`add` first waits for the previous chunk (and raises its error, such as the
    assembler's BadInput), and :meth:`finish` waits for the last. A sweep killed meanwhile
    loses at most the chunk being written, which it would have lost anyway.
    """

    def __init__(self, assembler: Assembler, folder: PartsFolder | None,
                 guard: InputGuard | None = None) -> None:
        self.assembler = assembler
        self.folder = folder
        self.guard = guard
        self.pool: ThreadPoolExecutor | None = ThreadPoolExecutor(max_workers=1)
        self.pending: Future[Any] | None = None

    def _take(self, result: ChunkResult) -> None:
        if self.folder is not None and self.guard is not None:
            # the inputs as they were hashed, or no part (InputChanged): docs/engine.md
            self.guard.check(f"the parts written before are kept in {self.folder.path}")
        self.assembler.add(result)  # BadInput when results cannot form one grid
        if self.folder is not None:
            self.folder.write(result)
            interrupts.pause_point("part")

    def add(self, result: ChunkResult) -> None:
        self._wait()
        assert self.pool is not None, "add after finish"
        self.pending = self.pool.submit(self._take, result)

    def _wait(self) -> None:
        if self.pending is not None:
            pending, self.pending = self.pending, None
            pending.result()

    def finish(self) -> None:
        if self.pool is None:
            return
        try:
            self._wait()
        finally:
            self.pool.shutdown(wait=True)
            self.pool = None


def _interrupted(exc: KeyboardInterrupt) -> str:
    """The signal that stopped the run: SIGTERM when the CLI's handler says so, else SIGINT."""
    return str(exc) if str(exc).startswith("SIG") else "SIGINT"


def execute(job: Job, out: Path, opts: RunOptions, command: list[str]) -> RunOutcome:
    """Run ``job`` into ``out``. Raises BadInput for bad options; returns the outcome.

    The flow: check the options; plan (a dry run stops here, with an estimate); open the
    parts folder (:func:`_starting_point`) and read back what an earlier run finished;
    compute the pending chunks (:func:`.executors.dispatch`), each taken by a
    :class:`Collector` into the assembler and the parts folder; assemble and write the result
    atomically; remove the parts folder. An interruption (SIGINT, or SIGTERM through the CLI)
    at any point before the result is written keeps the parts folder for ``--resume``.
    """
    if opts.backend not in BACKENDS:
        raise BadInput(f"--backend {opts.backend!r}: use one of {', '.join(BACKENDS)}")
    if opts.retry_failed and not (opts.resume or opts.continue_):
        raise BadInput("--retry-failed needs --resume or --continue")
    if opts.continue_ and opts.resume:
        raise BadInput("--continue already resumes: give --continue or --resume, not both")
    out = Path(out)
    if opts.shard is not None:  # before any array over the shard's points is built
        opts.shard.check_fits(max(job.grid.size, 1), opts.shard_source)
    man = manifest(job, opts.shard)
    stamp_manifest(man, job)  # input files' SHA-256 and the sweep's fingerprint
    size = max(job.grid.size, 1)
    # the result's size from the model's declared outputs, before anything is allocated
    output_size = declared_size(job, opts.shard)
    if output_size is not None:
        output_size.check(opts.max_bytes)
    # with the working memory the model declares, per worker, against the memory available
    check_memory(job, output_size, workers_for(job, opts, size))
    if opts.dry_run:
        status = previous_status(out, man, size) if opts.resume else None
        if opts.continue_:
            with contextlib.suppress(BadInput):  # nothing yet (or another sweep's): all
                status = previous_status(out, man, size)
        the_plan = make_plan(job, opts, status)
        # the estimate times a probe on the job's device: none where the device is absent
        guess = None if opts.absent_devices else estimate(
            job, the_plan, None if output_size is None else output_size.total)
        if output_size is None and guess is not None and guess.probe_bytes:
            per_point = guess.probe_bytes + overhead(opts.shard is not None)
            output_size = OutputSize(per_point * the_plan.selected, the_plan.selected,
                                     "measured on the probe")
            output_size.check(opts.max_bytes)  # a shortened probe only underestimates
        return RunOutcome(None, ExitCode.OK, plan=the_plan, estimate=guess,
                          output_size=output_size, absent_devices=opts.absent_devices)
    if (opts.resume or opts.continue_) and opts.use_parts and is_complete(
        out, man, _selected(opts, size), size, opts.retry_failed
    ):  # before the lock: a finished output is done even where no lock file can be made
        remove_debris(out)  # a killed run's, when the lock is free
        return _nothing_to_do(out)
    with output_lock(out):  # one writer per output for the whole run (engine/lock.py)
        if opts.continue_:  # decided again under the lock: another run may have moved on
            mode = continue_mode(out, man, _selected(opts, size), size, opts.retry_failed,
                                 opts.force)
            if mode == ContinueMode.COMPLETE:
                return _nothing_to_do(out)
            opts = dataclasses.replace(opts, resume=mode == ContinueMode.RESUME,
                                       force=mode == ContinueMode.REPLACE, continue_=False)
        return _execute_locked(job, out, opts, command, man, size)


def _selected(opts: RunOptions, size: int) -> np.ndarray:
    return opts.shard.select(size) if opts.shard else np.arange(size)


def _nothing_to_do(out: Path) -> RunOutcome:
    return RunOutcome(None, ExitCode.OK, message=f"{out}: complete, nothing to do")


def _execute_locked(
    job: Job, out: Path, opts: RunOptions, command: list[str], man: dict[str, Any], size: int
) -> RunOutcome:
    """The run itself, holding the output's lock."""
    # the executors (loky, psutil) and the progress bar (rich) are the run's alone: a dry run
    # never imports them (tests/cli/test_startup_imports.py)
    from .executors import dispatch
    from .progress import Reporter

    # debris of killed runs, the --force and --resume checks, an idempotent resume (output.py)
    start = start_point(job, out, opts, man, command)
    if start.nothing_to_do:
        return _nothing_to_do(out)
    folder = start.folder
    status = folder.status(size) if folder is not None and opts.resume else None
    the_plan = make_plan(job, opts, status)
    # a shard's result holds only its own points (a shard file, docs/engine.md)
    assembler = Assembler(job.model, job.grid, opts.shard.select(size) if opts.shard else None,
                          max_bytes=opts.max_bytes)
    if folder is not None:
        for chunk in folder.read():
            assembler.add(chunk)
    interrupted: KeyboardInterrupt | None = None
    stopped_early = False
    label = f"{job.model.name} {job.action}"
    collector = Collector(assembler, folder, InputGuard(start.manifest.get("inputs", [])))
    note = the_plan.note() if job.grid.dims else ""
    if opts.shard:  # the first line says which shard this process computes
        source = f" ({opts.shard_source})" if opts.shard_source else ""
        note = f"shard {opts.shard}{source} of {the_plan.points} points: {note}"
    with Reporter(the_plan.pending, label, quiet=opts.quiet, note=note) as reporter:
        results = dispatch(job, the_plan, opts, reporter)
        try:
            for result in results:
                collector.add(result)
                reporter.advance(len(result.indices), key=int(result.indices[0]))
                if opts.fail_fast and np.any(Status.failed(result.status)):
                    stopped_early = True
                    break
            collector.finish()  # the last chunk's errors surface here
        except KeyboardInterrupt as exc:
            interrupted = exc
        except InputChanged:  # the parts computed from the recorded inputs are kept
            collector.finish()
            raise
        except BadInput:  # e.g. a swept parameter changes a model dimension's length
            collector.finish()
            if folder is not None:
                folder.remove()  # this sweep can never be assembled: leave nothing behind
            raise
        finally:
            close = getattr(results, "close", None)
            if close is not None:
                close()
            collector.finish()  # every finished chunk is on disk before anything else happens
    failures = assembler.failures()
    if interrupted is None:
        try:
            attrs = provenance(job.model.name, job.action, job.recorded, job.grid.specs(), command)
            attrs = start.attrs(attrs)  # the original provenance, history, inputs
            if opts.shard:
                attrs["shard"] = str(opts.shard)
            interrupts.pause_point("assemble")
            ds = assembler.dataset(attrs)
            start.finish(ds)  # inputs unchanged, the final write, atomic removal of the parts
        except KeyboardInterrupt as exc:  # while assembling: the parts are still complete
            interrupted = exc
    counts = assembler.counts()
    if interrupted is not None:
        kept = counts["done"] + counts["failed"]
        where = (
            f"{kept} of {size} points kept in {parts_path(out)}; rerun with --resume to finish"
            if folder is not None
            else "nothing written"
        )
        return RunOutcome(
            None,
            ExitCode.INTERRUPTED,
            failures,
            f"interrupted ({_interrupted(interrupted)}): {where}",
            plan=the_plan,
            counts=counts,
        )
    if stopped_early:
        return RunOutcome(
            out, ExitCode.FAILED_POINTS, failures, "stopped at the first failure (--fail-fast)",
            plan=the_plan, counts=counts,
        )
    code = ExitCode.FAILED_POINTS if failures else ExitCode.OK
    return RunOutcome(out, code, failures, plan=the_plan, counts=counts)
