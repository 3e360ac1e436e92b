"""The run options and the names the command line offers, declared once and importable
without the numerical libraries: the command line declares its options at start-up
(``richlazy --version``, ``--help`` and tab completion pay for nothing else), and the engine
checks the ``[run]`` table of a job file and the sweep's flags against the same declarations
(:mod:`.job`)."""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .sizes import DEFAULT_MAX_BYTES, human, size_problem

DEFAULT_MAX_POINTS = 10_000_000
"""The largest grid a sweep accepts unless ``--max-points`` says more."""


class Action(enum.StrEnum):
    """What a model run does (``solve`` or ``train``)."""

    SOLVE = "solve"
    """Integrate the gradient flow (exact solutions where they exist)."""
    TRAIN = "train"
    """Train by gradient descent (GD or SGD)."""


SLURM_SCHEDULER = "slurm"
"""``--scheduler slurm``: Dask workers started as SLURM jobs by dask-jobqueue."""


class Backend(enum.StrEnum):
    """Where a sweep's chunks are computed (``--backend``)."""

    LOKY = "loky"
    """joblib's loky worker processes on this machine."""
    THREADS = "threads"
    """Threads of this process, BLAS held at one thread."""
    DASK = "dask"
    """A Dask cluster: a running scheduler, or a local cluster of --jobs processes."""


def _at_least_one(value: Any) -> str | None:
    return None if value >= 1 else "must be at least 1"


def _positive_seconds(value: Any) -> str | None:
    if not math.isfinite(value) or value <= 0:
        return "must be a positive, finite number of seconds"
    return None


SLURM_CLUSTER_KEYS = (
    "cores", "processes", "memory", "walltime", "queue", "account", "job_cpu", "job_mem",
    "job_extra_directives", "job_directives_skip", "job_script_prologue", "worker_extra_args",
    "interface", "scheduler_options", "local_directory", "log_directory", "name", "python",
)
"""The keys of a job file's ``[run.cluster]`` table: keyword arguments of dask-jobqueue's
``SLURMCluster`` (one SLURM job per ``processes`` Dask workers), passed on as they are."""

CLUSTER_DEFAULTS: dict[str, Any] = {"cores": 1, "processes": 1, "memory": "2GB",
                                    "walltime": "01:00:00", "log_directory": "logs"}
"""What ``--scheduler slurm`` asks of SLURM per worker job unless ``[run.cluster]`` says
otherwise: one core and one worker process, 2 GB, one hour, logs in ``logs/``."""


def _cluster(value: Any) -> str | None:
    unknown = sorted(set(value) - set(SLURM_CLUSTER_KEYS))
    if unknown:
        return f"unknown key {unknown[0]!r} (use {', '.join(SLURM_CLUSTER_KEYS)})"
    for key in ("cores", "processes"):
        if key in value and (isinstance(value[key], bool) or not isinstance(value[key], int)
                             or value[key] < 1):
            return f"{key} must be a positive integer"
    return None


def _backend(value: Any) -> str | None:
    return None if value in set(Backend) else f"use one of {', '.join(Backend)}"


@dataclass(frozen=True)
class RunOption:
    """One run option: its ``[run]`` key, command-line flag, accepted type and check."""

    key: str
    flag: str
    kind: type | tuple[type, ...]
    help: str
    check: Callable[[Any], str | None] | None = None

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` (as TOML gives it) has the option's type (no bool for numbers)."""
        if isinstance(value, bool):
            return self.kind is bool
        if self.kind is float:
            return isinstance(value, int | float)
        return isinstance(value, self.kind)

    def problem(self, value: Any) -> str | None:
        if not self.accepts(value):
            return f"expected {_KIND_NAMES[self.kind]}"
        return self.check(value) if self.check is not None else None


_KIND_NAMES: dict[Any, str] = {
    int: "an integer", float: "a number", str: "a string", bool: "true or false",
    (int, str): "a size such as \"20GB\" or a number of bytes",
    dict: "a table",
}

RUN_OPTIONS: dict[str, RunOption] = {
    o.key: o
    for o in (
        RunOption("jobs", "--jobs", int, "Workers (at most one per chunk).",
                  _at_least_one),
        RunOption("backend", "--backend", str, "Where chunks run.", _backend),
        RunOption("scheduler", "--scheduler", str,
                  "Dask scheduler: tcp://HOST:PORT, 'local' or 'slurm' (--jobs SLURM jobs)."),
        RunOption("cluster", "--cluster", dict,
                  "The SLURM worker jobs of --scheduler slurm: a [run.cluster] table of "
                  "dask-jobqueue SLURMCluster arguments (cores, memory, walltime, queue, ...).",
                  _cluster),
        RunOption("worker_timeout", "--worker-timeout", float,
                  "Seconds to wait for the Dask scheduler and its first worker.",
                  _positive_seconds),
        RunOption("chunk_size", "--chunk-size", int,
                  "Points per vectorised call (auto: about four chunks per worker).",
                  _at_least_one),
        RunOption("shard", "--shard", str,
                  "Compute shard K of N (1-based), or 'slurm': this SLURM array task's shard."),
        RunOption("output", "--output", str, "Result file (.h5)."),
        RunOption("fail_fast", "--fail-fast", bool, "Stop at the first failed point."),
        RunOption("max_points", "--max-points", int,
                  f"Largest grid accepted (default {DEFAULT_MAX_POINTS:,}).", _at_least_one),
        RunOption("max_bytes", "--max-bytes", (int, str),
                  f"Largest result accepted, uncompressed: 20GB, 500MiB, or bytes (default "
                  f"{human(DEFAULT_MAX_BYTES)}).", size_problem),
    )
}
"""The run options, declared once: job files' ``[run]`` keys and the sweep's flags."""
RUN_KEYS = set(RUN_OPTIONS)
