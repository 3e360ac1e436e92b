"""The measured fixed costs and the CPU share that a dry run's estimate adds to its probe.

A sweep's wall time is its computation (the probe's time scaled by the model's cost,
:func:`.run.estimate`) spread over the workers, plus costs that do not scale with the points
(docs/estimates.md, "What the estimate counts"). Each is measured in the dry run itself:

* **the command's own start**: the interpreter starting, importing the CLI, the engine and the
  model, reading the job and planning; a dry run pays exactly this before it probes, so it is
  this process's age when the estimate begins (:func:`command_startup`), or, where the dry run
  does not run as the ``richlazy`` command (the Python API in a long-lived notebook), a fresh
  interpreter timed importing the CLI and the model;
* **the workers' start**: a pool of ``W`` loky worker processes started as the sweep starts
  it, each importing the engine, the model and its native libraries, timed until every worker
  has answered (:func:`pool_startup`; for runs estimated under 10 minutes, whose wall time it
  would be a good part of);
* **the final write**: assembling the result and writing it atomically (the CF layer's labels,
  HDF5, fsync), priced by the result's bytes (:func:`final_write`): a fixed cost
  (:data:`WRITE_SECONDS`: importing the writing stack, forking the writer, creating, reading
  back and syncing the file) plus the bytes at :data:`WRITE_BYTES_PER_SECOND`, both measured
  once by ``bench/final_write.py`` with :func:`time_final_write` (which the bench prints beside
  them), on a loaded machine divided by the share of a core the probe got (below). A dry run
  does not write: timing a write there would import the writing stack
  (h5netcdf, h5py, the CF layer's labels) and cost as much as the rest of a one-point dry run
  (docs/estimates.md, "What the estimate counts");
* **the CPU share** (:class:`CpuShare`): on a machine other processes also load, the probe got
  only part of a core, and ``W`` workers get less than ``W`` times the probe's share. From the
  fraction ``s`` of its wall time the probe did not spend waiting for a CPU (the kernel's
  scheduler statistics) and the machine's idle fraction during the probe (``/proc/stat``), the other
  processes' demand ``L`` is inferred (``L = C / s - 1`` when no
  core was idle, under fair sharing of the ``C`` cores; else the busy cores besides the
  probe), and ``W`` workers are expected to run ``min(W, C W / (L + W)) / s`` times as fast
  as the probe. Where the kernel groups processes by session (``sched_autogroup``), it
  shares the cores fairly among the groups, not the processes: the sweep's workers, started
  from the command, are one group with it, and together get what the probe got plus the
  idle cores, ``min(W, s + C i) / s`` (:func:`autogroups`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

IDLE_FREE = 0.05
"""An idle fraction of the cores below this is a saturated machine (every core busy)."""


def process_age() -> float | None:
    """Seconds since this process started (Linux ``/proc``), or None where unknown."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: start time, ticks
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(0.0, uptime - started)


def _is_command() -> bool:
    """Whether this process is the ``richlazy`` command (not a notebook calling the API)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    name = getattr(spec, "name", "") or ""
    return name.startswith("richlazy_cli") or Path(sys.argv[0] or "").name == "richlazy"


def command_startup(model: str) -> float:
    """Seconds the command takes before it computes: this process's age when it is the
    ``richlazy`` command, else a fresh interpreter importing the CLI and ``model``."""
    age = process_age() if _is_command() else None
    if age is not None:
        return age
    code = ("import richlazy_cli.cli.app; from richlazy_cli.models.base import get_model; "
            f"get_model({model!r})")
    start = time.perf_counter()
    try:
        subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120,
                       check=False)
    except (OSError, subprocess.SubprocessError):
        return 0.0
    return time.perf_counter() - start


def _cpu_times() -> tuple[float, float] | None:
    """(idle, total) jiffies of all cores since boot, or None where ``/proc/stat`` is absent."""
    try:
        line = Path("/proc/stat").read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    values = [float(v) for v in line.split()[1:]]
    if len(values) < 5:
        return None
    return values[3] + values[4], sum(values[:8])  # idle + iowait, of user..steal


def _sched() -> tuple[float, float]:
    """(seconds on a CPU, seconds runnable but waiting for one) of this process's main thread
    since it started (``/proc/self/schedstat``); where absent, its CPU time and, as if it
    never waited, 0."""
    try:
        ran, waited = Path("/proc/self/schedstat").read_text().split()[:2]
        return int(ran) / 1e9, int(waited) / 1e9
    except (OSError, ValueError):
        return time.process_time(), 0.0


def autogroups() -> bool:
    """Whether the kernel shares the cores among session groups (``sched_autogroup``: each
    session's processes together get one fair share, whatever their number or ``nice``)."""
    try:
        return Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() == "1"
    except OSError:
        return False


def cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


@dataclass
class CpuShare:
    """The CPU share the code in its ``with`` block got, and the machine's idle fraction.

    ``share`` is the fraction of the wall time the main thread did not spend waiting for a
    CPU while runnable (``/proc/self/schedstat``): 1 on a free core, whatever the code does
    (a probe that sleeps, reads or waits for a GPU is not slowed by other processes);
    ``idle`` the fraction of all cores idle meanwhile (``/proc/stat``); both None
    until the block ends or where unmeasured."""

    share: float | None = None
    idle: float | None = None
    _start: tuple[float, tuple[float, float], tuple[float, float] | None] | None = None

    def __enter__(self) -> CpuShare:
        self._start = (time.perf_counter(), _sched(), _cpu_times())
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._start is None:
            return
        wall0, sched0, stat0 = self._start
        wall = time.perf_counter() - wall0
        if wall <= 0.05:  # too short to say anything: as if alone on a core
            return
        waited = _sched()[1] - sched0[1]
        self.share = min(1.0, max(0.05, 1.0 - waited / wall))
        stat1 = _cpu_times()
        if stat0 is not None and stat1 is not None and stat1[1] > stat0[1]:
            self.idle = (stat1[0] - stat0[0]) / (stat1[1] - stat0[1])

    def others(self) -> float:
        """The other processes' demand for cores, in cores (0 when unmeasured)."""
        if self.share is None or self.idle is None:
            return 0.0
        c = cores()
        if self.idle < IDLE_FREE:  # saturated: the probe got its fair share C / (L + 1)
            return max(0.0, c / self.share - 1.0)
        return max(0.0, c * (1.0 - self.idle) - self.share)

    def speedup(self, workers: int) -> float:
        """How many times the probe's speed ``workers`` worker processes run together."""
        if self.share is None:
            return float(workers)
        c = cores()
        if autogroups() and self.idle is not None:
            # one group with the probe: what it got, plus the cores left idle
            together = min(float(workers), self.share + c * self.idle)
        else:
            together = min(float(workers), c * workers / (self.others() + workers))
        return max(1e-3, together / self.share)


WRITE_SECONDS = 0.50
"""The final write's fixed cost, in seconds: importing what writes the file (the CF layer's
labels, h5netcdf and h5py in the forked writer; neither building a model's Dataset nor the
write imports Dask while no Dask array exists, numerics/duck_arrays.py), assembling,
forking the writer, creating the file, its checksums read back, fsync and the atomic rename.
Measured by ``bench/final_write.py`` (:func:`time_final_write` on a one-point single-neuron
result in a fresh interpreter): its CPU time, the process's and its writer's, which other
processes' load stretches least, and about the fastest wall time of its runs."""
WRITE_BYTES_PER_SECOND = 60e6
"""The result's uncompressed bytes the final write takes per second beyond
:data:`WRITE_SECONDS` (zlib level 1 after shuffling for the large floating-point variables,
``engine/store.py``'s ``COMPRESSION``, and the checksums read back). Measured by
``bench/final_write.py``: the slope between a one-point and a 500-point single-neuron result's
:func:`time_final_write` (19 MB)."""


def final_write(nbytes: float, share: float | None = None) -> float:
    """Seconds the run's final write takes for a result of ``nbytes`` (uncompressed):
    :data:`WRITE_SECONDS` plus ``nbytes`` at :data:`WRITE_BYTES_PER_SECOND`, on a free core;
    divided by ``share``, the share of a core the probe got (:attr:`CpuShare.share`), on a
    machine other processes load (None: a free core). A price, not a timing: the dry run
    writes nothing and imports nothing that writes."""
    seconds = WRITE_SECONDS + max(0.0, float(nbytes)) / WRITE_BYTES_PER_SECOND
    return seconds / share if share else seconds


def time_final_write(job: Any, result: Any, folder: Path) -> float:
    """Seconds to assemble ``result`` (a :class:`.chunk.ChunkResult` over every point of
    ``job``'s grid) and write it atomically into ``folder``, as the run's last step writes its
    result (the CF layer, its labels, HDF5, fsync): the measurement behind
    :data:`WRITE_SECONDS` and :data:`WRITE_BYTES_PER_SECOND` (``bench/final_write.py``)."""
    from .assemble import Assembler
    from .store import provenance, write_result

    start = time.perf_counter()
    assembler = Assembler(job.model, job.grid)
    assembler.add(result)
    attrs = provenance(job.model.name, job.action, job.recorded, job.grid.specs(),
                       ["richlazy", "bench/final_write.py"])
    write_result(assembler.dataset(attrs), Path(folder) / "result.h5", force=True)
    return time.perf_counter() - start


def _warm(model: str) -> int:
    """A worker's start: the engine, the model and its native libraries imported."""
    from ..models.base import get_model
    from .chunk import load_native

    load_native(get_model(model))
    return os.getpid()


def pool_startup(model: str, workers: int) -> float:
    """Seconds for a pool of ``workers`` loky worker processes to start as a sweep's do (one
    BLAS thread each, the same environment) and import the engine and ``model``: the pool
    is started, timed until every worker has answered, and shut down."""
    from joblib.externals.loky import get_reusable_executor

    from .executors import THREAD_VARIABLES

    env = {name: "1" for name in THREAD_VARIABLES}
    env.update({name: os.environ.get(name, "") for name in ("RICHLAZY_MODELS", "PYTHONPATH")})
    start = time.perf_counter()
    try:
        pool = get_reusable_executor(max_workers=workers, env=env)
        seen: set[int] = set()
        for _ in range(4):  # each round asks every worker; a fast one may answer twice
            seen.update(f.result(timeout=300) for f in
                        [pool.submit(_warm, model) for _ in range(workers)])
            if len(seen) >= workers:
                break
        elapsed = time.perf_counter() - start
        pool.shutdown(wait=True, kill_workers=True)
    except Exception:  # an estimate is a convenience: a pool that cannot start adds 0
        return 0.0
    return elapsed
