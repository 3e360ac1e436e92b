"""The executors a sweep's chunks run on, and the one loop that drives them.

Every backend is a :class:`concurrent.futures.Executor` (:func:`open_route`): the parent
itself (:class:`SerialExecutor`, for ``--jobs 1``), a thread pool, joblib's loky worker
processes, or a Dask cluster (a local one, a running scheduler, or SLURM-started workers
through dask-jobqueue) through ``distributed.Client.get_executor``. One loop
(:func:`bounded`) drives them all with back-pressure: a new chunk is submitted only when the
parent has taken a finished one, so results never pile up in memory however fast the workers
are. Every route computes with one BLAS thread per worker. Which executor computes a chunk
never changes its numbers (docs/engine.md, "Determinism").
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import itertools
import os
import signal
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import (
    FIRST_COMPLETED,
    Executor,
    Future,
    InvalidStateError,
    ThreadPoolExecutor,
    wait,
)
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import BadInput
from ..models.base import Progress
from .chunk import ChunkResult, ChunkTask, compute_chunk, load_native
from .job import SLURM_SCHEDULER, Backend, Job, RunOptions
from .plan import Plan
from .progress import Reporter


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


THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


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
    prologue = [f"export {name}=1" for name in THREAD_VARIABLES]
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
        from threadpoolctl import threadpool_limits

        load_native(job.model)
        with threadpool_limits(limits=1), ThreadPoolExecutor(max_workers=workers) as pool:
            yield Route(pool, job.base, ahead=2 * workers, in_process=True)
        return
    # The workers' environment: one BLAS thread, and where the models live. A reused pool
    # whose workers were started with another RICHLAZY_MODELS or PYTHONPATH (an earlier
    # sweep of this process) would not find this sweep's model: loky restarts the pool
    # when `env` changes.
    from joblib.externals.loky import get_reusable_executor  # a run on one worker needs none

    env = {name: "1" for name in THREAD_VARIABLES}
    env.update({name: os.environ.get(name, "") for name in ("RICHLAZY_MODELS", "PYTHONPATH")})
    processes = get_reusable_executor(max_workers=workers, env=env)
    _POOLS.add(processes)
    try:
        yield Route(processes, job.base, ahead=2 * workers, in_process=False)
    except BaseException:  # interrupted, failed fast or failed: stop the workers now
        stop_pool(processes)
        raise


_POOLS: weakref.WeakSet[Any] = weakref.WeakSet()
"""The loky pools this process has computed on (:func:`open_route`); stopped at its exit."""


@atexit.register
def stop_pools() -> None:
    """Stop the loky worker pools of :data:`_POOLS` (an ``atexit`` function).

    loky stops its pool when the interpreter exits normally, from a hook that runs before the
    ``atexit`` functions (``threading._register_atexit``). An interrupted command leaves by
    ``os._exit`` after the ``atexit`` functions alone (cli/app.py, ``_leave``), and there
    multiprocessing's own ``atexit`` function joined the idle workers, which leave only when
    the pool's manager thread answers them or after 30 s: a sweep interrupted once its last
    chunk was computed (SIGTERM while its file is written, a closed stdout met at the closing
    progress line) took 10-40 s to end instead of at once. Registered after
    multiprocessing's function, this one runs before it.
    """
    for pool in list(_POOLS):
        with contextlib.suppress(Exception):
            stop_pool(pool)
        _POOLS.discard(pool)


def stop_pool(pool: Any) -> None:
    """Shut the loky pool down now, its workers killed, and kill those that outlive it.

    ``shutdown(kill_workers=True)`` fails the pool's unfinished futures before it kills the
    workers, and its manager thread stops at the first that :func:`bounded` has cancelled
    (``InvalidStateError``, :func:`_quiet_cancelled_futures`): the workers then stayed until
    their 30-s exit timeout, and the interrupted command's exit waited for them (a sweep piped
    into ``head -1`` took 40-50 s instead of 7 s on 2 loaded cores). The workers it started
    are killed here when the shutdown has left them running.
    """
    workers = list(getattr(pool, "_processes", {}).values())  # loky's own table of them
    with _quiet_cancelled_futures():
        pool.shutdown(wait=True, kill_workers=True)
    for worker in workers:
        if worker.is_alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, signal.SIGKILL)
            worker.join()


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
    """One task per chunk, with the points prepared up front (:meth:`.job.Job.build`, once per
    case): in this process the complete parameter sets; to other processes each point's grid
    and derived values (the shared parameters travel once). Only where no cases are kept (a
    grid of more than :data:`.job.KEEP_CASES` cases) does a worker prepare its points, once
    per case of its chunk."""
    name, action = job.model.name, job.action
    for c in chunks:
        if in_process:
            checked = job.checked_values(c)
            if checked is not None:
                yield ChunkTask(name, action, c, checked, checked=True)
                continue
        else:
            prepared = job.prepared_points(c)
            if prepared is not None:
                yield ChunkTask(name, action, c, prepared, prepared=True)
                continue
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
