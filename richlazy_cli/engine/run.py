"""Running a job: chunking, dispatch over joblib (loky, threads, dask), parts, resume, shards.

The grid's pending points are cut into chunks of batch-compatible points (equal non-batchable
parameters), each chunk one vectorised model call (:func:`chunk.compute_chunk`) with one BLAS
thread. Worker processes (joblib's loky executor) or threads compute the chunks with back-
pressure (a new chunk is submitted only when the parent has taken a finished one), and Dask
clusters run them through joblib's dask backend; the parent writes each to the parts folder at
once (on a background thread, overlapping the next chunk), then assembles the final file
atomically and removes the folder. Determinism does not depend on any of this: a point's
numbers depend only on its parameters (models draw random numbers from its ``seed``), so the
data are bitwise identical for any worker count, chunk size, backend, shard split or resume.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import math
import os
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from joblib import Parallel, delayed, parallel_config
from joblib.externals.loky import get_reusable_executor
from threadpoolctl import threadpool_limits

from ..models.params import BadInput, jsonable
from .assemble import Assembler
from .chunk import ChunkResult, compute_chunk, load_native
from .grid import Shard
from .job import Job
from .lock import output_lock  # store safety hook
from .output import previous_status, stamp_manifest, start_point  # store safety hook
from .parts import PartsFolder, parts_path
from .progress import Reporter
from .store import provenance

BACKENDS = ("loky", "threads", "dask")
MAX_AUTO_CHUNK = 256
"""Largest automatic chunk with worker processes: bounds the results in flight to the parent."""
MAX_AUTO_CHUNK_IN_PROCESS = 4096
"""Largest automatic chunk when the parent computes (--jobs 1): nothing is in flight."""


@dataclass
class RunOptions:
    jobs: int | None = None
    backend: str = "loky"
    scheduler: str | None = None
    worker_timeout: float = 60.0
    chunk_size: int | None = None
    shard: Shard | None = None
    resume: bool = False
    retry_failed: bool = False
    fail_fast: bool = False
    force: bool = False
    dry_run: bool = False
    quiet: bool = False
    use_parts: bool = True


@dataclass
class RunOutcome:
    path: Path | None
    exit_code: int
    failures: list[dict[str, Any]] = field(default_factory=list)
    message: str = ""
    plan: dict[str, Any] = field(default_factory=dict)


def release_freed_arrays() -> None:
    """Ask glibc to serve every allocation above 128 KiB by ``mmap``.

    By default glibc raises that threshold after large blocks are freed, so the chunk results
    the parent receives and drops come to live in its heap, which never shrinks: over a long
    sweep the parent's memory creeps up by several chunks. A fixed threshold returns each
    dropped chunk to the system at once. Elsewhere than glibc this does nothing.

    Only a parent that leaves the computing to other processes sets it: in a process that
    computes, it makes every large temporary of the model fresh pages again, which doubled
    the time of ``single-neuron``'s exact solution in ``bench/sweep_engine.py``.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    m_mmap_threshold = -3
    libc.mallopt(m_mmap_threshold, 128 * 1024)


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def auto_chunk_size(pending: int, workers: int) -> int:
    """About four chunks per worker, so that work balances and progress moves."""
    cap = MAX_AUTO_CHUNK_IN_PROCESS if workers == 1 else MAX_AUTO_CHUNK
    return max(1, min(cap, math.ceil(pending / (4 * max(workers, 1)))))


def manifest(job: Job, shard: Shard | None) -> dict[str, Any]:
    return {
        "model": job.model.name,
        "action": job.action,
        "params": jsonable(job.recorded),
        "grid": job.grid.specs(),
        "shard": str(shard) if shard else None,
    }


# -- dispatch -------------------------------------------------------------------------------
@contextlib.contextmanager
def dask_client(scheduler: str | None, jobs: int, timeout: float) -> Iterator[Any]:
    """A dask.distributed client: a LocalCluster (``local``) or a running scheduler."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise BadInput(
            "--backend dask needs the 'dask' extra: pip install 'richlazy[dask]'"
        ) from None
    address = scheduler or "local"
    cluster = None
    try:
        if address == "local":
            cluster = LocalCluster(
                n_workers=jobs,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
            )
            client = Client(cluster)
        else:
            client = Client(address, timeout=f"{timeout}s")
    except (OSError, TimeoutError) as exc:
        raise BadInput(
            f"cannot reach the Dask scheduler at {address} within {timeout:g} s "
            f"({type(exc).__name__})"
        ) from None
    try:
        try:
            client.wait_for_workers(1, timeout=timeout)
        except TimeoutError:
            raise BadInput(
                f"no Dask workers joined the scheduler at {address} within {timeout:g} s "
                "(see --worker-timeout)"
            ) from None
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def dispatch(job: Job, chunks: list[np.ndarray], opts: RunOptions) -> Iterator[ChunkResult]:
    """Compute chunks on the chosen backend, yielding results as they finish."""
    base = job.base
    args = (job.model.name, job.action)
    jobs = opts.jobs or default_jobs()
    if opts.backend == "loky" and (jobs == 1 or len(chunks) == 1):
        for c in chunks:
            checked = job.checked_values(c)
            if checked is not None:
                yield compute_chunk(*args, base, checked, c, checked=True)
            else:
                yield compute_chunk(*args, base, job.grid.points(c), c, job.grid.positions(c))
        return
    job.checked = None  # workers check their own points: free the up-front copies
    if opts.backend != "threads":
        release_freed_arrays()  # the parent only collects results: give them back when dropped
    if opts.backend == "dask":
        tasks = (
            delayed(compute_chunk)(*args, base, job.grid.points(c), c, job.grid.positions(c))
            for c in chunks
        )
        with dask_client(opts.scheduler, jobs, opts.worker_timeout):
            # `scatter` ships the shared parameters (which may hold data matrices) once per
            # worker instead of once per task.
            with parallel_config(
                backend="dask", scatter=[base], wait_for_workers_timeout=opts.worker_timeout
            ):
                yield from Parallel(n_jobs=-1, return_as="generator_unordered")(tasks)
        return
    if opts.backend == "threads":
        # Threads share one process: hold BLAS at one thread for the whole run, so that no
        # worker leaving its own limit can hand another worker two BLAS threads mid-chunk;
        # the model's lazily loaded libraries first, so that the limit covers them too.
        load_native(job.model)
        with threadpool_limits(limits=1), ThreadPoolExecutor(max_workers=jobs) as executor:
            yield from bounded(executor, job, chunks, 2 * jobs)
        return
    one_thread = {name: "1" for name in _THREAD_VARIABLES}
    executor = get_reusable_executor(max_workers=jobs, env=one_thread)
    try:
        yield from bounded(executor, job, chunks, 2 * jobs)
    except BaseException:  # interrupted, failed fast or failed: stop the workers now
        executor.shutdown(wait=False, kill_workers=True)
        raise


_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def bounded(
    executor: Executor, job: Job, chunks: list[np.ndarray], ahead: int
) -> Iterator[ChunkResult]:
    """Run chunks on ``executor`` with at most ``ahead`` of them submitted and unconsumed.

    Back-pressure: a chunk is submitted only when the parent has taken a finished one, so
    results never pile up in the parent when workers outpace it (joblib's ``Parallel``
    dispatches on completion and would buffer them without bound).
    """
    args = (job.model.name, job.action, job.base)
    todo = iter(chunks)
    pending: set[Future[Any]] = set()

    def submit(count: int) -> None:
        for c in itertools.islice(todo, count):
            points, positions = job.grid.points(c), job.grid.positions(c)
            pending.add(executor.submit(compute_chunk, *args, points, c, positions))

    submit(ahead)
    try:
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                pending.discard(future)
                result = future.result()
                submit(1)
                yield result
    finally:
        for future in pending:
            future.cancel()


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

    def __init__(self, assembler: Assembler, folder: PartsFolder | None) -> None:
        self.assembler = assembler
        self.folder = folder
        self.pool: ThreadPoolExecutor | None = ThreadPoolExecutor(max_workers=1)
        self.pending: Future[Any] | None = None

    def _take(self, result: ChunkResult) -> None:
        self.assembler.add(result)  # BadInput when results cannot form one grid
        if self.folder is not None:
            self.folder.write(result)

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


def plan(job: Job, opts: RunOptions, status: np.ndarray | None) -> dict[str, Any]:
    size = max(job.grid.size, 1)
    indices = opts.shard.select(size) if opts.shard else np.arange(size)
    if status is None:
        pending = indices
    else:
        todo = status[indices] < 0
        if opts.retry_failed:
            todo |= status[indices] > 0
        pending = indices[todo]
    workers = opts.jobs or default_jobs()
    chunk_size = opts.chunk_size or auto_chunk_size(len(pending), workers)
    chunks = list(job.chunks(pending, chunk_size))
    return {
        "points": size,
        "selected": len(indices),
        "pending": len(pending),
        "chunks": chunks,
        "chunk_size": chunk_size,
        "workers": workers,
    }


def execute(job: Job, out: Path, opts: RunOptions, command: list[str]) -> RunOutcome:
    """Run ``job`` into ``out``. Raises BadInput for bad options; returns the outcome."""
    if opts.backend not in BACKENDS:
        raise BadInput(f"--backend {opts.backend!r}: use one of {', '.join(BACKENDS)}")
    if opts.retry_failed and not opts.resume:
        raise BadInput("--retry-failed needs --resume")
    out = Path(out)
    man = manifest(job, opts.shard)
    stamp_manifest(man, job)  # store safety hook: input files' SHA-256 and sweep fingerprint
    size = max(job.grid.size, 1)
    if opts.dry_run:
        status = previous_status(out, man, size) if opts.resume else None
        the_plan = plan(job, opts, status)
        chunks = the_plan["chunks"]
        the_plan["work"] = job.cost(np.concatenate(chunks)) if chunks else 0.0
        return RunOutcome(None, 0, plan=the_plan)
    # -- store safety hook: one writer per output for the whole run (engine/lock.py) --
    with output_lock(out):
        return _execute_locked(job, out, opts, command, man, size)


def _execute_locked(
    job: Job, out: Path, opts: RunOptions, command: list[str], man: dict[str, Any], size: int
) -> RunOutcome:
    """The run itself, holding the output's lock."""
    # -- store safety hook: debris, --force/--resume checks, idempotent resume (output.py) --
    start = start_point(job, out, opts, man, command)
    if start.nothing_to_do:
        return RunOutcome(None, 0, message=f"{out}: complete, nothing to do")
    folder = start.folder
    # -- end of hook --
    status = folder.status(size) if folder is not None and opts.resume else None
    the_plan = plan(job, opts, status)
    chunks = the_plan["chunks"]
    assembler = Assembler(job.model, job.grid)
    if folder is not None:
        for chunk in folder.read():
            assembler.add(chunk)
    interrupted = False
    stopped_early = False
    label = f"{job.model.name} {job.action}"
    collector = Collector(assembler, folder)
    with Reporter(the_plan["pending"], label, quiet=opts.quiet) as reporter:
        results = dispatch(job, chunks, opts)
        try:
            for result in results:
                collector.add(result)
                reporter.advance(len(result.indices))
                if opts.fail_fast and np.any(result.status > 0):
                    stopped_early = True
                    break
            collector.finish()  # the last chunk's errors surface here
        except KeyboardInterrupt:
            interrupted = True
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
    if interrupted:
        kept = int(np.sum(assembler.status >= 0))
        return RunOutcome(
            None,
            130,
            failures,
            f"interrupted: {kept} of {size} points kept in {parts_path(out)}; "
            "rerun with --resume to finish",
        )
    attrs = provenance(job.model.name, job.action, job.recorded, job.grid.specs(), command)
    attrs = start.attrs(attrs)  # store safety hook: original provenance, history, inputs
    if opts.shard:
        attrs["shard"] = str(opts.shard)
    ds = assembler.dataset(attrs)
    start.finish(ds)  # store safety hook: inputs unchanged, final write, atomic parts removal
    if stopped_early:
        return RunOutcome(out, 1, failures, "stopped at the first failure (--fail-fast)")
    return RunOutcome(out, 1 if failures else 0, failures)
