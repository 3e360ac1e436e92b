"""Assembling chunks into grid arrays, and the non-finite test of chunk outputs."""

from __future__ import annotations

import numpy as np
import xarray as xr

from richlazy_cli.engine.assemble import Assembler
from richlazy_cli.engine.chunk import ChunkResult, _non_finite
from richlazy_cli.engine.grid import parse_grid
from richlazy_cli.models.single_neuron.model import SingleNeuron


def chunk(indices: list[int], data: dict[str, np.ndarray] | None, status: int = 0) -> ChunkResult:
    n = len(indices)
    ds = None
    if data is not None:
        ds = xr.Dataset({k: (("point", "time"), v) for k, v in data.items()})
    return ChunkResult(
        np.asarray(indices, dtype=np.int64),
        ds,
        np.full(n, status, dtype=np.int8),
        np.zeros(n),
        {i: "failed" for i in indices} if status else {},
    )


def test_points_without_data_hold_nan() -> None:
    grid = parse_grid(SingleNeuron, [("delta", "1,2,3,4,5")])
    asm = Assembler(SingleNeuron, grid)
    asm.add(chunk([0, 1], {"x": np.ones((2, 3))}))
    asm.add(chunk([3, 2], {"x": np.full((2, 3), 2.0), "y": np.full((2, 3), 5.0)}))
    asm.add(chunk([1], None, status=2))  # a retried point whose chunk failed as a whole
    ds = asm.dataset({})
    x, y = ds["x"].values, ds["y"].values
    np.testing.assert_array_equal(x[0], 1.0)
    assert np.isnan(x[1]).all()  # the stale data of point 1 is gone
    np.testing.assert_array_equal(x[2:4], 2.0)
    assert np.isnan(x[4]).all()  # never computed
    assert np.isnan(y[:2]).all() and np.isnan(y[4]).all()  # points computed before y appeared
    np.testing.assert_array_equal(y[2:4], 5.0)
    np.testing.assert_array_equal(ds["status"].values, [0, 2, 0, 0, -1])


def test_non_finite_rows_are_found_exactly() -> None:
    big = np.finfo(float).max
    values = np.array(
        [
            [1.0, 2.0, 3.0],
            [big, big, 0.0],  # finite, but its sum overflows
            [1.0, np.nan, 0.0],
            [np.inf, -np.inf, 0.0],  # inf - inf: the sum is NaN
            [-big, -big, 1.0],
        ]
    )
    ds = xr.Dataset({"v": (("point", "t"), values), "w": (("point", "t"), np.ones((5, 3)))})
    assert _non_finite(ds) == {2: "v", 3: "v"}
    ds["w"].attrs["nan_meaning"] = "undefined"
    ds["w"][:] = np.nan
    assert _non_finite(ds) == {2: "v", 3: "v"}
