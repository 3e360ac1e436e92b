"""Per-variable extremes for ``summary.json`` and the terminal table.

Definition (what ``summary.json`` reports for each variable of each input file): ``min`` and
``max`` are taken over **every element of the variable** (all grid points, every seed, every
model dimension such as ``step`` or ``method``; no seed reduction, no ``--at`` selection), after
removing the values at points whose ``status`` is not 0 and every non-finite value. This is
``ds[v].where(ds.status == Status.OK)`` followed by a nan-aware ``min``/``max`` in xarray.
``argmin``/``argmax`` give the coordinate value of every dimension of the variable at the first
occurrence of the extreme in C (row-major) order; a dimension without a coordinate gives its
integer index. A variable without any valid value gets ``null`` for all four.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from rich.table import Table

from .data import ResultFile, format_value


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    return value


def variable_stats(rf: ResultFile, name: str) -> dict[str, Any]:
    """min, max, argmin, argmax of a variable (see the module docstring), plus its labels."""
    da = rf.masked(name)
    values = np.asarray(da.values, dtype=float)
    out: dict[str, Any] = {
        "min": None, "max": None, "argmin": None, "argmax": None,
        "long_name": str(rf.ds[name].attrs.get("long_name", "")),
        "units": str(rf.ds[name].attrs.get("units", "")),
    }
    if not np.any(np.isfinite(values)):
        return out
    flat = values.reshape(-1) if values.ndim else values.reshape(1)
    for key, pick in (("min", np.nanargmin), ("max", np.nanargmax)):
        i = int(pick(flat))
        index = np.unravel_index(i, values.shape) if values.ndim else ()
        out[key] = float(flat[i])
        out["arg" + key] = {
            str(dim): _plain(da[dim].values[j]) if dim in da.coords else int(j)
            for dim, j in zip(da.dims, index, strict=True)
        }
    return out


def _where(arg: dict[str, Any] | None) -> str:
    if not arg:
        return ""
    return ", ".join(f"{k}={format_value(v)}" for k, v in arg.items())


def summary_table(summary: dict[str, Any]) -> Table:
    """A rich table of every variable's min and max and where they occur."""
    table = Table(title="richlazy report", title_justify="left")
    for column in ("file", "variable", "min", "at", "max", "at"):
        table.add_column(column, no_wrap=column in ("file", "variable"))
    for stem, variables in summary.get("variables", {}).items():
        for name, stats in variables.items():
            units = f" {stats['units']}" if stats.get("units") else ""
            lo = "—" if stats["min"] is None else f"{stats['min']:.4g}{units}"
            hi = "—" if stats["max"] is None else f"{stats['max']:.4g}{units}"
            table.add_row(stem, name, lo, _where(stats["argmin"]), hi, _where(stats["argmax"]))
    return table
