"""Assembling chunk results into one labelled Dataset over the grid, and merging shards.

The result has one dimension per grid parameter, in grid order, whose coordinate holds exactly
the grid values, then the model's own dimensions. ``status`` (int8: 0 ok, 1 diverged, 2 error,
-1 not computed) and ``elapsed`` (seconds) are over the grid dimensions. Points not computed
hold NaN (integers -1). A model coordinate that differs between grid points (because it depends
on a gridded parameter, e.g. ``time`` when ``t_max`` is swept) becomes an integer index, and
its values are kept in a variable ``<dim>_values`` over the grid dimensions and that dimension.

The whole result is held in memory once. Before the first chunk's arrays are allocated over the
grid, their size (the chunk's bytes per point times the grid's points) is compared with the
machine's physical memory, and a result that cannot fit is refused (BadInput) instead of
failing later with MemoryError or the kernel's OOM killer.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

import numpy as np
import xarray as xr

from ..errors import Status
from ..models.base import Model
from ..models.params import BadInput, jsonable
from .chunk import ChunkResult, _fill_value
from .grid import Grid
from .store import json_attr


def _as_slice(indices: np.ndarray) -> np.ndarray | slice:
    """``indices`` as a slice when they are a contiguous ascending run (copies are faster)."""
    if indices.size and indices[-1] - indices[0] + 1 == indices.size:
        if indices.size == 1 or bool(np.all(np.diff(indices) == 1)):
            return slice(int(indices[0]), int(indices[-1]) + 1)
    return indices


class Assembler:
    """Collects :class:`ChunkResult` objects into preallocated grid-shaped arrays."""

    def __init__(self, model: type[Model], grid: Grid) -> None:
        self.model = model
        self.grid = grid
        self.size = max(grid.size, 1)
        self.status = np.full(self.size, Status.MISSING, dtype=np.int8)
        self.elapsed = np.full(self.size, np.nan)
        self.errors: dict[int, str] = {}
        self.arrays: dict[str, np.ndarray] = {}  # filled where `has_data`, else at the end
        self.has_data = np.zeros(self.size, dtype=bool)
        self.var_dims: dict[str, tuple[str, ...]] = {}
        self.var_attrs: dict[str, dict[str, Any]] = {}
        self.coords: dict[str, xr.Variable] = {}
        self.point_coords: dict[str, np.ndarray] = {}  # dim -> (size, n) values per point
        self.ds_attrs: dict[str, Any] = {}

    # -- collecting -----------------------------------------------------------------------
    def add(self, result: ChunkResult) -> None:
        idx = _as_slice(result.indices)
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
            for name, item in data.coords.items():
                self.coords[name] = item.variable
        for name, item in data.coords.items():
            self._check_coord(str(name), item.variable, idx)
        for name, item in data.data_vars.items():
            if item.dims[0] != "point":
                raise RuntimeError(f"model variable {name} does not start with dimension point")
            if name not in self.arrays:
                shape = (self.size, *item.shape[1:])
                self.arrays[name] = np.empty(shape, dtype=item.dtype)
                self.arrays[name][self.has_data] = _fill_value(item.dtype)  # points without it
                self.var_dims[name] = tuple(item.dims[1:])
                self.var_attrs[name] = dict(item.attrs)
            target = self.arrays[name]
            if target.shape[1:] != item.shape[1:]:
                raise BadInput(
                    f"variable {name} changes shape between grid points "
                    f"({target.shape[1:]} vs {item.shape[1:]}); "
                    "grid over a parameter that sets a model dimension in separate sweeps"
                )
            target[idx] = item.values
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
        need = self.size * (per_point + 9)  # + status (1 byte) and elapsed (8)
        have = physical_memory()
        if have and need > have:
            raise BadInput(
                f"the result would take {need / 1e9:.3g} GB in memory ({self.size:,} points x "
                f"{per_point:,.0f} bytes), more than this machine's {have / 1e9:.3g} GB; "
                "split the grid into shards (--shard) or sweeps"
            )

    def _check_coord(self, name: str, var: xr.Variable, idx: np.ndarray | slice) -> None:
        known = self.coords.get(name)
        if known is None:
            self.coords[name] = var
            return
        same = known.shape == var.shape and np.array_equal(known.values, var.values)
        if same and name not in self.point_coords:
            return
        if known.ndim != 1 or known.shape != var.shape:
            raise BadInput(
                f"model dimension {name} changes length between grid points; "
                "grid over the parameter that sets it in separate sweeps"
            )
        values = self.point_coords.get(name)
        if values is None:  # first difference: earlier points all had `known`
            kind = known.dtype if known.dtype.kind in "fc" else object
            values = np.full((self.size, known.shape[0]), _fill_value(np.dtype(kind)), kind)
            if kind is object:
                values[:] = ""
            values[self.status >= 0] = known.values
            self.point_coords[name] = values
        values[idx] = var.values

    # -- output ---------------------------------------------------------------------------
    def dataset(self, attrs: dict[str, Any]) -> xr.Dataset:
        grid_names = self.grid.names
        gshape = self.grid.shape
        coords: dict[str, Any] = {}
        for dim in self.grid.dims:
            p = self.model.param(dim.name)
            cattrs = {"long_name": p.help, "spacing": dim.spacing, "grid_spec": dim.spec}
            if p.unit:
                cattrs["units"] = p.unit
            coords[dim.name] = xr.Variable((dim.name,), dim.coordinate(), cattrs)
        for name, var in self.coords.items():
            if name in self.point_coords:
                n = var.shape[0]
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
            dims = grid_names + self.var_dims[name]
            data_vars[name] = xr.Variable(
                dims, arr.reshape(gshape + arr.shape[1:]), self.var_attrs[name]
            )
        for name, values in self.point_coords.items():
            var = self.coords[name]
            data_vars[f"{name}_values"] = xr.Variable(
                (*grid_names, name), values.reshape(gshape + values.shape[1:]), dict(var.attrs)
            )
        data_vars["status"] = xr.Variable(
            grid_names,
            self.status.reshape(gshape),
            {
                "long_name": "point status",
                "flag_values": np.array([-1, 0, 1, 2], dtype=np.int8),
                "flag_meanings": "not_computed ok diverged error",
            },
        )
        data_vars["elapsed"] = xr.Variable(
            grid_names,
            self.elapsed.reshape(gshape),
            {"long_name": "compute time per point (chunk wall time / points)", "units": "s"},
        )
        out_attrs = dict(self.ds_attrs)
        out_attrs.update(attrs)
        out_attrs["errors"] = json.dumps(self.error_list())
        out_attrs["complete"] = int(bool(np.all(self.status >= 0)))
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


def physical_memory() -> int:
    """Bytes of physical memory (0 when unknown)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


def result_as_chunk(ds: xr.Dataset, grid: Grid) -> ChunkResult:
    """The computed points of an assembled result file, as one :class:`ChunkResult`."""
    names = list(grid.names)
    status = np.asarray(ds["status"].values).reshape(-1)
    done = np.flatnonzero(status >= 0)
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
        stacked = (
            ds[model_vars].stack(point=names) if names else ds[model_vars].expand_dims("point")
        )
        stacked = stacked.drop_vars([*names, "point"], errors="ignore")
        stacked = stacked.transpose("point", ...)
        data = stacked.isel(point=done)
        data = xr.Dataset(
            {k: (v.dims, v.values, v.attrs) for k, v in data.data_vars.items()},
            coords={k: v for k, v in data.coords.items() if k not in names},
            attrs={},
        )
    elapsed = np.asarray(ds["elapsed"].values).reshape(-1)[done]
    return ChunkResult(
        done,
        data,
        status[done],
        elapsed,
        {i: m for i, m in errors.items() if i in set(done.tolist())},
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
    """Assemble chunks from several shards, refusing points computed twice with other data."""
    assembler = Assembler(model, grid)
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
        for name, item in chunk.data.data_vars.items():
            mine = assembler.arrays.get(name)
            if mine is None or not np.array_equal(mine[i], item.values[k], equal_nan=True):
                raise BadInput(f"conflicting results for point {grid.label(int(i))} in {name}")
