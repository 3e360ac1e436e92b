"""Assembling chunk results into one labelled Dataset over the grid, and merging shards.

The result has one dimension per grid parameter, in grid order, whose coordinate holds exactly
the grid values, then the model's own dimensions. ``status`` (int8: 0 ok, 1 diverged, 2 error,
-1 not computed) and ``elapsed`` (seconds) are over the grid dimensions. Points not computed
hold NaN (integers -1). A model coordinate that differs between grid points (because it depends
on a gridded parameter, e.g. ``time`` when ``t_max`` is swept) becomes an integer index, and
its values are kept in a variable ``<dim>_values`` over the grid dimensions and that dimension.

A swept parameter may change the length of a model dimension (two-layer's input dimension
``d``, a number of output times): each such variable is laid out at the largest length over
the grid, a point's values fill its own length and the rest holds the fill value (NaN,
integers -1), and the variable's ``padding`` attribute names the dimensions padded so
(docs/engine.md, "Grids that change an output's shape"). A coordinate of such a dimension
keeps the longest values when the shorter ones are its beginning, and becomes an index with
``<dim>_values`` otherwise. A change in the number of a variable's dimensions is refused.

The whole result is held in memory once. Before the first chunk's arrays are allocated over the
grid, their size (the chunk's bytes per point times the points) is compared with the limit on
a result's bytes and with the machine's physical memory (:mod:`.footprint`), and a result
that cannot fit is refused (BadInput) instead of failing later with MemoryError or the
kernel's OOM killer. (A model that declares its outputs' size is checked before anything
runs.)
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import numpy as np
import xarray as xr

from ..errors import BadInput, Status, point_counts
from ..models.base import Model
from ..params import jsonable
from .chunk import ChunkResult, _fill_value
from .footprint import DEFAULT_MAX_BYTES, OutputSize, overhead
from .grid import Grid
from .store import POINT, grid_status, is_shard_layout, json_attr, shard_points

NO_LIMIT = 2**63
"""A limit on a result's bytes that never binds (a merge: its shards were already accepted)."""


def _as_slice(indices: np.ndarray) -> np.ndarray | slice:
    """``indices`` as a slice when they are a contiguous ascending run (copies are faster)."""
    if indices.size and indices[-1] - indices[0] + 1 == indices.size:
        if indices.size == 1 or bool(np.all(np.diff(indices) == 1)):
            return slice(int(indices[0]), int(indices[-1]) + 1)
    return indices


class Assembler:
    """Collects :class:`ChunkResult` objects into preallocated arrays over the selected points.

    Without ``selected`` the arrays span the whole grid and :meth:`dataset` lays them out over
    the grid dimensions. With ``selected`` (a shard's flat indices, increasing) they span only
    those points, and :meth:`dataset` writes a shard file: variables over ``point``, whose
    coordinate holds the flat grid indices (docs/engine.md, "Shard files").
    """

    def __init__(
        self,
        model: type[Model],
        grid: Grid,
        selected: np.ndarray | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.model = model
        self.max_bytes = max_bytes
        self.grid = grid
        self.grid_size = max(grid.size, 1)
        self.selected = None if selected is None else np.asarray(selected, dtype=np.int64)
        self.size = self.grid_size if self.selected is None else int(self.selected.size)
        self.status = np.full(self.size, Status.MISSING, dtype=np.int8)
        self.elapsed = np.full(self.size, np.nan)
        self.errors: dict[int, str] = {}
        self.arrays: dict[str, np.ndarray] = {}  # filled where `has_data`, else at the end
        self.has_data = np.zeros(self.size, dtype=bool)
        self.var_dims: dict[str, tuple[str, ...]] = {}
        self.var_attrs: dict[str, dict[str, Any]] = {}
        self.coords: dict[str, xr.Variable] = {}
        self.point_coords: dict[str, np.ndarray] = {}  # dim -> (size, n) values per point
        self.padded: dict[str, set[str]] = {}  # variable -> dimensions padded to the longest
        self.ds_attrs: dict[str, Any] = {}

    # -- collecting -----------------------------------------------------------------------
    def locate(self, indices: np.ndarray) -> np.ndarray:
        """Positions in the arrays of the points with flat grid indices ``indices``."""
        indices = np.asarray(indices, dtype=np.int64)
        if self.selected is None:
            return indices
        at = np.searchsorted(self.selected, indices)
        if indices.size and (
            at.max() >= self.size or not np.array_equal(self.selected[at], indices)
        ):
            raise RuntimeError("a chunk holds points outside the assembler's selection")
        return at

    def counts(self) -> dict[str, int]:
        """Points done, failed, missing and in total, over the whole grid (a shard's other
        points are missing)."""
        counts = point_counts(self.status)
        outside = self.grid_size - self.size
        counts["total"] += outside
        counts["missing"] += outside
        return counts

    def add(self, result: ChunkResult) -> None:
        idx = _as_slice(self.locate(result.indices))
        self.status[idx] = result.status
        self.elapsed[idx] = result.elapsed
        for i in result.indices.tolist():
            self.errors.pop(i, None)
        self.errors.update(result.errors)
        if result.data is not None:
            self._add_data(idx, result.data)
        else:  # every point of the chunk failed: whatever an earlier part had is stale
            self.has_data[idx] = False

    def _add_data(self, idx: np.ndarray | slice, data: xr.Dataset) -> None:
        if not self.arrays:
            self._check_first(data)
            self.ds_attrs = dict(data.attrs)
            for key, item in data.coords.items():
                self.coords[str(key)] = item.variable
        for key, item in data.coords.items():
            self._check_coord(str(key), item.variable, idx)
        for key, item in data.data_vars.items():
            name = str(key)
            if item.dims[0] != "point":
                raise RuntimeError(f"model variable {name} does not start with dimension point")
            if name not in self.arrays:
                shape = (self.size, *item.shape[1:])
                self.arrays[name] = np.empty(shape, dtype=item.dtype)
                self.arrays[name][self.has_data] = _fill_value(item.dtype)  # points without it
                self.var_dims[name] = tuple(str(dim) for dim in item.dims[1:])
                self.var_attrs[name] = dict(item.attrs)
            target = self.arrays[name]
            values = item.values
            if target.shape[1:] != values.shape[1:]:
                if target.ndim != values.ndim:
                    raise BadInput(
                        f"variable {name} changes its number of dimensions between grid points "
                        f"({target.shape[1:]} vs {values.shape[1:]}); grid over that parameter "
                        "in separate sweeps"
                    )
                dims = self.var_dims[name]
                self.padded.setdefault(name, set()).update(
                    d for d, a, b in zip(dims, target.shape[1:], values.shape[1:], strict=True)
                    if a != b)
                longest = tuple(max(a, b) for a, b in zip(target.shape[1:], values.shape[1:],
                                                          strict=True))
                if longest != target.shape[1:]:
                    target = self.arrays[name] = _padded(target, longest)
                values = _padded(values, longest)
            target[idx] = values
        self.has_data[idx] = True

    def _check_first(self, data: xr.Dataset) -> None:
        """Refuse a grid whose names clash with the model's dimensions, or too large a result."""
        own = {str(d) for d in data.dims if d != "point"} | {str(c) for c in data.coords}
        clash = sorted(own & set(self.grid.names))
        if clash:
            raise BadInput(
                f"grid dimension {clash[0]} is also a dimension of the model's output; "
                f"run one sweep per value of {clash[0]} instead"
            )
        points = max(int(data.sizes.get("point", 1)), 1)
        per_point = sum(item.nbytes for item in data.data_vars.values()) / points
        per_point += overhead(self.selected is not None)
        OutputSize(self.size * per_point, self.size, "measured on the first chunk").check(
            self.max_bytes
        )

    def _check_coord(self, name: str, var: xr.Variable, idx: np.ndarray | slice) -> None:
        known = self.coords.get(name)
        if known is None:
            self.coords[name] = var
            return
        same = known.shape == var.shape and np.array_equal(known.values, var.values)
        if same and name not in self.point_coords:
            return
        if known.ndim != 1 or var.ndim != 1:
            raise BadInput(
                f"model dimension {name} changes between grid points in a way that cannot be "
                "laid out over the grid; grid over the parameter that sets it in separate sweeps"
            )
        if name not in self.point_coords and known.shape != var.shape:
            longer, shorter = (known, var) if known.shape[0] > var.shape[0] else (var, known)
            if np.array_equal(longer.values[: shorter.shape[0]], shorter.values):
                self.coords[name] = longer  # the shorter coordinates are its beginning
                return
        values = self.point_coords.get(name)
        if values is None:  # first difference: earlier points all had `known`
            kind = known.dtype if known.dtype.kind in "fci" else object
            values = np.full((self.size, known.shape[0]), _fill_value(np.dtype(kind)), kind)
            if kind is object:
                values[:] = ""
            values[self.status != Status.MISSING] = known.values
            self.point_coords[name] = values
        longest = max(values.shape[1], var.shape[0])
        if longest > values.shape[1]:
            values = self.point_coords[name] = _padded(values, (longest,))
        values[idx] = _padded(np.asarray(var.values)[None], (longest,))[0]
        if var.shape[0] > self.coords[name].shape[0]:
            self.coords[name] = var


    # -- output ---------------------------------------------------------------------------
    def dataset(self, attrs: dict[str, Any]) -> xr.Dataset:
        """The result: over the grid dimensions, or over ``point`` for a selection."""
        grid_names = self.grid.names
        gshape = self.grid.shape
        sharded = self.selected is not None
        point_dims: tuple[str, ...] = (POINT,) if sharded else grid_names

        def over_points(arr: np.ndarray) -> np.ndarray:
            return arr if sharded else arr.reshape(gshape + arr.shape[1:])

        coords: dict[str, Any] = {}
        for dim in self.grid.dims:
            p = self.model.param(dim.name)
            cattrs = {"long_name": p.help, "spacing": dim.spacing, "grid_spec": dim.spec}
            if p.unit:
                cattrs["units"] = p.unit
            coords[dim.name] = xr.Variable((dim.name,), dim.coordinate(), cattrs)
        if sharded:
            coords[POINT] = xr.Variable(
                (POINT,),
                self.selected,
                {"long_name": "flat index of the point in the grid (C order over the grid "
                              "dimensions)"},
            )
        for name, var in self.coords.items():
            if name in self.point_coords:
                n = self.point_coords[name].shape[1]
                coords[name] = xr.Variable(
                    (name,), np.arange(n), {"long_name": f"index along {name}"}
                )
            else:
                coords[name] = var
        data_vars: dict[str, xr.Variable] = {}
        missing = ~self.has_data
        fill = bool(missing.any())
        for name, arr in self.arrays.items():
            if fill:  # points not computed, or whose whole chunk failed
                arr[missing] = _fill_value(arr.dtype)
            dims = point_dims + self.var_dims[name]
            var_attrs = dict(self.var_attrs[name])
            if self.padded.get(name):
                var_attrs["padding"] = (
                    f"{_fill_value(arr.dtype)} beyond each point's own length along "
                    f"{', '.join(sorted(self.padded[name]))} (set by a swept parameter)")
            data_vars[name] = xr.Variable(dims, over_points(arr), var_attrs)
        for name, values in self.point_coords.items():
            var = self.coords[name]
            data_vars[f"{name}_values"] = xr.Variable(
                (*point_dims, name), over_points(values), dict(var.attrs)
            )
        data_vars["status"] = xr.Variable(
            point_dims,
            over_points(self.status),
            {
                "long_name": "point status",
                "flag_values": np.array([-1, 0, 1, 2], dtype=np.int8),
                "flag_meanings": "not_computed ok diverged error",
            },
        )
        data_vars["elapsed"] = xr.Variable(
            point_dims,
            over_points(self.elapsed),
            {"long_name": "compute time per point (chunk wall time / points)", "units": "s"},
        )
        out_attrs = dict(self.ds_attrs)
        out_attrs.update(attrs)
        out_attrs["errors"] = json.dumps(self.error_list())
        out_attrs["complete"] = int(self.counts()["missing"] == 0)
        return xr.Dataset(data_vars, coords=coords, attrs=out_attrs)

    def error_list(self) -> list[dict[str, Any]]:
        return [
            {
                "point": self.grid.label(i),
                "status": int(self.status[i]),
                "message": msg,
            }
            for i, msg in sorted(self.errors.items())
        ]

    def failures(self) -> list[dict[str, Any]]:
        return [e for e in self.error_list() if e["status"] in (1, 2)]


def _padded(values: np.ndarray, trailing: tuple[int, ...]) -> np.ndarray:
    """``values`` (points first) with its trailing axes extended to ``trailing``, the new
    entries holding the fill value of its dtype (NaN, integers -1)."""
    if values.shape[1:] == trailing:
        return values
    kind = values.dtype
    if kind.kind in "US":  # strings: wide enough for the longest
        kind = np.dtype(object)
    out = np.full((values.shape[0], *trailing), _fill_value(kind), dtype=kind)
    out[(slice(None), *(slice(0, n) for n in values.shape[1:]))] = values
    return out


def result_as_chunk(ds: xr.Dataset, grid: Grid) -> ChunkResult:
    """The computed points of a result file (either layout), as one :class:`ChunkResult`.

    BadInput when the file's status does not fit ``grid``.
    """
    names = list(grid.names)
    size = max(grid.size, 1)
    sharded = is_shard_layout(ds)
    if sharded:
        if tuple(int(ds.sizes.get(n, -1)) for n in names) != grid.shape:
            raise BadInput("the grid dimensions do not match the grid")
        points = shard_points(ds, size)
        status = np.asarray(ds["status"].values, dtype=np.int8)
        kept = np.flatnonzero(status != Status.MISSING)
        done = points[kept]
    else:
        status = grid_status(ds)
        if status.size != size:
            raise BadInput("the status array does not match the grid")
        kept = done = np.flatnonzero(status != Status.MISSING)
    errors: dict[int, str] = {}
    for entry in json_attr(ds, "errors", []) or []:
        index = _flat_index(grid, entry.get("point", {}))
        if index is not None:
            errors[index] = str(entry.get("message", ""))
    model_vars = [
        v for v in ds.data_vars if v not in ("status", "elapsed") and not str(v).endswith("_values")
    ]
    data = None
    if model_vars and done.size:
        if sharded:
            stacked = ds[model_vars].drop_vars([*names, POINT], errors="ignore")
        elif names:
            stacked = ds[model_vars].stack(point=names).drop_vars([*names, "point"],
                                                                  errors="ignore")
        else:
            stacked = ds[model_vars].expand_dims("point")
        stacked = stacked.transpose("point", ...)
        data = stacked.isel(point=kept)
        data = xr.Dataset(
            {k: (v.dims, v.values, v.attrs) for k, v in data.data_vars.items()},
            coords={k: v for k, v in data.coords.items() if k not in names},
            attrs={},
        )
    elapsed = np.asarray(ds["elapsed"].values).reshape(-1)[kept]
    wanted = set(done.tolist())
    return ChunkResult(
        done,
        data,
        status.reshape(-1)[kept] if sharded else status[done],
        elapsed,
        {i: m for i, m in errors.items() if i in wanted},
    )


def _flat_index(grid: Grid, label: dict[str, Any]) -> int | None:
    if not grid.dims:
        return 0
    index = []
    for dim in grid.dims:
        if dim.name not in label:
            return None
        want = json.dumps(label[dim.name])
        keys = [json.dumps(jsonable(v)) for v in dim.values]
        if want not in keys:
            return None
        index.append(keys.index(want))
    return int(np.ravel_multi_index(index, grid.shape))


def merge_chunks(model: type[Model], grid: Grid, chunks: Iterable[ChunkResult]) -> Assembler:
    """Assemble chunks from several shards, refusing points computed twice with other data.

    The merged result is as large as the shards together: only the machine's memory limits it.
    """
    assembler = Assembler(model, grid, max_bytes=NO_LIMIT)
    for chunk in chunks:
        overlap = chunk.indices[assembler.status[chunk.indices] >= 0]
        if overlap.size:
            _check_agreement(assembler, chunk, overlap, grid)
        assembler.add(chunk)
    return assembler


def _check_agreement(
    assembler: Assembler, chunk: ChunkResult, overlap: np.ndarray, grid: Grid
) -> None:
    pos = {int(i): k for k, i in enumerate(chunk.indices)}
    for i in overlap:
        k = pos[int(i)]
        if assembler.status[i] != chunk.status[k]:
            raise BadInput(f"conflicting results for point {grid.label(int(i))}")
        if chunk.data is None:
            continue
        for key, item in chunk.data.data_vars.items():
            mine = assembler.arrays.get(str(key))
            theirs = item.values[k : k + 1]
            if mine is not None and mine.ndim == theirs.ndim:
                longest = tuple(max(a, b) for a, b in zip(mine.shape[1:], theirs.shape[1:],
                                                          strict=True))
                same = np.array_equal(_padded(mine[i : i + 1], longest),
                                      _padded(theirs, longest), equal_nan=True)
            else:
                same = False
            if not same:
                raise BadInput(f"conflicting results for point {grid.label(int(i))} in {key}")
