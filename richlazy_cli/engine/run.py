"""Running a job: planning, one executor loop over every backend, parts, resume, shards.

The grid's pending points are cut into chunks of batch-compatible points (equal non-batchable
parameters), each chunk one vectorised model call (:func:`.chunk.compute_chunk` on a
:class:`.chunk.ChunkTask`) with one BLAS thread. Every backend is a
:class:`concurrent.futures.Executor` (:func:`open_route`): the parent itself
(:class:`SerialExecutor`, for ``--jobs 1``), a thread pool, joblib's loky worker processes, or
a Dask cluster through ``distributed.Client.get_executor``. One loop (:func:`bounded`) drives
them all with back-pressure: a new chunk is submitted only when the parent has taken a
finished one, so results never pile up in memory however fast the workers are. The parent
writes each finished chunk to the parts folder at once (on a background thread, overlapping
the next chunk), then assembles the final file atomically and removes the folder.

Determinism does not depend on any of this: a point's numbers depend only on its parameters
(models draw random numbers from its ``seed``), so the data are bitwise identical for any
worker count, chunk size, backend, shard split or resume. See docs/engine.md.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import itertools
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import (
    FIRST_COMPLETED,
    Executor,
    Future,
    InvalidStateError,
    ThreadPoolExecutor,
    wait,
)
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from joblib.externals.loky import get_reusable_executor
from threadpoolctl import threadpool_limits

from ..errors import BadInput, ExitCode, Status
from ..models.base import Progress
from ..models.params import jsonable
from . import interrupts, startup
from .assemble import Assembler
from .chunk import ChunkResult, ChunkTask, compute_chunk, load_native
from .fingerprint import InputChanged, InputGuard
from .footprint import OutputSize, case_sum, check_memory, declared_size, overhead
from .grid import Shard
from .job import SLURM_SCHEDULER, Backend, Job, RunOptions
from .lock import output_lock
from .output import (
    ContinueMode,
    continue_mode,
    is_complete,
    previous_status,
    stamp_manifest,
    start_point,
)
from .parts import PartsFolder, parts_path
from .progress import Reporter
from .store import provenance

__all__ = ["Backend", "Plan", "RunOptions", "RunOutcome", "execute"]

BACKENDS = tuple(b.value for b in Backend)
MAX_AUTO_CHUNK = 256
"""Largest automatic chunk with worker processes: bounds the results in flight to the parent."""
MAX_AUTO_CHUNK_IN_PROCESS = 4096
"""Largest automatic chunk when the parent computes (--jobs 1): nothing is in flight."""


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
    can use at once (one per GPU on a GPU backend, :meth:`Model.max_workers`)."""
    device_limit: int | None = None
    """The model's limit on workers, when it has one."""

    @property
    def capped(self) -> bool:
        return self.workers < self.jobs

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
    """The fixed costs, measured (:mod:`.startup`): the command's own start, its final write,
    and, for the short runs whose wall time they would dominate, its worker processes' start
    (0 when not measured)."""

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
"""Runs estimated below this many seconds also get their worker pool's start measured."""


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


def manifest(job: Job, shard: Shard | None) -> dict[str, Any]:
    return {
        "model": job.model.name,
        "action": job.action,
        "params": jsonable(job.recorded),
        "grid": job.grid.specs(),
        "shard": str(shard) if shard else None,
    }


# -- executors ------------------------------------------------------------------------------
class SerialExecutor(Executor):
    """Computes each task in the calling thread, when it is submitted (``--jobs 1``)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:  # handed to whoever takes the result, as a pool would
            future.set_exception(exc)
        return future


@dataclass(frozen=True)
class Route:
    """An executor and how to feed it."""

    executor: Executor
    shared: Any
    """The parameters every chunk shares: the dict itself, or its copy on a Dask cluster."""
    ahead: int
    """Chunks submitted and not yet taken, at most."""
    in_process: bool
    """Whether chunks are computed in this process (progress callbacks can reach the bar)."""


_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def slurm_cluster(jobs: int, options: dict[str, Any]) -> Any:
    """A dask-jobqueue ``SLURMCluster`` scaled to ``jobs`` Dask workers (``--scheduler slurm``).

    Each worker job runs ``options["processes"]`` single-threaded worker processes (threads per
    worker = cores / processes, forced to one so that every worker computes one chunk with one
    BLAS thread, as on every other route). The worker jobs inherit this environment (SLURM's
    default ``--export=ALL``), so they find this Python and ``RICHLAZY_MODELS``; their BLAS
    thread variables are set to 1 in the job script. Their logs go to ``logs/`` unless
    ``log_directory`` says otherwise.
    """
    try:
        from dask_jobqueue import SLURMCluster
    except ImportError:
        raise BadInput(
            "--scheduler slurm needs dask-jobqueue: pip install 'richlazy[dask]'"
        ) from None
    kwargs = dict(options)
    processes = int(kwargs.get("processes", 1))
    kwargs["cores"] = processes  # one thread per worker process
    kwargs["job_cpu"] = int(options.get("cores", processes))
    prologue = [f"export {name}=1" for name in _THREAD_VARIABLES]
    kwargs["job_script_prologue"] = [*prologue, *kwargs.get("job_script_prologue", [])]
    kwargs.setdefault("log_directory", "logs")  # the worker jobs' logs, as the array's
    try:
        cluster = SLURMCluster(**kwargs)
    except (TypeError, ValueError) as exc:
        raise BadInput(f"[run.cluster]: {exc}") from None
    cluster.scale(n=jobs)
    return cluster


@contextlib.contextmanager
def dask_client(scheduler: str | None, jobs: int, timeout: float,
                cluster_options: dict[str, Any] | None = None) -> Iterator[Any]:
    """A dask.distributed client: a LocalCluster (``local``), SLURM-started workers
    (``slurm``, :func:`slurm_cluster`) or a running scheduler."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise BadInput(
            "--backend dask needs the 'dask' extra: pip install 'richlazy[dask]'"
        ) from None
    address = scheduler or "local"
    cluster = None
    try:
        if address == SLURM_SCHEDULER:
            cluster = slurm_cluster(jobs, cluster_options or {})
            client = Client(cluster)
        elif address == "local":
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


@contextlib.contextmanager
def open_route(job: Job, opts: RunOptions, workers: int) -> Iterator[Route]:
    """The executor of ``opts.backend`` with ``workers`` workers, shut down on leaving.

    Every route computes with one BLAS thread per worker: worker processes start with the
    thread variables at 1 (and :func:`.chunk.compute_chunk` holds the limit), threads share
    one process, which holds BLAS at one thread for the whole run.
    """
    if opts.backend != Backend.DASK and workers == 1:
        yield Route(SerialExecutor(), job.base, ahead=1, in_process=True)
        return
    if opts.backend != Backend.THREADS:
        release_freed_arrays()  # the parent only collects results: give them back when dropped
    if opts.backend == Backend.DASK:
        with dask_client(opts.scheduler, workers, opts.worker_timeout, opts.cluster) as client:
            # the shared parameters (which may hold data matrices) go to each worker once,
            # not once per task; `[base]`, since scattering a dict scatters its values
            [shared] = client.scatter([job.base], broadcast=True)
            running = max(1, len(client.scheduler_info().get("workers", {})))
            executor = client.get_executor(pure=False)
            yield Route(executor, shared, ahead=2 * running, in_process=False)
        return
    if opts.backend == Backend.THREADS:
        # Threads share one process: hold BLAS at one thread for the whole run, so that no
        # worker leaving its own limit can hand another worker two BLAS threads mid-chunk;
        # the model's lazily loaded libraries first, so that the limit covers them too.
        load_native(job.model)
        with threadpool_limits(limits=1), ThreadPoolExecutor(max_workers=workers) as pool:
            yield Route(pool, job.base, ahead=2 * workers, in_process=True)
        return
    # The workers' environment: one BLAS thread, and where the models live. A reused pool
    # whose workers were started with another RICHLAZY_MODELS or PYTHONPATH (an earlier
    # sweep of this process) would not find this sweep's model: loky restarts the pool
    # when `env` changes.
    env = {name: "1" for name in _THREAD_VARIABLES}
    env.update({name: os.environ.get(name, "") for name in ("RICHLAZY_MODELS", "PYTHONPATH")})
    processes = get_reusable_executor(max_workers=workers, env=env)
    try:
        yield Route(processes, job.base, ahead=2 * workers, in_process=False)
    except BaseException:  # interrupted, failed fast or failed: stop the workers now
        with _quiet_cancelled_futures():
            processes.shutdown(wait=True, kill_workers=True)
        raise


@contextlib.contextmanager
def _quiet_cancelled_futures() -> Iterator[None]:
    """Silence loky's manager thread while it shuts down a pool whose futures were cancelled.

    Shutting a loky pool down marks its unfinished futures failed; one the parent has just
    cancelled (:func:`bounded` cancels what it leaves behind) raises ``InvalidStateError``
    in that thread, and Python prints the thread's traceback on stderr: noise after an
    interruption that is otherwise reported in one line. Other threads' errors still show.
    """
    previous = threading.excepthook

    def hook(args: Any) -> None:
        if not (args.exc_type is InvalidStateError and args.thread is not None
                and args.thread.name == "ExecutorManagerThread"):
            previous(args)

    threading.excepthook = hook
    try:
        yield
    finally:
        threading.excepthook = previous


def chunk_tasks(job: Job, chunks: Iterable[np.ndarray], in_process: bool) -> Iterator[ChunkTask]:
    """One task per chunk; in this process, with the parameter sets checked up front."""
    name, action = job.model.name, job.action
    for c in chunks:
        checked = job.checked_values(c) if in_process else None
        if checked is not None:
            yield ChunkTask(name, action, c, checked, checked=True)
        else:
            yield ChunkTask(name, action, c, job.grid.points(c), job.grid.positions(c))


def bounded(
    route: Route,
    tasks: Iterator[ChunkTask],
    progress: Callable[[ChunkTask], Progress | None] | None = None,
) -> Iterator[ChunkResult]:
    """Run ``tasks`` on the route's executor, at most ``route.ahead`` submitted and untaken.

    Back-pressure: a chunk is submitted only when the parent has taken a finished one, so
    results never pile up in the parent when workers outpace it. Results come in the order
    they finish. ``progress(task)`` gives the callback a chunk computed in this process
    reports its progress to.
    """
    pending: set[Future[ChunkResult]] = set()

    def submit(count: int) -> None:
        for task in itertools.islice(tasks, count):
            callback = progress(task) if progress is not None and route.in_process else None
            pending.add(route.executor.submit(compute_chunk, task, route.shared, callback))

    submit(route.ahead)
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


def dispatch(
    job: Job, plan: Plan, opts: RunOptions, reporter: Reporter | None = None
) -> Iterator[ChunkResult]:
    """Compute the plan's chunks on the chosen backend, yielding results as they finish."""
    progress = None
    if reporter is not None:
        progress = lambda task: reporter.chunk_progress(int(task.indices[0]), len(task.indices))  # noqa: E731
    with open_route(job, opts, plan.workers) as route:
        yield from bounded(route, chunk_tasks(job, plan.chunks, route.in_process), progress)


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
    limit = job.model.max_workers(job.recorded)
    jobs = opts.jobs or (min(default_jobs(), limit) if limit else default_jobs())
    chunk_size = opts.chunk_size or auto_chunk_size(len(pending), min(jobs, limit or jobs))
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


PROBE_REPEAT_BELOW = 60.0
"""A probe faster than this many seconds runs twice and the second time counts: the first
call pays one-off costs (imports, numba compiling its kernels, torch's first dispatch), which
a sweep pays once per worker, not per point. The difference is reported as the compilation
time. A slower probe runs once (its one-off costs are then a small part of it)."""
PROBE_CHUNK = 16
"""The most points of the first chunk that the dry run's second probe computes together, so
that a model that vectorises a chunk is timed vectorised, as the sweep will run it."""


def pending_cost(job: Job, pending: np.ndarray | None,
                 costliest: list[Any] | None = None) -> tuple[float, int]:
    """The model's total cost of the ``pending`` points (a mask over the grid, or None for
    all), and the cheapest of them, once per distinct case (:func:`.footprint.case_sum`).
    A ``costliest`` list is set to ``[cost, values]`` of the costliest case (its values as
    given, before the check)."""

    def run(values: Any) -> float:
        raw = dict(values) if costliest is not None else None
        job.model.check(job.action, values)
        cost = float(job.model.cost(values))
        if costliest is not None and (not costliest or cost > costliest[0]):
            costliest[:] = [cost, raw]
        return cost

    return case_sum(job, pending, run)


def probe_of(job: Job, flat: int) -> dict[str, Any]:
    """The shortened configuration (:meth:`.Model.probe`) of grid point ``flat``, checked.

    The probe shortens the point's values as given, before the model's check fills in what it
    derives (a check need not accept its own output a second time: single-neuron's alpha and s
    become a0 and w0); a probe that needs derived values gets the checked ones.
    """
    raw = dict(job.base)
    raw.update(job.grid.point(flat))
    try:
        values = job.model.probe(raw)
        job.model.check(job.action, values)
    except (KeyError, TypeError, ValueError):  # BadInput is a ValueError
        values = job.model.probe(job.values(flat))
        job.model.check(job.action, values)
    return values


def estimate(job: Job, plan: Plan) -> Estimate | None:
    """Estimate the wall time of ``plan`` from timed probes and the model's cost.

    The cheapest pending point (by :meth:`.Model.cost`, :func:`pending_cost`), shortened by
    :meth:`.Model.probe` (fewer steps, a shorter horizon), is computed here, alone; its time,
    scaled by the total cost over its cost and divided by the workers' speed-up, is the
    computation. The first chunk's points computed together, or else the costliest point
    (:func:`_fit_two_points`), split off a set-up that the cost does not scale. The measured
    fixed costs of :mod:`.startup` are added (docs/estimates.md, "What the estimate counts").
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
    total, cheapest = pending_cost(job, pending, costliest)
    probe_values = probe_of(job, cheapest)
    probe_cost = job.model.cost(probe_values)
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
    compile_seconds = max(0.0, timings[0] - timings[-1]) if len(timings) > 1 else 0.0
    scale = total / probe_cost if probe_cost > 0 else float(plan.pending)
    per_cost = probe / probe_cost if probe_cost > 0 else probe
    per_chunk = 0.0  # seconds a chunk costs whatever its points and length (its set-up)
    chunk_points = 1
    first = [int(i) for i in plan.chunks[0][:PROBE_CHUNK]]
    if len(first) > 1 and len(timings) > 1 and plan.chunk_size > 1:
        # the first chunk's points, shortened, computed together as the sweep computes them
        values = [probe_of(job, i) for i in first]
        costs = sum(float(job.model.cost(v)) for v in values)
        if costs > 0:
            together = ChunkTask(job.model.name, job.action, np.array(first), values,
                                 checked=True)
            start = time.perf_counter()
            compute_chunk(together, job.base)
            elapsed = time.perf_counter() - start
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
    seconds = (per_cost * total + per_chunk * len(plan.chunks) + per_point * plan.pending
               if probe_cost > 0 else probe * scale)
    probe_bytes = 0.0
    if result.data is not None:
        probe_bytes = float(sum(item.nbytes for item in result.data.data_vars.values()))
    speedup = share.speedup(plan.workers)  # W workers on the cores that are free now
    seconds /= speedup
    # the fixed costs (engine/startup.py): the command's own start, its final write, and
    # for short runs, where they are a good part of the wall time, its workers' start
    fixed = command + startup.final_write(job, result)
    if seconds < STARTUP_BELOW and plan.workers > 1:  # a pool of W, started and timed
        fixed += startup.pool_startup(job.model.name, plan.workers)
    return Estimate(seconds, probe, chunk_points, plan.workers, probe_bytes, compile_seconds,
                    fixed)


def _fit_two_points(job: Job, probe: float, probe_cost: float, costliest: list[Any]
                    ) -> tuple[float, float] | None:
    """(seconds per point, seconds per unit of cost) fitted through the cheapest point's probe
    and the costliest's (shortened by the model's probe, timed once), or None where their
    costs are too close to tell the two apart, the second probe would take over a minute, or
    the fit is not positive."""
    try:
        values = job.model.probe(dict(costliest[1]))
        job.model.check(job.action, values)
    except (KeyError, TypeError, ValueError):
        return None
    cost = float(job.model.cost(values))
    if not cost > 2 * probe_cost or probe / probe_cost * cost > PROBE_REPEAT_BELOW:
        return None
    task = ChunkTask(job.model.name, job.action, np.array([0]), [values], checked=True)
    start = time.perf_counter()
    compute_chunk(task, job.base)
    elapsed = time.perf_counter() - start
    per_cost = (elapsed - probe) / (cost - probe_cost)
    per_point = probe - per_cost * probe_cost
    return (per_point, per_cost) if per_cost > 0 and per_point >= 0 else None


def _workers(job: Job, opts: RunOptions, size: int) -> int:
    """The workers a run of this shard will start at most (as :func:`make_plan` counts)."""
    selected = len(opts.shard.select(size)) if opts.shard else size
    limit = job.model.max_workers(job.recorded)
    jobs = opts.jobs or (min(default_jobs(), limit) if limit else default_jobs())
    return max(1, min(jobs, selected, limit or jobs))


def _interrupted(exc: KeyboardInterrupt) -> str:
    """The signal that stopped the run: SIGTERM when the CLI's handler says so, else SIGINT."""
    return str(exc) if str(exc).startswith("SIG") else "SIGINT"


def execute(job: Job, out: Path, opts: RunOptions, command: list[str]) -> RunOutcome:
    """Run ``job`` into ``out``. Raises BadInput for bad options; returns the outcome.

    The flow: check the options; plan (a dry run stops here, with an estimate); open the
    parts folder (:func:`_starting_point`) and read back what an earlier run finished;
    compute the pending chunks (:func:`dispatch`), each taken by a :class:`Collector` into
    the assembler and the parts folder; assemble and write the result atomically; remove
    the parts folder. An interruption (SIGINT, or SIGTERM through the CLI) at any point
    before the result is written keeps the parts folder for ``--resume``.
    """
    if opts.backend not in BACKENDS:
        raise BadInput(f"--backend {opts.backend!r}: use one of {', '.join(BACKENDS)}")
    if opts.retry_failed and not (opts.resume or opts.continue_):
        raise BadInput("--retry-failed needs --resume or --continue")
    if opts.continue_ and opts.resume:
        raise BadInput("--continue already resumes: give --continue or --resume, not both")
    out = Path(out)
    man = manifest(job, opts.shard)
    stamp_manifest(man, job)  # input files' SHA-256 and the sweep's fingerprint
    size = max(job.grid.size, 1)
    # the result's size from the model's declared outputs, before anything is allocated
    output_size = declared_size(job, opts.shard)
    if output_size is not None:
        output_size.check(opts.max_bytes)
    # with the working memory the model declares, per worker, against the memory available
    check_memory(job, output_size, _workers(job, opts, size))
    if opts.dry_run:
        status = previous_status(out, man, size) if opts.resume else None
        if opts.continue_:
            with contextlib.suppress(BadInput):  # nothing yet (or another sweep's): all
                status = previous_status(out, man, size)
        the_plan = make_plan(job, opts, status)
        guess = estimate(job, the_plan)
        if output_size is None and guess is not None and guess.probe_bytes:
            per_point = guess.probe_bytes + overhead(opts.shard is not None)
            output_size = OutputSize(per_point * the_plan.selected, the_plan.selected,
                                     "measured on the probe")
            output_size.check(opts.max_bytes)  # a shortened probe only underestimates
        return RunOutcome(None, ExitCode.OK, plan=the_plan, estimate=guess,
                          output_size=output_size)
    if (opts.resume or opts.continue_) and opts.use_parts and is_complete(
        out, man, _selected(opts, size), size, opts.retry_failed
    ):  # before the lock: a finished output is done even where no lock file can be made
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
