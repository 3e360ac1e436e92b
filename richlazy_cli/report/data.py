"""Result files as the report sees them: loading, masking of failed points, selections.

A result file (docs/engine.md, "Result files") holds one dimension per grid parameter (in grid
order, listed by the ``grid`` attribute), then the model's own dimensions (``time``, ``step``,
``method``, ``dim``...). ``status`` over the grid dimensions is 0 for a point that computed
normally, 1 for a diverged point, 2 for an error and -1 for a point not computed yet. The report
treats every value at a point whose status is not 0, and every non-finite value, as *missing*:
it is never drawn, interpolated or counted in a minimum or maximum.

Reductions used by the figures (never by ``summary.json``, see :mod:`.summary`):

* ``seed`` is reduced with a nan-aware mean or median, so a seed that failed at one point is
  left out at that point only; a point where every seed failed stays missing.
* every other dimension not on a figure's axes is taken at its ``--at`` value, else at its last
  value for ``step``/``time`` and at its first value for a grid dimension or ``method``;
* a model dimension that holds the components of a vector, or the members of a set (``dim``,
  ``output``, ``neuron``, ``teacher``...), is reduced to the Euclidean norm over it, which the
  caption says ("Euclidean norm over dim"): a researcher reads ``‖w‖``, not ``w_0``.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import xarray as xr

from ..errors import BadInput, Status, point_counts
from .options import Reduction

TIME_DIMS = ("step", "time")
BOOKKEEPING = ("status", "elapsed")
ECHOED = ("alpha",)
"""Variables that are functions of the parameters alone, recorded for reference."""
COMPONENT_NORM = "Euclidean norm"
REDUCTIONS = tuple(r.value for r in Reduction)


def _json_object(ds: xr.Dataset, name: str, path: Path) -> dict[str, Any]:
    """The attribute ``name`` (``grid``, ``params``) as the JSON object a result records, {}
    when absent; BadInput naming ``path`` when it is there but something else (a damaged or
    edited file: the figures would read its dimensions wrong)."""
    text = ds.attrs.get(name)
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except (TypeError, ValueError, RecursionError):
        shown = repr(text) if len(repr(text)) <= 40 else repr(text)[:37] + "..."
        raise BadInput(f"{path}: the {name} attribute is not JSON ({shown})") from None
    if not isinstance(value, dict):
        raise BadInput(f"{path}: the {name} attribute is JSON {type(value).__name__}, not an "
                       "object of names")
    return value


def open_file(path: Path) -> xr.Dataset:
    """Load a richlazy result into memory (the file is closed again); BadInput on anything else."""
    from ..engine.store import as_grid, open_result

    with warnings.catch_warnings():  # h5netcdf warns (phony_dims) on HDF5 files not ours
        warnings.simplefilter("ignore", UserWarning)
        ds = open_result(Path(path), load=True)
    try:
        return as_grid(ds)  # a shard file over the grid, other shards' points missing
    except BadInput as exc:
        raise BadInput(f"{path}: {exc}") from None


@dataclass
class ResultFile:
    """One loaded result file and what the report needs to know about it."""

    path: Path
    stem: str
    ds: xr.Dataset
    model: str
    action: str
    params: dict[str, Any]
    grid: dict[str, str]
    created: str
    ok: xr.DataArray | None = field(default=None, repr=False)

    @classmethod
    def load(cls, path: Path, stem: str | None = None) -> ResultFile:
        path = Path(path)
        ds = open_file(path)
        grid = _json_object(ds, "grid", path)
        params = _json_object(ds, "params", path)
        ok = None
        if "status" in ds.variables:  # over the grid dims; a 0-d status for a single run
            ok = ds["status"] == Status.OK
        return cls(
            path=path,
            stem=stem or path.stem,
            ds=ds,
            model=str(ds.attrs.get("model", "")),
            action=str(ds.attrs.get("action", "")),
            params=params,
            grid={str(k): str(v) for k, v in grid.items()},
            created=str(ds.attrs.get("created", "")),
            ok=ok,
        )

    # -- structure --------------------------------------------------------------------------
    @property
    def grid_dims(self) -> list[str]:
        """Grid dimensions present in the dataset, in grid order."""
        return [d for d in self.grid if d in self.ds.dims]

    @property
    def model_dims(self) -> list[str]:
        return [str(d) for d in self.ds.dims if d not in self.grid]

    def is_numeric(self, dim: str) -> bool:
        if dim not in self.ds.coords:
            return True  # a bare dimension: its index is numeric
        return bool(np.issubdtype(self.ds[dim].dtype, np.number))

    @property
    def phase_dims(self) -> list[str]:
        """Numeric grid dimensions with more than one value, ``seed`` excluded (it is reduced)."""
        return [
            d for d in self.grid_dims
            if d != "seed" and self.is_numeric(d) and self.ds.sizes[d] > 1
        ]

    def is_bookkeeping(self, name: str) -> bool:
        """Whether a variable records how the run went or echoes its set-up, not a result.

        ``status`` and ``elapsed``; a model coordinate's per-point values (``time_values``);
        a variable named like a coordinate (``time``, ``step``) or like one of the model's
        parameters (a parameter echoed as a variable, e.g. a swept ``t_max``); and
        :data:`ECHOED`, functions of the parameters alone (two-layer's layer ratio
        ``alpha(tau, delta)``). None of them is drawn unless asked for with ``--var``.
        """
        return (
            name in BOOKKEEPING
            or name.endswith("_values")
            or name in TIME_DIMS
            or name in self.ds.coords
            or name in self.params
            or name in self.grid
            or name in ECHOED
        )

    @property
    def variables(self) -> list[str]:
        """Numeric data variables that are results (see :meth:`is_bookkeeping`)."""
        return [
            str(name) for name, item in self.ds.data_vars.items()
            if not self.is_bookkeeping(str(name))
            and (np.issubdtype(item.dtype, np.number) or item.dtype == bool)
        ]

    @property
    def all_failed(self) -> bool:
        """Whether the file has grid points and not one of them computed normally."""
        counts = self.point_counts()
        return counts["total"] > 0 and counts["done"] == 0

    def time_dim(self, name: str) -> str | None:
        dims = self.ds[name].dims
        return next((d for d in TIME_DIMS if d in dims), None)

    def point_counts(self) -> dict[str, int]:
        """Points done, failed and missing (:func:`richlazy_cli.errors.point_counts`)."""
        if "status" not in self.ds.variables:
            return {"total": 0, "done": 0, "failed": 0, "missing": 0}
        return point_counts(self.ds["status"].values)

    # -- data -------------------------------------------------------------------------------
    def masked(self, name: str) -> xr.DataArray:
        """``name`` as float with NaN at failed or missing points and at non-finite values."""
        da = self.ds[name]
        if da.dtype == bool:
            da = da.astype(float)
        da = da.astype(float) if not np.issubdtype(da.dtype, np.floating) else da
        if self.ok is not None and set(self.ok.dims) <= set(da.dims):
            da = da.where(self.ok)
        return da.where(np.isfinite(da))


def label(item: xr.DataArray | xr.Variable, fallback: str, math: bool = False) -> str:
    """``long_name [units]`` (or the name alone) for an axis, a colour bar or a caption.

    With ``math`` (axes and colour bars), plain-text mathematics in the long name is typeset
    (:func:`..mathtext.to_mathtext`) and a name that is a Greek letter leads as its symbol:
    ``$\\tau$: overall scale ...``.
    """
    from ..mathtext import symbol, to_mathtext

    name = str(item.attrs.get("long_name") or fallback)
    units = str(item.attrs.get("units") or "")
    if math:
        sym = symbol(fallback)
        name = to_mathtext(name)
        if sym is not None:
            name = sym if name == fallback else f"{sym}: {name}"
    return f"{name} [{units}]" if units and units not in ("1", "") else name


def format_value(value: Any) -> str:
    if isinstance(value, float | np.floating):
        return f"{float(value):.4g}"
    if isinstance(value, np.generic):
        return str(value.item())
    return str(value)


# -- --at selections ------------------------------------------------------------------------
def match_coord(rf: ResultFile, dim: str, text: str) -> int:
    """Index of the coordinate value of ``dim`` written as ``text`` (float tolerance)."""
    values = rf.ds[dim].values if dim in rf.ds.coords else np.arange(rf.ds.sizes[dim])
    where = f"--at {dim}={text}"
    if np.issubdtype(values.dtype, np.number):
        try:
            target = float(text)
        except ValueError:
            raise BadInput(f"{where}: {text!r} is not a number") from None
        hits = np.flatnonzero(np.isclose(values.astype(float), target, rtol=1e-6, atol=1e-12))
    else:
        hits = np.flatnonzero(values.astype(str) == text.strip())
    if hits.size == 0:
        shown = ", ".join(format_value(v) for v in values[:12])
        more = ", ..." if values.size > 12 else ""
        raise BadInput(f"{where}: not on the grid of {rf.path.name} ({dim} = {shown}{more})")
    return int(hits[0])


def resolve_at(rf: ResultFile, at: dict[str, str]) -> dict[str, int]:
    """The ``--at`` selections that apply to this file, as indices (dims it lacks are skipped)."""
    return {dim: match_coord(rf, dim, text) for dim, text in at.items() if dim in rf.ds.dims}


def reduce_seed(da: xr.DataArray, how: str) -> xr.DataArray:
    """Nan-aware mean or median over ``seed``; all-NaN stays NaN (missing)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if how == "median":
            return da.median("seed", skipna=True, keep_attrs=True)
        return da.mean("seed", skipna=True, keep_attrs=True)


def select(
    rf: ResultFile,
    da: xr.DataArray,
    keep: tuple[str, ...],
    at: dict[str, int],
    reduce: str | None,
) -> tuple[xr.DataArray, list[str]]:
    """Reduce ``da`` to the dimensions in ``keep``; returns it and notes for the caption.

    ``seed`` is reduced with ``reduce`` (or kept if ``reduce`` is None or it is in ``keep``)
    unless ``--at seed=...`` picks one; see the module docstring for the other dimensions.
    """
    notes: list[str] = []
    for dim in [str(d) for d in da.dims if d not in keep]:
        if dim in at:
            da = da.isel({dim: at[dim]})
            notes.append(f"{dim} = {format_value(da[dim].values) if dim in da.coords else at[dim]}")
        elif dim == "seed":
            if reduce is None:
                continue
            n = da.sizes["seed"]
            da = reduce_seed(da, reduce)
            notes.append(f"{reduce} over {n} seed{'s' if n != 1 else ''}")
        elif dim in TIME_DIMS or dim in rf.grid or dim == "method":
            index = -1 if dim in TIME_DIMS else 0
            da = da.isel({dim: index})
            value = format_value(da[dim].values) if dim in da.coords else str(index)
            notes.append(f"{dim} = {value}" + (" (last)" if index == -1 else ""))
        else:  # a model dimension of a vector or set (dim, output, neuron): its norm
            attrs = dict(da.attrs)
            # NumPy's ufunc gives a DataArray back (__array_ufunc__); its stubs say ndarray
            da = cast(xr.DataArray, np.sqrt((da * da).sum(dim, skipna=False)))
            da.attrs = attrs
            notes.append(f"{COMPONENT_NORM} over {dim}")
    return da, notes


def is_log_spaced(rf: ResultFile, dim: str) -> bool:
    """Whether ``dim`` deserves a logarithmic axis.

    The coordinate's ``spacing`` attribute decides when it is ``log`` or ``linear``. Otherwise
    (``list`` or no attribute) the values decide: distinct positive values (a leading 0 aside),
    at least three, spanning at least a decade, whose consecutive ratios differ by at most a
    factor 2 in log space (``max Δlog v / min Δlog v <= 2``). This accepts integer-rounded
    geometric checkpoints (0, 1, 2, 4, 7, 13, 24, ...) and lists such as 10, 20, 50, 100, and
    rejects arithmetic sequences spanning a decade (whose ratio of log-steps is >= 6). A
    ``list`` spanning three decades or more also counts.
    """
    if dim not in rf.ds.coords or not rf.is_numeric(dim):
        return False
    coord = rf.ds[dim]
    spacing = str(coord.attrs.get("spacing", ""))
    if spacing == "log":
        return True
    if spacing == "linear":
        return False
    values = np.unique(np.asarray(coord.values, dtype=float))
    if values.size and values[0] == 0:
        values = values[1:]
    if values.size < 3 or values[0] <= 0 or not np.all(np.isfinite(values)):
        return False
    span = values[-1] / values[0]
    if span < 10:
        return False
    steps = np.diff(np.log(values))
    if steps.max() <= 2.0 * steps.min():
        return True
    return spacing == "list" and span >= 1e3
