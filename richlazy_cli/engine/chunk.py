"""Computing one chunk of grid points: one vectorised model call, with failures isolated.

:func:`compute_chunk` is the function the workers run, on a :class:`ChunkTask`. It receives
plain parameter dicts (no large per-point arrays), calls the model once on the whole chunk with
one BLAS thread, and, if that call raises, retries the points one by one so that a single bad
point cannot sink its neighbours.
A point whose model output holds non-finite numbers (outside variables whose ``nan_meaning``
attribute says what NaN means there) is marked diverged.
"""

from __future__ import annotations

import time
import traceback
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr
from threadpoolctl import ThreadpoolController

from ..errors import Status
from ..models.base import Batch, Model, Progress, get_model
from .validate import PointChecker


@dataclass
class ChunkResult:
    """The outcome of one chunk: data over ``point`` for every index, status and timing."""

    indices: np.ndarray  # flat grid indices, one per point
    data: xr.Dataset | None  # model variables over (point, ...); None when every point failed
    status: np.ndarray  # int8 per point
    elapsed: np.ndarray  # seconds per point (the chunk's wall time shared equally)
    errors: dict[int, str] = field(default_factory=dict)  # flat index -> message


_controller: ThreadpoolController | None = None
_native_loaded: set[str] = set()


def load_native(model_cls: type[Model]) -> None:
    """Load ``model_cls``'s lazily loaded native libraries (:meth:`.Model.load_native`) once
    per process, so that BLAS limits made afterwards cover them."""
    global _controller
    if model_cls.name not in _native_loaded:
        model_cls.load_native()
        _native_loaded.add(model_cls.name)
        _controller = None  # it may have loaded another BLAS: scan again


def one_blas_thread(model_cls: type[Model]) -> AbstractContextManager[object]:
    """A context holding BLAS/OpenMP at one thread, for computing with ``model_cls``.

    The controller (which scans the loaded libraries, a few milliseconds) is made once per
    process, and again after a model has loaded native libraries of its own.
    """
    global _controller
    load_native(model_cls)
    if _controller is None:
        _controller = ThreadpoolController()
    return _controller.limit(limits=1)


def _message(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _fill_value(dtype: np.dtype) -> Any:
    if np.issubdtype(dtype, np.floating) or np.issubdtype(dtype, np.complexfloating):
        return np.nan
    if np.issubdtype(dtype, np.bool_):
        return False
    if np.issubdtype(dtype, np.integer):
        return -1
    return ""


def stack_points(parts: list[tuple[int, xr.Dataset]], size: int) -> xr.Dataset:
    """Datasets of single points (at positions ``i``) into one over ``point`` of ``size``.

    Positions without a dataset are filled with NaN (or -1, False, "").
    """
    template = parts[0][1]
    data_vars = {}
    for name, item in template.data_vars.items():
        shape = (size, *item.shape[1:])
        out = np.full(shape, _fill_value(item.dtype), dtype=item.dtype)
        for i, ds in parts:
            out[i] = ds[name].values[0]
        data_vars[name] = xr.Variable(item.dims, out, item.attrs)
    return xr.Dataset(data_vars, coords=template.coords, attrs=template.attrs)


def _non_finite(data: xr.Dataset) -> dict[int, str]:
    """Points (positions) with non-finite values, and the first variable that has them."""
    bad: dict[int, str] = {}
    for name, item in data.data_vars.items():
        if "nan_meaning" in item.attrs or not np.issubdtype(item.dtype, np.inexact):
            continue
        values = item.values.reshape(item.shape[0], -1)
        # a row's sum is non-finite when any of its values is (or when finite values overflow
        # it, which the exact test of the suspects then clears): one pass, no boolean copy
        with np.errstate(over="ignore", invalid="ignore"):
            suspects = np.flatnonzero(~np.isfinite(values.sum(axis=1)))
        for i in suspects.tolist():
            if not np.isfinite(values[i]).all():
                bad.setdefault(i, str(name))
    return bad


@dataclass(frozen=True)
class ChunkTask:
    """One chunk to compute: which model and action, and its points.

    ``points`` hold each point's grid values and ``positions`` its index along each grid
    dimension, with which the model's check runs once per distinct case in the chunk
    (:class:`.validate.PointChecker`). When ``checked``, ``points`` are already complete,
    checked parameter sets (the in-process route reuses the validation done up front) and
    ``positions`` is not used. When ``prepared``, ``points`` hold each point's grid values and
    the values its case derived up front (:meth:`.job.Job.prepared_points`), to overlay on the
    shared parameters without preparing anything again (the worker processes' route). The
    parameters shared by every point travel separately (see :func:`compute_chunk`), so that a
    Dask cluster can receive them once.
    """

    model: str
    action: str
    indices: np.ndarray
    points: list[dict[str, Any]]
    positions: list[tuple[int, ...]] | None = None
    checked: bool = False
    retry_singly: bool = True
    prepared: bool = False

    def __post_init__(self) -> None:
        if not (self.checked or self.prepared) and self.positions is None:
            raise ValueError("a ChunkTask of unchecked points needs their grid positions")


def compute_chunk(
    task: ChunkTask, base: dict[str, Any], progress: Progress | None = None
) -> ChunkResult:
    """Run ``task``'s model on ``base`` (every parameter, validated) overlaid with each point.

    ``progress``, when given, is passed to the model, which calls it with the fraction of the
    chunk's work done (the engine passes one only where the parent computes the chunk).
    """
    model_name, action, points, indices = task.model, task.action, task.points, task.indices
    positions, retry_singly = task.positions, task.retry_singly
    model_cls = get_model(model_name)
    model = model_cls()
    checker = None
    if not (task.checked or task.prepared):
        checker = PointChecker(model_cls, action, base, list(points[0]) if points else [])
    size = len(points)
    status = np.zeros(size, dtype=np.int8)
    errors: dict[int, str] = {}
    start = time.perf_counter()

    def configs(sel: list[int]) -> Batch:
        if task.prepared:  # the grid values and what their case derived, over the shared ones
            return Batch.from_points(model_cls, [{**base, **points[i]} for i in sel])
        if checker is None or positions is None:  # already checked
            return Batch.from_points(model_cls, [points[i] for i in sel])
        return Batch.from_points(model_cls, [checker.check(points[i], positions[i]) for i in sel])

    data: xr.Dataset | None
    with one_blas_thread(model_cls):
        try:
            data = model.run(action, configs(list(range(size))), progress)
        except Exception as exc:
            if size == 1 or not retry_singly:
                data = None
                status[:] = Status.ERROR
                for i in range(size):
                    errors[int(indices[i])] = _message(exc)
            else:
                singles: list[tuple[int, xr.Dataset]] = []
                for i in range(size):
                    try:
                        singles.append((i, model.run(action, configs([i]))))
                    except Exception as exc_i:
                        status[i] = Status.ERROR
                        errors[int(indices[i])] = _message(exc_i)
                data = stack_points(singles, size) if singles else None
    elapsed = np.full(size, (time.perf_counter() - start) / size)

    if data is not None:
        if "status" in data:
            model_status = np.asarray(data["status"].values, dtype=np.int8)
            diverged = (model_status == Status.DIVERGED) & (status == Status.OK)
            for i in np.flatnonzero(diverged).tolist():
                status[i] = Status.DIVERGED
                errors[int(indices[i])] = "diverged (reported by the model)"
            data = data.drop_vars("status")
        for i, name in _non_finite(data).items():
            if status[i] == Status.OK:
                status[i] = Status.DIVERGED
                errors[int(indices[i])] = f"diverged: non-finite values in {name}"
    return ChunkResult(np.asarray(indices, dtype=np.int64), data, status, elapsed, errors)


def describe_exception(exc: BaseException) -> str:
    """One line for unexpected failures, with the innermost frame."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return _message(exc) + where
